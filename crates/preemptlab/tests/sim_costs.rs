//! `sim --like F --costs-from F` on a real `bench lock` result: the sim's spec carries the costs the bench
//! measured and its matrix covers exactly the measured cells.

use std::process::Command;

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

#[test]
fn sim_takes_a_real_bench_lock_results_costs_and_matrix() {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench.json");
    let o = Command::new(cargo_bin("preemptlab"))
        .args(["bench", "lock", "--quiet", "--format", "json", "--out"])
        .arg(&bench)
        .args([
            "--locks",
            "pg",
            "--pages",
            "4k",
            "--workers",
            "2",
            "--duration",
            "100ms",
            "--warmup",
            "50ms",
            "--repeat",
            "1",
            "--descriptors",
            "65536",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let b: Value = serde_json::from_slice(&std::fs::read(&bench).unwrap()).unwrap();
    let costs = &b["costs"];
    for k in [
        "spin_ns",
        "syscall_ns",
        "switch_half_round_trip_ns",
        "futex_wake_nobody_ns",
    ] {
        assert!(costs[k].as_f64().unwrap() > 0.0, "{k}: {costs}");
    }
    // No hugetlb-2m cell: the 2 MB mapping is not measured, and its parameter keeps the default.
    assert!(costs["fault_2m_map_ns"].is_null(), "{costs}");

    let out = dir.path().join("sim.json");
    let o = Command::new(cargo_bin("preemptlab"))
        .args(["sim", "--quiet", "--format", "json", "--out"])
        .arg(&out)
        .arg("--like")
        .arg(&bench)
        .arg("--costs-from")
        .arg(&bench)
        .args(["--duration", "50ms", "--repeat", "1", "--models", "none"])
        .args(["--set", "syscall_ns=123"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = &s["spec"]["params"];
    let round = |v: &Value| v.as_f64().unwrap().round() as u64;
    assert_eq!(p["spin_ns"].as_u64(), Some(round(&costs["spin_ns"]).max(1)));
    assert_eq!(
        p["futex_wake_ns"].as_u64(),
        Some(round(&costs["futex_wake_nobody_ns"]).max(1))
    );
    // The 4 KB fault is the read fault that maps a fault-around group (the write fault of fault_cost maps
    // one page), the line transfer the handover measured between two CPUs (on one CPU: the default).
    assert_eq!(
        p["fault_4k_ns"].as_u64(),
        Some(round(&costs["fault_4k_read_ns"]).max(1))
    );
    match costs["line_transfer_ns"].as_f64() {
        Some(l) => assert_eq!(
            p["lock_transfer_ns"].as_u64(),
            Some((l.round() as u64).max(1))
        ),
        None => assert_eq!(
            p["lock_transfer_ns"].as_u64(),
            Some(results::model::Params::default().lock_transfer_ns)
        ),
    }
    assert_eq!(
        p["fault_2m_map_ns"].as_u64(),
        Some(results::model::Params::default().fault_2m_map_ns)
    );
    // The line under a crowd: on two CPUs one size, which sets what a write costs a spinner (the stall of
    // one spinner) and leaves the handover's per-spinner cost and the line's service time following the
    // transfer.
    let crowd: Vec<results::model::LineCrowd> =
        serde_json::from_value(costs["line_crowd"].clone()).unwrap();
    let expect = |name: &str| {
        sim::costs::crowd_taken(&crowd)
            .iter()
            .find(|t| t.param == name)
            .map(|t| t.value)
    };
    assert_eq!(p["reread_ns"].as_u64(), expect("reread_ns"));
    assert_eq!(p["line_ns"].as_u64(), expect("line_ns"));
    assert!(p["spin_line_ns"].is_null(), "{p}");
    if crowd.len() == 1 {
        assert_eq!(
            p["reread_ns"].as_u64(),
            Some((crowd[0].write_stall_ns.round() as u64).max(1))
        );
        assert!(p["line_ns"].is_null(), "{p}");
    }
    // --set wins over the file, and the record says the file did not set it.
    assert_eq!(p["syscall_ns"].as_u64(), Some(123));
    let from = s["spec"]["from_files"].as_array().unwrap();
    let taken = |flag: &str| -> Vec<String> {
        from.iter()
            .find(|f| f["flag"] == flag)
            .unwrap_or_else(|| panic!("{flag} in {from:?}"))["taken"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t[0].as_str().unwrap().to_string())
            .collect()
    };
    let costs_taken = taken("--costs-from");
    assert!(costs_taken.contains(&"spin_ns".to_string()));
    assert!(costs_taken.contains(&"ctx_switch_ns".to_string()));
    assert!(!costs_taken.contains(&"syscall_ns".to_string()));
    assert!(taken("--like").contains(&"workers".to_string()));
    // The matrix is the measured one: the host's CPUs, 2 workers, pg on 4k.
    let cells = s["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "{cells:?}");
    assert_eq!(cells[0]["cpus"], b["host"]["kernel"]["cpus"]["value"]);
    assert_eq!(cells[0]["workers"], 2);
    assert_eq!(cells[0]["lock"], "pg");
    assert_eq!(cells[0]["pages"], "4k");
    assert_eq!(p["descriptors"].as_u64(), Some(65536));
}
