//! `preemptlab bench latency`.

use anyhow::{anyhow, Result};
use lab::latency::run;
use lab::options::HostShape;

use crate::cli::BenchLatencyArgs;
use crate::term;

pub fn run(a: BenchLatencyArgs) -> Result<i32> {
    let host = HostShape::live();
    let spec = a.opts.spec(&host).map_err(term::flags)?;
    let out = term::result_file(&a.result, results::Kind::BenchLatency, &[])?;
    let quiet = a.result.quiet;
    // Switched back when this function returns (one mode) or when the run ends (an axis), by any path.
    let mut preempt = crate::switch::preempt(&a.preempt)?;
    let res = run::run(spec, &out.path(), host.cpus, preempt.axis(), |c| {
        if !quiet {
            osutil::msg!("{}", report::latency_table::cell_line(c));
        }
    })
    .map_err(|e| anyhow!(e.render(term::flag)))?;
    term::print_result(a.result.format, &res, &out, quiet)?;
    if res.envelope.interrupted {
        return Ok(term::exit_code(true));
    }
    // A cell whose load ended (issue 29 item 5) ran and found a problem: exit 1, with its reason.
    let failed: Vec<String> = res
        .cells
        .iter()
        .filter(|c| c.status == results::Status::Failed)
        .map(|c| {
            let why = c.reason.as_deref().unwrap_or("failed");
            format!("{} under {}: {why}", c.policy, c.load)
        })
        .collect();
    if !failed.is_empty() {
        osutil::msg!(
            "preemptlab bench latency: {} cells failed: {}",
            failed.len(),
            failed.join("; ")
        );
        return Ok(1);
    }
    Ok(0)
}
