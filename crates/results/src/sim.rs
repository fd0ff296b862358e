//! `sim`: the discrete-event model's matrix, in the bench result schema so `compare` and `report` read it
//! next to measured results. A repetition is the model's own [`sim::Outcome`].

use serde::{Deserialize, Serialize};
use sim::{Outcome, Params};
use stats::Summary;

use crate::{Envelope, Status};

/// Centres and spreads over a cell's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimSummary {
    /// Throughput (ops per virtual second).
    pub ops_per_s: Summary,
    /// `--workload txn`: transactions per virtual second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub txn_per_s: Option<Summary>,
    /// Share of CPU time spinning.
    pub spinning: Summary,
    /// Share of CPU time idle.
    pub idle: Summary,
    /// Lock-holder preemptions per second.
    pub lhp_per_s: Summary,
    /// p99 hold time, ns.
    pub hold_p99_ns: Summary,
    /// p99 acquire latency, ns.
    pub acquire_p99_ns: Summary,
    /// Stalled holds per million operations.
    pub stalled_per_mop: Summary,
}

/// One cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimCell {
    /// Preemption model.
    pub model: String,
    /// Lock.
    pub lock: String,
    /// Page size.
    pub pages: String,
    /// CPUs.
    pub cpus: u32,
    /// Workers.
    pub workers: u32,
    /// The swept parameter's value, when sweeping.
    pub sweep: Option<String>,
    /// Ran or failed.
    pub status: Status,
    /// Why it failed.
    pub reason: Option<String>,
    /// Every run.
    pub reps: Vec<Outcome>,
    /// Summary.
    pub summary: Option<SimSummary>,
}

/// The spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimSpec {
    /// The parameters every cell starts from (then its own CPUs, workers, model, lock, pages, seed).
    pub params: Params,
    /// `--set` overrides as given.
    pub set: Vec<String>,
    /// The swept parameter and its values.
    pub sweep: Option<(String, Vec<String>)>,
    /// Runs per cell.
    pub repeat: u32,
}

/// A `sim` result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimResult {
    /// Tool, command line, time, host.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// The experiment.
    pub spec: SimSpec,
    /// The cells.
    pub cells: Vec<SimCell>,
}
