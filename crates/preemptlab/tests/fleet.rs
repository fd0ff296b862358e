//! `preemptlab fleet` on audits the binary itself writes from fixture trees: the at-risk host first with
//! the fix `hugepages` prints, bad files listed (exit 0), --fail-on, refused input (exit 2, one line).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn run(args: &[&str]) -> Output {
    Command::new(cargo_bin("preemptlab"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn audit_into(dir: &Path, name: &str) -> u64 {
    let o = run(&[
        "audit",
        "--format",
        "json",
        "--sysroot",
        fixture(name).to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(dir.join(format!("{name}.json")), &o.stdout).unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["generated_unix_s"].as_u64().unwrap()
}

fn hugepages_fix(name: &str) -> String {
    let o = run(&[
        "hugepages",
        "--format",
        "json",
        "--sysroot",
        fixture(name).to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["plans"][0]["plan"]["sysctl_lines"][0]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn at_risk_first_with_the_hugepages_fix_and_bad_files_listed() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = 0;
    for name in [
        "debian-6.1-voluntary",
        "preempt-rt",
        "linux-7.0-lazy-debugfs",
        "this-machine-pg15-4k",
    ] {
        t = audit_into(dir.path(), name);
    }
    std::fs::write(dir.path().join("corrupt.json"), "{\"schema_version\": 1,").unwrap();
    std::fs::write(
        dir.path().join("notes.txt"),
        "not an audit, not *.json: skipped",
    )
    .unwrap();
    let now = (t + 3600).to_string();
    let d = dir.path().to_str().unwrap();

    let o = run(&["fleet", d, "--format", "json", "--now", &now]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["totals"]["files"], 5);
    assert_eq!(v["totals"]["hosts"], 4);
    assert_eq!(v["hosts"][0]["host"], "linux-7.0-lazy-debugfs");
    assert_eq!(v["hosts"][0]["verdict"], "at-risk");
    let fix = hugepages_fix("linux-7.0-lazy-debugfs");
    assert_eq!(fix, "sysctl -w vm.nr_hugepages=549");
    assert_eq!(v["not_on_huge_pages"][0]["host"], "linux-7.0-lazy-debugfs");
    // The same command: fleet adds what the host's target is made of as a comment.
    let fleet_fix = v["not_on_huge_pages"][0]["fix"][0].as_str().unwrap();
    assert!(
        fleet_fix.starts_with(&format!("{fix}   # 549 pages")),
        "{fleet_fix}"
    );
    assert_eq!(v["not_on_huge_pages"][0]["sizing"]["pool_target"], 549);
    assert_eq!(v["failed"][0]["file"], format!("{d}/corrupt.json"));
    assert!(v["stale"].as_array().unwrap().is_empty());

    // Ten days later every audit is stale; --stale-after widens the window.
    let later = (t + 10 * 86_400).to_string();
    let v: Value =
        serde_json::from_slice(&run(&["fleet", d, "--format", "json", "--now", &later]).stdout)
            .unwrap();
    assert_eq!(v["totals"]["stale"], 4);
    let v: Value = serde_json::from_slice(
        &run(&[
            "fleet",
            d,
            "--format",
            "json",
            "--now",
            &later,
            "--stale-after",
            "2w",
        ])
        .stdout,
    )
    .unwrap();
    assert_eq!(v["totals"]["stale"], 0);

    let table = run(&["fleet", d, "--now", &now]);
    let text = String::from_utf8_lossy(&table.stdout);
    let first_host = text
        .lines()
        .skip_while(|l| !l.starts_with("Hosts, at risk first"))
        .nth(3)
        .unwrap_or_default();
    assert!(
        first_host
            .trim_start()
            .starts_with("linux-7.0-lazy-debugfs "),
        "{text}"
    );
    assert!(text.contains(&fix), "{text}");
    assert!(text.contains("corrupt.json: not JSON"), "{text}");

    let md = run(&["fleet", d, "--now", &now, "--format", "markdown"]);
    assert!(String::from_utf8_lossy(&md.stdout)
        .contains("| at-risk | 7.0.2 | lazy | linux-7.0-lazy-debugfs |"));

    assert_eq!(
        run(&["fleet", d, "--now", &now, "--fail-on", "critical"])
            .status
            .code(),
        Some(1)
    );
    let one = format!("{d}/debian-6.1-voluntary.json");
    assert_eq!(
        run(&["fleet", &one, "--now", &now, "--fail-on", "warn"])
            .status
            .code(),
        Some(0)
    );
}

#[test]
fn refused_input() {
    let empty = tempfile::tempdir().unwrap();
    let e = empty.path().to_str().unwrap();
    common::assert_refused(&run(&["fleet", e]), "empty dir", "no *.json audit files");
    common::assert_refused(
        &run(&["fleet", "/nonexistent/audits"]),
        "missing",
        "/nonexistent/audits",
    );
    common::assert_refused(
        &run(&["fleet", e, "--stale-after", "2"]),
        "stale unit",
        "--stale-after",
    );
    common::assert_refused(&run(&["fleet", e, "--now", "yesterday"]), "now", "--now");
    common::assert_refused(&run(&["fleet"]), "no paths", "DIR|FILE");
}

/// An audit the binary writes of `fixture` as if read on the host itself (no `--sysroot`), under the
/// kernel host name `hostname`, `--inventory-name` as given, written at `t`.
fn clone_audit(
    dir: &Path,
    file: &str,
    name: &str,
    hostname: &str,
    inventory: Option<&str>,
    t: u64,
) {
    let root = fixture(name);
    let mut args = vec![
        "audit",
        "--format",
        "json",
        "--sysroot",
        root.to_str().unwrap(),
    ];
    if let Some(i) = inventory {
        args.extend(["--inventory-name", i]);
    }
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v.as_object_mut().unwrap().remove("sysroot");
    v["hostname"]["value"] = Value::from(hostname);
    v["generated_unix_s"] = Value::from(t);
    std::fs::write(dir.join(file), serde_json::to_vec(&v).unwrap()).unwrap();
}

/// Issue 25: two hosts whose kernel host name is the same (`localhost`, cloned images) were merged: the
/// at-risk one was shown under "older audits ignored" and `fleet --fail-on critical` exited 0. Hosts are
/// told apart by their host ID (the machine ID, hashed) and inventory name, never the kernel's host name.
#[test]
fn two_hosts_named_localhost_stay_two_regression() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // The at-risk host's audit is the older one.
    clone_audit(
        dir.path(),
        "a.json",
        "linux-7.0-lazy-debugfs",
        "localhost",
        None,
        1_000,
    );
    clone_audit(
        dir.path(),
        "b.json",
        "debian-6.1-voluntary",
        "localhost",
        None,
        2_000,
    );
    let now = "3000";
    let o = run(&["fleet", d, "--now", now, "--format", "json"]);
    let f: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(f["totals"]["hosts"], 2, "{}", f["hosts"]);
    assert!(f["superseded"].as_array().unwrap().is_empty(), "{f}");
    assert_eq!(f["hosts"][0]["verdict"], "at-risk");
    assert_eq!(f["hosts"][0]["hostname"], "localhost");
    let o = run(&["fleet", d, "--now", now, "--fail-on", "critical"]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    // One machine ID (a clone that kept it) under two inventory names: two hosts, shown by those names.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    clone_audit(
        dir.path(),
        "db1.json",
        "debian-6.1-voluntary",
        "localhost",
        Some("db1"),
        1_000,
    );
    clone_audit(
        dir.path(),
        "db2.json",
        "debian-6.1-voluntary",
        "localhost",
        Some("db2"),
        2_000,
    );
    let f: Value =
        serde_json::from_slice(&run(&["fleet", d, "--now", now, "--format", "json"]).stdout)
            .unwrap();
    assert_eq!(f["totals"]["hosts"], 2, "{}", f["hosts"]);
    let mut names: Vec<&str> = f["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["db1", "db2"]);
    let table = String::from_utf8_lossy(&run(&["fleet", d, "--now", now]).stdout).to_string();
    assert!(table.contains("db1 (host name localhost)"), "{table}");

    // The same host audited twice is still one host, the newer audit winning.
    clone_audit(
        dir.path(),
        "db1-again.json",
        "debian-6.1-voluntary",
        "localhost",
        Some("db1"),
        2_500,
    );
    let f: Value =
        serde_json::from_slice(&run(&["fleet", d, "--now", now, "--format", "json"]).stdout)
            .unwrap();
    assert_eq!(f["totals"]["hosts"], 2, "{}", f["hosts"]);
    assert_eq!(
        f["superseded"].as_array().unwrap().len(),
        1,
        "{}",
        f["superseded"]
    );
}

/// Regression (issue 29): a host name with a newline split the fleet table's row, and one with escape bytes
/// reached the terminal raw (terminal injection from an untrusted audit file). Every string from an audit
/// is shown as an escape in the table, Markdown and HTML, never sent.
#[test]
fn strings_from_audit_files_are_shown_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let t = audit_into(dir.path(), "linux-7.0-lazy-debugfs");
    audit_into(dir.path(), "debian-6.1-voluntary");
    let p = dir.path().join("linux-7.0-lazy-debugfs.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let evil = "db1\n\u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}evil";
    v["hostname"]["value"] = Value::from(evil);
    std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
    let d = dir.path().to_str().unwrap();
    let now = (t + 60).to_string();
    for format in ["table", "markdown"] {
        let o = run(&["fleet", d, "--format", format, "--now", &now]);
        assert_eq!(o.status.code(), Some(0), "{format}");
        let text = String::from_utf8(o.stdout).unwrap();
        for bad in ['\u{1b}', '\u{7}', '\u{202e}'] {
            assert!(!text.contains(bad), "{format}: {bad:?} sent: {text}");
        }
        assert!(
            text.contains(r"db1\n\u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}evil"),
            "{format}: {text}"
        );
        // The row stays one line.
        assert!(!text.lines().any(|l| l.trim() == "evil"), "{text}");
    }
    let html = dir.path().join("page.html");
    let o = run(&["report", d, "-o", html.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains('\u{1b}') && !page.contains('\u{202e}'));
    assert!(page.contains(r"\u{1b}[2J"), "the host name is shown");
}

/// Regression (issue 46 item 2): fleet's Markdown "By kernel and preemption model" table did not escape `|`
/// in the kernel column, which split the row into more columns than its head.
#[test]
fn fleet_markdown_kernel_column_pipe_not_escaped_regression() {
    let dir = tempfile::tempdir().unwrap();
    let t = audit_into(dir.path(), "linux-7.0-lazy-debugfs");
    let p = dir.path().join("linux-7.0-lazy-debugfs.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v["kernel"]["release"]["value"] = Value::from("7.0.2|custom");
    std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
    let now = (t + 60).to_string();
    let o = run(&[
        "fleet",
        dir.path().to_str().unwrap(),
        "--format",
        "markdown",
        "--now",
        &now,
    ]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8(o.stdout).unwrap();
    let table = text
        .split("### By kernel and preemption model")
        .nth(1)
        .expect("the table")
        .split("\n\n###")
        .next()
        .unwrap();
    // Columns: the `|` not preceded by a backslash.
    let columns = |l: &str| {
        l.match_indices('|')
            .filter(|(i, _)| !l[..*i].ends_with('\\'))
            .count()
    };
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
    assert!(rows.len() >= 3, "{table}");
    assert!(rows.iter().any(|l| l.contains("7.0.2\\|custom")), "{table}");
    assert!(
        rows.iter().all(|l| columns(l) == columns(rows[0])),
        "{table}"
    );
}

/// Regression (issue 46 item 12): the fix blocks called pasteable held lines that are no shell
/// (`postgresql.conf: huge_pages = on`, `restart PostgreSQL, then: ...`, `on HOST: preemptlab ...`): every
/// fix line of the audits of every fixture, and of the fleet over them, is a command or a comment.
#[test]
fn fix_block_called_pasteable_holds_lines_that_are_not_shell_regression() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = std::fs::read_dir(fixture("")).unwrap();
    let mut t = 0;
    let mut lines = Vec::new();
    for e in fixtures.map(|e| e.unwrap()).filter(|e| e.path().is_dir()) {
        let name = e.file_name().into_string().unwrap();
        t = audit_into(dir.path(), &name);
        let v: Value = serde_json::from_slice(
            &std::fs::read(dir.path().join(format!("{name}.json"))).unwrap(),
        )
        .unwrap();
        for f in v["findings"].as_array().unwrap() {
            lines.extend(
                f["fix"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_str().unwrap().to_string()),
            );
        }
    }
    let now = (t + 60).to_string();
    let o = run(&[
        "fleet",
        dir.path().to_str().unwrap(),
        "--format",
        "json",
        "--now",
        &now,
    ]);
    let fleet: Value = serde_json::from_slice(&o.stdout).unwrap();
    for i in fleet["not_on_huge_pages"].as_array().unwrap() {
        lines.extend(
            i["fix"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_string()),
        );
    }
    assert!(
        lines.iter().any(|l| l.contains("huge_pages = on")),
        "{lines:#?}"
    );
    let bad: Vec<String> = lines
        .iter()
        .filter_map(|l| common::not_pasteable(l))
        .collect();
    assert!(bad.is_empty(), "{bad:#?}");
}

/// Regression (issue 29 item 6): a FIFO named `x.json` hung `fleet` and `results`; `fleet --fail-on warn`
/// over audits of which none could be read exited 0 (a gate that passes when nothing was assessed);
/// `results` left out files it could not read. Now the FIFO is listed (at once), the gate fails with one
/// line, and `results` names each file it did not read.
#[test]
fn fifos_and_unreadable_files_are_listed_and_nothing_assessed_fails_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("x.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path in this test's own temp dir.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::fs::write(dir.path().join("garbage.json"), "not json").unwrap();
    let d = dir.path().to_str().unwrap();
    let t = std::time::Instant::now();
    let o = run(&["fleet", d, "--format", "json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let failed = v["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 2, "{v}");
    let fifo_row = failed
        .iter()
        .find(|f| f["file"].as_str().unwrap().ends_with("x.json"))
        .unwrap();
    assert!(
        fifo_row["reason"]
            .as_str()
            .unwrap()
            .contains("a FIFO, not a regular file"),
        "{fifo_row}"
    );
    // Named directly too: refused without waiting for a writer.
    let o = run(&["fleet", fifo.to_str().unwrap(), "--fail-on", "warn"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("no audit could be assessed"), "{err}");
    let o = run(&["fleet", d, "--fail-on", "warn"]);
    assert_eq!(o.status.code(), Some(1));
    let o = run(&["results", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("not read: {}: a FIFO", fifo.display())),
        "{text}"
    );
    assert!(text.contains("garbage.json: "), "{text}");
    assert!(t.elapsed() < std::time::Duration::from_secs(20), "no hang");
}
