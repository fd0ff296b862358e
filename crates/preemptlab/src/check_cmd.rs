//! `preemptlab check`: the audit, a short reproduction of lock-holder preemption on this host, and a
//! verdict with the fixes ranked by their measured effect (planned and run by `lab::check::plan`, judged by
//! `lab::check::judge`).
//!
//! On a loaded host (PostgreSQL running, or others keeping the CPUs busy: `lab::check::load`, `lab::check::judge::loaded`)
//! it says so before measuring, with what the bench would cost, and measures only what is read-only (the
//! audit and a short diagnosis of the instances) unless `--bench-beside-load` asks for the bench; the flags
//! that shape the bench are refused there without it.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use hostfacts::Host;
use osutil::output::ResultFile;
use report::export::Format;

use crate::cli::CheckArgs;
use crate::term;

/// How the binary's user grows the pool, for the reason the reproduction has no huge-page side (or a
/// huge-page cell finds too few free pages).
const GROW_HINT: &str =
    "pass --reserve-hugepages as root to grow it for the check, restored afterwards";

/// The window of `check`'s diagnosis of the running instances.
const DIAGNOSIS: std::time::Duration = std::time::Duration::from_secs(5);

/// A short diagnosis of the running instances (the `--pg` servers, else `pids`), before the reproduction
/// loads the machine. It never fails the check: what stood in its way is said instead.
fn diagnosis(
    pg: &[String],
    pids: Vec<u32>,
    quiet: bool,
) -> Result<results::diagnose::DiagnoseResult, String> {
    if !quiet {
        osutil::msg!(
            "preemptlab check: diagnosing the running PostgreSQL for {} s...",
            DIAGNOSIS.as_secs()
        );
    }
    let mut opts = diagnose::Options::new(DIAGNOSIS);
    opts.dsns = pg.to_vec();
    if pg.is_empty() {
        opts.pids = pids;
    }
    osutil::stop::install_signal_flag().map_err(|e| e.to_string())?;
    diagnose::run(
        &opts,
        hostfacts::envelope::envelope(results::Kind::Diagnose),
        &osutil::stop::interrupted,
        &mut |_| {},
    )
    .map_err(|e| e.to_string())
}

/// The flags given that only shape the synthetic bench.
fn bench_flags(a: &CheckArgs) -> Vec<&'static str> {
    [
        (a.quick, "--quick"),
        (a.reserve_hugepages, "--reserve-hugepages"),
    ]
    .into_iter()
    .filter_map(|(given, flag)| given.then_some(flag))
    .collect()
}

/// The outputs, claimed before anything is measured (the diagnosis included): the reproduction's result
/// file and the report, which must be two different files.
fn claim_outputs(a: &CheckArgs) -> Result<ResultFile> {
    let out = a.out.clone().unwrap_or_else(|| {
        hostfacts::envelope::default_path(results::Kind::Check, osutil::unix_now())
    });
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
    let quiet = !std::io::stderr().is_terminal();
    let out = claim_outputs(&a)?;
    let host = Host::live();
    let sessions = hostfacts::pgquery::query_all(&a.pg)
        .map_err(anyhow::Error::from)
        .context("--pg")?;
    let audit = hostfacts::audit(&host, &sessions.servers);
    drop(sessions);

    let plan = lab::check::plan::plan(&audit, a.quick, a.reserve_hugepages);
    let mut load = lab::check::load::measure(&audit, plan.cost(), lab::check::load::WINDOW);
    let cost = lab::check::judge::bench_cost(&load);
    let diagnose = !a.pg.is_empty() || !audit.instances.is_empty();
    let run_bench = match &load.loaded {
        None => true,
        Some(why) if a.bench_beside_load => {
            osutil::msg!(
                "preemptlab check: {why}: the synthetic bench runs beside it as --bench-beside-load asks, and slows it meanwhile: {cost}"
            );
            true
        }
        Some(why) => {
            let flags = bench_flags(&a);
            if !flags.is_empty() {
                bail!(
                    "check {}: {why}; the synthetic bench those flags shape would take {cost} beside it: pass --bench-beside-load to run it anyway, or leave out {} for the read-only check ({})",
                    flags.join(" "),
                    flags.join(" and "),
                    if diagnose {
                        "the audit and a diagnosis of the running instances"
                    } else {
                        "the audit"
                    }
                );
            }
            osutil::msg!(
                "preemptlab check: {why}; the synthetic bench would take {cost} and slow it, so only what is read-only is measured: the audit{}; --bench-beside-load runs the bench too",
                if diagnose {
                    format!(" and a {} s diagnosis of the running PostgreSQL", DIAGNOSIS.as_secs())
                } else {
                    String::new()
                }
            );
            false
        }
    };
    let pids = audit.instances.iter().map(|i| i.postmaster_pid).collect();
    let diagnosed = diagnose.then(|| diagnosis(&a.pg, pids, quiet));
    if osutil::stop::interrupted() {
        osutil::msg!("preemptlab: interrupted");
        return Ok(osutil::stop::interrupted_exit_code());
    }

    let reproduction = if run_bench {
        if !quiet {
            let s = &plan.spec;
            osutil::msg!(
                "preemptlab check: reproducing on this host ({} workers on {} CPUs, pg vs adaptive, {}; {} x {} s)...",
                s.workers[0],
                plan.cpus,
                axes::join(&s.pages, " vs "),
                s.repeat,
                s.duration_s
            );
        }
        let on_cell = Box::new(move |c: &results::lock::Cell| {
            if !quiet {
                osutil::msg!("{}", report::lock_table::cell_line(c));
            }
        });
        let r = lab::check::plan::reproduce(
            &plan,
            a.reserve_hugepages,
            out.path(),
            on_cell,
            GROW_HINT,
        )?;
        out.finish()?;
        if r.envelope.interrupted {
            osutil::msg!("preemptlab: interrupted");
            return Ok(osutil::stop::interrupted_exit_code());
        }
        Some(r)
    } else {
        None
    };
    load.bench_ran = reproduction.is_some();
    let huge = plan.huge.map_err(|e| e.describe(GROW_HINT));
    let doc = lab::check::judge::document(lab::check::judge::Gathered {
        audit,
        reproduction,
        huge,
        load: Some(load),
        diagnosis: diagnosed,
        elapsed_s: t0.elapsed().as_secs_f64(),
    });
    // The result file: the reproduction as `bench lock` wrote it; without one, the check's document.
    if doc.reproduction.is_none() {
        term::write_atomic(&out.path(), &term::render(Format::Json, None, &doc)?)?;
        out.finish()?;
    }
    if let Some(path) = &a.report {
        let page = report::export::Page {
            docs: vec![report::html::Doc {
                label: "check".into(),
                doc: results::Document::Check(Box::new(doc.clone())),
            }],
            fleet: None,
            generated_utc: results::utc(osutil::unix_now()),
            skipped: Vec::new(),
        };
        let html = term::render(Format::Html, None, &page)?;
        term::write_atomic(path, &html)?;
    }
    term::stdout(term::render(a.format, Some(&a.color), &doc)?)?;
    if !quiet {
        osutil::msg!(
            "preemptlab: {} written to {} ({:.0} s in all)",
            if doc.reproduction.is_some() {
                "reproduction"
            } else {
                "check"
            },
            out.dest().display(),
            doc.elapsed_s
        );
    }
    let fail = a
        .fail_on
        .is_some_and(|f| f.fails_findings(&doc.audit.findings));
    Ok(if fail { 1 } else { 0 })
}
