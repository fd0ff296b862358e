//! A diagnosis on the HTML report: per instance, the verdict, the per-second series over the window
//! (client-backend spinlock and page-fault shares; segment faults and the kernel's minor faults; switches
//! with the fault path on the stack) and the top functions.

use std::fmt::Write;

use results::diagnose::{DiagnoseResult, InstanceDiagnosis};

use crate::escape::esc;
use crate::svg::{line_chart, Axis, Series};
use stats::fmt::rate;

fn series(
    name: &str,
    i: &InstanceDiagnosis,
    f: impl Fn(&results::diagnose::Second) -> Option<f64>,
) -> Series {
    Series {
        name: name.into(),
        points: i
            .series
            .iter()
            .filter_map(|s| f(s).map(|y| (s.t_s, y, y, y)))
            .collect(),
    }
}

fn pct(part: u64, of: u64) -> Option<f64> {
    (of > 0).then(|| part as f64 / of as f64 * 100.0)
}

fn instance(o: &mut String, i: &InstanceDiagnosis) {
    let v = &i.verdict;
    let _ = write!(
        o,
        "<h3>Instance {} ({})</h3><p><b>Symptom {}</b>: spinlock share {:.1}% of {} client-backend samples (95% CI {:.1}..{:.1}%, threshold {}%); segment on {} pages, {} segment faults/s.</p><ul>",
        i.postmaster_pid,
        esc(i.data_dir.as_deref().unwrap_or("?")),
        v.symptom.as_str(),
        v.spinlock_share.pct,
        v.spinlock_share.of,
        v.spinlock_share.lo_pct,
        v.spinlock_share.hi_pct,
        v.threshold_pct,
        i.segment
            .as_ref()
            .map(|s| format!("{} KB", s.page_size_kib))
            .unwrap_or_else(|| "unknown".into()),
        rate(i.rates.segment_faults_per_s)
    );
    for r in v.reasons.iter().chain(&v.checks) {
        let _ = write!(o, "<li>{}</li>", esc(r));
    }
    o.push_str("</ul>");
    if !v.fix.is_empty() {
        let _ = write!(
            o,
            "<p>Fix (from the audit):</p><pre>{}</pre>",
            esc(&v.fix.join("\n"))
        );
    }
    let secs = Axis {
        label: "seconds into the window".into(),
        log: false,
        fmt: |v| format!("{v:.0}"),
    };
    let shares = [
        series("spinlock slow path", i, |s| {
            pct(s.cpu.spinlock, s.cpu.samples)
        }),
        series("page-fault handling", i, |s| {
            pct(s.cpu.page_fault, s.cpu.samples)
        }),
    ];
    let y = Axis {
        label: "% of on-CPU samples".into(),
        log: false,
        fmt: |v| format!("{v:.0}"),
    };
    let _ = write!(o, "<figure>{}<figcaption>Where the instance's CPU went, second by second (its on-CPU samples).</figcaption></figure>", line_chart("On-CPU shares", &secs, &y, &shares));
    let faults = [
        series("in the segment", i, |s| Some(s.segment_faults as f64)),
        series("all minor faults (kernel counters)", i, |s| {
            Some(s.minflt as f64)
        }),
    ];
    let y = Axis {
        label: "faults per second".into(),
        log: false,
        fmt: rate,
    };
    let _ = write!(o, "<figure>{}<figcaption>Minor page faults: sampled in the main shared segment (scaled by the sampling period) and all of them by the kernel's own counters.</figcaption></figure>", line_chart("Page faults", &secs, &y, &faults));
    let sw = [
        series("runnable, fault path on the stack", i, |s| {
            Some(s.switches.runnable_in_fault as f64)
        }),
        series("of them preempted inside the kernel", i, |s| {
            Some(s.switches.in_fault_kernel_preemption as f64)
        }),
    ];
    let y = Axis {
        label: "switches per second".into(),
        log: false,
        fmt: rate,
    };
    let _ = write!(o, "<figure>{}<figcaption>Backends switched out while runnable with the page-fault path on the kernel stack (sched_switch), and those preempted inside the kernel (impossible under none).</figcaption></figure>", line_chart("Switches inside faults", &secs, &y, &sw));
    if !i.top_functions.is_empty() {
        o.push_str("<table><tr><th>share</th><th>function</th><th>category</th></tr>");
        for f in i.top_functions.iter().take(12) {
            let _ = write!(
                o,
                "<tr><td>{:.1}%</td><td>{}</td><td>{}</td></tr>",
                f.pct,
                esc(&f.function),
                esc(&f.category)
            );
        }
        o.push_str("</table>");
    }
}

/// The section of one diagnosis.
pub(crate) fn section(label: &str, r: &DiagnoseResult, host: &str) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<h2>diagnose: {}</h2>{host}<p>{:.1} s observed; cpu-clock at {} Hz per CPU; {} minor faults sampled{}{}.</p>",
        esc(label),
        r.spec.observed_s,
        r.spec.cpu_clock_hz,
        esc(&crate::diagnose_table::fault_sampling(&r.spec)),
        esc(&crate::diagnose_table::fault_duty(&r.spec)),
        if r.envelope.interrupted { "; interrupted" } else { "" }
    );
    if let Some(sc) = &r.spec.scope {
        let _ = write!(
            o,
            "<p>Events: {}.</p>",
            esc(&crate::diagnose_table::scope_line(sc))
        );
    }
    for i in &r.instances {
        instance(&mut o, i);
    }
    if !r.unmeasured.is_empty() {
        o.push_str("<p>Not measured:</p><ul>");
        for u in &r.unmeasured {
            let _ = write!(o, "<li>{}: {}</li>", esc(&u.what), esc(&u.why));
        }
        o.push_str("</ul>");
    }
    o
}
