//! Other PostgreSQL major versions than this host's, each in the Debian userland it is built for, run as a
//! container runs it (its own root, mount and PID namespaces: `unshare` + `chroot` into the root
//! scripts/pg-root makes) and seen from the host: the audit reads its version and settings through its root,
//! and a diagnosis under load names its functions and samples its wait events over `--pg`. Root.
//!
//! scripts/test makes the roots first (cached); without them the tests fail naming the command.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use osutil::child::Child;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn root_of(version: u32) -> PathBuf {
    let out = Command::new(repo().join("scripts/pg-root"))
        .args([&version.to_string(), "path"])
        .output()
        .unwrap();
    let root = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        root.join(".preemptlab-complete").exists(),
        "{}: no PostgreSQL {version} root; make it with scripts/pg-root {version} (scripts/test does)",
        root.display()
    );
    root
}

/// A user id and group id of `user` in `root`'s /etc/passwd.
fn ids(root: &Path, user: &str) -> (u32, u32) {
    let passwd = std::fs::read_to_string(root.join("etc/passwd")).unwrap();
    let l = passwd
        .lines()
        .find(|l| l.starts_with(&format!("{user}:")))
        .unwrap_or_else(|| panic!("no {user} in {}/etc/passwd", root.display()));
    let f: Vec<&str> = l.split(':').collect();
    (f[2].parse().unwrap(), f[3].parse().unwrap())
}

/// PostgreSQL `version` from its root, in `unshare --mount --pid --fork`: the root bind-mounted on itself
/// and entered with chroot, its /proc, a data directory of the test's bind-mounted in, the socket directory
/// a tmpfs only it sees. Killed with its namespace when dropped.
struct Server {
    pm: u32,
    port: u16,
    shell: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(version: u32) -> Server {
        let root = root_of(version);
        let (uid, gid) = ids(&root, "postgres");
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::os::unix::fs::chown(&data, Some(uid), Some(gid)).unwrap();
        let port = 5100 + version as u16;
        let bin = format!("/usr/lib/postgresql/{version}/bin");
        let r = root.display();
        let d = data.display();
        let script = format!(
            "set -e\nmount --bind {r} {r}\nmount -t proc proc {r}/proc\nmount -t tmpfs tmpfs {r}/tmp\n\
             mkdir -p {r}/tmp/data {r}/tmp/run && chmod 1777 {r}/tmp/run\nmount --bind {d} {r}/tmp/data\n\
             chroot {r} setpriv --reuid={uid} --regid={gid} --clear-groups {bin}/initdb -D /tmp/data \
             --auth=trust -U postgres >/dev/null\n\
             exec chroot {r} setpriv --reuid={uid} --regid={gid} --clear-groups {bin}/postgres -D /tmp/data \
             -p {port} -c listen_addresses= -c unix_socket_directories=/tmp/run -c shared_buffers=128MB \
             -c max_connections=30 -c fsync=off\n"
        );
        let shell = Command::new("unshare")
            .args(["--mount", "--pid", "--fork", "--propagation", "private"])
            .args(["sh", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let mut pm = None;
        while started.elapsed() < Duration::from_secs(90) {
            std::thread::sleep(Duration::from_millis(300));
            let kids = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", shell.id()))
                .unwrap_or_default();
            let Some(p) = kids
                .split_whitespace()
                .filter_map(|w| w.parse::<u32>().ok())
                .next()
            else {
                continue;
            };
            let comm = std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
            let sock = PathBuf::from(format!("/proc/{p}/root/tmp/run/.s.PGSQL.{port}"));
            if comm.trim() == "postgres" && sock.exists() && psql(p, port, "SELECT 1").is_some() {
                pm = Some(p);
                break;
            }
        }
        let pm =
            pm.unwrap_or_else(|| panic!("PostgreSQL {version} started in its root within 90 s"));
        Server {
            pm,
            port,
            shell,
            _dir: dir,
        }
    }

    fn socket(&self) -> String {
        format!("/proc/{}/root/tmp/run", self.pm)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: kill has no memory preconditions; the PID is the server this test started.
        unsafe { libc::kill(self.pm as i32, libc::SIGINT) };
        let t = Instant::now();
        while Path::new(&format!("/proc/{}", self.pm)).exists()
            && t.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}

/// This host's psql (PostgreSQL 15's client speaks to 13 and 17 alike) through the server's socket.
fn psql(pm: u32, port: u16, sql: &str) -> Option<String> {
    let out = Command::new("psql")
        .args([
            "-h",
            &format!("/proc/{pm}/root/tmp/run"),
            "-p",
            &port.to_string(),
        ])
        .args(["-U", "postgres", "-At", "-c", sql, "postgres"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn check(version: u32) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let s = Server::start(version);
    let pgbench = hostfacts::pgbin::find(None, Some(15))
        .unwrap()
        .dir
        .join("pgbench");
    let init = Command::new(&pgbench)
        .args([
            "-h",
            &s.socket(),
            "-p",
            &s.port.to_string(),
            "-U",
            "postgres",
            "-i",
            "-q",
            "-s",
            "2",
        ])
        .arg("postgres")
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "pgbench -i: {}",
        String::from_utf8_lossy(&init.stderr)
    );
    check_audit(&s, version);
    // A diagnosis under load, with --pg.
    // A diagnosis under load, with --pg.
    let mut cmd = Command::new(&pgbench);
    cmd.args([
        "-h",
        &s.socket(),
        "-p",
        &s.port.to_string(),
        "-U",
        "postgres",
        "-S",
        "-n",
        "-c",
        "4",
    ])
    .args(["-T", "12", "postgres"]);
    let _load = Child::spawn(
        &mut cmd,
        Stdio::null(),
        Stdio::null(),
        Duration::from_secs(5),
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let dsn = format!(
        "host={} port={} user=postgres dbname=postgres",
        s.socket(),
        s.port
    );
    let out = Command::new(cargo_bin("preemptlab"))
        .args([
            "diagnose",
            "--pid",
            &s.pm.to_string(),
            "--pg",
            &dsn,
            "--duration",
            "6s",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "diagnose: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_diagnosis(&doc["instances"][0], version);
}

/// The audit: the version read through the container's root, its settings, the socket --pg takes from here.
fn check_audit(s: &Server, version: u32) {
    let audit = Command::new(cargo_bin("preemptlab"))
        .args(["audit", "--format", "json"])
        .output()
        .unwrap();
    let audit: Value = serde_json::from_slice(&audit.stdout).unwrap();
    let a = audit["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["postmaster_pid"] == s.pm)
        .unwrap();
    assert_eq!(
        a["version"]["value"],
        version.to_string(),
        "{}",
        a["version"]
    );
    assert_eq!(
        a["container"]["socket_dir_from_host"],
        s.socket(),
        "{}",
        a["container"]
    );
    assert_eq!(
        a["settings"]["shared_buffers"]["value"], "128MB",
        "{}",
        a["settings"]
    );
}

/// The diagnosis: the version, PostgreSQL's functions named through the container, the binary as the
/// kernel shows it, the wait events over --pg.
fn check_diagnosis(i: &Value, version: u32) {
    assert!(
        i["version"]
            .as_str()
            .unwrap()
            .starts_with(&version.to_string()),
        "{}",
        i["version"]
    );
    let t = &i["totals"];
    let user = t["cpu"]["user_other"].as_u64().unwrap() + t["cpu"]["lwlock"].as_u64().unwrap();
    let named = t["user_samples_named"].as_u64().unwrap();
    assert!(
        user >= 50 && named * 10 >= user * 3,
        "{named} of {user} user samples named: {}",
        i["top_functions"]
    );
    assert!(
        i["top_functions"].as_array().unwrap().iter().any(|f| {
            let n = f["function"].as_str().unwrap();
            !n.starts_with("[k]") && !n.ends_with('?')
        }),
        "a PostgreSQL {version} function named: {}",
        i["top_functions"]
    );
    // The kernel shows the path from this host's root, which reaches the chroot.
    let b = &i["binary"];
    assert!(
        b["path"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/usr/lib/postgresql/{version}/bin/postgres")),
        "{b}"
    );
    assert_eq!(b["replaced_on_disk"], false, "{b}");
    let w = &i["waits"];
    assert!(
        w["reads"].as_u64().unwrap_or(0) > 10,
        "wait events read over --pg: {w}"
    );
    // Active backends of the load seen (pg_stat_activity's columns on this version); how many of the four
    // a 200 ms read catches running depends on what else has the CPUs.
    assert!(
        w["backends_seen"].as_u64().unwrap_or(0) >= 1,
        "the load's backends seen: {w}"
    );
}

/// One version at a time: two servers, their loads and diagnoses at once on two CPUs starve the wait
/// sampler of the reads it takes.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn postgresql_13_from_bullseye() {
    check(13);
}

#[test]
fn postgresql_17_from_trixie() {
    check(17);
}
