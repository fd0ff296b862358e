//! `bench pg` results as a table: one row per cell with TPS, its spread and the signed change against the
//! first configuration at the same client count (with several builds: the first build's cell of the same
//! configuration), latency, the cluster's page tables and Pss, faults per transaction and whether the segment
//! was on huge pages; then the page-table ratios and, for builds with the rseq-spinlock patch, what the rseq
//! time-slice extension did.

use axes::model::Model;
use axes::HugePages;
use results::pg::{Build, Cell, PgResult, RseqSlice};
use results::Status;

use crate::markup::{columns, model_column, model_header, model_prefix, not_run_row, Align};
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
        "{}sb {} hp {} c {}",
        model_prefix(c.preempt),
        c.shared_buffers,
        c.huge_pages,
        c.clients
    )
}

/// Whether the cells ran under preemption models of their own (`--switch-preempt none,lazy`).
fn models(r: &PgResult) -> bool {
    r.cells.iter().any(|c| c.preempt.is_some())
}

/// The columns before a row's configuration: its build (several builds), its model (several models).
fn lead(r: &PgResult, c: &Cell) -> Vec<String> {
    let mut l = Vec::new();
    if several_builds(r) {
        l.push(build_name(c));
    }
    l.extend(model_column(models(r), c.preempt));
    l
}

/// Their headings.
fn lead_head(r: &PgResult) -> Vec<&'static str> {
    let mut h = Vec::new();
    if several_builds(r) {
        h.push("build");
    }
    h.extend(model_header(models(r)));
    h
}

/// The cell's build as a table shows it (`-` for files made before builds were an axis).
fn build_name(c: &Cell) -> String {
    c.build
        .as_ref()
        .map(|b| b.name.clone())
        .unwrap_or_else(|| "-".into())
}

/// Whether the result has more than one build (then every row names its build).
fn several_builds(r: &PgResult) -> bool {
    r.spec.builds.len() > 1
}

/// One line for a finished run (progress output); `with_build`: the run is one of several builds'.
pub fn rep_line(c: &Cell, r: &results::pg::Rep, with_build: bool) -> String {
    let label = match with_build {
        true => format!("{} {}", build_name(c), label(c)),
        false => label(c),
    };
    format!(
        "{:<28} round {}: {:>7} tps  p99 {:>8}  page tables {:>6}  on huge pages: {}",
        label,
        r.round + 1,
        rate(r.tps),
        ms(r.latency_ms.p99),
        kib(r.page_tables_kib as f64),
        if r.segment.on_huge_pages { "yes" } else { "no" }
    )
}

/// The baseline of a cell: the first configuration's cell with the same client count; with several
/// builds, the first build's cell of the same configuration; with several preemption models, the first
/// model's cell of the same build and configuration.
fn baseline<'a>(r: &'a PgResult, c: &Cell) -> Option<&'a Cell> {
    let same_config =
        |b: &Cell| b.shared_buffers == c.shared_buffers && b.huge_pages == c.huge_pages;
    let by_model = models(r);
    r.cells.iter().find(|b| {
        b.clients == c.clients
            && b.summary.is_some()
            && (!(several_builds(r) || by_model) || same_config(b))
            && (!by_model || b.build == c.build)
    })
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
        crate::markup::preemption(h.kernel.preemption.model, r.cells.iter().map(|c| c.preempt)),
        h.kernel.cpus.value.unwrap_or(0),
        s.pg_version.as_deref().unwrap_or("?"),
        s.driver,
        s.script,
        s.pooler.map(|p| format!(" via {p}")).unwrap_or_default(),
        if s.reconnect { ", reconnecting" } else { "" },
        s.scale,
        s.repeat,
        s.duration_s,
        s.warmup_s,
        s.protocol,
        if s.prewarm { ", prewarmed" } else { "" },
        if r.envelope.interrupted { " (INTERRUPTED)" } else { "" }
    ));
    o.push_str(&builds(r));
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
        let lead = lead(r, c);
        match &c.summary {
            Some(m) if c.status == Status::Ok => rows.push(
                [
                    lead,
                    vec![
                        c.shared_buffers.clone(),
                        c.huge_pages.to_string(),
                        c.clients.to_string(),
                        rate(m.tps.median),
                        spread(&m.tps),
                        signed_change(r, c),
                        ms(m.latency_p99_ms.as_ref().map(|x| x.median)),
                        kib(m.page_tables_kib.median),
                        kib(m.pss_kib.median),
                        sig3(m.minflt_per_tx.median),
                        if m.on_huge_pages { "yes" } else { "no" }.into(),
                    ],
                ]
                .concat(),
            ),
            _ => rows.push(not_run_row(
                [
                    lead,
                    vec![
                        c.shared_buffers.clone(),
                        c.huge_pages.to_string(),
                        c.clients.to_string(),
                    ],
                ]
                .concat(),
                &c.status,
                6,
                c.reason.as_deref(),
            )),
        }
    }
    let lead_head = lead_head(r);
    let lead_align = vec![Align::Left; lead_head.len()];
    o.push_str(&columns(
        &[
            lead_head.as_slice(),
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
        ]
        .concat(),
        &[
            lead_align.as_slice(),
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
        ]
        .concat(),
        &rows,
        0,
        140,
    ));
    huge_vs_4k(r, &mut o);
    steal(r, &mut o);
    o.push_str(&rseq_lines(r));
    o.push_str(&diagnoses(r));
    o
}

/// Huge pages vs 4 KB pages per configuration: page tables and the change in tps.
fn huge_vs_4k(r: &PgResult, o: &mut String) {
    let with_build = several_builds(r);
    let mut lines = Vec::new();
    for c in r.cells.iter().filter(|c| c.huge_pages == HugePages::Off) {
        let Some(off) = &c.summary else { continue };
        for on in r.cells.iter().filter(|x| {
            x.huge_pages != HugePages::Off
                && x.clients == c.clients
                && x.shared_buffers == c.shared_buffers
                && x.build == c.build
                && x.preempt == c.preempt
        }) {
            let Some(m) = &on.summary else { continue };
            let build = match with_build {
                true => format!("{} ", build_name(c)),
                false => String::new(),
            };
            let build = build + &model_prefix(c.preempt);
            lines.push(format!(
                "  {build}sb {} c {}: huge_pages={} page tables {} vs {} with off ({:.3}x); tps {:+.1}%",
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
}

/// The hypervisor's CPU steal during the runs: a noisy neighbour shows here.
fn steal(r: &PgResult, o: &mut String) {
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
}

/// The builds, when there are several or one is not a plain directory: name, version, patches, source and
/// configure flags.
fn builds(r: &PgResult) -> String {
    let b = &r.spec.builds;
    if b.is_empty() || (b.len() == 1 && b[0].patches.is_empty() && b[0].name == b[0].bin_dir) {
        return String::new();
    }
    let mut o = String::from("builds:\n");
    for x in b {
        o.push_str(&format!("  {}\n", build_line(x)));
    }
    o
}

/// One build: `18+rseq-spinlock: PostgreSQL 18.6, patches rseq-spinlock (sha256 1a2b3c4d), postgresql-18
/// 18.6-3 (...), configure --enable-debug ..., bin /var/cache/...`.
pub fn build_line(b: &Build) -> String {
    let patches = match b.patches.is_empty() {
        true => "no patches".to_string(),
        false => format!(
            "patches {}",
            b.patches
                .iter()
                .map(|p| format!("{} (sha256 {})", p.name, &p.sha256[..p.sha256.len().min(8)]))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut parts = vec![
        format!("PostgreSQL {}", b.version.as_deref().unwrap_or("?")),
        patches,
    ];
    if let Some(s) = &b.source {
        parts.push(s.clone());
    }
    // A distribution's configure line runs to thousands of characters: counted here, whole in the file.
    match &b.configure {
        Some(c) if c.len() <= 100 => parts.push(format!("configure {c}")),
        Some(c) => parts.push(format!(
            "configure: {} flags (in the result file)",
            c.split(" '").count()
        )),
        None => {}
    }
    if b.name != b.bin_dir {
        parts.push(format!("bin {}", b.bin_dir));
    }
    format!("{}: {}", b.name, parts.join("; "))
}

/// The rseq time-slice extension's counters summed over each build's runs (builds with the patch).
pub(crate) fn rseq_lines(r: &PgResult) -> String {
    let mut o = String::new();
    // The builds (and preemption models) in cell order, each once (the axis' values, compared as values,
    // not by name).
    let mut builds: Vec<(Option<&Build>, Option<Model>)> = Vec::new();
    for c in &r.cells {
        if !builds.contains(&(c.build.as_ref(), c.preempt)) {
            builds.push((c.build.as_ref(), c.preempt));
        }
    }
    for (b, model) in builds {
        let n = b.map_or("-", |b| b.name.as_str());
        let n = match model {
            Some(m) => format!("{n} under {m}"),
            None => n.to_string(),
        };
        let counts: Vec<&RseqSlice> = r
            .cells
            .iter()
            .filter(|c| c.build.as_ref() == b && c.preempt == model)
            .flat_map(|c| c.reps.iter().filter_map(|x| x.rseq_slice.as_ref()))
            .collect();
        let Some(first) = counts.first() else {
            continue;
        };
        if !first.enabled {
            o.push_str(&format!(
                "  {n}: not in use: {}\n",
                first.why.as_deref().unwrap_or("the server did not say why")
            ));
            continue;
        }
        let sum = |f: fn(&RseqSlice) -> u64| counts.iter().map(|x| f(x)).sum::<u64>();
        let (req, grants) = (sum(|x| x.requests), sum(|x| x.grants));
        let left = sum(|x| x.backends_left);
        o.push_str(&format!(
            "  {n}: {} runs: {} requests, {} grants ({} per million requests), {} yields, {} cleared{}\n",
            counts.len(),
            req,
            grants,
            sig3(grants as f64 * 1e6 / (req.max(1) as f64)),
            sum(|x| x.yields),
            sum(|x| x.cleared),
            match left {
                0 => String::new(),
                n => format!(" ({n} backends were still connected when counted: not in the figures)"),
            }
        ));
    }
    if o.is_empty() {
        return o;
    }
    format!("\nrseq time-slice extension (spinlock holders; the server's rseq_slice.counters over the measured runs):\n{o}")
}

/// `--diagnose`: one line per run with the diagnosis' key counts, and what it could not measure.
fn diagnoses(r: &PgResult) -> String {
    let mut o = String::new();
    let with_build = several_builds(r);
    for c in &r.cells {
        let label = match with_build {
            true => format!("{} {}", build_name(c), label(c)),
            false => label(c),
        };
        for rep in &c.reps {
            if let Some(d) = &rep.diagnosis {
                let sw = &d.totals.switches;
                o.push_str(&format!(
                    "  {:<28} round {}: spinlock {:.1}% of {} samples, page faults {:.1}%, segment faults {}/s, in-fault switches {}/s (preempted in the kernel {}, cond_resched {}, return to user {}), symptom {}\n",
                    label,
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
                    label,
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
    let head: String = lead_head(r).iter().map(|h| format!("| {h} ")).collect();
    let rule = "|---".repeat(lead_head(r).len());
    let mut o = format!(
        "{head}| shared_buffers | huge_pages | clients | TPS (median) | min..max | vs first | latency p99 | page tables | Pss | faults/tx | on huge pages |\n{rule}|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for c in &r.cells {
        for l in lead(r, c) {
            o.push_str(&format!("| {l} "));
        }
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
