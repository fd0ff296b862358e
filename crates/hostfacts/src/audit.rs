//! The audit: every fact, every finding, one verdict.

use results::host::audit::{Audit, HostFacts};

use crate::findings::{self};
use crate::host::Host;
use crate::hugepages::target;
use crate::kernel::{self};
use crate::memory::{self};
use crate::postgres::{self};
use results::host::kernel::KernelFacts;
use results::host::memory::MemoryFacts;
use results::host::pgquery::{PgFailure, ServerInfo};

/// The version of the audit JSON schema (docs/reference.md "Audit JSON"). Bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Reads the host facts (no PostgreSQL discovery).
pub fn host_facts(host: &Host) -> HostFacts {
    HostFacts {
        hostname: host.fact("/proc/sys/kernel/hostname"),
        host_id: crate::hostid::read(host),
        kernel: kernel::read(host),
        memory: memory::read(host),
    }
}

/// Runs the audit over `host`, with the server information already fetched for `--pg`.
pub fn audit(host: &Host, servers: &[ServerInfo]) -> Audit {
    audit_of(host, servers, &[])
}

/// Runs the audit over `host`, with the `--pg` servers that answered and those that could not be asked
/// (each a `pg-query-failed` finding; the rest of the audit stands).
pub fn audit_of(host: &Host, servers: &[ServerInfo], pg_failures: &[PgFailure]) -> Audit {
    audit_with(host, servers, pg_failures, postgres::Rollups::Read)
}

/// The audit without each PostgreSQL process's `smaps_rollup` ([`postgres::Rollups::Skip`]): the same
/// findings and verdict (none of them uses Pss), at a fraction of the cost on a server with many backends on
/// 4 KB pages. For `diagnose`, which runs beside a production load.
pub fn audit_light(host: &Host, servers: &[ServerInfo]) -> Audit {
    audit_with(host, servers, &[], postgres::Rollups::Skip)
}

fn audit_with(
    host: &Host,
    servers: &[ServerInfo],
    pg_failures: &[PgFailure],
    rollups: postgres::Rollups,
) -> Audit {
    let HostFacts {
        hostname,
        host_id,
        kernel,
        memory,
    } = host_facts(host);
    let (instances, unmatched_servers) = postgres::discover_with(host, servers, rollups);
    let pool_targets = target::for_host(&memory, &instances);
    let mut findings = findings::findings(
        &kernel,
        &memory,
        &instances,
        &unmatched_servers,
        &pool_targets,
    );
    findings.extend(pg_failures.iter().map(findings::pg_query_failed));
    findings::sort(&mut findings);
    let verdict = findings::verdict(&findings);
    Audit {
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        generated_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        sysroot: if host.is_live() {
            None
        } else {
            Some(host.root().display().to_string())
        },
        hostname,
        host_id,
        inventory_name: None,
        kernel,
        memory,
        instances,
        unmatched_servers,
        pg_failures: pg_failures.to_vec(),
        pool_targets,
        findings,
        verdict,
    }
}

/// The kernel facts alone (for callers that only need the preemption model).
pub fn kernel_facts(host: &Host) -> KernelFacts {
    kernel::read(host)
}

/// The memory facts alone.
pub fn memory_facts(host: &Host) -> MemoryFacts {
    memory::read(host)
}
