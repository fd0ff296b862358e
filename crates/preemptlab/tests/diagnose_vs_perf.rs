//! `diagnose` against an independent instrument: `perf record -a -g` on the same window of a real PostgreSQL
//! 15 under load, through scripts/diagnose-vs-perf (its doc says what is compared and how). Under a
//! persistent-connection load and a connect-per-transaction one the instance's share of the machine's
//! samples, the kernel, page-fault and spinlock shares and the top functions' shares must agree within
//! four standard errors. Root (perf events system-wide).
//!
//! The regression it guards: before 2026-11-29 diagnose lost every sample of a backend that was exiting
//! (perf-event-data could not parse a sample whose task had released its memory) and read 50% of the
//! machine where perf read 72% under `pgbench -C`.

use std::process::{Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;
use osutil::child::Child;
use pgharness::pgcluster::Cluster;
use serde_json::Value;

fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cluster(parent: &std::path::Path) -> Cluster {
    let bin = hostfacts::pgbin::find(None, Some(15))
        .expect("PostgreSQL 15 server binaries (scripts/test installs postgresql-15)");
    let mut c = Cluster::create(bin, Some(parent)).expect("a throwaway cluster");
    let settings: Vec<(String, String)> = [
        ("shared_buffers", "128MB"),
        ("max_connections", "30"),
        ("fsync", "off"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .to_vec();
    c.start(&settings).unwrap();
    let out = c
        .command("pgbench")
        .arg("-h")
        .arg(c.socket_dir())
        .arg("-p")
        .arg(c.port().to_string())
        .args(["-i", "-q", "-s", "5", "postgres"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pgbench -i: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    c
}

/// `pgbench -S` for `seconds` with six clients: persistent connections, or a new one per transaction.
fn load(c: &Cluster, reconnect: bool, seconds: u32) -> Child {
    let mut cmd = c.command("pgbench");
    cmd.arg("-h")
        .arg(c.socket_dir())
        .arg("-p")
        .arg(c.port().to_string())
        .args(["-S", "-n", "-c", "6", "-j", "2", "-T", &seconds.to_string()]);
    if reconnect {
        cmd.arg("-C");
    }
    cmd.arg("postgres");
    Child::spawn(
        &mut cmd,
        Stdio::null(),
        Stdio::null(),
        Duration::from_secs(5),
    )
    .expect("pgbench")
}

fn compare(c: &Cluster, reconnect: bool) -> Value {
    let pm = c.postmaster_pid().expect("running");
    let _load = load(c, reconnect, 30);
    std::thread::sleep(Duration::from_secs(2));
    let json = c.root().join(format!("vs-perf-{reconnect}.json"));
    let out = Command::new(repo().join("scripts/diagnose-vs-perf"))
        .args(["--pid", &pm.to_string(), "--seconds", "10", "--json"])
        .arg(&json)
        .arg("--preemptlab")
        .arg(cargo_bin("preemptlab"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: Value = serde_json::from_slice(&std::fs::read(&json).unwrap_or_default())
        .unwrap_or_else(|_| {
            panic!(
                "diagnose-vs-perf wrote no result: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert_eq!(out.status.code(), Some(0), "disagreement:\n{text}");
    // Enough samples that agreeing says something: 10 s of a busy instance at diagnose's 49 Hz.
    let n = doc["diagnose_samples"]["instance"].as_u64().unwrap();
    assert!(
        n >= 200,
        "diagnose took {n} samples of the instance:\n{text}"
    );
    assert!(
        doc["perf_samples"]["instance"].as_u64().unwrap() >= 4 * 200,
        "{text}"
    );
    assert_eq!(doc["diagnose_samples"]["unparsed_records"], 0, "{text}");
    doc
}

fn pct(doc: &Value, figure: &str) -> (f64, f64) {
    let c = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["figure"] == figure)
        .unwrap_or_else(|| panic!("{figure} in {doc}"));
    (
        c["diagnose_pct"].as_f64().unwrap(),
        c["perf_pct"].as_f64().unwrap(),
    )
}

#[test]
fn diagnose_agrees_with_perf_under_persistent_and_reconnecting_loads() {
    let parent = tempfile::tempdir().unwrap();
    let c = cluster(parent.path());
    let persistent = compare(&c, false);
    let reconnecting = compare(&c, true);
    // The connect-per-transaction load is the one the exit samples matter to: its backends' exit_mmap
    // is a tenth of the instance's samples or more in perf's view, and must be in diagnose's too.
    let exit = reconnecting["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["figure"] == "function [k] unmap_page_range")
        .map(|c| c["diagnose_pct"].as_f64().unwrap());
    assert!(
        exit.is_some_and(|p| p > 1.0),
        "exiting backends' samples are counted: {reconnecting}"
    );
    let (d, p) = pct(&persistent, "kernel share");
    let (rd, rp) = pct(&reconnecting, "kernel share");
    assert!(rd > d && rp > p, "reconnecting is the kernel-heavier load");
    c.remove().unwrap();
}
