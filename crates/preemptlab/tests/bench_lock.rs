//! `bench lock` as users run it: a short run yields a well-formed, plausible result; threads, reconnects
//! and hugetlb work; cells that cannot run are skipped with a reason; bad input is exit 2; SIGINT mid-cell
//! leaves no worker, no pool share, and the cells measured so far. The hugetlb tests hold on any starting
//! pool (see `common::hugetlb`).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use common::hugetlb::{self, Bench, EmptyPool, Pool};
use serde_json::Value;

/// Tests that run workers or touch the hugetlb pool go one at a time (2 CPUs).
static SERIAL: Mutex<()> = Mutex::new(());

fn run(args: &[&str], out: &Path) -> (std::process::Output, Value) {
    let (o, v, _) = run_pid(args, out);
    (o, v)
}

/// [`run`], and the run's pid (the name of its share in the pool record).
fn run_pid(args: &[&str], out: &Path) -> (std::process::Output, Value, u32) {
    let (o, pid) = Bench::output(
        Command::new(cargo_bin("preemptlab"))
            .args(["bench", "lock", "--quiet", "--format", "json", "--out"])
            .arg(out)
            .args(args),
    );
    let v = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (o, v, pid)
}

fn check_rep(rep: &Value, workers: usize) {
    let ops_s = rep["ops_per_s"].as_f64().unwrap();
    assert!(
        ops_s > 1_000.0 && ops_s < 1e9,
        "implausible throughput {ops_s}"
    );
    assert!(
        rep["check"]["ok"].as_bool().unwrap(),
        "correctness: {}",
        rep["check"]
    );
    assert_eq!(rep["check"]["counter"], rep["check"]["ops_counted"]);
    for h in ["acquire_ns", "hold_ns"] {
        let p = &rep[h];
        let v: Vec<u64> = ["p50", "p90", "p99", "p999", "max"]
            .iter()
            .map(|k| p[k].as_u64().unwrap())
            .collect();
        assert!(
            v.windows(2).all(|w| w[0] <= w[1]),
            "{h} percentiles out of order: {v:?}"
        );
        assert!(v[0] >= 1);
    }
    let jain = rep["jain"].as_f64().unwrap();
    assert!(jain > 0.0 && jain <= 1.0 + 1e-9);
    assert_eq!(rep["worker_ops"].as_array().unwrap().len(), workers);
    let sum: u64 = rep["worker_ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .sum();
    assert_eq!(sum, rep["ops"].as_u64().unwrap());
    assert!(rep["cpu_ns_per_op"].as_f64().unwrap() > 0.0);
    assert!(rep["minflt_per_op"].as_f64().unwrap() >= 0.0);
    let steal = rep["steal_pct"]
        .as_f64()
        .expect("steal measured from /proc/stat");
    assert!((0.0..=100.0).contains(&steal), "{steal}");
    // More workers than CPUs, all working or spinning: the machine is mostly busy while measuring (a
    // reading of busy time as idle would be ~100%).
    let idle = rep["idle_pct"]
        .as_f64()
        .expect("idle measured from /proc/stat");
    assert!((0.0..=60.0).contains(&idle), "idle {idle}%");
    // The machine's IPIs in the window, per operation: read from /proc/interrupts on x86_64 and arm64;
    // far below one an operation (a wake per operation at most, and most find their CPU idle or are lazy).
    if cfg!(target_arch = "x86_64") || cfg!(target_arch = "aarch64") {
        for k in ["resched_ipis_per_op", "call_ipis_per_op"] {
            let x = rep[k].as_f64().unwrap_or_else(|| panic!("{k}: {rep}"));
            assert!((0.0..1.0).contains(&x), "{k} {x}");
        }
    }
}

#[test]
fn short_run_is_well_formed_and_plausible() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let (o, v) = run(
        &[
            "--locks",
            "pg,adaptive,futex",
            "--pages",
            "4k",
            "--workers",
            "4",
            "--duration",
            "400ms",
            "--warmup",
            "100ms",
            "--repeat",
            "2",
            "--descriptors",
            "65536",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["kind"], "bench-lock");
    assert!(
        v["host"]["kernel"]["preemption"]["model"].is_string(),
        "host facts from the audit crate"
    );
    assert_eq!(v["spec"]["workers"], serde_json::json!([4]));
    assert_eq!(v["spec"]["start_age"], "uniform", "the default");
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    for c in cells {
        assert_eq!(c["status"], "ok", "{c}");
        let reps = c["reps"].as_array().unwrap();
        assert_eq!(reps.len(), 2);
        for r in reps {
            check_rep(r, 4);
        }
        assert!(c["summary"]["ops_per_s"]["median"].as_f64().unwrap() > 0.0);
    }
    assert!(
        cells[0]["reps"][0]["sleeps_per_op"].as_f64().is_some(),
        "pg reports sleeps per op"
    );
    // The file on disk is the same document.
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(file["cells"], v["cells"]);
}

#[test]
fn threads_and_reconnects_without_progress_underflow_regression() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (o, v) = run(
        &[
            "--locks",
            "adaptive",
            "--pages",
            "4k",
            "--workers",
            "3",
            "--duration",
            "300ms",
            "--warmup",
            "0s",
            "--repeat",
            "1",
            "--descriptors",
            "65536",
            "--threads",
        ],
        &dir.path().join("t.json"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check_rep(&v["cells"][0]["reps"][0], 3);
    let (o, v) = run(
        &[
            "--locks",
            "pg",
            "--pages",
            "4k",
            "--workers",
            "4",
            "--duration",
            "500ms",
            "--warmup",
            "0s",
            "--repeat",
            "1",
            "--descriptors",
            "65536",
            "--reconnect-every",
            "3000",
        ],
        &dir.path().join("r.json"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rep = &v["cells"][0]["reps"][0];
    check_rep(rep, 4);
    assert!(
        rep["respawns"].as_u64().unwrap() > 0,
        "workers were replaced"
    );
}

#[test]
fn skipped_cells_say_why() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (o, v) = run(
        &[
            "--locks",
            "rseq,pg",
            "--pages",
            "thp,hugetlb-1g",
            "--workers",
            "2",
            "--duration",
            "200ms",
            "--warmup",
            "0s",
            "--repeat",
            "1",
            "--descriptors",
            "4096",
        ],
        &dir.path().join("s.json"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for c in v["cells"].as_array().unwrap() {
        if c["status"] == "skipped" {
            assert!(c["reason"].as_str().unwrap().len() > 10, "{c}");
        }
    }
    let rseq = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["lock"] == "rseq")
        .unwrap();
    if shmlock::availability(axes::LockKind::Rseq).is_err() {
        assert_eq!(rseq["status"], "skipped");
        assert!(rseq["reason"].as_str().unwrap().contains("rseq"));
    }
}

#[test]
fn hugetlb_cells_reserve_and_restore_the_pool() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = Pool::read();
    let dir = tempfile::tempdir().unwrap();
    let (o, v, pid) = run_pid(
        &[
            "--locks",
            "pg",
            "--pages",
            "hugetlb-2m",
            "--workers",
            "2",
            "--duration",
            "300ms",
            "--warmup",
            "0s",
            "--repeat",
            "1",
            "--descriptors",
            "65536",
            "--reserve-hugepages",
        ],
        &dir.path().join("h.json"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["cells"][0]["status"], "ok", "{}", v["cells"][0]);
    check_rep(&v["cells"][0]["reps"][0], 2);
    hugetlb::assert_given_back(&before, pid, "--reserve-hugepages");
    // Without the flag, a too-small pool is a skip, not an error: made so whatever the host's pool holds.
    {
        let _empty = EmptyPool::make();
        let (o, v) = run(
            &[
                "--locks",
                "pg",
                "--pages",
                "hugetlb-2m",
                "--workers",
                "2",
                "--duration",
                "200ms",
                "--repeat",
                "1",
                "--descriptors",
                "65536",
            ],
            &dir.path().join("h2.json"),
        );
        assert!(o.status.success());
        assert_eq!(v["cells"][0]["status"], "skipped");
        assert!(v["cells"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("--reserve-hugepages"));
        assert!(v.get("hugetlb_free_seen").is_none(), "{v}");
    }
}

/// Regression (issue 29 item 8): a run without --reserve-hugepages counts on the free pages it sees and
/// did not record them; now the result says how many it saw and needed. A reserving run records none.
#[test]
fn a_run_without_a_reservation_records_the_free_pages_it_counted_on() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--locks",
        "pg",
        "--pages",
        "hugetlb-2m",
        "--workers",
        "2",
        "--duration",
        "200ms",
        "--warmup",
        "0s",
        "--repeat",
        "1",
        "--descriptors",
        "65536",
    ];
    let operators = hugetlb::OperatorsPool::keep();
    operators.grow_by(16);
    let (o, v) = run(&args, &dir.path().join("free.json"));
    drop(operators);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["cells"][0]["status"], "ok", "{}", v["cells"][0]);
    let seen = &v["hugetlb_free_seen"][0];
    assert_eq!(seen["page_kib"], 2048, "{v}");
    let (free, needed) = (
        seen["free_pages"].as_u64().unwrap(),
        seen["needed_pages"].as_u64().unwrap(),
    );
    assert!(needed >= 1 && free >= needed, "{seen}");
    let mut reserving = args.to_vec();
    reserving.push("--reserve-hugepages");
    let (o, v) = run(&reserving, &dir.path().join("reserved.json"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(v.get("hugetlb_free_seen").is_none(), "{v}");
}

#[test]
fn bad_input_is_exit_2() {
    for args in [
        vec!["--locks", "nope"],
        vec!["--pages", "8k"],
        vec!["--workers", "0"],
        vec!["--workers", "many"],
        vec!["--duration", "soon"],
        vec!["--repeat", "0"],
        vec!["--descriptors", "10"],
        vec!["--threads", "--reconnect-every", "100"],
        vec!["--reconnect-every", "0"],
        vec!["--reconnect-every", "sometimes"],
        vec!["--start-age", "old"],
    ] {
        let o = Command::new(cargo_bin("preemptlab"))
            .args(["bench", "lock"])
            .args(&args)
            .output()
            .unwrap();
        common::assert_refused(&o, &format!("{args:?}"), "");
    }
}

/// `--switch-preempt`: where the kernel lets it, the run happens under the asked mode (the result's host
/// facts say so) and the host's mode is back afterwards; where it does not (this development machine:
/// debugfs unmounted, or reading `sched/preempt` refused even for root), the bench refuses with exit 2 in
/// one line, before it runs anything.
#[test]
fn switch_preempt_switches_for_the_run_or_refuses_cleanly() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let file = "/sys/kernel/debug/sched/preempt";
    let before = std::fs::read_to_string(file).ok();
    let target = match &before {
        // Any offered mode other than the active one.
        Some(t) => t
            .split_whitespace()
            .find(|w| !w.starts_with('('))
            .unwrap_or("full")
            .to_string(),
        None => "lazy".to_string(),
    };
    let (o, v) = run(
        &[
            "--switch-preempt",
            &target,
            "--locks",
            "pg",
            "--pages",
            "4k",
            "--workers",
            "2",
            "--duration",
            "200ms",
            "--warmup",
            "0s",
            "--repeat",
            "1",
        ],
        &out,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!common::rust_panic(&err), "{err}");
    match before {
        Some(before) => {
            assert_eq!(o.status.code(), Some(0), "{err}");
            assert_eq!(
                v["host"]["kernel"]["preemption"]["model"], target,
                "the run's host facts"
            );
            assert_eq!(
                std::fs::read_to_string(file).unwrap(),
                before,
                "switched back"
            );
        }
        None => {
            eprintln!("this host cannot read {file}: checking the refusal only");
            assert_eq!(o.status.code(), Some(2), "{err}");
            assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
            assert!(err.contains("preemption model"), "{err}");
            assert!(!out.exists(), "nothing ran");
        }
    }
    for mode in ["rt", "NONE", ""] {
        let (o, _) = run(&["--switch-preempt", mode], &out);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{mode}: {err}");
        assert!(err.contains("one of none, voluntary, full, lazy"), "{err}");
    }
}

fn workers_alive() -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().filter_map(|e| e.ok()) {
        if let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) {
            if comm.trim() == "plab-worker" {
                found.push(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    found
}

#[test]
fn sigint_mid_cell_cleans_up() {
    stop_mid_cell_cleans_up(libc::SIGINT, false);
}

/// A dropped ssh session: the kernel sends SIGHUP to the whole foreground process group, the bench and its
/// workers alike.
#[test]
fn sighup_to_the_process_group_mid_cell_cleans_up() {
    stop_mid_cell_cleans_up(libc::SIGHUP, true);
}

#[test]
fn sigquit_mid_cell_cleans_up() {
    stop_mid_cell_cleans_up(libc::SIGQUIT, false);
}

fn stop_mid_cell_cleans_up(sig: i32, group: bool) {
    use std::os::unix::process::CommandExt;
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = Pool::read();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("i.json");
    let child = Command::new(cargo_bin("preemptlab"))
        .args([
            "bench",
            "lock",
            "--quiet",
            "--locks",
            "pg,adaptive",
            "--pages",
            "4k,hugetlb-2m",
            "--workers",
            "8",
            "--duration",
            "30s",
            "--warmup",
            "0s",
        ])
        .args([
            "--repeat",
            "1",
            "--descriptors",
            "65536",
            "--reserve-hugepages",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    // Stopped if an assertion fails before the signal.
    let mut child = Bench::new(child);
    // Let the first cell start measuring, then interrupt it.
    let t = Instant::now();
    while workers_alive().len() < 8 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!workers_alive().is_empty(), "the bench started workers");
    // The hugetlb-2m cells' pages are the run's share in the record, taken before the first cell.
    let share = hugetlb::share_of(child.id()).expect("the run's share is in the pool record");
    assert!(share.need > 0 && share.pages <= share.need, "{share:?}");
    std::thread::sleep(Duration::from_millis(500));
    let target = if group {
        -(child.id() as i32)
    } else {
        child.id() as i32
    };
    // SAFETY: signalling our own child (or its process group, which holds only it and its workers).
    unsafe { libc::kill(target, sig) };
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the bench did not stop after signal {sig}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        status.code(),
        Some(128 + sig),
        "exit code after signal {sig}"
    );
    assert!(
        workers_alive().is_empty(),
        "workers left behind: {:?}",
        workers_alive()
    );
    hugetlb::assert_given_back(&before, child.id(), &format!("after signal {sig}"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true);
    assert!(v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["status"] != "ok" || c["reps"].as_array().unwrap().len() == 1));
}

/// Two `--reserve-hugepages` runs that overlap, the first ending first and the first ending last: both
/// measure their hugetlb cells and the pool ends where it began (regression: the second run overwrote the
/// first's restore record, left 513 pages pinned, and found no pages for its own cells).
#[test]
fn overlapping_reservations_both_measure_and_give_the_pool_back() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = Pool::read();
    let dir = tempfile::tempdir().unwrap();
    let bench = |dur: &str, pages: &str, out: &Path| {
        let mut c = Command::new(cargo_bin("preemptlab"));
        c.args([
            "bench",
            "lock",
            "--quiet",
            "--locks",
            "pg",
            "--workers",
            "1x",
        ])
        .args(["--pages", pages, "--duration", dur, "--warmup", "0s"])
        .args(["--repeat", "1", "--reserve-hugepages", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        c
    };
    // (first run's duration, second run's pages and duration): the first ends first, then last.
    for (a_dur, b_pages, b_dur) in [("2s", "hugetlb-2m,4k", "1s"), ("4s", "hugetlb-2m", "1s")] {
        let (a_out, b_out) = (dir.path().join("a.json"), dir.path().join("b.json"));
        let a = Bench::new(bench(a_dur, "hugetlb-2m", &a_out).spawn().unwrap());
        let a_pid = a.id();
        let t = Instant::now();
        while hugetlb::share_of(a_pid).is_none() && t.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            hugetlb::share_of(a_pid).is_some(),
            "the first run took its share of the pool"
        );
        let b = bench(b_dur, b_pages, &b_out).spawn().unwrap();
        let b_pid = b.id();
        let b = Bench::new(b).wait_with_output();
        let a = a.wait_with_output();
        for (name, o, out) in [("first", &a, &a_out), ("second", &b, &b_out)] {
            assert!(
                o.status.success(),
                "{name} run ({a_dur} / {b_dur}): {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let v: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
            let huge: Vec<&Value> = v["cells"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["pages"] == "hugetlb-2m")
                .collect();
            assert!(!huge.is_empty());
            for c in huge {
                assert_eq!(
                    c["status"], "ok",
                    "{name} run's hugetlb cell measured: {}",
                    c["reason"]
                );
            }
        }
        for (name, pid) in [("first", a_pid), ("second", b_pid)] {
            hugetlb::assert_given_back(&before, pid, &format!("{name} run ({a_dur} / {b_dur})"));
        }
    }
}
