//! The model's choices (`sim`): the preemption model, the locks and page sizes it models, and the
//! workload. The modelled locks and page sizes are subsets of `bench lock`'s ([`crate::LockKind`],
//! [`crate::Backing`]) under the same names; [`Pages::of_backing`] maps one to the other.

use crate::Backing;

/// A name none of a choice's values has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{given}: expected {expected}")]
pub struct UnknownName {
    /// The name given.
    pub given: String,
    /// The names there are, as a phrase (`4k or 2m`).
    pub expected: String,
}

/// `parse` for a `names!` enum: its value or an [`UnknownName`].
macro_rules! parse_or_unknown {
    ($T:ident) => {
        impl $T {
            /// Parses a name.
            pub fn parse(s: &str) -> Result<$T, UnknownName> {
                $T::from_name(s).ok_or_else(|| UnknownName {
                    given: s.to_string(),
                    expected: $T::expected(),
                })
            }
        }
    };
}

names! {
    /// Preemption model.
    pub enum Model {
        /// No preemption in the kernel.
        None = "none",
        /// Also at cond_resched() points (the modelled fault path has none).
        Voluntary = "voluntary",
        /// Preemption anywhere preemption is enabled.
        Full = "full",
        /// Lazy requests, upgraded at the tick; no IPI for fair-class wakeups.
        Lazy = "lazy",
    }
}
parse_or_unknown!(Model);

names! {
    /// The lock, of those the model implements.
    pub enum LockKind {
        /// PostgreSQL's s_lock.
        Pg = "pg",
        /// Three-state futex mutex.
        Futex = "futex",
        /// `pg` with the rseq time-slice extension for the holder.
        Rseq = "rseq",
        /// The shmlock crate's `adaptive` lock (its rseq request with `adaptive_rseq`): at most
        /// min(CPUs, `ADAPTIVE_SLOTS`) waiters spin, each for a bounded time; a waiter on the CPU the holder
        /// took the lock on, or one arriving after a spinner spent a whole budget on this hold (`STALLED`),
        /// parks on a futex with a bounded sleep; unlock wakes one sleeper when no spinner is around and no
        /// wake is in flight.
        Adaptive = "adaptive",
    }
}
parse_or_unknown!(LockKind);

impl LockKind {
    /// The modelled lock of a `bench lock` lock, when the model has it.
    pub fn of_lock(l: crate::LockKind) -> Option<LockKind> {
        LockKind::from_name(l.name())
    }
}

names! {
    /// Page size of the shared descriptor array.
    pub enum Pages {
        /// 4 KB pages (faults map a fault-around group).
        P4k = "4k",
        /// 2 MB pages.
        P2m = "2m",
    }
}

impl Pages {
    /// Parses `4k|2m` (also `hugetlb-2m`, `bench lock`'s name for 2 MB pages).
    pub fn parse(s: &str) -> Result<Pages, UnknownName> {
        match s {
            "hugetlb-2m" => Ok(Pages::P2m),
            s => Pages::from_name(s).ok_or_else(|| UnknownName {
                given: s.to_string(),
                expected: Pages::expected(),
            }),
        }
    }

    /// The modelled page size of a `bench lock` backing: plain 4 KB pages and hugetlb 2 MB pages (the
    /// others, pre-faulted 4 KB pages, THP and 1 GB pages, are not modelled).
    pub fn of_backing(b: Backing) -> Option<Pages> {
        match b {
            Backing::Page4k => Some(Pages::P4k),
            Backing::Hugetlb2m => Some(Pages::P2m),
            _ => None,
        }
    }
}

names! {
    /// What the workers run.
    #[derive(Default)]
    pub enum Workload {
        /// `bench lock`'s operation in a loop: work, then the free-list pop under the lock (random order).
        #[default]
        Lock = "lock",
        /// pgbench-like transactions: statements, each a client round trip (the backend sleeps and a remote
        /// CPU wakes it), recv, user work with buffer allocations (the free-list pop under the lock, then
        /// the block's pread and its first-touch fault outside the lock), send. The free list pops buffers
        /// in order, as PostgreSQL's initial free list does.
        Txn = "txn",
    }
}
parse_or_unknown!(Workload);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_phrases() {
        assert_eq!(Model::parse("lazy"), Ok(Model::Lazy));
        let e = Model::parse("rt").unwrap_err();
        assert_eq!(e.to_string(), "rt: expected none, voluntary, full or lazy");
        assert_eq!(
            LockKind::parse("tas").unwrap_err().expected,
            "pg, futex, rseq or adaptive"
        );
        assert_eq!(Pages::parse("hugetlb-2m"), Ok(Pages::P2m));
        assert_eq!(Pages::parse("1g").unwrap_err().expected, "4k or 2m");
        assert_eq!(Workload::default(), Workload::Lock);
        assert_eq!(Pages::of_backing(Backing::Thp), None);
        assert_eq!(LockKind::of_lock(crate::LockKind::Mcs), None);
        assert_eq!(
            LockKind::of_lock(crate::LockKind::Rseq),
            Some(LockKind::Rseq)
        );
    }
}
