//! `check`'s text: the document `lab::check::judge` decided (effects, fixes, verdict) laid out as a table.

use results::check::{CheckDoc, EffectKind};
use results::host::Severity;
use stats::fmt::rate;

use crate::markup::{command, wrap, Style};

/// The table's short label for an effect.
fn short(what: EffectKind) -> &'static str {
    match what {
        EffectKind::HugePages => "huge pages, pg spinlock",
        EffectKind::TolerantLock => "adaptive lock, 4 KB pages",
        EffectKind::Both => "both",
    }
}

/// The check as text for `width` columns.
pub fn render(d: &CheckDoc, style: Style, width: usize) -> String {
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
        d.exposure.as_str().to_uppercase()
    );
    o.push_str(&wrap(&host, width, 0, 2));
    o.push('\n');
    if let Some(l) = &d.load {
        let cpu = match l.others_busy_pct {
            Some(p) => format!(
                "others kept {p:.0}% of the {} CPUs' time busy over {:.0} s",
                l.cpus, l.window_s
            ),
            None => "others' CPU share unknown (/proc/stat unreadable)".into(),
        };
        let instances = match l.instances.len() {
            0 => "no PostgreSQL running".to_string(),
            1 => "1 PostgreSQL instance running".to_string(),
            n => format!("{n} PostgreSQL instances running"),
        };
        let bench = match (l.loaded.is_some(), l.bench_ran) {
            (false, true) => "idle enough: the synthetic bench ran",
            (true, true) => "loaded: the synthetic bench ran beside it (--bench-beside-load)",
            (true, false) => "loaded: the synthetic bench did not run",
            (false, false) => "the synthetic bench did not run",
        };
        o.push_str(&wrap(
            &format!("Load: {cpu}; {instances}; {bench}"),
            width,
            0,
            2,
        ));
        o.push('\n');
    }
    for f in a.findings.iter().filter(|f| f.severity >= Severity::Warn) {
        o.push_str(&format!(
            "  {} {}: {}\n",
            f.severity.as_str(),
            f.id,
            wrap(&f.title, width, 6 + f.id.len() + 6, 6)
        ));
    }
    if let Some(dg) = &d.diagnosis {
        // "before the reproduction" only when one followed (issue 46 item 12).
        o.push_str(&format!(
            "\nDiagnosis of the running server ({:.0} s{}):\n",
            dg.spec.observed_s,
            match d.reproduction.is_some() {
                true => ", before the reproduction",
                false => "",
            }
        ));
        o.push_str(&crate::diagnose_table::summary(dg, width));
    }
    if let Some(why) = &d.diagnosis_skipped {
        o.push_str(&format!(
            "\n{}\n",
            wrap(
                &format!("No diagnosis of the running server: {why}"),
                width,
                0,
                2
            )
        ));
    }
    if !d.effects.is_empty() || d.reproduction.is_some() {
        o.push_str("\nMeasured here (ops/s, median; 95% bootstrap interval of the ratio):\n");
    } else {
        o.push_str("\nMeasured here: nothing by the synthetic bench\n");
    }
    for e in &d.effects {
        let row = format!(
            "  {:<26} {} -> {}: x{:.2} [{:.2}, {:.2}]",
            short(e.what),
            rate(e.a_ops_per_s),
            rate(e.b_ops_per_s),
            e.ratio,
            e.ci_lo,
            e.ci_hi,
        );
        o.push_str(&row);
        // Why it is not significant (documents written before the reason was kept say only that).
        match (&e.not_significant, e.significant) {
            (_, true) => {}
            (Some(why), false) => {
                o.push('\n');
                o.push_str(&format!("    {}", wrap(&format!("({why})"), width, 4, 5)));
            }
            (None, false) => o.push_str("  (not significant)"),
        }
        o.push('\n');
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
        let why = d.no_fix.as_deref().unwrap_or("none");
        o.push_str(&format!("  {}\n", wrap(why, width, 2, 2)));
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
            o.push_str(&format!("       {}\n", command(c, width, 7, 9)));
        }
    }
    o
}
