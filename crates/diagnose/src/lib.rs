//! `preemptlab diagnose`: is lock-holder preemption hurting the PostgreSQL that is running now?
//!
//! It observes running instances for a window, read-only (it changes nothing on the host or in the
//! database and generates no load), and measures per second, for each instance's processes:
//! - where their CPU goes, from `cpu-clock` samples taken system-wide on every CPU (`perf`), symbolized with
//!   the postgres binary's own symbol tables and the kernel's names ([`kbpf`], [`kernsyms`]): the spinlock slow
//!   path, LWLocks, page-fault handling, the scheduler, the top functions ([`classify`], [`symbols`]);
//! - their minor page faults with the faulting address, split into the main shared segment and elsewhere,
//!   against the kernel's own minflt counters;
//! - their switches out while runnable from the `sched:sched_switch` tracepoint with kernel call chains,
//!   and among them those with the page-fault path on the stack, split by how the switch came about
//!   (preempted inside the kernel, at `cond_resched`, on the return to user space: [`classify::SwitchKind`]);
//! - their involuntary and voluntary switches, run-queue wait and CPU time from /proc ([`procs`]);
//! - with `--pg`, the wait events of active client backends and the buffer eviction rate ([`waits`]).
//!
//! Then it judges ([`judge`]) and attaches the audit's context and exact fix.
//!
//! Why system-wide (or per-cgroup, [`cgroup`]) sampling filtered in user space rather than per-process
//! events: a backend that a connection starts and ends between two looks at /proc is still seen, and the
//! number of events grows with the CPUs, not the backends. What it costs is measured by
//! `scripts/diagnose-overhead` and `scripts/diagnose-event-cost`.

pub mod binary;
pub mod cgroup;
pub mod classify;
pub mod control;
pub mod debugfile;
pub mod duty;
mod engine;
pub mod events;
pub mod faultrate;
pub mod judge;
pub mod ksyms;
pub mod perf;
pub mod procs;
pub mod symbolize;
pub mod tracefs;
mod track;
pub mod waits;
mod window;

use std::time::Duration;

pub use cgroup::Scope;
pub use engine::{prepare, run, Prepared};
pub use events::EventSet;

/// Default cpu-clock frequency per CPU while the on-CPU samples are on, Hz: a prime, off the timer tick's
/// multiples, so samples do not lock step with periodic kernel work. What the samples cost grows with
/// their rate: with diagnose's events turned on and off second by second under `pgbench -S` on this
/// project's 2-CPU VM (scripts/diagnose-overhead --toggle), `--events cpu` cost 5.5% of the TPS at 997 Hz
/// with user call chains, 4.2% with only the user instruction pointer, and about 1% at 199 Hz
/// (docs/notes/2026-11-26-diagnose-overhead.md, fifth session). A running diagnose, its process included,
/// cost 2.4% at 97 Hz and 0.8% at 49 Hz (`--toggle --toggle-process`: 0.976, 0.970..0.984, and 0.992,
/// 0.987..0.996; sixth session). 49 Hz still gives a verdict's [`judge::MIN_SAMPLES`] from four seconds of
/// one busy CPU; a lightly loaded server needs a longer window for one.
pub const DEFAULT_CPU_CLOCK_HZ: u64 = 49;

/// Default share of each second the on-CPU samples are on, percent ([`duty`]): all of it (a lower
/// frequency cuts the samples as well, without gaps in the series).
pub const DEFAULT_CPU_DUTY_PCT: u32 = 100;

/// Default page-fault sampling period: one sample per this many minor faults (counts are scaled back).
/// What the samples cost grows with the server's fault rate: under a connection-per-transaction
/// `pgbench -S` (~350,000 faults a second) diagnose's events cost 4.1% of the TPS at one in 16 (~22,000
/// samples a second) and about 1% at one in 64 (on/off 0.959 and 0.991, scripts/diagnose-overhead --toggle
/// --reconnect; docs/notes/2026-11-26-diagnose-overhead.md). One in 64 still gives a 10 s window tens of
/// thousands of samples of such a load and about 150 at 1,000 faults a second. Perf's frequency mode,
/// which bounds the samples whatever the rate, was tried and left out: one instance's faults, its samples'
/// periods summed, came out 0.54-0.74 of its minflt in some runs beside other loads (1.00 in others).
pub const DEFAULT_FAULT_PERIOD: u64 = 64;

/// Default bound on the fault samples a second, all CPUs together ([`faultrate`]): above 64,000 minor
/// faults a second the period rises from [`DEFAULT_FAULT_PERIOD`] in powers of two. A 10 s window still
/// holds several thousand samples of such a server.
pub const DEFAULT_FAULT_SAMPLES_MAX: u64 = 1_000;

/// Default bound on the faults counted a second per CPU ([`faultrate`]): above it the fault event is on
/// for half, a fifth or a tenth of each second. At the counter's 151-176 ns a fault on this project's VM,
/// 20,000 a second cost about 0.3% of a CPU; a connection-per-transaction `pgbench -S` there faults about
/// 175,000 times a second per CPU, and with the event down to a tenth of each second a running diagnose's
/// events cost it 1.003 (0.986..1.017) of its TPS, against 0.977 (0.965..0.995) on all the time
/// (scripts/diagnose-overhead --toggle --reconnect; docs/notes/2026-11-26-diagnose-overhead.md).
pub const DEFAULT_FAULT_COUNTS_MAX: u64 = 20_000;

/// Default share of each second the `sched_switch` tracepoint is on, percent ([`duty`]): its handler runs
/// at every context switch on the machine, the dearest part of a diagnosis on a switch-heavy server.
pub const DEFAULT_SWITCH_DUTY_PCT: u32 = 20;

/// What to observe and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The window.
    pub duration: Duration,
    /// Postmaster PIDs (`--pid`); with `dsns` empty too, every instance found.
    pub pids: Vec<u32>,
    /// Servers to observe and sample wait events from (`--pg`).
    pub dsns: Vec<String>,
    /// cpu-clock frequency, Hz.
    pub cpu_clock_hz: u64,
    /// One fault sample per this many faults, at least.
    pub fault_period: u64,
    /// At most about this many fault samples a second: the period rises above `fault_period` while
    /// faults come faster (0: no bound).
    pub fault_samples_max: u64,
    /// At most about this many faults counted a second per CPU: on a server faulting faster the fault
    /// event is on for part of each second (0: all of it).
    pub fault_counts_max: u64,
    /// Seconds between wait-event reads.
    pub wait_interval: Duration,
    /// Which tasks the perf events watch (`--scope`).
    pub scope: Scope,
    /// Which perf events to open (`--events`).
    pub events: EventSet,
    /// Share of each second the sched_switch tracepoint is on, percent: 10..=100 in steps of 10.
    pub switch_duty_pct: u32,
    /// Share of each second the on-CPU samples are on, percent: 10..=100 in steps of 10.
    pub cpu_duty_pct: u32,
    /// Where `enable` / `disable` / `stop` commands come from (`--control`, [`control`]).
    pub control: Option<control::Spec>,
}

impl Options {
    /// The defaults for a window.
    pub fn new(duration: Duration) -> Self {
        Options {
            duration,
            pids: Vec::new(),
            dsns: Vec::new(),
            cpu_clock_hz: DEFAULT_CPU_CLOCK_HZ,
            fault_period: DEFAULT_FAULT_PERIOD,
            fault_samples_max: DEFAULT_FAULT_SAMPLES_MAX,
            fault_counts_max: DEFAULT_FAULT_COUNTS_MAX,
            wait_interval: Duration::from_millis(200),
            scope: Scope::Auto,
            events: EventSet::ALL,
            switch_duty_pct: DEFAULT_SWITCH_DUTY_PCT,
            cpu_duty_pct: DEFAULT_CPU_DUTY_PCT,
            control: None,
        }
    }
}

/// Why a diagnosis could not start.
#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    /// `--pid` names no process.
    #[error("{pid}: no such process; give a running postmaster's PID (the first line of DATA_DIR/postmaster.pid)")]
    NoSuchProcess {
        /// The PID given.
        pid: u32,
    },
    /// `--pid` names a process that is not a postmaster.
    #[error("{pid} is not a PostgreSQL postmaster ({what}); give the postmaster's PID (the first line of DATA_DIR/postmaster.pid)")]
    NotPostmaster {
        /// The PID given.
        pid: u32,
        /// What it is instead.
        what: String,
    },
    /// No instance runs here.
    #[error("no PostgreSQL instance is running on this host (diagnose observes local servers; start one, or pass --pid)")]
    NoInstance,
    /// A `--pg` server is not a local instance.
    #[error("{dsn}: the server is not an instance on this host (its backend is not a child of a local postmaster); diagnose observes local servers")]
    Remote {
        /// The DSN without password.
        dsn: String,
    },
    /// A `--pg` connection failed.
    #[error(transparent)]
    Query(#[from] hostfacts::pgquery::QueryError),
    /// The window is out of range.
    #[error("{given:?}: the window must be 1s..24h")]
    Duration {
        /// As given.
        given: Duration,
    },
    /// `--scope cgroup` cannot be had.
    #[error("--scope cgroup: {why}; pass --scope system (auto is system-wide)")]
    Scope {
        /// Why not.
        why: String,
    },
    /// The `--control` channel cannot be opened.
    #[error("--control {spec}: {why}; give a FIFO that exists (mkfifo) or a descriptor this process inherited")]
    Control {
        /// As given.
        spec: String,
        /// Why not.
        why: String,
    },
    /// A sampling parameter is out of range.
    #[error("{what} {value}: {range}")]
    Range {
        /// Which.
        what: &'static str,
        /// The value.
        value: u64,
        /// Its range.
        range: &'static str,
    },
}

impl Options {
    /// Checks the ranges.
    pub fn check(&self) -> Result<(), DiagnoseError> {
        if self.duration < Duration::from_secs(1) || self.duration > Duration::from_secs(86_400) {
            return Err(DiagnoseError::Duration {
                given: self.duration,
            });
        }
        if !(1..=10_000).contains(&self.cpu_clock_hz) {
            return Err(DiagnoseError::Range {
                what: "frequency",
                value: self.cpu_clock_hz,
                range: "1..10000 Hz",
            });
        }
        for (what, pct) in [
            ("switch duty", self.switch_duty_pct),
            ("cpu duty", self.cpu_duty_pct),
        ] {
            if !(10..=100).contains(&pct) || pct % 10 != 0 {
                return Err(DiagnoseError::Range {
                    what,
                    value: pct as u64,
                    range: "10..100 percent, in steps of 10",
                });
            }
        }
        if !(1..=1_000_000).contains(&self.fault_period) {
            return Err(DiagnoseError::Range {
                what: "fault period",
                value: self.fault_period,
                range: "1..1000000",
            });
        }
        if self.fault_samples_max > 1_000_000 {
            return Err(DiagnoseError::Range {
                what: "fault samples",
                value: self.fault_samples_max,
                range: "0..1000000 (0: no bound)",
            });
        }
        if self.fault_counts_max > 1_000_000_000 {
            return Err(DiagnoseError::Range {
                what: "fault counts",
                value: self.fault_counts_max,
                range: "0..1000000000 (0: no bound)",
            });
        }
        Ok(())
    }
}
