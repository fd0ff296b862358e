//! `preemptlab check`: the audit, a short reproduction of lock-holder preemption on this host, and a
//! verdict with the fixes ranked by their measured effect (planned and run by `lab::check`, judged by
//! `lab::judge`).

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use hostfacts::Host;
use osutil::output::ResultFile;

use crate::cli::CheckArgs;
use crate::term;

/// How the binary's user grows the pool, for the reason the reproduction has no huge-page side (or a
/// huge-page cell finds too few free pages).
const GROW_HINT: &str =
    "pass --reserve-hugepages as root to grow it for the check, restored afterwards";

/// The window of `check --pg`'s diagnosis.
const DIAGNOSIS: std::time::Duration = std::time::Duration::from_secs(5);

/// `check --pg`: a short diagnosis of the servers, before the reproduction loads the machine. It never
/// fails the check: what stood in its way is said instead.
fn diagnosis(pg: &[String], quiet: bool) -> Result<results::diagnose::DiagnoseResult, String> {
    if !quiet {
        osutil::msg!(
            "preemptlab check: diagnosing the running server for {} s...",
            DIAGNOSIS.as_secs()
        );
    }
    let mut opts = diagnose::Options::new(DIAGNOSIS);
    opts.dsns = pg.to_vec();
    osutil::stop::install_signal_flag().map_err(|e| e.to_string())?;
    diagnose::run(
        &opts,
        lab::result::envelope("diagnose"),
        &osutil::stop::interrupted,
        &mut |_| {},
    )
    .map_err(|e| e.to_string())
}

/// The outputs, claimed before anything is measured (the diagnosis included): the reproduction's result
/// file and the report, which must be two different files.
fn claim_outputs(a: &CheckArgs) -> Result<ResultFile> {
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("check", lab::result::unix_now()));
    if let Some(report) = &a.report {
        osutil::output::check_distinct(&out, report)
            .map_err(|e| anyhow!("--out and --report: {e}"))?;
        osutil::output::check_writable(report).map_err(|e| match e.wants_another_path() {
            true => anyhow!("--report {e} (choose another path with --report)"),
            false => anyhow!("--report {e}"),
        })?;
    }
    term::claim(&out, &[])
}

pub fn run(a: CheckArgs) -> Result<i32> {
    let t0 = Instant::now();
    let out = claim_outputs(&a)?;
    let diagnosed = (!a.pg.is_empty()).then(|| diagnosis(&a.pg, !std::io::stderr().is_terminal()));
    if osutil::stop::interrupted() {
        osutil::msg!("preemptlab: interrupted");
        return Ok(osutil::stop::interrupted_exit_code());
    }
    let host = Host::live();
    let sessions = hostfacts::pgquery::query_all(&a.pg)
        .map_err(anyhow::Error::from)
        .context("--pg")?;
    let audit = hostfacts::audit(&host, &sessions.servers);
    drop(sessions);
    let quiet = !std::io::stderr().is_terminal();

    let plan = lab::check::plan(&audit, a.quick, a.reserve_hugepages);
    if !quiet {
        let s = &plan.spec;
        osutil::msg!(
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
            osutil::msg!("{}", report::lock_table::cell_line(c));
        }
    });
    let reproduction =
        lab::check::reproduce(&plan, a.reserve_hugepages, out.path(), on_cell, GROW_HINT)?;
    out.finish()?;
    if reproduction.envelope.interrupted {
        osutil::msg!("preemptlab: interrupted");
        return Ok(osutil::stop::interrupted_exit_code());
    }
    let huge = plan
        .huge
        .map(|h| h.name())
        .map_err(|e| e.describe(GROW_HINT));
    let mut doc = lab::judge::document(audit, reproduction, huge, t0.elapsed().as_secs_f64());
    match diagnosed {
        Some(Ok(d)) => doc.diagnosis = Some(Box::new(d)),
        Some(Err(why)) => doc.diagnosis_skipped = Some(why),
        None => {}
    }
    if let Some(path) = &a.report {
        let page = report::export::Page {
            docs: vec![report::html::Doc {
                label: "check".into(),
                doc: results::Document::Check(Box::new(doc.clone())),
            }],
            fleet: None,
            generated_utc: lab::result::utc(lab::result::unix_now()),
        };
        let html = term::render(report::export::Format::Html, None, &page)?;
        term::write_atomic(path, &html)?;
    }
    term::stdout(term::render(a.format, Some(&a.color), &doc)?)?;
    if !quiet {
        osutil::msg!(
            "preemptlab: reproduction written to {} ({:.0} s in all)",
            out.dest().display(),
            doc.elapsed_s
        );
    }
    Ok(0)
}
