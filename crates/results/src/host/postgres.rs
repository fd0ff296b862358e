//! Running PostgreSQL instances: processes, the shared segment, settings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::fact::Fact;
use super::memory::MemoryFacts;
use super::pgquery::ServerInfo;

/// A PostgreSQL setting as the audit knows it, with its source.
pub type SettingFact = Fact<String>;

/// What a PostgreSQL process is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The postmaster.
    Postmaster,
    /// An auxiliary process (checkpointer, background writer, walwriter, autovacuum, ...).
    Auxiliary,
    /// A client backend.
    Backend,
}

/// One process of an instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgProcess {
    /// PID.
    pub pid: u32,
    /// Postmaster, auxiliary or backend.
    pub role: Role,
    /// The process title (`postgres: checkpointer`, `postgres: app db [local] idle`).
    pub title: String,
    /// `VmPTE` in kB: this process's page tables.
    pub vm_pte_kib: Option<u64>,
    /// `Pss` in kB (smaps_rollup): proportional share of resident memory (hugetlb not counted).
    pub pss_kib: Option<u64>,
    /// `Rss` in kB (smaps_rollup).
    pub rss_kib: Option<u64>,
    /// `Shared_Hugetlb` in kB (smaps_rollup): hugetlb memory mapped and touched.
    pub shared_hugetlb_kib: Option<u64>,
}

/// The main shared memory segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// The mapping's name in smaps.
    pub mapping: String,
    /// Size in kB.
    pub size_kib: u64,
    /// `KernelPageSize` in kB: 4 on ordinary pages, 2048 or 1048576 on hugetlb.
    pub kernel_page_size_kib: u64,
    /// `ShmemPmdMapped` in kB: parts mapped by shmem THP (when `shmem_enabled` allows).
    pub thp_pmd_mapped_kib: u64,
    /// `Shared_Hugetlb` + `Private_Hugetlb` in kB in the postmaster.
    pub hugetlb_kib: u64,
}

impl Segment {
    /// True when the segment is on hugetlb pages.
    pub fn on_huge_pages(&self) -> bool {
        // hugetlb mappings are named /anon_hugepage (mmap) or keep a SysV name with a huge KernelPageSize.
        self.mapping.starts_with("/anon_hugepage") || self.kernel_page_size_kib >= 2048
    }
}

/// A running instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PgInstance {
    /// The postmaster's PID.
    pub postmaster_pid: u32,
    /// The executable.
    pub exe: Fact<String>,
    /// The data directory.
    pub data_dir: Fact<String>,
    /// Major version (PG_VERSION, or the server's `server_version` with `--pg`).
    pub version: Fact<String>,
    /// Port.
    pub port: Fact<u16>,
    /// Unix-socket directory.
    pub socket_dir: Fact<String>,
    /// The main shared memory segment.
    pub segment: Fact<Segment>,
    /// Whether the main segment is on huge pages.
    pub on_huge_pages: Fact<bool>,
    /// The postmaster's `VmPeak` in kB (the VmPeak sizing basis, docs/references.md#vmpeak-sizing).
    pub postmaster_vm_peak_kib: Fact<u64>,
    /// Every process of the instance, sorted by Pss, largest first.
    pub processes: Vec<PgProcess>,
    /// PIDs of the client backends.
    pub backend_pids: Vec<u32>,
    /// Sum of `VmPTE` over the instance's processes, in kB.
    pub page_tables_kib: u64,
    /// Page tables projected to `max_connections` backends at today's mean backend `VmPTE`, in kB.
    pub page_tables_projected_kib: Fact<u64>,
    /// Page tables if `max_connections` backends and the auxiliaries each touched the whole segment,
    /// in kB: the ceiling long-running hosts approach (docs/references.md#page-table-cost) after hours of running.
    pub page_tables_full_touch_kib: Fact<u64>,
    /// Settings that matter here, each with its source (server, command line, config file, default).
    pub settings: BTreeMap<String, SettingFact>,
    /// What `--pg` returned for this instance, if it was matched.
    pub server: Option<ServerInfo>,
    /// Set when the postmaster runs in a mount or PID namespace of its own (a container): where its
    /// files were read and its PID there (absent: it shares this host's, or files written before it
    /// existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<Container>,
    /// True for a throwaway cluster of `bench pg` (its postmaster runs with `cluster_name =`
    /// [`THROWAWAY_CLUSTER_NAME`]): its huge pages are the bench's for the run, not an instance's need.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preemptlab_throwaway: bool,
}

/// How an instance in namespaces of its own (a container: Docker, a Kubernetes pod, systemd
/// `RootDirectory=`) was seen from the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Container {
    /// The root its paths were read under (`/proc/PID/root`) when it has a mount namespace of its own:
    /// its executable, data directory, configuration and socket paths are its own namespace's, and the
    /// same paths on the host name nothing or other files.
    pub root: Option<String>,
    /// Its PID inside its own PID namespace (the last `NSpid` of /proc/PID/status), when that differs from
    /// the host's: postmaster.pid and `pg_backend_pid()` give PIDs of that namespace.
    pub pid_in_namespace: Option<u32>,
    /// Its cgroup v2 path (/proc/PID/cgroup), which names the container's unit or scope.
    pub cgroup: Option<String>,
    /// Its socket directory as this host reaches it (under `root`, links followed inside it): what
    /// `--pg 'host=... port=...'` takes to connect from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_dir_from_host: Option<String>,
}

/// The `cluster_name` `bench pg` gives its throwaway clusters.
pub const THROWAWAY_CLUSTER_NAME: &str = "preemptlab-throwaway";

impl PgInstance {
    /// A setting's value, if known.
    pub fn setting(&self, name: &str) -> Option<&str> {
        self.settings
            .get(name)
            .and_then(|f| f.get())
            .map(String::as_str)
    }

    /// `max_connections`, if known.
    pub fn max_connections(&self) -> Option<u64> {
        self.setting("max_connections").and_then(|s| s.parse().ok())
    }

    /// The shared memory size in kB: the server's `shared_memory_size` or the segment's size.
    pub fn shared_memory_kib(&self) -> Option<u64> {
        if let Some(s) = self
            .server
            .as_ref()
            .and_then(|s| s.settings.get("shared_memory_size"))
        {
            if let Ok(b) = super::bytes::pg_memory(&s.setting, s.unit.as_deref()) {
                return Some(b.kib());
            }
        }
        self.segment.get().map(|s| s.size_kib)
    }
}

/// The huge page size an instance would use: `huge_page_size` if set (PG 14+), else the default.
pub fn instance_huge_page_kib(inst: &PgInstance, mem: &MemoryFacts) -> Option<u64> {
    let configured = inst.setting("huge_page_size").and_then(huge_page_size_kib);
    configured
        .or_else(|| mem.default_huge_page_kib.get().copied())
        .filter(|k| *k > 0)
}

/// Parses a `huge_page_size` value (`0`, `2048` in kB as pg_settings gives it, `2MB`, `0kB`); `None`
/// for 0, which means "the kernel's default".
pub fn huge_page_size_kib(s: &str) -> Option<u64> {
    let kib = if s.chars().all(|c| c.is_ascii_digit()) {
        s.parse::<u64>().ok()?
    } else {
        super::bytes::size(s).ok()?.kib()
    };
    (kib > 0).then_some(kib)
}
