//! The audit against a real PostgreSQL started by the test: found with and without --pg, on huge pages
//! or not as configured, and `hugepages` agreeing with PostgreSQL's own figure.

mod common;

use std::process::Command;
use std::sync::Mutex;

use assert_cmd::cargo::cargo_bin;
use pgharness::pgcluster::Cluster;
use serde_json::Value;

/// Tests that change the hugetlb pool run one at a time.
static POOL: Mutex<()> = Mutex::new(());

fn bin() -> hostfacts::pgbin::BinDir {
    hostfacts::pgbin::find(None, Some(15))
        .expect("PostgreSQL server binaries (scripts/test installs postgresql-15)")
}

fn audit_json(extra: &[&str]) -> Value {
    let out = Command::new(cargo_bin("preemptlab"))
        .arg("audit")
        .args(["--format", "json"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "audit failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn instance(doc: &Value, pid: u32) -> &Value {
    doc["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["postmaster_pid"] == pid)
        .unwrap_or_else(|| panic!("postmaster {pid} not found in {doc}"))
}

fn settings(sb: &str, hp: &str) -> Vec<(String, String)> {
    vec![
        ("shared_buffers".into(), sb.into()),
        ("huge_pages".into(), hp.into()),
        ("max_connections".into(), "20".into()),
    ]
}

#[test]
fn finds_instance_off_huge_pages_with_and_without_pg() {
    let _l = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Cluster::create(bin(), None).unwrap();
    c.start(&settings("256MB", "off")).unwrap();
    let pid = c.postmaster_pid().unwrap();

    let doc = audit_json(&[]);
    let inst = instance(&doc, pid);
    assert_eq!(inst["on_huge_pages"]["value"], false);
    assert_eq!(inst["version"]["value"], "15");
    assert_eq!(
        inst["data_dir"]["value"],
        c.data_dir().display().to_string()
    );
    assert_eq!(
        inst["settings"]["huge_pages"]["value"], "off",
        "from the command line"
    );
    let seg_kib = inst["segment"]["value"]["size_kib"].as_u64().unwrap();
    assert!(
        seg_kib > 256 * 1024,
        "segment {seg_kib} kB holds 256MB of buffers"
    );
    assert!(inst["page_tables_kib"].as_u64().unwrap() > 0);

    let doc = audit_json(&["--pg", &c.dsn("postgres")]);
    let inst = instance(&doc, pid);
    let server = &inst["server"]["settings"];
    assert_eq!(server["huge_pages"]["setting"], "off");
    assert_eq!(server["shared_buffers"]["setting"], "32768"); // 256MB in 8kB units
    assert_eq!(inst["settings"]["max_connections"]["value"], "20");
    assert_eq!(
        inst["settings"]["max_connections"]["source"],
        "--pg pg_settings"
    );
    assert!(doc["unmatched_servers"].as_array().unwrap().is_empty());

    // hugepages agrees with PostgreSQL's own figure for the running server (plus the margin).
    let pages: u64 = server["shared_memory_size_in_huge_pages"]["setting"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let out = Command::new(cargo_bin("preemptlab"))
        .args(["hugepages", "--format", "json", "--pg", &c.dsn("postgres")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let plan = &plan["plans"][0]["plan"];
    assert_eq!(plan["pages_exact"].as_u64().unwrap(), pages);
    assert_eq!(
        plan["pages_needed"].as_u64().unwrap(),
        pages + hostfacts::hugepages::sizing::margin(pages)
    );

    // And for the stopped server, through postgres -C, which reads the configuration files (not the -c
    // options the server was started with): put the same settings there.
    c.stop().unwrap();
    std::fs::write(
        c.data_dir().join("postgresql.auto.conf"),
        "shared_buffers = '256MB'\nmax_connections = 20\nhuge_pages = off\n",
    )
    .unwrap();
    let out = Command::new(cargo_bin("preemptlab"))
        .args(["hugepages", "--format", "json", "--data-dir"])
        .arg(c.data_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        plan["plans"][0]["plan"]["pages_exact"].as_u64().unwrap(),
        pages,
        "postgres -C gives the same figure"
    );

    // Debian's layout (regression, issue 25): the configuration files in a directory of their own whose
    // postgresql.conf names the data directory. Given that directory, the same figure; given the data
    // directory, which no longer holds a postgresql.conf, a one-line error naming the fix.
    let data = c.data_dir();
    let conf = c.root().join("etc-15-main");
    std::fs::create_dir(&conf).unwrap();
    for f in ["postgresql.conf", "pg_hba.conf", "pg_ident.conf"] {
        std::fs::rename(data.join(f), conf.join(f)).unwrap();
    }
    let mut text = std::fs::read_to_string(conf.join("postgresql.conf")).unwrap();
    text.push_str(&format!("\ndata_directory = '{}'\n", data.display()));
    std::fs::write(conf.join("postgresql.conf"), text).unwrap();
    let owner = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&data).unwrap());
    for p in [
        conf.clone(),
        conf.join("postgresql.conf"),
        conf.join("pg_hba.conf"),
        conf.join("pg_ident.conf"),
    ] {
        std::os::unix::fs::chown(&p, Some(owner), None).unwrap();
    }
    let out = Command::new(cargo_bin("preemptlab"))
        .args(["hugepages", "--format", "json", "--data-dir"])
        .arg(&conf)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        plan["plans"][0]["plan"]["pages_exact"].as_u64().unwrap(),
        pages,
        "the configuration directory gives the same figure"
    );
    let out = Command::new(cargo_bin("preemptlab"))
        .args(["hugepages", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("a data directory without postgresql.conf") && err.trim().lines().count() == 1,
        "{err}"
    );
    c.remove().unwrap();
}

#[test]
fn on_huge_pages_over_a_reserved_pool() {
    let _l = POOL.lock().unwrap_or_else(|e| e.into_inner());
    // Pages for the server, through the pool record as a run takes them (given back when the test ends, on
    // any starting pool; regression: the test wrote nr_hugepages by hand and put back a size that counted
    // surplus pages).
    let _pool = hostguard::hugetlb_pool::PoolGuard::ensure_free(2048, 150)
        .expect("150 free 2 MB pages for the server (tests run as root)");
    let mut c = Cluster::create(bin(), None).unwrap();
    c.start(&settings("256MB", "on")).unwrap();
    let pid = c.postmaster_pid().unwrap();
    let doc = audit_json(&["--pg", &c.dsn("postgres")]);
    let inst = instance(&doc, pid);
    assert_eq!(inst["on_huge_pages"]["value"], true, "{inst}");
    assert_eq!(inst["segment"]["value"]["kernel_page_size_kib"], 2048);
    // The pool target counts the instance's own pages in its need, and the pages this test's share added
    // as preemptlab's (temporary), not as another user's.
    let t = doc["pool_targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["page_size_kib"] == 2048)
        .unwrap_or_else(|| panic!("no 2 MB pool target in {}", doc["pool_targets"]));
    let need = t["needs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["postmaster_pid"] == pid)
        .unwrap_or_else(|| panic!("instance {pid} not in {t}"));
    let seg_pages = inst["segment"]["value"]["size_kib"].as_u64().unwrap() / 2048;
    assert_eq!(need["own_pages"], seg_pages, "{t}");
    assert!(t["added_by_preemptlab"].as_u64().unwrap() <= 150, "{t}");
    let ids: Vec<&str> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["instance"] == pid)
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert!(
        !ids.contains(&"preempt-4k-shm") && !ids.contains(&"huge-pages-try-fallback"),
        "{ids:?}"
    );
    c.remove().unwrap();
}

/// `check --quick --pg DSN` against an instance that fell back to 4 KB pages (`huge_pages = try`, empty
/// pool) cannot compare with huge pages here, yet ends with the huge-page fix and its exact pool size, the
/// same as the audit's finding and `hugepages --pg` (regression: it ended with an empty list of fixes).
#[test]
fn check_without_a_pool_still_gives_the_exact_huge_page_fix() {
    let _l = POOL.lock().unwrap_or_else(|e| e.into_inner());
    // No page available (the operator's pages in use stay; regression: the pool was set to 0 by hand).
    let _pool = common::hugetlb::EmptyPool::make();
    let mut c = Cluster::create(bin(), None).unwrap();
    c.start(&settings("128MB", "try")).unwrap();
    let dsn = c.dsn("postgres");
    let pid = c.postmaster_pid().unwrap();

    let doc = audit_json(&["--pg", &dsn]);
    // This cluster's finding: another PostgreSQL on the host (the operator's) may have one too (issue 29).
    let finding = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "huge-pages-try-fallback" && f["instance"] == pid)
        .unwrap_or_else(|| panic!("no fallback finding in {}", doc["findings"]));
    let target = finding["pool"]["pool_target"].as_u64().unwrap();
    assert_eq!(
        finding["pool"]["basis"], "postgres",
        "--pg gives PostgreSQL's own figure"
    );
    let line = format!("sysctl -w vm.nr_hugepages={target}");
    assert!(
        finding["fix"][0].as_str().unwrap().starts_with(&line),
        "{}",
        finding["fix"]
    );

    let out = Command::new(cargo_bin("preemptlab"))
        .args(["hugepages", "--format", "json", "--pg", &dsn])
        .output()
        .unwrap();
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        plan["plans"][0]["plan"]["pool_target"].as_u64().unwrap(),
        target
    );

    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(cargo_bin("preemptlab"))
        .args([
            "check",
            "--quick",
            "--bench-beside-load",
            "--pg",
            &dsn,
            "--out",
        ])
        .arg(dir.path().join("check.json"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fixes = &text[text
        .find("Fixes, most effective first:")
        .expect("a fix list")..];
    assert!(
        fixes.contains(". put PostgreSQL's shared memory on huge pages"),
        "{fixes}"
    );
    assert!(fixes.contains(&line), "the exact pool size in:\n{fixes}");
    eprintln!("{text}");
    assert!(fixes.contains("not measured here"), "{fixes}");
    c.remove().unwrap();
}

/// Issue 25: the timer's `--pg` example (`/etc/default/preemptlab`: a unix-socket DSN with
/// `user=postgres`, the audit run as root) works under peer authentication, Debian's default for local
/// connections; and a `--pg` that fails leaves the rest of the audit standing, with the failure as a
/// finding and a metric, where the whole audit used to fail and every metric of the host disappeared.
#[test]
fn pg_under_peer_authentication_and_a_pg_that_fails() {
    let _l = POOL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = Cluster::create(bin(), None).unwrap();
    std::fs::write(c.data_dir().join("pg_hba.conf"), "local all all peer\n").unwrap();
    c.start(&settings("128MB", "off")).unwrap();
    let pid = c.postmaster_pid().unwrap();

    // The packaged example's form, pointed at this cluster's socket.
    let example = format!(
        "postgresql:///postgres?host={}&port={}&user={}",
        c.socket_dir().display(),
        c.port(),
        c.run_as().user
    );
    let doc = audit_json(&["--pg", &example]);
    let inst = instance(&doc, pid);
    assert_eq!(
        inst["server"]["settings"]["huge_pages"]["setting"], "off",
        "asked the server: {inst}"
    );
    assert!(doc.get("pg_failures").is_none(), "{}", doc["pg_failures"]);

    // A role that peer authentication does not admit: the rest of the audit stands.
    let refused = format!(
        "host={} port={} user=preemptlab_no_such_role dbname=postgres",
        c.socket_dir().display(),
        c.port()
    );
    let dir = tempfile::tempdir().unwrap();
    let prom = dir.path().join("preemptlab.prom");
    let out = Command::new(cargo_bin("preemptlab"))
        .args(["audit", "--format", "prometheus", "--pg", &refused, "--out"])
        .arg(&prom)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("pg-query-failed"), "{err}");
    let text = std::fs::read_to_string(&prom).unwrap();
    for line in [
        "preemptlab_audit_success 1".to_string(),
        "preemptlab_pg_query_failures 1".to_string(),
        format!("postmaster_pid=\"{pid}\""),
    ] {
        assert!(text.contains(&line), "{line} in:\n{text}");
    }
    assert!(text.contains("id=\"pg-query-failed\""), "{text}");
    let doc = audit_json(&["--pg", &refused]);
    instance(&doc, pid);
    let f = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "pg-query-failed")
        .expect("a pg-query-failed finding");
    assert!(
        f["evidence"][0]
            .as_str()
            .unwrap()
            .contains("authentication failed"),
        "{f}"
    );
    assert_eq!(doc["pg_failures"][0]["dsn"], refused.as_str());
    c.remove().unwrap();
}
