//! `check --quick` as a new user runs it: finishes, prints a verdict consistent with the audit and with a
//! separate bench lock, and leaves the host as it found it (on any starting pool: see `common::hugetlb`).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use common::hugetlb::{self, Bench, Pool};
use serde_json::Value;

#[test]
fn quick_check_is_consistent_and_leaves_the_host_as_found() {
    let before = Pool::read();
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let (o, pid) = Bench::output(
        Command::new(cargo_bin("preemptlab"))
            .args([
                "check",
                "--quick",
                "--reserve-hugepages",
                "--format",
                "json",
                "--out",
            ])
            .arg(dir.path().join("c.json")),
    );
    let took = t.elapsed();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        took < Duration::from_secs(60),
        "check --quick took {took:?}"
    );
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    // The exposure is the audit's verdict, and the audit inside is the same document `audit` prints.
    let audit = Command::new(cargo_bin("preemptlab"))
        .args(["audit", "--format", "json"])
        .output()
        .unwrap();
    let audit: Value = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(d["exposure"], audit["verdict"]);
    assert_eq!(
        d["audit"]["kernel"]["preemption"]["model"],
        audit["kernel"]["preemption"]["model"]
    );
    // The reproduction is a well-formed bench lock result, and the verdict quotes its measured ratio.
    let cells = d["reproduction"]["cells"].as_array().unwrap();
    assert!(cells
        .iter()
        .any(|c| c["lock"] == "pg" && c["pages"] == "4k" && c["status"] == "ok"));
    let verdict = d["verdict"].as_str().unwrap();
    assert!(
        verdict.contains(audit["kernel"]["preemption"]["model"].as_str().unwrap()),
        "{verdict}"
    );
    if let Some(e) = d["effects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["what"].as_str().unwrap().starts_with("huge pages"))
    {
        let r = e["ratio"].as_f64().unwrap();
        assert!(r > 0.0 && e["ci_lo"].as_f64().unwrap() <= r && r <= e["ci_hi"].as_f64().unwrap());
        if e["significant"] == true && r > 1.0 {
            assert!(verdict.contains("loses"), "{verdict}");
            assert!(
                d["fixes"][0]["title"]
                    .as_str()
                    .unwrap()
                    .contains("huge pages"),
                "the measured best fix comes first"
            );
        }
    }
    // Fixes are ranked by measured gain and none has a negative one.
    let gains: Vec<f64> = d["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["measured_gain_pct"].as_f64())
        .collect();
    assert!(
        gains.windows(2).all(|w| w[0] >= w[1]) && gains.iter().all(|g| *g > 0.0),
        "{gains:?}"
    );
    hugetlb::assert_given_back(&before, pid, "check --quick");
    let left: Vec<_> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == "plab-worker")
        })
        .collect();
    assert!(left.is_empty(), "workers left behind");
}
