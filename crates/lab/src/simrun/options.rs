//! `sim`'s options as given, resolved (with what `like` and `costs_from` files give, `simrun::files`) into the
//! request `sim::matrix` makes cells of, and the run of those cells into a result file.
//!
//! Precedence: explicit options > `set` > the files' values > the defaults.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axes::model::Workload;
use results::model::Outcome;
use results::model::Params;
use results::sim::{SimCell, SimResult, SimSpec, SimSummary};
use sim::matrix::{self, Axis, MatrixError, Request, RequestError};

use crate::matrix::{self as driver, At, Bench, Matrix, Order, Step, Unopened};
use crate::options::{self, OptionError};
use crate::simrun::files::{self, FileError};

/// `sim`'s options as given.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct SimOptions {
    /// CPU counts (comma-separated) [default: 96, or --like's].
    #[cfg_attr(feature = "cli", arg(long))]
    pub cpus: Option<String>,
    /// Worker processes: numbers or multiples of the CPU count (1024, 8x) [default: 1024, or --like's].
    #[cfg_attr(feature = "cli", arg(long))]
    pub workers: Option<String>,
    /// Preemption models: none, voluntary, full, lazy. The first is the baseline of the ratios [default:
    /// none,lazy, or the models --like's cells ran under].
    #[cfg_attr(feature = "cli", arg(long))]
    pub models: Option<String>,
    /// Locks: pg, futex, rseq, adaptive [default: pg, or --like's].
    #[cfg_attr(feature = "cli", arg(long))]
    pub locks: Option<String>,
    /// Page sizes: 4k, 2m [default: 4k,2m, or --like's].
    #[cfg_attr(feature = "cli", arg(long))]
    pub pages: Option<String>,
    /// Timer ticks per second [default: 250, or --like's].
    #[cfg_attr(feature = "cli", arg(long))]
    pub hz: Option<u32>,
    /// Take the costs a bench lock result measured (fault, spin, syscall, context switch, wakes) as the
    /// model's parameters; repeat it for several runs of one machine: each parameter is their median;
    /// --set wins.
    #[cfg_attr(feature = "cli", arg(long, value_name = "RESULT.json"))]
    pub costs_from: Vec<PathBuf>,
    /// Take the matrix of a bench lock result (its host's CPUs and HZ, its workers, locks, pages, work and
    /// critical section); explicit flags win.
    #[cfg_attr(feature = "cli", arg(long, value_name = "RESULT.json"))]
    pub like: Option<PathBuf>,
    /// What the workers run: lock (bench lock's operation) or txn (pgbench-like transactions with client
    /// round trips; throughput in transactions per second).
    #[cfg_attr(feature = "cli", arg(long, default_value = "lock"))]
    pub workload: String,
    /// Virtual time measured per run (1s, 200ms).
    #[cfg_attr(feature = "cli", arg(long, default_value = "1s"))]
    pub duration: String,
    /// Virtual time before measuring.
    #[cfg_attr(feature = "cli", arg(long, default_value = "100ms"))]
    pub warmup: String,
    /// Runs per cell, each with its own seed.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 3))]
    pub repeat: u32,
    /// The first run's seed (run k uses seed + k).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1))]
    pub seed: u64,
    /// Override a model parameter, name=value (repeatable; names as in the result's spec.params).
    #[cfg_attr(feature = "cli", arg(long = "set", value_name = "NAME=VALUE"))]
    pub set: Vec<String>,
    /// Sweep one parameter: name=v1,v2,... (adds a column).
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME=V1,V2"))]
    pub sweep: Option<String>,
}

/// Why a sim run cannot start or stopped. Messages name options by field; `render` names them as the
/// caller does.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// An option is refused.
    #[error(transparent)]
    Option(#[from] OptionError),
    /// A `like` or `costs_from` file gives nothing.
    #[error("{}", self.render(str::to_string))]
    File {
        /// The option that named it.
        option: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        err: FileError,
    },
    /// A parameter a file gives does not apply.
    #[error("{name}={value}: {err}")]
    FileParam {
        /// The parameter.
        name: String,
        /// Its value.
        value: String,
        /// Why.
        err: matrix::ParamError,
    },
    /// A model parameter out of range.
    #[error("{}", self.render(str::to_string))]
    Range(sim::Invalid),
    /// The matrix cannot run.
    #[error(transparent)]
    Matrix(#[from] MatrixError),
    /// The stop-signal handler could not be installed.
    #[error(transparent)]
    Signal(#[from] osutil::stop::SignalError),
    /// The result file could not be written.
    #[error(transparent)]
    Write(#[from] osutil::output::OutputError),
}

impl SimError {
    /// The message with every option named by `name` (the command line passes its flag spelling).
    pub fn render(&self, name: impl Fn(&str) -> String) -> String {
        match self {
            SimError::Option(e) => e.render(name),
            SimError::File { option, path, err } => {
                format!("{} {}: {err}", name(option), path.display())
            }
            SimError::Range(i) => {
                format!("{i} ({} {}=VALUE in that range)", name("set"), i.name)
            }
            // Every variant by name, no catch-all: a new variant whose Display calls render must say
            // its own words here, or Display and render would call each other for ever.
            SimError::FileParam { .. } => self.to_string(),
            SimError::Matrix(e) => e.to_string(),
            SimError::Signal(e) => e.to_string(),
            SimError::Write(e) => e.to_string(),
        }
    }
}

/// A sim run resolved: what its result records as its spec, and its cells in run order.
#[derive(Debug)]
pub struct SimPlan {
    /// The spec (parameters after the files and `set`, the sweep, what each file gave).
    pub spec: SimSpec,
    /// The cells.
    pub cells: Vec<matrix::Cell>,
    /// What `like`'s matrix has that the model does not run, one line each.
    pub like_notes: Vec<String>,
}

impl SimOptions {
    /// Checks every option, reads the `like` and `costs_from` files, and makes the matrix's cells.
    pub fn plan(&self) -> Result<SimPlan, SimError> {
        let duration = options::duration_at_least("duration", &self.duration, Duration::ZERO)?;
        let warmup = options::duration_at_least("warmup", &self.warmup, Duration::ZERO)?;
        let from = files::resolve(self)?;
        let workload = Workload::parse(&self.workload).map_err(|e| OptionError::Invalid {
            option: "workload",
            value: e.given,
            why: format!("expected {}", e.expected),
        })?;
        let base = Params {
            hz: from.hz,
            duration_ns: duration.as_nanos() as u64,
            warmup_ns: warmup.as_nanos() as u64,
            seed: self.seed,
            workload,
            ..Params::default()
        };
        let mut cpus = Vec::new();
        for c in options::list(&from.cpus) {
            let n: u32 = c.parse().map_err(|_| OptionError::Invalid {
                option: "cpus",
                value: c.clone(),
                why: "expected a number".into(),
            })?;
            let (_, workers) = options::counts("workers", "workers", &from.workers, n, 100_000)?;
            cpus.push((n, workers));
        }
        let list = options::list;
        let (models, locks, pages) = (list(&from.models), list(&from.locks), list(&from.pages));
        let req = Request {
            // The files' parameters first, so `set` wins.
            base: from.apply(&base)?,
            set: &self.set,
            cpus,
            models: &models,
            locks: &locks,
            pages: &pages,
            sweep: self.sweep.as_deref(),
            repeat: self.repeat,
        };
        let (m, cells) = req.matrix().map_err(request_error)?;
        Ok(SimPlan {
            spec: SimSpec {
                params: m.base,
                set: self.set.clone(),
                sweep: m.sweep,
                repeat: self.repeat,
                from_files: from.from,
            },
            cells,
            like_notes: from.like_notes,
        })
    }
}

/// The request's error with the option that gave the value.
fn request_error(e: RequestError) -> SimError {
    let invalid = |option, value: String, why: String| OptionError::Invalid { option, value, why };
    SimError::Option(match e {
        RequestError::Repeat(n) => invalid(
            "repeat",
            n.to_string(),
            format!("1..{} runs a cell", matrix::MAX_REPEAT),
        ),
        RequestError::Set { kv, source } => invalid("set", kv, source.to_string()),
        RequestError::Sweep { sweep, source } => invalid("sweep", sweep, source.to_string()),
        RequestError::Axis { axis, source } => {
            let option = match axis {
                Axis::Models => "models",
                Axis::Locks => "locks",
                Axis::Pages => "pages",
            };
            invalid(
                option,
                source.given,
                format!("expected {}", source.expected),
            )
        }
        RequestError::Matrix(MatrixError::Empty) => OptionError::Empty {
            options: &["cpus", "models", "locks", "pages"],
        },
        RequestError::Matrix(MatrixError::Invalid(i)) => match i.name {
            "cpus" | "workers" | "hz" => invalid(i.name, i.value, i.range.into()),
            _ => return SimError::Range(i),
        },
        RequestError::Matrix(e) => return SimError::Matrix(e),
    })
}

impl SimPlan {
    /// Runs the cells on the matrix driver, `repeat` seeds each (one step: the model runs them), writing the
    /// result to `out` after each cell; a stop signal ends the run after the cell it is in.
    pub fn run(self, out: &Path, on_cell: impl FnMut(&SimCell)) -> Result<SimResult, SimError> {
        let mut res = SimResult {
            envelope: driver::unfinished(results::Kind::Sim),
            spec: self.spec,
            cells: Vec::new(),
        };
        osutil::stop::install_signal_flag()?;
        res.cells = (self.cells.iter())
            .map(|c| SimCell::planned(&c.params, c.sweep.clone()))
            .collect();
        let matrix = Matrix {
            groups: driver::groups_of(res.cells.len(), res.cells.len()),
            repeat: 1,
            order: Order::CellMajor,
            noun: "steps",
            out,
            written: false,
            switching: None,
        };
        let mut bench = SimBench {
            repeat: res.spec.repeat,
            txn: res.spec.params.workload == Workload::Txn,
            cells: self.cells,
            on_cell,
        };
        matrix.run(&mut bench, res)
    }
}

/// `sim` on the matrix driver: one group, a cell's seeds in one step.
struct SimBench<F> {
    repeat: u32,
    txn: bool,
    cells: Vec<matrix::Cell>,
    on_cell: F,
}

impl<F: FnMut(&SimCell)> Bench for SimBench<F> {
    type Doc = SimResult;
    type Shared = ();
    type Error = SimError;

    fn open(
        &mut self,
        _: &mut SimResult,
        _: Range<usize>,
        _: u32,
    ) -> Result<(), Unopened<SimError>> {
        Ok(())
    }

    fn rep(&mut self, _: &mut (), _: &SimCell, at: At) -> Step<Vec<Outcome>, SimError> {
        match self.cells[at.cell].run(self.repeat) {
            Ok(reps) => Step::Rep(reps),
            Err(e) => Step::Abort(e.into()),
        }
    }

    fn close(&mut self, _: ()) -> Result<(), SimError> {
        Ok(())
    }

    fn summarize(&self, cell: &mut SimCell) {
        cell.summary = Some(SimSummary::of(&cell.reps, self.txn));
    }

    fn on_done(&mut self, cell: &SimCell) {
        (self.on_cell)(cell);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> SimOptions {
        SimOptions {
            cpus: Some("4".into()),
            workers: Some("2x".into()),
            models: Some("none,lazy".into()),
            locks: None,
            pages: Some("4k".into()),
            hz: None,
            costs_from: Vec::new(),
            like: None,
            workload: "lock".into(),
            duration: "20ms".into(),
            warmup: "0".into(),
            repeat: 1,
            seed: 1,
            set: vec!["spin_ns=300".into()],
            sweep: None,
        }
    }

    #[test]
    fn a_plan_has_the_matrix_and_set_wins() {
        let p = opts().plan().unwrap();
        assert_eq!(p.cells.len(), 2);
        assert_eq!((p.cells[0].params.cpus, p.cells[0].params.workers), (4, 8));
        assert_eq!(p.spec.params.spin_ns, 300);
        assert_eq!(p.spec.params.hz, 250);
        let dir = tempfile::tempdir().unwrap();
        let mut seen = 0;
        let r = p.run(&dir.path().join("s.json"), |_| seen += 1).unwrap();
        assert_eq!((r.cells.len(), seen), (2, 2));
    }

    #[test]
    fn errors_name_the_field() {
        let flag = |o: &str| format!("--{}", o.replace('_', "-"));
        let e = |f: fn(&mut SimOptions)| {
            let mut o = opts();
            f(&mut o);
            o.plan().unwrap_err().render(flag)
        };
        assert_eq!(
            e(|o| o.models = Some("sometimes".into())),
            "--models sometimes: expected none, voluntary, full or lazy"
        );
        assert_eq!(
            e(|o| o.cpus = Some("x".into())),
            "--cpus x: expected a number"
        );
        assert_eq!(e(|o| o.repeat = 0), "--repeat 0: 1..1000 runs a cell");
        assert_eq!(
            e(|o| o.pages = Some(",".into())),
            "--cpus, --models, --locks and --pages need at least one entry each"
        );
        assert_eq!(
            e(|o| o.set = vec!["fault_block_p=2".into()]),
            "fault_block_p 2: 0..1 (--set fault_block_p=VALUE in that range)"
        );
        assert_eq!(e(|o| o.like = Some("/nonexistent.json".into())), "--like /nonexistent.json: No such file or directory (os error 2); give a result file bench lock wrote");
        let mut o = opts();
        o.workload = "olap".into();
        assert_eq!(
            o.plan().unwrap_err().to_string(),
            "workload olap: expected lock or txn"
        );
    }
}
