//! `bench pg` results as a table: one row per cell with TPS, its spread and the signed change against the
//! first configuration at the same client count, latency, the cluster's page tables and Pss, faults per
//! transaction and whether the segment was on huge pages; then the page-table ratios.

use results::pg::{Cell, PgResult};
use results::Status;

use crate::markup::{columns, not_run_row, Align};
use stats::fmt::rate;
use stats::fmt::sig3;

/// kB as a size with a unit.
pub fn kib(x: f64) -> String {
    if x >= 1024.0 * 1024.0 {
        format!("{}G", sig3(x / 1024.0 / 1024.0))
    } else if x >= 1024.0 {
        format!("{}M", sig3(x / 1024.0))
    } else {
        format!("{}k", sig3(x))
    }
}

fn ms(x: Option<f64>) -> String {
    x.map(|v| format!("{}ms", sig3(v)))
        .unwrap_or_else(|| "-".into())
}

fn label(c: &Cell) -> String {
    format!(
        "sb {} hp {} c {}",
        c.shared_buffers, c.huge_pages, c.clients
    )
}

/// One line for a finished run (progress output).
pub fn rep_line(c: &Cell, r: &results::pg::Rep) -> String {
    format!(
        "{:<28} round {}: {:>7} tps  p99 {:>8}  page tables {:>6}  on huge pages: {}",
        label(c),
        r.round + 1,
        rate(r.tps),
        ms(r.latency_ms.p99),
        kib(r.page_tables_kib as f64),
        if r.segment.on_huge_pages { "yes" } else { "no" }
    )
}

/// The baseline of a cell: the first configuration's cell with the same client count.
fn baseline<'a>(r: &'a PgResult, c: &Cell) -> Option<&'a Cell> {
    r.cells
        .iter()
        .find(|b| b.clients == c.clients && b.summary.is_some())
}

fn signed_change(r: &PgResult, c: &Cell) -> String {
    match (baseline(r, c), &c.summary) {
        (Some(b), Some(s)) if !std::ptr::eq(b, c) => {
            let base = b.summary.as_ref().expect("filtered").tps.median;
            format!("{:+.1}%", (s.tps.median / base - 1.0) * 100.0)
        }
        (Some(_), Some(_)) => "base".into(),
        _ => String::new(),
    }
}

fn spread(s: &stats::Summary) -> String {
    if s.median <= 0.0 || s.n < 2 {
        return "-".into();
    }
    format!("{}..{}", rate(s.min), rate(s.max))
}

/// Renders the whole result.
pub fn render(r: &PgResult) -> String {
    let mut o = String::new();
    let h = &r.envelope.host;
    let s = &r.spec;
    o.push_str(&format!(
        "bench pg on {} (kernel {}, preemption {}, {} CPUs); PostgreSQL {}, {} {}{}{}, scale {}, {} x {} s (+{} s warm-up), protocol {}{}{}\n",
        h.hostname.value.as_deref().unwrap_or("?"),
        h.kernel.release.value.as_deref().unwrap_or("?"),
        h.kernel.preemption.model,
        h.kernel.cpus.value.unwrap_or(0),
        s.pg_version.as_deref().unwrap_or("?"),
        s.driver,
        s.script,
        s.pooler.as_deref().map(|p| format!(" via {p}")).unwrap_or_default(),
        if s.reconnect { ", reconnecting" } else { "" },
        s.scale,
        s.repeat,
        s.duration_s,
        s.warmup_s,
        s.protocol,
        if s.prewarm { ", prewarmed" } else { "" },
        if r.envelope.interrupted { " (INTERRUPTED)" } else { "" }
    ));
    if let Some(b) = r.setup.db_bytes {
        o.push_str(&format!(
            "data {} loaded in {:.1} s\n",
            kib(b as f64 / 1024.0),
            r.setup.load_s
        ));
    }
    o.push('\n');
    let mut rows = Vec::new();
    for c in &r.cells {
        match &c.summary {
            Some(m) if c.status == Status::Ok => rows.push(vec![
                c.shared_buffers.clone(),
                c.huge_pages.clone(),
                c.clients.to_string(),
                rate(m.tps.median),
                spread(&m.tps),
                signed_change(r, c),
                ms(m.latency_p99_ms.as_ref().map(|x| x.median)),
                kib(m.page_tables_kib.median),
                kib(m.pss_kib.median),
                sig3(m.minflt_per_tx.median),
                if m.on_huge_pages { "yes" } else { "no" }.into(),
            ]),
            _ => rows.push(not_run_row(
                vec![
                    c.shared_buffers.clone(),
                    c.huge_pages.clone(),
                    c.clients.to_string(),
                ],
                &c.status,
                6,
                c.reason.as_deref(),
            )),
        }
    }
    o.push_str(&columns(
        &[
            "shared_buffers",
            "huge_pages",
            "clients",
            "tps",
            "min..max",
            "vs first",
            "lat p99",
            "page tables",
            "Pss",
            "faults/tx",
            "huge",
        ],
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
            Align::Left,
        ],
        &rows,
        0,
        140,
    ));
    let mut lines = Vec::new();
    for c in r.cells.iter().filter(|c| c.huge_pages == "off") {
        let Some(off) = &c.summary else { continue };
        for on in r.cells.iter().filter(|x| {
            x.huge_pages != "off" && x.clients == c.clients && x.shared_buffers == c.shared_buffers
        }) {
            let Some(m) = &on.summary else { continue };
            lines.push(format!(
                "  sb {} c {}: huge_pages={} page tables {} vs {} with off ({:.3}x); tps {:+.1}%",
                c.shared_buffers,
                c.clients,
                on.huge_pages,
                kib(m.page_tables_kib.median),
                kib(off.page_tables_kib.median),
                m.page_tables_kib.median / off.page_tables_kib.median.max(1.0),
                (m.tps.median / off.tps.median - 1.0) * 100.0
            ));
        }
    }
    if !lines.is_empty() {
        o.push_str("\nHuge pages vs 4 KB pages (page tables: the cluster's peak sum of VmPTE):\n");
        o.push_str(&lines.join("\n"));
        o.push('\n');
    }
    let steal: Vec<f64> = r
        .cells
        .iter()
        .flat_map(|c| c.reps.iter().filter_map(|x| x.steal_pct))
        .collect();
    if !steal.is_empty() {
        o.push_str(&format!(
            "\nCPU steal by the hypervisor during the runs: median {:.2}%, max {:.2}%\n",
            stats::median(&steal),
            steal.iter().copied().fold(0.0, f64::max)
        ));
    }
    o.push_str(&diagnoses(r));
    o
}

/// `--diagnose`: one line per run with the diagnosis' key counts, and what it could not measure.
fn diagnoses(r: &PgResult) -> String {
    let mut o = String::new();
    for c in &r.cells {
        for rep in &c.reps {
            if let Some(d) = &rep.diagnosis {
                let sw = &d.totals.switches;
                o.push_str(&format!(
                    "  {:<28} round {}: spinlock {:.1}% of {} samples, page faults {:.1}%, segment faults {}/s, in-fault switches {}/s (preempted in the kernel {}, cond_resched {}, return to user {}), symptom {}\n",
                    label(c),
                    rep.round + 1,
                    d.verdict.spinlock_share.pct,
                    d.verdict.spinlock_share.of,
                    d.verdict.page_fault_share.pct,
                    rate(d.rates.segment_faults_per_s),
                    rate(d.rates.preempted_in_fault_per_s),
                    sw.in_fault_kernel_preemption,
                    sw.in_fault_voluntary,
                    sw.after_fault_return_to_user,
                    d.verdict.symptom.as_str()
                ));
            }
            for u in &rep.diagnosis_unmeasured {
                o.push_str(&format!(
                    "  {:<28} round {}: not measured: {}: {}\n",
                    label(c),
                    rep.round + 1,
                    u.what,
                    u.why
                ));
            }
        }
    }
    if o.is_empty() {
        return o;
    }
    format!("\nDiagnosis during each measured run (client backends' on-CPU samples):\n{o}")
}

/// The cells as a Markdown table (GUIDE.md and docs/notes are pasted from this, never typed).
pub fn markdown(r: &PgResult) -> String {
    let mut o = String::from(
        "| shared_buffers | huge_pages | clients | TPS (median) | min..max | vs first | latency p99 | page tables | Pss | faults/tx | on huge pages |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for c in &r.cells {
        match &c.summary {
            Some(m) if c.status == Status::Ok => o.push_str(&format!(
                "| {} | {} | {} | {} | {}..{} | {} | {} | {} | {} | {} | {} |\n",
                c.shared_buffers,
                c.huge_pages,
                c.clients,
                rate(m.tps.median),
                rate(m.tps.min),
                rate(m.tps.max),
                signed_change(r, c),
                ms(m.latency_p99_ms.as_ref().map(|x| x.median)),
                kib(m.page_tables_kib.median),
                kib(m.pss_kib.median),
                sig3(m.minflt_per_tx.median),
                if m.on_huge_pages { "yes" } else { "no" }
            )),
            _ => o.push_str(&format!(
                "| {} | {} | {} | {} | | | | | | | {} |\n",
                c.shared_buffers,
                c.huge_pages,
                c.clients,
                format!("{:?}", c.status).to_lowercase(),
                c.reason.clone().unwrap_or_default()
            )),
        }
    }
    o
}
