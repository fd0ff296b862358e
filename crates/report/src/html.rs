//! `preemptlab report`: one self-contained HTML page (inline CSS and SVG, no scripts, no network) from
//! result files: host facts, audit findings, throughput vs workers per lock and page backing (log axes),
//! acquire-latency CDFs, the cells' table, the `check` verdict when a check result is given, and for
//! `bench pg` results TPS with its range, the cluster's page tables, and per-second TPS and page-table
//! series.

use std::fmt::Write;

use serde_json::Value;

use crate::lock_table::{ns, rate};
use crate::svg::{bar_chart, line_chart, ranged_bar_chart, Axis, Series};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn s(v: &Value) -> String {
    match v {
        Value::String(x) => x.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// A named input document.
pub struct Doc {
    /// File name.
    pub label: String,
    /// Content.
    pub value: Value,
}

const CSS: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .5em;text-align:right}\
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}.critical{color:#b00;font-weight:bold}.warn{color:#a60}\
.info{color:#666}figure{margin:1em 0}figcaption{font-size:.85em;color:#555}.verdict{font-size:1.1em;background:#f7f7e8;padding:.6em;border-left:4px solid #cc4}";

fn host_table(host: &Value) -> String {
    let rows = [
        ("host", "hostname.value"),
        ("kernel", "kernel.release.value"),
        ("uname -v", "kernel.version.value"),
        ("architecture", "kernel.arch.value"),
        ("CPUs", "kernel.cpus.value"),
        ("HZ", "kernel.hz.value"),
        ("preemption model", "kernel.preemption.model"),
        ("decided by", "kernel.preemption.decided_by"),
        ("rseq slice extension", "kernel.rseq_slice_extension.value"),
        ("RAM (kB)", "memory.total_kib.value"),
        ("THP enabled / shmem", "memory.thp_enabled.value"),
    ];
    let mut o = String::from("<table><tr><th>fact</th><th>value</th></tr>");
    for (label, path) in rows {
        let v = path
            .split('.')
            .try_fold(host, |v, k| v.get(k))
            .map(s)
            .unwrap_or_else(|| "-".into());
        let v = if label.starts_with("THP") {
            format!(
                "{} / {}",
                v,
                host.pointer("/memory/thp_shmem_enabled/value")
                    .map(s)
                    .unwrap_or_default()
            )
        } else {
            v
        };
        let _ = write!(o, "<tr><td>{}</td><td>{}</td></tr>", esc(label), esc(&v));
    }
    if let Some(pools) = host
        .pointer("/memory/pools/value")
        .and_then(|p| p.as_array())
    {
        let p: Vec<String> = pools
            .iter()
            .map(|p| {
                format!(
                    "{} kB: {} total, {} free",
                    p["page_size_kib"], p["total"], p["free"]
                )
            })
            .collect();
        let _ = write!(
            o,
            "<tr><td>hugetlb pools</td><td>{}</td></tr>",
            esc(&p.join("; "))
        );
    }
    o.push_str("</table>");
    o
}

fn findings(audit: &Value) -> String {
    let mut o = format!(
        "<p>Audit verdict: <b>{}</b></p><ul>",
        esc(&s(&audit["verdict"]))
    );
    for f in audit["findings"].as_array().into_iter().flatten() {
        let sev = s(&f["severity"]);
        let _ = write!(
            o,
            "<li><span class=\"{sev}\">{}</span> <code>{}</code>: {}",
            esc(&sev.to_uppercase()),
            esc(&s(&f["id"])),
            esc(&s(&f["title"]))
        );
        let fixes: Vec<String> = f["fix"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| format!("<code>{}</code>", esc(&s(x))))
            .collect();
        if !fixes.is_empty() {
            let _ = write!(o, "<br>fix: {}", fixes.join("<br>"));
        }
        o.push_str("</li>");
    }
    o.push_str("</ul>");
    o
}

fn lock_section(label: &str, r: &Value) -> String {
    let mut o = String::new();
    let cells: Vec<&Value> = r["cells"].as_array().into_iter().flatten().collect();
    let _ = write!(
        o,
        "<h2>bench lock: {}</h2><p>{} descriptors, work {} ns, {} repetitions of {} s, {}{}</p>",
        esc(label),
        s(&r["spec"]["descriptors"]),
        s(&r["spec"]["work_ns"]),
        s(&r["spec"]["repeat"]),
        s(&r["spec"]["duration_s"]),
        if r["spec"]["threads"] == true {
            "threads"
        } else {
            "processes"
        },
        if r["interrupted"] == true {
            " (interrupted)"
        } else {
            ""
        }
    );
    // Throughput vs workers, one series per (lock, pages).
    let mut keys: Vec<(String, String)> = cells
        .iter()
        .map(|c| (s(&c["lock"]), s(&c["pages"])))
        .collect();
    keys.dedup();
    keys.sort();
    keys.dedup();
    let series: Vec<Series> = keys
        .iter()
        .map(|(l, p)| Series {
            name: format!("{l} {p}"),
            points: cells
                .iter()
                .filter(|c| s(&c["lock"]) == *l && s(&c["pages"]) == *p && c["summary"].is_object())
                .map(|c| {
                    let t = &c["summary"]["ops_per_s"];
                    (
                        c["workers"].as_f64().unwrap_or(0.0),
                        t["median"].as_f64().unwrap_or(0.0),
                        t["min"].as_f64().unwrap_or(0.0),
                        t["max"].as_f64().unwrap_or(0.0),
                    )
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
        .filter_map(|c| c["workers"].as_f64())
        .fold(0.0, f64::max);
    let cdfs: Vec<Series> = cells
        .iter()
        .filter(|c| c["workers"].as_f64() == Some(wmax))
        .filter_map(|c| {
            let rep = c["reps"].as_array()?.first()?;
            let pts: Vec<(f64, f64, f64, f64)> = rep["acquire_cdf"]
                .as_array()?
                .iter()
                .filter_map(|p| {
                    let (v, q) = (p[0].as_f64()?, p[1].as_f64()?);
                    Some((v.max(1.0), q * 100.0, q * 100.0, q * 100.0))
                })
                .collect();
            Some(Series {
                name: format!("{} {}", s(&c["lock"]), s(&c["pages"])),
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
        .filter(|c| c["workers"].as_f64() == Some(wmax) && c["summary"].is_object())
        .map(|c| {
            (
                format!("{} {}", s(&c["lock"]), s(&c["pages"])),
                c["summary"]["stalled_per_mop"]["median"]
                    .as_f64()
                    .unwrap_or(0.0),
            )
        })
        .collect();
    if !bars.is_empty() {
        let _ = write!(o, "<figure>{}<figcaption>Holds longer than 100 µs (a descheduled holder) per million operations at {wmax} workers.</figcaption></figure>", bar_chart(&format!("Stalled holds, {wmax} workers"), "per Mop", &bars, |v| format!("{v:.0}")));
    }
    // The table.
    o.push_str("<table><tr><th>lock</th><th>pages</th><th>workers</th><th>ops/s</th><th>min..max</th><th>acquire p99</th><th>hold p99</th><th>stalls/Mop</th><th>faults/op</th><th>CPU/op</th><th>Jain</th></tr>");
    for c in &cells {
        let sm = &c["summary"];
        if sm.is_object() {
            let f = |k: &str| sm[k]["median"].as_f64().unwrap_or(f64::NAN);
            let _ = write!(o, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}..{}</td><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.2}</td><td>{}</td><td>{:.2}</td></tr>",
                esc(&s(&c["lock"])), esc(&s(&c["pages"])), s(&c["workers"]), rate(f("ops_per_s")), rate(sm["ops_per_s"]["min"].as_f64().unwrap_or(0.0)), rate(sm["ops_per_s"]["max"].as_f64().unwrap_or(0.0)),
                ns(f("acquire_p99_ns")), ns(f("hold_p99_ns")), f("stalled_per_mop"), f("minflt_per_op"), ns(f("cpu_ns_per_op")), f("jain"));
        } else {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td colspan=\"8\">{}: {}</td></tr>",
                esc(&s(&c["lock"])),
                esc(&s(&c["pages"])),
                s(&c["workers"]),
                esc(&s(&c["status"])),
                esc(&s(&c["reason"]))
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

fn pg_cell_label(c: &Value) -> String {
    format!(
        "sb {} hp {} c {}",
        s(&c["shared_buffers"]),
        s(&c["huge_pages"]),
        s(&c["clients"])
    )
}

/// The repetition whose TPS is the median of the cell's (the lower middle one for an even count).
fn median_rep(c: &Value) -> Option<&Value> {
    let mut reps: Vec<&Value> = c["reps"].as_array()?.iter().collect();
    reps.sort_by(|a, b| {
        a["tps"]
            .as_f64()
            .unwrap_or(0.0)
            .total_cmp(&b["tps"].as_f64().unwrap_or(0.0))
    });
    reps.get(reps.len().saturating_sub(1) / 2).copied()
}

fn pg_section(label: &str, r: &Value) -> String {
    let mut o = String::new();
    let sp = &r["spec"];
    let cells: Vec<&Value> = r["cells"].as_array().into_iter().flatten().collect();
    let _ = write!(
        o,
        "<h2>bench pg: {}</h2><p>PostgreSQL {}, {} {}{}{}, scale {}, {} rounds of {} s (+{} s warm-up), protocol {}{}{}</p>",
        esc(label),
        esc(&s(&sp["pg_version"])),
        esc(&s(&sp["driver"])),
        esc(&s(&sp["script"])),
        if sp["pooler"].is_string() { format!(" via {}", esc(&s(&sp["pooler"]))) } else { String::new() },
        if sp["reconnect"] == true { ", reconnecting" } else { "" },
        s(&sp["scale"]),
        s(&sp["repeat"]),
        s(&sp["duration_s"]),
        s(&sp["warmup_s"]),
        esc(&s(&sp["protocol"])),
        if sp["prewarm"] == true { ", prewarmed" } else { "" },
        if r["interrupted"] == true { " (interrupted)" } else { "" }
    );
    let ok: Vec<&Value> = cells
        .iter()
        .copied()
        .filter(|c| c["summary"].is_object())
        .collect();
    let tps: Vec<(String, f64, f64, f64)> = ok
        .iter()
        .map(|c| {
            let t = &c["summary"]["tps"];
            (
                pg_cell_label(c),
                t["median"].as_f64().unwrap_or(0.0),
                t["min"].as_f64().unwrap_or(0.0),
                t["max"].as_f64().unwrap_or(0.0),
            )
        })
        .collect();
    if !tps.is_empty() {
        let _ = write!(o, "<figure>{}<figcaption>Transactions per second per configuration: median over the rounds, the whisker spans min..max.</figcaption></figure>", ranged_bar_chart("TPS", "median, min..max", &tps, rate));
        let pt: Vec<(String, f64, f64, f64)> = ok
            .iter()
            .map(|c| {
                let t = &c["summary"]["page_tables_kib"];
                let m = |k: &str| t[k].as_f64().unwrap_or(0.0) / 1024.0;
                (pg_cell_label(c), m("median"), m("min"), m("max"))
            })
            .collect();
        let _ = write!(o, "<figure>{}<figcaption>Page-table memory of the cluster: the peak during the run of the sum of VmPTE over the postmaster and its children. Each backend maps the shared buffers it touches with its own page tables: 8 bytes per 4 KB page, or per 2 MB huge page.</figcaption></figure>", ranged_bar_chart("Cluster page tables", "MiB, median, min..max", &pt, mib));
    }
    // Per-second series of the median repetition of each cell.
    let series = |f: &dyn Fn(&Value) -> Vec<(f64, f64)>| -> Vec<Series> {
        ok.iter()
            .filter_map(|c| {
                let rep = median_rep(c)?;
                Some(Series {
                    name: pg_cell_label(c),
                    points: f(rep).into_iter().map(|(x, y)| (x, y, y, y)).collect(),
                })
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    };
    let tps_series = series(&|rep| {
        rep["series"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p["t_s"].as_f64()?, p["tps"].as_f64()?)))
            .collect()
    });
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
        rep["sampled"]["samples"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p["t_s"].as_f64()?, p["vm_pte_kib"].as_f64()? / 1024.0)))
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
    o.push_str("<table><tr><th>shared_buffers</th><th>huge_pages</th><th>clients</th><th>TPS</th><th>min..max</th><th>latency p99</th><th>page tables</th><th>Pss</th><th>faults/tx</th><th>on huge pages</th></tr>");
    for c in &cells {
        let sm = &c["summary"];
        if sm.is_object() {
            let f = |k: &str| sm[k]["median"].as_f64().unwrap_or(f64::NAN);
            let p99 = sm["latency_p99_ms"]["median"]
                .as_f64()
                .map(|v| format!("{v:.3} ms"))
                .unwrap_or_else(|| "-".into());
            let _ = write!(o, "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}..{}</td><td>{}</td><td>{} MiB</td><td>{} MiB</td><td>{:.3}</td><td>{}</td></tr>",
                esc(&s(&c["shared_buffers"])), esc(&s(&c["huge_pages"])), s(&c["clients"]), rate(f("tps")),
                rate(sm["tps"]["min"].as_f64().unwrap_or(0.0)), rate(sm["tps"]["max"].as_f64().unwrap_or(0.0)),
                p99, mib(f("page_tables_kib") / 1024.0), mib(f("pss_kib") / 1024.0), f("minflt_per_tx"),
                if sm["on_huge_pages"] == true { "yes" } else { "no" });
        } else {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td colspan=\"7\">{}: {}</td></tr>",
                esc(&s(&c["shared_buffers"])),
                esc(&s(&c["huge_pages"])),
                s(&c["clients"]),
                esc(&s(&c["status"])),
                esc(&s(&c["reason"]))
            );
        }
    }
    o.push_str("</table>");
    o
}

fn latency_section(label: &str, r: &Value) -> String {
    let mut o = String::new();
    let sp = &r["spec"];
    let _ = write!(
        o,
        "<h2>bench latency: {}</h2><p>{} threads, interval {} us, {} repetitions of {} s{}</p>",
        esc(label),
        s(&sp["threads"]),
        s(&sp["interval_us"]),
        s(&sp["repeat"]),
        s(&sp["duration_s"]),
        if r["interrupted"] == true {
            " (interrupted)"
        } else {
            ""
        }
    );
    let cells: Vec<&Value> = r["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["summary"].is_object())
        .collect();
    let label_of = |c: &Value| format!("{} load {}", s(&c["policy"]), s(&c["load"]));
    for (key, title) in [("p50_us", "p50"), ("p99_us", "p99"), ("p999_us", "p99.9")] {
        let bars: Vec<(String, f64, f64, f64)> = cells
            .iter()
            .map(|c| {
                let m = &c["summary"][key];
                let g = |k: &str| m[k].as_f64().unwrap_or(0.0);
                (label_of(c), g("median"), g("min"), g("max"))
            })
            .collect();
        if !bars.is_empty() {
            let _ = write!(o, "<figure>{}<figcaption>Wakeup latency {title} per policy and load: median over the repetitions, whisker min..max.</figcaption></figure>", ranged_bar_chart(&format!("Wakeup latency {title}"), "us", &bars, |v| format!("{v:.1}")));
        }
    }
    // The whole distribution: how many wakeups were later than x, from every repetition's histogram.
    let tails: Vec<Series> = cells
        .iter()
        .filter_map(|c| {
            let points = latency_tail(c["reps"].as_array()?);
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
    o.push_str("<table><tr><th>policy</th><th>load</th><th>p50 us</th><th>p99 us</th><th>p99.9 us</th><th>max us</th></tr>");
    for c in r["cells"].as_array().into_iter().flatten() {
        let m = &c["summary"];
        if m.is_object() {
            let f = |k: &str| m[k]["median"].as_f64().unwrap_or(f64::NAN);
            let _ = write!(o, "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td></tr>", esc(&s(&c["policy"])), esc(&s(&c["load"])), f("p50_us"), f("p99_us"), f("p999_us"), m["max_us"]["max"].as_f64().unwrap_or(f64::NAN));
        } else {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td colspan=\"4\">{}: {}</td></tr>",
                esc(&s(&c["policy"])),
                esc(&s(&c["load"])),
                esc(&s(&c["status"])),
                esc(&s(&c["reason"]))
            );
        }
    }
    o.push_str("</table>");
    o
}

/// The complementary CDF of a latency cell's merged histograms: (bucket bound us, % of wakeups later
/// than it), down to the last bucket anyone reached (a log axis has no 0).
fn latency_tail(reps: &[Value]) -> Vec<(f64, f64, f64, f64)> {
    let mut buckets: Vec<(f64, u64)> = Vec::new();
    for rep in reps {
        for b in rep["histogram"].as_array().into_iter().flatten() {
            let (Some(ub), Some(n)) = (b[0].as_f64(), b[1].as_u64()) else {
                continue;
            };
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

fn net_section(label: &str, r: &Value) -> String {
    let mut o = String::new();
    let sp = &r["spec"];
    let _ = write!(
        o,
        "<h2>bench net: {}</h2><p>{} streams over {}, {} repetitions of {} s{}</p>",
        esc(label),
        s(&sp["streams"]),
        if sp["netns"] == true {
            "a veth pair between namespaces"
        } else {
            "loopback"
        },
        s(&sp["repeat"]),
        s(&sp["duration_s"]),
        if r["interrupted"] == true {
            " (interrupted)"
        } else {
            ""
        }
    );
    let cells: Vec<&Value> = r["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["summary"].is_object())
        .collect();
    let label_of = |c: &Value| format!("{} {} B", s(&c["test"]), s(&c["msg_size"]));
    let tput: Vec<(String, f64, f64, f64)> = cells
        .iter()
        .filter(|c| s(&c["test"]).ends_with("stream"))
        .map(|c| {
            let m = &c["summary"]["sender_bytes_per_s"];
            let g = |k: &str| m[k].as_f64().unwrap_or(0.0) * 8.0 / 1e6;
            (label_of(c), g("median"), g("min"), g("max"))
        })
        .collect();
    if !tput.is_empty() {
        let _ = write!(o, "<figure>{}<figcaption>Stream throughput at the sender: median over the repetitions, whisker min..max.</figcaption></figure>", ranged_bar_chart("Stream throughput", "Mb/s", &tput, |v| format!("{v:.0}")));
    }
    let rtt: Vec<(String, f64, f64, f64)> = cells
        .iter()
        .filter(|c| c["summary"]["rtt_p99_us"].is_object())
        .map(|c| {
            let m = &c["summary"]["rtt_p99_us"];
            let g = |k: &str| m[k].as_f64().unwrap_or(0.0);
            (label_of(c), g("median"), g("min"), g("max"))
        })
        .collect();
    if !rtt.is_empty() {
        let _ = write!(
            o,
            "<figure>{}<figcaption>Ping-pong round trip p99.</figcaption></figure>",
            ranged_bar_chart("Round trip p99", "us", &rtt, |v| format!("{v:.0}"))
        );
    }
    o.push_str("<table><tr><th>test</th><th>size</th><th>sender Mb/s</th><th>msgs/s</th><th>retransmits</th><th>D-SACKs</th></tr>");
    for c in r["cells"].as_array().into_iter().flatten() {
        let m = &c["summary"];
        if m.is_object() {
            let total = |k: &str| -> i64 {
                c["reps"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|r| r["client_counters"][k].as_i64().unwrap_or(0))
                    .sum()
            };
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{}</td><td>{}</td></tr>",
                esc(&s(&c["test"])),
                s(&c["msg_size"]),
                m["sender_bytes_per_s"]["median"].as_f64().unwrap_or(0.0) * 8.0 / 1e6,
                m["msgs_per_s"]["median"].as_f64().unwrap_or(0.0),
                total("RetransSegs"),
                total("TCPDSACKRecv")
            );
        } else {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td colspan=\"4\">{}: {}</td></tr>",
                esc(&s(&c["test"])),
                s(&c["msg_size"]),
                esc(&s(&c["status"])),
                esc(&s(&c["reason"]))
            );
        }
    }
    o.push_str("</table>");
    o
}

/// Renders the page.
pub fn render(docs: &[Doc], generated_utc: &str) -> String {
    let mut o = String::new();
    let _ = write!(o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>preemptlab report</title><style>{CSS}</style></head><body>");
    let _ = write!(
        o,
        "<h1>preemptlab report</h1><p>Generated {} from: {}</p>",
        esc(generated_utc),
        docs.iter()
            .map(|d| format!("<code>{}</code>", esc(&d.label)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // The check verdict first, when there is one.
    for d in docs.iter().filter(|d| {
        d.value.get("verdict").is_some_and(|v| v.is_string()) && d.value.get("fixes").is_some()
    }) {
        let _ = write!(
            o,
            "<h2>Verdict</h2><p class=\"verdict\">{}</p>",
            esc(&s(&d.value["verdict"]))
        );
        if d.value["fixes"].as_array().is_none_or(|f| f.is_empty()) {
            o.push_str("<p>No fix measurably helped in this reproduction.</p>");
            continue;
        }
        o.push_str("<ol>");
        for f in d.value["fixes"].as_array().into_iter().flatten() {
            let gain = f["measured_gain_pct"]
                .as_f64()
                .map(|g| format!(" (measured: {g:+.0}% throughput)"))
                .unwrap_or_default();
            let _ = write!(
                o,
                "<li>{}{}<br>{}</li>",
                esc(&s(&f["title"])),
                esc(&gain),
                f["commands"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| format!("<code>{}</code>", esc(&s(c))))
                    .collect::<Vec<_>>()
                    .join("<br>")
            );
        }
        o.push_str("</ol>");
    }
    // Host facts: from the first document that has them.
    let host = docs.iter().find_map(|d| {
        if d.value.get("host").is_some() {
            Some(d.value["host"].clone())
        } else if d.value.get("audit").is_some() {
            Some(d.value["audit"].clone())
        } else if d.value.get("kernel").is_some() {
            Some(d.value.clone())
        } else {
            None
        }
    });
    if let Some(h) = host {
        let _ = write!(o, "<h2>Host</h2>{}", host_table(&h));
    }
    for d in docs {
        let audit = if d.value.get("findings").is_some() {
            Some(&d.value)
        } else {
            d.value.get("audit")
        };
        if let Some(a) = audit {
            let _ = write!(
                o,
                "<h2>Audit findings ({})</h2>{}",
                esc(&d.label),
                findings(a)
            );
        }
    }
    for d in docs {
        if d.value["kind"] == "bench-lock" {
            o.push_str(&lock_section(&d.label, &d.value));
        }
        if let Some(r) = d.value.get("reproduction").filter(|r| r.is_object()) {
            o.push_str(&lock_section(
                &format!("{} (check reproduction)", d.label),
                r,
            ));
        }
    }
    for d in docs.iter().filter(|d| d.value["kind"] == "bench-pg") {
        o.push_str(&pg_section(&d.label, &d.value));
    }
    for d in docs.iter().filter(|d| d.value["kind"] == "bench-latency") {
        o.push_str(&latency_section(&d.label, &d.value));
    }
    for d in docs.iter().filter(|d| d.value["kind"] == "bench-net") {
        o.push_str(&net_section(&d.label, &d.value));
    }
    o.push_str("</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_tail_merges_repetitions_and_stops_at_the_last_wakeup() {
        let reps = serde_json::json!([
            {"histogram": [[1.0, 0], [2.0, 50], [5.0, 40], [10.0, 10], [20.0, 0]]},
            {"histogram": [[1.0, 0], [2.0, 50], [5.0, 40], [10.0, 0], [20.0, 10]]},
        ]);
        let pts = latency_tail(reps.as_array().unwrap());
        let got: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
        // 200 wakeups: none <= 1 us, 100 <= 2 us, 180 <= 5 us, 190 <= 10 us, all <= 20 us.
        assert_eq!(
            got,
            vec![(1.0, 100.0), (2.0, 50.0), (5.0, 10.0), (10.0, 5.0)]
        );
        assert!(latency_tail(&[]).is_empty());
    }
}
