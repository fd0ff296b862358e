//! `preemptlab check`: the audit, a short reproduction of lock-holder preemption on this host, and a
//! verdict with the fixes ranked by their measured effect (planned and run by `lab::check`, judged by
//! `report::check`).

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::{Context, Result};
use hostfacts::Host;

use crate::cli::{CheckArgs, PlainFormat};
use crate::term;

/// How the binary's user grows the pool, for the reason the reproduction has no huge-page side (or a
/// huge-page cell finds too few free pages).
const GROW_HINT: &str =
    "pass --reserve-hugepages as root to grow it for the check, restored afterwards";

pub fn run(a: CheckArgs) -> Result<i32> {
    let t0 = Instant::now();
    let host = Host::live();
    let sessions = hostfacts::pgquery::query_all(&a.pg)
        .map_err(anyhow::Error::from)
        .context("--pg")?;
    let audit = hostfacts::audit(&host, &sessions.servers);
    drop(sessions);
    let quiet = !std::io::stderr().is_terminal();

    let plan = lab::check::plan(&audit, a.quick, a.reserve_hugepages);
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("check", lab::result::unix_now()));
    term::claim_output(&out)?;
    if !quiet {
        let s = &plan.spec;
        eprintln!(
            "preemptlab check: reproducing on this host ({} workers on {} CPUs, pg vs adaptive, {}; {} x {} s)...",
            s.workers[0],
            plan.cpus,
            s.pages.join(" vs "),
            s.repeat,
            s.duration_s
        );
    }
    let on_cell = Box::new(move |c: &lab::lockrun::Cell| {
        if !quiet {
            eprintln!("{}", report::lock_table::cell_line(c));
        }
    });
    let reproduction =
        lab::check::reproduce(&plan, a.reserve_hugepages, out.clone(), on_cell, GROW_HINT)?;
    if reproduction.envelope.interrupted {
        eprintln!("preemptlab: interrupted");
        return Ok(osutil::stop::interrupted_exit_code());
    }
    let huge = plan
        .huge
        .map(|h| h.name())
        .map_err(|e| e.describe(GROW_HINT));
    let doc = report::check::document(audit, reproduction, huge, t0.elapsed().as_secs_f64());
    if let Some(path) = &a.report {
        let html = report::html::render(
            &[report::html::Doc {
                label: "check".into(),
                doc: results::Document::Check(Box::new(doc.clone())),
            }],
            &lab::result::utc(lab::result::unix_now()),
        );
        term::write_atomic(path, &html)?;
    }
    match a.format {
        PlainFormat::Json => term::stdout(report::json(&doc))?,
        PlainFormat::Table => term::stdout(report::check::render(
            &doc,
            term::style(&a.color),
            term::width(),
        ))?,
    }
    if !quiet {
        eprintln!(
            "preemptlab: reproduction written to {} ({:.0} s in all)",
            out.display(),
            doc.elapsed_s
        );
    }
    Ok(0)
}
