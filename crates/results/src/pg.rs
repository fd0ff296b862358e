//! `bench pg`: the builds x shared_buffers x huge_pages x clients matrix over pgbench or sysbench, and the
//! /proc samples of the cluster taken during each run.

use axes::{Count, Driver, HugePages, Pooler, Protocol, PssWhen};
use serde::{Deserialize, Serialize};
use stats::Summary;

use crate::{Envelope, Status};

/// The experiment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Spec {
    /// `huge_pages` settings: off, on, try.
    pub huge_pages: Vec<HugePages>,
    /// `shared_buffers` settings, as given (e.g. 2GB).
    pub shared_buffers: Vec<String>,
    /// Client counts as given (numbers or multiples of CPUs).
    pub clients_given: Vec<Count>,
    /// Client counts.
    pub clients: Vec<u32>,
    /// Scale: pgbench's scaling factor; sysbench gets one table of scale x 100000 rows (the same rows).
    pub scale: u32,
    /// pgbench: select-only, simple-update, tpcb-like or a file; sysbench: an OLTP test name or a .lua file.
    pub script: String,
    /// The custom script's text, when `script` is a file.
    pub script_text: Option<String>,
    /// pgbench or sysbench.
    pub driver: Driver,
    /// pgbouncer, or none.
    pub pooler: Option<Pooler>,
    /// pgbench's query protocol: simple, extended, prepared (sysbench: prepared or simple).
    pub protocol: Protocol,
    /// A new connection per transaction (pgbench -C).
    pub reconnect: bool,
    /// Load every table and index into shared_buffers with pg_prewarm after each start.
    pub prewarm: bool,
    /// Attach `diagnose` to the cluster during each measured run (`--diagnose`).
    #[serde(default)]
    pub diagnose: bool,
    /// Measured seconds per run.
    pub duration_s: u64,
    /// Warm-up seconds per run (a separate driver run just before, not measured).
    pub warmup_s: u64,
    /// Rounds.
    pub repeat: u32,
    /// Driver threads (pgbench -j, at most the clients).
    pub threads: u32,
    /// Fraction of transactions pgbench logs for the latency percentiles (0: none).
    pub latency_sample: f64,
    /// Extra server settings (`--set name=value`).
    pub settings: Vec<(String, String)>,
    /// The huge page size the server uses (the host's default), kB.
    pub huge_page_kib: u64,
    /// PostgreSQL's binary directories, comma-separated (one per build).
    pub pg_bin: String,
    /// PostgreSQL's versions (`postgres --version`), comma-separated (one per build).
    pub pg_version: Option<String>,
    /// The builds, in the order given (`--pg-bin`): the outermost axis of the matrix. Empty in files made
    /// before builds were an axis (one build: `pg_bin`).
    #[serde(default)]
    pub builds: Vec<Build>,
    /// Seconds between /proc samples.
    pub sample_interval_s: f64,
    /// When the samples read Pss: `end` (once, a second before the measured run ends), `every` sample,
    /// or `never` (reading it walks every backend's page tables; see `pgharness::procsample::Pss`).
    pub pss: PssWhen,
}

/// A PostgreSQL build the bench ran: one value of the builds axis.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Build {
    /// The name it was given by: a build of `scripts/pg-build` (`18`, `18+rseq-spinlock`) or the bin
    /// directory.
    pub name: String,
    /// The directory of its binaries.
    pub bin_dir: String,
    /// Its version (`postgres --version`: `18.6`).
    pub version: Option<String>,
    /// Its configure flags (scripts/pg-build's manifest, else `pg_config --configure`).
    pub configure: Option<String>,
    /// The patches scripts/pg-build applied, in order; empty for a stock or a distribution build.
    pub patches: Vec<BuildPatch>,
    /// Where its source came from: `postgresql-18 18.6-3 (Debian source package, upstream tarball)` for a
    /// build of scripts/pg-build; `None` when nobody said (a distribution's binaries).
    pub source: Option<String>,
}

/// A patch in a build.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BuildPatch {
    /// Its name (`patches/NAME/`).
    pub name: String,
    /// The patch file, relative to the project.
    pub file: String,
    /// The file's sha256.
    pub sha256: String,
}

/// What the rseq time-slice extension did for the server's spinlock holders during one measured run: the
/// difference of `SHOW rseq_slice.counters` (a build with the `rseq-spinlock` patch) read just before the
/// run and after it, once the run's backends had exited (each adds its counts when it exits).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RseqSlice {
    /// The extension was on in the server (`enabled=on`).
    pub enabled: bool,
    /// Why not, as the server said (`enabled=off`).
    pub why: Option<String>,
    /// Server processes whose counts are in the figures.
    pub processes: u64,
    /// Spinlock critical sections entered with a request for an extension.
    pub requests: u64,
    /// Critical sections the kernel extended instead of preempting the holder.
    pub grants: u64,
    /// `rseq_slice_yield` calls that gave the CPU back within the grant.
    pub yields: u64,
    /// Requests the kernel cleared without a grant (the holder was scheduled out, or made a system call).
    pub cleared: u64,
    /// Client backends still connected when the counters were read after the run (a pooler's server
    /// connections): their counts are not in the figures.
    pub backends_left: u64,
}

/// Latency of one run, ms. Mean and stddev over every transaction (driver summary); the percentiles from
/// pgbench's sampled per-transaction log (`latency_sample`) or sysbench's report (p99 and max only).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    /// Mean.
    pub mean: Option<f64>,
    /// Standard deviation.
    pub stddev: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Maximum (of the sampled transactions for pgbench).
    pub max: Option<f64>,
    /// Transactions behind the percentiles.
    pub sampled: u64,
}

/// One second of the driver's own report.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Point {
    /// Seconds since the measured run started.
    pub t_s: f64,
    /// Transactions per second in that second.
    pub tps: f64,
    /// pgbench: the second's mean latency; sysbench: its p99; ms.
    pub latency_ms: f64,
}

/// The shared-memory segment as the postmaster maps it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SegmentCheck {
    /// True when the main segment is on hugetlb pages (or wholly PMD-mapped THP).
    pub on_huge_pages: bool,
    /// Segment size, kB.
    pub size_kib: u64,
    /// Its KernelPageSize, kB.
    pub kernel_page_size_kib: u64,
    /// `SHOW huge_pages_status` (PostgreSQL 17+).
    pub huge_pages_status: Option<String>,
}

/// One measured run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Rep {
    /// Round (0-based).
    pub round: u32,
    /// Transactions per second without connection time (pgbench -C: including reconnections, as pgbench
    /// reports it).
    pub tps: f64,
    /// Transactions.
    pub transactions: u64,
    /// Failed transactions (pgbench 15+) or ignored errors (sysbench).
    pub failed: u64,
    /// Latency.
    pub latency_ms: Latency,
    /// pgbench's initial (or, with -C, average) connection time, ms.
    pub connection_ms: Option<f64>,
    /// The per-second series.
    pub series: Vec<Point>,
    /// Peak over the run of the sum of VmPTE over the cluster's processes, kB.
    pub page_tables_kib: u64,
    /// Peak of the sum of Pss over the cluster's processes, kB (over the samples that read it; 0 when
    /// none did).
    pub pss_kib: u64,
    /// Peak of the host's PageTables during the run, kB.
    pub host_page_tables_kib: u64,
    /// The cluster's minor faults per transaction.
    pub minflt_per_tx: f64,
    /// The cluster's involuntary context switches per transaction.
    pub nivcsw_per_tx: f64,
    /// The cluster's voluntary context switches per transaction.
    pub nvcsw_per_tx: f64,
    /// The /proc samples.
    pub sampled: Sampled,
    /// The segment, read after the run.
    pub segment: SegmentCheck,
    /// Hypervisor CPU steal during the run, % of CPU time.
    pub steal_pct: Option<f64>,
    /// Rescheduling interrupts the machine's CPUs took during the measured run, per transaction (every CPU
    /// and task, the driver's included, from /proc/interrupts): a wakeup that should preempt a task running
    /// on another CPU sends one under `none`, `voluntary` and `full` and only sets the lazy flag under
    /// `lazy`. Null where the kernel prints no such row or the file cannot be read, and in results written
    /// before 2026-11-27.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resched_ipis_per_tx: Option<f64>,
    /// Function call interrupts during the measured run, per transaction (as above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_ipis_per_tx: Option<f64>,
    /// The driver's command line.
    pub command: Vec<String>,
    /// `--diagnose`: the cluster observed during the measured run (its per-second series included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<Box<crate::diagnose::InstanceDiagnosis>>,
    /// `--diagnose`: what the diagnosis could not measure, or why it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnosis_unmeasured: Vec<crate::diagnose::Unmeasured>,
    /// The rseq time-slice extension's counters over the run (builds that have them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rseq_slice: Option<RseqSlice>,
}

/// Centres and spreads over a cell's runs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellSummary {
    /// TPS.
    pub tps: Summary,
    /// p99 latency, ms (when measured).
    pub latency_p99_ms: Option<Summary>,
    /// Cluster page tables (peak sum of VmPTE), kB.
    pub page_tables_kib: Summary,
    /// Cluster Pss (peak sum), kB.
    pub pss_kib: Summary,
    /// Minor faults per transaction.
    pub minflt_per_tx: Summary,
    /// True when every run's segment was on huge pages.
    pub on_huge_pages: bool,
}

/// One cell: a build x shared_buffers x huge_pages x clients combination.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cell {
    /// The build it ran (absent in files made before builds were an axis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<Build>,
    /// shared_buffers.
    pub shared_buffers: String,
    /// huge_pages.
    pub huge_pages: HugePages,
    /// Clients.
    pub clients: u32,
    /// The preemption model it ran under, when the run switched between models (`--switch-preempt
    /// none,lazy`); otherwise absent, and the model is the host's (`host.kernel.preemption`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt: Option<axes::model::Model>,
    /// Ran, skipped, failed, interrupted.
    pub status: Status,
    /// Why it was skipped or failed.
    pub reason: Option<String>,
    /// The server settings it ran with.
    pub server_settings: Vec<(String, String)>,
    /// Huge pages the server needed (`shared_memory_size_in_huge_pages`), when known.
    pub hugepages_needed: Option<u64>,
    /// Free huge pages of the run's size seen before the server started, when the run counted on them
    /// instead of reserving (no `--reserve-hugepages`); another user of the pool can take them meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages_free_seen: Option<u64>,
    /// Every run.
    pub reps: Vec<Rep>,
    /// Summary over the runs.
    pub summary: Option<CellSummary>,
}

/// Setup facts of the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Setup {
    /// Seconds spent loading the data (pgbench -i / sysbench prepare).
    pub load_s: f64,
    /// Seconds the sync after loading took (the load's dirty pages written back before measuring).
    pub sync_s: f64,
    /// Database size after loading, bytes.
    pub db_bytes: Option<u64>,
    /// Blocks pg_prewarm loaded at the last start.
    pub prewarmed_blocks: Option<u64>,
}

/// A `bench pg` result file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PgResult {
    /// Tool, command line, time, host.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// The experiment.
    pub spec: Spec,
    /// Setup facts (of the first build).
    pub setup: Setup,
    /// Setup facts per build, in the order of `spec.builds` (each build has its own cluster and load).
    #[serde(default)]
    pub setups: Vec<Setup>,
    /// The cells, in matrix order (build, shared_buffers, huge_pages, clients).
    pub cells: Vec<Cell>,
}

/// The tree and the host at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the sampler started.
    pub t_s: f64,
    /// Processes in the tree.
    pub processes: u32,
    /// Sum of VmPTE over the tree, kB.
    pub vm_pte_kib: u64,
    /// Sum of Pss over the tree, kB, when this sample read it.
    pub pss_kib: Option<u64>,
    /// Sum of RssShmem over the tree, kB.
    pub rss_shmem_kib: u64,
    /// Sum of minor faults over the tree (processes alive now).
    pub minflt: u64,
    /// Sum of voluntary context switches.
    pub nvcsw: u64,
    /// Sum of involuntary context switches.
    pub nivcsw: u64,
    /// /proc/meminfo PageTables, kB (the whole host).
    pub host_page_tables_kib: u64,
    /// /proc/meminfo HugePages_Free.
    pub hugepages_free: u64,
    /// /proc/meminfo HugePages_Rsvd.
    pub hugepages_rsvd: u64,
}

/// What a sampling run returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampled {
    /// One sample per interval, the first at the start and the last at the stop.
    pub samples: Vec<Sample>,
    /// Minor faults of the tree during the run: per PID, the last value seen minus the first (0 for PIDs
    /// born during the run).
    pub minflt: u64,
    /// Voluntary context switches during the run (same rule).
    pub nvcsw: u64,
    /// Involuntary context switches during the run (same rule).
    pub nivcsw: u64,
}

impl Sampled {
    /// The peak of the tree's page tables, kB.
    pub fn peak_vm_pte_kib(&self) -> u64 {
        self.samples.iter().map(|s| s.vm_pte_kib).max().unwrap_or(0)
    }
    /// The peak of the tree's Pss, kB.
    pub fn peak_pss_kib(&self) -> u64 {
        self.samples
            .iter()
            .filter_map(|s| s.pss_kib)
            .max()
            .unwrap_or(0)
    }
    /// The peak of the host's PageTables, kB.
    pub fn peak_host_page_tables_kib(&self) -> u64 {
        self.samples
            .iter()
            .map(|s| s.host_page_tables_kib)
            .max()
            .unwrap_or(0)
    }
}
