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
        // The host guards' state dir (PREEMPTLAB_STATE_DIR) with a FIFO where the preemption model's record
        // lives: a switch read it and hung, stop signals or not (issue 46 item 7).
        std::fs::create_dir(dir.path().join("state")).unwrap();
        let record = node("state/preempt.json");
        // SAFETY: mkfifo on a NUL-terminated path in this test's own temp dir.
        assert_eq!(unsafe { libc::mkfifo(record.as_ptr(), 0o600) }, 0);
        Inputs { dir }
    }
    fn p(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// A case's arguments.
fn a(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
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

/// What the cases name: the inputs' directory, a bench lock and a sim result, a fixture tree, an output.
struct Ctx<'a> {
    i: &'a Inputs,
    lock: String,
    sim: String,
    fixture: String,
    out: String,
}

/// The command line itself.
fn command_line_cases() -> Vec<(Vec<String>, &'static str)> {
    vec![
        // The command line itself.
        (a(&["bench"]), "lock"),
        (a(&["nosuchcommand"]), "nosuchcommand"),
        (a(&["audit", "--nosuchflag"]), "--nosuchflag"),
        (a(&["audit", "--format", "xml"]), "xml"),
        (a(&["bench", "lock", "--workers", "-5"]), "-5"),
        (a(&["bench", "lock", "--workers", "0"]), "0"),
        (a(&["bench", "lock", "--workers", "many"]), "many"),
        (a(&["bench", "lock", "--locks", "nosuchlock"]), "nosuchlock"),
        (a(&["bench", "lock", "--pages", "3k"]), "3k"),
        (a(&["bench", "lock", "--duration", "soon"]), "soon"),
        (a(&["bench", "lock", "--duration", "1ms"]), "1ms"),
        (a(&["bench", "lock", "--repeat", "0"]), "0"),
        (
            a(&["bench", "lock", "--work-ns", "18446744073709551615"]),
            "--work-ns",
        ),
        (
            a(&["bench", "lock", "--cs-ns", "18446744073709551615"]),
            "--cs-ns",
        ),
        (a(&["bench", "lock", "--descriptors", "12"]), "12"),
        (a(&["bench", "lock", "--start-age", "old"]), "old"),
        (
            a(&["bench", "lock", "--switch-preempt", "sometimes"]),
            "sometimes",
        ),
    ]
}

/// Outputs that cannot be written, that exist and are not regular files, that are inputs.
fn output_cases(c: &Ctx) -> Vec<(Vec<String>, &'static str)> {
    let i = c.i;
    let lock = c.lock.clone();
    let fixture = c.fixture.clone();
    vec![
        // Outputs that cannot be written: refused before anything runs.
        (a(&["bench", "lock", "--out", "/proc/x/r.json"]), "/proc/x"),
        (
            a(&["bench", "lock", "--out", &i.p("a-directory")]),
            "a-directory",
        ),
        (a(&["bench", "pg", "--out", "/proc/x/r.json"]), "/proc/x"),
        (
            a(&["bench", "latency", "--out", "/proc/x/r.json"]),
            "/proc/x",
        ),
        (a(&["bench", "net", "--out", "/proc/x/r.json"]), "/proc/x"),
        (a(&["sim", "--out", "/proc/x/r.json"]), "/proc/x"),
        (a(&["check", "--out", "/proc/x/r.json"]), "/proc/x"),
        (a(&["report", &lock, "-o", "/proc/x/r.html"]), "/proc/x"),
        (a(&["audit", "--out", "/proc/x/a.json"]), "/proc/x"),
        // Outputs that exist and are not regular files: refused, never replaced (issue 29).
        (
            a(&["sim", "--repeat", "1", "--out", &i.p("fifo.json")]),
            "is a FIFO, not a regular file",
        ),
        (
            a(&["bench", "lock", "--out", &i.p("null-copy.json")]),
            "is a character device, not a regular file",
        ),
        (
            a(&[
                "audit",
                "--sysroot",
                &fixture,
                "--out",
                &i.p("null-copy.json"),
            ]),
            "is a character device",
        ),
        (a(&["report", &lock, "-o", &i.p("fifo.json")]), "is a FIFO"),
        (a(&["check", "--out", &i.p("fifo.json")]), "is a FIFO"),
        (
            a(&["check", "--report", &i.p("null-copy.json")]),
            "--report",
        ),
        // Inputs are never outputs; two outputs of one run differ; every output checked before any work.
        (
            a(&["report", &i.p("input.json"), "-o", &i.p("input.json")]),
            "is also an input",
        ),
        (
            a(&[
                "sim",
                "--like",
                &i.p("input.json"),
                "--out",
                &i.p("input.json"),
            ]),
            "is also an input",
        ),
        (
            a(&["check", "--out", &i.p("r.html"), "--report", &i.p("r.html")]),
            "are the same file",
        ),
        (
            a(&["check", "--report", "/proc/x/r.html"]),
            "--report cannot create /proc/x",
        ),
        (
            a(&["check", "--report", &i.p("a-directory")]),
            "is a directory",
        ),
    ]
}

/// bench pg, latency and net; settings PostgreSQL does not know; sim and its input files.
fn bench_and_sim_cases(c: &Ctx) -> Vec<(Vec<String>, &'static str)> {
    let i = c.i;
    let lock = c.lock.clone();
    let sim = c.sim.clone();
    vec![
        // bench pg, latency, net.
        (a(&["bench", "pg", "--threads", "0"]), "--threads"),
        (a(&["bench", "pg", "--shared-buffers", "lots"]), "lots"),
        (a(&["bench", "pg", "--huge-pages", "maybe"]), "maybe"),
        (a(&["bench", "pg", "--clients", "0"]), "0"),
        (a(&["bench", "pg", "--driver", "hammerdb"]), "hammerdb"),
        (a(&["bench", "pg", "--set", "work_mem"]), "work_mem"),
        // A setting PostgreSQL does not know: refused from `postgres --describe-config` before any cluster.
        (
            a(&["bench", "pg", "--set", "nosuch_guc=1"]),
            "--set nosuch_guc=1: PostgreSQL 15 has no setting \"nosuch_guc\"; check the spelling",
        ),
        (a(&["bench", "latency", "--policy", "rr"]), "rr"),
        (a(&["bench", "latency", "--interval", "0s"]), "--interval"),
        (
            a(&["bench", "net", "--tests", "sctp-stream"]),
            "sctp-stream",
        ),
        (a(&["bench", "net", "--msg-sizes", "0"]), "0"),
        // sim.
        (a(&["sim", "--set", "cpus=0"]), "cpus"),
        (a(&["sim", "--set", "workers=0"]), "workers"),
        (a(&["sim", "--set", "nosuch=1"]), "nosuch"),
        (a(&["sim", "--set", "spin_ns=fast"]), "fast"),
        (a(&["sim", "--cpus", "0"]), "0"),
        (a(&["sim", "--models", "sometimes"]), "sometimes"),
        (a(&["sim", "--workload", "olap"]), "olap"),
        // sim --costs-from / --like: only a bench-lock result, and for costs one that measured them.
        (a(&["sim", "--costs-from", &sim]), "not a bench-lock one"),
        (
            a(&["sim", "--costs-from", &lock]),
            "re-run bench lock with this version",
        ),
        (a(&["sim", "--like", &sim]), "not a bench-lock one"),
        (a(&["sim", "--like", &i.p("text.txt")]), "text.txt"),
        (
            a(&["sim", "--costs-from", &i.p("no-such.json")]),
            "no-such.json",
        ),
    ]
}

/// Result files (compare, report, results); audit, hugepages, fleet, vm.
fn result_file_and_host_cases(c: &Ctx) -> Vec<(Vec<String>, &'static str)> {
    let i = c.i;
    let lock = c.lock.clone();
    let sim = c.sim.clone();
    let fixture = c.fixture.clone();
    vec![
        // Result files: compare, report, results.
        (a(&["compare", &i.p("future.json"), &lock]), "999"),
        (a(&["compare", &i.p("teapot.json"), &lock]), "teapot"),
        (a(&["compare", &i.p("broken.json"), &lock]), "broken.json"),
        (a(&["compare", &i.p("empty.json"), &lock]), "empty.json"),
        (a(&["compare", &i.p("text.txt"), &lock]), "text.txt"),
        (a(&["compare", &i.p("binary.json"), &lock]), "binary.json"),
        (
            a(&["compare", "/nonexistent/r.json", &lock]),
            "/nonexistent",
        ),
        (a(&["compare", &lock, &sim]), "one kind"),
        (a(&["compare", &lock]), "two"),
        (
            a(&["report", &i.p("future.json"), "-o", &i.p("r.html")]),
            "999",
        ),
        (
            a(&["report", &i.p("teapot.json"), "-o", &i.p("r.html")]),
            "teapot",
        ),
        (
            a(&["report", &i.p("empty-dir"), "-o", &i.p("r.html")]),
            "empty-dir",
        ),
        (a(&["results", &i.p("future.json")]), "future.json"),
        // audit, hugepages, fleet, vm.
        (a(&["audit", "--sysroot", "/nonexistent"]), "/nonexistent"),
        (a(&["audit", "--pg", "host="]), "--pg"),
        (
            a(&[
                "hugepages",
                "--shared-memory",
                "1GB",
                "--sysroot",
                "/nonexistent",
            ]),
            "/nonexistent",
        ),
        (a(&["hugepages", "--shared-memory", "-1GB"]), "-1GB"),
        (
            a(&["hugepages", "--shared-memory", "99999999PB"]),
            "99999999PB",
        ),
        (a(&["hugepages", "--shared-memory", "0"]), "0"),
        (
            a(&["hugepages", "--page-size", "3MB", "--shared-memory", "1GB"]),
            "3MB",
        ),
        (
            a(&["hugepages", "--data-dir", &i.p("empty-dir")]),
            "not a PostgreSQL data directory",
        ),
        (
            a(&["hugepages", "--data-dir", &i.p("text.txt")]),
            "not a PostgreSQL data directory",
        ),
        (
            a(&["hugepages", "--pid", "999999", "--sysroot", &fixture]),
            "999999",
        ),
        (a(&["fleet", &i.p("empty-dir")]), "empty-dir"),
        (a(&["fleet", "/nonexistent"]), "/nonexistent"),
        (
            a(&["fleet", &i.p("empty-dir"), "--stale-after", "soon"]),
            "soon",
        ),
        (a(&["vm", "--cpus", "100000", "--", "audit"]), "100000"),
        (a(&["vm", "--kernel", "0.1", "--", "audit"]), "0.1"),
    ]
}

/// Issue 29's and issue 46's: loads, guests vm checks on the host, guard records, hugepages sizing, diagnose --out.
fn later_cases(c: &Ctx) -> Vec<(Vec<String>, &'static str)> {
    let i = c.i;
    let fixture = c.fixture.clone();
    let out = c.out.clone();
    vec![
        // This round's (issue 29): a load the shell cannot find, and guest commands `vm` checks on the
        // host before it boots anything.
        (
            a(&["bench", "latency", "--load", "/nonexistent/cmd"]),
            "the shell finds no command /nonexistent/cmd",
        ),
        (a(&["vm", "--", "frobnicate"]), "frobnicate"),
        (a(&["vm", "--", "ls", "/"]), "'ls'"),
        (a(&["vm", "--", "audit", "--frobnicate"]), "--frobnicate"),
        (
            a(&["vm", "--", "bench", "lock", "--pages", "hugetlb-9m"]),
            "hugetlb-9m",
        ),
        (
            a(&["vm", "--", "bench", "lock", "--out", "/proc/foo/x.json"]),
            "/proc/foo",
        ),
        (
            a(&[
                "vm",
                "--preempt",
                "lazy",
                "--append",
                "preempt=none",
                "--",
                "audit",
            ]),
            "preempt=none",
        ),
        // Issue 46 item 6: a guest larger than the host, a kernel that is no image: refused before any boot
        // (they booted and failed 7-14 s later).
        (
            a(&["vm", "--memory", "100T", "--", "audit"]),
            "--memory 100 TiB: more than this host's",
        ),
        (
            a(&["vm", "--kernel", &i.p("text.txt"), "--", "audit"]),
            "not a kernel image (text",
        ),
        (
            a(&["vm", "--kernel", &i.p("empty.json"), "--", "audit"]),
            "not a kernel image (an empty file)",
        ),
        // Issue 46 item 7: a FIFO where a host guard's record lives (the state dir above): refused at once.
        (
            a(&["bench", "lock", "--switch-preempt", "lazy", "--out", &out]),
            "preempt.json: a FIFO, not a regular file: preemptlab keeps its record there; remove it",
        ),
        // Issue 46 item 3: hugepages --shared-buffers (sized by PostgreSQL itself) and its companions.
        (
            a(&["hugepages", "--shared-buffers", "lots"]),
            "--shared-buffers lots",
        ),
        (
            a(&["hugepages", "--max-connections", "200"]),
            "--shared-buffers",
        ),
        (
            a(&["hugepages", "--shared-buffers", "2GB", "--shared-memory", "2GB"]),
            "--shared-memory",
        ),
        // Issue 46 item 1: diagnose --out in a directory no file can be made in, refused before the window
        // (it was found after the window, up to 24 h, without naming --out; twice with prometheus).
        (
            a(&["diagnose", "--duration", "10m", "--out", "/proc/d.json"]),
            "--out cannot write in /proc",
        ),
        (
            a(&["diagnose", "--duration", "10m", "--out", "/sys/d.json"]),
            "--out cannot write in /sys",
        ),
        (
            a(&[
                "diagnose",
                "--duration",
                "10m",
                "--format",
                "prometheus",
                "--out",
                "/proc/d.prom",
            ]),
            "(choose another path with --out)",
        ),
        (
            a(&["audit", "--sysroot", &fixture, "--out", "/proc/a.json"]),
            "--out cannot write in /proc",
        ),
    ]
}

#[test]
fn every_bad_input_is_one_line_exit_2_and_leaves_nothing() {
    let i = Inputs::new();
    let lock = repo_file("docs/results/bench-lock-bars-aged-run1.json");
    let sim = repo_file("docs/results/sim-96cpu-pg.json");
    let fixture = repo_file("tests/fixtures/linux-7.0-lazy-debugfs");
    let out = i.p("out.json");
    // (arguments, what the one line must contain)
    let c = Ctx {
        i: &i,
        lock: lock.clone(),
        sim,
        fixture,
        out: out.clone(),
    };
    let cases: Vec<(Vec<String>, &str)> = [
        command_line_cases(),
        output_cases(&c),
        bench_and_sim_cases(&c),
        result_file_and_host_cases(&c),
        later_cases(&c),
    ]
    .concat();
    // A real input (a copy of a bench lock result) that outputs must not overwrite.
    std::fs::copy(&lock, i.p("input.json")).unwrap();
    let input = std::fs::read(i.p("input.json")).unwrap();
    assert!(cases.len() >= 45, "{} cases", cases.len());
    let mut failed = Vec::new();
    for (args, want) in &cases {
        let t = Instant::now();
        // `timeout` stops a case that started real work instead of refusing (it would show as exit 124);
        // -k kills one that its SIGTERM does not end (a run hung where a stop signal cannot reach it).
        let o = Command::new("timeout")
            .args(["-k", "5", "20"])
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

/// Regression (issue 46 item 1): `diagnose --out` in a directory its user cannot write (`/root/...` as
/// nobody) was checked only for the directory's existence and failed after the window; it is refused before
/// the window now, naming --out.
#[test]
fn diagnose_out_unwritable_found_after_the_window_regression() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    assert!(
        osutil::is_root(),
        "this test runs preemptlab as nobody: run it as root (scripts/test does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let private = dir.path().join("root-only");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = private.join("d.json");
    let t = Instant::now();
    let o = Command::new("timeout")
        .args(["-k", "5", "20"])
        .arg(cargo_bin("preemptlab"))
        .args(["diagnose", "--duration", "10m", "--out"])
        .arg(&out)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    common::assert_refused(&o, "diagnose --out as nobody", "--out cannot write in");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert_eq!(std::fs::read_dir(&private).unwrap().count(), 0);
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
