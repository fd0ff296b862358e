//! Running PostgreSQL instances, found from `/proc` without connecting.
//!
//! A postmaster is a `postgres` (or `postmaster`) process whose parent is not one; its children are the
//! backends and auxiliary processes. The data directory is its working directory (the postmaster
//! `chdir`s there) or `-D`; `postmaster.pid` gives the port and socket directory. The main shared segment
//! is the postmaster's largest MAP_SHARED mapping (`/anon_hugepage (deleted)` on hugetlb, `/dev/zero
//! (deleted)` or `/SYSV...` otherwise); its `KernelPageSize` says whether it is on huge pages.
//! Per-process page-table memory is `VmPTE` in `/proc/PID/status`; Pss comes from `smaps_rollup`.

use results::host::postgres::{
    Container, PgInstance, PgProcess, Role, Segment, SettingFact, THROWAWAY_CLUSTER_NAME,
};
use std::collections::BTreeMap;

use crate::host::Host;
use crate::parse;
use results::host::fact::Fact;
use results::host::pgquery::ServerInfo;

struct ProcInfo {
    name: String,
    ppid: u32,
    /// Its PID in the innermost PID namespace it is in (the last `NSpid`), when that is another.
    inner_pid: Option<u32>,
}

/// The name and parent of a live process; None for a zombie (`State: Z`: it exited and waits to be reaped,
/// with no memory and no server behind it) or an unreadable one.
fn proc_info(host: &Host, pid: u32) -> Option<ProcInfo> {
    let status = host.read(&format!("/proc/{pid}/status")).ok()?;
    let kv = parse::kv_text(&status);
    if kv.get("State").is_some_and(|s| s.starts_with('Z')) {
        return None;
    }
    let inner_pid = kv
        .get("NSpid")
        .and_then(|l| l.split_whitespace().last()?.parse::<u32>().ok())
        .filter(|p| *p != pid);
    Some(ProcInfo {
        name: kv.get("Name")?.clone(),
        ppid: kv.get("PPid")?.parse().ok()?,
        inner_pid,
    })
}

fn is_pg_name(name: &str) -> bool {
    name == "postgres" || name == "postmaster"
}

const AUX_TITLES: [&str; 16] = [
    "checkpointer",
    "background writer",
    "walwriter",
    "autovacuum launcher",
    "autovacuum worker",
    "logical replication",
    "stats collector",
    "archiver",
    "startup",
    "walreceiver",
    "walsender",
    "logger",
    "parallel worker",
    "io worker",
    "walsummarizer",
    "slotsync worker",
];

fn classify(title: &str) -> Role {
    match auxiliary_type(title) {
        Some(_) => Role::Auxiliary,
        None => Role::Backend,
    }
}

/// The auxiliary process type a postmaster child's title names (`checkpointer`, `autovacuum worker`,
/// ...), or None for a client backend.
pub fn auxiliary_type(title: &str) -> Option<&'static str> {
    // "postgres: [cluster: ]role ..." — strip "postgres: " and an optional cluster-name prefix.
    let rest = title.strip_prefix("postgres: ").unwrap_or(title);
    let candidates = [rest, rest.split_once(": ").map(|(_, r)| r).unwrap_or(rest)];
    candidates
        .iter()
        .find_map(|r| AUX_TITLES.iter().find(|a| r.starts_with(**a)).copied())
}

/// Picks the main shared segment: the largest MAP_SHARED mapping that is anonymous shared memory or
/// SysV, not a file and not a dynamic shared memory segment in /dev/shm.
pub fn main_segment(maps: &[parse::SmapsMapping]) -> Option<Segment> {
    main_mapping(maps).map(|m| Segment {
        mapping: m.path.clone(),
        size_kib: m.end.saturating_sub(m.start) / 1024,
        kernel_page_size_kib: m.kib("KernelPageSize").max(4),
        thp_pmd_mapped_kib: m.kib("ShmemPmdMapped"),
        hugetlb_kib: m
            .kib("Shared_Hugetlb")
            .saturating_add(m.kib("Private_Hugetlb")),
    })
}

/// The mapping [`main_segment`] describes, with its address range (`diagnose` classifies fault addresses
/// against it in every process of the instance).
pub fn main_mapping(maps: &[parse::SmapsMapping]) -> Option<&parse::SmapsMapping> {
    maps.iter()
        .filter(|m| m.is_shared())
        .filter(|m| {
            let p = m.path.as_str();
            p.starts_with("/anon_hugepage")
                || p.starts_with("/dev/zero")
                || p.starts_with("/SYSV")
                || p.starts_with("/memfd:")
        })
        // Saturating: a header whose end is below its start (not one the kernel writes) counts as empty.
        .max_by_key(|m| m.end.saturating_sub(m.start))
}

/// Finds every PostgreSQL instance running on `host`, matching `servers` (from `--pg`) by backend PID.
pub fn discover(host: &Host, servers: &[ServerInfo]) -> (Vec<PgInstance>, Vec<ServerInfo>) {
    discover_with(host, servers, Rollups::Read)
}

/// Whether [`discover`] reads each server process's `/proc/PID/smaps_rollup` (Pss, Rss, Shared_Hugetlb).
/// Reading it walks the process's page tables: on 4 KB pages that is the dearest part of an audit (a
/// backend that touched 1 GB of shared buffers has 262,144 entries to walk), and the kernel holds the
/// process's mmap lock while it walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollups {
    /// Read them (the audit's Pss figures).
    Read,
    /// Leave Pss, Rss and Shared_Hugetlb unknown; `VmPTE` (from `status`, no walk) is still read.
    Skip,
}

/// [`discover`], choosing whether the per-process rollups are read.
pub fn discover_with(
    host: &Host,
    servers: &[ServerInfo],
    rollups: Rollups,
) -> (Vec<PgInstance>, Vec<ServerInfo>) {
    let pids: Vec<u32> = host
        .list_dir("/proc")
        .unwrap_or_default()
        .iter()
        .filter_map(|n| n.parse().ok())
        .collect();
    let mut infos: BTreeMap<u32, ProcInfo> = BTreeMap::new();
    for pid in pids {
        if let Some(i) = proc_info(host, pid) {
            infos.insert(pid, i);
        }
    }
    let postmasters: Vec<u32> = infos
        .iter()
        .filter(|(_, i)| is_pg_name(&i.name))
        .filter(|(_, i)| infos.get(&i.ppid).is_none_or(|p| !is_pg_name(&p.name)))
        .map(|(pid, _)| *pid)
        .collect();
    let mut unmatched: Vec<ServerInfo> = servers.to_vec();
    let mut out = Vec::new();
    for pm in postmasters {
        let children: Vec<u32> = infos
            .iter()
            .filter(|(_, i)| i.ppid == pm)
            .map(|(p, _)| *p)
            .collect();
        // A server's backend PID is its own PID namespace's: a child's host PID, or its inner one when
        // the instance runs in a PID namespace of its own (a container), matched on the port too there.
        let inner = |c: &u32| infos.get(c).and_then(|i| i.inner_pid);
        let port_ok = |s: &ServerInfo| {
            let port = s
                .settings
                .get("port")
                .and_then(|p| p.setting.parse::<u16>().ok());
            port.is_none() || instance_port(host, pm) == port
        };
        let server_idx = unmatched.iter().position(|s| {
            children.contains(&s.backend_pid)
                || children
                    .iter()
                    .any(|c| inner(c) == Some(s.backend_pid) && port_ok(s))
        });
        let server = server_idx.map(|i| {
            let mut s = unmatched.remove(i);
            if !children.contains(&s.backend_pid) {
                s.backend_host_pid = children
                    .iter()
                    .copied()
                    .find(|c| inner(c) == Some(s.backend_pid));
            }
            s
        });
        let container = container(host, pm, infos.get(&pm).and_then(|i| i.inner_pid));
        out.push(read_instance(
            host, pm, &children, server, rollups, container,
        ));
    }
    (out, unmatched)
}

fn process(host: &Host, pid: u32, role: Role, skip_rollup: bool) -> PgProcess {
    let title = host
        .read_bytes(&format!("/proc/{pid}/cmdline"))
        .map(|b| parse::cmdline_args(&b).join(" "))
        .unwrap_or_default();
    let status = host
        .read(&format!("/proc/{pid}/status"))
        .map(|t| parse::kv_kib(&t))
        .unwrap_or_default();
    let rollup = if skip_rollup {
        BTreeMap::new()
    } else {
        host.read(&format!("/proc/{pid}/smaps_rollup"))
            .map(|t| parse::kv_kib(&t))
            .unwrap_or_default()
    };
    PgProcess {
        pid,
        role,
        title,
        vm_pte_kib: status.get("VmPTE").copied(),
        pss_kib: rollup.get("Pss").copied(),
        rss_kib: rollup.get("Rss").copied(),
        shared_hugetlb_kib: rollup.get("Shared_Hugetlb").copied(),
    }
}

/// The port a postmaster listens on, from its command line (`-p`), for matching a server in a
/// container before its files are read.
fn instance_port(host: &Host, pm: u32) -> Option<u16> {
    let args = host
        .read_bytes(&format!("/proc/{pm}/cmdline"))
        .map(|b| parse::cmdline_args(&b))
        .ok()?;
    let (_, port, _) = parse::postmaster_args(&args);
    // The postmaster's working directory is its data directory: /proc/PID/cwd reaches it from here
    // whatever namespace it runs in.
    port.or_else(|| {
        let text = host.read(&format!("/proc/{pm}/cwd/postmaster.pid")).ok()?;
        parse::postmaster_pid(&text).port
    })
}

/// `path` under `root` (empty: this host's own path).
fn in_root(host: &Host, root: &str, path: &str) -> String {
    if root.is_empty() {
        path.to_string()
    } else {
        host.in_root(root, path)
    }
}

/// How the postmaster is seen when it runs in a mount or PID namespace of its own (None: it shares this
/// process's): its mount namespace (`/proc/PID/ns/mnt`) against this process's, its inner PID.
fn container(host: &Host, pm: u32, inner_pid: Option<u32>) -> Option<Container> {
    let ns = |p: &str| host.read_link(p).ok();
    let own_mounts = match (ns("/proc/self/ns/mnt"), ns(&format!("/proc/{pm}/ns/mnt"))) {
        (Some(a), Some(b)) => a != b,
        _ => false,
    };
    if !own_mounts && inner_pid.is_none() {
        return None;
    }
    let cgroup = host.read(&format!("/proc/{pm}/cgroup")).ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("0::"))
            .map(str::to_string)
    });
    Some(Container {
        root: own_mounts.then(|| format!("/proc/{pm}/root")),
        pid_in_namespace: inner_pid,
        cgroup,
        socket_dir_from_host: None,
    })
}

fn read_instance(
    host: &Host,
    pm: u32,
    children: &[u32],
    server: Option<ServerInfo>,
    rollups: Rollups,
    container: Option<Container>,
) -> PgInstance {
    let skip_rollup = rollups == Rollups::Skip;
    // The instance's own paths, read under its root when it has a mount namespace of its own.
    let root = container
        .as_ref()
        .and_then(|c| c.root.clone())
        .unwrap_or_default();
    let at = |p: &str| in_root(host, &root, p);
    let args = host
        .read_bytes(&format!("/proc/{pm}/cmdline"))
        .map(|b| parse::cmdline_args(&b))
        .unwrap_or_default();
    let (arg_dir, arg_port, arg_settings) = parse::postmaster_args(&args);
    let exe = match host.read_link(&format!("/proc/{pm}/exe")) {
        Ok(p) => Fact::known(p.display().to_string(), format!("/proc/{pm}/exe")),
        Err(e) => match args.first() {
            Some(a) => Fact::known(a.clone(), format!("/proc/{pm}/cmdline")),
            None => Fact::unavailable(format!("/proc/{pm}/exe"), e.reason),
        },
    };
    let data_dir = match host.read_link(&format!("/proc/{pm}/cwd")) {
        Ok(p) => Fact::known(p.display().to_string(), format!("/proc/{pm}/cwd")),
        Err(e) => match &arg_dir {
            Some(d) => Fact::known(d.clone(), format!("/proc/{pm}/cmdline -D")),
            None => Fact::unavailable(format!("/proc/{pm}/cwd"), e.reason),
        },
    };
    // Where the data directory's files are read: itself, or for an instance in a mount namespace of its
    // own the postmaster's working directory through /proc/PID/cwd (the postmaster chdirs there), which
    // reaches the directory whatever /proc/PID/cwd's text says from here: a path of its namespace when
    // this host cannot reach the directory, this host's own when it can (a chroot under /var, say).
    let data_read: Option<String> = match (&data_dir.value, root.is_empty()) {
        (Some(d), true) => Some(d.clone()),
        (Some(_), false) if data_dir.source.ends_with("/cwd") => Some(format!("/proc/{pm}/cwd")),
        (Some(d), false) => Some(at(d)),
        (None, _) => None,
    };
    let pidfile = data_read
        .as_ref()
        .and_then(|d| host.read(&format!("{d}/postmaster.pid")).ok())
        .map(|t| parse::postmaster_pid(&t));
    let port = match (pidfile.as_ref().and_then(|p| p.port), arg_port) {
        (Some(p), _) => Fact::known(p, "postmaster.pid"),
        (None, Some(p)) => Fact::known(p, format!("/proc/{pm}/cmdline -p")),
        _ => Fact::unavailable("postmaster.pid", "unreadable or without a port line"),
    };
    let socket_dir = match pidfile.as_ref().and_then(|p| p.socket_dir.clone()) {
        Some(s) => Fact::known(s, "postmaster.pid"),
        None => Fact::unavailable("postmaster.pid", "unreadable or without a socket line"),
    };
    let mut container = container;
    if let (Some(c), Some(s)) = (container.as_mut(), socket_dir.get()) {
        if c.root.is_some() && !s.starts_with('@') {
            c.socket_dir_from_host = Some(at(s));
        }
    }
    let version = {
        let from_server = server
            .as_ref()
            .and_then(|s| s.settings.get("server_version"))
            .map(|s| s.setting.clone());
        match from_server {
            Some(v) => Fact::known(v, "--pg server_version"),
            None => match &data_read {
                Some(d) => host.fact(&format!("{d}/PG_VERSION")),
                None => Fact::unavailable("PG_VERSION", "data directory unknown"),
            },
        }
    };
    let (segment, on_huge_pages, postmaster_vm_peak_kib) = memory_facts(host, pm);
    let own_backend = server.as_ref().map(|s| s.host_pid());
    let (processes, backend_pids, page_tables_kib) =
        processes_of(host, pm, children, own_backend, skip_rollup);

    let settings = settings(
        host,
        &root,
        data_read.as_deref(),
        &arg_settings,
        server.as_ref(),
    );
    let mut inst = PgInstance {
        postmaster_pid: pm,
        exe,
        data_dir,
        version,
        port,
        socket_dir,
        segment,
        on_huge_pages,
        postmaster_vm_peak_kib,
        processes,
        backend_pids,
        page_tables_kib,
        page_tables_projected_kib: Fact::unavailable("", ""),
        page_tables_full_touch_kib: Fact::unavailable("", ""),
        settings,
        server,
        container,
        preemptlab_throwaway: arg_settings.get("cluster_name").map(String::as_str)
            == Some(THROWAWAY_CLUSTER_NAME),
    };
    project_page_tables(&mut inst);
    inst
}

/// The postmaster's shared segment from its smaps, whether huge pages back it, and its VmPeak.
fn memory_facts(host: &Host, pm: u32) -> (Fact<Segment>, Fact<bool>, Fact<u64>) {
    let smaps_path = format!("/proc/{pm}/smaps");
    let segment = match host.read(&smaps_path) {
        Ok(t) => match main_segment(&parse::smaps(&t)) {
            Some(s) => Fact::known(s, smaps_path.clone()),
            None => Fact::unavailable(
                smaps_path.clone(),
                "no shared anonymous or SysV mapping found",
            ),
        },
        Err(e) => Fact::unavailable(smaps_path.clone(), e.reason),
    };
    let on_huge_pages = match segment.get() {
        Some(s) => Fact::known(
            s.on_huge_pages(),
            format!("{smaps_path} KernelPageSize of {}", s.mapping),
        ),
        None => Fact::unavailable(smaps_path, segment.unavailable.clone().unwrap_or_default()),
    };
    let pm_status = host
        .read(&format!("/proc/{pm}/status"))
        .map(|t| parse::kv_kib(&t));
    let postmaster_vm_peak_kib = match &pm_status {
        Ok(m) => match m.get("VmPeak") {
            Some(v) => Fact::known(*v, format!("/proc/{pm}/status VmPeak")),
            None => Fact::unavailable(
                format!("/proc/{pm}/status"),
                "no VmPeak (kernel thread or zombie?)",
            ),
        },
        Err(e) => Fact::unavailable(format!("/proc/{pm}/status"), e.reason.clone()),
    };

    (segment, on_huge_pages, postmaster_vm_peak_kib)
}

/// The instance's processes, largest first (the audit's own connection `own_backend` left out: fresh page
/// tables, not the workload's), the backends' pids and the page tables of them all, KiB.
fn processes_of(
    host: &Host,
    pm: u32,
    children: &[u32],
    own_backend: Option<u32>,
    skip_rollup: bool,
) -> (Vec<PgProcess>, Vec<u32>, u64) {
    let mut processes = vec![process(host, pm, Role::Postmaster, skip_rollup)];
    for &c in children {
        if Some(c) == own_backend {
            continue; // the audit's own connection: fresh page tables, not the workload's
        }
        let mut p = process(host, c, Role::Backend, skip_rollup);
        p.role = classify(&p.title);
        processes.push(p);
    }
    processes.sort_by(|a, b| b.pss_kib.cmp(&a.pss_kib).then(a.pid.cmp(&b.pid)));
    let backend_pids: Vec<u32> = processes
        .iter()
        .filter(|p| p.role == Role::Backend)
        .map(|p| p.pid)
        .collect();
    let page_tables_kib: u64 = processes.iter().filter_map(|p| p.vm_pte_kib).sum();
    (processes, backend_pids, page_tables_kib)
}

/// Bytes of page-table entries per byte of mapped memory: one 8-byte entry per page.
fn pte_kib_for(size_kib: u64, page_kib: u64) -> u64 {
    (size_kib / page_kib.max(4)) * 8 / 1024
}

fn project_page_tables(inst: &mut PgInstance) {
    let mc = inst.max_connections();
    let mc_src = inst
        .settings
        .get("max_connections")
        .map(|f| f.source.clone())
        .unwrap_or_default();
    let backends: Vec<u64> = inst
        .processes
        .iter()
        .filter(|p| p.role == Role::Backend)
        .filter_map(|p| p.vm_pte_kib)
        .collect();
    let others: u64 = inst
        .processes
        .iter()
        .filter(|p| p.role != Role::Backend)
        .filter_map(|p| p.vm_pte_kib)
        .sum();
    inst.page_tables_projected_kib = match (mc, backends.is_empty()) {
        (Some(mc), false) => {
            let mean = backends.iter().sum::<u64>() as f64 / backends.len() as f64;
            Fact::known(
                others + (mean * mc as f64).round() as u64,
                format!(
                    "mean VmPTE of {} backends x max_connections ({mc_src})",
                    backends.len()
                ),
            )
        }
        (None, _) => Fact::unavailable("max_connections", "unknown"),
        (_, true) => Fact::unavailable("backend VmPTE", "no client backends running to measure"),
    };
    inst.page_tables_full_touch_kib = match (mc, inst.segment.get()) {
        (Some(mc), Some(seg)) => {
            let per_process = pte_kib_for(seg.size_kib, seg.kernel_page_size_kib);
            let aux = inst
                .processes
                .iter()
                .filter(|p| p.role != Role::Backend)
                .count() as u64;
            Fact::known(
                per_process * (mc + aux),
                format!(
                    "segment {} kB / {} kB pages x 8 B x (max_connections + {aux} others)",
                    seg.size_kib, seg.kernel_page_size_kib
                ),
            )
        }
        _ => Fact::unavailable("segment and max_connections", "one of them is unknown"),
    };
}

const WANTED: [&str; 6] = [
    "shared_buffers",
    "huge_pages",
    "huge_page_size",
    "max_connections",
    "shared_memory_type",
    "huge_pages_status",
];

fn defaults(name: &str) -> Option<&'static str> {
    Some(match name {
        "shared_buffers" => "128MB",
        "huge_pages" => "try",
        "huge_page_size" => "0",
        "max_connections" => "100",
        "shared_memory_type" => "mmap",
        _ => return None,
    })
}

/// The settings that matter, from each layer. `data_read` is where the data directory's files are read
/// (see `read_instance`); `root` the instance's root for absolute paths of its own (`config_file`).
fn settings(
    host: &Host,
    root: &str,
    data_read: Option<&str>,
    args: &BTreeMap<String, String>,
    server: Option<&ServerInfo>,
) -> BTreeMap<String, SettingFact> {
    // Precedence, lowest first: defaults, postgresql.conf, postgresql.auto.conf, command line, the server.
    let mut layers: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    let conf_path = match args.get("config_file") {
        Some(c) if c.starts_with('/') => Some(in_root(host, root, c)),
        Some(c) => data_read.map(|d| format!("{d}/{c}")),
        None => data_read.map(|d| format!("{d}/postgresql.conf")),
    };
    if let Some(p) = conf_path {
        if let Ok(t) = host.read(&p) {
            layers.push((p, parse::pg_conf(&t)));
        }
    }
    if let Some(d) = data_read {
        let p = format!("{d}/postgresql.auto.conf");
        if let Ok(t) = host.read(&p) {
            layers.push((p, parse::pg_conf(&t)));
        }
    }
    layers.push(("postmaster command line".to_string(), args.clone()));
    let mut out = BTreeMap::new();
    for name in WANTED {
        let mut fact = match defaults(name) {
            Some(d) => Fact::known(d.to_string(), "PostgreSQL default"),
            None => Fact::unavailable("--pg", "only the running server knows (pass --pg)"),
        };
        for (src, map) in &layers {
            if let Some(v) = map.get(name) {
                fact = Fact::known(v.clone(), src.clone());
            }
        }
        if let Some(s) = server.and_then(|s| s.settings.get(name)) {
            let v = match (name, &s.unit) {
                ("shared_buffers" | "huge_page_size", Some(u)) => {
                    results::host::bytes::pg_memory(&s.setting, Some(u))
                        .map(|b| format!("{}kB", b.kib()))
                        .unwrap_or_else(|_| s.setting.clone())
                }
                _ => s.setting.clone(),
            };
            fact = Fact::known(v, "--pg pg_settings");
        }
        out.insert(name.to_string(), fact);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn main_segment_end_below_start_and_huge_counts() {
        // Found by fuzzing (fuzz/corpus/smaps/crash-main-segment-end-below-start): `end - start` underflowed.
        let maps = parse::smaps(
            "ff000-1000 rw-s 00000000 00:01 7 /SYSV00000000 (deleted)\n\
             Shared_Hugetlb: 18446744073709551615 kB\nPrivate_Hugetlb: 1 kB\n\
             1000-3000 rw-s 00000000 00:01 8 /dev/zero (deleted)\n",
        );
        let seg = main_segment(&maps).unwrap();
        assert_eq!(seg.mapping, "/dev/zero (deleted)");
        assert_eq!(seg.size_kib, 8);
        let only_bad = main_segment(&maps[..1]).unwrap();
        assert_eq!((only_bad.size_kib, only_bad.hugetlb_kib), (0, u64::MAX));
    }

    /// Regression (issue 25): a zombie postmaster (exited, not yet reaped by its parent) was listed as an
    /// instance.
    #[test]
    fn a_zombie_postmaster_is_no_instance() {
        let root = tempfile::tempdir().unwrap();
        let put = |pid: u32, state: &str, ppid: u32| {
            let dir = root.path().join(format!("proc/{pid}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("status"),
                format!("Name:\tpostgres\nState:\t{state}\nPPid:\t{ppid}\n"),
            )
            .unwrap();
        };
        put(300, "Z (zombie)", 1);
        put(400, "S (sleeping)", 1);
        put(401, "S (sleeping)", 400);
        let (found, _) = discover(&Host::at(root.path()), &[]);
        let pids: Vec<u32> = found.iter().map(|i| i.postmaster_pid).collect();
        assert_eq!(pids, vec![400]);
    }

    #[test]
    fn classifies_titles() {
        assert_eq!(
            classify("postgres: 15/main: checkpointer "),
            Role::Auxiliary
        );
        assert_eq!(classify("postgres: checkpointer"), Role::Auxiliary);
        assert_eq!(classify("postgres: autovacuum launcher"), Role::Auxiliary);
        assert_eq!(
            classify("postgres: bench bench [local] idle"),
            Role::Backend
        );
        assert_eq!(
            classify("postgres: 15/main: postgres postgres 127.0.0.1(4242) SELECT"),
            Role::Backend
        );
    }

    #[test]
    fn picks_the_largest_shared_segment() {
        let text = "1000-2000 rw-s 00000000 00:01 1 /SYSV0052e2c1 (deleted)\nKernelPageSize: 4 kB\n\
7f0000000000-7f0010000000 rw-s 00000000 00:01 2 /dev/zero (deleted)\nKernelPageSize: 4 kB\nShmemPmdMapped: 0 kB\n\
7f1000000000-7f1000100000 rw-s 00000000 00:1a 3 /dev/shm/PostgreSQL.123\nKernelPageSize: 4 kB\n";
        let s = main_segment(&parse::smaps(text)).unwrap();
        assert_eq!(s.mapping, "/dev/zero (deleted)");
        assert_eq!(s.size_kib, 256 * 1024);
        assert!(!s.on_huge_pages());
        let huge = "7f0000000000-7f0010000000 rw-s 00000000 00:0f 2 /anon_hugepage (deleted)\nKernelPageSize: 2048 kB\nShared_Hugetlb: 4096 kB\n";
        assert!(main_segment(&parse::smaps(huge)).unwrap().on_huge_pages());
        assert!(main_segment(&[]).is_none());
    }

    #[test]
    fn pte_arithmetic() {
        // 1 GiB on 4 kB pages: 262144 entries x 8 B = 2 MiB (docs/references.md#page-table-cost: ~2 MB per GB).
        assert_eq!(pte_kib_for(1 << 20, 4), 2048);
        assert_eq!(pte_kib_for(1 << 20, 2048), 4);
    }
}
