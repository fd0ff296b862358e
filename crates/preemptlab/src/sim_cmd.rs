//! `preemptlab sim`: the discrete-event model over a matrix of CPUs x workers x models x locks x pages
//! (x one swept parameter), `repeat` seeds per cell (`sim::matrix`), written in the bench result schema so
//! `compare` and `report` read it next to measured results.

use anyhow::{anyhow, Result};
use lab::lockrun;
use report::export::{export, Format};
use results::sim::{SimCell, SimResult, SimSpec};
use sim::matrix::{Axis, MatrixError, Request, RequestError};
use sim::{Params, Workload};

use crate::cli::split_list as list;
use crate::cli::SimArgs;

pub fn run(a: SimArgs) -> Result<i32> {
    let dur = lockrun::parse_duration(&a.duration).map_err(|e| anyhow!("--duration: {e}"))?;
    let warm = lockrun::parse_duration(&a.warmup).map_err(|e| anyhow!("--warmup: {e}"))?;
    let from = crate::sim_from::resolve(&a)?;
    let base = Params {
        hz: from.hz,
        duration_ns: dur.as_nanos() as u64,
        warmup_ns: warm.as_nanos() as u64,
        seed: a.seed,
        workload: Workload::parse(&a.workload).map_err(|e| anyhow!("--workload {e}"))?,
        ..Params::default()
    };
    let mut cpus = Vec::new();
    for c in list(&from.cpus) {
        let n: u32 = c
            .parse()
            .map_err(|_| anyhow!("--cpus {c}: expected a number"))?;
        let (_, workers) = lockrun::parse_counts("--workers", "workers", &from.workers, n, 100_000)
            .map_err(|e| anyhow!(e))?;
        cpus.push((n, workers));
    }
    let (models, locks, pages) = (list(&a.models), list(&from.locks), list(&from.pages));
    let req = Request {
        // The files' parameters first, so --set wins.
        base: from.apply(&base)?,
        set: &a.set,
        cpus,
        models: &models,
        locks: &locks,
        pages: &pages,
        sweep: a.sweep.as_deref(),
        repeat: a.repeat,
    };
    let (m, cells) = req.matrix().map_err(flag_context)?;
    let out = a
        .result
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("sim", lab::result::unix_now()));
    crate::term::claim_output(&out)?;
    let mut res = SimResult {
        envelope: lab::result::envelope("sim"),
        spec: SimSpec {
            params: m.base,
            set: a.set.clone(),
            sweep: m.sweep,
            repeat: a.repeat,
            from_files: from.files(),
        },
        cells: Vec::new(),
    };
    lab::guard::install_signal_flag().map_err(|e| anyhow!(e))?;
    for c in cells {
        if lab::guard::interrupted() {
            res.envelope.interrupted = true;
            break;
        }
        let cell = SimCell::ran(&c.params, c.sweep.clone(), c.run(a.repeat)?);
        if !a.result.quiet {
            eprintln!("{}", report::sim_table::cell_line(&cell));
        }
        res.cells.push(cell);
        lab::result::write(&out, &res).map_err(|e| anyhow!(e))?;
    }
    crate::term::print_result(
        a.result.format,
        &res,
        |md| {
            let format = if md { Format::Markdown } else { Format::Table };
            export(format, &res).unwrap_or_default()
        },
        &out,
        a.result.quiet,
    );
    Ok(if res.envelope.interrupted {
        lab::guard::interrupted_exit_code()
    } else {
        0
    })
}

/// The library's error with the flag that gave the value.
fn flag_context(e: RequestError) -> anyhow::Error {
    match &e {
        RequestError::Repeat(_) => anyhow!("--repeat {e}"),
        RequestError::Set { .. } => anyhow!("--set {e}"),
        RequestError::Sweep { .. } => anyhow!("--sweep {e}"),
        RequestError::Axis { axis, .. } => {
            let flag = match axis {
                Axis::Models => "--models",
                Axis::Locks => "--locks",
                Axis::Pages => "--pages",
            };
            anyhow!("{flag} {e}")
        }
        RequestError::Matrix(MatrixError::Empty) => {
            anyhow!("--cpus, --models, --locks and --pages need at least one entry each")
        }
        RequestError::Matrix(MatrixError::Invalid(i)) => match i.name {
            "cpus" | "workers" | "hz" => anyhow!("--{e}"),
            name => anyhow!("{e} (--set {name}=VALUE in that range)"),
        },
        RequestError::Matrix(_) => anyhow!(e),
    }
}
