//! `preemptlab check`: the audit, a short reproduction of lock-holder preemption on this host, and a
//! verdict with the fixes ranked by their measured effect.

use std::io::IsTerminal;
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use hostfacts::Host;
use lab::lockbench::Spec;
use lab::lockrun::{self, Cell, LockResult, RunOptions, Status};
use results::check::{CheckDoc, Effect, Fix};
use stats::compare::{bootstrap_ratio, significant, Centre};

use crate::cli::{CheckArgs, PlainFormat};
use crate::term;

fn ops(cell: &Cell) -> Vec<f64> {
    cell.reps.iter().map(|r| r.ops_per_s).collect()
}

fn effect(res: &LockResult, what: &str, a: (&str, &str), b: (&str, &str)) -> Option<Effect> {
    let find = |l: &str, p: &str| {
        res.cells
            .iter()
            .find(|c| c.lock == l && c.pages == p && c.status == Status::Ok && !c.reps.is_empty())
    };
    let (ca, cb) = (find(a.0, a.1)?, find(b.0, b.1)?);
    let ci = bootstrap_ratio(&ops(ca), &ops(cb), Centre::Harmonic, 10_000, 0.95, 0x5EED);
    Some(Effect {
        what: what.to_string(),
        a: format!("{} {}", a.0, a.1),
        b: format!("{} {}", b.0, b.1),
        a_ops_per_s: ca
            .summary
            .as_ref()
            .map(|s| s.ops_per_s.median)
            .unwrap_or(0.0),
        b_ops_per_s: cb
            .summary
            .as_ref()
            .map(|s| s.ops_per_s.median)
            .unwrap_or(0.0),
        ratio: ci.ratio,
        ci_lo: ci.lo,
        ci_hi: ci.hi,
        significant: significant(&ci, 0.02),
    })
}

/// The best huge-page backing this host can give the reproduction, or why none.
fn huge_backing(
    audit: &hostfacts::Audit,
    bytes: u64,
    may_reserve: bool,
) -> Result<&'static str, String> {
    let free_2m = audit.memory.pool(2048).map(|p| p.available()).unwrap_or(0);
    let need = bytes.div_ceil(2 << 20);
    if audit.memory.pool(2048).is_some()
        && (free_2m >= need || (may_reserve && hostfacts::host::is_root()))
    {
        return Ok("hugetlb-2m");
    }
    if let Some(s) = audit.memory.thp_shmem_enabled.get() {
        if s == "advise" || s == "always" || s == "within_size" || s == "force" {
            return Ok("thp");
        }
    }
    Err(format!(
        "no huge pages to compare with: the 2 MB pool has {free_2m} free pages (needs {need}; pass --reserve-hugepages as root to grow it for the check, restored afterwards) and shared-memory THP is {}",
        audit.memory.thp_shmem_enabled.value.as_deref().unwrap_or("unavailable")
    ))
}

pub fn run(a: CheckArgs) -> Result<i32> {
    let t0 = Instant::now();
    let host = Host::live();
    let sessions = hostfacts::pgquery::query_all(&a.pg)
        .map_err(anyhow::Error::from)
        .context("--pg")?;
    let servers = &sessions.servers;
    let audit = hostfacts::audit(&host, servers);
    drop(sessions);
    let cpus = audit.kernel.cpus.value.unwrap_or(1);
    let quiet = !std::io::stderr().is_terminal();

    // The reproduction: pg vs adaptive, 4 KB vs the best huge-page backing, 8x CPUs.
    let descriptors: u64 = if a.quick { 1 << 21 } else { 4 << 20 };
    let (duration_s, warmup_s, repeat) = if a.quick {
        (0.8, 0.2, 2)
    } else {
        (2.0, 0.5, 3)
    };
    let bytes = lab::lockbench::region_bytes(descriptors) as u64;
    let huge = huge_backing(&audit, bytes, a.reserve_hugepages);
    let mut pages = vec!["4k".to_string()];
    if let Ok(h) = &huge {
        pages.push(h.to_string());
    }
    let workers = (8 * cpus).min(shmlock::MAX_WAITERS as u32);
    let spec = Spec {
        locks: vec!["pg".into(), "adaptive".into()],
        pages: pages.clone(),
        workers_given: vec!["8x".into()],
        workers: vec![workers],
        duration_s,
        warmup_s,
        repeat,
        descriptors,
        cs_ns: 0,
        work_ns: 1000,
        reconnect_every: Some(lab::lockbench::auto_reconnect_every(descriptors)),
        reconnect_every_given: "auto".into(),
        threads: false,
        prefetch_next: false,
        start_age: "uniform".into(),
        seed: 1,
    };
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("check", lab::result::unix_now()));
    crate::term::claim_output(&out)?;
    if !quiet {
        eprintln!(
            "preemptlab check: reproducing on this host ({} workers on {cpus} CPUs, pg vs adaptive, {}; {repeat} x {duration_s} s)...",
            workers,
            pages.join(" vs ")
        );
    }
    let opts = RunOptions {
        reserve_hugepages: a.reserve_hugepages,
        out: out.clone(),
        progress: Box::new(|_, _, _, _, _, _| {}),
        on_cell: Box::new(move |c| {
            if !quiet {
                eprintln!("{}", report::lock_table::cell_line(c));
            }
        }),
    };
    let reproduction = lockrun::run(spec, opts).map_err(|e| anyhow!(e))?;
    if reproduction.envelope.interrupted {
        eprintln!("preemptlab: interrupted");
        return Ok(lab::guard::interrupted_exit_code());
    }

    let mut effects = Vec::new();
    let huge_name = huge.as_ref().ok().copied();
    if let Some(h) = huge_name {
        effects.extend(effect(
            &reproduction,
            "huge pages for a PostgreSQL-style spinlock",
            ("pg", "4k"),
            ("pg", h),
        ));
    }
    effects.extend(effect(
        &reproduction,
        "a preemption-tolerant lock on 4 KB pages",
        ("pg", "4k"),
        ("adaptive", "4k"),
    ));
    if let Some(h) = huge_name {
        effects.extend(effect(&reproduction, "both", ("pg", "4k"), ("adaptive", h)));
    }

    // Fixes, ranked by measured effect.
    let pct = |e: &Effect| (e.ratio - 1.0) * 100.0;
    let mut fixes = Vec::new();
    // The huge-page fix with the audit's exact pool sizes, measured when the reproduction could compare.
    let huge_fix = huge_page_commands(&audit);
    let huge_effect = effects.iter().find(|e| e.what.starts_with("huge pages"));
    let huge_needed = audit.findings.iter().any(|f| f.pool.is_some());
    if huge_effect.is_some() || huge_needed {
        fixes.push(Fix {
            title: "put PostgreSQL's shared memory on huge pages".into(),
            measured_gain_pct: huge_effect.map(pct),
            commands: huge_fix,
        });
    }
    // A lock change is offered only when it measurably helps here.
    if let Some(e) = effects
        .iter()
        .find(|e| e.what.starts_with("a preemption-tolerant") && e.significant && e.ratio > 1.0)
    {
        fixes.push(Fix {
            title: "(for PostgreSQL developers) a lock that parks instead of spinning behind a preempted holder".into(),
            measured_gain_pct: Some(pct(e)),
            commands: vec!["preemptlab bench lock --locks pg,futex,adaptive   # the full comparison; seed 001's futex patch is one such lock".into()],
        });
    }
    if audit.kernel.rseq_slice_extension.value == Some(true) {
        fixes.push(Fix {
            title: "the rseq time-slice extension (this kernel has it): the lock holder asks not to be preempted".into(),
            measured_gain_pct: None,
            commands: vec!["preemptlab bench lock --locks pg,rseq,adaptive   # measure it here".into()],
        });
    }
    // Then every other fix the audit gives for a warning or worse, not measured here.
    for f in audit.findings.iter().filter(|f| {
        f.severity >= hostfacts::Severity::Warn && f.pool.is_none() && !f.fix.is_empty()
    }) {
        if !fixes.iter().any(|x| x.commands == f.fix) {
            fixes.push(Fix {
                title: format!("{} (audit: {})", f.title, f.id),
                measured_gain_pct: None,
                commands: f.fix.clone(),
            });
        }
    }
    fixes.sort_by(|x, y| {
        y.measured_gain_pct
            .unwrap_or(f64::MIN)
            .total_cmp(&x.measured_gain_pct.unwrap_or(f64::MIN))
    });

    let model = audit.kernel.preemption.model;
    let exposure = audit.verdict.as_str().to_string();
    let cost = effects.iter().find(|e| e.what.starts_with("huge pages"));
    let verdict = match cost {
        Some(e) if e.significant && e.ratio > 1.0 => format!(
            "a PostgreSQL-style spinlock loses {:.0}% of its throughput on 4 KB pages on this host ({} vs {} ops/s, 95% CI of the huge-page gain x{:.2}..x{:.2}); preemption model '{model}'; audit: {exposure}",
            (1.0 - 1.0 / e.ratio) * 100.0,
            report::lock_table::rate(e.a_ops_per_s),
            report::lock_table::rate(e.b_ops_per_s),
            e.ci_lo,
            e.ci_hi
        ),
        Some(e) => format!(
            "no significant loss on 4 KB pages measured here (huge-page gain x{:.2}, CI x{:.2}..x{:.2}); preemption model '{model}'; audit: {exposure}",
            e.ratio, e.ci_lo, e.ci_hi
        ),
        None => format!(
            "4 KB pages could not be compared with huge pages here ({}); preemption model '{model}'; audit: {exposure}",
            huge.as_ref().err().cloned().unwrap_or_default()
        ),
    };
    let doc = CheckDoc {
        schema_version: results::SCHEMA_VERSION,
        kind: results::Kind::Check.name().into(),
        elapsed_s: t0.elapsed().as_secs_f64(),
        audit,
        reproduction_skipped: huge.err(),
        reproduction: Some(reproduction),
        effects,
        verdict,
        exposure,
        fixes,
    };
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
        PlainFormat::Json => print!("{}", report::json(&doc)),
        PlainFormat::Table => print!("{}", render(&doc, term::style(a.color), term::width())),
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

/// The commands that put the instances on huge pages: the audit's exact pool sizes where it has them.
fn huge_page_commands(audit: &hostfacts::Audit) -> Vec<String> {
    let mut commands = Vec::new();
    let mut seen = Vec::new();
    for f in &audit.findings {
        if let (Some(pool), Some(pid)) = (&f.pool, f.instance) {
            if seen.contains(&pid) {
                continue;
            }
            seen.push(pid);
            commands.push(format!(
                "instance {pid}: {} pages of {} ({})",
                pool.pool_target,
                hostfacts::parse::Bytes::from_kib(pool.page_size_kib),
                pool.basis_detail
            ));
            commands.extend(pool.commands.iter().map(|c| format!("  {c}")));
        }
    }
    if commands.is_empty() {
        for inst in &audit.instances {
            commands.push(format!(
                "preemptlab hugepages --pid {}   # the exact pool size and postgresql.conf lines",
                inst.postmaster_pid
            ));
        }
        if audit.instances.is_empty() {
            commands.push("preemptlab hugepages --shared-memory <shared memory size>   # or --pg DSN / --data-dir DIR: prints the exact vm.nr_hugepages".into());
        }
    }
    commands.push(
        "postgresql.conf: huge_pages = on   (not try: fail at start rather than run on 4 KB pages)"
            .into(),
    );
    commands
        .push("restart PostgreSQL, then: preemptlab audit   # expect 'on huge pages: yes'".into());
    commands
}

/// The table's short label for an effect.
fn short(what: &str) -> &str {
    if what.starts_with("huge pages") {
        "huge pages, pg spinlock"
    } else if what.starts_with("a preemption-tolerant") {
        "adaptive lock, 4 KB pages"
    } else {
        what
    }
}

fn render(d: &CheckDoc, style: report::Style, width: usize) -> String {
    use report::markup::wrap;
    let mut o = String::new();
    let a = &d.audit;
    o.push_str(&style.bold("preemptlab check\n\n"));
    let host = format!(
        "Host: kernel {} on {} CPUs, preemption {} ({}), audit verdict {}",
        a.kernel.release.value.as_deref().unwrap_or("?"),
        a.kernel.cpus.value.unwrap_or(0),
        a.kernel.preemption.model,
        a.kernel
            .preemption
            .decided_by
            .as_deref()
            .unwrap_or("no source"),
        d.exposure.to_uppercase()
    );
    o.push_str(&wrap(&host, width, 0, 2));
    o.push('\n');
    for f in a
        .findings
        .iter()
        .filter(|f| f.severity >= hostfacts::Severity::Warn)
    {
        o.push_str(&format!(
            "  {} {}: {}\n",
            f.severity.as_str(),
            f.id,
            wrap(&f.title, width, 6 + f.id.len() + 6, 6)
        ));
    }
    o.push_str("\nMeasured here (ops/s, median; 95% bootstrap interval of the ratio):\n");
    for e in &d.effects {
        o.push_str(&format!(
            "  {:<26} {} -> {}: x{:.2} [{:.2}, {:.2}]{}\n",
            short(&e.what),
            report::lock_table::rate(e.a_ops_per_s),
            report::lock_table::rate(e.b_ops_per_s),
            e.ratio,
            e.ci_lo,
            e.ci_hi,
            if e.significant {
                ""
            } else {
                "  (within noise)"
            }
        ));
    }
    if let Some(why) = &d.reproduction_skipped {
        o.push_str(&format!("  {}\n", wrap(why, width, 2, 2)));
    }
    o.push_str(&format!(
        "\n{} {}\n",
        style.bold("Verdict:"),
        wrap(&d.verdict, width, 9, 2)
    ));
    o.push_str("\nFixes, most effective first:\n");
    if d.fixes.is_empty() {
        o.push_str("  none needed: nothing above info in the audit and no loss measured here\n");
    }
    for (i, f) in d.fixes.iter().enumerate() {
        let gain = f
            .measured_gain_pct
            .map(|g| format!(" (measured: {g:+.0}% throughput)"))
            .unwrap_or_else(|| " (not measured here)".into());
        o.push_str(&format!(
            "  {}. {}\n",
            i + 1,
            wrap(&format!("{}{gain}", f.title), width, 5, 5)
        ));
        for c in &f.commands {
            o.push_str(&format!("       {}\n", wrap(c, width, 7, 9)));
        }
    }
    o
}
