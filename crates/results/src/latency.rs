//! `bench latency`: wakeup latency per scheduling policy and background load.

use axes::{Load, Policy};
use serde::{Deserialize, Serialize};
use stats::Summary;

use crate::{Envelope, Status};

/// The experiment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Spec {
    /// Scheduling policies: other, fifo.
    pub policies: Vec<Policy>,
    /// SCHED_FIFO priority.
    pub priority: i32,
    /// Loads: none, lock, hackbench, or a shell command.
    pub loads: Vec<Load>,
    /// Measuring threads.
    pub threads: u32,
    /// Pin thread i to CPU i mod CPUs.
    pub pin: bool,
    /// Wakeup interval, us.
    pub interval_us: u64,
    /// Measured seconds per repetition.
    pub duration_s: f64,
    /// Seconds the load runs before measuring.
    pub load_warmup_s: f64,
    /// Repetitions per cell.
    pub repeat: u32,
    /// Hold /dev/cpu_dma_latency at 0 while measuring (keeps CPUs out of deep idle states, as cyclictest
    /// does by default); the kernel drops the request when the file is closed, on every exit path.
    pub no_deep_idle: bool,
}

/// Latency percentiles, microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Lat {
    /// Minimum.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th.
    pub p90: f64,
    /// 99th.
    pub p99: f64,
    /// 99.9th.
    pub p999: f64,
    /// Maximum.
    pub max: f64,
    /// Mean.
    pub mean: f64,
    /// Wakeups.
    pub samples: u64,
}

/// One repetition.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Rep {
    /// All threads merged.
    pub latency_us: Lat,
    /// Per thread.
    pub per_thread: Vec<Lat>,
    /// Wakeups later than one interval.
    pub overruns: u64,
    /// Histogram of the merged latencies: (upper bound us, count), log-spaced buckets.
    pub histogram: Vec<(f64, u64)>,
    /// Involuntary context switches of the measuring threads.
    pub nivcsw: u64,
}

/// Centres and spreads over the repetitions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellSummary {
    /// p50, us.
    pub p50_us: Summary,
    /// p99, us.
    pub p99_us: Summary,
    /// p99.9, us.
    pub p999_us: Summary,
    /// Maximum, us.
    pub max_us: Summary,
}

/// One policy x load cell.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cell {
    /// other or fifo.
    pub policy: Policy,
    /// The load.
    pub load: Load,
    /// Threads.
    pub threads: u32,
    /// The preemption model it ran under, when the run switched between models (`--switch-preempt
    /// none,lazy`); otherwise absent, and the model is the host's (`host.kernel.preemption`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt: Option<axes::model::Model>,
    /// Ran, skipped, failed, interrupted.
    pub status: Status,
    /// Why not.
    pub reason: Option<String>,
    /// Repetitions.
    pub reps: Vec<Rep>,
    /// Summary.
    pub summary: Option<CellSummary>,
}

/// A `bench latency` result file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LatencyResult {
    /// Tool, command line, time, host.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// The experiment.
    pub spec: Spec,
    /// Cells.
    pub cells: Vec<Cell>,
}
