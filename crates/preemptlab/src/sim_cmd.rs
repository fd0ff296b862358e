//! `preemptlab sim`: the discrete-event model over a matrix of CPUs x workers x models x locks x pages
//! (x one swept parameter), `repeat` seeds per cell (`lab::simrun::options`), written in the bench result schema so
//! `compare` and `report` read it next to measured results.

use anyhow::{anyhow, Result};

use crate::cli::SimArgs;
use crate::term;

pub fn run(a: SimArgs) -> Result<i32> {
    let sim_error = |e: lab::simrun::options::SimError| anyhow!(e.render(term::flag));
    let plan = a.opts.plan().map_err(sim_error)?;
    let quiet = a.result.quiet;
    // The files it reads are never its output.
    let inputs: Vec<_> = a
        .opts
        .like
        .iter()
        .chain(&a.opts.costs_from)
        .cloned()
        .collect();
    let out = term::result_file(&a.result, results::Kind::Sim, &inputs)?;
    if let (Some(path), false) = (&a.opts.like, quiet) {
        for n in &plan.like_notes {
            osutil::msg!("preemptlab: --like {}: {n}", path.display());
        }
    }
    let res = plan
        .run(&out.path(), |cell| {
            if !quiet {
                osutil::msg!("{}", report::sim_table::cell_line(cell));
            }
        })
        .map_err(sim_error)?;
    term::print_result(a.result.format, &res, &out, quiet)?;
    Ok(term::exit_code(res.envelope.interrupted))
}
