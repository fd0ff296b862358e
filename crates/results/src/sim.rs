//! `sim`: the discrete-event model's matrix, in the bench result schema so `compare` and `report` read it
//! next to measured results. A repetition is the model's own [`crate::model::Outcome`].

use axes::model::{LockKind, Model, Pages};
use serde::{Deserialize, Serialize};
use stats::Summary;

use crate::model::{Outcome, Params};

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
    pub model: Model,
    /// Lock.
    pub lock: LockKind,
    /// Page size.
    pub pages: Pages,
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
    /// Parameters and matrix axes taken from result files (`--costs-from`, `--like`), where an explicit
    /// flag or `--set` did not override them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_files: Vec<FromFile>,
}

/// What one file gave a sim run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FromFile {
    /// The flag that named it (`--costs-from`, `--like`).
    pub flag: String,
    /// The file as given.
    pub file: String,
    /// Each parameter or axis taken (`spec.params`' name, or the flag's name for an axis) and the field of
    /// the file it came from.
    pub taken: Vec<(String, String)>,
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

impl SimSummary {
    /// Summarizes a cell's runs (`txn`: the workload counts transactions).
    pub fn of(reps: &[Outcome], txn: bool) -> SimSummary {
        let f =
            |g: &dyn Fn(&Outcome) -> f64| stats::summarize(&reps.iter().map(g).collect::<Vec<_>>());
        SimSummary {
            ops_per_s: f(&|o| o.ops_per_s),
            txn_per_s: txn.then(|| f(&|o| o.txn_per_s.unwrap_or(0.0))),
            spinning: f(&|o| o.cpu.spinning),
            idle: f(&|o| o.cpu.idle),
            lhp_per_s: f(&|o| o.lhp_per_s),
            hold_p99_ns: f(&|o| o.hold_ns.p99 as f64),
            acquire_p99_ns: f(&|o| o.acquire_ns.p99 as f64),
            stalled_per_mop: f(&|o| o.stalled_per_mop),
        }
    }

    /// The cell's throughput: transactions per second for the txn workload, else operations per second.
    pub fn throughput(&self) -> &Summary {
        self.txn_per_s.as_ref().unwrap_or(&self.ops_per_s)
    }
}

impl SimCell {
    /// A cell before it runs: its parameters (`sim::matrix::Cell`) and swept value, no runs yet.
    pub fn planned(p: &Params, sweep: Option<String>) -> SimCell {
        SimCell {
            model: p.model,
            lock: p.lock,
            pages: p.pages,
            cpus: p.cpus,
            workers: p.workers,
            sweep,
            status: Status::Ok,
            reason: None,
            summary: None,
            reps: Vec::new(),
        }
    }
}
