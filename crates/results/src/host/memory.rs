//! Memory facts: RAM, page tables, hugetlb pools, THP, overcommit.

use serde::{Deserialize, Serialize};

use super::fact::Fact;

/// One hugetlb pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HugePool {
    /// Page size in kB (2048, 1048576).
    pub page_size_kib: u64,
    /// `nr_hugepages`: pages in the pool.
    pub total: u64,
    /// `free_hugepages`: pages not faulted in by anyone (reserved ones included).
    pub free: u64,
    /// `resv_hugepages`: pages promised to mappings but not yet faulted in.
    pub reserved: u64,
    /// `surplus_hugepages`: pages above `nr_hugepages` from overcommit.
    pub surplus: u64,
    /// `nr_overcommit_hugepages`.
    pub overcommit: u64,
    /// Pages that running preemptlab benches added to this pool for themselves and give back when they end
    /// (`/run/preemptlab/pool-<kib>kB.json`): not another user's demand.
    #[serde(default)]
    pub held_by_preemptlab: u64,
    /// Pages of this pool that those runs' processes map now (faulted in or reserved): the part of
    /// [`HugePool::committed`] that is theirs. 0 before a run has mapped its region, whatever it added.
    #[serde(default)]
    pub mapped_by_preemptlab: u64,
    /// Why some run's mappings could not be read (its pages then count as another user's), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapped_by_preemptlab_unknown: Option<String>,
    /// Pages preemptlab runs added to this pool and never gave back (they were killed), still in it as the
    /// record says: the next preemptlab bench that starts gives them back. Absent when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_by_ended_runs: Option<EndedRuns>,
    /// Why the counters cannot be as read (`resv_hugepages` above `free_hugepages`, `free_hugepages` above
    /// `nr_hugepages`): read at different moments, as a sysroot's copies are. Sizing judged from them would
    /// be wrong, so none is. Absent when they hold together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inconsistent: Option<String>,
}

/// What preemptlab runs that ended without giving back their share of a pool left in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndedRuns {
    /// Pages they added.
    pub pages: u64,
    /// Their pids.
    pub pids: Vec<u32>,
    /// The record that names them (`/run/preemptlab/pool-<kib>kB.json`).
    pub record: String,
}

impl HugePool {
    /// Why counters `total`, `free` and `reserved` cannot be one moment's: reserved pages are free pages
    /// promised to mappings, and free pages are pages of the pool. None when they can.
    pub fn counters_conflict(total: u64, free: u64, reserved: u64) -> Option<String> {
        if reserved > free {
            Some(format!(
                "resv_hugepages {reserved} is more than free_hugepages {free}"
            ))
        } else if free > total {
            Some(format!(
                "free_hugepages {free} is more than nr_hugepages {total}"
            ))
        } else {
            None
        }
    }

    /// Pages committed to mappings: faulted in plus reserved.
    pub fn committed(&self) -> u64 {
        self.total
            .saturating_sub(self.free)
            .saturating_add(self.reserved)
    }
    /// Pages committed to others than preemptlab's own benches (what their processes map is theirs; pages
    /// a run added but has not mapped are free, not committed, and nothing is taken away for them).
    pub fn committed_by_users(&self) -> u64 {
        self.committed().saturating_sub(self.mapped_by_preemptlab)
    }
    /// The persistent pool: `nr_hugepages` less the surplus pages (what `vm.nr_hugepages` shows).
    pub fn persistent(&self) -> u64 {
        self.total.saturating_sub(self.surplus)
    }
    /// Pages nobody has faulted in or reserved.
    pub fn available(&self) -> u64 {
        self.free.saturating_sub(self.reserved)
    }
    /// Memory the pool pins, in kB.
    pub fn pinned_kib(&self) -> u64 {
        // Saturating: the counts come from text a kernel (or a fixture) wrote.
        self.total.saturating_mul(self.page_size_kib)
    }
}

/// Memory facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryFacts {
    /// MemTotal in kB.
    pub total_kib: Fact<u64>,
    /// MemAvailable in kB.
    pub available_kib: Fact<u64>,
    /// PageTables in kB: memory used by all processes' page tables.
    pub page_tables_kib: Fact<u64>,
    /// Hugepagesize in kB: the default huge page size (`vm.nr_hugepages` sizes this pool).
    pub default_huge_page_kib: Fact<u64>,
    /// Every hugetlb pool, by page size.
    pub pools: Fact<Vec<HugePool>>,
    /// THP `enabled` (anonymous memory).
    pub thp_enabled: Fact<String>,
    /// THP `defrag`.
    pub thp_defrag: Fact<String>,
    /// THP `shmem_enabled` (shared memory, which PostgreSQL's segment is).
    pub thp_shmem_enabled: Fact<String>,
    /// `vm.overcommit_memory` (0 heuristic, 1 always, 2 never).
    pub overcommit_memory: Fact<u32>,
}

impl MemoryFacts {
    /// The pool of a page size, if present.
    pub fn pool(&self, page_size_kib: u64) -> Option<&HugePool> {
        self.pools
            .get()
            .and_then(|ps| ps.iter().find(|p| p.page_size_kib == page_size_kib))
    }
}
