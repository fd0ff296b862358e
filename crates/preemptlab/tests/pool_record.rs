//! The hugetlb pool record as runs that end badly and pool users that come and go leave it, with real
//! pools: what the audit says of a killed `--reserve-hugepages` run's pages, and the pool given back
//! exactly whatever else used it meanwhile. Root (the 2 MB pool is resized for a moment and restored; see
//! `common::hugetlb`).

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use common::hugetlb::{self, Bench, EmptyPool, Pool};
use serde_json::Value;

/// Gives back what killed runs left in the pool when dropped (the test passing or failing), as the next
/// run would.
struct Recover;

impl Drop for Recover {
    fn drop(&mut self) {
        for line in hostguard::hugetlb_pool::recover_stale_pools() {
            eprintln!("{line}");
        }
    }
}

/// `bench lock` on hugetlb-2m with `--reserve-hugepages` for `secs`, in its own process group.
fn reserving_bench(secs: u32, out: &std::path::Path) -> Bench {
    let child = Command::new(cargo_bin("preemptlab"))
        .args([
            "bench",
            "lock",
            "--quiet",
            "--locks",
            "pg",
            "--workers",
            "1",
        ])
        .args(["--pages", "hugetlb-2m", "--warmup", "0s", "--repeat", "1"])
        .arg("--duration")
        .arg(format!("{secs}s"))
        .args(["--reserve-hugepages", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    Bench::new(child)
}

/// Waits (up to 20 s) for the run `pid` to hold a share of the pool; returns it.
fn share_taken(pid: u32) -> hostguard::hugetlb_pool::Share {
    let t = Instant::now();
    loop {
        if let Some(s) = hugetlb::share_of(pid) {
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "run {pid} took no share"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Regression (issue 46 item 7): after a SIGKILLed `--reserve-hugepages` run, the audit said the pages it
/// added were "reserved and nobody uses them", naming neither the dead run's record nor that the next bench
/// gives them back. The pool fact names them (pages, run, record), and so does the finding when the pool is
/// otherwise unused; the next run's recovery gives them back, leaving the pool as before.
#[test]
fn audit_after_a_sigkilled_reserving_run_names_neither_record_nor_remedy_regression() {
    let _empty = EmptyPool::make();
    let before = Pool::read();
    let _recover = Recover;
    let dir = tempfile::tempdir().unwrap();
    let mut bench = reserving_bench(60, &dir.path().join("k.json"));
    let pid = bench.id();
    let share = share_taken(pid);
    assert!(share.pages > 0, "the run grew the pool: {share:?}");
    // SAFETY: killing our own child's process group (it and its workers).
    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
    let t = Instant::now();
    while bench.try_wait().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "SIGKILL did not end it"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        hugetlb::share_of(pid),
        Some(share.clone()),
        "its share is left"
    );
    let o = Command::new(cargo_bin("preemptlab"))
        .args(["audit", "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let audit: Value = serde_json::from_slice(&o.stdout).unwrap();
    let pool = audit["memory"]["pools"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["page_size_kib"] == 2048)
        .unwrap()
        .clone();
    let ended = &pool["left_by_ended_runs"];
    assert_eq!(ended["pages"], share.pages, "{pool}");
    assert_eq!(ended["pids"], serde_json::json!([pid]), "{pool}");
    assert_eq!(ended["record"], "/run/preemptlab/pool-2048kB.json");
    let unused = audit["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "hugetlb-pool-unused");
    if let Some(f) = unused {
        let title = f["title"].as_str().unwrap();
        let want = format!(
            "{} of them added by preemptlab run {pid}, which ended without giving them back",
            share.pages
        );
        assert!(title.contains(&want), "{title}");
        let fix = f["fix"].to_string();
        assert!(fix.contains("the next preemptlab bench"), "{fix}");
    }
    // What the next run does first.
    let lines = hostguard::hugetlb_pool::recover_stale_pools();
    assert!(
        lines.iter().any(|l| l.contains(&pid.to_string())),
        "{lines:?}"
    );
    assert_eq!(hugetlb::share_of(pid), None);
    assert_eq!(
        Pool::read().persistent,
        before.persistent,
        "the pool as before"
    );
}
