//! A `sim` result as text: one line per cell while it runs, and the table (text or markdown).

use axes::model::Workload;
use results::sim::{SimCell, SimResult};

use crate::markup::{columns, markdown_table, Align};
use stats::fmt::{ns, rate};

/// One line for a cell that ran.
pub fn cell_line(c: &SimCell) -> String {
    let Some(s) = c.summary.as_ref() else {
        // A cell a stop cut short before its first run (the result file says it was interrupted).
        return format!(
            "{:>9} {:>5} {:>3} {:>4} CPUs {:>6}w: not run",
            c.model, c.lock, c.pages, c.cpus, c.workers
        );
    };
    format!(
        "{:>9} {:>5} {:>3} {:>4} CPUs {:>6}w{}: {:>7} {}  spin {:>3.0}%  idle {:>3.0}%  LHP/s {:>7.0}",
        c.model,
        c.lock,
        c.pages,
        c.cpus,
        c.workers,
        c.sweep.as_deref().map(|v| format!(" {v}")).unwrap_or_default(),
        rate(s.throughput().median),
        if s.txn_per_s.is_some() { "tx/s" } else { "ops/s" },
        s.spinning.median * 100.0,
        s.idle.median * 100.0,
        s.lhp_per_s.median
    )
}

/// The table: one row per cell, with the ratio to the first model of the same configuration.
pub fn render(r: &SimResult, md: bool) -> String {
    let mut rows = Vec::new();
    for c in &r.cells {
        // A cell without runs (cut short by a stop, or a hand-edited file) has no row.
        let Some(s) = c.summary.as_ref() else {
            continue;
        };
        let base = r
            .cells
            .iter()
            .find(|b| {
                b.lock == c.lock
                    && b.pages == c.pages
                    && b.cpus == c.cpus
                    && b.workers == c.workers
                    && b.sweep == c.sweep
            })
            .and_then(|b| b.summary.as_ref())
            .map(|b| s.throughput().median / b.throughput().median)
            .unwrap_or(f64::NAN);
        rows.push(vec![
            c.model.to_string(),
            c.lock.to_string(),
            c.pages.to_string(),
            c.cpus.to_string(),
            c.workers.to_string(),
            c.sweep.clone().unwrap_or_default(),
            rate(s.throughput().median),
            format!("{}..{}", rate(s.throughput().min), rate(s.throughput().max)),
            format!("{base:.2}"),
            format!("{:.0}%", s.spinning.median * 100.0),
            format!("{:.0}%", s.idle.median * 100.0),
            format!("{:.0}", s.lhp_per_s.median),
            ns(s.hold_p99_ns.median),
            ns(s.acquire_p99_ns.median),
        ]);
    }
    let sweep_name = r.spec.sweep.as_ref().map(|(k, _)| k.as_str()).unwrap_or("");
    let unit = if r.spec.params.workload == Workload::Txn {
        "tx/s"
    } else {
        "ops/s"
    };
    let header = [
        "model", "lock", "pages", "CPUs", "workers", sweep_name, unit, "min..max", "vs first",
        "spinning", "idle", "LHP/s", "hold p99", "acq p99",
    ];
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| i != 5 || !sweep_name.is_empty())
        .collect();
    let hdr: Vec<&str> = keep.iter().map(|&i| header[i]).collect();
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| keep.iter().map(|&i| r[i].clone()).collect())
        .collect();
    if md {
        // Text columns (model..pages, and the swept parameter when there is one) are left-aligned.
        let left = keep.iter().filter(|&&i| i < 6).count();
        return markdown_table(&hdr, &rows, left);
    }
    let align: Vec<Align> = keep
        .iter()
        .map(|&i| if i < 3 { Align::Left } else { Align::Right })
        .collect();
    format!(
        "sim: {} runs per cell of {} s virtual time (+{} s warm-up), HZ {}; model, not measurement (GUIDE.md \"sim\")\n\n{}",
        r.spec.repeat,
        r.spec.params.duration_ns as f64 / 1e9,
        r.spec.params.warmup_ns as f64 / 1e9,
        r.spec.params.hz,
        columns(&hdr, &align, &rows, 0, 160)
    )
}
