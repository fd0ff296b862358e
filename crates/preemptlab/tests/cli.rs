//! The binary as users run it: exit codes, formats, bad input (a one-line error, exit 2, never a panic).

mod common;

use std::path::PathBuf;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn cmd() -> Command {
    Command::cargo_bin("preemptlab").unwrap()
}

/// A clean failure: exit 2, one line on stderr naming the problem, no panic.
fn assert_usage_error(out: std::process::Output, needle: &str) {
    common::assert_refused(&out, "stderr", needle);
}

/// What the argument parser refuses is one line too (clap's own message is a block with a usage line).
#[test]
fn command_line_errors_are_one_line() {
    for (args, needle) in [
        (&["frobnicate"][..], "unrecognized subcommand 'frobnicate'"),
        (
            &["compare"],
            "required arguments were not provided: <FILES>",
        ),
        (
            &["audit", "--formt", "json"],
            "tip: a similar argument exists: '--format'",
        ),
        (
            &["audit", "--format", "yaml"],
            "[possible values: table, json, prometheus]",
        ),
        (
            &["bench", "lock", "--repeat", "x"],
            "invalid value 'x' for '--repeat",
        ),
        (
            &["bench", "lock", "--start-age", "old"],
            "possible values: uniform, young",
        ),
    ] {
        assert_usage_error(cmd().args(args).output().unwrap(), needle);
    }
    // Help and version are not errors.
    cmd().args(["bench", "lock", "--help"]).assert().success();
    cmd().arg("--version").assert().success();
}

#[test]
fn fail_on_sets_exit_code_one() {
    cmd()
        .args(["audit", "--fail-on", "critical", "--sysroot"])
        .arg(fixture("linux-7.0-lazy-debugfs"))
        .assert()
        .code(1);
    cmd()
        .args(["audit", "--fail-on", "critical", "--sysroot"])
        .arg(fixture("hugepages-1g-thp-always"))
        .assert()
        .code(0);
    cmd()
        .args(["audit", "--fail-on", "warn", "--sysroot"])
        .arg(fixture("hugepages-1g-thp-always"))
        .assert()
        .code(1);
    cmd()
        .args(["audit", "--sysroot"])
        .arg(fixture("linux-7.0-lazy-debugfs"))
        .assert()
        .code(0)
        .stdout(predicate::str::contains("Verdict: AT-RISK"));
}

#[test]
fn live_audit_is_well_formed() {
    let out = cmd().args(["audit", "--format", "json"]).output().unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema_version"], 1);
    let model = doc["kernel"]["preemption"]["model"].as_str().unwrap();
    assert!(["none", "voluntary", "full", "lazy", "rt", "unknown"].contains(&model));
    assert!(doc["kernel"]["cpus"]["value"].as_u64().unwrap() >= 1);
    assert!(
        doc["kernel"]["rseq_slice_extension"]["value"].is_boolean(),
        "the live prctl probe answers"
    );
    cmd()
        .args(["audit", "--format", "prometheus"])
        .assert()
        .success()
        .stdout(predicate::str::contains("preemptlab_preempt_model_info{"));
}

#[test]
fn out_writes_the_json_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.json");
    cmd()
        .args(["audit", "--format", "table", "--sysroot"])
        .arg(fixture("preempt-rt"))
        .arg("--out")
        .arg(&path)
        .assert()
        .success();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(doc["kernel"]["preemption"]["model"], "rt");
}

#[test]
fn bad_sysroot_and_half_empty_sysroot() {
    assert_usage_error(
        cmd()
            .args(["audit", "--sysroot", "/nonexistent/dir"])
            .output()
            .unwrap(),
        "not a directory",
    );
    let empty = tempfile::tempdir().unwrap();
    assert_usage_error(
        cmd()
            .args(["audit", "--sysroot"])
            .arg(empty.path())
            .output()
            .unwrap(),
        "neither proc/ nor sys/",
    );

    // Half a host: only the kernel release; an unreadable meminfo (a directory where a file belongs);
    // a malformed CPU list. Every missing fact is reported unavailable with its reason.
    let half = tempfile::tempdir().unwrap();
    let p = half.path();
    std::fs::create_dir_all(p.join("proc/sys/kernel")).unwrap();
    std::fs::write(p.join("proc/sys/kernel/osrelease"), "7.0.1\n").unwrap();
    std::fs::create_dir_all(p.join("proc/meminfo")).unwrap();
    std::fs::create_dir_all(p.join("sys/devices/system/cpu")).unwrap();
    std::fs::write(p.join("sys/devices/system/cpu/online"), "zero-one\n").unwrap();
    let out = cmd()
        .args(["audit", "--format", "json", "--sysroot"])
        .arg(p)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["kernel"]["release"]["value"], "7.0.1");
    assert!(
        doc["memory"]["total_kib"]["unavailable"]
            .as_str()
            .unwrap()
            .len()
            > 3
    );
    assert!(doc["kernel"]["cpus"]["unavailable"]
        .as_str()
        .unwrap()
        .contains("unparseable"));
    assert!(doc["kernel"]["hz"]["unavailable"]
        .as_str()
        .unwrap()
        .contains("no kernel config"));
    assert_eq!(doc["kernel"]["preemption"]["model"], "unknown");
    let ids: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"preempt-unknown"), "{ids:?}");
    cmd()
        .args(["audit", "--sysroot"])
        .arg(p)
        .assert()
        .success()
        .stdout(predicate::str::contains("unavailable"));
}

#[test]
fn bad_dsn_and_unreachable_server() {
    assert_usage_error(
        cmd()
            .args(["audit", "--pg", "host=/tmp port=notaport"])
            .output()
            .unwrap(),
        "bad DSN",
    );
    // A server that cannot be asked is not bad input: the audit stands, with the failure as a finding
    // (issue 25: the timer's audit failed whole and every metric of the host disappeared).
    for dsn in [
        "postgresql://u:secret@/db?host=/nonexistent-dir",
        "host=/nonexistent-dir user=x password=hunter2",
    ] {
        let out = cmd()
            .args(["audit", "--format", "json", "--pg", dsn])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(err.contains("pg-query-failed"), "{err}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        for secret in ["secret", "hunter2"] {
            assert!(
                !err.contains(secret) && !stdout.contains(secret),
                "the password is never printed"
            );
        }
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            doc["findings"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["id"] == "pg-query-failed"),
            "{doc}"
        );
    }
}

#[test]
fn hugepages_arithmetic_and_bad_sizes() {
    let out = cmd()
        .args([
            "hugepages",
            "--format",
            "json",
            "--shared-memory",
            "120GB",
            "--page-size",
            "1GB",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let plan = &doc["plans"][0]["plan"];
    assert_eq!(plan["pages_exact"], 120);
    assert_eq!(plan["margin_pages"], 3);
    assert_eq!(plan["pages_needed"], 123);
    assert!(plan["sysctl_lines"][0]
        .as_str()
        .unwrap()
        .contains("hugepages-1048576kB/nr_hugepages"));

    cmd()
        .args(["hugepages", "--shared-memory", "1GB", "--page-size", "2MB"])
        .assert()
        .success()
        .stdout(predicate::str::contains("512 pages, rounded up"))
        .stdout(predicate::str::contains("huge_pages = on"));

    assert_usage_error(
        cmd()
            .args(["hugepages", "--shared-memory", "12XB"])
            .output()
            .unwrap(),
        "unknown unit",
    );
    assert_usage_error(
        cmd()
            .args(["hugepages", "--shared-memory", "0"])
            .output()
            .unwrap(),
        "more than zero",
    );
    assert_usage_error(
        cmd()
            .args(["hugepages", "--shared-memory", "1GB", "--page-size", "3MB"])
            .output()
            .unwrap(),
        "2MB or 1GB",
    );
    assert_usage_error(
        cmd()
            .args(["hugepages", "--data-dir", "/nonexistent"])
            .output()
            .unwrap(),
        "nonexistent",
    );
    let out = cmd()
        .args(["hugepages", "--pid", "1", "--sysroot"])
        .arg(fixture("this-machine-pg15-4k"))
        .output()
        .unwrap();
    assert_usage_error(out, "not a running postmaster");
}

#[test]
fn hugepages_from_a_captured_instance() {
    let out = cmd()
        .args(["hugepages", "--format", "json", "--sysroot"])
        .arg(fixture("this-machine-pg15-4k"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let plan = &doc["plans"][0]["plan"];
    assert_eq!(plan["basis"]["kind"], "segment");
    // The captured 1 GB-buffer segment: 1.05 GiB / 2 MiB, rounded up.
    let size = plan["basis"]["size_kib"].as_u64().unwrap();
    assert_eq!(plan["pages_exact"].as_u64().unwrap(), size.div_ceil(2048));
}

/// A reader that goes away (`preemptlab ... | head -0`) used to panic with "failed printing to stdout: Broken
/// pipe" and a backtrace. Now the output is dropped and the command ends with the exit code it would have
/// had (1 for a finding at `--fail-on`); `audit --out` still writes its file.
#[test]
fn closed_stdout_is_a_quiet_exit_not_a_panic() {
    let fx = fixture("linux-7.0-lazy-debugfs");
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("a.prom");
    let sim_out = dir.path().join("sim.json");
    let (fx, prom, sim_out) = (
        fx.display().to_string(),
        prom.display().to_string(),
        sim_out.display().to_string(),
    );
    let cases: Vec<(Vec<&str>, i32)> = vec![
        (vec!["audit", "--sysroot", &fx], 0),
        (vec!["audit", "--sysroot", &fx, "--fail-on", "warn"], 1),
        (
            vec![
                "audit",
                "--sysroot",
                &fx,
                "--format",
                "prometheus",
                "--out",
                &prom,
            ],
            0,
        ),
        (vec!["hugepages", "--shared-memory", "120GB"], 0),
        (
            vec![
                "sim",
                "--cpus",
                "2",
                "--workers",
                "4",
                "--duration",
                "10ms",
                "--warmup",
                "0s",
                "--repeat",
                "1",
                "--format",
                "json",
                "--quiet",
                "--out",
                &sim_out,
            ],
            0,
        ),
    ];
    for (args, code) in cases {
        // The pipe's read end is closed before the command starts: its first write to stdout fails with EPIPE.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("preemptlab"))
            .args(&args)
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(
            !common::rust_panic(&stderr) && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
    }
    let text = std::fs::read_to_string(&prom).unwrap();
    assert!(text.contains("preemptlab_audit_success 1"), "{text}");
    assert!(std::path::Path::new(&sim_out).exists());
}

/// Regression (issue 29): an output naming a stream is written in place, never replaced: `--out
/// /dev/stdout` gets the result once (the run rewrites a staged file after each cell), `--out /dev/null`
/// stays the device, and `audit --out /dev/stdout` publishes into the pipe.
#[test]
fn outputs_to_streams_are_written_in_place_once() {
    let sim = [
        "sim",
        "--cpus",
        "4",
        "--workers",
        "8",
        "--models",
        "none,lazy",
        "--pages",
        "4k",
        "--duration",
        "20ms",
        "--warmup",
        "1ms",
        "--repeat",
        "1",
        "--quiet",
        "--format",
        "markdown",
    ];
    let o = cmd()
        .args(sim)
        .args(["--out", "/dev/stdout"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text.matches("\"schema_version\"").count(), 1, "{text}");
    // The JSON document first, then the table asked for on stdout.
    let end = text.find("\n}\n").expect("a whole JSON document") + 3;
    let v: Value = serde_json::from_str(&text[..end]).unwrap();
    assert_eq!(v["cells"].as_array().unwrap().len(), 2);
    assert!(text[end..].contains('|'), "{text}");
    cmd()
        .args(sim)
        .args(["--out", "/dev/null"])
        .assert()
        .success();
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    let o = cmd()
        .args(["audit", "--format", "prometheus", "--sysroot"])
        .arg(fixture("linux-7.0-lazy-debugfs"))
        .args(["--out", "/dev/stdout"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        text.matches("# TYPE preemptlab_audit_info").count(),
        2,
        "{text}"
    );
}

/// Regression (issue 29): progress lines and messages to a closed stderr (`preemptlab bench lock ... 2>&1 |
/// head -1`, likewise sim, bench net and bench pg) panicked with exit 101. Now they are dropped, the run
/// goes on, its result file is written and its exit code is its own; with stdout closed too, the same.
#[test]
fn closed_stderr_drops_messages_and_keeps_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let path = |n: &str| dir.path().join(n).display().to_string();
    let (lock, sim, net, pg) = (
        path("lock.json"),
        path("sim.json"),
        path("net.json"),
        path("pg.json"),
    );
    let fx = fixture("linux-7.2-preempt-none").display().to_string();
    let cases: Vec<(Vec<&str>, i32, Option<&str>)> = vec![
        (
            vec![
                "bench",
                "lock",
                "--locks",
                "pg",
                "--pages",
                "4k",
                "--workers",
                "1x",
                "--repeat",
                "1",
                "--duration",
                "100ms",
                "--warmup",
                "0s",
                "--descriptors",
                "100000",
                "--out",
                &lock,
            ],
            0,
            Some(&lock),
        ),
        (
            vec![
                "sim",
                "--cpus",
                "2",
                "--workers",
                "4",
                "--duration",
                "10ms",
                "--warmup",
                "0s",
                "--repeat",
                "1",
                "--out",
                &sim,
            ],
            0,
            Some(&sim),
        ),
        (
            vec![
                "bench",
                "net",
                "--tests",
                "tcp-stream",
                "--msg-sizes",
                "1K",
                "--duration",
                "200ms",
                "--repeat",
                "1",
                "--out",
                &net,
            ],
            0,
            Some(&net),
        ),
        (
            vec![
                "bench",
                "pg",
                "--shared-buffers",
                "64MB",
                "--scale",
                "1",
                "--clients",
                "2",
                "--huge-pages",
                "off",
                "--duration",
                "1s",
                "--warmup",
                "0s",
                "--repeat",
                "1",
                "--sample-interval",
                "500ms",
                "--out",
                &pg,
            ],
            0,
            Some(&pg),
        ),
        // Messages only: the audit's warnings and an error's one line.
        (
            vec!["audit", "--sysroot", &fx, "--fail-on", "warn"],
            1,
            None,
        ),
        (vec!["hugepages", "--shared-memory", "0"], 2, None),
    ];
    for (args, code, file) in cases {
        for close_stdout in [false, true] {
            if let Some(f) = file {
                let _ = std::fs::remove_file(f);
            }
            // The read ends are closed before the command starts: every write fails with EPIPE.
            let (err_reader, err_writer) = std::io::pipe().unwrap();
            drop(err_reader);
            let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("preemptlab"));
            cmd.args(&args).stderr(err_writer);
            if close_stdout {
                let (out_reader, out_writer) = std::io::pipe().unwrap();
                drop(out_reader);
                cmd.stdout(out_writer);
            } else {
                cmd.stdout(std::process::Stdio::null());
            }
            let status = cmd.status().unwrap();
            assert_eq!(
                status.code(),
                Some(code),
                "{args:?} (stdout closed too: {close_stdout}): {status}"
            );
            if let Some(f) = file {
                assert!(std::path::Path::new(f).exists(), "{args:?}: no {f}");
            }
        }
    }
}
