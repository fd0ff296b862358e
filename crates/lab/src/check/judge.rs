//! `check`'s judgement: whether the host is loaded (then the synthetic bench needs the user's word), the
//! effects measured in the reproduction (judged by [`stats::judge`], the rule `compare` uses), the fixes
//! ranked by their measured effect, the one-line verdict, and the document that carries them. Pure: the
//! audit, the load seen and the reproduction come in, the document goes out ([`crate::check::plan`] plans and
//! runs the bench, [`crate::check::load`] samples the load; `report::check` lays the document out).

use axes::{Backing, LockKind};
use results::check::{CellKey, CheckDoc, Effect, EffectKind, Fix, Load};
use results::diagnose::DiagnoseResult;
use results::host::{Audit, Severity};
use results::lock::{Cell, LockResult};
use results::Status;
use stats::compare::{significant, Centre};
use stats::fmt::rate;
use stats::{judge, Sample};

/// Noise threshold of the effects: a ratio must clear 1 by more than 2%.
pub const NOISE: f64 = 0.02;

/// From this share of all CPU time kept busy by others, the host counts as loaded, %: a fifth of the
/// machine is work the bench, which takes every CPU, would slow down (an idle host measures a few %).
pub const BUSY_PCT: f64 = 20.0;

/// Why the host counts as loaded (a PostgreSQL instance runs, whatever its CPU: a database's clients come
/// and go; or others kept at least [`Load::busy_threshold_pct`] of the CPU time busy), in words; None when
/// it does not.
pub fn loaded(load: &Load) -> Option<String> {
    let mut why = Vec::new();
    if !load.instances.is_empty() {
        let list: Vec<String> = load
            .instances
            .iter()
            .map(|i| match &i.data_dir {
                Some(d) => format!("postmaster {} ({d})", i.postmaster_pid),
                None => format!("postmaster {}", i.postmaster_pid),
            })
            .collect();
        why.push(format!("PostgreSQL runs here ({})", list.join(", ")));
    }
    if let Some(pct) = load
        .others_busy_pct
        .filter(|p| *p >= load.busy_threshold_pct)
    {
        why.push(format!(
            "other work kept {pct:.0}% of the {} CPUs' time busy over {:.0} s",
            load.cpus, load.window_s
        ));
    }
    (!why.is_empty()).then(|| why.join(" and "))
}

/// What the synthetic bench costs, in words: "16 worker processes on all 2 CPUs for ~34 s".
pub fn bench_cost(load: &Load) -> String {
    let c = &load.bench_cost;
    format!(
        "{} worker processes on all {} CPUs for ~{:.0} s",
        c.workers, c.cpus, c.duration_s
    )
}

/// Why a ratio is not significant, or None when it is: within noise only when its interval reaches into
/// 1 +/- the threshold; an interval clear of that band is short of repetitions for Welch's test instead.
fn not_significant(j: &stats::judge::Judgement, a_reps: usize, b_reps: usize) -> Option<String> {
    if j.significant {
        return None;
    }
    let band = format!("1 +/- {:.0}%", NOISE * 100.0);
    Some(if !significant(&j.ci, NOISE) {
        format!(
            "within noise: its interval x{:.2}..x{:.2} reaches into {band}",
            j.ci.lo, j.ci.hi
        )
    } else if a_reps < 2 || b_reps < 2 {
        format!(
            "not significant: its interval clears {band} but one repetition a side cannot be tested"
        )
    } else {
        format!(
            "not significant: its interval clears {band} but Welch's test does not agree (p = {:.2} with {a_reps} and {b_reps} repetitions); run without --quick for more",
            j.welch_p
        )
    })
}

fn ops(cell: &Cell) -> Vec<f64> {
    cell.reps.iter().map(|r| r.ops_per_s).collect()
}

/// The effect of going from cell `a` to cell `b` on ops/s, or None when either did not run.
pub fn effect(res: &LockResult, what: EffectKind, a: CellKey, b: CellKey) -> Option<Effect> {
    let find = |k: CellKey| {
        res.cells.iter().find(|c| {
            c.lock == k.lock && c.pages == k.pages && c.status == Status::Ok && !c.reps.is_empty()
        })
    };
    let (ca, cb) = (find(a)?, find(b)?);
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
        what,
        a,
        b,
        a_ops_per_s: median(ca),
        b_ops_per_s: median(cb),
        ratio: j.ci.ratio,
        ci_lo: j.ci.lo,
        ci_hi: j.ci.hi,
        significant: j.significant,
        not_significant: not_significant(&j, sa.len(), sb.len()),
    })
}

/// The effects the reproduction measures: huge pages for the spinlock, the tolerant lock, both.
/// `huge` is the huge-page backing, when the reproduction has one.
pub fn effects(res: &LockResult, huge: Option<Backing>) -> Vec<Effect> {
    let cell = |lock, pages| CellKey { lock, pages };
    let pg_4k = cell(LockKind::Pg, Backing::Page4k);
    let mut out = Vec::new();
    if let Some(h) = huge {
        let pg_huge = cell(LockKind::Pg, h);
        out.extend(effect(res, EffectKind::HugePages, pg_4k, pg_huge));
    }
    let adaptive_4k = cell(LockKind::Adaptive, Backing::Page4k);
    out.extend(effect(res, EffectKind::TolerantLock, pg_4k, adaptive_4k));
    if let Some(h) = huge {
        let adaptive_huge = cell(LockKind::Adaptive, h);
        out.extend(effect(res, EffectKind::Both, pg_4k, adaptive_huge));
    }
    out
}

/// The effect of one kind, when measured.
fn find(effects: &[Effect], what: EffectKind) -> Option<&Effect> {
    effects.iter().find(|e| e.what == what)
}

fn gain_pct(e: &Effect) -> f64 {
    (e.ratio - 1.0) * 100.0
}

/// The fixes, most effective first: huge pages (with the audit's exact pool sizes), a tolerant lock when it
/// measurably helps here, the rseq extension when the kernel has it, then every other fix the audit gives
/// for a warning or worse, not measured here.
pub fn fixes(audit: &Audit, effects: &[Effect]) -> Vec<Fix> {
    let mut fixes = Vec::new();
    let huge_effect = find(effects, EffectKind::HugePages);
    let huge_needed = audit.findings.iter().any(|f| f.pool.is_some());
    if huge_effect.is_some() || huge_needed {
        fixes.push(Fix {
            title: "put PostgreSQL's shared memory on huge pages".into(),
            measured_gain_pct: huge_effect.map(gain_pct),
            commands: huge_page_commands(audit),
        });
    }
    // A lock change is offered only when it measurably helps here.
    if let Some(e) =
        find(effects, EffectKind::TolerantLock).filter(|e| e.significant && e.ratio > 1.0)
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

/// Why the huge-page side of the reproduction has no effect: `skipped` (the plan had no huge-page
/// backing), else the huge-page cell's own status and reason, never empty.
pub fn huge_side_missing(
    reproduction: Option<&LockResult>,
    huge: Option<Backing>,
    skipped: Option<&str>,
) -> String {
    if let Some(why) = skipped.filter(|w| !w.is_empty()) {
        return why.to_string();
    }
    let Some(r) = reproduction else {
        return "the reproduction did not run".into();
    };
    let cell = huge.and_then(|h| {
        r.cells
            .iter()
            .find(|c| c.lock == LockKind::Pg && c.pages == h)
    });
    match cell {
        Some(c) if c.status != Status::Ok => format!(
            "its {} cell was {}: {}",
            c.pages,
            serde_json::to_value(c.status)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_else(|| "not run".into()),
            c.reason.as_deref().unwrap_or("no reason recorded")
        ),
        Some(c) => format!("its {} cell has no repetitions", c.pages),
        None => "the reproduction has no huge-page cell".into(),
    }
}

/// What the diagnosis said, per instance, for the verdict: "diagnosis of postmaster 123: present".
fn diagnosed(d: Option<&DiagnoseResult>) -> Option<String> {
    let d = d?;
    let each: Vec<String> = d
        .instances
        .iter()
        .map(|i| {
            format!(
                "postmaster {} {}",
                i.postmaster_pid,
                i.verdict.symptom.as_str()
            )
        })
        .collect();
    (!each.is_empty()).then(|| format!("live diagnosis: {}", each.join(", ")))
}

/// The one-line verdict. `missing` is why 4 KB pages could not be compared with huge pages, if they were
/// not; `load` says why the reproduction did not run, if it did not.
pub fn verdict(
    audit: &Audit,
    effects: &[Effect],
    missing: &str,
    load: Option<&Load>,
    diagnosis: Option<&DiagnoseResult>,
) -> String {
    let model = audit.kernel.preemption.model;
    let exposure = audit.verdict.as_str();
    let mut tail = format!("preemption model '{model}'; audit: {exposure}");
    if let Some(d) = diagnosed(diagnosis) {
        tail = format!("{tail}; {d}");
    }
    if let Some(why) = load
        .filter(|l| l.bench_ran)
        .and_then(|l| l.loaded.as_deref())
    {
        tail = format!(
            "{tail}; measured beside other load ({why}), which makes the figures lower and noisier"
        );
    }
    if let Some(l) = load.filter(|l| !l.bench_ran) {
        return format!(
            "not measured here: the synthetic bench did not run beside the load ({}; --bench-beside-load runs it: {}); {tail}",
            l.loaded.as_deref().unwrap_or("the host is loaded"),
            bench_cost(l)
        );
    }
    let Some(e) = find(effects, EffectKind::HugePages) else {
        return format!(
            "4 KB pages could not be compared with huge pages here ({missing}); {tail}"
        );
    };
    let ci = format!("95% CI x{:.2}..x{:.2}", e.ci_lo, e.ci_hi);
    if e.significant && e.ratio > 1.0 {
        format!(
            "a PostgreSQL-style spinlock loses {:.0}% of its throughput on 4 KB pages on this host ({} vs {} ops/s, {ci} of the huge-page gain); {tail}",
            (1.0 - 1.0 / e.ratio) * 100.0,
            rate(e.a_ops_per_s),
            rate(e.b_ops_per_s),
        )
    } else if e.significant {
        format!(
            "no loss on 4 KB pages here: huge pages were slower (x{:.2}, {ci}); {tail}",
            e.ratio
        )
    } else {
        let why = e
            .not_significant
            .clone()
            .unwrap_or_else(|| "not significant".into());
        format!(
            "no significant loss on 4 KB pages measured here (huge-page gain x{:.2}, {why}); {tail}",
            e.ratio
        )
    }
}

/// Why `fixes` is empty, in words that say what was measured: None when there are fixes.
pub fn no_fix(fixes: &[Fix], effects: &[Effect], bench_ran: bool) -> Option<String> {
    if !fixes.is_empty() {
        return None;
    }
    let huge = find(effects, EffectKind::HugePages);
    Some(match huge {
        _ if !bench_ran => {
            "none from the audit (nothing above info); the reproduction did not run, so nothing was measured".into()
        }
        Some(e) if !(e.significant && e.ratio > 1.0) => {
            "none needed: nothing above info in the audit and no loss on 4 KB pages measured here".into()
        }
        Some(_) => "none from the audit (nothing above info)".into(),
        None => {
            "none from the audit (nothing above info); 4 KB pages were not compared with huge pages here (see above)".into()
        }
    })
}

/// The commands that put the instances on huge pages: the audit's exact pool sizes where it has them.
fn huge_page_commands(audit: &Audit) -> Vec<String> {
    let mut commands = Vec::new();
    if audit.findings.iter().any(|f| f.pool.is_some()) {
        for t in hostfacts::hugepages::target::targets_of(audit).iter() {
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
            commands.push("# preemptlab hugepages --shared-memory SIZE (or --pg DSN, --data-dir DIR) prints the exact vm.nr_hugepages".into());
        }
    }
    commands.push(hostfacts::findings::HUGE_PAGES_ON.into());
    commands.push(hostfacts::findings::RESTART_THEN_AUDIT.into());
    commands
}

/// What `check` gathered, for [`document`].
pub struct Gathered {
    /// The audit.
    pub audit: Audit,
    /// The reproduction, when it ran.
    pub reproduction: Option<LockResult>,
    /// The huge-page backing, or why the plan has none.
    pub huge: Result<Backing, String>,
    /// The other load seen before measuring.
    pub load: Option<Load>,
    /// The diagnosis of the running instances, or why there is none (None: not attempted).
    pub diagnosis: Option<Result<DiagnoseResult, String>>,
    /// Wall time, s.
    pub elapsed_s: f64,
}

/// The check's document from what it gathered.
pub fn document(g: Gathered) -> CheckDoc {
    let huge_name = g.huge.as_ref().ok().copied();
    let effects = match &g.reproduction {
        Some(r) => effects(r, huge_name),
        None => Vec::new(),
    };
    let skipped = g.huge.as_ref().err().cloned();
    let bench_ran = g.reproduction.is_some();
    let missing = huge_side_missing(g.reproduction.as_ref(), huge_name, skipped.as_deref());
    let (diagnosis, diagnosis_skipped) = match g.diagnosis {
        Some(Ok(d)) => (Some(Box::new(d)), None),
        Some(Err(why)) => (None, Some(why)),
        None => (None, None),
    };
    let verdict = verdict(
        &g.audit,
        &effects,
        &missing,
        g.load.as_ref(),
        diagnosis.as_deref(),
    );
    let fixes = fixes(&g.audit, &effects);
    let reproduction_skipped = match (&g.load, bench_ran) {
        (Some(l), false) => Some(format!(
            "The synthetic bench did not run: {}; it would take {} (--bench-beside-load runs it anyway).",
            l.loaded.as_deref().unwrap_or("the host is loaded"),
            bench_cost(l)
        )),
        (None, false) => Some("The synthetic bench did not run.".into()),
        (_, true) if find(&effects, EffectKind::HugePages).is_none() => {
            Some(missing.clone())
        }
        _ => None,
    };
    CheckDoc {
        schema_version: results::SCHEMA_VERSION,
        kind: results::Kind::Check,
        elapsed_s: g.elapsed_s,
        verdict,
        exposure: g.audit.verdict,
        no_fix: no_fix(&fixes, &effects, bench_ran),
        fixes,
        audit: g.audit,
        reproduction_skipped,
        reproduction: g.reproduction,
        effects,
        diagnosis,
        diagnosis_skipped,
        load: g.load,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::check::{BenchCost, LoadInstance};
    use stats::compare::RatioCi;
    use stats::judge::Judgement;

    fn repo(path: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(path)
    }

    fn audit() -> Audit {
        hostfacts::audit(
            &hostfacts::Host::at(repo("tests/fixtures/debian-6.1-voluntary")),
            &[],
        )
    }

    /// A measured `bench lock` result with a `pg` cell on `pages` too, `status` and `reason` as given.
    fn reproduction(pages: Backing, status: Status, reason: Option<&str>) -> LockResult {
        let text =
            std::fs::read_to_string(repo("docs/results/bench-lock-ceiling-auto.json")).unwrap();
        let mut r: LockResult = serde_json::from_str(&text).unwrap();
        let mut c = r.cells[0].clone();
        c.pages = pages;
        c.status = status;
        c.reason = reason.map(String::from);
        if status != Status::Ok {
            c.reps.clear();
            c.summary = None;
        }
        r.cells.push(c);
        r
    }

    fn judgement(lo: f64, ratio: f64, hi: f64, significant: bool) -> Judgement {
        Judgement {
            ci: RatioCi {
                ratio,
                lo,
                hi,
                level: 0.95,
            },
            welch_p: 0.08,
            mann_whitney_p: 0.3,
            significant,
        }
    }

    fn load(others_busy_pct: f64, instances: &[u32], bench_ran: bool) -> Load {
        let mut l = Load {
            window_s: 1.0,
            cpus: 2,
            others_busy_pct: Some(others_busy_pct),
            busy_threshold_pct: BUSY_PCT,
            instances: instances
                .iter()
                .map(|p| LoadInstance {
                    postmaster_pid: *p,
                    data_dir: None,
                })
                .collect(),
            loaded: None,
            bench_cost: BenchCost {
                workers: 16,
                cpus: 2,
                duration_s: 11.0,
            },
            bench_ran,
        };
        l.loaded = loaded(&l);
        l
    }

    /// Issue 25: `check --quick` printed "x1.91 [1.56, 2.58] (within noise)": an interval clear of the
    /// noise band is never "within noise"; with too few repetitions for Welch's test it says that.
    #[test]
    fn within_noise_on_an_interval_clear_of_the_band_regression() {
        let clear = not_significant(&judgement(1.56, 1.91, 2.58, false), 2, 2).unwrap();
        assert!(!clear.contains("within noise"), "{clear}");
        assert!(
            clear.contains("Welch") && clear.contains("2 and 2 repetitions"),
            "{clear}"
        );
        let one = not_significant(&judgement(1.56, 1.91, 2.58, false), 1, 1).unwrap();
        assert!(one.contains("one repetition"), "{one}");
        for (lo, hi) in [(0.99, 1.10), (0.90, 0.99), (1.01, 1.30), (0.5, 1.5)] {
            let n = not_significant(&judgement(lo, 1.0, hi, false), 3, 3).unwrap();
            assert!(n.starts_with("within noise"), "[{lo}, {hi}]: {n}");
        }
        assert_eq!(not_significant(&judgement(1.5, 1.9, 2.5, true), 3, 3), None);
    }

    /// Issue 25: `check --quick` printed "could not be compared with huge pages here ()": the reason is
    /// never empty, whether the plan had no huge-page side or its cell did not run.
    #[test]
    fn empty_reason_when_the_huge_page_side_is_missing_regression() {
        let a = audit();
        let skipped = reproduction(
            Backing::Hugetlb2m,
            Status::Skipped,
            Some("3 free pages, 130 needed"),
        );
        let why = huge_side_missing(Some(&skipped), Some(Backing::Hugetlb2m), None);
        assert!(
            why.contains("skipped") && why.contains("130 needed"),
            "{why}"
        );
        for why in [
            huge_side_missing(Some(&skipped), Some(Backing::Hugetlb2m), Some("")),
            huge_side_missing(
                Some(&reproduction(Backing::Hugetlb2m, Status::Failed, None)),
                Some(Backing::Hugetlb2m),
                None,
            ),
            huge_side_missing(Some(&skipped), None, None),
            huge_side_missing(None, None, None),
        ] {
            assert!(!why.trim().is_empty());
            let v = verdict(&a, &[], &why, None, None);
            assert!(!v.contains("()"), "{v}");
        }
        let doc = document(Gathered {
            audit: a,
            reproduction: Some(skipped),
            huge: Ok(Backing::Hugetlb2m),
            load: Some(load(3.0, &[], true)),
            diagnosis: None,
            elapsed_s: 1.0,
        });
        assert!(doc.verdict.contains("130 needed"), "{}", doc.verdict);
        assert!(doc
            .reproduction_skipped
            .as_deref()
            .is_some_and(|r| r.contains("130 needed")));
    }

    /// Issue 25: "no loss measured here" was printed when the huge-page side was never measured.
    #[test]
    fn no_loss_measured_when_the_huge_side_never_ran_regression() {
        let a = audit();
        let r = reproduction(Backing::Hugetlb2m, Status::Skipped, Some("no pages"));
        let doc = document(Gathered {
            audit: a.clone(),
            reproduction: Some(r),
            huge: Ok(Backing::Hugetlb2m),
            load: Some(load(3.0, &[], true)),
            diagnosis: None,
            elapsed_s: 1.0,
        });
        if doc.fixes.is_empty() {
            let why = doc.no_fix.unwrap();
            assert!(!why.contains("no loss"), "{why}");
        }
        assert!(no_fix(&[], &[], true).is_some_and(|w| !w.contains("no loss")));
        assert!(no_fix(&[], &[], false).is_some_and(|w| !w.contains("no loss")));
        // Read-only: nothing measured, and the verdict says why.
        let doc = document(Gathered {
            audit: a,
            reproduction: None,
            huge: Ok(Backing::Hugetlb2m),
            load: Some(load(60.0, &[4242], false)),
            diagnosis: None,
            elapsed_s: 1.0,
        });
        assert!(
            doc.verdict.starts_with("not measured here"),
            "{}",
            doc.verdict
        );
        assert!(doc.verdict.contains("postmaster 4242"), "{}", doc.verdict);
        assert!(
            doc.verdict.contains("--bench-beside-load"),
            "{}",
            doc.verdict
        );
        assert!(doc.effects.is_empty());
        assert!(doc.no_fix.as_deref().is_none_or(|w| !w.contains("no loss")));
    }

    #[test]
    fn a_host_is_loaded_by_a_database_or_a_busy_cpu() {
        assert_eq!(load(5.0, &[], true).loaded, None);
        let db = load(1.0, &[7345], false).loaded.unwrap();
        assert!(
            db.contains("PostgreSQL runs here (postmaster 7345)"),
            "{db}"
        );
        let cpu = load(63.0, &[], false).loaded.unwrap();
        assert!(cpu.contains("63% of the 2 CPUs"), "{cpu}");
        let both = load(63.0, &[1], false).loaded.unwrap();
        assert!(both.contains(" and other work"), "{both}");
        assert_eq!(
            bench_cost(&load(0.0, &[], true)),
            "16 worker processes on all 2 CPUs for ~11 s"
        );
    }
}
