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
