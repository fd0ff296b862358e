//! Odd host text is not bad input but must never panic or hang: a captured host tree with `Hugepagesize:
//! 0 kB`, a `hugepages-0kB` pool and a FIFO for debugfs's preempt file, read by `audit` and `hugepages`
//! with their output open and closed (issue 29's bad-input table, the odd-host half).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::cargo_bin;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

/// Copies the directory tree `from` to `to` (regular files, directories and symbolic links).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = e.file_type().unwrap();
        if ft.is_dir() {
            copy_tree(&src, &dst);
        } else if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Regression (issue 29): odd host text is not bad input but must never panic either. `Hugepagesize: 0 kB`
/// in meminfo (and a `hugepages-0kB` pool) divided by zero in `audit --sysroot` and `hugepages --sysroot
/// ... --shared-memory 1GB`; a FIFO where debugfs's preempt file should be hung the audit. Each command
/// runs with its output open and with stdout and stderr closed: its own exit code (0, 1 or 2), never a
/// panic (101) or a hang (124 from `timeout`).
#[test]
fn odd_host_text_and_closed_pipes_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("odd-host");
    copy_tree(&fixture("linux-7.0-lazy-debugfs"), &root);
    let meminfo = root.join("proc/meminfo");
    let text = std::fs::read_to_string(&meminfo).unwrap();
    let zero: String = text
        .lines()
        .map(|l| match l.starts_with("Hugepagesize:") {
            true => "Hugepagesize:          0 kB".to_string(),
            false => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&meminfo, zero + "\n").unwrap();
    let pools = root.join("sys/kernel/mm/hugepages");
    std::fs::create_dir_all(pools.join("hugepages-0kB")).unwrap();
    for f in [
        "nr_hugepages",
        "free_hugepages",
        "resv_hugepages",
        "surplus_hugepages",
    ] {
        std::fs::write(pools.join("hugepages-0kB").join(f), "4\n").unwrap();
    }
    let preempt = root.join("sys/kernel/debug/sched/preempt");
    let _ = std::fs::remove_file(&preempt);
    std::fs::create_dir_all(preempt.parent().unwrap()).unwrap();
    let c = std::ffi::CString::new(preempt.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path in this test's own temp dir.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let r = root.display().to_string();
    let cases: Vec<Vec<String>> = [
        vec!["audit", "--sysroot", &r],
        vec!["audit", "--sysroot", &r, "--format", "json"],
        vec!["audit", "--sysroot", &r, "--format", "prometheus"],
        vec!["hugepages", "--sysroot", &r, "--shared-memory", "1GB"],
        vec!["hugepages", "--sysroot", &r],
    ]
    .into_iter()
    .map(|a| a.into_iter().map(String::from).collect())
    .collect();
    let mut failed = Vec::new();
    for args in &cases {
        let label = args.join(" ");
        let o = Command::new("timeout")
            .arg("20")
            .arg(cargo_bin("preemptlab"))
            .args(args)
            .env("PREEMPTLAB_STATE_DIR", dir.path().join("state"))
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        let fine = |code: Option<i32>| matches!(code, Some(0..=2));
        if !fine(o.status.code()) || common::rust_panic(&err) {
            failed.push(format!("{label}: {} {err}", o.status));
        }
        let state = dir.path().join("state").display().to_string();
        let closed = common::closed_pipes(args, dir.path(), &state);
        if closed.code() != o.status.code() {
            failed.push(format!(
                "{label} with pipes closed: {closed} (open: {})",
                o.status
            ));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
