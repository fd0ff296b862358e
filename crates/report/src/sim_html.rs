//! A `sim` result's section of the report page: what the model ran, throughput against CPUs or workers
//! for each model, lock and page size (a bar per cell when the matrix has one size), and the cells' table
//! with their ratio to the first model of the same configuration, failed cells with their reason.

use std::fmt::Write;

use results::sim::{SimCell, SimResult};
use stats::fmt::{ns, rate};

use crate::escape::esc;
use crate::svg::{line_chart, ranged_bar_chart, Axis, Series};

fn label(c: &SimCell) -> String {
    let mut l = format!("{} {} {}", c.model, c.lock, c.pages);
    if let Some(v) = &c.sweep {
        l.push_str(&format!(" {v}"));
    }
    l
}

/// The section of one sim result; `host` is the host line the page puts under the heading.
pub(crate) fn section(label_: &str, r: &SimResult, host: &str) -> String {
    let mut o = String::new();
    let sp = &r.spec;
    let unit = match r
        .cells
        .iter()
        .find_map(|c| c.summary.as_ref())
        .is_some_and(|s| s.txn_per_s.is_some())
    {
        true => "transactions/s",
        false => "ops/s",
    };
    let _ = write!(
        o,
        "<h2>sim: {}</h2>{host}<p>The model (not a measurement): {} runs per cell, {} per virtual second{}{}{}.</p>",
        esc(label_),
        sp.repeat,
        unit,
        match &sp.sweep {
            Some((name, values)) => format!("; {} swept over {}", esc(name), esc(&values.join(", "))),
            None => String::new(),
        },
        match sp.set.is_empty() {
            true => String::new(),
            false => format!("; set: {}", esc(&sp.set.join(", "))),
        },
        if r.envelope.interrupted { " (interrupted)" } else { "" }
    );
    let ran: Vec<(&SimCell, &results::sim::SimSummary)> = r
        .cells
        .iter()
        .filter_map(|c| Some((c, c.summary.as_ref()?)))
        .collect();
    plot(&mut o, &ran, unit);
    table(&mut o, r);
    o
}

/// Throughput against the axis that varies (CPUs, else workers), one series per model, lock, pages;
/// bars when neither varies.
fn plot(o: &mut String, ran: &[(&SimCell, &results::sim::SimSummary)], unit: &str) {
    let by_cpus = ran
        .iter()
        .map(|(c, _)| c.cpus)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1;
    let by_workers = ran
        .iter()
        .map(|(c, _)| c.workers)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1;
    if by_cpus || by_workers {
        let mut keys: Vec<String> = ran.iter().map(|(c, _)| label(c)).collect();
        keys.sort();
        keys.dedup();
        let series: Vec<Series> = keys
            .iter()
            .map(|k| Series {
                name: k.clone(),
                points: ran
                    .iter()
                    .filter(|(c, _)| label(c) == *k)
                    .map(|(c, s)| {
                        let t = s.throughput();
                        let x = if by_cpus { c.cpus } else { c.workers };
                        (f64::from(x), t.median, t.min, t.max)
                    })
                    .collect(),
            })
            .collect();
        let x = Axis {
            label: if by_cpus {
                "CPUs (log)"
            } else {
                "workers (log)"
            }
            .into(),
            log: true,
            fmt: |v| format!("{v}"),
        };
        let y = Axis {
            label: format!("{unit} (log; bars: min..max)"),
            log: true,
            fmt: rate,
        };
        let _ = write!(
            o,
            "<figure>{}<figcaption>Modelled throughput for each preemption model, lock and page size: median over the runs, with the range.</figcaption></figure>",
            line_chart("Modelled throughput", &x, &y, &series)
        );
    } else if !ran.is_empty() {
        let bars: Vec<(String, f64, f64, f64)> = ran
            .iter()
            .map(|(c, s)| {
                let t = s.throughput();
                (label(c), t.median, t.min, t.max)
            })
            .collect();
        let _ = write!(
            o,
            "<figure>{}<figcaption>Modelled throughput per cell: median over the runs, the whisker spans min..max.</figcaption></figure>",
            ranged_bar_chart("Modelled throughput", unit, &bars, rate)
        );
    }
}

/// Every cell in a row: throughput, against the first model, spinning, idle, LHP, the tails.
fn table(o: &mut String, r: &SimResult) {
    o.push_str("<table><tr><th>model</th><th>lock</th><th>pages</th><th>CPUs</th><th>workers</th><th>sweep</th><th>throughput</th><th>min..max</th><th>vs first model</th><th>spinning</th><th>idle</th><th>LHP/s</th><th>hold p99</th><th>acquire p99</th></tr>");
    for c in &r.cells {
        let head = format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            esc(c.model.name()),
            esc(c.lock.name()),
            esc(c.pages.name()),
            c.cpus,
            c.workers,
            esc(c.sweep.as_deref().unwrap_or("-"))
        );
        o.push_str(&head);
        match &c.summary {
            Some(s) => {
                let t = s.throughput();
                let base = r
                    .cells
                    .iter()
                    .find(|b| {
                        (&b.lock, &b.pages, b.cpus, b.workers, &b.sweep)
                            == (&c.lock, &c.pages, c.cpus, c.workers, &c.sweep)
                    })
                    .and_then(|b| b.summary.as_ref())
                    .map(|b| format!("{:.2}", t.median / b.throughput().median))
                    .unwrap_or_else(|| "-".into());
                let _ = write!(
                    o,
                    "<td>{}</td><td>{}..{}</td><td>{base}</td><td>{:.0}%</td><td>{:.0}%</td><td>{:.0}</td><td>{}</td><td>{}</td></tr>",
                    rate(t.median),
                    rate(t.min),
                    rate(t.max),
                    s.spinning.median * 100.0,
                    s.idle.median * 100.0,
                    s.lhp_per_s.median,
                    ns(s.hold_p99_ns.median),
                    ns(s.acquire_p99_ns.median),
                );
            }
            None => {
                let status = serde_json::to_value(c.status)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default();
                let _ = write!(
                    o,
                    "<td colspan=\"8\">{}: {}</td></tr>",
                    esc(&status),
                    esc(c.reason.as_deref().unwrap_or("-"))
                );
            }
        }
    }
    o.push_str("</table>");
}
