//! `preemptlab bench pg`.

use anyhow::{anyhow, Result};
use lab::options::HostShape;
use lab::pg::options;
use lab::pg::run::{self, PgRunError, RunOptions};
use pgharness::pgbouncer::PgBouncerError;

use crate::cli::BenchPgArgs;
use crate::term;

pub fn run(a: BenchPgArgs) -> Result<i32> {
    let spec = a.opts.spec(&HostShape::live()).map_err(term::flags)?;
    // A script file it reads is never its output.
    let script: Vec<_> = a.opts.script.iter().map(std::path::PathBuf::from).collect();
    let out = term::result_file(&a.result, results::Kind::BenchPg, &script)?;
    // Switched back when this function returns (one mode) or when the run ends (an axis), by any path.
    let mut preempt = crate::switch::preempt(&a.preempt)?;
    let template = "{prefix:>7} [{bar:30}] {elapsed_precise} {msg}";
    let bar = term::bar(a.result.quiet, template);
    let pb = bar.clone();
    let print = term::cell_printer(bar, a.result.quiet);
    let several = spec.builds.len() > 1;
    let run_opts = RunOptions {
        reserve_hugepages: a.opts.reserve_hugepages,
        out: out.path(),
        parent_dir: None,
        progress: Box::new(move |done, total, label, phase, frac, tps| {
            if let Some(pb) = &pb {
                pb.set_prefix(format!("{done}/{total}"));
                // The bar moves through each measured run too, not only between runs.
                let pos = (done as f64 + frac) / total.max(1) as f64;
                pb.set_position((pos.min(1.0) * 1000.0) as u64);
                let live = match tps > 0.0 {
                    true => format!(" {} tps", stats::fmt::rate(tps)),
                    false => String::new(),
                };
                pb.set_message(format!("{label} {phase}{live}"));
            }
        }),
        on_rep: Box::new(move |cell, rep| print(report::pg_table::rep_line(cell, rep, several))),
        grow_hint: "add --reserve-hugepages (root), or grow it with `preemptlab hugepages --shared-memory ... --apply`".into(),
        models: preempt.axis(),
    };
    let res = run::run(spec, run_opts).map_err(flags)?;
    term::print_result(a.result.format, &res, &out, a.result.quiet)?;
    let said = format!(
        "the runs measured so far are in {} (the cluster is removed)",
        out.dest().display()
    );
    term::bench_exit(res.envelope.interrupted, said, options::failures(&res))
}

/// The run's error, naming the option it is about as the command line spells it.
fn flags(e: PgRunError) -> anyhow::Error {
    match e {
        PgRunError::PrewarmExtension { .. } | PgRunError::Prewarm { .. } => {
            anyhow!("--prewarm: {e}")
        }
        PgRunError::ScriptRejected { .. } | PgRunError::ScriptCheck { .. } => {
            anyhow!("--script {e}")
        }
        PgRunError::Pooler(PgBouncerError::NotFound) => anyhow!("--pooler pgbouncer: {e}"),
        e => anyhow!(e),
    }
}
