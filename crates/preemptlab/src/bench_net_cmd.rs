//! `preemptlab bench net`.

use anyhow::{anyhow, Result};
use lab::net::run;
use lab::options::HostShape;

use crate::cli::BenchNetArgs;
use crate::term;

pub fn run(a: BenchNetArgs) -> Result<i32> {
    let spec = a.opts.spec(&HostShape::live()).map_err(term::flags)?;
    let out = term::result_file(&a.result, results::Kind::BenchNet, &[])?;
    let quiet = a.result.quiet;
    // Switched back when this function returns (one mode) or when the run ends (an axis), by any path.
    let mut preempt = crate::switch::preempt(&a.preempt)?;
    let res = run::run(spec, &out.path(), preempt.axis(), |c| {
        if !quiet {
            osutil::msg!("{}", report::net_table::line(c));
        }
    })
    .map_err(|e| anyhow!(e.render(term::flag)))?;
    term::print_result(a.result.format, &res, &out, quiet)?;
    Ok(term::exit_code(res.envelope.interrupted))
}
