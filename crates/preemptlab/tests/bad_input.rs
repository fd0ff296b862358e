//! Bad input over every command, in one table: each case exits 2 with one line on stderr that names the
//! offending value (or the fix), no panic, and nothing is left behind (no result file where none could be
//! written, no temp file beside an output). None of these cases may start a measurement: they are refused
//! before any work, so the whole table runs in a few seconds.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;

/// Inputs the cases refer to, made once in a temp dir.
struct Inputs {
    dir: tempfile::TempDir,
}

impl Inputs {
    fn new() -> Inputs {
        let dir = tempfile::tempdir().unwrap();
        let w = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        w(
            "future.json",
            r#"{"schema_version": 999, "kind": "bench-lock"}"#,
        );
        w("teapot.json", r#"{"schema_version": 1, "kind": "teapot"}"#);
        w(
            "broken.json",
            r#"{"schema_version": 1, "kind": "bench-lock", "cells": ["#,
        );
        w("empty.json", "");
        w("text.txt", "not json at all\n");
        std::fs::write(dir.path().join("binary.json"), [0xff, 0xfe, 0x00, 0x9f]).unwrap();
        std::fs::create_dir(dir.path().join("a-directory")).unwrap();
        std::fs::create_dir(dir.path().join("empty-dir")).unwrap();
        // Nodes an output must never replace: a FIFO, and a copy of /dev/null (mknod, as root; else a
        // symbolic link to /dev/null under another name, which is no stream by name either).
        let node = |name: &str| std::ffi::CString::new(i_path(&dir, name)).unwrap();
        let fifo = node("fifo.json");
        // SAFETY: mkfifo on a NUL-terminated path in this test's own temp dir.
        let fifo_made = unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) };
        assert_eq!(fifo_made, 0);
        // SAFETY: mknod on a NUL-terminated path in this test's own temp dir; makedev(1, 3) is /dev/null's
        // device number.
        let made = unsafe {
            libc::mknod(
                node("null-copy.json").as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(1, 3),
            )
        };
        if made != 0 {
            std::os::unix::fs::symlink("/dev/null", dir.path().join("null-copy.json")).unwrap();
        }
        Inputs { dir }
    }
    fn p(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

fn i_path(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).display().to_string()
}

/// The FIFO and the device copy are still what they were: no output replaced them.
fn assert_nodes_untouched(i: &Inputs) {
    use std::os::unix::fs::FileTypeExt;
    let t = |n: &str| std::fs::metadata(i.p(n)).unwrap().file_type();
    assert!(t("fifo.json").is_fifo(), "the FIFO was replaced");
    assert!(
        t("null-copy.json").is_char_device(),
        "the device was replaced"
    );
}

fn repo_file(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
        .display()
        .to_string()
}

#[test]
fn every_bad_input_is_one_line_exit_2_and_leaves_nothing() {
    let i = Inputs::new();
    let lock = repo_file("docs/results/bench-lock-bars-aged-run1.json");
    let sim = repo_file("docs/results/sim-96cpu-pg.json");
    let fixture = repo_file("tests/fixtures/linux-7.0-lazy-debugfs");
    let out = i.p("out.json");
    // (arguments, what the one line must contain)
    let cases: Vec<(Vec<String>, &str)> =
        vec![
        // The command line itself.
        (vec!["bench".into()], "lock"),
        (vec!["nosuchcommand".into()], "nosuchcommand"),
        (vec!["audit".into(), "--nosuchflag".into()], "--nosuchflag"),
        (vec!["audit".into(), "--format".into(), "xml".into()], "xml"),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--workers".into(),
                "-5".into(),
            ],
            "-5",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--workers".into(),
                "0".into(),
            ],
            "0",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--workers".into(),
                "many".into(),
            ],
            "many",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--locks".into(),
                "nosuchlock".into(),
            ],
            "nosuchlock",
        ),
        (
            vec!["bench".into(), "lock".into(), "--pages".into(), "3k".into()],
            "3k",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--duration".into(),
                "soon".into(),
            ],
            "soon",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--duration".into(),
                "1ms".into(),
            ],
            "1ms",
        ),
        (
            vec!["bench".into(), "lock".into(), "--repeat".into(), "0".into()],
            "0",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--work-ns".into(),
                "18446744073709551615".into(),
            ],
            "--work-ns",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--cs-ns".into(),
                "18446744073709551615".into(),
            ],
            "--cs-ns",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--descriptors".into(),
                "12".into(),
            ],
            "12",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--start-age".into(),
                "old".into(),
            ],
            "old",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--switch-preempt".into(),
                "sometimes".into(),
            ],
            "sometimes",
        ),
        // Outputs that cannot be written: refused before anything runs.
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--out".into(),
                "/proc/x/r.json".into(),
            ],
            "/proc/x",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--out".into(),
                i.p("a-directory"),
            ],
            "a-directory",
        ),
        (
            vec![
                "bench".into(),
                "pg".into(),
                "--out".into(),
                "/proc/x/r.json".into(),
            ],
            "/proc/x",
        ),
        (
            vec![
                "bench".into(),
                "latency".into(),
                "--out".into(),
                "/proc/x/r.json".into(),
            ],
            "/proc/x",
        ),
        (
            vec![
                "bench".into(),
                "net".into(),
                "--out".into(),
                "/proc/x/r.json".into(),
            ],
            "/proc/x",
        ),
        (
            vec!["sim".into(), "--out".into(), "/proc/x/r.json".into()],
            "/proc/x",
        ),
        (
            vec!["check".into(), "--out".into(), "/proc/x/r.json".into()],
            "/proc/x",
        ),
        (
            vec![
                "report".into(),
                lock.clone(),
                "-o".into(),
                "/proc/x/r.html".into(),
            ],
            "/proc/x",
        ),
        (
            vec!["audit".into(), "--out".into(), "/proc/x/a.json".into()],
            "/proc/x",
        ),
        // Outputs that exist and are not regular files: refused, never replaced (issue 29).
        (
            vec![
                "sim".into(),
                "--repeat".into(),
                "1".into(),
                "--out".into(),
                i.p("fifo.json"),
            ],
            "is a FIFO, not a regular file",
        ),
        (
            vec![
                "bench".into(),
                "lock".into(),
                "--out".into(),
                i.p("null-copy.json"),
            ],
            "is a character device, not a regular file",
        ),
        (
            vec![
                "audit".into(),
                "--sysroot".into(),
                fixture.clone(),
                "--out".into(),
                i.p("null-copy.json"),
            ],
            "is a character device",
        ),
        (
            vec!["report".into(), lock.clone(), "-o".into(), i.p("fifo.json")],
            "is a FIFO",
        ),
        (
            vec!["check".into(), "--out".into(), i.p("fifo.json")],
            "is a FIFO",
        ),
        (
            vec!["check".into(), "--report".into(), i.p("null-copy.json")],
            "--report",
        ),
        // Inputs are never outputs; two outputs of one run differ; every output checked before any work.
        (
            vec![
                "report".into(),
                i.p("input.json"),
                "-o".into(),
                i.p("input.json"),
            ],
            "is also an input",
        ),
        (
            vec![
                "sim".into(),
                "--like".into(),
                i.p("input.json"),
                "--out".into(),
                i.p("input.json"),
            ],
            "is also an input",
        ),
        (
            vec![
                "check".into(),
                "--out".into(),
                i.p("r.html"),
                "--report".into(),
                i.p("r.html"),
            ],
            "are the same file",
        ),
        (
            vec!["check".into(), "--report".into(), "/proc/x/r.html".into()],
            "--report cannot create /proc/x",
        ),
        (
            vec!["check".into(), "--report".into(), i.p("a-directory")],
            "is a directory",
        ),
        // bench pg, latency, net.
        (
            vec!["bench".into(), "pg".into(), "--threads".into(), "0".into()],
            "--threads",
        ),
        (
            vec![
                "bench".into(),
                "pg".into(),
                "--shared-buffers".into(),
                "lots".into(),
            ],
            "lots",
        ),
        (
            vec![
                "bench".into(),
                "pg".into(),
                "--huge-pages".into(),
                "maybe".into(),
            ],
            "maybe",
        ),
        (
            vec!["bench".into(), "pg".into(), "--clients".into(), "0".into()],
            "0",
        ),
        (
            vec![
                "bench".into(),
                "pg".into(),
                "--driver".into(),
                "hammerdb".into(),
            ],
            "hammerdb",
        ),
        (
            vec![
                "bench".into(),
                "pg".into(),
                "--set".into(),
                "work_mem".into(),
            ],
            "work_mem",
        ),
        // A setting PostgreSQL does not know: refused from `postgres --describe-config` before any cluster.
        (
            vec![
                "bench".into(),
                "pg".into(),
                "--set".into(),
                "nosuch_guc=1".into(),
            ],
            "--set nosuch_guc=1: PostgreSQL 15 has no setting \"nosuch_guc\"; check the spelling",
        ),
        (
            vec![
                "bench".into(),
                "latency".into(),
                "--policy".into(),
                "rr".into(),
            ],
            "rr",
        ),
        (
            vec![
                "bench".into(),
                "latency".into(),
                "--interval".into(),
                "0s".into(),
            ],
            "--interval",
        ),
        (
            vec![
                "bench".into(),
                "net".into(),
                "--tests".into(),
                "sctp-stream".into(),
            ],
            "sctp-stream",
        ),
        (
            vec![
                "bench".into(),
                "net".into(),
                "--msg-sizes".into(),
                "0".into(),
            ],
            "0",
        ),
        // sim.
        (vec!["sim".into(), "--set".into(), "cpus=0".into()], "cpus"),
        (
            vec!["sim".into(), "--set".into(), "workers=0".into()],
            "workers",
        ),
        (
            vec!["sim".into(), "--set".into(), "nosuch=1".into()],
            "nosuch",
        ),
        (
            vec!["sim".into(), "--set".into(), "spin_ns=fast".into()],
            "fast",
        ),
        (vec!["sim".into(), "--cpus".into(), "0".into()], "0"),
        (
            vec!["sim".into(), "--models".into(), "sometimes".into()],
            "sometimes",
        ),
        (
            vec!["sim".into(), "--workload".into(), "olap".into()],
            "olap",
        ),
        // sim --costs-from / --like: only a bench-lock result, and for costs one that measured them.
        (
            vec!["sim".into(), "--costs-from".into(), sim.clone()],
            "not a bench-lock one",
        ),
        (
            vec!["sim".into(), "--costs-from".into(), lock.clone()],
            "re-run bench lock with this version",
        ),
        (
            vec!["sim".into(), "--like".into(), sim.clone()],
            "not a bench-lock one",
        ),
        (
            vec!["sim".into(), "--like".into(), i.p("text.txt")],
            "text.txt",
        ),
        (
            vec!["sim".into(), "--costs-from".into(), i.p("no-such.json")],
            "no-such.json",
        ),
        // Result files: compare, report, results.
        (
            vec!["compare".into(), i.p("future.json"), lock.clone()],
            "999",
        ),
        (
            vec!["compare".into(), i.p("teapot.json"), lock.clone()],
            "teapot",
        ),
        (
            vec!["compare".into(), i.p("broken.json"), lock.clone()],
            "broken.json",
        ),
        (
            vec!["compare".into(), i.p("empty.json"), lock.clone()],
            "empty.json",
        ),
        (
            vec!["compare".into(), i.p("text.txt"), lock.clone()],
            "text.txt",
        ),
        (
            vec!["compare".into(), i.p("binary.json"), lock.clone()],
            "binary.json",
        ),
        (
            vec!["compare".into(), "/nonexistent/r.json".into(), lock.clone()],
            "/nonexistent",
        ),
        (
            vec!["compare".into(), lock.clone(), sim.clone()],
            "one kind",
        ),
        (vec!["compare".into(), lock.clone()], "two"),
        (
            vec![
                "report".into(),
                i.p("future.json"),
                "-o".into(),
                i.p("r.html"),
            ],
            "999",
        ),
        (
            vec![
                "report".into(),
                i.p("teapot.json"),
                "-o".into(),
                i.p("r.html"),
            ],
            "teapot",
        ),
        (
            vec![
                "report".into(),
                i.p("empty-dir"),
                "-o".into(),
                i.p("r.html"),
            ],
            "empty-dir",
        ),
        (vec!["results".into(), i.p("future.json")], "future.json"),
        // audit, hugepages, fleet, vm.
        (
            vec!["audit".into(), "--sysroot".into(), "/nonexistent".into()],
            "/nonexistent",
        ),
        (vec!["audit".into(), "--pg".into(), "host=".into()], "--pg"),
        (
            vec![
                "hugepages".into(),
                "--shared-memory".into(),
                "1GB".into(),
                "--sysroot".into(),
                "/nonexistent".into(),
            ],
            "/nonexistent",
        ),
        (
            vec!["hugepages".into(), "--shared-memory".into(), "-1GB".into()],
            "-1GB",
        ),
        (
            vec![
                "hugepages".into(),
                "--shared-memory".into(),
                "99999999PB".into(),
            ],
            "99999999PB",
        ),
        (
            vec!["hugepages".into(), "--shared-memory".into(), "0".into()],
            "0",
        ),
        (
            vec![
                "hugepages".into(),
                "--page-size".into(),
                "3MB".into(),
                "--shared-memory".into(),
                "1GB".into(),
            ],
            "3MB",
        ),
        (
            vec!["hugepages".into(), "--data-dir".into(), i.p("empty-dir")],
            "not a PostgreSQL data directory",
        ),
        (
            vec!["hugepages".into(), "--data-dir".into(), i.p("text.txt")],
            "not a PostgreSQL data directory",
        ),
        (
            vec![
                "hugepages".into(),
                "--pid".into(),
                "999999".into(),
                "--sysroot".into(),
                fixture.clone(),
            ],
            "999999",
        ),
        (vec!["fleet".into(), i.p("empty-dir")], "empty-dir"),
        (vec!["fleet".into(), "/nonexistent".into()], "/nonexistent"),
        (
            vec![
                "fleet".into(),
                i.p("empty-dir"),
                "--stale-after".into(),
                "soon".into(),
            ],
            "soon",
        ),
        (
            vec![
                "vm".into(),
                "--cpus".into(),
                "100000".into(),
                "--".into(),
                "audit".into(),
            ],
            "100000",
        ),
        (
            vec![
                "vm".into(),
                "--kernel".into(),
                "0.1".into(),
                "--".into(),
                "audit".into(),
            ],
            "0.1",
        ),
        // This round's (issue 29): a load the shell cannot find, and guest commands `vm` checks on the
        // host before it boots anything.
        (
            vec![
                "bench".into(),
                "latency".into(),
                "--load".into(),
                "/nonexistent/cmd".into(),
            ],
            "the shell finds no command /nonexistent/cmd",
        ),
        (
            vec!["vm".into(), "--".into(), "frobnicate".into()],
            "frobnicate",
        ),
        (vec!["vm".into(), "--".into(), "ls".into(), "/".into()], "'ls'"),
        (
            vec![
                "vm".into(),
                "--".into(),
                "audit".into(),
                "--frobnicate".into(),
            ],
            "--frobnicate",
        ),
        (
            vec![
                "vm".into(),
                "--".into(),
                "bench".into(),
                "lock".into(),
                "--pages".into(),
                "hugetlb-9m".into(),
            ],
            "hugetlb-9m",
        ),
        (
            vec![
                "vm".into(),
                "--".into(),
                "bench".into(),
                "lock".into(),
                "--out".into(),
                "/proc/foo/x.json".into(),
            ],
            "/proc/foo",
        ),
        (
            vec![
                "vm".into(),
                "--preempt".into(),
                "lazy".into(),
                "--append".into(),
                "preempt=none".into(),
                "--".into(),
                "audit".into(),
            ],
            "preempt=none",
        ),
    ];
    // A real input (a copy of a bench lock result) that outputs must not overwrite.
    std::fs::copy(&lock, i.p("input.json")).unwrap();
    let input = std::fs::read(i.p("input.json")).unwrap();
    assert!(cases.len() >= 45, "{} cases", cases.len());
    let mut failed = Vec::new();
    for (args, want) in &cases {
        let t = Instant::now();
        // `timeout` stops a case that started real work instead of refusing (it would show as exit 124).
        let o = Command::new("timeout")
            .arg("20")
            .arg(cargo_bin("preemptlab"))
            .args(args)
            .env("PREEMPTLAB_STATE_DIR", i.p("state"))
            .current_dir(i.dir.path())
            .output()
            .unwrap();
        let label = args.join(" ");
        let res = std::panic::catch_unwind(|| {
            common::assert_refused(&o, &label, want);
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "{label}: refused before any work, took {:?}",
                t.elapsed()
            );
            assert!(!Path::new(&out).exists(), "{label}: wrote {out}");
            // The same with stdout and stderr closed (`2>&1 | head -0`): the one line is dropped, the
            // exit code is the same, no panic (exit 101).
            assert_eq!(
                common::closed_pipes(args, i.dir.path(), &i.p("state")).code(),
                Some(2),
                "{label}: with stdout and stderr closed"
            );
        });
        if res.is_err() {
            failed.push(label);
        }
    }
    assert_nodes_untouched(&i);
    assert_eq!(std::fs::read(i.p("input.json")).unwrap(), input);
    assert!(
        failed.is_empty(),
        "{} of {} cases failed: {failed:#?}",
        failed.len(),
        cases.len()
    );
    // Nothing half-done beside the inputs: no temp file, no results/ directory.
    let left: Vec<String> = std::fs::read_dir(i.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') || n.contains("tmp") || n == "results" || n == "r.html")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Regression: the no-panic check of a refusal matched the bare word "panicked", which `vm`'s own report
/// of a guest kernel panic contains (a boot that panicked is booted again, and the refusal after three says
/// so); only a Rust panic ("panicked at FILE:LINE:COL") fails it.
#[test]
fn a_guest_kernel_panic_in_a_refusal_is_not_a_rust_panic_regression() {
    use std::os::unix::process::ExitStatusExt;
    let exit_2 = |err: &str| std::process::Output {
        status: std::process::ExitStatus::from_raw(2 << 8),
        stdout: Vec::new(),
        stderr: err.as_bytes().to_vec(),
    };
    let guest =
        "preemptlab vm: the guest kernel panicked before the command started, in all 3 boots\n";
    common::assert_refused(&exit_2(guest), "guest kernel panic", "in all 3 boots");
    let rust = "thread 'main' panicked at crates/preemptlab/src/main.rs:10:5: --kernel\n";
    assert!(common::rust_panic(rust));
    let caught = std::panic::catch_unwind(|| {
        common::assert_refused(&exit_2(rust), "Rust panic", "--kernel")
    });
    assert!(caught.is_err(), "a Rust panic passed the check");
}
