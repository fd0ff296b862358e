//! `bench net`: real sockets over loopback and over a veth pair between namespaces; the namespace and the
//! veth pair are gone afterwards, SIGINT included; without root `--netns` says so; bad input is exit 2.

mod common;

use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

static ONE: Mutex<()> = Mutex::new(());

fn net(args: &[&str], out: &std::path::Path) -> Output {
    Command::new(cargo_bin("preemptlab"))
        .args(["bench", "net", "--quiet", "--format", "json", "--out"])
        .arg(out)
        .args(args)
        .output()
        .unwrap()
}

/// Namespaces and veth links this tool creates (named preemptlab-<pid>, plh<n>/pln<n>).
fn leftovers() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/run/netns")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with("preemptlab-"))
                .collect()
        })
        .unwrap_or_default();
    if let Ok(rd) = std::fs::read_dir("/sys/class/net") {
        v.extend(
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with("plh") || n.starts_with("pln")),
        );
    }
    v
}

fn settle_clean() {
    let t = Instant::now();
    while !leftovers().is_empty() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(leftovers(), Vec::<String>::new(), "namespace or veth left");
}

#[test]
fn loopback_cells_are_well_formed() {
    let _l = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let o = net(
        &[
            "--tests",
            "tcp-stream,udp-stream,tcp-pingpong,udp-pingpong",
            "--msg-sizes",
            "1K",
            "--duration",
            "500ms",
            "--repeat",
            "2",
        ],
        &dir.path().join("r.json"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["kind"], "bench-net");
    let cells = d["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        assert_eq!(c["status"], "ok", "{c}");
        assert_eq!(c["path"], "loopback");
        for r in c["reps"].as_array().unwrap() {
            let (s, rcv) = (
                r["sender_bytes_per_s"].as_f64().unwrap(),
                r["receiver_bytes_per_s"].as_f64().unwrap(),
            );
            assert!(s > 1e5 && rcv > 0.0 && rcv <= s * 1.001, "{r}");
            assert!(
                r["client"]["user_s"].as_f64().unwrap() + r["client"]["sys_s"].as_f64().unwrap()
                    > 0.0
            );
            assert!(r["client_counters"]["OutSegs"].is_i64());
        }
        if c["test"].as_str().unwrap().ends_with("pingpong") {
            let rtt = &c["reps"][0]["rtt_us"];
            assert!(
                rtt["p50"].as_f64().unwrap() <= rtt["p99"].as_f64().unwrap(),
                "{rtt}"
            );
        }
        if c["test"] == "udp-stream" {
            let loss = c["reps"][0]["udp_loss"].as_f64().unwrap();
            assert!((0.0..1.0).contains(&loss), "{loss}");
        }
    }
}

#[test]
fn netns_path_is_created_used_and_removed() {
    let _l = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let o = net(
        &[
            "--netns",
            "--tests",
            "tcp-stream,udp-pingpong",
            "--msg-sizes",
            "16K",
            "--duration",
            "500ms",
            "--repeat",
            "1",
        ],
        &dir.path().join("r.json"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    for c in d["cells"].as_array().unwrap() {
        assert_eq!(c["status"], "ok", "{c}");
        assert_eq!(c["path"], "netns");
        // Over veth the server side has its own namespace: its counters are its own.
        assert!(c["reps"][0]["server_counters"].is_object());
    }
    let s = &d["cells"][0]["reps"][0];
    assert!(s["sender_bytes_per_s"].as_f64().unwrap() > 1e6);
    settle_clean();
}

#[test]
fn sigint_with_netns_leaves_nothing() {
    stop_with_netns_leaves_nothing(libc::SIGINT, false);
}

/// A dropped ssh session: SIGHUP to the whole foreground process group (the bench and its server threads).
#[test]
fn sighup_with_netns_leaves_nothing() {
    stop_with_netns_leaves_nothing(libc::SIGHUP, true);
}

fn stop_with_netns_leaves_nothing(sig: i32, group: bool) {
    use std::os::unix::process::CommandExt;
    let _l = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(cargo_bin("preemptlab"))
        .args([
            "bench",
            "net",
            "--quiet",
            "--netns",
            "--tests",
            "tcp-stream",
            "--msg-sizes",
            "16K",
            "--duration",
            "30s",
            "--out",
        ])
        .arg(dir.path().join("r.json"))
        .stdout(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let t = Instant::now();
    while leftovers().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "no namespace appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    let target = if group {
        -(child.id() as i32)
    } else {
        child.id() as i32
    };
    // SAFETY: signalling our own child (or its process group: it and its children).
    unsafe { libc::kill(target, sig) };
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(128 + sig));
    settle_clean();
}

#[test]
fn bad_input_and_no_root() {
    let _l = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["--msg-sizes", "12Q"], "--msg-sizes 12Q"),
        (vec!["--msg-sizes", "0"], "--msg-sizes 0"),
        (vec!["--tests", "sctp-stream"], "--tests sctp-stream"),
        (vec!["--duration", "never"], "--duration"),
        (vec!["--streams", "0"], "--streams 0"),
    ] {
        let o = net(&args, &dir.path().join("x.json"));
        common::assert_refused(&o, &format!("{args:?}"), want);
    }
    // A 64K UDP datagram cannot exist: that cell is skipped with the reason, the others run.
    let o = net(
        &[
            "--tests",
            "udp-stream",
            "--msg-sizes",
            "1K,64K",
            "--duration",
            "200ms",
            "--repeat",
            "1",
        ],
        &dir.path().join("u.json"),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(d["cells"][0]["status"], "ok");
    assert_eq!(d["cells"][1]["status"], "skipped");
    assert!(d["cells"][1]["reason"].as_str().unwrap().contains("65507"));
    let mut c = Command::new(cargo_bin("preemptlab"));
    c.args(["bench", "net", "--netns", "--out"])
        .arg(dir.path().join("y.json"));
    std::os::unix::process::CommandExt::uid(&mut c, 65534);
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("run as root"));
    assert!(leftovers().is_empty());
}

/// Regression (issue 29): a run that died after its first cell (a closed stderr panicked it) left a
/// 1-cell result marked `"interrupted": false`. The file written after each cell says interrupted until
/// the matrix completes: a run killed outright (SIGKILL, nothing can clean up) leaves a partial file that
/// says so; a run that completes says false.
#[test]
fn a_run_killed_mid_matrix_leaves_a_file_marked_interrupted() {
    let _l = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let mut child = Command::new(cargo_bin("preemptlab"))
        .args(["bench", "net", "--quiet", "--out"])
        .arg(&out)
        .args([
            "--tests",
            "tcp-stream,udp-stream,tcp-pingpong",
            "--msg-sizes",
            "1K",
            "--duration",
            "1s",
            "--repeat",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let cells = |v: &Value| v["cells"].as_array().map_or(0, |c| c.len());
    let t = Instant::now();
    let partial = loop {
        let v: Option<Value> = std::fs::read(&out)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(v) = v.filter(|v| cells(v) >= 1) {
            break v;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "no cell written");
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(cells(&partial) < 3, "{partial}");
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(cells(&v) < 3, "{v}");
    assert_eq!(v["interrupted"], true, "{v}");
    let o = net(
        &[
            "--tests",
            "tcp-stream",
            "--msg-sizes",
            "1K",
            "--duration",
            "200ms",
            "--repeat",
            "1",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["interrupted"], false, "{v}");
}
