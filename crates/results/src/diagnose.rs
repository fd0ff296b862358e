//! `diagnose`: a read-only observation of running PostgreSQL instances over a window, and its verdict.
//!
//! The engine that fills these is the `diagnose` crate; the thresholds and their basis are in its `judge`
//! module and in GUIDE.md ("diagnose"). Every count here is measured; shares come with the sample counts
//! they were computed from and a 95% Wilson interval.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Envelope;

/// A `diagnose` result file (`kind` = `diagnose`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DiagnoseResult {
    /// Tool, command line, time, host (its kernel facts hold the preemption model and its evidence).
    #[serde(flatten)]
    pub envelope: Envelope,
    /// What was asked and how it was sampled.
    pub spec: Spec,
    /// One line per thing that could not be measured, and why.
    pub unmeasured: Vec<Unmeasured>,
    /// One per observed instance.
    pub instances: Vec<InstanceDiagnosis>,
}

/// How the window was sampled.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Spec {
    /// The window asked for, seconds.
    pub duration_s: f64,
    /// The window observed, seconds (shorter when interrupted or when every instance exited).
    pub observed_s: f64,
    /// cpu-clock sampling frequency per CPU, Hz.
    pub cpu_clock_hz: u64,
    /// One page-fault sample per this many faults at least (each sample counts as the period it was
    /// taken at).
    pub fault_period: u64,
    /// The bound on fault samples a second the period was raised for (`--fault-samples`; absent: files
    /// written before it existed, a fixed period, or 0, no bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_samples_max: Option<u64>,
    /// The highest period the faults were sampled at, when the bound raised it above `fault_period`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_period_max: Option<u64>,
    /// The faults counted a second per CPU above which the fault event was on for only part of each
    /// second (`--fault-counts`; absent: files written before it existed, or 0, on all the time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_counts_max: Option<u64>,
    /// The lowest share of a second the fault event was on in, percent, when that bound lowered it
    /// (each sample then counted 100 / this many times its period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_duty_pct_min: Option<u32>,
    /// Seconds the fault event was really on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_on_s: Option<f64>,
    /// Postmaster PIDs asked for (`--pid`); empty: every instance found.
    pub pids: Vec<u32>,
    /// `--pg` servers (passwords removed).
    pub dsns: Vec<String>,
    /// Seconds between wait-event samples (`--pg`).
    pub wait_sample_interval_s: f64,
    /// The kernel filter set on the sched_switch tracepoint, if one was accepted.
    pub sched_switch_filter: Option<String>,
    /// Where kernel frames got their names: the running kernel asked per address (BPF), `/proc/kallsyms`, or
    /// the running kernel's System.map with the boot's KASLR offset (checked against /proc/kallsyms and
    /// /proc/iomem); with why BPF or a map present was not used (absent: files written before it existed,
    /// which read /proc/kallsyms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_symbols: Option<String>,
    /// Which tasks the perf events watched, and why (absent in files written before it existed: those
    /// were system-wide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<EventScope>,
    /// The perf events opened when `--events` left some out (`cpu`, `faults`, `switches`); absent: all
    /// three.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<String>>,
    /// Share of each second the sched_switch tracepoint was on, percent (absent: files written before it
    /// existed, on all the time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_duty_pct: Option<u32>,
    /// Seconds the tracepoint was really on: the switch counts are of this time, their rates divide by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_on_s: Option<f64>,
    /// Share of each second the on-CPU samples were on, percent (absent: files written before it existed,
    /// on all the time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_duty_pct: Option<u32>,
    /// Seconds the on-CPU samples were really on (the sample counts are of this time; their shares need
    /// no scaling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_on_s: Option<f64>,
    /// Seconds every perf event was off at `--control`'s `disable` (absent without `--control`); the
    /// fault and switch rates are of the time they were on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_off_s: Option<f64>,
    /// On-CPU samples of every task the events watched (the whole machine, idle included, or with a cgroup
    /// scope the cgroups' tasks; absent: files written before it existed, or the samples not taken): an
    /// instance's samples over this are its share of that time, the figure `perf record -a` gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_samples_all: Option<u64>,
    /// perf records the reader could not decode, left uncounted (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unparsed_records: Option<u64>,
    /// CLOCK_MONOTONIC at the window's start, ns: lines the result up with another tool's records of the
    /// same window (`perf record -k mono`; scripts/diagnose-vs-perf). Absent in files written before it
    /// existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start_monotonic_ns: Option<u64>,
}

impl Spec {
    /// True when the event of this `--events` name (`cpu`, `faults`, `switches`) was asked for.
    pub fn opened(&self, name: &str) -> bool {
        self.events
            .as_ref()
            .is_none_or(|e| e.iter().any(|n| n == name))
    }
}

/// Which tasks the perf events watched.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ScopeKind {
    /// Every task on every CPU (pid = -1); the instance's processes picked out in user space.
    System,
    /// Only tasks in the instances' cgroup2 directories (PERF_FLAG_PID_CGROUP), one event set per cgroup.
    Cgroup,
}

impl ScopeKind {
    /// The name used on the command line and in the result.
    pub fn name(self) -> &'static str {
        match self {
            ScopeKind::System => "system",
            ScopeKind::Cgroup => "cgroup",
        }
    }
}

/// The scope the events were opened with, and why that one.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct EventScope {
    /// System-wide or per cgroup.
    pub kind: ScopeKind,
    /// The cgroup2 directories watched (paths under the cgroup2 mount), for `cgroup`.
    pub cgroups: Vec<String>,
    /// Why this scope (what was asked, and the reason a cgroup scope was not used when it was not).
    pub why: String,
}

/// Something the run could not measure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Unmeasured {
    /// What is missing (`on-CPU samples`, `page-fault samples`, `sched_switch`, `kernel symbols`, ...).
    pub what: String,
    /// Why, with the fix where there is one.
    pub why: String,
}

/// The instance's main shared memory segment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Segment {
    /// The mapping's name (`/dev/zero (deleted)`, `/anon_hugepage (deleted)`, `/SYSV...`).
    pub mapping: String,
    /// Size, kB.
    pub size_kib: u64,
    /// The kernel page size backing it (smaps `KernelPageSize`), kB.
    pub page_size_kib: u64,
    /// True on hugetlb pages.
    pub on_huge_pages: bool,
    /// Where the address range was read (`/proc/PID/maps`).
    pub source: String,
}

/// The audit's context for the instance: what the verdict's fix rests on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Context {
    /// The kernel's preemption model (`none`, `voluntary`, `full`, `lazy`, ...).
    pub preemption_model: String,
    /// The source that decided it.
    pub preemption_decided_by: Option<String>,
    /// `huge_pages` as the audit found it, with its source.
    pub huge_pages: Option<String>,
    /// The audit's findings about this instance (id and title).
    pub findings: Vec<String>,
    /// The audit's fix for this instance, its exact lines (pool size, postgresql.conf, restart).
    pub fix: Vec<String>,
}

/// A share of samples with its 95% Wilson interval.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Share {
    /// Samples in the part.
    pub samples: u64,
    /// Samples in the whole.
    pub of: u64,
    /// samples / of, % (0 when `of` is 0).
    pub pct: f64,
    /// Lower bound of the 95% Wilson interval, %.
    pub lo_pct: f64,
    /// Upper bound, %.
    pub hi_pct: f64,
}

/// On-CPU sample counts by what the sampled code was doing (a sample is in exactly one category).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Categories {
    /// Every cpu-clock sample of the instance's processes.
    pub samples: u64,
    /// User leaf in PostgreSQL's spinlock slow path (`s_lock`, `perform_spin_delay`, ...).
    pub spinlock: u64,
    /// User leaf in an LWLock function (`LWLockAcquire`, `LWLockAttemptLock`, `LWLockWaitListLock`, ...).
    pub lwlock: u64,
    /// In the kernel, under the page-fault path (`exc_page_fault`, `handle_mm_fault`, ...).
    pub page_fault: u64,
    /// In the kernel, in the scheduler (`__schedule`, `schedule`, `finish_task_switch`, ...).
    pub scheduler: u64,
    /// In the kernel, elsewhere (system calls, interrupts).
    pub kernel_other: u64,
    /// In user space, elsewhere.
    pub user_other: u64,
}

/// Context switches of the instance's processes seen by the `sched_switch` tracepoint.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Switches {
    /// Switched out while runnable (prev_state R or R+): preempted or yielding, not sleeping.
    pub runnable: u64,
    /// Of those, with the page-fault path on the kernel stack.
    pub runnable_in_fault: u64,
    /// ... preempted inside the kernel (`preempt_schedule_irq`, `preempt_schedule*`): impossible under
    /// `none` and `voluntary`, the report's mechanism under `full` and `lazy`.
    pub in_fault_kernel_preemption: u64,
    /// ... at a voluntary point inside the fault (`cond_resched`): `none` and `voluntary` only.
    pub in_fault_voluntary: u64,
    /// ... on the return to user space after the fault (every model).
    pub after_fault_return_to_user: u64,
    /// ... some other way.
    pub in_fault_other: u64,
    /// Runnable switches preempted inside the kernel anywhere (not only in a fault).
    pub kernel_preemption: u64,
}

/// One second of the window, for one instance.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Second {
    /// Seconds since the window opened (end of this second).
    pub t_s: f64,
    /// Processes of the instance alive at the scan.
    pub processes: u32,
    /// Processes that appeared during this second.
    pub started: u32,
    /// On-CPU samples by category.
    pub cpu: Categories,
    /// Page faults in the main segment (each sample counted as its period).
    pub segment_faults: u64,
    /// Page faults elsewhere (each sample counted as its period).
    pub other_faults: u64,
    /// Minor faults by the kernel's own per-process counters (/proc/PID/stat, exited children through the
    /// postmaster's cminflt).
    pub minflt: u64,
    /// Involuntary context switches (/proc/PID/status), live processes.
    pub nivcsw: u64,
    /// Voluntary context switches, live processes.
    pub nvcsw: u64,
    /// Time spent runnable but waiting for a CPU (/proc/PID/schedstat), ms, live processes.
    pub runqueue_wait_ms: f64,
    /// CPU time (/proc/PID/stat utime + stime, exited children through cutime + cstime), ms.
    pub cpu_ms: f64,
    /// sched_switch counts, of the part of this second the tracepoint was on (`Spec::switch_duty_pct`).
    pub switches: Switches,
    /// Wait-event samples of active client backends (`--pg`), by event (`CPU` when none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub waits: BTreeMap<String, u64>,
}

/// Totals over the window for one kind of process (client backend, checkpointer, ...).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ByType {
    /// `client backend`, `postmaster`, `checkpointer`, ... or `short-lived (title unread)`: a postmaster
    /// child that exited before its title could be read (nearly always a connection).
    pub process_type: String,
    /// Processes of this type seen.
    pub processes: u64,
    /// On-CPU samples by category.
    pub cpu: Categories,
    /// Page faults in the segment (scaled).
    pub segment_faults: u64,
    /// Runnable switches and their split.
    pub switches: Switches,
    /// Of `processes`, those typed from the functions on a sampled call stack (`PostgresMain`,
    /// `AutoVacWorkerMain`, ...) because they exited before their title was read (absent when none was,
    /// and in files written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typed_by_stack: Option<u64>,
}

/// A function's share of the instance's on-CPU samples.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FunctionShare {
    /// The leaf function (`s_lock`, `[k] clear_page_erms`, `libc.so.6:?`).
    pub function: String,
    /// Its category (`spinlock`, `lwlock`, `page_fault`, `scheduler`, `kernel_other`, `user_other`).
    pub category: String,
    /// Samples.
    pub samples: u64,
    /// Share of the instance's samples, %.
    pub pct: f64,
}

/// An instance's executable, read through the process that runs it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Binary {
    /// Its path as the instance sees it (in the instance's own mount namespace).
    pub path: String,
    /// How it was read: `/proc/PID/map_files/START-END`, the mapped file itself, whatever the path holds
    /// now or in this mount namespace; else the path in the instance's root when that is the mapped file,
    /// or why it could not be read.
    pub read_through: String,
    /// The GNU build ID of the mapped file, hex.
    pub build_id: Option<String>,
    /// True when the file at its path is no longer the one running (deleted or replaced, as a package
    /// upgrade does before the restart): the server runs the old build until it restarts.
    pub replaced_on_disk: Option<bool>,
    /// Which tables name its functions (`.symtab`, or `.dynsym` only), and a debug file found by its
    /// build ID.
    pub symbols: String,
    /// Whether its code keeps frame pointers, which naming callers needs (None: not known).
    pub frame_pointers: Option<bool>,
    /// What that was read off.
    pub frame_pointer_evidence: String,
}

/// On-CPU samples of one call chain.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CallChain {
    /// The leaf, then its callers (`s_lock <- StrategyGetBuffer <- GetVictimBuffer`).
    pub chain: String,
    /// Samples.
    pub samples: u64,
    /// Share of the instance's spinlock samples, %.
    pub pct: f64,
}

/// Wait events of the instance's active client backends, sampled through `--pg`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Waits {
    /// The server (password removed).
    pub dsn: String,
    /// Samples taken (each one a read of pg_stat_activity).
    pub reads: u64,
    /// Active client backends seen in the reads, each counted once (by pid). Results written before
    /// `sightings` existed hold the sightings here.
    pub backends_seen: u64,
    /// Active client backends seen over all reads, a backend once per read it was seen in (the sum of
    /// `events` and `waiting_on_client`).
    pub sightings: Option<u64>,
    /// By `type:event` (`CPU` for an active backend with no wait event), largest first; waits on the
    /// client (`Client:*`) are not among them.
    pub events: Vec<(String, u64)>,
    /// Sightings of active backends waiting on their client (`Client:ClientRead`, `Client:ClientWrite`:
    /// between the messages of an extended-protocol query, or a slow client): the client's time, not
    /// the server's, so kept out of `events`.
    pub waiting_on_client: Option<u64>,
    /// Buffers evicted (or allocated, see `evictions_source`) per second over the window.
    pub evictions_per_s: Option<f64>,
    /// Where `evictions_per_s` comes from (`pg_stat_io.evictions` on 16+, `pg_stat_bgwriter.buffers_alloc`
    /// before).
    pub evictions_source: Option<String>,
    /// Why a part is missing.
    pub note: Option<String>,
}

/// Totals over the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Totals {
    /// On-CPU samples by category, every process of the instance.
    pub cpu: Categories,
    /// The same, client backends only.
    pub client_cpu: Categories,
    /// Page faults in the segment (each sample counted as its period).
    pub segment_faults: u64,
    /// Page faults elsewhere (each sample counted as its period).
    pub other_faults: u64,
    /// Page-fault samples behind the two counts.
    pub fault_samples: u64,
    /// Minor faults by the kernel's counters.
    pub minflt: u64,
    /// Involuntary switches (/proc), live processes.
    pub nivcsw: u64,
    /// Voluntary switches (/proc), live processes.
    pub nvcsw: u64,
    /// Run-queue wait, ms.
    pub runqueue_wait_ms: f64,
    /// CPU time, ms.
    pub cpu_ms: f64,
    /// sched_switch counts.
    pub switches: Switches,
    /// Processes seen over the window (postmaster included).
    pub processes_seen: u64,
    /// Processes that started during the window.
    pub processes_started: u64,
    /// Records the kernel dropped because the reader fell behind (every event type).
    pub lost_records: u64,
    /// On-CPU samples in user space whose function has a name (not `FILE:?` or `?`): how much of the
    /// user time the symbols explain (absent in files written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_samples_named: Option<u64>,
}

/// Per-second rates over the window.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Rates {
    /// Segment faults per second.
    pub segment_faults_per_s: f64,
    /// Other faults per second.
    pub other_faults_per_s: f64,
    /// Minor faults per second by the kernel's counters.
    pub minflt_per_s: f64,
    /// Involuntary switches per second.
    pub nivcsw_per_s: f64,
    /// Run-queue wait per second of wall time, ms/s.
    pub runqueue_wait_ms_per_s: f64,
    /// Runnable switches with the fault path on the stack, per second.
    pub preempted_in_fault_per_s: f64,
}

/// Whether the lock-holder-preemption symptom is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Symptom {
    /// The spinlock share's interval lies at or above the threshold.
    Present,
    /// The interval lies below it.
    NotPresent,
    /// Too few samples, or the interval straddles the threshold.
    CantTell,
}

impl Symptom {
    /// As printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Symptom::Present => "present",
            Symptom::NotPresent => "not present",
            Symptom::CantTell => "can't tell",
        }
    }
}

/// `diagnose --fail-on`: the verdict at which the command exits 1. The decision is here, beside the
/// verdicts it judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOn {
    /// An instance with the symptom present.
    Present,
    /// An instance with the symptom present, or too few samples to tell.
    CantTell,
}

impl FailOn {
    /// Every threshold, in the order a command line lists them.
    pub const ALL: [FailOn; 2] = [FailOn::Present, FailOn::CantTell];

    /// The name a command line gives it.
    pub fn name(self) -> &'static str {
        match self {
            FailOn::Present => "present",
            FailOn::CantTell => "cant-tell",
        }
    }

    /// Whether a diagnosis fails: an instance's verdict at or above the threshold.
    pub fn fails(self, r: &DiagnoseResult) -> bool {
        r.instances.iter().any(|i| match self {
            FailOn::Present => i.verdict.symptom == Symptom::Present,
            FailOn::CantTell => i.verdict.symptom != Symptom::NotPresent,
        })
    }
}

impl std::str::FromStr for FailOn {
    type Err = String;

    fn from_str(s: &str) -> Result<FailOn, String> {
        FailOn::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("{s}: one of present, cant-tell"))
    }
}

/// The verdict for one instance, with its evidence.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    /// Present, not present, can't tell.
    pub symptom: Symptom,
    /// Client backends' on-CPU samples in the spinlock slow path.
    pub spinlock_share: Share,
    /// Client backends' on-CPU samples in page-fault handling.
    pub page_fault_share: Share,
    /// The threshold on the spinlock share, %, and its basis.
    pub threshold_pct: f64,
    /// Fewest client-backend samples a decision needs.
    pub min_samples: u64,
    /// Why, in sentences with numbers.
    pub reasons: Vec<String>,
    /// Checks the run states (e.g. zero in-kernel preemptions under `none`), each with its outcome.
    pub checks: Vec<String>,
    /// The fix, the audit's exact lines (empty when nothing needs fixing).
    pub fix: Vec<String>,
}

/// One instance over the window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InstanceDiagnosis {
    /// The postmaster's PID.
    pub postmaster_pid: u32,
    /// Data directory, if known.
    pub data_dir: Option<String>,
    /// PostgreSQL major version, if known.
    pub version: Option<String>,
    /// Port, if known.
    pub port: Option<u16>,
    /// The `--pg` server matched to it.
    pub dsn: Option<String>,
    /// The main segment, if found.
    pub segment: Option<Segment>,
    /// The audit's context.
    pub context: Context,
    /// Seconds into the window at which the postmaster exited (the result is partial), if it did.
    pub exited_at_s: Option<f64>,
    /// Totals.
    pub totals: Totals,
    /// Rates over the observed window.
    pub rates: Rates,
    /// Totals by process type, client backends first.
    pub by_type: Vec<ByType>,
    /// The most sampled leaf functions, most first.
    pub top_functions: Vec<FunctionShare>,
    /// The postmaster's executable as it runs (absent: files written before it existed, or it could not
    /// be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary: Option<Binary>,
    /// The spinlock samples by leaf and callers (`s_lock <- StrategyGetBuffer <- GetVictimBuffer ...`),
    /// most first: who waits on the spinlock. Only for an executable that keeps frame pointers (empty
    /// otherwise, with why in `spin_callers_unavailable`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spin_callers: Vec<CallChain>,
    /// Why the spinlock samples' callers are not named, when they are not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spin_callers_unavailable: Option<String>,
    /// Wait events (`--pg`).
    pub waits: Option<Waits>,
    /// Per second.
    pub series: Vec<Second>,
    /// The verdict.
    pub verdict: Verdict,
}

impl DiagnoseResult {
    /// True when the window was cut short (interrupted, or an instance exited).
    pub fn partial(&self) -> bool {
        self.envelope.interrupted || self.instances.iter().any(|i| i.exited_at_s.is_some())
    }
}
