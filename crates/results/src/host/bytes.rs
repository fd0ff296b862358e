//! A size in bytes: shown with a binary unit, parsed from a size (`120GB`) or a PostgreSQL memory setting.

use std::fmt;

/// A byte count, printed in binary units.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    /// From kibibytes.
    pub fn from_kib(kib: u64) -> Self {
        // Saturating: a count from odd host text can be any number.
        Bytes(kib.saturating_mul(1024))
    }
    /// In kibibytes (rounded down).
    pub fn kib(self) -> u64 {
        self.0 / 1024
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
        let mut v = self.0 as f64;
        let mut i = 0;
        while v >= 1024.0 && i < UNITS.len() - 1 {
            v /= 1024.0;
            i += 1;
        }
        if i == 0 {
            write!(f, "{} B", self.0)
        } else if v >= 100.0 {
            write!(f, "{v:.0} {}", UNITS[i])
        } else if v >= 10.0 {
            write!(f, "{v:.1} {}", UNITS[i])
        } else {
            write!(f, "{v:.2} {}", UNITS[i])
        }
    }
}

/// A parse failure, naming what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

fn err(msg: impl Into<String>) -> ParseError {
    ParseError(msg.into())
}

/// Parses a human size: `120GB`, `2MB`, `1G`, `512kB`, `4096` (bytes), `1.5GiB`. Units are binary
/// (k = 1024), as in PostgreSQL and the kernel.
pub fn size(text: &str) -> Result<Bytes, ParseError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(err(format!(
            "{text:?} is not a size (expected e.g. 120GB, 2MB, 512kB)"
        )));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| err(format!("{text:?} is not a size (expected e.g. 120GB, 2MB)")))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(err(format!(
                "{text:?}: unknown unit {other:?} (use B, kB, MB, GB or TB)"
            )))
        }
    };
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(err(format!("{text:?} is out of range")));
    }
    Ok(Bytes(bytes.round() as u64))
}

/// Parses a PostgreSQL memory setting as `pg_settings` shows it: `setting` in multiples of `unit`
/// (`8kB`, `kB`, `MB`), e.g. ("16384", Some("8kB")) -> 128 MiB.
pub fn pg_memory(setting: &str, unit: Option<&str>) -> Result<Bytes, ParseError> {
    let n: f64 = setting
        .trim()
        .parse()
        .map_err(|_| err(format!("{setting:?} is not a number")))?;
    let unit_bytes = match unit {
        None | Some("") => 1.0,
        Some(u) => {
            size(
                if u.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                    u.to_string()
                } else {
                    format!("1{u}")
                }
                .as_str(),
            )?
            .0 as f64
        }
    };
    Ok(Bytes((n * unit_bytes).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzzing (fuzz/corpus/hugepages_sysfs/crash-pinned-kib-overflow, through the pool target):
    /// a page size of u64::MAX kB overflowed when shown in bytes.
    #[test]
    fn bytes_from_an_absurd_kib_count_saturate_regression() {
        assert_eq!(Bytes::from_kib(u64::MAX), Bytes(u64::MAX));
        assert_eq!(Bytes::from_kib(3), Bytes(3072));
    }

    #[test]
    fn pg_memory_units() {
        assert_eq!(pg_memory("16384", Some("8kB")).unwrap(), Bytes(128 << 20));
        assert_eq!(pg_memory("275", Some("MB")).unwrap(), Bytes(275 << 20));
        assert_eq!(pg_memory("2048", Some("kB")).unwrap(), Bytes(2 << 20));
        assert_eq!(pg_memory("0", None).unwrap(), Bytes(0));
    }

    #[test]
    fn bytes_display() {
        assert_eq!(Bytes(512).to_string(), "512 B");
        assert_eq!(Bytes(2 << 20).to_string(), "2.00 MiB");
        assert_eq!(Bytes(120 << 30).to_string(), "120 GiB");
        assert_eq!(Bytes(25 << 29).to_string(), "12.5 GiB");
    }

    #[test]
    fn sizes() {
        assert_eq!(size("120GB").unwrap(), Bytes(120 << 30));
        assert_eq!(size("2MB").unwrap(), Bytes(2 << 20));
        assert_eq!(size("1G").unwrap(), Bytes(1 << 30));
        assert_eq!(size("512kB").unwrap(), Bytes(512 << 10));
        assert_eq!(size("4096").unwrap(), Bytes(4096));
        assert_eq!(size("1.5GiB").unwrap(), Bytes(3 << 29));
        assert!(size("GB").is_err());
        assert!(size("12XB").is_err());
        assert!(size("").is_err());
        assert!(size("-5GB").is_err());
        assert!(size("1e400GB").is_err());
    }
}
