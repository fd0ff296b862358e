//! The audit as a table readable in 80 columns.

use results::host::postgres::Role;
use results::host::Bytes;
use results::host::Severity;
use results::host::{Audit, Fact};

use crate::markup::{columns, command, field, wrap, Align, Style};

fn kib(k: u64) -> String {
    Bytes::from_kib(k).to_string()
}

fn show<T>(f: &Fact<T>, s: impl FnOnce(&T) -> String) -> String {
    f.describe(s)
}

fn sev(style: &Style, s: Severity) -> String {
    match s {
        Severity::Critical => style.red("CRITICAL"),
        Severity::Warn => style.yellow("WARN    "),
        Severity::Info => style.dim("info    "),
    }
}

/// Renders the audit as text for a terminal of `width` columns.
pub fn render(a: &Audit, style: Style, width: usize) -> String {
    let mut o = String::new();
    let style = &style;
    title(a, style, width, &mut o);
    kernel(a, style, width, &mut o);
    memory(a, style, width, &mut o);
    postgres(a, style, width, &mut o);
    findings(a, style, width, &mut o);
    verdict(a, style, &mut o);
    o
}

/// The first line: the host's name (or why not), the sysroot read.
fn title(a: &Audit, style: &Style, width: usize, o: &mut String) {
    let mut head = match a.hostname.get() {
        Some(host) => format!("preemptlab audit: {host}"),
        None => format!(
            "preemptlab audit (host name unavailable: {})",
            a.hostname.unavailable.as_deref().unwrap_or("unknown")
        ),
    };
    if let Some(root) = &a.sysroot {
        head.push_str(&format!(" (sysroot {root})"));
    }
    o.push_str(&style.bold(&wrap(&head, width, 0, 2)));
    o.push_str("\n\n");
}

/// The kernel: release, preemption model with its evidence, the rseq slice extension.
fn kernel(a: &Audit, style: &Style, width: usize, o: &mut String) {
    let k = &a.kernel;

    o.push_str(&style.bold("Kernel\n"));
    o.push_str(&field(
        "release",
        &{
            // Each fact in its own place: a missing one reads "<name> unavailable (why)", never a bare gap.
            let part = |name: &str, v: Option<String>, why: &Option<String>| match v {
                Some(v) => v,
                None => format!(
                    "{name} unavailable ({})",
                    why.as_deref().unwrap_or("unknown")
                ),
            };
            [
                part("release", k.release.get().cloned(), &k.release.unavailable),
                part("architecture", k.arch.get().cloned(), &k.arch.unavailable),
                part(
                    "CPU count",
                    k.cpus.get().map(|n| format!("{n} CPUs")),
                    &k.cpus.unavailable,
                ),
                part(
                    "HZ",
                    k.hz.get().map(|n| format!("HZ {n}")),
                    &k.hz.unavailable,
                ),
            ]
            .join("; ")
        },
        width,
    ));
    let p = &k.preemption;
    o.push_str(&field(
        "preemption",
        &format!(
            "{}  (decided by {})",
            style.bold(&p.words()),
            p.decided_by.as_deref().unwrap_or("nothing readable")
        ),
        width,
    ));
    o.push_str(&field(
        "offered",
        &format!(
            "{}  [{}]  PREEMPT_DYNAMIC: {}",
            if p.offered.is_empty() {
                "unknown".to_string()
            } else {
                p.offered
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            },
            p.offered_source,
            show(&p.dynamic, |d| if *d { "yes".into() } else { "no".into() })
        ),
        width,
    ));
    for (i, e) in p.evidence.iter().enumerate() {
        let what = match (&e.says, &e.note) {
            (Some(s), Some(n)) => format!("{s} ({n})"),
            (Some(s), None) => s.clone(),
            (None, Some(n)) => n.clone(),
            (None, None) => String::new(),
        };
        let implies = e.implies.map(|m| format!(" => {m}")).unwrap_or_default();
        o.push_str(&field(
            if i == 0 { "evidence" } else { "" },
            &format!("{}: {what}{implies}", e.source),
            width,
        ));
    }
    o.push_str(&field(
        "rseq slice",
        &show(&k.rseq_slice_extension, |b| {
            if *b {
                "available".into()
            } else {
                match &k.rseq_slice_extension_why {
                    Some(why) => format!("not available: {why}"),
                    None => "not available (kernel lacks CONFIG_RSEQ_SLICE_EXTENSION, 7.0+)".into(),
                }
            }
        }),
        width,
    ));
    o.push('\n');
}

/// Memory: RAM, huge page pools, THP.
fn memory(a: &Audit, style: &Style, width: usize, o: &mut String) {
    let m = &a.memory;
    o.push_str(&style.bold("Memory\n"));
    o.push_str(&field(
        "RAM",
        &format!(
            "{} total, {} available, page tables {}",
            show(&m.total_kib, |v| kib(*v)),
            show(&m.available_kib, |v| kib(*v)),
            show(&m.page_tables_kib, |v| kib(*v))
        ),
        width,
    ));
    match m.pools.get() {
        Some(pools) if !pools.is_empty() => {
            for (i, pl) in pools.iter().enumerate() {
                o.push_str(&field(
                    if i == 0 { "hugetlb" } else { "" },
                    &format!(
                        "{} pages: total {}, free {}, reserved {}, surplus {} ({} pinned)",
                        kib(pl.page_size_kib),
                        pl.total,
                        pl.free,
                        pl.reserved,
                        pl.surplus,
                        kib(pl.pinned_kib())
                    ),
                    width,
                ));
            }
        }
        Some(_) => o.push_str(&field(
            "hugetlb",
            "no pools (kernel without hugetlbfs?)",
            width,
        )),
        None => o.push_str(&field("hugetlb", &show(&m.pools, |_| String::new()), width)),
    }
    o.push_str(&field(
        "THP",
        &format!(
            "enabled {}, defrag {}, shmem_enabled {}",
            show(&m.thp_enabled, |s| s.clone()),
            show(&m.thp_defrag, |s| s.clone()),
            show(&m.thp_shmem_enabled, |s| s.clone())
        ),
        width,
    ));
    o.push_str(&field(
        "overcommit",
        &format!(
            "vm.overcommit_memory = {}",
            show(&m.overcommit_memory, |v| v.to_string())
        ),
        width,
    ));
    o.push('\n');
}

/// PostgreSQL: each instance, its processes and page tables, servers not local.
fn postgres(a: &Audit, style: &Style, width: usize, o: &mut String) {
    o.push_str(&style.bold("PostgreSQL\n"));
    if a.instances.is_empty() {
        o.push_str("  no running instance found\n");
    }
    for inst in &a.instances {
        o.push_str(&field(
            "instance",
            &format!(
                "postmaster {}  version {}  port {}  {}",
                inst.postmaster_pid,
                show(&inst.version, |s| s.clone()),
                show(&inst.port, |p| p.to_string()),
                show(&inst.data_dir, |s| s.clone())
            ),
            width,
        ));
        if let Some(c) = &inst.container {
            o.push_str(&field("container", &container_line(c, inst), width));
        }
        let seg = match inst.segment.get() {
            Some(s) => {
                let on = if s.on_huge_pages() {
                    style.green("on huge pages: yes")
                } else {
                    style.red("on huge pages: NO")
                };
                format!(
                    "{} {} with {} kB pages; {on}",
                    s.mapping,
                    kib(s.size_kib),
                    s.kernel_page_size_kib
                )
            }
            None => show(&inst.segment, |_| String::new()),
        };
        o.push_str(&field("segment", &seg, width));
        let settings: Vec<String> = inst
            .settings
            .iter()
            .filter(|(_, f)| f.value.is_some())
            .map(|(n, f)| format!("{n}={} [{}]", f.value.as_deref().unwrap_or(""), f.source))
            .collect();
        o.push_str(&field("settings", &settings.join(", "), width));
        if let Some(server) = &inst.server {
            let mut s: Vec<String> = server
                .settings
                .iter()
                .map(|(n, v)| {
                    format!(
                        "{n}={}{}",
                        v.setting,
                        v.unit
                            .as_deref()
                            .map(|u| format!(" x {u}"))
                            .unwrap_or_default()
                    )
                })
                .collect();
            s.sort();
            o.push_str(&field(
                "server",
                &format!("{} (--pg): {}", server.dsn, s.join(", ")),
                width,
            ));
        }
        o.push_str(&field(
            "page tables",
            &format!(
                "{} now over {} processes; {} at max_connections at today's mean; {} if all touch the whole segment; postmaster VmPeak {}",
                kib(inst.page_tables_kib),
                inst.processes.len(),
                show(&inst.page_tables_projected_kib, |v| kib(*v)),
                show(&inst.page_tables_full_touch_kib, |v| kib(*v)),
                show(&inst.postmaster_vm_peak_kib, |v| kib(*v))
            ),
            width,
        ));
        // A process with nothing readable exited while the audit read it (or is unreadable): counted, not
        // shown as a row of blanks.
        let gone = |p: &&results::host::postgres::PgProcess| {
            p.pss_kib.is_none() && p.vm_pte_kib.is_none() && p.shared_hugetlb_kib.is_none()
        };
        let vanished = inst.processes.iter().filter(gone).count();
        if vanished > 0 {
            o.push_str(&field(
                "unread",
                &format!("{vanished} processes exited during the audit or could not be read (run as root)"),
                width,
            ));
        }
        let rows: Vec<Vec<String>> = inst
            .processes
            .iter()
            .filter(|p| !gone(p))
            .take(12)
            .map(|p| {
                vec![
                    p.pid.to_string(),
                    match p.role {
                        Role::Postmaster => "postmaster",
                        Role::Auxiliary => "aux",
                        Role::Backend => "backend",
                    }
                    .to_string(),
                    p.pss_kib.map(kib).unwrap_or_else(|| "?".into()),
                    p.vm_pte_kib.map(kib).unwrap_or_else(|| "?".into()),
                    p.shared_hugetlb_kib.map(kib).unwrap_or_else(|| "?".into()),
                    p.title.clone(),
                ]
            })
            .collect();
        o.push_str(&columns(
            &["pid", "role", "Pss", "VmPTE", "hugetlb", "title"],
            &[
                Align::Right,
                Align::Left,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Left,
            ],
            &rows,
            4,
            width,
        ));
        if inst.processes.len() > 12 {
            o.push_str(&format!(
                "    ... {} more processes (--format json lists them all)\n",
                inst.processes.len() - 12
            ));
        }
        o.push('\n');
    }
    for s in &a.unmatched_servers {
        o.push_str(&field(
            "server",
            &format!(
                "{} (not a local instance), backend pid {}",
                s.dsn, s.backend_pid
            ),
            width,
        ));
    }
}

/// The findings, each with its evidence and fix (a fix printed before is referred to).
fn findings(a: &Audit, style: &Style, width: usize, o: &mut String) {
    o.push_str(&style.bold("Findings\n"));
    if a.findings.is_empty() {
        o.push_str("  none\n");
    }
    for (i, f) in a.findings.iter().enumerate() {
        let head = format!("  {} {}  ", sev(style, f.severity), f.id);
        let used = 2 + 8 + 1 + f.id.chars().count() + 2;
        o.push_str(&head);
        o.push_str(&wrap(&f.title, width, used, 6));
        o.push('\n');
        for e in &f.evidence {
            o.push_str(&format!(
                "      {} {}\n",
                style.dim("evidence:"),
                wrap(e, width, 16, 8)
            ));
        }
        // A fix already printed under an earlier finding is referred to, not repeated.
        let same = a.findings[..i]
            .iter()
            .find(|g| !f.fix.is_empty() && g.fix == f.fix && g.instance == f.instance);
        if let Some(g) = same {
            o.push_str(&format!(
                "      {} the same as for {} above\n",
                style.bold("fix:"),
                g.id
            ));
            continue;
        }
        for x in &f.fix {
            o.push_str(&format!(
                "      {} {}\n",
                style.bold("fix:"),
                command(x, width, 11, 8)
            ));
        }
    }
}

/// The verdict with the findings counted by severity.
fn verdict(a: &Audit, style: &Style, o: &mut String) {
    let count = |s: Severity| a.findings.iter().filter(|f| f.severity == s).count();
    let v = a.verdict.as_str().to_uppercase();
    let v = match a.verdict {
        results::host::Verdict::Ok => style.green(&v),
        results::host::Verdict::Warn => style.yellow(&v),
        results::host::Verdict::AtRisk => style.red(&v),
    };
    o.push_str(&format!(
        "\n{} {v} ({} critical, {} warn, {} info)\n",
        style.bold("Verdict:"),
        count(Severity::Critical),
        count(Severity::Warn),
        count(Severity::Info)
    ));
}

/// An instance in namespaces of its own: where its files were read, its PID there, its cgroup, and how
/// `--pg` reaches its socket from here.
fn container_line(
    c: &results::host::postgres::Container,
    inst: &results::host::postgres::PgInstance,
) -> String {
    let mut parts = Vec::new();
    match &c.root {
        Some(r) => parts.push(format!("own mount namespace: its paths read under {r}")),
        None => parts.push("this host's mount namespace".to_string()),
    }
    if let Some(p) = c.pid_in_namespace {
        parts.push(format!("PID {p} in its own PID namespace"));
    }
    if let Some(g) = &c.cgroup {
        parts.push(format!("cgroup {g}"));
    }
    if let (Some(d), Some(p)) = (&c.socket_dir_from_host, inst.port.get()) {
        parts.push(format!("--pg 'host={d} port={p}' connects from here"));
    }
    parts.join("; ")
}
