//! Pure parsers of `/proc`, `/sys`, kernel-config and PostgreSQL text. None of them touches a file.
//!
//! Formats: proc(5), proc_pid_smaps(5), `Documentation/admin-guide/mm/transhuge.rst` (bracketed choices),
//! `Documentation/admin-guide/cputopology.rst` (CPU lists), PostgreSQL's `postmaster.pid` layout
//! (`src/include/utils/pidfile.h`) and configuration-file syntax (`guc-file.l`).

use results::host::bytes::{pg_memory, size, Bytes, ParseError};

fn err(msg: impl Into<String>) -> ParseError {
    ParseError(msg.into())
}
use std::collections::BTreeMap;

/// Parses `Key:   123 kB` lines (meminfo, status, smaps_rollup) into a map of key -> value in kB (or the bare
/// number for unitless keys such as `HugePages_Total`). Lines that are not of that shape are skipped.
pub fn kv_kib(text: &str) -> BTreeMap<String, u64> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let Some(num) = words.next().and_then(|w| w.parse::<u64>().ok()) else {
            continue;
        };
        map.insert(key.trim().to_string(), num);
    }
    map
}

/// Parses `Key:\tvalue` lines into a map of strings (e.g. `/proc/PID/status` for `PPid` and `Name`).
pub fn kv_text(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// One mapping of `/proc/PID/smaps`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmapsMapping {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// Permissions such as `rw-s` (`s` = shared).
    pub perms: String,
    /// Offset into the mapped file (the third column): what turns an address into a file offset.
    pub offset: u64,
    /// The mapped file's inode (the fifth column; 0 for anonymous memory): what tells whether the file
    /// now at `path` is the one mapped.
    pub inode: u64,
    /// Path or pseudo-path (`/dev/zero (deleted)`, `/anon_hugepage (deleted)`, `/SYSV00000000 (deleted)`).
    pub path: String,
    /// The `Key: N kB` fields of the mapping.
    pub fields: BTreeMap<String, u64>,
}

impl SmapsMapping {
    /// A field in kB, 0 when absent.
    pub fn kib(&self, key: &str) -> u64 {
        self.fields.get(key).copied().unwrap_or(0)
    }
    /// True for a MAP_SHARED mapping.
    pub fn is_shared(&self) -> bool {
        self.perms.ends_with('s')
    }
}

/// Parses `/proc/PID/smaps` (or `/proc/PID/maps`, the same headers without the fields) into its mappings.
pub fn smaps(text: &str) -> Vec<SmapsMapping> {
    let mut out: Vec<SmapsMapping> = Vec::new();
    for line in text.lines() {
        if let Some(m) = smaps_header(line) {
            out.push(m);
        } else if let Some(cur) = out.last_mut() {
            if let Some((key, rest)) = line.split_once(':') {
                if let Some(n) = rest
                    .split_whitespace()
                    .next()
                    .and_then(|w| w.parse::<u64>().ok())
                {
                    cur.fields.insert(key.trim().to_string(), n);
                }
            }
        }
    }
    out
}

fn smaps_header(line: &str) -> Option<SmapsMapping> {
    let mut parts = line.splitn(6, ' ');
    let range = parts.next()?;
    let (a, b) = range.split_once('-')?;
    let start = u64::from_str_radix(a, 16).ok()?;
    let end = u64::from_str_radix(b, 16).ok()?;
    let perms = parts.next()?.to_string();
    if perms.len() != 4 {
        return None;
    }
    let offset = u64::from_str_radix(parts.next()?, 16).ok()?;
    let _dev = parts.next()?;
    let inode = parts.next()?.parse().ok()?;
    let path = parts.next().unwrap_or("").trim().to_string();
    Some(SmapsMapping {
        start,
        end,
        perms,
        offset,
        inode,
        path,
        fields: BTreeMap::new(),
    })
}

/// The selected value of a sysfs choice file such as `always [madvise] never`.
pub fn bracketed(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    Some(text[start + 1..end].to_string())
}

/// The options offered by a sysfs choice file, without brackets.
pub fn choices(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.trim_matches(|c| c == '[' || c == ']' || c == '(' || c == ')')
                .to_string()
        })
        .collect()
}

/// Counts the CPUs in a list such as `0-3,8,10-11`.
pub fn cpu_list_count(text: &str) -> Result<u32, ParseError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(err("empty CPU list"));
    }
    let mut n = 0u32;
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: u32 = a
                    .parse()
                    .map_err(|_| err(format!("bad CPU range {part:?}")))?;
                let b: u32 = b
                    .parse()
                    .map_err(|_| err(format!("bad CPU range {part:?}")))?;
                if b < a {
                    return Err(err(format!("bad CPU range {part:?}")));
                }
                n += b - a + 1;
            }
            None => {
                part.parse::<u32>()
                    .map_err(|_| err(format!("bad CPU number {part:?}")))?;
                n += 1;
            }
        }
    }
    Ok(n)
}

/// Parses a kernel `.config`: `CONFIG_X=value` lines and `# CONFIG_X is not set` (recorded as `n`).
pub fn kernel_config(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some(name) = rest.strip_suffix(" is not set") {
                if name.starts_with("CONFIG_") {
                    map.insert(name.to_string(), "n".to_string());
                }
            }
        } else if line.starts_with("CONFIG_") {
            if let Some((k, v)) = line.split_once('=') {
                map.insert(k.to_string(), v.trim_matches('"').to_string());
            }
        }
    }
    map
}

/// The value of `name=` on a kernel command line (the last one wins, as in the kernel).
pub fn cmdline_param(cmdline: &str, name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    let mut found = None;
    for word in cmdline.split_whitespace() {
        if word == "--" {
            break; // what follows goes to init, not the kernel
        }
        if let Some(v) = word.strip_prefix(&prefix) {
            found = Some(v.to_string());
        }
    }
    found
}

/// The kernel log of the latest boot in `log`: what follows the last `Linux version ` banner (the first line
/// the kernel prints at each boot), so that a log file holding several boots (`/var/log/kern.log`) speaks for
/// the running one; all of it when there is no banner (a ring buffer that wrapped past it).
pub(crate) fn latest_boot(log: &str) -> &str {
    match log.rfind("Linux version ") {
        Some(i) => &log[i..],
        None => log,
    }
}

/// The mode of the latest boot's last `Dynamic Preempt: <mode>` line (logged at boot and at each debugfs switch),
/// from `dmesg`, raw `/dev/kmsg` records, syslog or a journal export (`MESSAGE=` lines). A line saying that the
/// command line's mode was refused (`Dynamic Preempt: unsupported mode: none`) names no mode.
pub fn boot_log_preempt(log: &str) -> Option<String> {
    latest_boot(log)
        .lines()
        .filter_map(|l| {
            l.split_once("Dynamic Preempt: ")
                .map(|(_, m)| m.trim().to_string())
        })
        .rfind(|m| !m.starts_with("unsupported mode"))
}

/// The mode the kernel refused at the latest boot (`Dynamic Preempt: unsupported mode: none`, printed by
/// kernel/sched/core.c setup_preempt_mode when `preempt=` names a mode the kernel does not offer).
pub fn boot_log_refused(log: &str) -> Option<String> {
    latest_boot(log)
        .lines()
        .filter_map(|l| {
            l.split_once("Dynamic Preempt: unsupported mode:")
                .map(|(_, m)| m.trim().to_string())
        })
        .next_back()
}

/// Why a `/sys/kernel/debug/sched/preempt` text names no active mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DebugfsPreemptError {
    /// Nothing but white space (a kernel that prints no mode: a linux-next series of autumn 2026 without its
    /// fix).
    #[error("empty: the kernel printed no mode")]
    Empty,
    /// No mode in parentheses.
    #[error("no active mode in parentheses in {0:?}")]
    NoActive(String),
    /// More than one mode in parentheses: which one runs is not said.
    #[error("ambiguous: more than one mode in parentheses in {0:?}")]
    Ambiguous(String),
}

/// The active mode and the offered modes of `/sys/kernel/debug/sched/preempt`, e.g. `none voluntary (full)
/// lazy` (kernel/sched/debug.c sched_dynamic_show: the offered modes, the active one in parentheses).
pub fn debugfs_preempt(text: &str) -> Result<(String, Vec<String>), DebugfsPreemptError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(DebugfsPreemptError::Empty);
    }
    let active: Vec<&str> = t.split_whitespace().filter_map(active_mode).collect();
    match active.as_slice() {
        [] => Err(DebugfsPreemptError::NoActive(t.to_string())),
        [one] => Ok((one.to_string(), choices(t))),
        _ => Err(DebugfsPreemptError::Ambiguous(t.to_string())),
    }
}

/// The mode a word of the debugfs file marks as active: `(name)`, the name non-empty and without
/// parentheses of its own.
pub fn active_mode(word: &str) -> Option<&str> {
    word.strip_prefix('(')
        .and_then(|w| w.strip_suffix(')'))
        .filter(|m| !m.is_empty() && !m.contains(['(', ')']))
}

/// A kernel release's major and minor numbers: `6.18.44-fc` -> (6, 18).
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// A duration that does not parse or is out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not a number with an optional unit.
    #[error("{0:?} is not a duration (expected e.g. 3s, 500ms, 2m, 1h)")]
    NotADuration(String),
    /// Negative, or longer than 24 h.
    #[error("{0:?} is out of range (0 to 24 h)")]
    OutOfRange(String),
}

/// A duration's text split into its number and its unit's length in seconds: `500ms` -> ("500",
/// Some(0.001)), `1.5h` -> ("1.5", Some(3600.0)), `2` -> ("2", None). The units: `us`, `ms`, `s`, `m` or
/// `min`, `h`, `d`, `w`. Err(unit) for a unit it does not know. The one reader of durations and ages:
/// [`duration`] and `fleet::parse_age` differ only in what they accept of it.
pub fn duration_parts(text: &str) -> Result<(&str, Option<f64>), &str> {
    let t = text.trim();
    let num = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &t[num.len()..];
    let secs = match unit {
        "" => return Ok((num.trim(), None)),
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        "w" => 7.0 * 86_400.0,
        _ => return Err(unit),
    };
    Ok((num.trim(), Some(secs)))
}

/// Parses a human duration: `3s`, `500ms`, `200us`, `2m`, `1.5` (seconds), 0 to 24 h.
pub fn duration(text: &str) -> Result<std::time::Duration, DurationError> {
    let (num, unit_s) =
        duration_parts(text).map_err(|_| DurationError::NotADuration(text.into()))?;
    let mult = unit_s.unwrap_or(1.0);
    let v: f64 = num
        .parse()
        .map_err(|_| DurationError::NotADuration(text.into()))?;
    if !v.is_finite() || v < 0.0 || v * mult > 86_400.0 {
        return Err(DurationError::OutOfRange(text.into()));
    }
    Ok(std::time::Duration::from_secs_f64(v * mult))
}

/// The fields of PostgreSQL's `postmaster.pid` (pidfile.h: pid, data dir, start time, port, socket dir,
/// listen address, shmem key, status).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PostmasterPid {
    /// Line 1: the postmaster's PID.
    pub pid: Option<u32>,
    /// Line 2: the data directory.
    pub data_dir: Option<String>,
    /// Line 4: the port.
    pub port: Option<u16>,
    /// Line 5: the first unix-socket directory.
    pub socket_dir: Option<String>,
    /// Line 8: the status (`ready`, `starting`, `stopping`).
    pub status: Option<String>,
}

/// Parses `postmaster.pid`.
pub fn postmaster_pid(text: &str) -> PostmasterPid {
    let lines: Vec<&str> = text.lines().collect();
    let get = |i: usize| lines.get(i).map(|s| s.trim()).filter(|s| !s.is_empty());
    PostmasterPid {
        pid: get(0).and_then(|s| s.parse().ok()),
        data_dir: get(1).map(str::to_string),
        port: get(3).and_then(|s| s.parse().ok()),
        socket_dir: get(4).map(str::to_string),
        status: get(7).map(str::to_string),
    }
}

/// Parses PostgreSQL configuration-file text (`name = value # comment`) into lower-case names and
/// unquoted values; later lines win. `include` directives are returned under the key `include`.
pub fn pg_conf(text: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for raw in text.lines() {
        let line = strip_conf_comment(raw).trim().to_string();
        if line.is_empty() {
            continue;
        }
        let (name, value) = match line.split_once('=') {
            Some((n, v)) => (n.trim(), v.trim()),
            None => match line.split_once(char::is_whitespace) {
                Some((n, v)) => (n.trim(), v.trim()),
                None => continue,
            },
        };
        let value = value
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .unwrap_or(value)
            .replace("''", "'");
        map.insert(name.to_ascii_lowercase(), value);
    }
    map
}

fn strip_conf_comment(line: &str) -> &str {
    let mut in_quote = false;
    for (i, c) in line.char_indices() {
        match c {
            '\'' => in_quote = !in_quote,
            '#' if !in_quote => return &line[..i],
            _ => {}
        }
    }
    line
}

/// The arguments of a NUL-separated `/proc/PID/cmdline`. A process that rewrote its title (PostgreSQL
/// backends) shows one argument with spaces.
pub fn cmdline_args(raw: &[u8]) -> Vec<String> {
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// `-D dir`, `-p port` and `-c name=value` options of a postmaster command line.
pub fn postmaster_args(args: &[String]) -> (Option<String>, Option<u16>, BTreeMap<String, String>) {
    let mut data_dir = None;
    let mut port = None;
    let mut settings = BTreeMap::new();
    let mut i = 1;
    while i < args.len() {
        let a = args[i].as_str();
        let next = args.get(i + 1).cloned();
        // A flag is one ASCII letter after '-': an argument whose second character is wider is no flag.
        let (flag, inline) =
            if a.len() > 2 && a.starts_with('-') && !a.starts_with("--") && a.is_char_boundary(2) {
                (&a[..2], Some(a[2..].to_string()))
            } else {
                (a, None)
            };
        let mut take = || {
            if inline.is_some() {
                inline.clone()
            } else {
                i += 1;
                next.clone()
            }
        };
        match flag {
            "-D" => data_dir = take(),
            "-p" => port = take().and_then(|p| p.parse().ok()),
            "-c" => {
                if let Some(kv) = take() {
                    if let Some((k, v)) = kv.split_once('=') {
                        settings.insert(
                            k.trim().replace('-', "_").to_ascii_lowercase(),
                            v.trim().to_string(),
                        );
                    }
                }
            }
            _ if a.starts_with("--") => {
                if let Some((k, v)) = a[2..].split_once('=') {
                    settings.insert(k.replace('-', "_").to_ascii_lowercase(), v.to_string());
                }
            }
            _ => {}
        }
        i += 1;
    }
    (data_dir, port, settings)
}

/// The fields of `/proc/PID/stat` that `diagnose` reads (proc_pid_stat(5); clock ticks are USER_HZ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PidStat {
    /// Field 3: R, S, D, Z, ...
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Field 5: process group.
    pub pgrp: u32,
    /// Field 10: minor faults.
    pub minflt: u64,
    /// Field 11: minor faults of waited-for (reaped) children.
    pub cminflt: u64,
    /// Field 14: user time, ticks.
    pub utime: u64,
    /// Field 15: system time, ticks.
    pub stime: u64,
    /// Field 16: user time of reaped children, ticks.
    pub cutime: u64,
    /// Field 17: system time of reaped children, ticks.
    pub cstime: u64,
}

impl PidStat {
    /// Parses `/proc/PID/stat`; None when it is cut short. The command name (field 2) may hold spaces and
    /// parentheses, so the fields are counted after its last `)`.
    pub fn parse(text: &str) -> Option<Self> {
        let rest = &text[text.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // f[0] is field 3.
        let n = |i: usize| -> Option<u64> { f.get(i - 3)?.parse().ok() };
        Some(PidStat {
            state: f.first()?.chars().next()?,
            ppid: n(4)? as u32,
            pgrp: n(5)? as u32,
            minflt: n(10)?,
            cminflt: n(11)?,
            utime: n(14)?,
            stime: n(15)?,
            cutime: n(16)?,
            cstime: n(17)?,
        })
    }
}

/// `/proc/PID/schedstat`: time on the CPU and time runnable but waiting for one (run-queue wait), ns, and
/// the number of times it ran (Documentation/scheduler/sched-stats.rst). Needs CONFIG_SCHED_INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedStat {
    /// Time spent on the CPU, ns.
    pub run_ns: u64,
    /// Time spent waiting on a run queue, ns.
    pub wait_ns: u64,
    /// Timeslices run on this CPU.
    pub slices: u64,
}

impl SchedStat {
    /// Parses the three numbers.
    pub fn parse(text: &str) -> Option<Self> {
        let mut w = text.split_whitespace().map(|x| x.parse::<u64>().ok());
        Some(SchedStat {
            run_ns: w.next()??,
            wait_ns: w.next()??,
            slices: w.next()??,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_stat_and_schedstat() {
        let t = "4242 (postgres: x (y)) S 4200 4200 4200 0 -1 4194560 1234 5678 0 0 11 22 33 44 20 0 1 0 99 0 0\n";
        let s = PidStat::parse(t).unwrap();
        assert_eq!(
            (s.state, s.ppid, s.pgrp, s.minflt, s.cminflt),
            ('S', 4200, 4200, 1234, 5678)
        );
        assert_eq!((s.utime, s.stime, s.cutime, s.cstime), (11, 22, 33, 44));
        assert!(PidStat::parse("1 (x) S 0 0").is_none());
        let q = SchedStat::parse("123 456 7\n").unwrap();
        assert_eq!((q.run_ns, q.wait_ns, q.slices), (123, 456, 7));
        assert!(SchedStat::parse("1 2").is_none());
    }

    #[test]
    fn postmaster_args_multibyte_after_dash_is_no_flag() {
        // Found by fuzzing (fuzz/corpus/cmdline/crash-postmaster-args-multibyte): slicing "-\u{fffd}..." at
        // byte 2 panicked.
        let args: Vec<String> = [
            "postgres",
            "-\u{fffd}ared_buffers=1GB",
            "-D",
            "/d",
            "-\u{e9}",
            "-p5433",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (dir, port, settings) = postmaster_args(&args);
        assert_eq!(dir.as_deref(), Some("/d"));
        assert_eq!(port, Some(5433));
        assert!(settings.is_empty());
    }

    #[test]
    fn kv_kib_reads_meminfo_and_unitless() {
        let m = kv_kib("MemTotal:       24684084 kB\nHugePages_Total:       0\nHugepagesize:       2048 kB\nbogus\n");
        assert_eq!(m["MemTotal"], 24684084);
        assert_eq!(m["HugePages_Total"], 0);
        assert_eq!(m["Hugepagesize"], 2048);
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn smaps_finds_mappings_and_fields() {
        let text = "7f0000000000-7f0010000000 rw-s 00000000 00:01 1234  /anon_hugepage (deleted)\nSize:             262144 kB\nKernelPageSize:     2048 kB\nShared_Hugetlb:    10240 kB\nVmFlags: rd wr sh mr mw me ms de ht sd\n55d0-55e0 r--p 00000000 fd:00 42 /usr/lib/postgresql/15/bin/postgres\nSize: 4 kB\nKernelPageSize: 4 kB\n";
        let maps = smaps(text);
        assert_eq!(maps.len(), 2);
        assert_eq!(maps[0].path, "/anon_hugepage (deleted)");
        assert!(maps[0].is_shared());
        assert_eq!(maps[0].kib("KernelPageSize"), 2048);
        assert_eq!(maps[0].kib("Shared_Hugetlb"), 10240);
        assert_eq!(maps[1].kib("Size"), 4);
        assert!(!maps[1].is_shared());
    }

    #[test]
    fn choices_and_bracketed() {
        assert_eq!(
            bracketed("always [madvise] never").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            bracketed("always within_size advise [never] deny force").as_deref(),
            Some("never")
        );
        assert_eq!(bracketed("nothing"), None);
        assert_eq!(
            choices("always [madvise] never"),
            vec!["always", "madvise", "never"]
        );
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list_count("0-1\n").unwrap(), 2);
        assert_eq!(cpu_list_count("0-3,8,10-11").unwrap(), 7);
        assert!(cpu_list_count("").is_err());
        assert!(cpu_list_count("3-1").is_err());
        assert!(cpu_list_count("x").is_err());
    }

    #[test]
    fn kernel_config_lines() {
        let c = kernel_config(
            "CONFIG_HZ=250\n# CONFIG_PREEMPT is not set\nCONFIG_LOCALVERSION=\"-fc\"\n# comment\n",
        );
        assert_eq!(c["CONFIG_HZ"], "250");
        assert_eq!(c["CONFIG_PREEMPT"], "n");
        assert_eq!(c["CONFIG_LOCALVERSION"], "-fc");
    }

    #[test]
    fn cmdline_params_stop_at_double_dash() {
        let c = "console=ttyS0 preempt=full quiet -- preempt=none";
        assert_eq!(cmdline_param(c, "preempt").as_deref(), Some("full"));
        assert_eq!(cmdline_param("quiet", "preempt"), None);
        assert_eq!(
            cmdline_param("preempt=none preempt=lazy", "preempt").as_deref(),
            Some("lazy")
        );
    }

    #[test]
    fn boot_log_in_both_formats() {
        assert_eq!(
            boot_log_preempt("6,88,243510,-;Dynamic Preempt: none\n").as_deref(),
            Some("none")
        );
        assert_eq!(
            boot_log_preempt("[    0.2] Dynamic Preempt: lazy\n").as_deref(),
            Some("lazy")
        );
        assert_eq!(boot_log_preempt("nothing here"), None);
    }

    /// A 7.x kernel booted with `preempt=none` refuses it and runs its default (kernel/sched/core.c
    /// setup_preempt_mode, then preempt_dynamic_init); a log of several boots speaks for the last.
    #[test]
    fn boot_log_refused_mode_and_the_latest_boot() {
        let log = "[    0.0] Linux version 6.18.15+deb13-amd64\n[    0.1] Dynamic Preempt: none\n\
                   [    0.0] Linux version 7.2.13+deb14-amd64\n\
                   [    0.0] Dynamic Preempt: unsupported mode: none\n\
                   [    0.2] Dynamic Preempt: lazy\n";
        assert_eq!(boot_log_preempt(log).as_deref(), Some("lazy"));
        assert_eq!(boot_log_refused(log).as_deref(), Some("none"));
        let older = &log[..log.find("[    0.0] Linux version 7").unwrap()];
        assert_eq!(boot_log_refused(older), None);
        assert_eq!(boot_log_preempt(older).as_deref(), Some("none"));
        // A journal export (`journalctl -k -o export`).
        let export = "__CURSOR=s=1\nMESSAGE=Linux version 7.2.13\n\n__CURSOR=s=2\nMESSAGE=Dynamic Preempt: lazy\n";
        assert_eq!(boot_log_preempt(export).as_deref(), Some("lazy"));
    }

    #[test]
    fn debugfs_line() {
        let (a, o) = debugfs_preempt("none voluntary (full) lazy\n").unwrap();
        assert_eq!(a, "full");
        assert_eq!(o, vec!["none", "voluntary", "full", "lazy"]);
        assert_eq!(
            debugfs_preempt("full lazy"),
            Err(DebugfsPreemptError::NoActive("full lazy".into()))
        );
        assert_eq!(debugfs_preempt("full (lazy) \n").unwrap().0, "lazy");
    }

    /// Regression (issue 29): an empty file (a linux-next series) and two modes in parentheses were taken as
    /// no line and as the first mode; both name no mode.
    #[test]
    fn debugfs_empty_or_ambiguous_names_no_mode() {
        assert_eq!(debugfs_preempt(""), Err(DebugfsPreemptError::Empty));
        assert_eq!(debugfs_preempt(" \n"), Err(DebugfsPreemptError::Empty));
        assert!(matches!(
            debugfs_preempt("(full) (lazy)"),
            Err(DebugfsPreemptError::Ambiguous(_))
        ));
        assert!(matches!(
            debugfs_preempt("()"),
            Err(DebugfsPreemptError::NoActive(_))
        ));
        // Found by fuzzing (fuzz/corpus/debugfs_preempt/crash-empty-mode-in-parentheses): `(()` was taken
        // as an active mode with an empty name.
        assert!(matches!(
            debugfs_preempt("(()"),
            Err(DebugfsPreemptError::NoActive(_))
        ));
        assert_eq!(active_mode("(lazy)"), Some("lazy"));
    }

    /// Found by fuzzing (fuzz/corpus/hugepages_sysfs/crash-pinned-kib-overflow, through the pool target):
    /// a page size of u64::MAX kB overflowed when shown in bytes.
    #[test]
    fn bytes_from_an_absurd_kib_count_saturate_regression() {
        assert_eq!(Bytes::from_kib(u64::MAX), Bytes(u64::MAX));
        assert_eq!(Bytes::from_kib(3), Bytes(3072));
    }

    #[test]
    fn versions() {
        assert_eq!(kernel_version("6.18.44-fc-v669"), Some((6, 18)));
        assert_eq!(kernel_version("7.0.0-rc3"), Some((7, 0)));
        assert_eq!(kernel_version("7.0"), Some((7, 0)));
        assert_eq!(kernel_version("garbage"), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(size("120GB").unwrap(), Bytes(120 << 30));
        assert_eq!(size("2MB").unwrap(), Bytes(2 << 20));
        assert_eq!(size("1G").unwrap(), Bytes(1 << 30));
        assert_eq!(size("512kB").unwrap(), Bytes(512 << 10));
        assert_eq!(size("4096").unwrap(), Bytes(4096));
        assert_eq!(size("1.5GiB").unwrap(), Bytes(3 << 29));
        assert!(size("GB").is_err());
        assert!(size("12XB").is_err());
        assert!(size("").is_err());
        assert!(size("-5GB").is_err());
        assert!(size("1e400GB").is_err());
        use std::time::Duration;
        assert_eq!(duration("3s").unwrap(), Duration::from_secs(3));
        assert_eq!(duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(duration("200us").unwrap(), Duration::from_micros(200));
        assert_eq!(duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(
            duration("soon").unwrap_err().to_string(),
            "\"soon\" is not a duration (expected e.g. 3s, 500ms, 2m, 1h)"
        );
        assert_eq!(
            duration("-1s"),
            Err(DurationError::OutOfRange("-1s".into()))
        );
        assert!(duration("25h").is_err() && duration("1441m").is_err());
        assert_eq!(duration("1d").unwrap(), Duration::from_secs(86_400));
        assert_eq!(duration_parts("36 h"), Ok(("36", Some(3600.0))));
    }

    #[test]
    fn pg_memory_units() {
        assert_eq!(pg_memory("16384", Some("8kB")).unwrap(), Bytes(128 << 20));
        assert_eq!(pg_memory("275", Some("MB")).unwrap(), Bytes(275 << 20));
        assert_eq!(pg_memory("2048", Some("kB")).unwrap(), Bytes(2 << 20));
        assert_eq!(pg_memory("0", None).unwrap(), Bytes(0));
    }

    #[test]
    fn bytes_display() {
        assert_eq!(Bytes(512).to_string(), "512 B");
        assert_eq!(Bytes(2 << 20).to_string(), "2.00 MiB");
        assert_eq!(Bytes(120 << 30).to_string(), "120 GiB");
        assert_eq!(Bytes(25 << 29).to_string(), "12.5 GiB");
    }

    #[test]
    fn postmaster_pid_file() {
        let p = postmaster_pid("4357\n/var/lib/postgresql/15/main\n1700000000\n5432\n/var/run/postgresql\nlocalhost\n  5432001         0\nready   \n");
        assert_eq!(p.pid, Some(4357));
        assert_eq!(p.data_dir.as_deref(), Some("/var/lib/postgresql/15/main"));
        assert_eq!(p.port, Some(5432));
        assert_eq!(p.socket_dir.as_deref(), Some("/var/run/postgresql"));
        assert_eq!(p.status.as_deref(), Some("ready"));
        assert_eq!(postmaster_pid(""), PostmasterPid::default());
    }

    #[test]
    fn pg_conf_syntax() {
        let c = pg_conf("shared_buffers = 128MB  # min 128kB\nhuge_pages='on'\n#max_connections = 50\nMax_Connections 200\nlisten_addresses = 'a#b'\n");
        assert_eq!(c["shared_buffers"], "128MB");
        assert_eq!(c["huge_pages"], "on");
        assert_eq!(c["max_connections"], "200");
        assert_eq!(c["listen_addresses"], "a#b");
    }

    #[test]
    fn postmaster_command_lines() {
        let args: Vec<String> = [
            "/usr/lib/postgresql/15/bin/postgres",
            "-D",
            "/var/lib/postgresql/15/main",
            "-c",
            "config_file=/etc/postgresql/15/main/postgresql.conf",
            "-p5433",
            "--huge-pages=on",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (d, p, s) = postmaster_args(&args);
        assert_eq!(d.as_deref(), Some("/var/lib/postgresql/15/main"));
        assert_eq!(p, Some(5433));
        assert_eq!(s["config_file"], "/etc/postgresql/15/main/postgresql.conf");
        assert_eq!(s["huge_pages"], "on");
        assert_eq!(
            cmdline_args(b"postgres\0-D\0/x\0"),
            vec!["postgres", "-D", "/x"]
        );
    }
}
