//! Pure statistics for benchmark results: centres (median, arithmetic and harmonic means), spread, and
//! Jain's fairness index. No I/O.
//!
//! Rates are summarized with the harmonic mean and times with the arithmetic mean (docs/references.md#summary-statistics);
//! tables show the median with the min..max range next to it.

pub mod compare;
pub mod fmt;
pub mod judge;

pub use judge::{judge, Judgement, Sample};

use serde::{Deserialize, Serialize};

/// The centre and spread of repeated measurements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median.
    pub median: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Harmonic mean (the right centre for rates); 0 when a sample is 0.
    pub hmean: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Sample standard deviation (0 for one sample).
    pub stddev: f64,
}

/// Percentiles of a latency distribution, in ns: the one percentile record of bench lock's repetitions
/// (`results::lock::Rep`) and of the model's outcomes (`results::model::Outcome`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Mean, where the measurement records one (bench lock does; the sim's outcomes never did, and their
    /// files have no `mean`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Maximum.
    pub max: u64,
}

/// Median of `xs` (the mean of the two middle values for an even count). NaN for no samples.
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Arithmetic mean.
pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Harmonic mean; 0 when any sample is 0 or negative.
pub fn hmean(xs: &[f64]) -> f64 {
    if xs.iter().any(|x| *x <= 0.0) {
        return 0.0;
    }
    xs.len() as f64 / xs.iter().map(|x| 1.0 / x).sum::<f64>()
}

/// Summarizes samples. Panics on an empty slice.
pub fn summarize(xs: &[f64]) -> Summary {
    assert!(!xs.is_empty(), "summarize needs samples");
    let m = mean(xs);
    let var = if xs.len() > 1 {
        xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64
    } else {
        0.0
    };
    Summary {
        n: xs.len(),
        median: median(xs),
        mean: m,
        hmean: hmean(xs),
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        stddev: var.sqrt(),
    }
}

/// Jain's fairness index of per-worker shares: (sum x)^2 / (n * sum x^2); 1 = perfectly even, 1/n = one
/// worker did everything.
pub fn jain(xs: &[f64]) -> f64 {
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if s2 == 0.0 {
        return 1.0;
    }
    s * s / (xs.len() as f64 * s2)
}

#[cfg(test)]
mod tests {
    /// A bench lock record keeps its mean; the sim's, which never had one, writes none.
    #[test]
    fn percentiles_write_the_mean_only_where_recorded() {
        let lock = super::Percentiles {
            mean: Some(1.5),
            p50: 1,
            ..Default::default()
        };
        let text = serde_json::to_string(&lock).unwrap();
        assert!(text.starts_with(r#"{"mean":1.5,"p50":1,"#), "{text}");
        let sim = super::Percentiles { mean: None, ..lock };
        let text = serde_json::to_string(&sim).unwrap();
        assert_eq!(text, r#"{"p50":1,"p90":0,"p99":0,"p999":0,"max":0}"#);
        let back: super::Percentiles = serde_json::from_str(&text).unwrap();
        assert_eq!(back, sim);
    }

    use super::*;

    #[test]
    fn centres() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
        // Harmonic mean of two rates 1 and 3 is 1.5 (2 / (1 + 1/3)).
        assert!((hmean(&[1.0, 3.0]) - 1.5).abs() < 1e-12);
        assert_eq!(hmean(&[0.0, 3.0]), 0.0);
        let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.mean, 5.0);
        assert!(
            (s.stddev - 2.138).abs() < 1e-3,
            "sample stddev of the textbook example"
        );
        assert_eq!((s.min, s.max, s.n), (2.0, 9.0, 8));
    }

    #[test]
    fn jain_index() {
        assert!((jain(&[5.0, 5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(jain(&[0.0, 0.0]), 1.0);
    }
}

/// The 95% Wilson score interval of a proportion `k` of `n`, as (low, high) fractions; (0, 1) when `n` is 0.
/// Unlike the normal approximation it stays inside [0, 1] and is honest for small `n` and shares near 0 or
/// 1 (Wilson 1927; Brown, Cai and DasGupta 2001 recommend it over the Wald interval).
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = 1.959_963_984_540_054_f64;
    let (k, n) = (k.min(n) as f64, n as f64);
    let p = k / n;
    let z2n = z * z / n;
    let centre = (p + z2n / 2.0) / (1.0 + z2n);
    let half = z / (1.0 + z2n) * (p * (1.0 - p) / n + z2n / (4.0 * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

#[cfg(test)]
mod wilson_tests {
    use super::wilson;

    #[test]
    fn wilson_known_values() {
        // 50 of 100: 0.404..0.596 (the textbook value).
        let (lo, hi) = wilson(50, 100);
        assert!(
            (lo - 0.4038).abs() < 1e-3 && (hi - 0.5962).abs() < 1e-3,
            "{lo} {hi}"
        );
        // 0 of 10: the upper bound is still 27.8%, not 0.
        let (lo, hi) = wilson(0, 10);
        assert!(lo == 0.0 && (hi - 0.2775).abs() < 1e-3, "{lo} {hi}");
        assert_eq!(wilson(3, 0), (0.0, 1.0));
        let (lo, hi) = wilson(10, 10);
        assert!(
            (hi - 1.0).abs() < 1e-9 && (lo - 0.7225).abs() < 1e-3,
            "{lo} {hi}"
        );
    }
}
