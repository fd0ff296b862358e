//! The model's fixed probes, kept by refactors: fixed `preemptlab sim` configurations, each one's spec and
//! cells (the parts the model decides: not the start time, command line, tool version or host facts) hashed,
//! the hashes an insta snapshot. A refactor of crates/sim keeps the snapshot; a change of the model changes
//! it, and the commit accepting the new one (`cargo insta review`) says why. The normalised outputs stay in
//! `target/tmp/sim-probe/NAME.json` for a diff against another commit's. The `wake` probe is the command of
//! docs/results/sim-calibration-2cpu-wake.json (spin iterations that ignore the crowd on the lock's line,
//! `spin_line_ns=0`, the model of that file's first version), and its runs must equal that file's. (This was
//! scripts/sim-probe, whose printed hashes were compared by eye.)

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Name and arguments of each probe (the script's, unchanged).
const PROBES: [(&str, &str); 8] = [
    (
        "wake",
        "--cpus 2 --workers 1x,4x,8x,16x --models none --locks pg,futex,adaptive --pages 4k,2m --duration 1s \
         --set futex_wake_idle_ns=10000 --set spin_line_ns=0",
    ),
    (
        "txn-locks",
        "--workload txn --cpus 96 --workers 1024 --models none,lazy,full --locks pg,rseq,futex,adaptive \
         --pages 4k,2m --duration 300ms --repeat 1 --set fault_4k_ns=1500 --set spin_ns=500",
    ),
    (
        "lock-96-nodd",
        "--cpus 96 --workers 1024 --models none,lazy --locks pg,rseq --pages 4k --duration 200ms --repeat 1 \
         --set delayed_dequeue=false",
    ),
    (
        "line",
        "--cpus 8 --workers 8x --models none,lazy,full --locks pg,futex,rseq,adaptive --pages 4k,2m \
         --duration 200ms --repeat 2 --set line_ns=150",
    ),
    (
        "txn-window",
        "--workload txn --cpus 96 --workers 1024 --models none,lazy --locks pg,adaptive --pages 4k \
         --duration 200ms --repeat 1 --set delayed_dequeue_window_ns=2000000 --set spin_ns=300",
    ),
    (
        "txn-reported",
        "--workload txn --cpus 96 --workers 1024 --models none,lazy --locks pg --pages 4k,2m --duration 300ms \
         --warmup 300ms --repeat 1 --set lock_transfer_ns=45 --set fault_4k_ns=2500 --set spin_ns=15",
    ),
    (
        "txn-pg19",
        "--workload txn --cpus 96 --workers 1024 --models lazy --locks pg --pages 4k --duration 200ms \
         --repeat 1 --set lock_transfer_ns=45 --set fault_4k_ns=2500 --set spin_ns=15 \
         --set buffer_strategy=clocksweep",
    ),
    (
        "txn-adaptive-rseq",
        "--workload txn --cpus 16 --workers 256 --models lazy,full,voluntary --locks adaptive,rseq --pages 4k \
         --duration 200ms --repeat 1 --set adaptive_rseq=true --set wakeup_preempt_after_ns=0 \
         --set fault_block_p=0.2 --set reconnect_every=5000",
    ),
];

/// Runs one probe; its result file as JSON.
fn run(name: &str, args: &str, dir: &Path) -> Value {
    let raw = dir.join(format!("{name}.raw.json"));
    let out = Command::new(cargo_bin("preemptlab"))
        .arg("sim")
        .args(args.split_whitespace())
        .args(["--format", "json", "--quiet", "--out"])
        .arg(&raw)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sim probe {name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(&raw).unwrap()).unwrap()
}

#[test]
fn the_models_probes_keep_their_outputs() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sim-probe");
    std::fs::create_dir_all(&dir).unwrap();
    let mut hashes = String::new();
    let mut wake = None;
    for (name, args) in PROBES {
        let doc = run(name, args, &dir);
        // serde_json's map is ordered by key: the normal form is the same bytes for the same values.
        let normal = serde_json::json!({ "spec": doc["spec"], "cells": doc["cells"] });
        let text = serde_json::to_string(&normal).unwrap();
        std::fs::write(dir.join(format!("{name}.json")), &text).unwrap();
        let digest = Sha256::digest(text.as_bytes());
        let short: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        writeln!(hashes, "{short}  {name}").unwrap();
        if name == "wake" {
            wake = Some(doc);
        }
    }
    insta::assert_snapshot!("sim-probe-hashes", hashes);

    let reps = |d: &Value| -> Vec<Value> {
        d["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["reps"].clone())
            .collect()
    };
    let docs = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/results/sim-calibration-2cpu-wake.json");
    let recorded: Value = serde_json::from_slice(&std::fs::read(&docs).unwrap()).unwrap();
    assert_eq!(
        reps(&wake.unwrap()),
        reps(&recorded),
        "the wake probe's runs differ from {} (normalised outputs in {})",
        docs.display(),
        dir.display()
    );
}
