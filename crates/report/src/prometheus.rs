//! The audit in Prometheus text exposition format, for node_exporter's textfile collector
//! (`--collector.textfile.directory`; write to a temp file and rename it into place).

use std::fmt::Write;

use hostfacts::kernel::PreemptModel;
use hostfacts::Audit;

/// Escapes a label value (backslash, double quote, newline).
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Out {
    text: String,
}

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP preemptlab_{name} {help}");
        let _ = writeln!(self.text, "# TYPE preemptlab_{name} {kind}");
    }
    fn sample(&mut self, name: &str, labels: &[(&str, String)], value: f64) {
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

/// Renders the audit as Prometheus metrics.
pub fn render(a: &Audit) -> String {
    let mut o = Out {
        text: String::new(),
    };
    let k = &a.kernel;
    let m = &a.memory;

    o.family(
        "audit_info",
        "gauge",
        "preemptlab audit ran; labels carry the tool and schema version.",
    );
    o.sample(
        "audit_info",
        &[
            ("version", a.tool_version.clone()),
            ("schema_version", a.schema_version.to_string()),
        ],
        1.0,
    );

    o.family("kernel_info", "gauge", "Kernel release and architecture.");
    o.sample(
        "kernel_info",
        &[
            ("release", k.release.value.clone().unwrap_or_default()),
            ("arch", k.arch.value.clone().unwrap_or_default()),
        ],
        1.0,
    );
    if let Some(c) = k.cpus.get() {
        o.family("cpus", "gauge", "Online CPUs.");
        o.sample("cpus", &[], *c as f64);
    }
    if let Some(hz) = k.hz.get() {
        o.family("kernel_hz", "gauge", "Timer frequency CONFIG_HZ.");
        o.sample("kernel_hz", &[], *hz as f64);
    }
    o.family(
        "preempt_model",
        "gauge",
        "Effective kernel preemption model: 1 for the active model, 0 for the others.",
    );
    let decided = k.preemption.decided_by.clone().unwrap_or_default();
    for model in PreemptModel::ALL
        .iter()
        .chain([PreemptModel::Unknown].iter())
    {
        o.sample(
            "preempt_model",
            &[
                ("model", model.as_str().to_string()),
                ("decided_by", decided.clone()),
            ],
            if *model == k.preemption.model {
                1.0
            } else {
                0.0
            },
        );
    }
    if let Some(d) = k.preemption.dynamic.get() {
        o.family(
            "preempt_dynamic",
            "gauge",
            "1 when the kernel is PREEMPT_DYNAMIC.",
        );
        o.sample("preempt_dynamic", &[], if *d { 1.0 } else { 0.0 });
    }
    if let Some(r) = k.rseq_slice_extension.get() {
        o.family(
            "rseq_slice_extension_available",
            "gauge",
            "1 when the rseq time-slice extension can be enabled.",
        );
        o.sample(
            "rseq_slice_extension_available",
            &[],
            if *r { 1.0 } else { 0.0 },
        );
    }

    if let Some(v) = m.total_kib.get() {
        o.family("memory_total_bytes", "gauge", "MemTotal.");
        o.sample("memory_total_bytes", &[], (*v * 1024) as f64);
    }
    if let Some(v) = m.page_tables_kib.get() {
        o.family(
            "page_tables_bytes",
            "gauge",
            "Memory used by all page tables (PageTables in /proc/meminfo).",
        );
        o.sample("page_tables_bytes", &[], (*v * 1024) as f64);
    }
    if let Some(pools) = m.pools.get() {
        for (name, help, get) in [
            (
                "hugepages_total",
                "Pages in the hugetlb pool (nr_hugepages).",
                (|p: &hostfacts::memory::HugePool| p.total) as fn(&_) -> u64,
            ),
            ("hugepages_free", "Free pages in the hugetlb pool.", |p| {
                p.free
            }),
            (
                "hugepages_reserved",
                "Reserved, not yet faulted pages.",
                |p| p.reserved,
            ),
            (
                "hugepages_surplus",
                "Surplus pages above nr_hugepages.",
                |p| p.surplus,
            ),
        ] {
            o.family(name, "gauge", help);
            for p in pools {
                o.sample(
                    name,
                    &[("page_size_bytes", (p.page_size_kib * 1024).to_string())],
                    get(p) as f64,
                );
            }
        }
    }
    o.family(
        "thp_setting",
        "gauge",
        "Transparent huge page settings: 1 for the selected value.",
    );
    for (file, f) in [
        ("enabled", &m.thp_enabled),
        ("defrag", &m.thp_defrag),
        ("shmem_enabled", &m.thp_shmem_enabled),
    ] {
        if let Some(v) = f.get() {
            o.sample(
                "thp_setting",
                &[("file", file.to_string()), ("value", v.clone())],
                1.0,
            );
        }
    }

    if !a.instances.is_empty() {
        o.family(
            "pg_instance_info",
            "gauge",
            "A running PostgreSQL instance.",
        );
        for i in &a.instances {
            o.sample(
                "pg_instance_info",
                &[
                    ("postmaster_pid", i.postmaster_pid.to_string()),
                    ("data_dir", i.data_dir.value.clone().unwrap_or_default()),
                    ("version", i.version.value.clone().unwrap_or_default()),
                    (
                        "port",
                        i.port.value.map(|p| p.to_string()).unwrap_or_default(),
                    ),
                ],
                1.0,
            );
        }
        let id = |i: &hostfacts::postgres::PgInstance| {
            vec![
                ("postmaster_pid", i.postmaster_pid.to_string()),
                ("data_dir", i.data_dir.value.clone().unwrap_or_default()),
            ]
        };
        o.family(
            "pg_on_huge_pages",
            "gauge",
            "1 when the instance's main shared segment is on hugetlb pages.",
        );
        for i in &a.instances {
            if let Some(v) = i.on_huge_pages.get() {
                o.sample("pg_on_huge_pages", &id(i), if *v { 1.0 } else { 0.0 });
            }
        }
        o.family(
            "pg_shared_memory_bytes",
            "gauge",
            "Size of the instance's main shared segment.",
        );
        for i in &a.instances {
            if let Some(kib) = i.shared_memory_kib() {
                o.sample("pg_shared_memory_bytes", &id(i), (kib * 1024) as f64);
            }
        }
        o.family(
            "pg_page_tables_bytes",
            "gauge",
            "Sum of VmPTE over the instance's processes.",
        );
        for i in &a.instances {
            o.sample(
                "pg_page_tables_bytes",
                &id(i),
                (i.page_tables_kib * 1024) as f64,
            );
        }
        o.family(
            "pg_page_tables_projected_bytes",
            "gauge",
            "Page tables at max_connections backends at today's mean backend VmPTE.",
        );
        for i in &a.instances {
            if let Some(v) = i.page_tables_projected_kib.get() {
                o.sample("pg_page_tables_projected_bytes", &id(i), (*v * 1024) as f64);
            }
        }
        o.family("pg_backends", "gauge", "Client backends of the instance.");
        for i in &a.instances {
            o.sample("pg_backends", &id(i), i.backend_pids.len() as f64);
        }
    }

    o.family(
        "finding",
        "gauge",
        "One series per audit finding (value 1), labelled with its id and severity.",
    );
    for f in &a.findings {
        o.sample(
            "finding",
            &[
                ("id", f.id.clone()),
                ("severity", f.severity.as_str().to_string()),
                (
                    "instance",
                    f.instance.map(|p| p.to_string()).unwrap_or_default(),
                ),
            ],
            1.0,
        );
    }
    o.family(
        "verdict",
        "gauge",
        "Audit verdict: 1 for the current verdict (ok, warn, at-risk), 0 otherwise.",
    );
    for v in ["ok", "warn", "at-risk"] {
        o.sample(
            "verdict",
            &[("verdict", v.to_string())],
            if a.verdict.as_str() == v { 1.0 } else { 0.0 },
        );
    }
    o.text
}
