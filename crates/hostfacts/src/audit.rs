//! The audit: every fact, every finding, one verdict.

use serde::{Deserialize, Serialize};

use crate::fact::Fact;
use crate::findings::{self, Finding, Verdict};
use crate::host::Host;
use crate::hostpool::{self, PoolTarget};
use crate::kernel::{self, KernelFacts};
use crate::memory::{self, MemoryFacts};
use crate::pgquery::ServerInfo;
use crate::postgres::{self, PgInstance};

/// The version of the audit JSON schema (GUIDE.md "Audit JSON"). Bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything the audit found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Audit {
    /// Schema version of this document.
    pub schema_version: u32,
    /// preemptlab's version.
    pub tool_version: String,
    /// Seconds since the Unix epoch when the audit ran.
    pub generated_unix_s: u64,
    /// The `--sysroot` read instead of this host, if any.
    pub sysroot: Option<String>,
    /// Host name.
    pub hostname: Fact<String>,
    /// Kernel and preemption.
    pub kernel: KernelFacts,
    /// Memory, huge pages, THP.
    pub memory: MemoryFacts,
    /// Running PostgreSQL instances.
    pub instances: Vec<PgInstance>,
    /// `--pg` servers that are not local instances.
    pub unmatched_servers: Vec<ServerInfo>,
    /// The hugetlb pool this host needs, one per page size its instances use: every instance's need and
    /// the pages committed to other users ([`crate::hostpool`]). Absent in audits written before it was kept
    /// (`fleet` then computes it from the facts).
    #[serde(default)]
    pub pool_targets: Vec<PoolTarget>,
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
    /// ok, warn or at-risk.
    pub verdict: Verdict,
}

impl Audit {
    /// The host's pool targets: as recorded, or computed from the facts for an audit written before they
    /// were kept.
    pub fn pool_targets(&self) -> std::borrow::Cow<'_, [PoolTarget]> {
        if self.pool_targets.is_empty() && !self.instances.is_empty() {
            std::borrow::Cow::Owned(hostpool::for_host(&self.memory, &self.instances))
        } else {
            std::borrow::Cow::Borrowed(&self.pool_targets)
        }
    }
}

/// Host facts without PostgreSQL: what every result file records about the machine it ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    /// Host name.
    pub hostname: Fact<String>,
    /// Kernel and preemption.
    pub kernel: KernelFacts,
    /// Memory, huge pages, THP.
    pub memory: MemoryFacts,
}

/// Reads the host facts (no PostgreSQL discovery).
pub fn host_facts(host: &Host) -> HostFacts {
    HostFacts {
        hostname: host.fact("/proc/sys/kernel/hostname"),
        kernel: kernel::read(host),
        memory: memory::read(host),
    }
}

/// Runs the audit over `host`, with the server information already fetched for `--pg`.
pub fn audit(host: &Host, servers: &[ServerInfo]) -> Audit {
    let HostFacts {
        hostname,
        kernel,
        memory,
    } = host_facts(host);
    let (instances, unmatched_servers) = postgres::discover(host, servers);
    let pool_targets = hostpool::for_host(&memory, &instances);
    let findings = findings::findings(
        &kernel,
        &memory,
        &instances,
        &unmatched_servers,
        &pool_targets,
    );
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
        kernel,
        memory,
        instances,
        unmatched_servers,
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
