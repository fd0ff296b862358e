//! Huge pages: a pool's sizing (the basis, the plan, what applying it did) and the pool a host needs, one
//! figure per page size (`hostfacts::hugepages::target` computes it; the audit carries it; `hugepages`,
//! `check`, the Prometheus metrics and `fleet` show it).

use serde::{Deserialize, Serialize};

use super::bytes::Bytes;
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
    /// The pool size to set: the host's target ([`PoolTarget`]), the same for every instance of the
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

/// One user of the pool that the target provides for: a running instance, or a size asked about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Need {
    /// What needs the pages (`instance 1234 (/var/lib/postgresql/15/main)`, `120GB of shared memory`).
    pub label: String,
    /// The postmaster, for a running instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postmaster_pid: Option<u32>,
    /// What the figure rests on.
    pub basis: Basis,
    /// Pages it needs exactly (what it asks for at start).
    pub pages_exact: u64,
    /// Pages it needs, margin included.
    pub pages_needed: u64,
    /// Pages of this pool it maps now (a running instance on huge pages of this size).
    pub own_pages: u64,
}

/// A running instance whose need could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotSized {
    /// The postmaster.
    pub postmaster_pid: u32,
    /// Why.
    pub why: String,
}

/// The pool a host needs at one page size, and what the figure is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolTarget {
    /// Huge page size, kB.
    pub page_size_kib: u64,
    /// The host's default huge page size, kB (`vm.nr_hugepages` sizes that pool).
    pub default_page_size_kib: u64,
    /// The persistent pool now (`nr_hugepages` less surplus pages); absent when the host has no pool of
    /// this size or its files were unreadable.
    pub persistent: Option<u64>,
    /// Of the persistent pool, the pages live preemptlab runs added for themselves (the pool record): the
    /// pool shrinks by them when the runs end.
    #[serde(default)]
    pub added_by_preemptlab: u64,
    /// Pages committed now, by everyone: faulted in plus reserved.
    pub committed: u64,
    /// Of those, preemptlab's own runs' temporary pages (excluded from the target).
    pub committed_by_preemptlab: u64,
    /// Of those, the instances' own pages (in their needs).
    pub committed_by_instances: u64,
    /// Of those, every other user's: in the target once.
    pub committed_by_others: u64,
    /// Every running instance's need (and the size asked about, for `hugepages --shared-memory`).
    pub needs: Vec<Need>,
    /// Instances that use this page size but could not be sized: not in the target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_sized: Vec<NotSized>,
    /// The pool this host needs: the needs plus the pages committed to other users.
    pub target: u64,
    /// The arithmetic, line by line.
    pub arithmetic: Vec<String>,
    /// The commands that set the pool to the target and persist it.
    pub commands: Vec<String>,
}

impl PoolTarget {
    /// The need of the instance with this postmaster, if it is one of them.
    pub fn need_of(&self, postmaster_pid: u32) -> Option<&Need> {
        self.needs
            .iter()
            .find(|n| n.postmaster_pid == Some(postmaster_pid))
    }

    /// The operator's pool: the persistent pool less the pages preemptlab's runs added for now.
    pub fn operators_pool(&self) -> u64 {
        self.persistent
            .unwrap_or(0)
            .saturating_sub(self.added_by_preemptlab)
    }

    /// Pages the operator's pool lacks for the target (0 when it holds enough).
    pub fn shortfall(&self) -> u64 {
        self.target.saturating_sub(self.operators_pool())
    }

    /// What a restart of the instance with this postmaster finds: the pages the operator's pool leaves it
    /// (it gives its own back and asks for its exact figure again; every other instance and user keeps
    /// theirs; preemptlab's runs give theirs back), and its exact need. None when it is not one of the
    /// needs.
    pub fn restart_room(&self, postmaster_pid: u32) -> Option<(u64, u64)> {
        let need = self.need_of(postmaster_pid)?;
        let others = self
            .committed_by_instances
            .saturating_sub(need.own_pages)
            .saturating_add(self.committed_by_others);
        Some((
            self.operators_pool().saturating_sub(others),
            need.pages_exact,
        ))
    }

    /// Pages the pool lacks for the instance with this postmaster to start on huge pages at its next
    /// restart (0 when it has them); None when it is not one of the needs.
    pub fn restart_shortfall(&self, postmaster_pid: u32) -> Option<u64> {
        self.restart_room(postmaster_pid)
            .map(|(room, exact)| exact.saturating_sub(room))
    }

    /// One line for a fix comment: the target and what it is made of, the part of `me` (an instance's
    /// postmaster; None: no instance in particular) named first.
    pub fn describe_for(&self, me: Option<u32>) -> String {
        let mut parts = Vec::new();
        let (mut others, mut n_others) = (0u64, 0usize);
        for n in &self.needs {
            match n.postmaster_pid {
                Some(pid) if Some(pid) == me => parts.insert(
                    0,
                    format!(
                        "this instance needs {} ({})",
                        n.pages_needed,
                        n.basis.describe()
                    ),
                ),
                Some(_) => {
                    others = others.saturating_add(n.pages_needed);
                    n_others += 1;
                }
                None => parts.push(format!("{} needs {}", n.label, n.pages_needed)),
            }
        }
        let which = if me.is_some() { "other " } else { "" };
        match n_others {
            0 => {}
            1 => parts.push(format!("the {which}instance {others}")),
            n => parts.push(format!("the {n} {which}instances {others}")),
        }
        if self.committed_by_others > 0 {
            parts.push(format!("other users {}", self.committed_by_others));
        }
        format!(
            "{} pages of {} for this host: {}",
            self.target,
            Bytes::from_kib(self.page_size_kib),
            parts.join(", ")
        )
    }
}
