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
//!   record) and what `bench pg`'s throwaway clusters map (known by their `cluster_name`). A run that has
//!   grown the pool but not mapped its region yet has its pages in `free`, not among the committed ones, and
//!   nothing is taken away for it: the pages it added are not counted at all (the bug this module replaced
//!   subtracted them a second time).
//!
//! The records (`PoolTarget`, `Need`) are the schema's, `results::host::hugepages`; docs/references.md
//! (#hugetlb-pool-counters) has the kernel's side.
//! - everyone else: the committed pages less the two above, counted once. They are never taken to be fewer
//!   than zero, and the committed pages less preemptlab's are never taken to be fewer than the pages the
//!   instances are seen to map.

use crate::hugepages::sizing::{self, SizingError};
use results::host::bytes::Bytes;
use results::host::memory::MemoryFacts;
use results::host::postgres::PgInstance;

use results::host::hugepages::{Need, NotSized, PoolTarget};

/// The pool targets of an audit: as it recorded them, or computed from its facts for an audit written before
/// it kept them.
pub fn targets_of(a: &results::host::audit::Audit) -> std::borrow::Cow<'_, [PoolTarget]> {
    if a.pool_targets.is_empty() && !a.instances.is_empty() {
        std::borrow::Cow::Owned(for_host(&a.memory, &a.instances))
    } else {
        std::borrow::Cow::Borrowed(&a.pool_targets)
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
    results::host::postgres::instance_huge_page_kib(inst, mem)
        .unwrap_or_else(|| default_page_kib(mem))
}

/// True for a throwaway cluster of `bench pg`: its pages are preemptlab's, not an instance's need.
pub fn is_preemptlab_cluster(inst: &PgInstance) -> bool {
    inst.preemptlab_throwaway
}

/// One running instance's need at `page_kib`.
pub fn instance_need(inst: &PgInstance, page_kib: u64) -> Result<Need, SizingError> {
    let (basis, own_pages) = sizing::instance_basis(inst, page_kib)?;
    let own = sizing::own_sizing(&basis, page_kib);
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
            throwaway = throwaway
                .saturating_add(sizing::instance_basis(inst, page_kib).map_or(0, |(_, own)| own));
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
        commands: sizing::pool_lines(page_kib, default_page_size_kib, target),
    }
}

#[cfg(test)]
mod tests;
