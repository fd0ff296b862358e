//! A `bench latency` result as text: one line per cell while it runs, and the table (text or markdown).

use results::latency::{Cell, LatencyResult};
use results::Status;

use crate::markup::{columns, Align};

/// One line for a cell, as it finishes.
pub fn cell_line(c: &Cell) -> String {
    let m = crate::markup::model_prefix(c.preempt);
    m + &match &c.summary {
        Some(s) if c.status == Status::Ok => format!(
            "{:>5} load {:<9} p50 {:>7.1} us  p99 {:>8.1} us  p99.9 {:>8.1} us  max {:>8.1} us",
            c.policy, c.load, s.p50_us.median, s.p99_us.median, s.p999_us.median, s.max_us.median
        ),
        _ => format!(
            "{:>5} load {:<9} {:?}: {}",
            c.policy,
            c.load,
            c.status,
            c.reason.as_deref().unwrap_or("")
        ),
    }
}

/// The table (text or markdown).
pub fn render(r: &LatencyResult, md: bool) -> String {
    let h = &r.envelope.host;
    let models = r.cells.iter().any(|c| c.preempt.is_some());
    let mut rows = Vec::new();
    for c in &r.cells {
        let lead = crate::markup::model_column(models, c.preempt);
        let load = if c.load.name().chars().count() > 24 {
            format!("{}…", c.load.name().chars().take(23).collect::<String>())
        } else {
            c.load.to_string()
        };
        match &c.summary {
            Some(s) if c.status == Status::Ok => {
                let min = c
                    .reps
                    .iter()
                    .map(|x| x.latency_us.min)
                    .fold(f64::INFINITY, f64::min);
                let over: u64 = c.reps.iter().map(|x| x.overruns).sum();
                rows.push(
                    [
                        lead,
                        vec![
                            c.policy.to_string(),
                            load,
                            c.threads.to_string(),
                            format!("{min:.1}"),
                            format!("{:.1}", s.p50_us.median),
                            format!("{:.1}", s.p99_us.median),
                            format!("{:.1}..{:.1}", s.p99_us.min, s.p99_us.max),
                            format!("{:.1}", s.p999_us.median),
                            format!("{:.1}", s.max_us.max),
                            over.to_string(),
                        ],
                    ]
                    .concat(),
                )
            }
            _ => rows.push(crate::markup::not_run_row(
                [
                    lead,
                    vec![c.policy.to_string(), load, c.threads.to_string()],
                ]
                .concat(),
                &c.status,
                5,
                c.reason.as_deref(),
            )),
        }
    }
    let header: Vec<&str> = [
        crate::markup::model_header(models),
        &[
            "policy",
            "load",
            "threads",
            "min us",
            "p50 us",
            "p99 us",
            "p99 range",
            "p99.9 us",
            "max us",
            "overruns",
        ],
    ]
    .concat();
    let left = 2 + usize::from(models);
    if md {
        return crate::markup::markdown_table(&header, &rows, left);
    }
    let mut align = vec![Align::Left; left];
    align.extend((left..header.len()).map(|_| Align::Right));
    format!(
        "bench latency on {} (kernel {}, preemption {}, HZ {}, {} CPUs); interval {} us, {} x {} s per cell; medians over the repetitions (max: the largest)\n\n{}",
        h.hostname.value.as_deref().unwrap_or("?"),
        h.kernel.release.value.as_deref().unwrap_or("?"),
        crate::markup::preemption(h.kernel.preemption.model, r.cells.iter().map(|c| c.preempt)),
        h.kernel.hz.value.map(|x| x.to_string()).unwrap_or_else(|| "?".into()),
        h.kernel.cpus.value.unwrap_or(0),
        r.spec.interval_us,
        r.spec.repeat,
        r.spec.duration_s,
        columns(&header, &align, &rows, 0, 140)
    )
}
