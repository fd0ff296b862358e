//! The audit in Prometheus text exposition format (version 0.0.4), for node_exporter's textfile collector
//! (`--collector.textfile.directory`; `preemptlab audit --format prometheus --out DIR/preemptlab.prom`
//! writes it atomically).
//!
//! Conventions (<https://prometheus.io/docs/practices/naming/>): one `preemptlab_` prefix; base units in the
//! name (`_bytes`, `_seconds`, `_hertz`; page counts as `_pages`); strings only as labels of `_info` gauges
//! whose value is 1; no label named `instance` or `job` (the scrape adds those). Nothing that node_exporter's
//! meminfo collector already exports is repeated: MemTotal, PageTables and the default-size hugetlb pool
//! (HugePages_Total/Free/Rsvd/Surp) are `node_memory_*`; only pools of other page sizes are here. Each
//! PostgreSQL instance is identified by `postmaster_pid` and `data_dir`. docs/metrics.md lists every metric.

use std::fmt::Write;

use results::host::memory::HugePool;
use results::host::postgres::PgInstance;
use results::host::{Audit, Severity};

/// Escapes a label value (backslash, double quote, newline).
pub(crate) fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Escapes HELP text (backslash, newline).
fn esc_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

pub(crate) type Labels = Vec<(&'static str, String)>;

/// Builds the text one metric family at a time; a family with no sample is left out entirely.
#[derive(Default)]
pub(crate) struct Out {
    pub(crate) text: String,
}

impl Out {
    /// A gauge family: HELP, TYPE and its samples.
    pub(crate) fn gauge(&mut self, name: &str, help: &str, samples: &[(Labels, f64)]) {
        if samples.is_empty() {
            return;
        }
        let _ = writeln!(self.text, "# HELP preemptlab_{name} {}", esc_help(help));
        let _ = writeln!(self.text, "# TYPE preemptlab_{name} gauge");
        for (labels, value) in samples {
            let l: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
                .collect();
            if l.is_empty() {
                let _ = writeln!(self.text, "preemptlab_{name} {value}");
            } else {
                let _ = writeln!(self.text, "preemptlab_{name}{{{}}} {value}", l.join(","));
            }
        }
    }
}

pub(crate) fn bool01(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// The labels that identify a PostgreSQL instance.
fn id(i: &PgInstance) -> Labels {
    vec![
        ("postmaster_pid", i.postmaster_pid.to_string()),
        ("data_dir", i.data_dir.value.clone().unwrap_or_default()),
    ]
}

/// The three series every file carries, success or not.
fn audit_head(o: &mut Out, success: bool, unix_s: u64, info: Labels) {
    o.gauge(
        "audit_success",
        "1 when the audit ran to the end; 0 when it failed (the numbers below are then absent).",
        &[(vec![], bool01(success))],
    );
    o.gauge(
        "audit_timestamp_seconds",
        "When the audit ran, seconds since the Unix epoch.",
        &[(vec![], unix_s as f64)],
    );
    o.gauge(
        "audit_info",
        "Always 1; labels carry preemptlab's version, the JSON schema version and any --sysroot read.",
        &[(info, 1.0)],
    );
}

/// The file a failed audit leaves behind: success 0 and the time, so that an alert fires instead of the
/// last good numbers being served for ever.
pub fn render_failure(tool_version: &str, unix_s: u64) -> String {
    let mut o = Out::default();
    audit_head(
        &mut o,
        false,
        unix_s,
        vec![("version", tool_version.to_string())],
    );
    o.text
}

/// Renders the audit as Prometheus metrics.
pub fn render(a: &Audit) -> String {
    let mut o = Out::default();

    let mut info: Labels = vec![
        ("version", a.tool_version.clone()),
        ("schema_version", a.schema_version.to_string()),
    ];
    if let Some(s) = &a.sysroot {
        info.push(("sysroot", s.clone()));
    }
    audit_head(&mut o, true, a.generated_unix_s, info);

    o.gauge(
        "at_risk",
        "1 when the audit's verdict is at-risk (at least one critical finding), else 0.",
        &[(vec![], bool01(a.verdict == results::host::Verdict::AtRisk))],
    );
    o.gauge(
        "audit_verdict",
        "The audit's verdict as a state set: 1 for the current one of ok, warn, at-risk; 0 for the others.",
        &["ok", "warn", "at-risk"]
            .map(|v| (vec![("verdict", v.to_string())], bool01(a.verdict.as_str() == v))),
    );
    o.gauge(
        "finding_info",
        "One series per finding, always 1: its id, severity and the postmaster PID it concerns (empty for the host).",
        &a.findings
            .iter()
            .map(|f| {
                (
                    vec![
                        ("id", f.id.clone()),
                        ("severity", f.severity.as_str().to_string()),
                        (
                            "postmaster_pid",
                            f.instance.map(|p| p.to_string()).unwrap_or_default(),
                        ),
                    ],
                    1.0,
                )
            })
            .collect::<Vec<_>>(),
    );

    o.gauge(
        "pg_query_failures",
        "--pg servers the audit could not ask (each is a pg-query-failed finding; the rest of the audit stands); 0 when every one answered or none was given.",
        &[(vec![], a.pg_failures.len() as f64)],
    );

    kernel(&mut o, a);
    memory(&mut o, a);
    instances(&mut o, a);
    o.text
}

/// The kernel: release and architecture, the preemption model and its evidence, the rseq slice extension.
fn kernel(o: &mut Out, a: &Audit) {
    let k = &a.kernel;
    o.gauge(
        "kernel_info",
        "Always 1; the kernel release and architecture.",
        &[(
            vec![
                ("release", k.release.value.clone().unwrap_or_default()),
                ("arch", k.arch.value.clone().unwrap_or_default()),
            ],
            1.0,
        )],
    );
    o.gauge(
        "preempt_model_info",
        "Always 1; the effective preemption model (none, voluntary, full, lazy, rt, unknown) and the evidence that decided it.",
        &[(
            vec![
                ("model", k.preemption.model.as_str().to_string()),
                ("source", k.preemption.decided_by.clone().unwrap_or_default()),
            ],
            1.0,
        )],
    );
    o.gauge(
        "preempt_dynamic",
        "1 when the kernel is built with PREEMPT_DYNAMIC (the model can change at boot or run time).",
        &k.preemption
            .dynamic
            .get()
            .map(|d| (vec![], bool01(*d)))
            .into_iter()
            .collect::<Vec<_>>(),
    );
    o.gauge(
        "kernel_timer_frequency_hertz",
        "The kernel's timer frequency, CONFIG_HZ.",
        &k.hz
            .get()
            .map(|hz| (vec![], f64::from(*hz)))
            .into_iter()
            .collect::<Vec<_>>(),
    );
    o.gauge(
        "rseq_slice_extension_available",
        "1 when the kernel offers the rseq time-slice extension.",
        &k.rseq_slice_extension
            .get()
            .map(|r| (vec![], bool01(*r)))
            .into_iter()
            .collect::<Vec<_>>(),
    );
}

/// Memory: THP, the huge page pools meminfo does not describe, the pool targets.
fn memory(o: &mut Out, a: &Audit) {
    let m = &a.memory;
    let thp: Labels = [
        ("enabled", &m.thp_enabled),
        ("defrag", &m.thp_defrag),
        ("shmem_enabled", &m.thp_shmem_enabled),
    ]
    .into_iter()
    .filter_map(|(file, f)| f.get().map(|v| (file, v.clone())))
    .collect();
    if !thp.is_empty() {
        o.gauge(
            "thp_info",
            "Always 1; the selected transparent huge page settings (/sys/kernel/mm/transparent_hugepage).",
            &[(thp, 1.0)],
        );
    }
    let default_kib = m.default_huge_page_kib.get().copied();
    let other_pools: Vec<&HugePool> = m
        .pools
        .get()
        .map(|ps| {
            ps.iter()
                .filter(|p| Some(p.page_size_kib) != default_kib)
                .collect()
        })
        .unwrap_or_default();
    for (name, help, get) in [
        (
            "hugetlb_pool_pages",
            "Pages in a hugetlb pool of a non-default page size (nr_hugepages; the default size is node_memory_HugePages_Total).",
            (|p: &HugePool| p.total) as fn(&HugePool) -> u64,
        ),
        (
            "hugetlb_pool_free_pages",
            "Free pages in a hugetlb pool of a non-default page size.",
            |p| p.free,
        ),
        (
            "hugetlb_pool_reserved_pages",
            "Reserved, not yet faulted pages in a hugetlb pool of a non-default page size.",
            |p| p.reserved,
        ),
    ] {
        let samples: Vec<(Labels, f64)> = other_pools
            .iter()
            .map(|p| {
                (
                    vec![("page_size_bytes", (p.page_size_kib * 1024).to_string())],
                    get(p) as f64,
                )
            })
            .collect();
        o.gauge(name, help, &samples);
    }

    if m.pools.get().is_some() {
        let samples: Vec<(Labels, f64)> = a
            .pool_targets
            .iter()
            .map(|t| {
                (
                    vec![("page_size_bytes", (t.page_size_kib * 1024).to_string())],
                    t.target as f64,
                )
            })
            .collect();
        o.gauge(
            "hugetlb_pool_target_pages",
            "The pool this host needs at a page size: every PostgreSQL instance's need and the pages other users hold (what the audit's fix sets).",
            &samples,
        );
    }
}

/// Per PostgreSQL instance.
fn instances(o: &mut Out, a: &Audit) {
    let m = &a.memory;
    let each = |f: &dyn Fn(&PgInstance) -> Option<(Labels, f64)>| -> Vec<(Labels, f64)> {
        a.instances.iter().filter_map(f).collect()
    };
    o.gauge(
        "pg_instance_info",
        "Always 1, one series per running PostgreSQL instance: its major version, port and huge_pages/huge_page_size settings (empty when unknown).",
        &each(&|i| {
            let mut l = id(i);
            l.push(("version", i.version.value.clone().unwrap_or_default()));
            l.push((
                "port",
                i.port.value.map(|p| p.to_string()).unwrap_or_default(),
            ));
            l.push((
                "huge_pages",
                i.setting("huge_pages").unwrap_or_default().to_string(),
            ));
            l.push((
                "huge_page_size",
                i.setting("huge_page_size").unwrap_or_default().to_string(),
            ));
            Some((l, 1.0))
        }),
    );
    o.gauge(
        "pg_at_risk",
        "1 when a critical finding concerns the instance, else 0.",
        &each(&|i| {
            let critical = a
                .findings
                .iter()
                .any(|f| f.instance == Some(i.postmaster_pid) && f.severity == Severity::Critical);
            Some((id(i), bool01(critical)))
        }),
    );
    o.gauge(
        "pg_on_huge_pages",
        "1 when the instance's main shared memory segment is on hugetlb pages, 0 when on 4 KB pages.",
        &each(&|i| i.on_huge_pages.get().map(|v| (id(i), bool01(*v)))),
    );
    o.gauge(
        "pg_shared_memory_bytes",
        "Size of the instance's main shared memory segment (the server's shared_memory_size with --pg).",
        &each(&|i| i.shared_memory_kib().map(|k| (id(i), (k * 1024) as f64))),
    );
    o.gauge(
        "pg_page_tables_bytes",
        "Page-table memory of the instance now: the sum of VmPTE over its processes.",
        &each(&|i| Some((id(i), (i.page_tables_kib * 1024) as f64))),
    );
    o.gauge(
        "pg_page_tables_projected_bytes",
        "Page tables at max_connections backends at today's mean backend VmPTE.",
        &each(&|i| {
            i.page_tables_projected_kib
                .get()
                .map(|k| (id(i), (k * 1024) as f64))
        }),
    );
    o.gauge(
        "pg_page_tables_full_touch_bytes",
        "Page tables if max_connections backends and the auxiliaries each touched the whole segment.",
        &each(&|i| {
            i.page_tables_full_touch_kib
                .get()
                .map(|k| (id(i), (k * 1024) as f64))
        }),
    );
    o.gauge(
        "pg_backends",
        "Client backends of the instance.",
        &each(&|i| Some((id(i), i.backend_pids.len() as f64))),
    );
    // Sizing at the page size the instance would use (huge_page_size, else the host default), and the
    // host's one pool target at that size (the audit's, computed by hostfacts::hugepages::target).
    let targets = &a.pool_targets;
    let sizing = |i: &PgInstance| -> Option<(Labels, &results::host::hugepages::PoolTarget, u64)> {
        let (t, need) = targets
            .iter()
            .find_map(|t| t.need_of(i.postmaster_pid).map(|n| (t, n)))?;
        let mut l = id(i);
        l.push(("page_size_bytes", (t.page_size_kib * 1024).to_string()));
        Some((l, t, need.pages_exact))
    };
    o.gauge(
        "pg_huge_pages_needed",
        "Huge pages the instance's shared memory needs at its page size (shared_memory_size_in_huge_pages with --pg).",
        &each(&|i| sizing(i).map(|(l, _, need)| (l, need as f64))),
    );
    o.gauge(
        "pg_huge_pages_shortfall",
        "Pages the hugetlb pool of the instance's page size lacks for the instance to start on huge pages: needed plus what other instances and users hold, minus the pool, at least 0.",
        &each(&|i| {
            // Only when the pools were read: an unreadable pool is not an empty one.
            m.pools.get()?;
            let (l, t, _) = sizing(i)?;
            Some((l, t.restart_shortfall(i.postmaster_pid)? as f64))
        }),
    );
}
