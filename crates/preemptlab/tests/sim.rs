//! `preemptlab sim`: deterministic for a seed (byte-identical cells), well-formed output in the bench
//! result schema, and bad input as one line with exit 2.

mod common;

use std::process::{Command, Output};

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

fn sim(args: &[&str], out: &std::path::Path) -> Output {
    Command::new(cargo_bin("preemptlab"))
        .arg("sim")
        .args(["--quiet", "--format", "json", "--out"])
        .arg(out)
        .args(args)
        .output()
        .unwrap()
}

const SMALL: [&str; 10] = [
    "--cpus",
    "4",
    "--workers",
    "8x",
    "--models",
    "none,lazy,full",
    "--locks",
    "pg,futex,rseq",
    "--duration",
    "100ms",
];

#[test]
fn same_seed_gives_byte_identical_cells() {
    let dir = tempfile::tempdir().unwrap();
    let a = sim(&SMALL, &dir.path().join("a.json"));
    let b = sim(&SMALL, &dir.path().join("b.json"));
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let (da, db): (Value, Value) = (
        serde_json::from_slice(&a.stdout).unwrap(),
        serde_json::from_slice(&b.stdout).unwrap(),
    );
    assert_eq!(
        serde_json::to_string(&da["cells"]).unwrap(),
        serde_json::to_string(&db["cells"]).unwrap()
    );
    let c = sim(
        &[&SMALL[..], &["--seed", "7"]].concat(),
        &dir.path().join("c.json"),
    );
    let dc: Value = serde_json::from_slice(&c.stdout).unwrap();
    assert_ne!(da["cells"], dc["cells"], "another seed, another run");
}

#[test]
fn output_is_well_formed_and_plausible() {
    let dir = tempfile::tempdir().unwrap();
    let o = sim(&SMALL, &dir.path().join("r.json"));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["kind"], "sim");
    assert_eq!(d["schema_version"], 1);
    let cells = d["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3 * 3 * 2, "models x locks x pages");
    for c in cells {
        assert_eq!(c["workers"], 32);
        let reps = c["reps"].as_array().unwrap();
        assert_eq!(reps.len(), 3);
        for r in reps {
            let split = &r["cpu"];
            let sum: f64 = [
                "useful",
                "spinning",
                "faults",
                "kernel",
                "scheduler",
                "idle",
            ]
            .iter()
            .map(|k| split[k].as_f64().unwrap())
            .sum();
            assert!((sum - 1.0).abs() < 1e-6, "{split}");
            // 4 CPUs cannot do more than 4 x 1e9 / (work + overhead) operations per second.
            let ops = r["ops_per_s"].as_f64().unwrap();
            assert!(ops > 1e4 && ops < 4e9 / 1460.0, "{ops}");
            assert!(r["hold_ns"]["p99"].as_u64().unwrap() >= r["hold_ns"]["p50"].as_u64().unwrap());
        }
        if c["pages"] == "2m" {
            assert!(c["reps"][0]["minflt_per_op"].as_f64().unwrap() < 0.02);
        }
    }
    // compare reads it like a bench result.
    let o2 = sim(
        &[&SMALL[..], &["--seed", "3"]].concat(),
        &dir.path().join("s.json"),
    );
    assert!(o2.status.success());
    let cmp = Command::new(cargo_bin("preemptlab"))
        .args(["compare", "--format", "json"])
        .arg(dir.path().join("r.json"))
        .arg(dir.path().join("s.json"))
        .output()
        .unwrap();
    assert!(
        cmp.status.success(),
        "{}",
        String::from_utf8_lossy(&cmp.stderr)
    );
    let v: Value = serde_json::from_slice(&cmp.stdout).unwrap();
    assert!(v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["metric"] == "ops/s"));
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["--models", "fast"], "--models fast"),
        (vec!["--set", "nope=1"], "no parameter \"nope\""),
        (vec!["--cpus", "0"], "--cpus 0"),
        (vec!["--sweep", "hz"], "name=v1,v2"),
        (vec!["--set", "fault_block_p=2"], "fault_block_p 2: 0..1"),
        (
            vec!["--workload", "oltp"],
            "--workload oltp: expected lock or txn",
        ),
    ] {
        let o = sim(&args, &dir.path().join("x.json"));
        common::assert_refused(&o, &format!("{args:?}"), want);
    }
}

#[test]
fn txn_workload_reports_transactions_that_compare_reads() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--workload",
        "txn",
        "--cpus",
        "4",
        "--workers",
        "16x",
        "--models",
        "none,lazy",
        "--pages",
        "4k",
        "--duration",
        "100ms",
        "--repeat",
        "2",
    ];
    let o = sim(&args, &dir.path().join("t.json"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["spec"]["params"]["workload"], "txn");
    for c in d["cells"].as_array().unwrap() {
        let tps = c["summary"]["txn_per_s"]["median"].as_f64().unwrap();
        let ops = c["summary"]["ops_per_s"]["median"].as_f64().unwrap();
        assert!(tps > 1000.0 && ops > tps, "{tps} {ops}");
        for r in c["reps"].as_array().unwrap() {
            assert!(r["tps"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    // The table names the unit.
    let t = Command::new(cargo_bin("preemptlab"))
        .args(["sim", "--quiet", "--out"])
        .arg(dir.path().join("u.json"))
        .args(args)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&t.stdout);
    assert!(table.contains("tx/s"), "{table}");
    // compare pairs the transactions like bench pg's.
    let c = Command::new(cargo_bin("preemptlab"))
        .args(["compare", "--format", "json"])
        .arg(dir.path().join("t.json"))
        .arg(dir.path().join("u.json"))
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let j: Value = serde_json::from_slice(&c.stdout).unwrap();
    assert!(j.to_string().contains("\"tps\""), "{j}");
}

/// Regression (issue 26: one matrix driver): `sim`, like every bench, writes `"interrupted": true` after
/// each cell until the matrix completes, so a run killed outright leaves a partial file that says so
/// (it said false); a run that completes says false.
#[test]
fn a_run_killed_mid_matrix_leaves_a_file_marked_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let mut child = Command::new(cargo_bin("preemptlab"))
        .args(["sim", "--quiet", "--format", "json", "--out"])
        .arg(&out)
        .args([
            "--cpus",
            "4",
            "--workers",
            "8x",
            "--models",
            "none,lazy,full",
        ])
        .args(["--locks", "pg,futex,rseq,adaptive", "--duration", "400ms"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let cells = |v: &Value| v["cells"].as_array().map_or(0, |c| c.len());
    let t = std::time::Instant::now();
    let partial = loop {
        let v: Option<Value> = std::fs::read(&out)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(v) = v.filter(|v| cells(v) >= 1) {
            break v;
        }
        assert!(t.elapsed().as_secs() < 120, "no cell written");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // 3 models x 4 locks x 2 page sizes: the kill came long before the last.
    assert!(cells(&partial) < 24, "{partial}");
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true, "{v}");
    let o = sim(
        &[
            "--cpus",
            "2",
            "--models",
            "none",
            "--locks",
            "pg",
            "--pages",
            "4k",
            "--duration",
            "50ms",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["interrupted"], false, "{v}");
}
