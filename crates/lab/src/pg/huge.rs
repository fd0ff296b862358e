//! Huge pages for `bench pg`'s configurations: how many a server needs, and growing the pool for them
//! (`--reserve-hugepages`) or counting on the free pages found, which the cells then record.

use axes::HugePages;
use results::pg::{SegmentCheck, Spec};
use results::Status;

use crate::pg::run::Skip;
use hostguard::hugetlb_pool::PoolGuard;
use pgharness::pgcluster::Cluster;

pub(crate) fn hugepages_needed(
    cluster: &Cluster,
    settings: &[(String, String)],
    spec: &Spec,
) -> Option<u64> {
    // PostgreSQL 15+ computes it; older servers: shared_buffers plus the ~8% other shared structures.
    if let Ok(v) = cluster.computed("shared_memory_size_in_huge_pages", settings) {
        if let Ok(n) = v.parse::<i64>() {
            if n > 0 {
                return Some(n as u64);
            }
        }
    }
    let sb = settings
        .iter()
        .find(|(k, _)| k == "shared_buffers")
        .and_then(|(_, v)| results::host::bytes::size(v).ok())?;
    let kib = sb.0 / 1024 * 108 / 100 + 16 * 1024;
    Some(kib.div_ceil(spec.huge_page_kib))
}

fn free_huge_pages(page_kib: u64) -> u64 {
    hostfacts::hugepages::sysfs::HugetlbPool::of(page_kib)
        .available()
        .unwrap_or(0)
}

/// What [`reserve`] did for a configuration's huge pages.
pub(crate) enum Reserved {
    /// The pool was grown for it (restored when the guard drops).
    Grown(PoolGuard),
    /// Not reserved: the run counts on the free pages it saw (recorded in its cells).
    CountedOn(u64),
    /// No huge pages needed, or the need is unknown.
    Nothing,
}

/// Grows the pool for a configuration when allowed; otherwise checks that `huge_pages=on` can start on
/// the free pages and records what the run counts on.
pub(crate) fn reserve(
    hp: HugePages,
    needed: Option<u64>,
    spec: &Spec,
    allowed: bool,
    grow_hint: &str,
) -> Result<Reserved, Skip> {
    if hp == HugePages::Off {
        return Ok(Reserved::Nothing);
    }
    let Some(needed) = needed else {
        return Ok(Reserved::Nothing);
    };
    let want = needed + hostfacts::hugepages::sizing::margin(needed);
    let kib = spec.huge_page_kib;
    if allowed {
        return PoolGuard::ensure_free(kib, want)
            .map(Reserved::Grown)
            .map_err(|e| {
                Skip(
                    Status::Failed,
                    format!("could not reserve {want} huge pages of {kib} kB: {e}"),
                )
            });
    }
    let free = free_huge_pages(kib);
    if hp == HugePages::On && free < needed {
        return Err(Skip(
            Status::Skipped,
            format!(
                "huge_pages=on needs {needed} free {kib} kB pages and the pool has {free}: {grow_hint}"
            ),
        ));
    }
    Ok(Reserved::CountedOn(free))
}

/// How the postmaster's main shared-memory segment is backed (its smaps), and what PostgreSQL 17+ says of
/// it (`huge_pages_status`).
pub(crate) fn segment_check(cluster: &Cluster, pm: u32, spec: &Spec) -> SegmentCheck {
    let mut out = SegmentCheck::default();
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pm}/smaps")) {
        if let Some(seg) = hostfacts::postgres::main_segment(&hostfacts::parse::smaps(&text)) {
            out.on_huge_pages = seg.on_huge_pages();
            out.size_kib = seg.size_kib;
            out.kernel_page_size_kib = seg.kernel_page_size_kib;
        }
    }
    let major: Option<u32> = spec
        .pg_version
        .as_deref()
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse().ok());
    if major.is_some_and(|m| m >= 17) {
        out.huge_pages_status = cluster.psql("postgres", "SHOW huge_pages_status").ok();
    }
    out
}

/// Why a configuration's segment is not backed as asked (or cannot be found), if it is not.
pub(crate) fn backing_error(hp: HugePages, seg: &SegmentCheck) -> Option<String> {
    if seg.size_kib == 0 {
        return Some(
            "could not find the server's shared-memory segment in the postmaster's smaps".into(),
        );
    }
    if hp == HugePages::On && !seg.on_huge_pages {
        return Some(format!(
            "asked for huge_pages=on but the segment ({} kB) is on {} kB pages",
            seg.size_kib, seg.kernel_page_size_kib
        ));
    }
    if let Some(st) = &seg.huge_pages_status {
        if (st == "on") != seg.on_huge_pages {
            return Some(format!(
                "huge_pages_status says {st} but smaps shows {} kB pages",
                seg.kernel_page_size_kib
            ));
        }
    }
    None
}
