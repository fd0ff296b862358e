//! The fleet answer as a terminal table or Markdown: the same sections in the same order.

use results::host::Bytes;

use crate::markup::{columns, markdown_table, wrap, Align, Style};
use results::host::fleet::{DiagnosisRow, Fleet, HostRow, InstanceFix};

fn kib(k: u64) -> String {
    Bytes::from_kib(k).to_string()
}

fn findings(h: &HostRow) -> String {
    match (h.critical, h.warn) {
        (0, 0) => "-".into(),
        (c, 0) => format!("{c} crit"),
        (0, w) => format!("{w} warn"),
        (c, w) => format!("{c} crit, {w} warn"),
    }
}

/// The host as shown: its name (the inventory's, else the kernel's), the kernel's host name after it
/// when that differs (two clones of `localhost` are two rows under their inventory names), and its age
/// when stale.
fn host_label(h: &HostRow) -> String {
    let mut notes = Vec::new();
    if let Some(k) = h.hostname.as_ref().filter(|k| **k != h.host) {
        notes.push(format!("host name {k}"));
    }
    if h.stale {
        notes.push(format!("stale {}", stats::fmt::age(h.age_s)));
    }
    match notes.is_empty() {
        true => h.host.clone(),
        false => format!("{} ({})", h.host, notes.join("; ")),
    }
}

fn summary(f: &Fleet) -> Vec<String> {
    let t = &f.totals;
    let mut lines = vec![format!(
        "{} hosts from {} files: {} at risk, {} warn, {} ok; {} stale (older than {}), {} failed{}",
        t.hosts,
        t.files,
        t.at_risk,
        t.warn,
        t.ok,
        t.stale,
        stats::fmt::age(f.stale_after_s as i64),
        t.failed,
        if t.superseded > 0 {
            format!(", {} older audits superseded", t.superseded)
        } else {
            String::new()
        }
    )];
    lines.push(format!(
        "{} of {} PostgreSQL instances on 4 KB pages; their page tables: {} now, up to {} at max_connections; the fixes pin {} in huge pages",
        t.instances_4k,
        t.instances,
        kib(t.page_tables_4k_kib),
        kib(t.page_tables_4k_full_touch_kib),
        kib(t.fix_pinned_kib)
    ));
    lines
}

fn host_rows(f: &Fleet) -> Vec<Vec<String>> {
    f.hosts
        .iter()
        .map(|h| {
            vec![
                h.verdict.as_str().to_string(),
                h.kernel.clone(),
                h.preempt_model.as_str().to_string(),
                host_label(h),
                findings(h),
                h.finding_ids.join(", "),
            ]
        })
        .collect()
}

fn group_rows(f: &Fleet) -> Vec<Vec<String>> {
    f.groups
        .iter()
        .map(|g| {
            vec![
                g.kernel.clone(),
                g.preempt_model.as_str().to_string(),
                g.hosts.to_string(),
                g.at_risk.to_string(),
                g.warn.to_string(),
                g.ok.to_string(),
                g.instances_4k.to_string(),
            ]
        })
        .collect()
}

fn instance_row(i: &InstanceFix) -> Vec<String> {
    let pool_now = match &i.sizing {
        Some(s) => match s.pool_now {
            Some(n) => format!("{n} x {}", kib(s.page_size_kib)),
            None => format!("none of {}", kib(s.page_size_kib)),
        },
        None => "?".into(),
    };
    vec![
        i.host.clone(),
        i.postmaster_pid.to_string(),
        i.huge_pages.clone().unwrap_or_else(|| "?".into()),
        i.segment_kib.map(kib).unwrap_or_else(|| "?".into()),
        kib(i.page_tables_kib),
        pool_now,
        // The command alone: the comment (what the target is made of) is in the JSON.
        i.fix
            .first()
            .map(|f| crate::markup::split_command(f).0.to_string())
            .unwrap_or_default(),
    ]
}

const HOST_HEAD: [&str; 6] = ["verdict", "kernel", "model", "host", "findings", "ids"];
const GROUP_HEAD: [&str; 7] = [
    "kernel",
    "model",
    "hosts",
    "at-risk",
    "warn",
    "ok",
    "4k instances",
];
const INSTANCE_HEAD: [&str; 7] = [
    "host",
    "pid",
    "huge_pages",
    "segment",
    "page tables",
    "pool now",
    "fix",
];

/// Renders the fleet answer for a terminal of `width` columns.
pub fn render(f: &Fleet, style: Style, width: usize) -> String {
    use Align::{Left as L, Right as R};
    let mut o = String::new();
    o.push_str(&style.bold("preemptlab fleet\n"));
    for line in summary(f) {
        o.push_str(&format!("  {}\n", wrap(&line, width, 2, 4)));
    }
    if !f.hosts.is_empty() {
        o.push_str(&style.bold("\nHosts, at risk first, by kernel and preemption model\n"));
        let rows: Vec<Vec<String>> = f
            .hosts
            .iter()
            .map(|h| vec![host_label(h), findings(h), h.finding_ids.join(", ")])
            .collect();
        let table = columns(&["host", "findings", "ids"], &[L, L, L], &rows, 4, width);
        let mut lines = table.lines();
        let mut last: Option<String> = None;
        o.push_str(lines.next().unwrap_or_default());
        o.push('\n');
        for (h, line) in f.hosts.iter().zip(lines) {
            let group = format!(
                "{}  kernel {}  {}",
                h.verdict.as_str(),
                h.kernel,
                h.preempt_model.as_str()
            );
            if last.as_ref() != Some(&group) {
                o.push_str(&format!("  {}\n", style.bold(&group)));
                last = Some(group);
            }
            o.push_str(line);
            o.push('\n');
        }
        o.push_str(&style.bold("\nBy kernel and preemption model\n"));
        o.push_str(&columns(
            &GROUP_HEAD,
            &[L, L, R, R, R, R, R],
            &group_rows(f),
            2,
            width,
        ));
    }
    if !f.not_on_huge_pages.is_empty() {
        o.push_str(&style.bold("\nPostgreSQL not on huge pages, and the fix\n"));
        let rows: Vec<_> = f.not_on_huge_pages.iter().map(instance_row).collect();
        o.push_str(&columns(
            &INSTANCE_HEAD,
            &[L, R, L, R, R, R, L],
            &rows,
            2,
            // The fix is the point of this table: never truncate it.
            usize::MAX / 2,
        ));
        o.push_str(&format!(
            "  {}\n",
            wrap(
                "then on each: postgresql.conf huge_pages = on, restart PostgreSQL, preemptlab audit (expect 'on huge pages: yes'); the JSON format has every line",
                width,
                2,
                4
            )
        ));
    }
    o.push_str(&diagnoses_table(f, style, width));
    if !f.stale.is_empty() {
        o.push_str(&style.bold(&format!(
            "\nStale audits (older than {})\n",
            stats::fmt::age(f.stale_after_s as i64)
        )));
        let rows: Vec<_> = f
            .stale
            .iter()
            .map(|s| vec![s.host.clone(), stats::fmt::age(s.age_s), s.file.clone()])
            .collect();
        o.push_str(&columns(
            &["host", "age", "file"],
            &[L, R, L],
            &rows,
            2,
            width,
        ));
    }
    if !f.failed.is_empty() {
        o.push_str(&style.bold("\nFiles that are not a readable audit\n"));
        for b in &f.failed {
            o.push_str(&format!(
                "  {}\n",
                wrap(&format!("{}: {}", b.file, b.reason), width, 2, 4)
            ));
        }
    }
    if !f.superseded.is_empty() {
        o.push_str(&style.bold("\nOlder audits ignored (the host has a newer one)\n"));
        let rows: Vec<_> = f
            .superseded
            .iter()
            .map(|s| vec![s.host.clone(), s.file.clone(), s.newer_file.clone()])
            .collect();
        o.push_str(&columns(
            &["host", "file", "newer"],
            &[L, L, L],
            &rows,
            2,
            width,
        ));
    }
    o
}

/// Renders the fleet answer as Markdown.
pub fn markdown(f: &Fleet) -> String {
    let esc = |s: &str| s.replace('|', "\\|");
    let escape_rows = |rows: Vec<Vec<String>>| -> Vec<Vec<String>> {
        rows.into_iter()
            .map(|r| r.iter().map(|c| esc(c)).collect())
            .collect()
    };
    let mut o = String::from("## preemptlab fleet\n\n");
    for line in summary(f) {
        o.push_str(&format!("- {line}\n"));
    }
    if !f.hosts.is_empty() {
        o.push_str("\n### Hosts, at risk first\n\n");
        o.push_str(&markdown_table(&HOST_HEAD, &escape_rows(host_rows(f)), 6));
        o.push_str("\n### By kernel and preemption model\n\n");
        o.push_str(&markdown_table(&GROUP_HEAD, &escape_rows(group_rows(f)), 2));
    }
    if !f.not_on_huge_pages.is_empty() {
        o.push_str("\n### PostgreSQL not on huge pages, and the fix\n\n");
        let rows = f
            .not_on_huge_pages
            .iter()
            .map(|i| {
                let mut r = instance_row(i);
                let last = r.len() - 1;
                // Each command in code, its comment as text after it.
                r[last] = i
                    .fix
                    .iter()
                    .map(|l| match crate::markup::split_command(l) {
                        ("", Some(c)) => format!("# {c}"),
                        (cmd, Some(c)) => format!("`{cmd}` # {c}"),
                        (cmd, None) => format!("`{cmd}`"),
                    })
                    .collect::<Vec<_>>()
                    .join("<br>");
                r
            })
            .collect();
        o.push_str(&markdown_table(&INSTANCE_HEAD, &escape_rows(rows), 7));
    }
    if !f.diagnoses.is_empty() {
        o.push_str("\n### Diagnoses (hosts that sent one), the symptom present first\n\n");
        let rows = f.diagnoses.iter().map(diagnosis_row).collect();
        o.push_str(&markdown_table(&DIAGNOSIS_HEAD, &escape_rows(rows), 3));
    }
    if !f.stale.is_empty() {
        o.push_str(&format!(
            "\n### Stale audits (older than {})\n\n",
            stats::fmt::age(f.stale_after_s as i64)
        ));
        let rows = f
            .stale
            .iter()
            .map(|s| vec![s.host.clone(), s.file.clone(), stats::fmt::age(s.age_s)])
            .collect();
        o.push_str(&markdown_table(
            &["host", "file", "age"],
            &escape_rows(rows),
            2,
        ));
    }
    if !f.failed.is_empty() {
        o.push_str("\n### Files that are not a readable audit\n\n");
        let rows = f
            .failed
            .iter()
            .map(|b| vec![b.file.clone(), b.reason.clone()])
            .collect();
        o.push_str(&markdown_table(&["file", "reason"], &escape_rows(rows), 2));
    }
    if !f.superseded.is_empty() {
        o.push_str("\n### Older audits ignored\n\n");
        let rows = f
            .superseded
            .iter()
            .map(|s| vec![s.host.clone(), s.file.clone(), s.newer_file.clone()])
            .collect();
        o.push_str(&markdown_table(
            &["host", "file", "newer"],
            &escape_rows(rows),
            3,
        ));
    }
    o
}

/// The fleet as a section of the HTML report: the hosts (at-risk first) and every instance not on huge
/// pages with its exact fix.
pub fn html(f: &Fleet) -> String {
    use crate::escape::esc;
    let t = &f.totals;
    let mut o = format!(
        "<h2>Fleet</h2><p>{} hosts: {} at risk, {} warn, {} ok; {} of {} PostgreSQL instances on 4 KB pages</p>",
        t.hosts, t.at_risk, t.warn, t.ok, t.instances_4k, t.instances
    );
    o.push_str("<table><tr><th>host</th><th>verdict</th><th>kernel</th><th>model</th><th>findings</th></tr>");
    for h in &f.hosts {
        o.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&h.host),
            h.verdict.as_str(),
            esc(&h.kernel),
            h.preempt_model,
            esc(&h.finding_ids.join(", "))
        ));
    }
    o.push_str("</table>");
    if !f.not_on_huge_pages.is_empty() {
        o.push_str("<table><tr><th>host</th><th>postmaster</th><th>fix</th></tr>");
        for i in &f.not_on_huge_pages {
            o.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td style=\"text-align:left\">{}</td></tr>",
                esc(&i.host),
                i.postmaster_pid,
                i.fix
                    .iter()
                    .map(|l| esc(l))
                    .collect::<Vec<_>>()
                    .join("<br>")
            ));
        }
        o.push_str("</table>");
    }
    if !f.diagnoses.is_empty() {
        o.push_str("<table><tr>");
        for h in DIAGNOSIS_HEAD {
            o.push_str(&format!("<th>{h}</th>"));
        }
        o.push_str("</tr>");
        for d in &f.diagnoses {
            o.push_str("<tr>");
            for c in diagnosis_row(d) {
                o.push_str(&format!("<td>{}</td>", esc(&c)));
            }
            o.push_str("</tr>");
        }
        o.push_str("</table>");
    }
    o
}

/// The diagnoses table's head.
const DIAGNOSIS_HEAD: [&str; 7] = [
    "host",
    "postmaster",
    "symptom",
    "spinlock",
    "samples",
    "segment faults/s",
    "pages",
];

fn diagnosis_row(d: &DiagnosisRow) -> Vec<String> {
    vec![
        d.host.clone(),
        d.postmaster_pid.to_string(),
        d.symptom.as_str().to_string(),
        format!("{:.1}%", d.spinlock_pct),
        d.client_samples.to_string(),
        stats::fmt::rate(d.segment_faults_per_s),
        d.segment_page_kib
            .map(|k| {
                if k >= 1024 {
                    format!("{} MB", k / 1024)
                } else {
                    format!("{k} KB")
                }
            })
            .unwrap_or_else(|| "?".into()),
    ]
}

/// The section of the hosts that sent a diagnosis, in the table format.
fn diagnoses_table(f: &Fleet, style: Style, width: usize) -> String {
    if f.diagnoses.is_empty() {
        return String::new();
    }
    let mut o = style.bold("\nDiagnoses (hosts that sent one), the symptom present first\n");
    let rows: Vec<_> = f.diagnoses.iter().map(diagnosis_row).collect();
    o.push_str(&columns(
        &DIAGNOSIS_HEAD,
        &[
            Align::Left,
            Align::Right,
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
        ],
        &rows,
        2,
        width,
    ));
    o
}
