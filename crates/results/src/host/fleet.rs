//! The fleet's answer (hostfacts::fleet judges the audits into it).

use serde::{Deserialize, Serialize};

use super::findings::{FailOn, Verdict};
use super::kernel::PreemptModel;

impl FailOn {
    /// Why `fleet` fails this gate, if it does: hosts at or above the threshold, or no host assessed at
    /// all (every file failed: a gate that passes when nothing was assessed is no gate).
    pub fn fleet_failure(self, f: &Fleet) -> Option<String> {
        if f.hosts.is_empty() {
            return Some(format!(
                "--fail-on {}: no audit could be assessed ({} of {} files failed)",
                self.name(),
                f.totals.failed,
                f.totals.files
            ));
        }
        let failing = f
            .hosts
            .iter()
            .filter(|h| self.fails_verdict(h.verdict))
            .count();
        (failing > 0).then(|| {
            format!(
                "--fail-on {}: {failing} of {} hosts at or above it",
                self.name(),
                f.hosts.len()
            )
        })
    }
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fleet {
    /// Schema version of this document.
    pub schema_version: u32,
    /// "Now" as judged, seconds since the Unix epoch.
    pub now_unix_s: u64,
    /// Audits older than this many seconds are stale.
    pub stale_after_s: u64,
    /// Counts and sums over the fleet.
    pub totals: Totals,
    /// One row per host (its newest audit): at-risk first, then warn, then ok; within a verdict grouped
    /// by kernel release and preemption model, then by host name.
    pub hosts: Vec<HostRow>,
    /// Hosts per kernel release and preemption model, the groups with most at-risk hosts first.
    pub groups: Vec<Group>,
    /// Every PostgreSQL instance whose main segment is on 4 KB pages, with its pool size and fix; in
    /// host order.
    pub not_on_huge_pages: Vec<InstanceFix>,
    /// Hosts whose newest audit is older than `stale_after_s`, oldest first.
    pub stale: Vec<Stale>,
    /// Files that are not a readable audit, with the reason.
    pub failed: Vec<Failed>,
    /// The newest diagnosis of each host that sent one: instances with the symptom present first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnoses: Vec<DiagnosisRow>,
    /// Older audits of a host that also has a newer one (ignored).
    pub superseded: Vec<Superseded>,
}

/// Counts and sums over the fleet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Files read.
    pub files: usize,
    /// Hosts (newest audit of each).
    pub hosts: usize,
    /// Hosts with verdict at-risk.
    pub at_risk: usize,
    /// Hosts with verdict warn.
    pub warn: usize,
    /// Hosts with verdict ok.
    pub ok: usize,
    /// Hosts whose audit is stale.
    pub stale: usize,
    /// Files that are not a readable audit.
    pub failed: usize,
    /// Older audits ignored.
    pub superseded: usize,
    /// PostgreSQL instances seen.
    pub instances: usize,
    /// Instances whose main segment is on 4 KB pages.
    pub instances_4k: usize,
    /// Page-table memory of the instances on 4 KB pages now (sum of their processes' `VmPTE`), in kB:
    /// what huge pages would give back.
    pub page_tables_4k_kib: u64,
    /// The same at `max_connections` backends each touching the whole segment (the ceiling a long-running
    /// instance approaches), in kB, over the instances where it is known.
    pub page_tables_4k_full_touch_kib: u64,
    /// Memory the pools of the fixes would pin, in kB.
    pub fix_pinned_kib: u64,
}

/// One host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostRow {
    /// The host as shown: its inventory name (`audit --inventory-name`), else the kernel's host name,
    /// else the file name without `.json`.
    pub host: String,
    /// The kernel's host name (`/proc/sys/kernel/hostname`), when the audit read one.
    #[serde(default)]
    pub hostname: Option<String>,
    /// The inventory name the audit was given, if any.
    #[serde(default)]
    pub inventory_name: Option<String>,
    /// What tells this host from the others (one row per key, the newest audit winning): its host ID
    /// with its inventory name (`host-id ID name NAME`), its host ID alone, its inventory name alone, else
    /// its file (`file PATH`); a `--sysroot` audit's tree is part of it too.
    #[serde(default)]
    pub key: String,
    /// The audit file.
    pub file: String,
    /// The audit's `--sysroot`, when it read a copy instead of the host.
    pub sysroot: Option<String>,
    /// The audit's verdict.
    pub verdict: Verdict,
    /// Kernel release (`unknown` when unreadable).
    pub kernel: String,
    /// Effective preemption model.
    pub preempt_model: PreemptModel,
    /// Online CPUs.
    pub cpus: Option<u32>,
    /// When the audit ran, seconds since the Unix epoch.
    pub generated_unix_s: u64,
    /// Age of the audit at "now", in seconds (negative when the host's clock is ahead).
    pub age_s: i64,
    /// True when the audit is older than the stale limit.
    pub stale: bool,
    /// Critical findings.
    pub critical: usize,
    /// Warnings.
    pub warn: usize,
    /// Identifiers of the critical and warn findings, most severe first.
    pub finding_ids: Vec<String>,
    /// Title of the most severe finding above info.
    pub top_finding: Option<String>,
    /// PostgreSQL instances on the host.
    pub instances: usize,
    /// Of which on 4 KB pages.
    pub instances_4k: usize,
    /// Page tables of those instances now, in kB.
    pub page_tables_4k_kib: u64,
    /// The hugetlb pool the host needs, per page size its instances use (the audit's own targets: every
    /// instance's need plus the pages other users hold), with the pool it has.
    #[serde(default)]
    pub pools: Vec<HostPool>,
}

/// One page size's pool target of a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPool {
    /// Huge page size, in kB.
    pub page_size_kib: u64,
    /// The pool the host needs, in pages.
    pub target: u64,
    /// The operator's pool when audited (persistent pages less those preemptlab runs added for the
    /// moment); none when the host has no pool of this size.
    pub pool_now: Option<u64>,
    /// Pages the pool lacks for the target.
    pub shortfall: u64,
}

/// Hosts of one kernel release and preemption model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// Kernel release.
    pub kernel: String,
    /// Preemption model.
    pub preempt_model: PreemptModel,
    /// Hosts.
    pub hosts: usize,
    /// At-risk hosts.
    pub at_risk: usize,
    /// Warn hosts.
    pub warn: usize,
    /// Ok hosts.
    pub ok: usize,
    /// PostgreSQL instances on 4 KB pages.
    pub instances_4k: usize,
}

/// A PostgreSQL instance not on huge pages, and what fixes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceFix {
    /// Host name.
    pub host: String,
    /// The audit file.
    pub file: String,
    /// The postmaster's PID when audited.
    pub postmaster_pid: u32,
    /// Data directory.
    pub data_dir: Option<String>,
    /// Major version.
    pub version: Option<String>,
    /// `huge_pages` setting (`try`, `on`, `off`).
    pub huge_pages: Option<String>,
    /// Size of the main shared segment, in kB.
    pub segment_kib: Option<u64>,
    /// Page tables of the instance now, in kB.
    pub page_tables_kib: u64,
    /// Page tables at `max_connections` with every process touching the whole segment, in kB.
    pub page_tables_full_touch_kib: Option<u64>,
    /// The sizing, when the audit's facts allow one.
    pub sizing: Option<Sizing>,
    /// Why there is no sizing.
    pub unsized_reason: Option<String>,
    /// The exact fix, in order: the pool line, postgresql.conf lines, the restart.
    pub fix: Vec<String>,
}

/// A pool size for one instance, as `preemptlab hugepages` computes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sizing {
    /// Huge page size, in kB.
    pub page_size_kib: u64,
    /// What the figure rests on (`postgres`, `postgres_size`, `segment`, `vm_peak`).
    pub basis: String,
    /// Pages the instance needs, margin included.
    pub pages_needed: u64,
    /// The persistent pool of that size when audited (none: the host has no such pool).
    pub pool_now: Option<u64>,
    /// The pool size to set: the host's one target at that page size (every instance's need plus the pages
    /// other users hold), as the audit computed it; the same for every instance of the host.
    pub pool_target: u64,
    /// Memory this instance's pages will pin, in kB.
    pub pinned_kib: u64,
}

/// A host whose newest audit is too old.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stale {
    /// Host name.
    pub host: String,
    /// The audit file.
    pub file: String,
    /// When the audit ran, seconds since the Unix epoch.
    pub generated_unix_s: u64,
    /// Its age, in seconds.
    pub age_s: i64,
}

/// The newest diagnosis a host sent (`preemptlab diagnose --format json` files among the audits), one row per
/// observed instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiagnosisRow {
    /// Host name (the diagnosis' host facts; the file name without `.json` when it has none), followed by
    /// the start of its host ID when another diagnosed host has the same name.
    pub host: String,
    /// The host's ID (the diagnosis' host facts), when it has one: diagnoses are told apart by it, by the
    /// host name when it is absent (a diagnosis written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
    /// The file.
    pub file: String,
    /// When its window opened, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// The postmaster's PID.
    pub postmaster_pid: u32,
    /// Data directory, if known.
    pub data_dir: Option<String>,
    /// The verdict.
    pub symptom: crate::diagnose::Symptom,
    /// Client backends' on-CPU share in the spinlock slow path, %.
    pub spinlock_pct: f64,
    /// The samples behind it.
    pub client_samples: u64,
    /// Segment faults per second.
    pub segment_faults_per_s: f64,
    /// The segment's page size, kB, if known.
    pub segment_page_kib: Option<u64>,
    /// Switches while runnable with the fault path on the stack, per second.
    pub preempted_in_fault_per_s: f64,
}

/// A file that is not a readable audit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failed {
    /// The file.
    pub file: String,
    /// Why, and what to do.
    pub reason: String,
}

/// An older audit of a host that has a newer one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Superseded {
    /// Host name.
    pub host: String,
    /// The older file, ignored.
    pub file: String,
    /// The newer file, used.
    pub newer_file: String,
}
