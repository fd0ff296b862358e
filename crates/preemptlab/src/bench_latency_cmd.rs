//! `preemptlab bench latency`.

use anyhow::{anyhow, Result};
use lab::latency;
use lab::options::HostShape;

use crate::cli::BenchLatencyArgs;
use crate::term;

pub fn run(a: BenchLatencyArgs) -> Result<i32> {
    let host = HostShape::live();
    let spec = a.opts.spec(&host).map_err(term::flags)?;
    let out = term::result_file(&a.result, "bench-latency", &[])?;
    let quiet = a.result.quiet;
    // Switched back when this function returns, by any path.
    let _preempt = crate::switch::preempt(&a.preempt)?;
    let res = latency::run(spec, &out.path(), host.cpus, |c| {
        if !quiet {
            osutil::msg!("{}", report::latency_table::cell_line(c));
        }
    })
    .map_err(|e| anyhow!(e.render(term::flag)))?;
    term::print_result(a.result.format, &res, &out, quiet)?;
    Ok(term::exit_code(res.envelope.interrupted))
}
