//! Huge page pool sizing: the basis, the plan, what applying it did.

use serde::{Deserialize, Serialize};

use super::bytes::Bytes;
use super::hostpool::PoolTarget;
use super::memory::HugePool;

fn human(kib: u64) -> String {
    Bytes::from_kib(kib).to_string()
}

/// Where the shared memory figure came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Basis {
    /// PostgreSQL's `shared_memory_size_in_huge_pages` for this page size, and `shared_memory_size`.
    Postgres {
        /// Pages, as PostgreSQL computed them.
        pages: u64,
        /// `shared_memory_size` in kB (rounded up to MB by PostgreSQL).
        shared_memory_kib: Option<u64>,
        /// How it was obtained.
        how: String,
    },
    /// PostgreSQL's `shared_memory_size` only (its page count was for another page size).
    PostgresSize {
        /// kB.
        shared_memory_kib: u64,
        /// How it was obtained.
        how: String,
    },
    /// The size of the running postmaster's main segment, from smaps.
    Segment {
        /// kB.
        size_kib: u64,
        /// Path read.
        how: String,
    },
    /// The postmaster's VmPeak (docs/references.md#vmpeak-sizing).
    VmPeak {
        /// kB.
        vm_peak_kib: u64,
        /// Path read.
        how: String,
    },
    /// Given on the command line.
    Given {
        /// kB.
        size_kib: u64,
    },
}

impl Basis {
    /// A short stable name: `postgres`, `postgres_size`, `segment`, `vm_peak`, `given`.
    pub fn kind(&self) -> &'static str {
        match self {
            Basis::Postgres { .. } => "postgres",
            Basis::PostgresSize { .. } => "postgres_size",
            Basis::Segment { .. } => "segment",
            Basis::VmPeak { .. } => "vm_peak",
            Basis::Given { .. } => "given",
        }
    }

    /// The basis in words, with where it was read.
    pub fn describe(&self) -> String {
        match self {
            Basis::Postgres { pages, how, .. } => {
                format!("PostgreSQL's shared_memory_size_in_huge_pages = {pages}, {how}")
            }
            Basis::PostgresSize {
                shared_memory_kib,
                how,
            } => format!("shared_memory_size {}, {how}", human(*shared_memory_kib)),
            Basis::Segment { size_kib, how } => {
                format!("running segment {} in {how}", human(*size_kib))
            }
            Basis::VmPeak { vm_peak_kib, how } => {
                format!("postmaster VmPeak {} in {how}", human(*vm_peak_kib))
            }
            Basis::Given { size_kib } => format!("{} given", human(*size_kib)),
        }
    }
}

/// A sizing plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Huge page size in kB.
    pub page_size_kib: u64,
    /// What the figure rests on.
    pub basis: Basis,
    /// Pages the instance itself needs, before the margin.
    pub pages_exact: u64,
    /// Pages added as margin.
    pub margin_pages: u64,
    /// Why that margin.
    pub margin_reason: String,
    /// Pages to provide for the instance.
    pub pages_needed: u64,
    /// The pool of that size now, if the host has one.
    pub pool_now: Option<HugePool>,
    /// Pages the pool needs beyond this instance's: the other instances' needs and the pages other users
    /// have committed (the host's target less this instance's need).
    pub committed_by_others: u64,
    /// The pool size to set: the host's target ([`super::hostpool`]), the same for every instance of the
    /// host; this instance's need alone for a server that is not on this host.
    pub pool_target: u64,
    /// Memory the pool will pin, in kB.
    pub pinned_kib: u64,
    /// The arithmetic, line by line: this instance's need, then the host's pool.
    pub arithmetic: Vec<String>,
    /// Lines for /etc/sysctl.d or the sysfs file to write.
    pub sysctl_lines: Vec<String>,
    /// Lines for postgresql.conf.
    pub postgresql_conf_lines: Vec<String>,
    /// The default huge page size of the host, in kB.
    pub default_page_size_kib: u64,
    /// The host's pool at this page size, with every need and the pages committed to others; absent for a
    /// server that is not on this host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_pool: Option<PoolTarget>,
}

/// Result of resizing a pool (`hugepages --apply`, through the pool record of crate `lab`'s `pool`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The sysfs file written.
    pub path: String,
    /// The operator's part of the pool before: its persistent size (no surplus pages) less the pages live
    /// preemptlab runs added for themselves.
    pub before: u64,
    /// The size asked for.
    pub requested: u64,
    /// The operator's part the kernel gave.
    pub obtained: u64,
}
