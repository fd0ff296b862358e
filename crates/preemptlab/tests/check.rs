//! `check --quick` as a new user runs it: finishes, prints a verdict consistent with the audit and with a
//! separate bench lock, and leaves the host as it found it (on any starting pool: see `common::hugetlb`).
//! Beside a real pgbench load on a throwaway PostgreSQL 15: it says so, measures only what is read-only,
//! refuses the bench's flags without `--bench-beside-load` (exit 2, one line), runs the bench with it, and
//! exits 1 with `--fail-on warn` on the exposed host. (This shared machine runs other people's PostgreSQL
//! too: the bench tests pass `--bench-beside-load`.)

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use common::hugetlb::{self, Bench, Pool};
use osutil::child::Child;
use pgharness::pgcluster::Cluster;
use serde_json::Value;

/// The tests here run one at a time: each runs a bench, and the quick check's test counts the bench
/// workers left on the host afterwards, which the other's bench would be.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn check(args: &[&str], out: &std::path::Path) -> Output {
    Command::new(cargo_bin("preemptlab"))
        .arg("check")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

/// A throwaway PostgreSQL 15 on 4 KB pages with a pgbench load of about 1,000 select-only transactions a
/// second (4 clients), as in issue 25; the load runs for `seconds`.
fn database_under_load(parent: &std::path::Path, seconds: u32) -> (Cluster, Child) {
    let bin = hostfacts::pgbin::find(None, Some(15))
        .expect("PostgreSQL 15 server binaries (scripts/test installs postgresql-15)");
    let mut c = Cluster::create(bin, Some(parent)).expect("a throwaway cluster");
    c.start(
        &[
            ("shared_buffers", "128MB"),
            ("huge_pages", "off"),
            ("max_connections", "20"),
            ("fsync", "off"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    )
    .unwrap();
    let pgbench = |args: &[&str]| {
        let mut cmd = c.command("pgbench");
        cmd.arg("-h")
            .arg(c.socket_dir())
            .arg("-p")
            .arg(c.port().to_string())
            .args(args)
            .arg("postgres");
        cmd
    };
    let init = pgbench(&["-i", "-q", "-s", "2"]).output().unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let load = Child::spawn(
        &mut pgbench(&[
            "-n",
            "-S",
            "-c",
            "4",
            "-j",
            "2",
            "-R",
            "1000",
            "-T",
            &seconds.to_string(),
        ]),
        Stdio::null(),
        Stdio::null(),
        Duration::from_secs(5),
    )
    .expect("pgbench");
    (c, load)
}

/// Issue 25's bar: beside a pgbench load, `check` says so and measures only what is read-only; the flags
/// that shape the bench are refused without `--bench-beside-load` (exit 2, one line naming it); with it
/// the bench runs and the verdict says it was measured beside the load; `--fail-on warn` exits 1 on this
/// exposed host (an instance on 4 KB pages), as `audit --fail-on warn` does.
#[test]
fn check_beside_a_pgbench_load() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let parent = tempfile::tempdir().unwrap();
    let (mut c, load) = database_under_load(parent.path(), 120);
    let pm = c.postmaster_pid().unwrap();
    let out = parent.path().join("check.json");

    for flags in [["--quick"], ["--reserve-hugepages"]] {
        let o = check(&flags, &out);
        common::assert_refused(
            &o,
            &format!("check {flags:?} beside pgbench"),
            "--bench-beside-load",
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("postmaster {pm}")),
            "names the instance: {err}"
        );
        assert!(
            err.contains("worker processes on all"),
            "names the cost: {err}"
        );
        assert!(!out.exists(), "nothing written when refused");
    }

    // The default: read-only, said before it starts, recorded in the document.
    let t = Instant::now();
    let o = check(&["--format", "json", "--fail-on", "warn"], &out);
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&o.stderr);
    let d: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert!(err.contains("only what is read-only"), "{err}");
    assert!(d["reproduction"].is_null(), "no bench beside the load");
    assert_eq!(d["load"]["bench_ran"], false);
    assert!(
        d["load"]["instances"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["postmaster_pid"] == pm),
        "{}",
        d["load"]
    );
    assert!(d["load"]["loaded"]
        .as_str()
        .unwrap()
        .contains(&format!("postmaster {pm}")));
    let busy = d["load"]["others_busy_pct"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&busy), "{busy}");
    assert!(
        d["verdict"]
            .as_str()
            .unwrap()
            .starts_with("not measured here"),
        "{}",
        d["verdict"]
    );
    // The diagnosis of the instances the audit found, or why there is none.
    assert!(
        d["diagnosis"]["instances"]
            .as_array()
            .is_some_and(|i| i.iter().any(|i| i["postmaster_pid"] == pm))
            || d["diagnosis_skipped"].is_string(),
        "{d}"
    );
    assert!(took < Duration::from_secs(40), "read-only took {took:?}");
    // Regression (issue 46 item 12): the heading said "before the reproduction" when none followed, and
    // the fix block held lines that are no shell commands.
    let doc: results::check::CheckDoc = serde_json::from_value(d.clone()).unwrap();
    let table = report::export::export(
        report::export::Format::Table,
        &report::export::Layout::default(),
        &doc,
    )
    .unwrap();
    if doc.diagnosis.is_some() {
        assert!(
            table.contains("Diagnosis of the running server ("),
            "{table}"
        );
    }
    assert!(!table.contains("before the reproduction"), "{table}");
    let lines: Vec<&str> = doc
        .fixes
        .iter()
        .flat_map(|f| f.commands.iter().map(String::as_str))
        .collect();
    assert!(!lines.is_empty(), "{d}");
    let bad: Vec<String> = lines
        .iter()
        .filter_map(|l| common::not_pasteable(l))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
    // The result file is the check's document.
    let file: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(file["kind"], "check");
    // The exit code follows the audit's findings, as `audit --fail-on` does.
    let audit = |fail_on: &str| {
        Command::new(cargo_bin("preemptlab"))
            .args(["audit", "--format", "json", "--fail-on", fail_on])
            .output()
            .unwrap()
    };
    let a = audit("warn");
    assert_eq!(
        a.status.code(),
        Some(1),
        "an instance on 4 KB pages is at least a warning"
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "check --fail-on warn on an exposed host: {err}"
    );
    let critical = check(&["--format", "json", "--fail-on", "critical"], &out);
    assert_eq!(
        critical.status.code(),
        audit("critical").status.code(),
        "check and audit agree on --fail-on critical"
    );

    // With the flag: the bench runs beside the load, and says so.
    let o = check(
        &["--quick", "--bench-beside-load", "--format", "json"],
        &out,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("runs beside it"), "{err}");
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["load"]["bench_ran"], true);
    assert!(d["reproduction"]["cells"].is_array());
    let verdict = d["verdict"].as_str().unwrap();
    assert!(verdict.contains("measured beside other load"), "{verdict}");
    assert!(!verdict.contains("()"), "{verdict}");
    drop(load);
    c.stop().unwrap();
}

#[test]
fn quick_check_is_consistent_and_leaves_the_host_as_found() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = Pool::read();
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let (o, pid) = Bench::output(
        Command::new(cargo_bin("preemptlab"))
            .args([
                "check",
                "--quick",
                "--reserve-hugepages",
                "--bench-beside-load",
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
