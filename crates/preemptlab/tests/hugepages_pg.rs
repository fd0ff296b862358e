//! `hugepages` on configurations of real PostgreSQL 15 (throwaway clusters, nothing started): what an
//! operator types for `shared_buffers`, a stopped data directory's arithmetic, the headline against the
//! host's pool, and postgres's own errors in one line (issue 46 item 3).

mod common;

use std::process::{Command, Output};

use assert_cmd::cargo::cargo_bin;
use pgharness::pgcluster::Cluster;
use serde_json::Value;

fn bin() -> hostfacts::pgbin::BinDir {
    hostfacts::pgbin::find(None, Some(15))
        .expect("PostgreSQL 15 server binaries (scripts/test installs postgresql-15)")
}

fn hugepages(args: &[&str]) -> Output {
    Command::new(cargo_bin("preemptlab"))
        .arg("hugepages")
        .args(args)
        .args(["--color", "never"])
        .env("COLUMNS", "200")
        .output()
        .unwrap()
}

fn plan(args: &[&str]) -> Value {
    let o = hugepages(&[args, &["--format", "json"]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    doc["plans"][0]["plan"].clone()
}

/// Regression (issue 46 item 3): `--shared-memory 2GB`, what an operator types for `shared_buffers = 2GB`,
/// gave 1,045 pages where PostgreSQL needs 1,063 for 2 GB of shared_buffers and 200 connections, and
/// `huge_pages = on` would refuse to start. `--shared-buffers 2GB --max-connections 200` gives PostgreSQL's
/// own figure (asked here of another scratch cluster), and `--shared-memory` says it is the whole segment.
#[test]
fn shared_memory_typed_for_shared_buffers_gives_too_few_pages_regression() {
    let c = Cluster::create(bin(), None).expect("a throwaway cluster");
    let s = [
        ("shared_buffers".to_string(), "2GB".to_string()),
        ("max_connections".to_string(), "200".to_string()),
    ];
    let want: u64 = c
        .computed("shared_memory_size_in_huge_pages", &s)
        .unwrap()
        .parse()
        .unwrap();
    let p = plan(&["--shared-buffers", "2GB", "--max-connections", "200"]);
    assert_eq!(p["pages_exact"], want, "{p}");
    assert!(p["pages_needed"].as_u64().unwrap() > want);
    let given = plan(&["--shared-memory", "2GB"]);
    assert!(given["pages_exact"].as_u64().unwrap() < want, "{given}");
    let said = given["arithmetic"].to_string();
    assert!(
        said.contains("the whole shared memory segment") && said.contains("--shared-buffers"),
        "{said}"
    );
    // A value PostgreSQL does not take: its reason, one line, exit 2.
    let o = hugepages(&["--shared-buffers", "2G"]);
    common::assert_refused(
        &o,
        "--shared-buffers 2G",
        "Valid units for this parameter are",
    );
}

/// Regression (issue 46 item 3): for a stopped data directory the arithmetic read `shared_memory_size = 2.00
/// KiB, / 2.00 MiB = 0.00 pages` (PostgreSQL prints the size in MB without a unit), the headline was the
/// host's pool with other instances' pages unsaid, and postgres's errors came as its 2-3 log lines, with a
/// hint about running servers after a permissions error.
#[test]
fn data_dir_arithmetic_headline_and_errors_regression() {
    let c = Cluster::create(bin(), None).expect("a throwaway cluster");
    let data = c.data_dir();
    let d = data.to_str().unwrap();
    let mb: u64 = c
        .computed("shared_memory_size", &[])
        .unwrap()
        .parse()
        .unwrap();
    let p = plan(&["--data-dir", d]);
    let size_line = format!("(shared_memory_size = {}", results::host::Bytes(mb << 20));
    assert!(
        p["arithmetic"].as_array().unwrap().iter().any(|l| l
            .as_str()
            .unwrap()
            .trim_start()
            .starts_with(&size_line)),
        "{size_line}: {}",
        p["arithmetic"]
    );
    // The headline: the directory's own pages, then the host's pool when others need more.
    let o = hugepages(&["--data-dir", d]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let head = format!(
        "stopped instance {d}: {} pages of 2.00 MiB",
        p["pages_needed"]
    );
    assert!(text.starts_with(&head), "{text}");
    if p["pool_target"] != p["pages_needed"] {
        assert!(
            text.contains("this host's pool:") && text.contains("for its other users)"),
            "{text}"
        );
    }
    // A data directory others may write: postgres refuses it; one line, the fix chmod, no hint about
    // running servers.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).unwrap();
    let o = hugepages(&["--data-dir", d]);
    common::assert_refused(&o, "a 0777 data directory", &format!("chmod 0700 {d}"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("FATAL") && !err.contains("must be stopped"),
        "{err}"
    );
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o700)).unwrap();
}
