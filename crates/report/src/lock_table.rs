//! `bench lock` results as a table: one row per cell with the spread next to the centre, then the
//! comparisons that matter (4 KB vs huge pages per lock; each lock vs `pg`; the fault ceiling).

use axes::model::Model;
use axes::{Backing, LockKind};
use results::lock::{Cell, LockResult};
use results::Status;

use stats::fmt::{ns, rate, sig3};

use crate::markup::{columns, model_prefix, not_run_row, preemption, Align};

/// One line for a finished cell (progress output).
pub fn cell_line(c: &Cell) -> String {
    let line = cell_line_of(c);
    format!("{}{line}", model_prefix(c.preempt))
}

fn cell_line_of(c: &Cell) -> String {
    match (&c.status, &c.summary) {
        (Status::Ok, Some(s)) => format!(
            "{:>8} {:>11} {:>4}w  {:>7} ops/s  p99 acquire {:>8}  faults/op {:.2}  jain {:.2}",
            c.lock,
            c.pages,
            c.workers,
            rate(s.ops_per_s.median),
            ns(s.acquire_p99_ns.median),
            s.minflt_per_op.median,
            s.jain.median
        ),
        _ => format!(
            "{:>8} {:>11} {:>4}w  {:?}: {}",
            c.lock,
            c.pages,
            c.workers,
            c.status,
            c.reason.as_deref().unwrap_or("")
        ),
    }
}

fn spread(s: &stats::Summary) -> String {
    if s.median <= 0.0 || s.n < 2 {
        return "-".into();
    }
    format!("±{:.0}%", (s.max - s.min) / 2.0 / s.median * 100.0)
}

/// Renders the whole result.
pub fn render(r: &LockResult) -> String {
    let mut o = String::new();
    let h = &r.envelope.host;
    o.push_str(&format!(
        "bench lock on {} (kernel {}, preemption {}, {} CPUs); {} descriptors, work {} ns, cs +{} ns, {} x {} s, {}\n\n",
        h.hostname.value.as_deref().unwrap_or("?"),
        h.kernel.release.value.as_deref().unwrap_or("?"),
        preemption(h.kernel.preemption.model, r.cells.iter().map(|c| c.preempt)),
        h.kernel.cpus.value.unwrap_or(0),
        r.spec.descriptors,
        r.spec.work_ns,
        r.spec.cs_ns,
        r.spec.repeat,
        r.spec.duration_s,
        if r.spec.threads { "threads" } else { "processes" }
    ));
    // With the preemption model as an axis, a first column names each cell's.
    let models = r.cells.iter().any(|c| c.preempt.is_some());
    let lead = |c: &Cell| crate::markup::model_column(models, c.preempt);
    let mut rows = Vec::new();
    for c in &r.cells {
        match &c.summary {
            Some(s) if c.status == Status::Ok => rows.push(
                [
                    lead(c),
                    vec![
                        c.lock.to_string(),
                        c.pages.to_string(),
                        c.workers.to_string(),
                        rate(s.ops_per_s.median),
                        spread(&s.ops_per_s),
                        ns(s.acquire_p99_ns.median),
                        ns(s.hold_p99_ns.median),
                        sig3(s.stalled_per_mop.median),
                        format!("{:.2}", s.minflt_per_op.median),
                        ns(s.cpu_ns_per_op.median),
                        format!("{:.2}", s.ivcsw_per_op.median),
                        format!("{:.2}", s.jain.median),
                        format!("{:.3}", s.sleeps_per_op.median),
                    ],
                ]
                .concat(),
            ),
            _ => rows.push(not_run_row(
                [
                    lead(c),
                    vec![
                        c.lock.to_string(),
                        c.pages.to_string(),
                        c.workers.to_string(),
                    ],
                ]
                .concat(),
                &c.status,
                8,
                c.reason.as_deref(),
            )),
        }
    }
    let head: &[&str] = &[
        "lock", "pages", "wrk", "ops/s", "spread", "acq p99", "hold p99", "stall/M", "flt/op",
        "cpu/op", "ivcs/op", "jain", "sleep/op",
    ];
    let lead_head = crate::markup::model_header(models);
    let lead_align: &[Align] = if models { &[Align::Left] } else { &[] };
    o.push_str(&columns(
        &[lead_head, head].concat(),
        &[
            lead_align,
            &[
                Align::Left,
                Align::Left,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Left,
            ],
        ]
        .concat(),
        &rows,
        0,
        160,
    ));
    steal(r, &mut o);
    page_sizes(r, &mut o);
    ceilings(r, &mut o);
    o
}

/// The hypervisor's CPU steal over all repetitions: a noisy neighbour shows here.
fn steal(r: &LockResult, o: &mut String) {
    let steal: Vec<f64> = r
        .cells
        .iter()
        .flat_map(|c| c.reps.iter().filter_map(|x| x.steal_pct))
        .collect();
    if !steal.is_empty() {
        o.push_str(&format!(
            "\nCPU steal by the hypervisor during the repetitions: median {:.2}%, max {:.2}%\n",
            stats::median(&steal),
            steal.iter().copied().fold(0.0, f64::max)
        ));
    }
}

/// 4 KB vs huge pages, per lock and worker count.
fn page_sizes(r: &LockResult, o: &mut String) {
    let find = |m: Option<Model>, l: LockKind, p: Backing, w: u32| {
        r.cells
            .iter()
            .find(|c| c.preempt == m && c.lock == l && c.pages == p && c.workers == w)
            .and_then(|c| c.summary.as_ref())
    };
    let mut lines = Vec::new();
    for c in r.cells.iter().filter(|c| c.pages == Backing::Page4k) {
        for huge in [Backing::Hugetlb2m, Backing::Hugetlb1g, Backing::Thp] {
            if let (Some(a), Some(b)) = (
                find(c.preempt, c.lock, Backing::Page4k, c.workers),
                find(c.preempt, c.lock, huge, c.workers),
            ) {
                lines.push(format!(
                    "  {}{} with {} workers: 4k runs at {:.2}x its {huge} throughput ({} vs {})",
                    model_prefix(c.preempt),
                    c.lock,
                    c.workers,
                    a.ops_per_s.median / b.ops_per_s.median,
                    rate(a.ops_per_s.median),
                    rate(b.ops_per_s.median)
                ));
                break;
            }
        }
    }
    if !lines.is_empty() {
        o.push_str("\n4 KB pages vs huge pages:\n");
        o.push_str(&lines.join("\n"));
        o.push('\n');
    }
}

/// Each cell's throughput against its ceilings: the hold time, the CPUs, the faults under the lock.
fn ceilings(r: &LockResult, o: &mut String) {
    o.push_str("\nCeilings: everything done while holding is serialized, so throughput <= 1e9 / mean hold; the CPUs\n");
    o.push_str("allow <= CPUs x 1e9 / CPU per op (idle: the share of the machine's CPU time left idle while measuring);\n");
    match &r.fault_cost {
        Some(f) => o.push_str(&format!(
            "faults under the lock alone allow <= 1e9 / (faults/op x {} ns per first-touch fault, measured).\n",
            sig3(f.ns_per_fault)
        )),
        None => o.push_str("(no 4k cells: fault cost not measured)\n"),
    }
    for c in &r.cells {
        if let Some(s) = &c.summary {
            let fault = match s.fault_ceiling_ops_per_s {
                Some(fc) => format!(
                    "; faults ({:.2}/op) {} ({:.0}%)",
                    s.minflt_per_op.median,
                    rate(fc),
                    s.ops_per_s.median / fc * 100.0
                ),
                None => String::new(),
            };
            let idle: Vec<f64> = c.reps.iter().filter_map(|x| x.idle_pct).collect();
            let idle = if idle.is_empty() {
                String::new()
            } else {
                format!(", idle {:.1}%", stats::median(&idle))
            };
            o.push_str(&format!(
                "  {}{} {} {}w: reached {}; hold time {} ({:.0}%); CPU {} ({:.0}%{idle}){fault}\n",
                model_prefix(c.preempt),
                c.lock,
                c.pages,
                c.workers,
                rate(s.ops_per_s.median),
                rate(s.hold_ceiling_ops_per_s),
                s.ops_per_s.median / s.hold_ceiling_ops_per_s * 100.0,
                rate(s.cpu_ceiling_ops_per_s),
                s.ops_per_s.median / s.cpu_ceiling_ops_per_s * 100.0
            ));
        }
    }
}

/// The cells as a Markdown table (GUIDE.md and docs/notes are pasted from this, never typed).
pub fn markdown(r: &LockResult) -> String {
    let models = r.cells.iter().any(|c| c.preempt.is_some());
    let (head, rule) = if models {
        ("| preempt ", "|---")
    } else {
        ("", "")
    };
    let mut o = format!(
        "{head}| lock | pages | workers | ops/s (median) | min..max | acquire p99 | hold p99 | stalls/Mop | faults/op | CPU/op | Jain | sleeps/op |\n{rule}|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for c in &r.cells {
        for m in crate::markup::model_column(models, c.preempt) {
            o.push_str(&format!("| {m} "));
        }
        match &c.summary {
            Some(s) if c.status == Status::Ok => o.push_str(&format!(
                "| {} | {} | {} | {} | {}..{} | {} | {} | {} | {:.2} | {} | {:.2} | {:.3} |\n",
                c.lock,
                c.pages,
                c.workers,
                rate(s.ops_per_s.median),
                rate(s.ops_per_s.min),
                rate(s.ops_per_s.max),
                ns(s.acquire_p99_ns.median),
                ns(s.hold_p99_ns.median),
                sig3(s.stalled_per_mop.median),
                s.minflt_per_op.median,
                ns(s.cpu_ns_per_op.median),
                s.jain.median,
                s.sleeps_per_op.median
            )),
            _ => o.push_str(&format!(
                "| {} | {} | {} | {} | | | | | | | | {} |\n",
                c.lock,
                c.pages,
                c.workers,
                format!("{:?}", c.status).to_lowercase(),
                c.reason.clone().unwrap_or_default()
            )),
        }
    }
    o
}
