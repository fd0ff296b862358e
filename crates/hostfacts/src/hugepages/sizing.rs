//! Huge page sizing for a PostgreSQL instance, and resizing a pool.
//!
//! Preferred source: PostgreSQL's own `shared_memory_size_in_huge_pages` (PG 15+: `SHOW` on a running
//! server, `postgres -D DIR -C ...` on a stopped one). For older servers, the VmPeak rule (docs/references.md#vmpeak-sizing): the postmaster's
//! `VmPeak` divided by the page size, which overestimates (it counts the binary, libraries and private
//! memory) and so needs no margin. Pools are per size under `/sys/kernel/mm/hugepages/`; `vm.nr_hugepages`
//! sizes only the default size (`Documentation/admin-guide/mm/hugetlbpage.rst`).

use results::host::hugepages::{Basis, Plan};

use results::host::bytes::Bytes;
use results::host::hugepages::PoolTarget;
use results::host::memory::HugePool;
use results::host::pgquery::ServerInfo;
use results::host::postgres::PgInstance;

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
        .and_then(|s| results::host::bytes::pg_memory(&s.setting, s.unit.as_deref()).ok())
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
        .map(|s| s.size_kib.div_ceil(page_kib.max(1)))
        .unwrap_or(0);
    if let Some(server) = &inst.server {
        let (pages, size) = server_figures(server);
        let hps = inst
            .setting("huge_page_size")
            .and_then(results::host::postgres::huge_page_size_kib);
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

/// What one need (an instance, a data directory, a size) takes on its own: the exact pages, the margin, and
/// the arithmetic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnSizing {
    /// Pages before the margin.
    pub pages_exact: u64,
    /// Pages added as margin.
    pub margin_pages: u64,
    /// Why that margin.
    pub margin_reason: String,
    /// Pages to provide: exact plus margin.
    pub pages_needed: u64,
    /// The arithmetic, line by line.
    pub arithmetic: Vec<String>,
}

fn human(kib: u64) -> String {
    Bytes::from_kib(kib).to_string()
}

/// The pages `basis` needs at `page_size_kib` (a page size of 0, from odd host text, is taken as 4 kB so
/// that nothing divides by zero).
pub fn own_sizing(basis: &Basis, page_size_kib: u64) -> OwnSizing {
    let page_size_kib = page_size_kib.max(4);
    let mut arithmetic = Vec::new();
    let rounded = |size_kib: u64, arithmetic: &mut Vec<String>| {
        let p = size_kib.div_ceil(page_size_kib);
        arithmetic.push(format!(
            "{} / {} = {p} pages, rounded up",
            human(size_kib),
            human(page_size_kib)
        ));
        p
    };
    let (pages_exact, margin_pages, margin_reason) = match basis {
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
            (*pages, margin(*pages), margin_text())
        }
        Basis::PostgresSize {
            shared_memory_kib,
            how,
        } => {
            arithmetic.push(format!(
                "shared_memory_size = {} ({how})",
                human(*shared_memory_kib)
            ));
            let p = rounded(*shared_memory_kib, &mut arithmetic);
            (p, margin(p), margin_text())
        }
        Basis::Segment { size_kib, how } => {
            arithmetic.push(format!(
                "main shared segment = {} ({how})",
                human(*size_kib)
            ));
            let p = rounded(*size_kib, &mut arithmetic);
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
            // What an operator types for `shared_buffers = 2GB` gave 1,045 pages where PostgreSQL needs
            // 1,063 (issue 46 item 3): the size is the whole segment, and says so.
            arithmetic.push(format!(
                "{} given: the whole shared memory segment (PostgreSQL's shared_memory_size), which is more than shared_buffers: for shared_buffers give --shared-buffers (and --max-connections), sized by PostgreSQL itself",
                human(*size_kib)
            ));
            let p = rounded(*size_kib, &mut arithmetic);
            (p, margin(p), margin_text())
        }
    };
    let pages_needed = pages_exact.saturating_add(margin_pages);
    arithmetic.push(format!(
        "+ {margin_pages} margin = {pages_needed} pages = {}",
        human(pages_needed.saturating_mul(page_size_kib))
    ));
    OwnSizing {
        pages_exact,
        margin_pages,
        margin_reason,
        pages_needed,
        arithmetic,
    }
}

/// Builds a plan for one need on `basis`, with the pool its host needs (`host`, which counts this need
/// among its own; None for a server that is not on this host: then the pool is the need alone).
pub fn plan(
    basis: Basis,
    page_size_kib: u64,
    default_page_size_kib: u64,
    pool_now: Option<HugePool>,
    host: Option<PoolTarget>,
) -> Plan {
    let own = own_sizing(&basis, page_size_kib);
    let mut arithmetic = own.arithmetic;
    let pool_target = match &host {
        Some(h) => {
            arithmetic.push(format!("this host's {} pool:", human(page_size_kib)));
            arithmetic.extend(h.arithmetic.iter().map(|l| format!("  {l}")));
            h.target
        }
        None => {
            arithmetic.push(
                "the server is not a process of this host: other users of its host's pool are not known here; add their pages"
                    .into(),
            );
            own.pages_needed
        }
    };
    let sysctl_lines = match &host {
        Some(h) => h.commands.clone(),
        None => pool_lines(page_size_kib, default_page_size_kib, pool_target),
    };
    let postgresql_conf_lines = postgresql_conf_lines(page_size_kib, default_page_size_kib);
    Plan {
        page_size_kib,
        basis,
        pages_exact: own.pages_exact,
        margin_pages: own.margin_pages,
        margin_reason: own.margin_reason,
        pages_needed: own.pages_needed,
        pool_now,
        committed_by_others: pool_target.saturating_sub(own.pages_needed),
        pool_target,
        pinned_kib: pool_target.saturating_mul(page_size_kib),
        arithmetic,
        sysctl_lines,
        postgresql_conf_lines,
        default_page_size_kib,
        host_pool: host,
    }
}

/// The postgresql.conf lines that put an instance on huge pages of `page_size_kib`.
pub fn postgresql_conf_lines(page_size_kib: u64, default_page_size_kib: u64) -> Vec<String> {
    vec![
        "huge_pages = on".to_string(),
        if page_size_kib == default_page_size_kib {
            "huge_page_size = 0        # the default huge page size".to_string()
        } else if page_size_kib == 1 << 20 {
            "huge_page_size = 1GB".to_string()
        } else {
            format!("huge_page_size = {page_size_kib}kB")
        },
    ]
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
            format!("# persist: hugepagesz={g} hugepages={pool_target} on the kernel command line (reserved at boot: reliable for {} pages)", human(page_size_kib)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_figure_plus_margin() {
        let own = own_sizing(
            &Basis::Postgres {
                pages: 138,
                shared_memory_kib: Some(275 * 1024),
                how: "SHOW".into(),
            },
            2048,
        );
        assert_eq!(
            (own.pages_exact, own.margin_pages, own.pages_needed),
            (138, 3, 141)
        );
    }

    #[test]
    fn vm_peak_has_no_margin_and_matches_seed_003() {
        // The VmPeak rule's published example (docs/references.md#vmpeak-sizing): VmPeak 148392404 kB -> 72457 pages of 2 MB (their division truncates; we round up).
        let own = own_sizing(
            &Basis::VmPeak {
                vm_peak_kib: 148392404,
                how: "/proc/4357/status".into(),
            },
            2048,
        );
        assert_eq!((own.pages_needed, own.margin_pages), (72458, 0));
    }

    #[test]
    fn a_server_elsewhere_is_sized_alone_with_sysfs_lines_for_1_gb() {
        let p = plan(
            Basis::Given {
                size_kib: 120 << 20,
            },
            1 << 20,
            2048,
            None,
            None,
        );
        assert_eq!((p.pages_exact, p.margin_pages), (120, 3));
        assert_eq!((p.committed_by_others, p.pool_target), (0, 123));
        assert_eq!(p.pinned_kib, 123 << 20);
        assert!(p.sysctl_lines[0].contains("hugepages-1048576kB"));
        assert!(p.postgresql_conf_lines[1].contains("1GB"));
        assert!(p
            .arithmetic
            .last()
            .unwrap()
            .contains("not a process of this host"));
    }
}
