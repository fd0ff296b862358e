//! A `bench net` result as text: one row per cell, printed as it finishes, and the table (text or markdown).

use results::net::{Cell, NetResult, Rep};
use results::Status;

use crate::markup::{columns, Align};

fn mbps(bytes_per_s: f64) -> String {
    format!("{:.0}", bytes_per_s * 8.0 / 1e6)
}

/// A cell's row; joined with two spaces, the line printed as it finishes.
pub fn row(c: &Cell) -> Vec<String> {
    let size = if c.msg_size >= 1024 && c.msg_size.is_multiple_of(1024) {
        format!("{}K", c.msg_size / 1024)
    } else {
        c.msg_size.to_string()
    };
    match &c.summary {
        Some(s) if c.status == Status::Ok => {
            let sum = |f: &dyn Fn(&Rep) -> i64| -> i64 { c.reps.iter().map(f).sum() };
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
                c.test.to_string(),
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
            c.test.to_string(),
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

/// The line printed as a cell finishes: its row, after its model when it has one of its own.
pub fn line(c: &Cell) -> String {
    format!(
        "{}{}",
        crate::markup::model_prefix(c.preempt),
        row(c).join("  ")
    )
}

/// The table (text or markdown).
pub fn render(r: &NetResult, md: bool) -> String {
    let models = r.cells.iter().any(|c| c.preempt.is_some());
    let header: Vec<&str> = [
        crate::markup::model_header(models),
        &[
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
        ],
    ]
    .concat();
    let rows: Vec<Vec<String>> = (r.cells.iter())
        .map(|c| [crate::markup::model_column(models, c.preempt), row(c)].concat())
        .collect();
    let left = 2 + usize::from(models);
    if md {
        return crate::markup::markdown_table(&header, &rows, left);
    }
    let mut align = vec![Align::Left; left];
    align.extend((left..header.len()).map(|_| Align::Right));
    let h = &r.envelope.host;
    format!(
        "bench net on {} (kernel {}, preemption {}, {} CPUs) over {}; {} x {} s per cell; medians (retrans, D-SACKs: totals)\n\n{}",
        h.hostname.value.as_deref().unwrap_or("?"),
        h.kernel.release.value.as_deref().unwrap_or("?"),
        crate::markup::preemption(h.kernel.preemption.model, r.cells.iter().map(|c| c.preempt)),
        h.kernel.cpus.value.unwrap_or(0),
        if r.spec.netns { "a veth pair between namespaces" } else { "loopback" },
        r.spec.repeat,
        r.spec.duration_s,
        columns(&header, &align, &rows, 0, 140)
    )
}
