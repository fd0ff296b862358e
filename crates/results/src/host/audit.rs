//! Audit and the host facts every result file carries (hostfacts reads them).

use serde::{Deserialize, Serialize};

use super::fact::Fact;
use super::findings::{Finding, Verdict};
use super::hugepages::PoolTarget;
use super::kernel::KernelFacts;
use super::memory::MemoryFacts;
use super::pgquery::{PgFailure, ServerInfo};
use super::postgres::PgInstance;

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
    /// The host's ID: its machine ID (`/etc/machine-id`) hashed for preemptlab (`hostfacts::hostid`), unique
    /// per installation where host names are not; in a `preemptlab vm` guest `vm-` and its own ID, given on
    /// its kernel command line (`preemptlab.host_id=`). Unavailable in audits written before it was kept.
    #[serde(default = "host_id_not_kept")]
    pub host_id: Fact<String>,
    /// The name the host goes by in the operator's inventory (`audit --inventory-name`, which the Ansible
    /// role passes), if given: `fleet` shows it and tells hosts apart by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inventory_name: Option<String>,
    /// Kernel and preemption.
    pub kernel: KernelFacts,
    /// Memory, huge pages, THP.
    pub memory: MemoryFacts,
    /// Running PostgreSQL instances.
    pub instances: Vec<PgInstance>,
    /// `--pg` servers that are not local instances.
    pub unmatched_servers: Vec<ServerInfo>,
    /// `--pg` servers that could not be asked (finding `pg-query-failed`): the rest of the audit stands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pg_failures: Vec<PgFailure>,
    /// The hugetlb pool this host needs, one per page size its instances use: every instance's need and
    /// the pages committed to other users (`hostfacts::hugepages::target`). Absent in audits written before it was
    /// kept (`fleet` then computes it from the facts).
    #[serde(default)]
    pub pool_targets: Vec<PoolTarget>,
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
    /// ok, warn or at-risk.
    pub verdict: Verdict,
}

fn host_id_not_kept() -> Fact<String> {
    Fact::unavailable(
        "/etc/machine-id",
        "not recorded (written before preemptlab kept the host ID)",
    )
}

/// Host facts without PostgreSQL: what every result file records about the machine it ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    /// Host name.
    pub hostname: Fact<String>,
    /// The host's ID, as the audit keeps it ([`Audit::host_id`]): `fleet` tells two diagnosed hosts that
    /// share a host name apart by it. Unavailable in results written before it was kept.
    #[serde(default = "host_id_not_kept")]
    pub host_id: Fact<String>,
    /// Kernel and preemption.
    pub kernel: KernelFacts,
    /// Memory, huge pages, THP.
    pub memory: MemoryFacts,
}
