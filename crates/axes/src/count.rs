//! A count as a person gives it: a number (`8`) or a multiple of the CPUs (`4x`). Workers of `bench
//! lock`, clients of `bench pg`: the spec keeps the counts as given (what a run on another host would
//! resolve again) next to what they resolved to here.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A count as given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Count {
    /// This many.
    Exact(u32),
    /// This many times the CPUs (`4x`; `0.5x`), rounded to the nearest whole count.
    PerCpu(f64),
}

/// Text that is no count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected a number or a multiple of CPUs like 4x")]
pub struct CountError(pub String);

impl Count {
    /// Parses `8` or `4x`.
    pub fn parse(s: &str) -> Result<Count, CountError> {
        let bad = || CountError(s.to_string());
        match s.strip_suffix('x') {
            Some(m) => m
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(Count::PerCpu)
                .ok_or_else(bad),
            None => s.parse().map(Count::Exact).map_err(|_| bad()),
        }
    }

    /// The count on a host with `cpus` CPUs.
    pub fn resolve(self, cpus: u32) -> u32 {
        match self {
            Count::Exact(n) => n,
            Count::PerCpu(f) => (f * cpus as f64).round() as u32,
        }
    }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&match self {
            Count::Exact(n) => n.to_string(),
            Count::PerCpu(m) => format!("{m}x"),
        })
    }
}

impl Serialize for Count {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Count::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_resolve_and_keep_their_spelling() {
        for (given, cpus, n) in [
            ("8", 2, 8),
            ("4x", 2, 8),
            ("1x", 3, 3),
            ("0.5x", 3, 2),
            ("16x", 2, 32),
        ] {
            let c = Count::parse(given).unwrap();
            assert_eq!(c.resolve(cpus), n, "{given}");
            assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"{given}\""));
            assert_eq!(
                serde_json::from_str::<Count>(&format!("\"{given}\"")).unwrap(),
                c
            );
        }
        for bad in ["lots", "x", "-1", "4xx", "infx", ""] {
            assert!(Count::parse(bad).is_err(), "{bad}");
        }
    }
}
