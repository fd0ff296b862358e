//! Huge page sizing for a PostgreSQL instance, and resizing a pool.
//!
//! Preferred source: PostgreSQL's own `shared_memory_size_in_huge_pages` (PG 15+: `SHOW` on a running
//! server, `postgres -D DIR -C ...` on a stopped one). For older servers, the VmPeak rule (docs/references.md#vmpeak-sizing): the postmaster's
//! `VmPeak` divided by the page size, which overestimates (it counts the binary, libraries and private
//! memory) and so needs no margin. Pools are per size under `/sys/kernel/mm/hugepages/`; `vm.nr_hugepages`
//! sizes only the default size (`Documentation/admin-guide/mm/hugetlbpage.rst`).

use serde::{Deserialize, Serialize};

use crate::memory::{HugePool, MemoryFacts};
use crate::parse::{self, Bytes};
use crate::pgquery::ServerInfo;
use crate::postgres::PgInstance;

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

/// Why an instance could not be sized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizingError {
    /// Neither the server's figures, its segment nor its VmPeak could be read.
    #[error("postmaster {pid}: neither its segment (smaps) nor VmPeak is readable ({why})")]
    Unreadable {
        /// The postmaster.
        pid: u32,
        /// Why the segment was unavailable.
        why: String,
    },
    /// A server reported no shared_memory_size (before PostgreSQL 15).
    #[error("{dsn}: the server reports no shared_memory_size (PostgreSQL 15+ needed)")]
    NoServerSize {
        /// The server, password masked.
        dsn: String,
    },
}

fn server_figures(server: &ServerInfo) -> (Option<i64>, Option<u64>) {
    let pages = server
        .settings
        .get("shared_memory_size_in_huge_pages")
        .and_then(|s| s.setting.parse::<i64>().ok());
    let size = server
        .settings
        .get("shared_memory_size")
        .and_then(|s| parse::pg_memory(&s.setting, s.unit.as_deref()).ok())
        .map(|b| b.kib());
    (pages, size)
}

/// The best basis for sizing a running instance's pool of `page_kib` pages, best first: the server's own
/// figures (with `--pg`), the running segment in smaps, the postmaster's VmPeak. Also returns how many pages
/// of that pool the instance already holds (a running instance on huge pages), so they are not counted twice.
pub fn instance_basis(inst: &PgInstance, page_kib: u64) -> Result<(Basis, u64), SizingError> {
    let own = inst
        .segment
        .get()
        .filter(|s| s.on_huge_pages() && s.kernel_page_size_kib == page_kib)
        .map(|s| s.size_kib / page_kib)
        .unwrap_or(0);
    if let Some(server) = &inst.server {
        let (pages, size) = server_figures(server);
        let hps = inst
            .setting("huge_page_size")
            .and_then(crate::findings::huge_page_size_kib);
        if let Some(p) = pages {
            if p > 0 && hps.unwrap_or(page_kib) == page_kib {
                let how = format!("SHOW via {}", server.dsn);
                return Ok((
                    Basis::Postgres {
                        pages: p as u64,
                        shared_memory_kib: size,
                        how,
                    },
                    own,
                ));
            }
        }
        if let Some(s) = size {
            let how = format!("SHOW via {}", server.dsn);
            return Ok((
                Basis::PostgresSize {
                    shared_memory_kib: s,
                    how,
                },
                own,
            ));
        }
    }
    if let Some(seg) = inst.segment.get() {
        return Ok((
            Basis::Segment {
                size_kib: seg.size_kib,
                how: inst.segment.source.clone(),
            },
            own,
        ));
    }
    if let Some(v) = inst.postmaster_vm_peak_kib.get() {
        return Ok((
            Basis::VmPeak {
                vm_peak_kib: *v,
                how: inst.postmaster_vm_peak_kib.source.clone(),
            },
            own,
        ));
    }
    Err(SizingError::Unreadable {
        pid: inst.postmaster_pid,
        why: inst
            .segment
            .unavailable
            .clone()
            .unwrap_or_else(|| "unknown".into()),
    })
}

/// The basis for a server that is not a local process (remote, or another PID namespace): its own figures
/// alone. Its page count is used only when sized for the server's default page size.
pub fn server_basis(server: &ServerInfo, page_is_default: bool) -> Result<Basis, SizingError> {
    let (pages, size) = server_figures(server);
    let how = format!("SHOW via {}", server.dsn);
    match (pages, size) {
        (Some(p), sz) if p > 0 && page_is_default => Ok(Basis::Postgres {
            pages: p as u64,
            shared_memory_kib: sz,
            how,
        }),
        (_, Some(sz)) => Ok(Basis::PostgresSize {
            shared_memory_kib: sz,
            how,
        }),
        _ => Err(SizingError::NoServerSize {
            dsn: server.dsn.clone(),
        }),
    }
}

/// Margin added to exact figures: 2% of the pages, at least one page. PostgreSQL's figure is exact for
/// today's settings; the margin absorbs modest setting changes between sizing and restart
/// (max_connections, max_locks_per_transaction, a preloaded extension) that grow the segment.
pub const MARGIN_FRACTION: f64 = 0.02;

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
    /// Pages of the pool committed to other users (not the instance being sized).
    pub committed_by_others: u64,
    /// The pool size to set.
    pub pool_target: u64,
    /// Memory the pool will pin, in kB.
    pub pinned_kib: u64,
    /// The arithmetic, line by line.
    pub arithmetic: Vec<String>,
    /// Lines for /etc/sysctl.d or the sysfs file to write.
    pub sysctl_lines: Vec<String>,
    /// Lines for postgresql.conf.
    pub postgresql_conf_lines: Vec<String>,
    /// The default huge page size of the host, in kB.
    pub default_page_size_kib: u64,
}

fn human(kib: u64) -> String {
    Bytes::from_kib(kib).to_string()
}

/// Builds a plan. `own_committed` is how many pages of this pool the instance already holds (a running
/// instance on huge pages), so they are not counted twice.
pub fn plan(
    basis: Basis,
    page_size_kib: u64,
    default_page_size_kib: u64,
    pool_now: Option<HugePool>,
    own_committed: u64,
) -> Plan {
    let mut arithmetic = Vec::new();
    let (pages_exact, margin_pages, margin_reason) = match &basis {
        Basis::Postgres {
            pages,
            shared_memory_kib,
            how,
        } => {
            arithmetic.push(format!(
                "PostgreSQL says shared_memory_size_in_huge_pages = {pages} ({how})"
            ));
            if let Some(s) = shared_memory_kib {
                arithmetic.push(format!(
                    "  (shared_memory_size = {}, / {} = {:.2} pages, rounded up)",
                    human(*s),
                    human(page_size_kib),
                    *s as f64 / page_size_kib as f64
                ));
            }
            let m = margin(*pages);
            (*pages, m, margin_text())
        }
        Basis::PostgresSize {
            shared_memory_kib,
            how,
        } => {
            let p = shared_memory_kib.div_ceil(page_size_kib);
            arithmetic.push(format!(
                "shared_memory_size = {} ({how})",
                human(*shared_memory_kib)
            ));
            arithmetic.push(format!(
                "{} / {} = {p} pages, rounded up",
                human(*shared_memory_kib),
                human(page_size_kib)
            ));
            (p, margin(p), margin_text())
        }
        Basis::Segment { size_kib, how } => {
            let p = size_kib.div_ceil(page_size_kib);
            arithmetic.push(format!(
                "main shared segment = {} ({how})",
                human(*size_kib)
            ));
            arithmetic.push(format!(
                "{} / {} = {p} pages, rounded up",
                human(*size_kib),
                human(page_size_kib)
            ));
            (p, margin(p), margin_text())
        }
        Basis::VmPeak { vm_peak_kib, how } => {
            let p = vm_peak_kib.div_ceil(page_size_kib);
            arithmetic.push(format!("postmaster VmPeak = {vm_peak_kib} kB ({how})"));
            arithmetic.push(format!(
                "{vm_peak_kib} kB / {page_size_kib} kB = {p} pages, rounded up"
            ));
            (p, 0, "none: VmPeak already overestimates (it counts the binary, libraries and private memory)".to_string())
        }
        Basis::Given { size_kib } => {
            let p = size_kib.div_ceil(page_size_kib);
            arithmetic.push(format!(
                "{} / {} = {p} pages, rounded up",
                human(*size_kib),
                human(page_size_kib)
            ));
            (p, margin(p), margin_text())
        }
    };
    let pages_needed = pages_exact + margin_pages;
    arithmetic.push(format!(
        "+ {margin_pages} margin = {pages_needed} pages = {}",
        human(pages_needed * page_size_kib)
    ));
    // A bench's temporary pages are not demand: they go back when it ends.
    let committed_all = pool_now
        .as_ref()
        .map(|p| p.committed_by_users())
        .unwrap_or(0);
    let committed_by_others = committed_all.saturating_sub(own_committed);
    if committed_by_others > 0 {
        arithmetic.push(format!(
            "+ {committed_by_others} pages already committed to other users of the pool"
        ));
    }
    let pool_target = pages_needed + committed_by_others;
    arithmetic.push(format!(
        "pool target = {pool_target} pages of {}",
        human(page_size_kib)
    ));
    let sysctl_lines = pool_lines(page_size_kib, default_page_size_kib, pool_target);
    let mut postgresql_conf_lines = vec!["huge_pages = on".to_string()];
    postgresql_conf_lines.push(if page_size_kib == default_page_size_kib {
        "huge_page_size = 0        # the default huge page size".to_string()
    } else {
        format!(
            "huge_page_size = {}",
            if page_size_kib == 1 << 20 {
                "1GB".to_string()
            } else {
                format!("{}kB", page_size_kib)
            }
        )
    });
    Plan {
        page_size_kib,
        basis,
        pages_exact,
        margin_pages,
        margin_reason,
        pages_needed,
        pool_now,
        committed_by_others,
        pool_target,
        pinned_kib: pool_target * page_size_kib,
        arithmetic,
        sysctl_lines,
        postgresql_conf_lines,
        default_page_size_kib,
    }
}

/// The plan for a running instance on a host with memory facts `mem`, at `page_kib` or else the page size
/// the instance would use (its `huge_page_size`, else the host's default; 2 MB when even that is unknown).
pub fn plan_for_instance(
    inst: &PgInstance,
    mem: &MemoryFacts,
    page_kib: Option<u64>,
) -> Result<Plan, SizingError> {
    let default_kib = mem.default_huge_page_kib.get().copied().unwrap_or(2048);
    let page = page_kib
        .or_else(|| crate::findings::instance_huge_page_kib(inst, mem))
        .unwrap_or(default_kib);
    let (basis, own) = instance_basis(inst, page)?;
    Ok(plan(basis, page, default_kib, mem.pool(page).cloned(), own))
}

/// The lines that set the pool of `page_size_kib` to `pool_target` pages: `vm.nr_hugepages` (now and in
/// /etc/sysctl.d) for the default size, the size's sysfs file and the boot parameters otherwise.
pub fn pool_lines(page_size_kib: u64, default_page_size_kib: u64, pool_target: u64) -> Vec<String> {
    let sysfs = format!("/sys/kernel/mm/hugepages/hugepages-{page_size_kib}kB/nr_hugepages");
    if page_size_kib == default_page_size_kib {
        vec![
            format!("sysctl -w vm.nr_hugepages={pool_target}"),
            format!("echo 'vm.nr_hugepages = {pool_target}' > /etc/sysctl.d/60-preemptlab-hugepages.conf"),
        ]
    } else {
        let g = if page_size_kib == 1 << 20 {
            "1G".to_string()
        } else {
            format!("{page_size_kib}K")
        };
        vec![
            format!("echo {pool_target} > {sysfs}"),
            format!("persist (reliable for {}: reserve at boot): hugepagesz={g} hugepages={pool_target} on the kernel command line", human(page_size_kib)),
        ]
    }
}

/// The margin for an exact figure.
pub fn margin(pages: u64) -> u64 {
    ((pages as f64 * MARGIN_FRACTION).ceil() as u64).max(1)
}

fn margin_text() -> String {
    format!(
        "{:.0}% (at least 1 page): the figure is exact for today's settings; the margin absorbs modest setting changes before the restart",
        MARGIN_FRACTION * 100.0
    )
}

/// Result of resizing a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The sysfs file written.
    pub path: String,
    /// Pool size before.
    pub before: u64,
    /// Pool size asked for.
    pub requested: u64,
    /// Pool size the kernel gave.
    pub obtained: u64,
}

/// Why a pool could not be resized.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The pool's size could not be read.
    #[error("reading {path}: {}", osutil::explain_io_error(.err))]
    Read {
        /// The sysfs file.
        path: String,
        /// What the read said.
        err: std::io::Error,
    },
    /// The pool's size is not a number.
    #[error("{path}: not a number")]
    NotANumber {
        /// The sysfs file.
        path: String,
    },
    /// The new size could not be written.
    #[error("writing {path}: {}", osutil::explain_io_error(.err))]
    Write {
        /// The sysfs file.
        path: String,
        /// What the write said.
        err: std::io::Error,
    },
}

/// Grows the pool of `page_size_kib` to `target` pages (never shrinks it) and reports what the kernel gave.
pub fn apply(page_size_kib: u64, target: u64) -> Result<Applied, ApplyError> {
    let path = format!("/sys/kernel/mm/hugepages/hugepages-{page_size_kib}kB/nr_hugepages");
    let read = || -> Result<u64, ApplyError> {
        std::fs::read_to_string(&path)
            .map_err(|err| ApplyError::Read {
                path: path.clone(),
                err,
            })?
            .trim()
            .parse()
            .map_err(|_| ApplyError::NotANumber { path: path.clone() })
    };
    let before = read()?;
    if before >= target {
        return Ok(Applied {
            path,
            before,
            requested: target,
            obtained: before,
        });
    }
    std::fs::write(&path, format!("{target}\n")).map_err(|err| ApplyError::Write {
        path: path.clone(),
        err,
    })?;
    let obtained = read()?;
    Ok(Applied {
        path,
        before,
        requested: target,
        obtained,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_figure_plus_margin() {
        let p = plan(
            Basis::Postgres {
                pages: 138,
                shared_memory_kib: Some(275 * 1024),
                how: "SHOW".into(),
            },
            2048,
            2048,
            None,
            0,
        );
        assert_eq!(p.pages_exact, 138);
        assert_eq!(p.margin_pages, 3);
        assert_eq!(p.pages_needed, 141);
        assert_eq!(p.pool_target, 141);
        assert_eq!(p.sysctl_lines[0], "sysctl -w vm.nr_hugepages=141");
        assert_eq!(p.pinned_kib, 141 * 2048);
    }

    #[test]
    fn vm_peak_has_no_margin_and_matches_seed_003() {
        // The VmPeak rule's published example (docs/references.md#vmpeak-sizing): VmPeak 148392404 kB -> 72457 pages of 2 MB (their division truncates; we round up).
        let p = plan(
            Basis::VmPeak {
                vm_peak_kib: 148392404,
                how: "/proc/4357/status".into(),
            },
            2048,
            2048,
            None,
            0,
        );
        assert_eq!(p.pages_needed, 72458);
        assert_eq!(p.margin_pages, 0);
    }

    #[test]
    fn one_gigabyte_pages_use_sysfs_and_count_others() {
        let pool = HugePool {
            page_size_kib: 1 << 20,
            total: 4,
            free: 2,
            reserved: 0,
            surplus: 0,
            overcommit: 0,
            held_by_preemptlab: 0,
        };
        let p = plan(
            Basis::Given {
                size_kib: 120 << 20,
            },
            1 << 20,
            2048,
            Some(pool),
            0,
        );
        assert_eq!(p.pages_exact, 120);
        assert_eq!(p.margin_pages, 3);
        assert_eq!(p.committed_by_others, 2);
        assert_eq!(p.pool_target, 125);
        assert!(p.sysctl_lines[0].contains("hugepages-1048576kB"));
        assert!(p.postgresql_conf_lines[1].contains("1GB"));
    }

    #[test]
    fn a_benchs_temporary_pages_are_not_demand() {
        // A bench run grew the pool by 513 pages and has faulted them in: without the record the plan would
        // add them to the target (the audit's advice was 513 pages too high while a bench ran).
        let pool = HugePool {
            page_size_kib: 2048,
            total: 513,
            free: 0,
            reserved: 0,
            surplus: 0,
            overcommit: 0,
            held_by_preemptlab: 513,
        };
        let p = plan(
            Basis::Given { size_kib: 1 << 20 },
            2048,
            2048,
            Some(pool),
            0,
        );
        assert_eq!(p.committed_by_others, 0);
        assert_eq!(p.pool_target, 512 + 11);
    }

    #[test]
    fn own_pages_not_counted_twice() {
        let pool = HugePool {
            page_size_kib: 2048,
            total: 150,
            free: 12,
            reserved: 0,
            surplus: 0,
            overcommit: 0,
            held_by_preemptlab: 0,
        };
        let p = plan(
            Basis::Segment {
                size_kib: 138 * 2048,
                how: "smaps".into(),
            },
            2048,
            2048,
            Some(pool),
            138,
        );
        assert_eq!(p.committed_by_others, 0);
        assert_eq!(p.pool_target, 141);
    }
}
