//! `preemptlab bench lock`.

use anyhow::Result;
use lab::lock::options;
use lab::lock::run::{self, RunOptions};
use lab::options::HostShape;

use crate::cli::BenchLockArgs;
use crate::term;

pub fn run(a: BenchLockArgs) -> Result<i32> {
    let spec = a.opts.spec(&HostShape::live()).map_err(term::flags)?;
    let out = term::result_file(&a.result, results::Kind::BenchLock, &[])?;
    // Switched back when this function returns (one mode) or when the run ends (an axis), by any path.
    let mut preempt = crate::switch::preempt(&a.preempt)?;
    let bar = term::bar(a.result.quiet, "{prefix:>9} [{bar:30}] {msg}");
    let pb = bar.clone();
    let print = term::cell_printer(bar, a.result.quiet);
    let run_opts = RunOptions {
        reserve_hugepages: a.opts.reserve_hugepages,
        out: out.path(),
        progress: Box::new(move |ci, n, label, phase, frac, rate| {
            if let Some(pb) = &pb {
                pb.set_prefix(format!("{}/{}", ci + 1, n));
                pb.set_position((((ci as f64) + frac) / n as f64 * 1000.0) as u64);
                let rate = stats::fmt::rate(rate);
                pb.set_message(format!("{label} {phase} {rate}"));
            }
        }),
        on_cell: Box::new(move |cell| print(report::lock_table::cell_line(cell))),
        grow_hint: "pass --reserve-hugepages (root) to grow it for the run".into(),
        models: preempt.axis(),
    };
    let res = run::run(spec, run_opts)?;
    if let (Some(c), false) = (&res.costs, a.result.quiet) {
        let fault = res.fault_cost.as_ref().map(|f| f.ns_per_fault);
        osutil::msg!("{}", lab::lock::costs::line(c, fault));
    }
    term::print_result(a.result.format, &res, &out, a.result.quiet)?;
    let said = format!("the cells measured so far are in {}", out.dest().display());
    term::bench_exit(res.envelope.interrupted, said, options::failures(&res))
}
