//! The hugetlb pool a host needs: one figure per page size, computed here once and used by everything that
//! prints a pool size (the audit's findings and its persisted sysctl.d line, `hugepages`, `check`, the
//! Prometheus shortfall, `fleet` through the audit JSON).
//!
//! ```text
//! target = every instance's need (its own figure and margin, as `hugepages` sizes it)
//!        + pages committed to other users of the pool, counted once
//! ```
//!
//! The pool's counters (Documentation/admin-guide/mm/hugetlbpage.rst) give the pages committed to all of
//! its users: faulted in (`nr_hugepages - free_hugepages`) plus reserved for mappings not yet faulted
//! (`resv_hugepages`); surplus pages in use are among them. Three kinds of user share them:
//! - the instances themselves: their main segment, mapped whole at start (PostgreSQL maps it without
//!   MAP_NORESERVE, so the kernel reserves all of it then). Their pages are in their needs already.
//! - preemptlab's own runs (`--reserve-hugepages`): temporary pages, given back when the run ends. They are
//!   what the runs' processes map now (read from their smaps by [`crate::memory`], for the runs of the pool
//!   record) and what `bench pg`'s throwaway clusters map (known by their `cluster_name`). A run that has grown the pool but not mapped its
//!   region yet has its pages in `free`, not among the committed ones, and nothing is taken away for it: the
//!   pages it added are not counted at all (the bug this module replaced subtracted them a second time).
//! - everyone else: the committed pages less the two above, counted once. They are never taken to be fewer
//!   than zero, and the committed pages less preemptlab's are never taken to be fewer than the pages the
//!   instances are seen to map.

use serde::{Deserialize, Serialize};

use crate::hugepages::{self, Basis, SizingError};
use crate::memory::MemoryFacts;
use crate::parse::Bytes;
use crate::postgres::PgInstance;

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

/// The host's default huge page size (2 MB when unknown or absurd).
pub fn default_page_kib(mem: &MemoryFacts) -> u64 {
    mem.default_huge_page_kib
        .get()
        .copied()
        .filter(|k| *k > 0)
        .unwrap_or(2048)
}

/// The page size an instance would use: its `huge_page_size`, else the host's default.
pub fn page_of(inst: &PgInstance, mem: &MemoryFacts) -> u64 {
    crate::findings::instance_huge_page_kib(inst, mem).unwrap_or_else(|| default_page_kib(mem))
}

/// True for a throwaway cluster of `bench pg`: its pages are preemptlab's, not an instance's need.
pub fn is_preemptlab_cluster(inst: &PgInstance) -> bool {
    inst.preemptlab_throwaway
}

/// One running instance's need at `page_kib`.
pub fn instance_need(inst: &PgInstance, page_kib: u64) -> Result<Need, SizingError> {
    let (basis, own_pages) = hugepages::instance_basis(inst, page_kib)?;
    let own = hugepages::own_sizing(&basis, page_kib);
    Ok(Need {
        label: format!(
            "instance {} ({})",
            inst.postmaster_pid,
            inst.data_dir.value.as_deref().unwrap_or("?")
        ),
        postmaster_pid: Some(inst.postmaster_pid),
        basis,
        pages_exact: own.pages_exact,
        pages_needed: own.pages_needed,
        own_pages,
    })
}

/// The targets of a host: one per page size that one of its instances would use, smallest first.
pub fn for_host(mem: &MemoryFacts, instances: &[PgInstance]) -> Vec<PoolTarget> {
    let mut sizes: Vec<u64> = instances
        .iter()
        .filter(|i| !is_preemptlab_cluster(i))
        .map(|i| page_of(i, mem))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|kib| for_page_size(mem, instances, kib, &|i| page_of(i, mem), Vec::new()))
        .collect()
}

/// The target at `page_kib` for the instances whose page size (`page_of`) is that one, and the `extra`
/// needs (a size asked about).
pub fn for_page_size(
    mem: &MemoryFacts,
    instances: &[PgInstance],
    page_kib: u64,
    page_of: &dyn Fn(&PgInstance) -> u64,
    extra: Vec<Need>,
) -> PoolTarget {
    let mut needs = Vec::new();
    let mut not_sized = Vec::new();
    let mut throwaway = 0u64;
    for inst in instances {
        if is_preemptlab_cluster(inst) {
            throwaway = throwaway.saturating_add(
                hugepages::instance_basis(inst, page_kib).map_or(0, |(_, own)| own),
            );
            continue;
        }
        if page_of(inst) != page_kib {
            continue;
        }
        match instance_need(inst, page_kib) {
            Ok(n) => needs.push(n),
            Err(e) => not_sized.push(NotSized {
                postmaster_pid: inst.postmaster_pid,
                why: e.to_string(),
            }),
        }
    }
    needs.extend(extra);
    target(mem, page_kib, needs, not_sized, throwaway)
}

/// The target at `page_kib` for `needs`, with `throwaway` pages mapped by preemptlab's throwaway clusters.
pub fn target(
    mem: &MemoryFacts,
    page_kib: u64,
    needs: Vec<Need>,
    not_sized: Vec<NotSized>,
    throwaway: u64,
) -> PoolTarget {
    let size = Bytes::from_kib(page_kib);
    let pool = mem.pool(page_kib);
    let committed = pool.map_or(0, |p| p.committed());
    let by_runs = pool.map_or(0, |p| p.mapped_by_preemptlab);
    let committed_by_preemptlab = by_runs.saturating_add(throwaway).min(committed);
    let own: u64 = needs
        .iter()
        .fold(0u64, |a, n| a.saturating_add(n.own_pages));
    let not_preemptlab = committed.saturating_sub(committed_by_preemptlab).max(own);
    let committed_by_others = not_preemptlab - own;
    let needed: u64 = needs
        .iter()
        .fold(0u64, |a, n| a.saturating_add(n.pages_needed));
    let target = needed.saturating_add(committed_by_others);

    let mut arithmetic = Vec::new();
    for n in &needs {
        arithmetic.push(format!(
            "{}: {} pages ({})",
            n.label,
            n.pages_needed,
            n.basis.describe()
        ));
    }
    for u in &not_sized {
        arithmetic.push(format!(
            "instance {}: not sized ({}): not in the target",
            u.postmaster_pid, u.why
        ));
    }
    match pool {
        Some(p) => {
            arithmetic.push(format!(
                "committed now: {committed} pages (total {} - free {} + reserved {})",
                p.total, p.free, p.reserved
            ));
            if committed_by_preemptlab > 0 {
                arithmetic.push(format!(
                    "  - {committed_by_preemptlab} of preemptlab's own runs (temporary: given back when they end)"
                ));
            }
            if let Some(why) = &p.mapped_by_preemptlab_unknown {
                arithmetic.push(format!(
                    "  (preemptlab runs' mappings not all read: {why}; their pages count as other users')"
                ));
            }
            if own > 0 {
                arithmetic.push(format!(
                    "  - {own} the instances map (in their needs above)"
                ));
            }
            arithmetic.push(format!(
                "  = {committed_by_others} committed to other users"
            ));
            if p.surplus > 0 {
                arithmetic.push(format!(
                    "the persistent pool is {} pages (the total counts {} surplus pages)",
                    p.persistent(),
                    p.surplus
                ));
            }
        }
        None if mem.pools.get().is_none() => arithmetic.push(format!(
            "pages committed to other users unknown: the pools are unreadable ({})",
            mem.pools.unavailable.as_deref().unwrap_or("?")
        )),
        None => arithmetic.push(format!("this host has no {size} pool yet")),
    }
    arithmetic.push(format!(
        "pool target = {needed} needed + {committed_by_others} for other users = {target} pages of {size}"
    ));
    let default_page_size_kib = default_page_kib(mem);
    PoolTarget {
        page_size_kib: page_kib,
        default_page_size_kib,
        persistent: pool.map(|p| p.persistent()),
        added_by_preemptlab: pool.map_or(0, |p| p.held_by_preemptlab),
        committed,
        committed_by_preemptlab,
        committed_by_instances: own,
        committed_by_others,
        needs,
        not_sized,
        target,
        arithmetic,
        commands: hugepages::pool_lines(page_kib, default_page_size_kib, target),
    }
}

#[cfg(test)]
mod tests;
