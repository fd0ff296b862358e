//! `audit --out FILE` as node_exporter's textfile collector sees it: the file is replaced atomically (a
//! reader looping on it only ever reads a whole file some run wrote), concurrent writers do not collide, no
//! temp file is left behind, and a failed audit leaves a file that says so.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use assert_cmd::Command;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

/// One audit of a fixture written to `out`; returns what it printed on stdout (the same text).
fn write_once(out: &Path, format: &str) -> String {
    let o = Command::cargo_bin("preemptlab")
        .unwrap()
        .args(["audit", "--format", format, "--out"])
        .arg(out)
        .arg("--sysroot")
        .arg(fixture("linux-7.0-lazy-debugfs"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn out_is_replaced_atomically_while_a_reader_loops() {
    for (format, file) in [("prometheus", "preemptlab.prom"), ("json", "audit.json")] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(file);
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut seen = BTreeSet::new();
                let mut reads = 0u64;
                // Acquire: pairs with the Release store below, so the last pass starts after the writes.
                while !stop.load(Ordering::Acquire) {
                    if let Ok(text) = std::fs::read_to_string(&path) {
                        seen.insert(text);
                        reads += 1;
                    }
                }
                (seen, reads)
            })
        };
        let mut written = BTreeSet::new();
        for _ in 0..10 {
            written.insert(write_once(&path, format));
        }
        // Two writers at once: each has its own temp name, both succeed, one wins.
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let p = path.clone();
                let f = format.to_string();
                std::thread::spawn(move || write_once(&p, &f))
            })
            .collect();
        for w in writers {
            written.insert(w.join().unwrap());
        }
        stop.store(true, Ordering::Release);
        let (seen, reads) = reader.join().unwrap();
        assert!(reads > 0, "{format}: the reader never saw the file");
        for text in &seen {
            assert!(
                written.contains(text),
                "{format}: the reader saw a file no run wrote whole ({} bytes):\n{text}",
                text.len()
            );
        }
        assert!(written.contains(&std::fs::read_to_string(&path).unwrap()));
        assert_eq!(
            names_in(dir.path()),
            [file],
            "{format}: a temp file was left"
        );
        if format == "json" {
            let doc: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            assert_eq!(doc["schema_version"], 1);
        } else {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.contains("preemptlab_audit_success 1\n"), "{text}");
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode & 0o044,
            0o044,
            "readable by the collector's user: {mode:o}"
        );
    }
}

#[test]
fn a_failed_audit_leaves_a_file_that_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("preemptlab.prom");
    std::fs::write(&path, "preemptlab_audit_success 1\n").unwrap();
    let o = Command::cargo_bin("preemptlab")
        .unwrap()
        .args([
            "audit",
            "--format",
            "prometheus",
            "--sysroot",
            "/nonexistent/dir",
            "--out",
        ])
        .arg(&path)
        .output()
        .unwrap();
    common::assert_refused(&o, "bad --sysroot", "/nonexistent/dir");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("preemptlab_audit_success 0\n"), "{text}");
    assert!(
        text.contains("preemptlab_audit_timestamp_seconds "),
        "{text}"
    );
    assert_eq!(names_in(dir.path()), ["preemptlab.prom"]);
}

#[test]
fn out_in_a_missing_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-dir/preemptlab.prom");
    let o = Command::cargo_bin("preemptlab")
        .unwrap()
        .args(["audit", "--format", "prometheus", "--out"])
        .arg(&path)
        .arg("--sysroot")
        .arg(fixture("preempt-rt"))
        .output()
        .unwrap();
    common::assert_refused(&o, "--out in a missing dir", "does not exist");
    let o = Command::cargo_bin("preemptlab")
        .unwrap()
        .args(["audit", "--format", "json", "--out"])
        .arg(dir.path())
        .arg("--sysroot")
        .arg(fixture("preempt-rt"))
        .output()
        .unwrap();
    common::assert_refused(&o, "--out is a directory", "is a directory");
}
