//! `preemptlab report`: one self-contained HTML page (inline CSS and SVG, no scripts, no network) from
//! result files. The page's frame (summary, contents, per-section host facts, the check's, audit's and
//! plan's sections, skipped files) is [`crate::page`]'s; here are the benches' sections: throughput vs
//! workers per lock and page backing (log axes), acquire-latency CDFs and the cells' table for `bench
//! lock`; TPS with its range, the cluster's page tables, and per-second TPS and page-table series for
//! `bench pg`; latency tails and stream throughput for `bench latency` and `bench net`.

use std::fmt::Write;

use axes::model::Model;
use results::host::fleet::Fleet;
use results::latency::{self, LatencyResult};
use results::lock::{self, LockResult};
use results::net::{self, NetResult};
use results::pg::{self, PgResult};
use results::{Document, Status};
use stats::Summary;

use crate::escape::{esc, js};
use crate::svg::{bar_chart, line_chart, ranged_bar_chart, Axis, Series};
use stats::fmt::{ns, rate};

fn status(st: Status) -> String {
    js(&st)
}

fn reason(r: &Option<String>) -> String {
    r.clone().unwrap_or_else(|| "-".into())
}

/// A named input document.
#[derive(Debug, Clone)]
pub struct Doc {
    /// File name.
    pub label: String,
    /// Content.
    pub doc: Document,
}

pub(crate) const CSS: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .5em;text-align:right}\
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}.critical{color:#b00;font-weight:bold}.warn{color:#a60}\
.info{color:#666}figure{margin:1em 0}figcaption{font-size:.85em;color:#555}.verdict{font-size:1.1em;background:#f7f7e8;padding:.6em;border-left:4px solid #cc4}\
.host{font-size:.9em;color:#333;background:#f4f6f8;padding:.4em .6em}";

pub(crate) fn lock_section(label: &str, r: &LockResult, host: &str) -> String {
    let mut o = String::new();
    let cells = &r.cells;
    let sp = &r.spec;
    let _ = write!(
        o,
        "<h2>bench lock: {}</h2>{host}<p>{} descriptors, work {} ns, {} repetitions of {} s, {}{}</p>",
        esc(label),
        sp.descriptors,
        sp.work_ns,
        sp.repeat,
        js(&sp.duration_s),
        if sp.threads { "threads" } else { "processes" },
        if r.envelope.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    // Throughput vs workers, one series per (lock, pages), and per model when the cells ran under models of
    // their own.
    let mp = crate::markup::model_prefix;
    let mut keys: Vec<(Option<Model>, axes::LockKind, axes::Backing)> =
        cells.iter().map(|c| (c.preempt, c.lock, c.pages)).collect();
    // The models in the order they ran, then in the names' order, as the series' legend reads.
    let order = crate::markup::models_in_order(cells.iter().map(|c| c.preempt));
    let rank = |m: &Option<Model>| m.and_then(|m| order.iter().position(|x| *x == m));
    keys.sort_by_key(|(m, l, p)| (rank(m), l.name(), p.name()));
    keys.dedup();
    let series: Vec<Series> = keys
        .iter()
        .map(|(m, l, p)| Series {
            name: format!("{}{l} {p}", mp(*m)),
            points: cells
                .iter()
                .filter(|c| c.preempt == *m && c.lock == *l && c.pages == *p)
                .filter_map(|c| {
                    let t = &c.summary.as_ref()?.ops_per_s;
                    Some((f64::from(c.workers), t.median, t.min, t.max))
                })
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let x = Axis {
        label: "worker processes (log)".into(),
        log: true,
        fmt: |v| format!("{v}"),
    };
    let y = Axis {
        label: "ops/s (log; bars: min..max)".into(),
        log: true,
        fmt: rate,
    };
    let _ = write!(o, "<figure>{}<figcaption>Throughput against workers for each lock and page backing: median over the repetitions, with the range.</figcaption></figure>", line_chart("Throughput vs workers", &x, &y, &series));
    // Acquire-latency CDFs at the largest worker count.
    let wmax = cells
        .iter()
        .map(|c| f64::from(c.workers))
        .fold(0.0, f64::max);
    let at_wmax = |c: &&lock::Cell| f64::from(c.workers) == wmax;
    let cdfs: Vec<Series> = cells
        .iter()
        .filter(at_wmax)
        .filter_map(|c| {
            let rep = c.reps.first()?;
            let pts: Vec<(f64, f64, f64, f64)> = rep
                .acquire_cdf
                .iter()
                .map(|[v, q]| (v.max(1.0), q * 100.0, q * 100.0, q * 100.0))
                .collect();
            Some(Series {
                name: format!("{}{} {}", mp(c.preempt), c.lock, c.pages),
                points: pts,
            })
        })
        .collect();
    let x = Axis {
        label: "acquire latency (log)".into(),
        log: true,
        fmt: ns,
    };
    let y = Axis {
        label: "% of acquisitions at or below".into(),
        log: false,
        fmt: |v| format!("{v:.0}"),
    };
    let _ = write!(o, "<figure>{}<figcaption>Acquire-latency CDF at {wmax} workers (first repetition of each cell): how long a backend waits for the lock.</figcaption></figure>", line_chart(&format!("Acquire latency CDF, {wmax} workers"), &x, &y, &cdfs));
    // Stalled holds as bars.
    let bars: Vec<(String, f64)> = cells
        .iter()
        .filter(at_wmax)
        .filter_map(|c| {
            Some((
                format!("{}{} {}", mp(c.preempt), c.lock, c.pages),
                c.summary.as_ref()?.stalled_per_mop.median,
            ))
        })
        .collect();
    if !bars.is_empty() {
        let _ = write!(o, "<figure>{}<figcaption>Holds longer than 100 µs (a descheduled holder) per million operations at {wmax} workers.</figcaption></figure>", bar_chart(&format!("Stalled holds, {wmax} workers"), "per Mop", &bars, |v| format!("{v:.0}")));
    }
    // The table.
    // With the preemption model as an axis, a first column names each cell's.
    let models = cells.iter().any(|c| c.preempt.is_some());
    o.push_str("<table><tr>");
    if models {
        o.push_str("<th>preempt</th>");
    }
    o.push_str("<th>lock</th><th>pages</th><th>workers</th><th>ops/s</th><th>min..max</th><th>acquire p99</th><th>hold p99</th><th>stalls/Mop</th><th>faults/op</th><th>CPU/op</th><th>Jain</th></tr>");
    for c in cells {
        o.push_str("<tr>");
        if models {
            let m = c.preempt.map_or("-".into(), |m| m.to_string());
            let _ = write!(o, "<td>{m}</td>");
        }
        if let Some(sm) = &c.summary {
            let _ = write!(o, "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}..{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.2}</td><td>{}</td><td>{:.2}</td></tr>",
                c.lock, c.pages, c.workers, rate(sm.ops_per_s.median), rate(sm.ops_per_s.min), rate(sm.ops_per_s.max),
                ns(sm.acquire_p99_ns.median), ns(sm.hold_p99_ns.median), sm.stalled_per_mop.median, sm.minflt_per_op.median, ns(sm.cpu_ns_per_op.median), sm.jain.median);
        } else {
            let _ = write!(
                o,
                "<td>{}</td><td>{}</td><td>{}</td><td colspan=\"8\">{}: {}</td></tr>",
                c.lock,
                c.pages,
                c.workers,
                esc(&status(c.status)),
                esc(&reason(&c.reason))
            );
        }
    }
    o.push_str("</table>");
    o
}

fn mib(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A cell's label; with several builds it starts with the build's name.
fn pg_cell_label(c: &pg::Cell, several_builds: bool) -> String {
    let build = match (&c.build, several_builds) {
        (Some(b), true) => format!("{} ", b.name),
        _ => String::new(),
    };
    format!(
        "{build}{}sb {} hp {} c {}",
        crate::markup::model_prefix(c.preempt),
        c.shared_buffers,
        c.huge_pages,
        c.clients
    )
}

/// The repetition whose TPS is the median of the cell's (the lower middle one for an even count).
fn median_rep(c: &pg::Cell) -> Option<&pg::Rep> {
    let mut reps: Vec<&pg::Rep> = c.reps.iter().collect();
    reps.sort_by(|a, b| a.tps.total_cmp(&b.tps));
    reps.get(reps.len().saturating_sub(1) / 2).copied()
}

/// (label, median, min, max) of a summary, scaled.
fn ranged(label: String, m: &Summary, scale: f64) -> (String, f64, f64, f64) {
    (label, m.median * scale, m.min * scale, m.max * scale)
}

pub(crate) fn pg_section(label: &str, r: &PgResult, host: &str) -> String {
    let mut o = String::new();
    let sp = &r.spec;
    let cells = &r.cells;
    let _ = write!(
        o,
        "<h2>bench pg: {}</h2>{host}<p>PostgreSQL {}, {} {}{}{}, scale {}, {} rounds of {} s (+{} s warm-up), protocol {}{}{}</p>",
        esc(label),
        esc(&reason(&sp.pg_version)),
        sp.driver,
        esc(&sp.script),
        match &sp.pooler {
            Some(p) => format!(" via {p}"),
            None => String::new(),
        },
        if sp.reconnect { ", reconnecting" } else { "" },
        sp.scale,
        sp.repeat,
        sp.duration_s,
        sp.warmup_s,
        sp.protocol,
        if sp.prewarm { ", prewarmed" } else { "" },
        if r.envelope.interrupted { " (interrupted)" } else { "" }
    );
    let several = sp.builds.len() > 1;
    if several || sp.builds.iter().any(|b| !b.patches.is_empty()) {
        o.push_str("<ul>");
        for b in &sp.builds {
            let _ = write!(o, "<li>{}</li>", esc(&crate::pg_table::build_line(b)));
        }
        o.push_str("</ul>");
    }
    let rseq = crate::pg_table::rseq_lines(r);
    if !rseq.is_empty() {
        let _ = write!(o, "<pre>{}</pre>", esc(rseq.trim()));
    }
    let cell_label = |c: &pg::Cell| pg_cell_label(c, several);
    let ok: Vec<(&pg::Cell, &pg::CellSummary)> = cells
        .iter()
        .filter_map(|c| Some((c, c.summary.as_ref()?)))
        .collect();
    let tps: Vec<(String, f64, f64, f64)> = ok
        .iter()
        .map(|(c, sm)| ranged(cell_label(c), &sm.tps, 1.0))
        .collect();
    if !tps.is_empty() {
        let _ = write!(o, "<figure>{}<figcaption>Transactions per second per configuration: median over the rounds, the whisker spans min..max.</figcaption></figure>", ranged_bar_chart("TPS", "median, min..max", &tps, rate));
        let pt: Vec<(String, f64, f64, f64)> = ok
            .iter()
            .map(|(c, sm)| ranged(cell_label(c), &sm.page_tables_kib, 1.0 / 1024.0))
            .collect();
        let _ = write!(o, "<figure>{}<figcaption>Page-table memory of the cluster: the peak during the run of the sum of VmPTE over the postmaster and its children. Each backend maps the shared buffers it touches with its own page tables: 8 bytes per 4 KB page, or per 2 MB huge page.</figcaption></figure>", ranged_bar_chart("Cluster page tables", "MiB, median, min..max", &pt, mib));
    }
    // Per-second series of the median repetition of each cell.
    let series = |f: &dyn Fn(&pg::Rep) -> Vec<(f64, f64)>| -> Vec<Series> {
        ok.iter()
            .filter_map(|(c, _)| {
                let rep = median_rep(c)?;
                Some(Series {
                    name: cell_label(c),
                    points: f(rep).into_iter().map(|(x, y)| (x, y, y, y)).collect(),
                })
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let tps_series = series(&|rep| rep.series.iter().map(|p| (p.t_s, p.tps)).collect());
    let secs = Axis {
        label: "seconds into the measured run".into(),
        log: false,
        fmt: |v| format!("{v:.0}"),
    };
    if !tps_series.is_empty() {
        let y = Axis {
            label: "TPS".into(),
            log: false,
            fmt: rate,
        };
        let _ = write!(o, "<figure>{}<figcaption>TPS each second, as the driver reported it, in the median round of each configuration.</figcaption></figure>", line_chart("TPS per second", &secs, &y, &tps_series));
    }
    let pte_series = series(&|rep| {
        rep.sampled
            .samples
            .iter()
            .map(|p| (p.t_s, p.vm_pte_kib as f64 / 1024.0))
            .collect()
    });
    if !pte_series.is_empty() {
        let y = Axis {
            label: "MiB".into(),
            log: false,
            fmt: mib,
        };
        let _ = write!(o, "<figure>{}<figcaption>The cluster's page tables (sum of VmPTE) sampled during the median round: on 4 KB pages they grow as backends touch more of the buffers.</figcaption></figure>", line_chart("Cluster page tables during the run", &secs, &y, &pte_series));
    }
    let models = cells.iter().any(|c| c.preempt.is_some());
    let _ = write!(o, "<table><tr>{}{}<th>shared_buffers</th><th>huge_pages</th><th>clients</th><th>TPS</th><th>min..max</th><th>latency p99</th><th>page tables</th><th>Pss</th><th>faults/tx</th><th>on huge pages</th></tr>",
        if several { "<th>build</th>" } else { "" },
        if models { "<th>preempt</th>" } else { "" });
    for c in cells {
        o.push_str("<tr>");
        if several {
            let name = c.build.as_ref().map(|b| b.name.as_str()).unwrap_or("-");
            let _ = write!(o, "<td>{}</td>", esc(name));
        }
        for m in crate::markup::model_column(models, c.preempt) {
            let _ = write!(o, "<td>{m}</td>");
        }
        if let Some(sm) = &c.summary {
            let p99 = sm
                .latency_p99_ms
                .as_ref()
                .map(|v| format!("{:.3} ms", v.median))
                .unwrap_or_else(|| "-".into());
            let _ = write!(o, "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}..{}</td><td>{}</td><td>{} MiB</td><td>{} MiB</td><td>{:.3}</td><td>{}</td></tr>",
                esc(&c.shared_buffers), c.huge_pages, c.clients, rate(sm.tps.median),
                rate(sm.tps.min), rate(sm.tps.max),
                p99, mib(sm.page_tables_kib.median / 1024.0), mib(sm.pss_kib.median / 1024.0), sm.minflt_per_tx.median,
                if sm.on_huge_pages { "yes" } else { "no" });
        } else {
            let _ = write!(
                o,
                "<td>{}</td><td>{}</td><td>{}</td><td colspan=\"7\">{}: {}</td></tr>",
                esc(&c.shared_buffers),
                c.huge_pages,
                c.clients,
                esc(&status(c.status)),
                esc(&reason(&c.reason))
            );
        }
    }
    o.push_str("</table>");
    o
}

pub(crate) fn latency_section(label: &str, r: &LatencyResult, host: &str) -> String {
    let mut o = String::new();
    let sp = &r.spec;
    let _ = write!(
        o,
        "<h2>bench latency: {}</h2>{host}<p>{} threads, interval {} us, {} repetitions of {} s{}</p>",
        esc(label),
        sp.threads,
        sp.interval_us,
        sp.repeat,
        js(&sp.duration_s),
        if r.envelope.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    let cells: Vec<(&latency::Cell, &latency::CellSummary)> = r
        .cells
        .iter()
        .filter_map(|c| Some((c, c.summary.as_ref()?)))
        .collect();
    let label_of = |c: &latency::Cell| {
        let m = crate::markup::model_prefix(c.preempt);
        format!("{m}{} load {}", c.policy, c.load)
    };
    type Pick = fn(&latency::CellSummary) -> &Summary;
    let picks: [(Pick, &str); 3] = [
        (|m| &m.p50_us, "p50"),
        (|m| &m.p99_us, "p99"),
        (|m| &m.p999_us, "p99.9"),
    ];
    for (pick, title) in picks {
        let bars: Vec<(String, f64, f64, f64)> = cells
            .iter()
            .map(|(c, m)| ranged(label_of(c), pick(m), 1.0))
            .collect();
        if !bars.is_empty() {
            let _ = write!(o, "<figure>{}<figcaption>Wakeup latency {title} per policy and load: median over the repetitions, whisker min..max.</figcaption></figure>", ranged_bar_chart(&format!("Wakeup latency {title}"), "us", &bars, |v| format!("{v:.1}")));
        }
    }
    // The whole distribution: how many wakeups were later than x, from every repetition's histogram.
    let tails: Vec<Series> = cells
        .iter()
        .filter_map(|(c, _)| {
            let points = latency_tail(&c.reps);
            (!points.is_empty()).then(|| Series {
                name: label_of(c),
                points,
            })
        })
        .collect();
    if !tails.is_empty() {
        let x = Axis {
            label: "wakeup latency, us (log)".into(),
            log: true,
            fmt: |v| format!("{v:.0}"),
        };
        let y = Axis {
            label: "% of wakeups later (log)".into(),
            log: true,
            fmt: |v| {
                // 100, 10, 1, 0.1, 0.01: one significant digit below 1.
                let decimals = if v >= 1.0 {
                    0
                } else {
                    (-v.log10()).ceil() as usize
                };
                format!("{v:.decimals$}")
            },
        };
        let _ = write!(o, "<figure>{}<figcaption>Wakeup latency distribution per policy and load: the share of wakeups later than x, all repetitions merged (log-spaced buckets of 1, 2, 5 x 10^k us); the further right a curve reaches, the longer the worst wakeups.</figcaption></figure>", line_chart("Wakeup latency tail", &x, &y, &tails));
    }
    let models = r.cells.iter().any(|c| c.preempt.is_some());
    let _ = write!(o, "<table><tr>{}<th>policy</th><th>load</th><th>p50 us</th><th>p99 us</th><th>p99.9 us</th><th>max us</th></tr>",
        if models { "<th>preempt</th>" } else { "" });
    for c in &r.cells {
        o.push_str("<tr>");
        for m in crate::markup::model_column(models, c.preempt) {
            let _ = write!(o, "<td>{m}</td>");
        }
        if let Some(m) = &c.summary {
            let _ = write!(o, "<td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td></tr>", esc(c.policy.name()), esc(c.load.name()), m.p50_us.median, m.p99_us.median, m.p999_us.median, m.max_us.max);
        } else {
            let _ = write!(
                o,
                "<td>{}</td><td>{}</td><td colspan=\"4\">{}: {}</td></tr>",
                esc(c.policy.name()),
                esc(c.load.name()),
                esc(&status(c.status)),
                esc(&reason(&c.reason))
            );
        }
    }
    o.push_str("</table>");
    o
}

/// The complementary CDF of a latency cell's merged histograms: (bucket bound us, % of wakeups later
/// than it), down to the last bucket anyone reached (a log axis has no 0).
fn latency_tail(reps: &[latency::Rep]) -> Vec<(f64, f64, f64, f64)> {
    let mut buckets: Vec<(f64, u64)> = Vec::new();
    for rep in reps {
        for &(ub, n) in &rep.histogram {
            match buckets.iter_mut().find(|x| x.0 == ub) {
                Some(x) => x.1 += n,
                None => buckets.push((ub, n)),
            }
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: u64 = buckets.iter().map(|b| b.1).sum();
    if total == 0 {
        return Vec::new();
    }
    let mut at_or_below = 0u64;
    let mut pts = Vec::new();
    for (ub, n) in buckets {
        at_or_below += n;
        let later = 100.0 * (total - at_or_below) as f64 / total as f64;
        if later <= 0.0 {
            break;
        }
        pts.push((ub, later, later, later));
    }
    pts
}

pub(crate) fn net_section(label: &str, r: &NetResult, host: &str) -> String {
    let mut o = String::new();
    let sp = &r.spec;
    let _ = write!(
        o,
        "<h2>bench net: {}</h2>{host}<p>{} streams over {}, {} repetitions of {} s{}</p>",
        esc(label),
        sp.streams,
        if sp.netns {
            "a veth pair between namespaces"
        } else {
            "loopback"
        },
        sp.repeat,
        js(&sp.duration_s),
        if r.envelope.interrupted {
            " (interrupted)"
        } else {
            ""
        }
    );
    let cells: Vec<(&net::Cell, &net::CellSummary)> = r
        .cells
        .iter()
        .filter_map(|c| Some((c, c.summary.as_ref()?)))
        .collect();
    let label_of = |c: &net::Cell| {
        let m = crate::markup::model_prefix(c.preempt);
        format!("{m}{} {} B", c.test, c.msg_size)
    };
    let tput: Vec<(String, f64, f64, f64)> = cells
        .iter()
        .filter(|(c, _)| c.test.stream())
        .map(|(c, m)| ranged(label_of(c), &m.sender_bytes_per_s, 8.0 / 1e6))
        .collect();
    if !tput.is_empty() {
        let _ = write!(o, "<figure>{}<figcaption>Stream throughput at the sender: median over the repetitions, whisker min..max.</figcaption></figure>", ranged_bar_chart("Stream throughput", "Mb/s", &tput, |v| format!("{v:.0}")));
    }
    let rtt: Vec<(String, f64, f64, f64)> = cells
        .iter()
        .filter_map(|(c, m)| Some(ranged(label_of(c), m.rtt_p99_us.as_ref()?, 1.0)))
        .collect();
    if !rtt.is_empty() {
        let _ = write!(
            o,
            "<figure>{}<figcaption>Ping-pong round trip p99.</figcaption></figure>",
            ranged_bar_chart("Round trip p99", "us", &rtt, |v| format!("{v:.0}"))
        );
    }
    let models = r.cells.iter().any(|c| c.preempt.is_some());
    let _ = write!(o, "<table><tr>{}<th>test</th><th>size</th><th>sender Mb/s</th><th>msgs/s</th><th>retransmits</th><th>D-SACKs</th></tr>",
        if models { "<th>preempt</th>" } else { "" });
    for c in &r.cells {
        o.push_str("<tr>");
        for m in crate::markup::model_column(models, c.preempt) {
            let _ = write!(o, "<td>{m}</td>");
        }
        if let Some(m) = &c.summary {
            let total = |k: &str| -> i64 {
                c.reps
                    .iter()
                    .map(|r| r.client_counters.get(k).copied().unwrap_or(0))
                    .sum()
            };
            let _ = write!(
                o,
                "<td>{}</td><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{}</td><td>{}</td></tr>",
                c.test,
                c.msg_size,
                m.sender_bytes_per_s.median * 8.0 / 1e6,
                m.msgs_per_s.median,
                total("RetransSegs"),
                total("TCPDSACKRecv")
            );
        } else {
            let _ = write!(
                o,
                "<td>{}</td><td>{}</td><td colspan=\"4\">{}: {}</td></tr>",
                c.test,
                c.msg_size,
                esc(&status(c.status)),
                esc(&reason(&c.reason))
            );
        }
    }
    o.push_str("</table>");
    o
}

/// Renders the page of `docs`, with the fleet's answer over their audits first where the caller judged one
/// (several hosts' audits: `hostfacts::fleet::of_several`): [`crate::page::render`] with nothing skipped.
pub fn render(docs: &[Doc], fleet: Option<&Fleet>, generated_utc: &str) -> String {
    crate::page::render(&crate::export::Page {
        docs: docs.to_vec(),
        fleet: fleet.cloned(),
        generated_utc: generated_utc.to_string(),
        skipped: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_tail_merges_repetitions_and_stops_at_the_last_wakeup() {
        let rep = |histogram: Vec<(f64, u64)>| latency::Rep {
            latency_us: Default::default(),
            per_thread: Vec::new(),
            overruns: 0,
            histogram,
            nivcsw: 0,
        };
        let reps = [
            rep(vec![(1.0, 0), (2.0, 50), (5.0, 40), (10.0, 10), (20.0, 0)]),
            rep(vec![(1.0, 0), (2.0, 50), (5.0, 40), (10.0, 0), (20.0, 10)]),
        ];
        let pts = latency_tail(&reps);
        let got: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
        // 200 wakeups: none <= 1 us, 100 <= 2 us, 180 <= 5 us, 190 <= 10 us, all <= 20 us.
        assert_eq!(
            got,
            vec![(1.0, 100.0), (2.0, 50.0), (5.0, 10.0), (10.0, 5.0)]
        );
        assert!(latency_tail(&[]).is_empty());
    }
}
