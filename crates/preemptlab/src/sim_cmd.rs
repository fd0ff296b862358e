//! `preemptlab sim`: the discrete-event model over a matrix of CPUs x workers x models x locks x pages
//! (x one swept parameter), `repeat` seeds per cell (`sim::matrix`), written in the bench result schema so
//! `compare` and `report` read it next to measured results.

use anyhow::{anyhow, bail, Context, Result};
use lab::lockrun;
use results::sim::{SimCell, SimResult, SimSpec};
use sim::matrix::{self, Matrix};
use sim::{LockKind, Model, Pages, Params, Workload};

use crate::cli::split_list as list;
use crate::cli::SimArgs;

/// Parses each entry of a comma-separated flag.
fn each<T>(flag: &str, s: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>> {
    list(s)
        .iter()
        .map(|x| parse(x).map_err(|e| anyhow!("{flag} {e}")))
        .collect()
}

pub fn run(a: SimArgs) -> Result<i32> {
    let dur = lockrun::parse_duration(&a.duration).map_err(|e| anyhow!("--duration: {e}"))?;
    let warm = lockrun::parse_duration(&a.warmup).map_err(|e| anyhow!("--warmup: {e}"))?;
    if a.repeat == 0 || a.repeat > 1000 {
        bail!("--repeat {}: 1..1000", a.repeat);
    }
    let from = crate::sim_from::resolve(&a)?;
    let mut base = Params {
        hz: from.hz,
        duration_ns: dur.as_nanos() as u64,
        warmup_ns: warm.as_nanos() as u64,
        seed: a.seed,
        workload: Workload::parse(&a.workload).map_err(|e| anyhow!("--workload {e}"))?,
        ..Params::default()
    };
    // The files' parameters first, so --set wins.
    base = from.apply(&base)?;
    for kv in &a.set {
        base = matrix::set_param(&base, kv).with_context(|| format!("--set {kv}"))?;
    }
    let mut cpus = Vec::new();
    for c in list(&from.cpus) {
        let n: u32 = c
            .parse()
            .map_err(|_| anyhow!("--cpus {c}: expected a number"))?;
        let (_, workers) = lockrun::parse_counts("--workers", "workers", &from.workers, n, 100_000)
            .map_err(|e| anyhow!(e))?;
        cpus.push((n, workers));
    }
    let sweep = match &a.sweep {
        None => None,
        Some(s) => Some(matrix::parse_sweep(&base, s).with_context(|| format!("--sweep {s}"))?),
    };
    let m = Matrix {
        base: base.clone(),
        cpus,
        pages: each("--pages", &from.pages, Pages::parse)?,
        locks: each("--locks", &from.locks, LockKind::parse)?,
        models: each("--models", &a.models, Model::parse)?,
        sweep: sweep.clone(),
    };
    let cells = m.cells().map_err(|e| match e {
        matrix::MatrixError::Empty => {
            anyhow!("--cpus, --models, --locks and --pages need at least one entry each")
        }
        e => anyhow!(e),
    })?;
    let out = a
        .result
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("sim", lab::result::unix_now()));
    crate::term::claim_output(&out)?;
    let mut res = SimResult {
        envelope: lab::result::envelope("sim"),
        spec: SimSpec {
            params: base,
            set: a.set.clone(),
            sweep,
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
        |md| report::sim_table::render(&res, md),
        &out,
        a.result.quiet,
    );
    Ok(if res.envelope.interrupted {
        lab::guard::interrupted_exit_code()
    } else {
        0
    })
}

#[cfg(test)]
mod tests {
    use shmlock::adaptive::{PARK_TIMEOUT_MAX, PARK_TIMEOUT_MIN, SPIN_BUDGET};

    /// The model's `adaptive` runs with the real lock's constants unless told otherwise.
    #[test]
    fn model_adaptive_uses_the_real_locks_constants() {
        let p = sim::Params::default();
        assert_eq!(p.adaptive_spin_ns, SPIN_BUDGET.as_nanos() as u64);
        assert_eq!(p.adaptive_park_min_ns, PARK_TIMEOUT_MIN.as_nanos() as u64);
        assert_eq!(p.adaptive_park_max_ns, PARK_TIMEOUT_MAX.as_nanos() as u64);
        assert_eq!(shmlock::adaptive::SLOTS as u32, sim::ADAPTIVE_SLOTS);
    }
}
