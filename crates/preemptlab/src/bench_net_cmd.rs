//! `preemptlab bench net`.

use anyhow::{anyhow, Result};
use lab::lockrun::{self, Status};
use lab::net::{self, NetResult, Spec};

use crate::cli::BenchNetArgs;

use crate::cli::split_list as list;

pub fn run(a: BenchNetArgs) -> Result<i32> {
    let duration = lockrun::parse_duration(&a.duration).map_err(|e| anyhow!("--duration: {e}"))?;
    let sizes = list(&a.msg_sizes)
        .iter()
        .map(|s| net::parse_size(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!(e))?;
    let spec = Spec {
        tests: list(&a.tests),
        msg_sizes: sizes,
        streams: a.streams,
        duration_s: duration.as_secs_f64(),
        repeat: a.repeat,
        netns: a.netns,
    };
    net::validate(&spec).map_err(|e| anyhow!(e))?;
    if spec.netns && !hostfacts::host::is_root() {
        return Err(anyhow!(
            "--netns creates a network namespace and a veth pair: run as root, or leave it out for loopback"
        ));
    }
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| lab::result::default_path("bench-net", lab::result::unix_now()));
    crate::term::claim_output(&out)?;
    let quiet = a.quiet;
    // Switched back when this function returns, by any path.
    let _preempt = crate::switch::preempt(&a.preempt)?;
    let res = net::run(spec, &out, |c| {
        if !quiet {
            eprintln!("{}", row(c).join("  "));
        }
    })
    .map_err(|e| anyhow!(e))?;
    crate::term::print_result(a.format, &res, |md| table(&res, md), &out, a.quiet);
    Ok(if res.envelope.interrupted {
        lab::guard::interrupted_exit_code()
    } else {
        0
    })
}

fn mbps(bytes_per_s: f64) -> String {
    format!("{:.0}", bytes_per_s * 8.0 / 1e6)
}

fn row(c: &lab::net::Cell) -> Vec<String> {
    let size = if c.msg_size >= 1024 && c.msg_size % 1024 == 0 {
        format!("{}K", c.msg_size / 1024)
    } else {
        c.msg_size.to_string()
    };
    match &c.summary {
        Some(s) if c.status == Status::Ok => {
            let sum = |f: &dyn Fn(&lab::net::Rep) -> i64| -> i64 { c.reps.iter().map(f).sum() };
            let retrans = sum(&|r| r.client_counters.get("RetransSegs").copied().unwrap_or(0));
            let dsack = sum(&|r| {
                r.client_counters.get("TCPDSACKRecv").copied().unwrap_or(0)
                    + r.server_counters.get("TCPDSACKRecv").copied().unwrap_or(0)
            });
            let loss = c
                .reps
                .iter()
                .filter_map(|r| r.udp_loss)
                .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
            vec![
                c.test.clone(),
                size,
                c.streams.to_string(),
                mbps(s.sender_bytes_per_s.median),
                mbps(s.receiver_bytes_per_s.median),
                format!("{:.0}", s.msgs_per_s.median),
                s.rtt_p99_us
                    .as_ref()
                    .map(|x| format!("{:.1}", x.median))
                    .unwrap_or_else(|| "-".into()),
                loss.map(|l| format!("{:.2}%", l * 100.0))
                    .unwrap_or_else(|| "-".into()),
                retrans.to_string(),
                dsack.to_string(),
            ]
        }
        _ => vec![
            c.test.clone(),
            size,
            c.streams.to_string(),
            format!("{:?}", c.status).to_lowercase(),
            c.reason.clone().unwrap_or_default(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ],
    }
}

fn table(r: &NetResult, md: bool) -> String {
    let header = [
        "test",
        "size",
        "streams",
        "sender Mb/s",
        "receiver Mb/s",
        "msgs/s",
        "RTT p99 us",
        "UDP loss",
        "retrans",
        "D-SACKs",
    ];
    let rows: Vec<Vec<String>> = r.cells.iter().map(row).collect();
    if md {
        return report::markup::markdown_table(&header, &rows, 2);
    }
    use report::markup::{columns, Align};
    let mut align = vec![Align::Left, Align::Left];
    align.extend((2..header.len()).map(|_| Align::Right));
    let h = &r.envelope.host;
    format!(
        "bench net on {} (kernel {}, preemption {}, {} CPUs) over {}; {} x {} s per cell; medians (retrans, D-SACKs: totals)\n\n{}",
        h.hostname.value.as_deref().unwrap_or("?"),
        h.kernel.release.value.as_deref().unwrap_or("?"),
        h.kernel.preemption.model,
        h.kernel.cpus.value.unwrap_or(0),
        if r.spec.netns { "a veth pair between namespaces" } else { "loopback" },
        r.spec.repeat,
        r.spec.duration_s,
        columns(&header, &align, &rows, 0, 140)
    )
}
