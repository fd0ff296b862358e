//! How a figure is shown: three significant figures, with an SI suffix for rates and a unit for times
//! (STYLE.md: numbers in tables aligned, with units, 3 significant figures). The one home of these rules
//! for every table, progress line and verdict sentence.

/// Three significant figures.
pub fn sig3(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    let decimals = (2 - mag).max(0) as usize;
    format!("{x:.decimals$}")
}

/// A rate with a unit: 1.23M, 456k.
pub fn rate(x: f64) -> String {
    if x >= 1e6 {
        format!("{}M", sig3(x / 1e6))
    } else if x >= 1e3 {
        format!("{}k", sig3(x / 1e3))
    } else {
        sig3(x)
    }
}

/// A duration in ns with a unit.
pub fn ns(x: f64) -> String {
    if x >= 1e9 {
        format!("{}s", sig3(x / 1e9))
    } else if x >= 1e6 {
        format!("{}ms", sig3(x / 1e6))
    } else if x >= 1e3 {
        format!("{}µs", sig3(x / 1e3))
    } else {
        format!("{}ns", sig3(x))
    }
}

/// An age in seconds, short: `45s`, `12m`, `5.0h`, `3.2d`.
pub fn age(age_s: i64) -> String {
    let a = age_s.unsigned_abs() as f64;
    let sign = if age_s < 0 { "-" } else { "" };
    if a < 60.0 {
        format!("{sign}{a:.0}s")
    } else if a < 3600.0 {
        format!("{sign}{:.0}m", a / 60.0)
    } else if a < 86_400.0 {
        format!("{sign}{:.1}h", a / 3600.0)
    } else {
        format!("{sign}{:.1}d", a / 86_400.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_figures_with_units() {
        assert_eq!(sig3(1234.5), "1234");
        assert_eq!(sig3(12.345), "12.3");
        assert_eq!(sig3(0.012345), "0.0123");
        assert_eq!(sig3(0.0), "0");
        assert_eq!(rate(1_234_567.0), "1.23M");
        assert_eq!(rate(45_600.0), "45.6k");
        assert_eq!(ns(1500.0), "1.50µs");
        assert_eq!(ns(12.0), "12.0ns");
        assert_eq!(age(30), "30s");
        assert_eq!(age(3 * 86_400 + 43_200), "3.5d");
        assert_eq!(age(-7200), "-2.0h");
    }
}
