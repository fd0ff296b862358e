//! The operating-system helpers that `lab`, `vm`, `hostfacts` and the binary share, each with one home:
//!
//! - [`output`]: result files checked before any work ([`output::check_writable`]), written atomically
//!   ([`output::write_atomic`]) or published for readers that look at any moment ([`output::publish`]);
//! - [`stop`]: the stop-signal flag (SIGINT, SIGTERM, SIGHUP, SIGQUIT set a flag that long runs poll, so
//!   every exit path unwinds through the host-state guards) and the exit code of a run a signal ended;
//! - [`child`]: child processes in their own process group, stopped on the stop flag or on drop;
//! - [`procstat`]: the machine's CPU time from /proc/stat (a pure parser and its reader);
//! - [`cpus`]: how many CPUs this process can use, and how many are online;
//! - [`input`]: input files read only when regular (a FIFO named `x.json` never hangs a reader);
//! - [`which`], [`tail`], [`explain_io_error`], [`is_root`]: a program on PATH, the last lines of a
//!   child's output for an error message, an I/O error in words an operator can act on;
//! - [`account`]: an OS account by name, and acting as one for a moment (a peer-authenticated connection);
//! - [`msg!`]: a line on stderr that a closed stderr drops instead of panicking;
//! - [`pg_build_cache`]: where `scripts/pg-build` keeps its PostgreSQL builds (`bench pg --pg-bin NAME`
//!   looks there, and `vm` hands the directory to its guests).
//!
//! `procfs-core` (which parses /proc text without touching /proc) was weighed for the /proc readers and
//! not taken: its `KernelStats` (/proc/stat) wants the boot time and tick rate and returns every CPU where
//! the benches need three sums of the first line; its `Meminfo` and `Status` make fields such as
//! `MemTotal` mandatory, so a file missing one fails whole, where the audit records each fact as
//! unavailable on its own (STYLE.md: the audit never aborts for one unreadable fact); its
//! /proc/net/netstat reader fails on a kernel with more or fewer counters than it knows; and the kernel
//! config and PostgreSQL's files, which `hostfacts::parse` reads beside them, are not in it (docs/crates.md
//! has the whole reckoning). The parsers here and in `hostfacts::parse` are pure, fixture-tested and fuzzed
//! (`fuzz/`).

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod account;
pub mod child;
pub mod cpus;
pub mod input;
pub mod output;
pub mod procinterrupts;
pub mod procstat;
pub mod stop;

use std::io;
use std::path::PathBuf;

/// Writes a line to stderr as `eprintln!` does, but drops it when stderr is closed (a reader that went
/// away: `2>&1 | head -1`) or fails otherwise, where `eprintln!` panics: a message or progress line is not
/// worth the run, and the command goes on to its own exit code. (Rust ignores SIGPIPE, so such a write
/// returns EPIPE.)
#[macro_export]
macro_rules! msg {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr().lock(), $($arg)*);
    }};
}

/// Explains an I/O error in words an operator can act on ("permission denied (needs root)").
pub fn explain_io_error(err: &io::Error) -> String {
    match err.kind() {
        io::ErrorKind::NotFound => "not found".to_string(),
        io::ErrorKind::PermissionDenied => {
            if is_root() {
                "permission denied even for root (locked down or refused by the kernel)".to_string()
            } else {
                "permission denied (needs root)".to_string()
            }
        }
        _ => match err.raw_os_error() {
            Some(libc::EPERM) => {
                if is_root() {
                    "operation not permitted even for root (the kernel refuses it here)".to_string()
                } else {
                    "operation not permitted (needs root)".to_string()
                }
            }
            _ => err.to_string(),
        },
    }
}

/// Where preemptlab keeps what lasts for this boot only (the host guards' crash records, diagnose's copy
/// of the kernel's symbols): `$PREEMPTLAB_STATE_DIR`, else `/run/preemptlab` (a tmpfs, emptied at boot).
pub fn run_dir() -> PathBuf {
    std::env::var_os("PREEMPTLAB_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/preemptlab"))
}

/// Where `scripts/pg-build` installs PostgreSQL builds: `$PREEMPTLAB_PG_CACHE`, else
/// `/var/cache/preemptlab/pg` (docs/pg-builds.md).
pub fn pg_build_cache() -> PathBuf {
    std::env::var_os("PREEMPTLAB_PG_CACHE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/preemptlab/pg"))
}

/// True when this process runs with effective uid 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The first `name` on PATH, then in the `extra` directories (e.g. `/usr/sbin` for daemons).
pub fn which(name: &str, extra: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The last `n` non-empty lines of `text` (a child's output, a log), joined with `sep`: for an error
/// message (" | " on one line, "\n" for a block).
pub fn tail(text: &str, n: usize, sep: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .rev()
        .take(n)
        .collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(sep)
}

/// Seconds since the epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_non_empty_lines() {
        assert_eq!(tail("a\n\nb\nc\n", 2, " | "), "b | c");
        assert_eq!(tail("a\nb\n", 5, "\n"), "a\nb");
        assert_eq!(tail("", 3, " | "), "");
    }

    #[test]
    fn which_finds_a_shell_and_not_a_ghost() {
        assert!(which("sh", &[]).is_some());
        assert!(which("preemptlab-no-such-program", &["/usr/sbin"]).is_none());
    }

    #[test]
    fn explained_errors_name_the_fix() {
        let e = io::Error::from(io::ErrorKind::NotFound);
        assert_eq!(explain_io_error(&e), "not found");
        let e = io::Error::from_raw_os_error(libc::EACCES);
        assert!(explain_io_error(&e).starts_with("permission denied"));
    }
}
