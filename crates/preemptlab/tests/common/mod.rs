//! What the CLI tests share (each test binary uses a part of it).
#![allow(dead_code)]

pub mod cgroup;
pub mod hugetlb;
pub mod vm;

use std::process::Output;

/// Whether `stderr` shows a Rust panic: the panic hook prints "thread '...' panicked at FILE:LINE:COL".
/// The bare word is not one: `vm` says "the guest kernel panicked before the command started" when a boot
/// panics (it boots again), and that is the guest's kernel, reported, not this program failing.
pub fn rust_panic(stderr: &str) -> bool {
    stderr.contains("panicked at")
}

/// Bad input was refused cleanly: exit 2, no panic, one line on stderr that contains `want` (`context`
/// names the case in failure messages).
pub fn assert_refused(o: &Output, context: &str, want: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{context}: {err}");
    assert!(!rust_panic(&err), "{context}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{context}: one line: {err}");
    assert!(err.contains(want), "{context}: {err} should name {want:?}");
}

/// Why a fix line is not fit to paste into a shell, if it is not: every line of a fix block is a comment
/// (`# ...`) or a command of the ones the fixes use (`sysctl`, `echo ... > file`, `preemptlab`) with its
/// comment after ` # `; no placeholder (`<size>` would be read as a redirection) and no prose such as
/// `postgresql.conf: huge_pages = on` (issue 46 item 12).
pub fn not_pasteable(line: &str) -> Option<String> {
    let t = line.trim();
    if t.starts_with('#') {
        return None;
    }
    let command = t.split(" # ").next().unwrap_or(t).trim();
    let first = command.split_whitespace().next().unwrap_or("");
    if !["sysctl", "echo", "preemptlab"].contains(&first) {
        return Some(format!("{line:?}: {first:?} is no command a fix runs"));
    }
    command
        .contains('<')
        .then(|| format!("{line:?}: a placeholder read as a redirection"))
}

/// Runs preemptlab (under `timeout -k 5 20`) with `args` in `dir`, with both stdout and stderr on pipes whose
/// read ends are closed before it starts: every write fails with EPIPE (`2>&1 | head -0`). (std::io::pipe
/// is newer than the MSRV; the tests in cli.rs use it too, where clippy does not look: test code only.)
#[allow(clippy::incompatible_msrv)]
pub fn closed_pipes(
    args: &[String],
    dir: &std::path::Path,
    state_dir: &str,
) -> std::process::ExitStatus {
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (err_r, err_w) = std::io::pipe().unwrap();
    drop((out_r, err_r));
    std::process::Command::new("timeout")
        .args(["-k", "5", "20"])
        .arg(assert_cmd::cargo::cargo_bin("preemptlab"))
        .args(args)
        .env("PREEMPTLAB_STATE_DIR", state_dir)
        .current_dir(dir)
        .stdout(out_w)
        .stderr(err_w)
        .status()
        .unwrap()
}
