//! `check`'s judgement: the effects measured in the reproduction (judged by [`stats::judge`], the rule
//! `compare` uses), the fixes ranked by their measured effect, the one-line verdict, and the document that
//! carries them. Pure: the audit and the reproduction come in, the document goes out ([`crate::check`]
//! plans and runs the bench; `report::check` lays the document out).

use results::check::{CheckDoc, Effect, Fix};
use results::host::{Audit, Severity};
use results::lock::{Cell, LockResult};
use results::Status;
use stats::compare::Centre;
use stats::fmt::rate;
use stats::{judge, Sample};

/// Noise threshold of the effects: a ratio must clear 1 by more than 2%.
pub const NOISE: f64 = 0.02;

fn ops(cell: &Cell) -> Vec<f64> {
    cell.reps.iter().map(|r| r.ops_per_s).collect()
}

/// The effect of going from cell `a` to cell `b` (each a (lock, pages) pair) on ops/s, or None when either
/// did not run.
pub fn effect(res: &LockResult, what: &str, a: (&str, &str), b: (&str, &str)) -> Option<Effect> {
    let find = |l: &str, p: &str| {
        res.cells
            .iter()
            .find(|c| c.lock == l && c.pages == p && c.status == Status::Ok && !c.reps.is_empty())
    };
    let (ca, cb) = (find(a.0, a.1)?, find(b.0, b.1)?);
    let (sa, sb) = (ops(ca), ops(cb));
    let j = judge(
        &[Sample {
            a: &sa,
            b: &sb,
            centre: Centre::Harmonic,
        }],
        NOISE,
    )[0];
    let median = |c: &Cell| {
        c.summary
            .as_ref()
            .map(|s| s.ops_per_s.median)
            .unwrap_or(0.0)
    };
    Some(Effect {
        what: what.to_string(),
        a: format!("{} {}", a.0, a.1),
        b: format!("{} {}", b.0, b.1),
        a_ops_per_s: median(ca),
        b_ops_per_s: median(cb),
        ratio: j.ci.ratio,
        ci_lo: j.ci.lo,
        ci_hi: j.ci.hi,
        significant: j.significant,
    })
}

/// The effects the reproduction measures: huge pages for the spinlock, the tolerant lock, both.
/// `huge` is the huge-page backing's `--pages` name, when the reproduction has one.
pub fn effects(res: &LockResult, huge: Option<&str>) -> Vec<Effect> {
    let mut out = Vec::new();
    if let Some(h) = huge {
        out.extend(effect(
            res,
            "huge pages for a PostgreSQL-style spinlock",
            ("pg", "4k"),
            ("pg", h),
        ));
    }
    out.extend(effect(
        res,
        "a preemption-tolerant lock on 4 KB pages",
        ("pg", "4k"),
        ("adaptive", "4k"),
    ));
    if let Some(h) = huge {
        out.extend(effect(res, "both", ("pg", "4k"), ("adaptive", h)));
    }
    out
}

fn gain_pct(e: &Effect) -> f64 {
    (e.ratio - 1.0) * 100.0
}

/// The fixes, most effective first: huge pages (with the audit's exact pool sizes), a tolerant lock when it
/// measurably helps here, the rseq extension when the kernel has it, then every other fix the audit gives
/// for a warning or worse, not measured here.
pub fn fixes(audit: &Audit, effects: &[Effect]) -> Vec<Fix> {
    let mut fixes = Vec::new();
    let huge_effect = effects.iter().find(|e| e.what.starts_with("huge pages"));
    let huge_needed = audit.findings.iter().any(|f| f.pool.is_some());
    if huge_effect.is_some() || huge_needed {
        fixes.push(Fix {
            title: "put PostgreSQL's shared memory on huge pages".into(),
            measured_gain_pct: huge_effect.map(gain_pct),
            commands: huge_page_commands(audit),
        });
    }
    // A lock change is offered only when it measurably helps here.
    if let Some(e) = effects
        .iter()
        .find(|e| e.what.starts_with("a preemption-tolerant") && e.significant && e.ratio > 1.0)
    {
        fixes.push(Fix {
            title: "(for PostgreSQL developers) a lock that parks instead of spinning behind a preempted holder".into(),
            measured_gain_pct: Some(gain_pct(e)),
            commands: vec!["preemptlab bench lock --locks pg,futex,adaptive   # the full comparison; the futex mutex proposed for PostgreSQL on aarch64 is one such lock".into()],
        });
    }
    if audit.kernel.rseq_slice_extension.value == Some(true) {
        fixes.push(Fix {
            title: "the rseq time-slice extension (this kernel has it): the lock holder asks not to be preempted".into(),
            measured_gain_pct: None,
            commands: vec!["preemptlab bench lock --locks pg,rseq,adaptive   # measure it here".into()],
        });
    }
    for f in audit
        .findings
        .iter()
        .filter(|f| f.severity >= Severity::Warn && f.pool.is_none() && !f.fix.is_empty())
    {
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
    fixes
}

/// The one-line verdict; `skipped` is why 4 KB pages could not be compared with huge pages, if so.
pub fn verdict(audit: &Audit, effects: &[Effect], skipped: Option<&str>) -> String {
    let model = audit.kernel.preemption.model;
    let exposure = audit.verdict.as_str();
    match effects.iter().find(|e| e.what.starts_with("huge pages")) {
        Some(e) if e.significant && e.ratio > 1.0 => format!(
            "a PostgreSQL-style spinlock loses {:.0}% of its throughput on 4 KB pages on this host ({} vs {} ops/s, 95% CI of the huge-page gain x{:.2}..x{:.2}); preemption model '{model}'; audit: {exposure}",
            (1.0 - 1.0 / e.ratio) * 100.0,
            rate(e.a_ops_per_s),
            rate(e.b_ops_per_s),
            e.ci_lo,
            e.ci_hi
        ),
        Some(e) => format!(
            "no significant loss on 4 KB pages measured here (huge-page gain x{:.2}, CI x{:.2}..x{:.2}); preemption model '{model}'; audit: {exposure}",
            e.ratio, e.ci_lo, e.ci_hi
        ),
        None => format!(
            "4 KB pages could not be compared with huge pages here ({}); preemption model '{model}'; audit: {exposure}",
            skipped.unwrap_or_default()
        ),
    }
}

/// The commands that put the instances on huge pages: the audit's exact pool sizes where it has them.
fn huge_page_commands(audit: &Audit) -> Vec<String> {
    let mut commands = Vec::new();
    if audit.findings.iter().any(|f| f.pool.is_some()) {
        for t in hostfacts::hostpool::targets_of(audit).iter() {
            commands.push(format!("# {}", t.describe_for(None)));
            commands.extend(t.commands.iter().map(|c| format!("  {c}")));
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
        "postgresql.conf: huge_pages = on   # not try: fail at start rather than run on 4 KB pages"
            .into(),
    );
    commands
        .push("restart PostgreSQL, then: preemptlab audit   # expect 'on huge pages: yes'".into());
    commands
}

/// The check's document from the audit and the reproduction (`huge`: the huge-page backing's name, or why
/// there is none).
pub fn document(
    audit: Audit,
    reproduction: LockResult,
    huge: Result<&str, String>,
    elapsed_s: f64,
) -> CheckDoc {
    let effects = effects(&reproduction, huge.as_ref().ok().copied());
    let skipped = huge.err();
    CheckDoc {
        schema_version: results::SCHEMA_VERSION,
        kind: results::Kind::Check.name().into(),
        elapsed_s,
        verdict: verdict(&audit, &effects, skipped.as_deref()),
        exposure: audit.verdict.as_str().to_string(),
        fixes: fixes(&audit, &effects),
        audit,
        reproduction_skipped: skipped,
        reproduction: Some(reproduction),
        effects,
        diagnosis: None,
        diagnosis_skipped: None,
    }
}
