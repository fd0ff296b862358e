//! Scoping the perf events to the instances' cgroup2 directories instead of the whole machine.
//!
//! A system-wide event (pid = -1, cpu = N) is active whatever runs on the CPU, so every task's context
//! switches and page faults pay for it: the tracepoint's perf handler runs the filter and walks the call
//! chain, the software-event handler looks the event up and counts. A cgroup event (pid = an fd of the
//! cgroup's directory, cpu = N, `PERF_FLAG_PID_CGROUP`; perf_event_open(2)) is scheduled in only while a
//! task of that cgroup (or of a descendant) runs on the CPU: `__perf_event_task_sched_out` calls
//! `perf_cgroup_switch(next)`, which returns at once when `next` is in the cgroup already active and
//! otherwise schedules the CPU's cgroup events out and in (kernel/events/core.c). While another cgroup's
//! task runs, the tracepoint's per-CPU list of perf events is empty and the generated `perf_trace_*`
//! handler returns before recording anything (include/trace/perf.h); the software events' hash list is
//! empty in the same way. That cost moves to the cross-cgroup switch itself, which is why
//! `scripts/diagnose-event-cost` measures both.
//!
//! Records still arrive as before: `sched_switch` fires before the switch, while the outgoing task's
//! cgroup is active, so a PostgreSQL process switched out is seen; fork and exit records go to every
//! side-band event whose filter matches (`perf_iterate_sb_cpu` applies `event_filter_match`, which for a
//! cgroup event is the cgroup of the task forking or exiting). A process of the instance that runs in
//! another cgroup is not seen at all; the window's /proc scans notice it and the result says so.
//!
//! The parsers take text; [`plan`] reads /proc.

use std::fs::File;
use std::path::{Path, PathBuf};

use results::diagnose::ScopeKind;

/// What `--scope` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The cheaper scope for a server whose processes switch to and from tasks of other cgroups (its
    /// clients, the idle task, kernel threads): system-wide. A cgroup event makes every switch into or out
    /// of the cgroup reschedule the events, which measured dearer than the system-wide tracepoint
    /// (`scripts/diagnose-event-cost`, docs/notes/2026-11-26-diagnose-overhead.md).
    Auto,
    /// The instances' cgroups, or an error when one runs in the root cgroup or no cgroup2 is mounted.
    Cgroup,
    /// System-wide.
    System,
}

impl Scope {
    /// Every scope, in the order `--help` lists them.
    pub const ALL: [Scope; 3] = [Scope::Auto, Scope::Cgroup, Scope::System];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Auto => "auto",
            Scope::Cgroup => "cgroup",
            Scope::System => "system",
        }
    }
}

impl std::str::FromStr for Scope {
    type Err = String;

    fn from_str(s: &str) -> Result<Scope, String> {
        Scope::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("{s}: one of auto, cgroup, system"))
    }
}

/// The cgroup2 mount point in /proc/mounts text (the first `cgroup2` line), with octal escapes undone.
pub fn cgroup2_mount(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (_, dir, fstype) = (f.next()?, f.next()?, f.next()?);
        (fstype == "cgroup2").then(|| PathBuf::from(unescape(dir)))
    })
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A process's cgroup2 path from /proc/PID/cgroup text: the `0::/...` line.
pub fn v2_path(proc_cgroup: &str) -> Option<String> {
    proc_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_end().to_string())
}

/// True when cgroup `path` is `dir` or below it (a cgroup event counts a descendant's tasks too).
pub fn within(path: &str, dir: &str) -> bool {
    dir == "/"
        || path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The paths none of the others contains, each once: a cgroup event counts the tasks of the directory's
/// descendants too, so events on both `/a` and `/a/b` would see every task of `/a/b` twice.
pub fn outermost(paths: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in &paths {
        let inside_another = paths.iter().any(|q| q != p && within(p, q));
        if !inside_another && !out.contains(p) {
            out.push(p.clone());
        }
    }
    out
}

/// A process's cgroup2 path, read from /proc.
pub fn of_pid(pid: u32) -> Option<String> {
    v2_path(&std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?)
}

/// The scope decided before the events are opened: the cgroup directories to open (path, directory),
/// or none for system-wide, and why.
pub struct Plan {
    /// System or cgroup.
    pub kind: ScopeKind,
    /// For a cgroup scope: each distinct cgroup (its path under the mount, its open directory).
    pub dirs: Vec<(String, File)>,
    /// Why this scope.
    pub why: String,
}

impl Plan {
    fn system(why: String) -> Plan {
        Plan {
            kind: ScopeKind::System,
            dirs: Vec::new(),
            why,
        }
    }
}

/// Decides the scope for the postmasters `pms`: `Err` for `Scope::Cgroup` when it cannot be had (an
/// instance in the root cgroup, no cgroup2 mount).
pub fn plan(asked: Scope, pms: &[u32]) -> Result<Plan, String> {
    match asked {
        Scope::System => return Ok(Plan::system("asked for with --scope system".into())),
        Scope::Auto => return Ok(Plan::system(
            "--scope auto: cgroup events cost more at every switch into or out of the cgroup than \
                 system-wide ones at every switch (docs/notes/2026-11-26-diagnose-overhead.md)"
                .into(),
        )),
        Scope::Cgroup => {}
    }
    Ok(Plan {
        kind: ScopeKind::Cgroup,
        dirs: cgroup_dirs(pms)?,
        why: "asked for with --scope cgroup".into(),
    })
}

fn cgroup_dirs(pms: &[u32]) -> Result<Vec<(String, File)>, String> {
    let mounts = std::fs::read_to_string("/proc/mounts")
        .map_err(|e| format!("reading /proc/mounts: {e}"))?;
    let mount = cgroup2_mount(&mounts).ok_or("no cgroup2 file system is mounted")?;
    let mut paths: Vec<String> = Vec::new();
    for &pm in pms {
        let path = of_pid(pm)
            .ok_or_else(|| format!("postmaster {pm}: /proc/{pm}/cgroup has no cgroup2 line"))?;
        if path == "/" {
            return Err(format!(
                "postmaster {pm} runs in the root cgroup (a cgroup event there would watch every task)"
            ));
        }
        paths.push(path);
    }
    let paths = outermost(paths);
    let mut out = Vec::new();
    for p in paths {
        let dir = mount.join(Path::new(p.trim_start_matches('/')));
        let f = File::open(&dir).map_err(|e| format!("opening {}: {e}", dir.display()))?;
        out.push((p, f));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outermost_drops_nested_and_repeated_paths() {
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            outermost(v(&["/a/b", "/a", "/c", "/a", "/ab"])),
            v(&["/a", "/c", "/ab"])
        );
        assert_eq!(outermost(v(&["/x/y"])), v(&["/x/y"]));
    }

    #[test]
    fn finds_the_cgroup2_mount() {
        let hybrid = "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n\
                      cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
        assert_eq!(
            cgroup2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            cgroup2_mount("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert_eq!(
            cgroup2_mount("cgroup2 /mnt/a\\040b cgroup2 rw 0 0\n"),
            Some(PathBuf::from("/mnt/a b"))
        );
        assert_eq!(
            cgroup2_mount("cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n"),
            None
        );
    }

    #[test]
    fn reads_the_v2_line() {
        let hybrid = "9:name=systemd:/\n4:memory:/process_api/74f2\n0::/system.slice/postgresql@16-main.service\n";
        assert_eq!(
            v2_path(hybrid).as_deref(),
            Some("/system.slice/postgresql@16-main.service")
        );
        assert_eq!(v2_path("0::/\n").as_deref(), Some("/"));
        assert_eq!(v2_path("4:memory:/x\n"), None);
    }

    #[test]
    fn descendants_are_within() {
        assert!(within("/a/b", "/a"));
        assert!(within("/a", "/a"));
        assert!(!within("/ab", "/a"));
        assert!(!within("/", "/a"));
        assert!(within("/x", "/"));
    }

    #[test]
    fn scopes_parse_by_name() {
        for s in Scope::ALL {
            assert_eq!(s.name().parse::<Scope>(), Ok(s));
        }
        assert!("cgroups".parse::<Scope>().is_err());
    }
}
