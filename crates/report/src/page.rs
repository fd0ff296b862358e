//! The report page's frame: what it holds at the top (inputs counted by kind, the hosts and kernels they
//! were measured on, what was skipped and why), a table of contents linking every section, then one
//! section per document, each opening with the facts of the host it was measured on (the guest's kernel
//! for a result measured in a VM, with how the guest ran). The sections' bodies are `html`'s (bench lock,
//! bench pg, latency, net), `sim_html`'s, `diagnose_html`'s and `fleet_table`'s; the check's, the audit's
//! and the hugepages plan's are here.

use std::collections::BTreeMap;
use std::fmt::Write;

use results::check::CheckDoc;
use results::host::kernel::KernelFacts;
use results::host::memory::MemoryFacts;
use results::host::{Audit, Fact};
use results::hugepages::HugepagesDoc;
use results::vm::VmBlock;
use results::{Document, Kind};

use crate::escape::{esc, fact, js};
use crate::export::{Page, Skipped};
use crate::html::{Doc, CSS};

/// The facts of the host a document was measured on.
struct HostOf<'a> {
    hostname: &'a Fact<String>,
    kernel: &'a KernelFacts,
    memory: &'a MemoryFacts,
    vm: Option<&'a VmBlock>,
    /// The models the cells ran under, when the run had the preemption model as an axis.
    models: Vec<String>,
}

fn host_of(d: &Document) -> Option<HostOf<'_>> {
    match d {
        Document::Check(c) => Some(HostOf {
            hostname: &c.audit.hostname,
            kernel: &c.audit.kernel,
            memory: &c.audit.memory,
            vm: None,
            models: Vec::new(),
        }),
        Document::Audit(a) => Some(HostOf {
            hostname: &a.hostname,
            kernel: &a.kernel,
            memory: &a.memory,
            vm: None,
            models: Vec::new(),
        }),
        other => other.envelope().map(|e| HostOf {
            hostname: &e.host.hostname,
            kernel: &e.host.kernel,
            memory: &e.host.memory,
            vm: e.vm.as_ref(),
            models: cell_models(other),
        }),
    }
}

/// The cells' own preemption models (`--switch-preempt none,lazy`), in the order they first appear.
fn cell_models(d: &Document) -> Vec<String> {
    let mut models: Vec<String> = Vec::new();
    for c in d.cells().unwrap_or_default() {
        if let Some((_, m)) = c.key.iter().find(|(k, _)| *k == "preempt") {
            if !models.contains(m) {
                models.push(m.clone());
            }
        }
    }
    models
}

impl HostOf<'_> {
    /// The model as the page names it: the host's, or the cells' with the host's own after them.
    fn model(&self) -> String {
        let host = js(&self.kernel.preemption.model);
        if self.models.is_empty() {
            host
        } else {
            format!(
                "{} per cell, the host's own {host}",
                self.models.join(" and ")
            )
        }
    }

    /// The key of the hosts table: name, kernel, model, CPUs and whether in a guest.
    fn key(&self) -> (String, String, String, String, String) {
        (
            fact(self.hostname),
            fact(&self.kernel.release),
            self.model(),
            fact(&self.kernel.cpus),
            self.vm
                .map(|v| format!("guest ({}) on a {} host", v.accelerator, v.host_kernel))
                .unwrap_or_else(|| "-".into()),
        )
    }

    /// The line under a section's heading.
    fn line(&self) -> String {
        let k = self.kernel;
        let m = self.memory;
        let pools = m
            .pools
            .value
            .as_ref()
            .map(|ps| {
                ps.iter()
                    .map(|p| format!("{} kB pool {} ({} free)", p.page_size_kib, p.total, p.free))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_else(|| "hugetlb pools unknown".into());
        let mut o = format!(
            "<p class=\"host\">{} <b>{}</b>: kernel <b>{}</b>, preemption <b>{}</b> ({}), {} CPUs, HZ {}, THP {} / shmem {}, {}.",
            if self.vm.is_some() {
                "Measured in a guest,"
            } else {
                "Host"
            },
            esc(&fact(self.hostname)),
            esc(&fact(&k.release)),
            esc(&self.model()),
            esc(k.preemption.decided_by.as_deref().unwrap_or("no source")),
            esc(&fact(&k.cpus)),
            esc(&fact(&k.hz)),
            esc(&fact(&m.thp_enabled)),
            esc(&fact(&m.thp_shmem_enabled)),
            esc(&pools)
        );
        if let Some(v) = self.vm {
            let _ = write!(
                o,
                " Guest: {}; host kernel {}.",
                esc(&v.summary()),
                esc(&v.host_kernel)
            );
            for w in v.warnings() {
                let _ = write!(o, " <span class=\"warn\">{}</span>", esc(&w));
            }
        }
        o.push_str("</p>");
        o
    }
}

/// The order of the sections: the check first, then audits (the fleet's answer over them first), live
/// diagnoses, the benches and the model, sizing plans last.
const ORDER: [Kind; 9] = [
    Kind::Check,
    Kind::Audit,
    Kind::Diagnose,
    Kind::BenchLock,
    Kind::BenchPg,
    Kind::BenchLatency,
    Kind::BenchNet,
    Kind::Sim,
    Kind::Hugepages,
];

fn findings(audit: &Audit) -> String {
    let mut o = format!(
        "<p>Audit verdict: <b>{}</b></p><ul>",
        esc(&js(&audit.verdict))
    );
    for f in &audit.findings {
        let sev = js(&f.severity);
        let _ = write!(
            o,
            "<li><span class=\"{sev}\">{}</span> <code>{}</code>: {}",
            esc(&sev.to_uppercase()),
            esc(&f.id),
            esc(&f.title)
        );
        let fixes: Vec<String> = f
            .fix
            .iter()
            .map(|x| format!("<code>{}</code>", esc(x)))
            .collect();
        if !fixes.is_empty() {
            let _ = write!(o, "<br>fix: {}", fixes.join("<br>"));
        }
        o.push_str("</li>");
    }
    o.push_str("</ul>");
    o
}

fn check_section(label: &str, d: &CheckDoc, host: &str) -> String {
    let mut o = format!(
        "<h2>check: {}</h2>{host}<h3>Verdict</h3><p class=\"verdict\">{}</p>",
        esc(label),
        esc(&d.verdict)
    );
    if let Some(l) = &d.load {
        let _ = write!(
            o,
            "<p>Load before measuring: {}; {}.</p>",
            match l.others_busy_pct {
                Some(p) => format!(
                    "others kept {p:.0}% of the {} CPUs' time busy over {:.0} s",
                    l.cpus, l.window_s
                ),
                None => "others' CPU share unknown".into(),
            },
            esc(&match (&l.loaded, l.bench_ran) {
                (None, _) => "the synthetic bench ran on an idle host".to_string(),
                (Some(why), true) => format!("{why}: the synthetic bench ran beside it"),
                (Some(why), false) => format!("{why}: the synthetic bench did not run"),
            })
        );
    }
    if d.fixes.is_empty() {
        let _ = write!(
            o,
            "<p>{}</p>",
            esc(d.no_fix.as_deref().unwrap_or("No fix listed."))
        );
    } else {
        o.push_str("<h3>Fixes, most effective first</h3><ol>");
        for f in &d.fixes {
            let gain = f
                .measured_gain_pct
                .map(|g| format!(" (measured: {g:+.0}% throughput)"))
                .unwrap_or_else(|| " (not measured here)".into());
            let _ = write!(
                o,
                "<li>{}{}<br>{}</li>",
                esc(&f.title),
                esc(&gain),
                f.commands
                    .iter()
                    .map(|c| format!("<code>{}</code>", esc(c)))
                    .collect::<Vec<_>>()
                    .join("<br>")
            );
        }
        o.push_str("</ol>");
    }
    o.push_str("<h3>Audit</h3>");
    o.push_str(&findings(&d.audit));
    if let Some(dg) = &d.diagnosis {
        o.push_str(&crate::diagnose_html::section(
            &format!("{label} (live diagnosis)"),
            dg,
            "",
        ));
    }
    if let Some(r) = &d.reproduction {
        o.push_str(&crate::html::lock_section(
            &format!("{label} (reproduction)"),
            r,
            "",
        ));
    }
    o
}

fn hugepages_section(label: &str, d: &HugepagesDoc) -> String {
    let mut o = format!(
        "<h2>hugepages: {}</h2><p>Sizing plans (no host facts are kept in this document).</p><ul>",
        esc(label)
    );
    for p in &d.plans {
        let _ = write!(
            o,
            "<li>{}: {} pages of {} kB<br>{}</li>",
            esc(&p.target),
            p.plan.pool_target,
            p.plan.page_size_kib,
            p.plan
                .sysctl_lines
                .iter()
                .map(|l| format!("<code>{}</code>", esc(l)))
                .collect::<Vec<_>>()
                .join("<br>")
        );
    }
    o.push_str("</ul>");
    o
}

/// One document's section; `host` is its host line.
fn section(d: &Doc, host: &str) -> String {
    match &d.doc {
        Document::Check(c) => check_section(&d.label, c, host),
        Document::Audit(a) => format!("<h2>audit: {}</h2>{host}{}", esc(&d.label), findings(a)),
        Document::Diagnose(r) => crate::diagnose_html::section(&d.label, r, host),
        Document::Lock(r) => crate::html::lock_section(&d.label, r, host),
        Document::Pg(r) => crate::html::pg_section(&d.label, r, host),
        Document::Latency(r) => crate::html::latency_section(&d.label, r, host),
        Document::Net(r) => crate::html::net_section(&d.label, r, host),
        Document::Sim(r) => crate::sim_html::section(&d.label, r, host),
        Document::Hugepages(h) => hugepages_section(&d.label, h),
    }
}

/// The page.
pub fn render(p: &Page) -> String {
    let mut o = String::new();
    let _ = write!(o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>preemptlab report</title><style>{CSS}</style></head><body>");
    let _ = write!(
        o,
        "<h1>preemptlab report</h1><p>Generated {}.</p>",
        esc(&p.generated_utc)
    );
    // What it holds.
    let mut by_kind: BTreeMap<usize, (Kind, usize)> = BTreeMap::new();
    for d in &p.docs {
        let k = d.doc.kind();
        let rank = ORDER.iter().position(|x| *x == k).unwrap_or(ORDER.len());
        by_kind.entry(rank).or_insert((k, 0)).1 += 1;
    }
    let kinds: Vec<String> = by_kind.values().map(|(k, n)| format!("{n} {k}")).collect();
    let _ = write!(
        o,
        "<h2>Summary</h2><p>{} document{}: {}.{}</p>",
        p.docs.len(),
        if p.docs.len() == 1 { "" } else { "s" },
        esc(&kinds.join(", ")),
        match p.skipped.len() {
            0 => String::new(),
            n => format!(
                " {n} file{} skipped, listed <a href=\"#skipped\">at the end</a> with the reason.",
                if n == 1 { "" } else { "s" }
            ),
        }
    );
    // The hosts, once each, with how many sections each holds.
    let mut hosts: BTreeMap<(String, String, String, String, String), usize> = BTreeMap::new();
    for d in &p.docs {
        if let Some(h) = host_of(&d.doc) {
            *hosts.entry(h.key()).or_insert(0) += 1;
        }
    }
    if !hosts.is_empty() {
        o.push_str("<table><tr><th>host</th><th>kernel</th><th>preemption</th><th>CPUs</th><th>in a VM</th><th>sections</th></tr>");
        for ((h, k, m, c, vm), n) in &hosts {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{n}</td></tr>",
                esc(h),
                esc(k),
                esc(m),
                esc(c),
                esc(vm)
            );
        }
        o.push_str("</table>");
    }
    // Sections in the page's order, each with its anchor.
    let mut order: Vec<(usize, &Doc)> = p
        .docs
        .iter()
        .map(|d| {
            let k = d.doc.kind();
            (ORDER.iter().position(|x| *x == k).unwrap_or(ORDER.len()), d)
        })
        .collect();
    order.sort_by_key(|(rank, _)| *rank);
    o.push_str("<h2>Contents</h2><ol>");
    if p.fleet.is_some() {
        o.push_str("<li><a href=\"#fleet\">Fleet: the audits' hosts at once</a></li>");
    }
    for (i, (_, d)) in order.iter().enumerate() {
        let where_ = host_of(&d.doc)
            .map(|h| {
                format!(
                    " ({}, kernel {}{})",
                    fact(h.hostname),
                    fact(&h.kernel.release),
                    if h.vm.is_some() { ", in a guest" } else { "" }
                )
            })
            .unwrap_or_default();
        let _ = write!(
            o,
            "<li><a href=\"#s{i}\">{}: {}</a>{}</li>",
            esc(d.doc.kind().name()),
            esc(&d.label),
            esc(&where_)
        );
    }
    if !p.skipped.is_empty() {
        o.push_str("<li><a href=\"#skipped\">Skipped files</a></li>");
    }
    o.push_str("</ol>");
    if let Some(f) = &p.fleet {
        let _ = write!(
            o,
            "<section id=\"fleet\">{}</section>",
            crate::fleet_table::html(f)
        );
    }
    for (i, (_, d)) in order.iter().enumerate() {
        let host = host_of(&d.doc).map(|h| h.line()).unwrap_or_default();
        let _ = write!(o, "<section id=\"s{i}\">{}</section>", section(d, &host));
    }
    if !p.skipped.is_empty() {
        o.push_str("<section id=\"skipped\"><h2>Skipped files</h2><ul>");
        for Skipped { file, reason } in &p.skipped {
            let _ = write!(o, "<li><code>{}</code>: {}</li>", esc(file), esc(reason));
        }
        o.push_str("</ul></section>");
    }
    o.push_str("</body></html>\n");
    o
}
