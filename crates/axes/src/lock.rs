//! `bench lock`'s locks and its workers' lifetimes.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

names! {
    /// The locks of `bench lock` (the algorithms are `shmlock`'s, one module each).
    pub enum LockKind {
        /// PostgreSQL's spinlock.
        Pg = "pg",
        /// Test-and-set.
        Tas = "tas",
        /// Test-and-test-and-set with exponential backoff.
        Ttas = "ttas",
        /// Ticket lock.
        Ticket = "ticket",
        /// MCS queue lock.
        Mcs = "mcs",
        /// Three-state futex mutex.
        Futex = "futex",
        /// Process-shared pthread mutex.
        Pthread = "pthread",
        /// The project's adaptive lock.
        Adaptive = "adaptive",
        /// PostgreSQL's spinlock with an rseq slice-extension request.
        Rseq = "rseq",
    }
}

/// A lock name that is none of [`LockKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown lock {name:?} (choose from {})", LockKind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "))]
pub struct UnknownLock {
    /// The name as given.
    pub name: String,
}

impl LockKind {
    /// Parses a command-line name.
    pub fn parse(s: &str) -> Result<LockKind, UnknownLock> {
        LockKind::from_name(s).ok_or_else(|| UnknownLock { name: s.into() })
    }
}

names! {
    /// With `--reconnect-every`: how old the first workers of a repetition are.
    pub enum StartAge {
        /// Random ages, uniform over a life: each first worker maps what a worker of its age would have.
        Uniform = "uniform",
        /// All new together (what results without the field did).
        Young = "young",
    }
}

/// `--reconnect-every` as given: `auto`, `none` or a number of operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconnectGiven {
    /// Sized from the descriptor array (`auto`).
    Auto,
    /// Workers live for the whole run (`none`).
    Never,
    /// After this many operations.
    Every(u64),
}

impl ReconnectGiven {
    /// Parses `auto`, `none` or a positive number; None for anything else.
    pub fn parse(s: &str) -> Option<ReconnectGiven> {
        match s {
            "auto" => Some(ReconnectGiven::Auto),
            "none" => Some(ReconnectGiven::Never),
            n => n
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .map(ReconnectGiven::Every),
        }
    }
}

impl fmt::Display for ReconnectGiven {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&match self {
            ReconnectGiven::Auto => "auto".to_string(),
            ReconnectGiven::Never => "none".to_string(),
            ReconnectGiven::Every(n) => n.to_string(),
        })
    }
}

impl Serialize for ReconnectGiven {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ReconnectGiven {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ReconnectGiven::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "reconnect_every_given {s:?}: expected auto, none or a positive number"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_as_json_strings() {
        for &k in LockKind::ALL {
            assert_eq!(LockKind::parse(k.name()), Ok(k));
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{k}\""));
            assert_eq!(serde_json::from_str::<LockKind>(&json).unwrap(), k);
        }
        assert_eq!(
            LockKind::parse("nope").unwrap_err().to_string(),
            "unknown lock \"nope\" (choose from pg, tas, ttas, ticket, mcs, futex, pthread, adaptive, rseq)"
        );
        for r in ["auto", "none", "81920"] {
            let g = ReconnectGiven::parse(r).unwrap();
            assert_eq!(serde_json::to_string(&g).unwrap(), format!("\"{r}\""));
        }
        assert_eq!(ReconnectGiven::parse("0"), None);
        assert_eq!(ReconnectGiven::parse("soon"), None);
    }
}
