//! `bench latency`: real wakeups, the lock load makes SCHED_OTHER's p99 visibly worse, the load is gone
//! afterwards (also after SIGINT), and bad input is one line with exit 2.

mod common;

use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests start loads and count them: one at a time.
static ONE: Mutex<()> = Mutex::new(());

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

fn run(args: &[&str], out: &std::path::Path) -> Output {
    Command::new(cargo_bin("preemptlab"))
        .args(["bench", "latency", "--quiet", "--format", "json", "--out"])
        .arg(out)
        .args(args)
        .output()
        .unwrap()
}

/// `bench lock` processes started as a load (their command line names the load's result file).
fn load_processes() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).contains("preemptlab-latency-load-"))
        .count()
}

#[test]
fn lock_load_makes_sched_other_p99_worse_and_goes_away() {
    let _l = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let o = run(
        &[
            "--load",
            "none,lock",
            "--policy",
            "other,fifo",
            "--duration",
            "2s",
            "--repeat",
            "1",
            "--load-warmup",
            "1s",
        ],
        &dir.path().join("r.json"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["kind"], "bench-latency");
    let cells = d["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    let p99 = |policy: &str, load: &str| {
        let c = cells
            .iter()
            .find(|c| c["policy"] == policy && c["load"] == load)
            .unwrap();
        assert_eq!(c["status"], "ok", "{c}");
        let l = &c["reps"][0]["latency_us"];
        // Two threads x 2 s at 1 ms; a wakeup later than the next deadline skips the missed ones.
        let n = l["samples"].as_u64().unwrap();
        let skipped = c["reps"][0]["overruns"].as_u64().unwrap();
        assert!(
            n <= 4100 && n + 20 * skipped >= 3600,
            "{n} wakeups, {skipped} overruns"
        );
        assert!(l["min"].as_f64().unwrap() <= l["p50"].as_f64().unwrap());
        assert!(l["p50"].as_f64().unwrap() <= l["p99"].as_f64().unwrap());
        assert!(l["p99"].as_f64().unwrap() <= l["max"].as_f64().unwrap());
        l["p99"].as_f64().unwrap()
    };
    let (idle, loaded) = (p99("other", "none"), p99("other", "lock"));
    assert!(
        loaded > 2.0 * idle,
        "SCHED_OTHER p99 under the lock load {loaded} us vs idle {idle} us"
    );
    // SCHED_FIFO is not delayed by the fair-class load the way SCHED_OTHER is.
    assert!(
        p99("fifo", "lock") < loaded,
        "fifo under load {} vs other {loaded}",
        p99("fifo", "lock")
    );
    assert_eq!(load_processes(), 0, "the load is gone");
    let leftovers = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("preemptlab-latency-load-")
        })
        .count();
    assert_eq!(leftovers, 0, "the load's result file is removed");
}

#[test]
fn sigint_stops_the_load_and_keeps_what_was_measured() {
    stop_stops_the_load_and_keeps_what_was_measured(libc::SIGINT, false);
}

/// A dropped ssh session: SIGHUP to the whole foreground process group (the bench and its load).
#[test]
fn sighup_stops_the_load_and_keeps_what_was_measured() {
    stop_stops_the_load_and_keeps_what_was_measured(libc::SIGHUP, true);
}

fn stop_stops_the_load_and_keeps_what_was_measured(sig: i32, group: bool) {
    use std::os::unix::process::CommandExt;
    let _l = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let mut child = Command::new(cargo_bin("preemptlab"))
        .args([
            "bench",
            "latency",
            "--quiet",
            "--load",
            "lock",
            "--policy",
            "other",
            "--duration",
            "30s",
            "--load-warmup",
            "0",
            "--out",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let t = Instant::now();
    while load_processes() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the load never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    let target = if group {
        -(child.id() as i32)
    } else {
        child.id() as i32
    };
    // SAFETY: signalling our own child (or its process group: it and its children).
    unsafe { libc::kill(target, sig) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + sig));
    let d: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(d["interrupted"], true);
    let t = Instant::now();
    while load_processes() > 0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(load_processes(), 0, "the load is gone");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["--priority", "100"], "--priority 100"),
        (vec!["--interval", "1us"], "--interval 1us: 50us..1s"),
        (vec!["--duration", "soon"], "--duration"),
        (vec!["--policy", "rr"], "--policy rr"),
        (vec!["--threads", "0"], "--threads 0"),
    ] {
        let o = run(&args, &dir.path().join("x.json"));
        common::assert_refused(&o, &format!("{args:?}"), want);
    }
}

/// Regression (issue 29 item 5): `--load 'exit 3'` and `--load 'sleep 0.1; exit 1'` reported rows as
/// measured under that load, exit 0. The cell fails with how the load ended, its result says so, exit 1;
/// `--load /nonexistent/cmd` is refused before anything runs (exit 2, one line, no result file).
#[test]
fn a_load_that_ends_fails_its_cell_and_a_missing_one_is_refused() {
    let _l = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    for (load, how) in [
        ("exit 3", "exited with status 3"),
        ("sleep 0.1; exit 1", "exited with status 1"),
        ("kill -9 $$", "ended by signal 9"),
    ] {
        let out = dir.path().join("r.json");
        let o = run(
            &[
                "--load",
                load,
                "--policy",
                "other",
                "--duration",
                "400ms",
                "--repeat",
                "2",
            ],
            &out,
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{load}: {err}");
        assert_eq!(err.lines().count(), 1, "{load}: {err}");
        assert!(
            err.contains("1 cells failed") && err.contains(how),
            "{load}: {err}"
        );
        let d: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        let cell = &d["cells"][0];
        assert_eq!(cell["status"], "failed", "{load}: {cell}");
        assert!(cell["reason"].as_str().unwrap().contains(how), "{cell}");
        // No repetition measured after the load ended is kept.
        assert!(
            cell["reps"].as_array().unwrap().is_empty(),
            "{load}: {cell}"
        );
    }
    let out = dir.path().join("missing.json");
    let o = run(&["--load", "/nonexistent/cmd"], &out);
    common::assert_refused(
        &o,
        "missing load",
        "the shell finds no command /nonexistent/cmd",
    );
    assert!(!out.exists());
}
