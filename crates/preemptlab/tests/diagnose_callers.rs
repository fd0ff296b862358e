//! Who calls the spinlock: `diagnose` names the callers of `s_lock` from the kernel's frame-pointer walk of
//! the user stack when the executable keeps frame pointers, and says why not when it does not; and a
//! default diagnosis makes no `bpf(2)` call. Root (system-wide perf events; strace).
//!
//! The instance is a small C program compiled here and named `postgres` (so the audit takes it for a
//! postmaster), whose two children call `GetVictimBuffer -> StrategyGetBuffer -> s_lock` and spin in
//! `s_lock`, the call chain of the AWS report's perf profile. Real PostgreSQL on two CPUs enters `s_lock`
//! too seldom to sample reliably (1 sample in 1,861 under pg_stat_statements with 48 clients, 0 in 5,411
//! with `SELECT 1` at 48 clients, 2026-11-29); the build facts of real PostgreSQL are checked in
//! crates/diagnose/src/binary.rs's tests and tests/diagnose_where.rs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

const FAKE: &str = r#"
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

volatile long sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Spins for `ms` milliseconds with no call inside the loop, so that the sampled leaf is this function. */
__attribute__((noinline)) void s_lock(int ms) {
    double end = now() + ms / 1e3;
    do {
        for (int i = 0; i < 20000; i++) {
            __asm__ volatile("" ::: "memory");
            sink++;
        }
    } while (now() < end);
}

__attribute__((noinline)) void StrategyGetBuffer(int ms) { s_lock(ms); sink++; }
__attribute__((noinline)) void GetVictimBuffer(int ms) { StrategyGetBuffer(ms); sink++; }

int main(int argc, char **argv) {
    double end = now() + atoi(argv[1]);
    for (int k = 0; k < 2; k++) {
        if (fork() == 0) {
            while (now() < end) GetVictimBuffer(5);
            _exit(0);
        }
    }
    while (wait(NULL) > 0) {}
    return 0;
}
"#;

/// Compiles the fake into `dir/NAME/postgres` with `flags`.
fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join("fake.c");
    std::fs::write(&src, FAKE).unwrap();
    let out_dir = dir.join(name);
    std::fs::create_dir_all(&out_dir).unwrap();
    let exe = out_dir.join("postgres");
    let out = Command::new("gcc")
        .args(["-O2", "-rdynamic"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("gcc (scripts/test installs it)");
    assert!(
        out.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs the fake for 12 s and diagnoses it for 6 s at 199 Hz (under `strace -f` when
/// `trace` is given: bpf and perf_event_open calls logged there); returns the instance's result.
fn diagnose(exe: &Path, trace: Option<&Path>) -> Value {
    let mut fake = Command::new(exe).arg("12").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let pm = fake.id().to_string();
    let args = [
        "diagnose",
        "--pid",
        &pm,
        "--duration",
        "6s",
        "--frequency",
        "199",
        "--format",
        "json",
    ];
    let out = match trace {
        Some(log) => Command::new("strace")
            .args(["-f", "-qq", "-e", "trace=bpf,perf_event_open", "-o"])
            .arg(log)
            .arg(cargo_bin("preemptlab"))
            .args(args)
            .output()
            .expect("strace (scripts/test installs it)"),
        None => Command::new(cargo_bin("preemptlab"))
            .args(args)
            .output()
            .unwrap(),
    };
    let _ = fake.kill();
    let _ = fake.wait();
    assert!(
        out.status.success(),
        "diagnose: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["instances"][0].clone()
}

#[test]
fn callers_of_s_lock_are_named_where_frame_pointers_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "fp", &["-fno-omit-frame-pointer"]);
    let inst = diagnose(&exe, None);
    let b = &inst["binary"];
    assert_eq!(b["frame_pointers"], true, "{b}");
    let spin = inst["totals"]["cpu"]["spinlock"].as_u64().unwrap();
    assert!(
        spin > 500,
        "the children spin in s_lock: {}",
        inst["totals"]
    );
    let chains = inst["spin_callers"].as_array().unwrap();
    let want = "s_lock <- StrategyGetBuffer <- GetVictimBuffer";
    let named: u64 = chains
        .iter()
        .filter(|c| c["chain"].as_str().unwrap().starts_with(want))
        .map(|c| c["samples"].as_u64().unwrap())
        .sum();
    assert!(
        named * 10 >= spin * 9,
        "{named} of {spin} spinlock samples have the chain {want}: {chains:?}"
    );
    assert!(inst["spin_callers_unavailable"].is_null());
}

#[test]
fn without_frame_pointers_the_result_says_why_and_names_no_callers() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "nofp", &["-fomit-frame-pointer"]);
    let inst = diagnose(&exe, None);
    assert_eq!(
        inst["binary"]["frame_pointers"], false,
        "{}",
        inst["binary"]
    );
    assert!(inst["totals"]["cpu"]["spinlock"].as_u64().unwrap() > 500);
    assert!(inst["spin_callers"].is_null(), "{}", inst["spin_callers"]);
    let why = inst["spin_callers_unavailable"].as_str().unwrap();
    assert!(why.contains("frame pointers"), "{why}");
}

/// A read-only diagnosis loads no BPF program: not one bpf(2) call in the whole process tree.
#[test]
fn a_default_diagnosis_makes_no_bpf_call() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "fp", &["-fno-omit-frame-pointer"]);
    let log = dir.path().join("strace.log");
    let inst = diagnose(&exe, Some(&log));
    // The kernel frames were named (so the kernel was asked for names, through /proc/kallsyms).
    assert!(inst["totals"]["cpu"]["samples"].as_u64().unwrap() > 100);
    let trace = std::fs::read_to_string(&log).unwrap();
    assert!(
        !trace.contains("bpf("),
        "bpf(2) calls in a default diagnosis:\n{trace}"
    );
    // strace saw the process (an empty log from a strace that traced nothing would prove nothing).
    assert!(
        trace.contains("perf_event_open("),
        "strace traces diagnose's system calls: {trace}"
    );
}
