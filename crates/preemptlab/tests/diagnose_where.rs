//! `diagnose` and `audit` where PostgreSQL really runs: the same PostgreSQL 15 under the same load, run
//! plainly, from a binary replaced on disk while it runs (a package upgrade before the restart), and in a
//! container-like set of namespaces (its own mount and PID namespaces and cgroup, its binaries and data
//! mounted where this host sees empty directories, its socket on a tmpfs only it sees). Each must name the
//! same share of its user samples, none from the wrong binary, and the audit must read its files through
//! its own root. Root (perf events, namespaces, cgroups).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use osutil::child::Child;
use pgharness::pgcluster::Cluster;
use serde_json::Value;

const PG: &str = "/usr/lib/postgresql/15";

fn bin() -> hostfacts::pgbin::BinDir {
    hostfacts::pgbin::find(None, Some(15))
        .expect("PostgreSQL 15 server binaries (scripts/test installs postgresql-15)")
}

/// pgbench -S, persistent connections, against a socket directory and port.
fn load(socket: &Path, port: u16, seconds: u32) -> Child {
    let mut cmd = Command::new(bin().dir.join("pgbench"));
    cmd.arg("-h")
        .arg(socket)
        .args([
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "-S",
            "-n",
            "-c",
            "6",
        ])
        .args(["-j", "2", "-T", &seconds.to_string(), "postgres"]);
    Child::spawn(
        &mut cmd,
        Stdio::null(),
        Stdio::null(),
        Duration::from_secs(5),
    )
    .expect("pgbench")
}

fn init_tables(socket: &Path, port: u16) {
    let out = Command::new(bin().dir.join("pgbench"))
        .arg("-h")
        .arg(socket)
        .args([
            "-p",
            &port.to_string(),
            "-U",
            "postgres",
            "-i",
            "-q",
            "-s",
            "5",
        ])
        .arg("postgres")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pgbench -i: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A 6 s diagnosis of postmaster `pm` (with `more` arguments) under the load; the instance's result.
fn diagnose(pm: u32, socket: &Path, port: u16, more: &[&str]) -> (Value, Value) {
    let _load = load(socket, port, 12);
    std::thread::sleep(Duration::from_secs(2));
    let out = Command::new(cargo_bin("preemptlab"))
        .args([
            "diagnose",
            "--pid",
            &pm.to_string(),
            "--duration",
            "6s",
            "--format",
            "json",
        ])
        .args(more)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "diagnose: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let inst = doc["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["postmaster_pid"] == pm)
        .expect("the instance")
        .clone();
    (doc, inst)
}

/// (named user samples, user samples).
fn named(inst: &Value) -> (f64, f64) {
    let c = &inst["totals"]["cpu"];
    let user = c["user_other"].as_f64().unwrap()
        + c["spinlock"].as_f64().unwrap()
        + c["lwlock"].as_f64().unwrap();
    (inst["totals"]["user_samples_named"].as_f64().unwrap(), user)
}

/// The share `got` of its `n` is within four standard errors of `want`'s.
fn same_share(what: &str, got: (f64, f64), want: (f64, f64)) {
    let (p, q) = (got.0 / got.1, want.0 / want.1);
    let se = (p * (1.0 - p) / got.1 + q * (1.0 - q) / want.1)
        .sqrt()
        .max(0.01);
    assert!(got.1 >= 100.0, "{what}: {} user samples", got.1);
    assert!(
        (p - q).abs() <= 4.0 * se,
        "{what}: {:.1}% of user samples named, against {:.1}% for the plain instance (+/- {:.1})",
        100.0 * p,
        100.0 * q,
        100.0 * se
    );
}

/// The names `nm -D` gives a file's defined functions.
fn functions_of(file: &Path) -> BTreeSet<String> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(file)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 3 && matches!(w[1], "T" | "t" | "W")).then(|| w[2].to_string())
        })
        .collect()
}

fn user_names(inst: &Value) -> Vec<String> {
    inst["top_functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap().to_string())
        .filter(|f| !f.starts_with("[k]") && !f.ends_with('?'))
        .collect()
}

/// A copy of PostgreSQL 15's installation under `root` laid out as Debian's (`usr/lib/postgresql/15/bin`
/// with the binaries copied, `lib` and `share` linked), so that the server finds its files relative to
/// its own path.
fn copy_installation(root: &Path) -> PathBuf {
    let bin_dir = root.join("usr/lib/postgresql/15/bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    for b in ["postgres", "pg_ctl", "initdb"] {
        std::fs::copy(Path::new(PG).join("bin").join(b), bin_dir.join(b)).unwrap();
    }
    std::os::unix::fs::symlink(
        Path::new(PG).join("lib"),
        root.join("usr/lib/postgresql/15/lib"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("usr/share/postgresql")).unwrap();
    std::os::unix::fs::symlink(
        "/usr/share/postgresql/15",
        root.join("usr/share/postgresql/15"),
    )
    .unwrap();
    let mut perms = std::fs::metadata(root).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(root, perms).unwrap();
    bin_dir
}

fn settings() -> Vec<(String, String)> {
    [
        ("shared_buffers", "128MB"),
        ("max_connections", "30"),
        ("fsync", "off"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .to_vec()
}

#[test]
fn plain_replaced_and_containerised_instances_are_named_alike() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();

    // 1. Plainly run, from the package's path.
    let mut plain = Cluster::create(bin(), Some(tmp.path())).unwrap();
    plain.start(&settings()).unwrap();
    init_tables(&plain.socket_dir(), plain.port());
    let pm = plain.postmaster_pid().unwrap();
    let (_, p_inst) = diagnose(pm, &plain.socket_dir(), plain.port(), &[]);
    let plain_named = named(&p_inst);
    assert!(
        plain_named.0 / plain_named.1 > 0.3,
        "{}",
        p_inst["top_functions"]
    );
    let postgres_fns = functions_of(&Path::new(PG).join("bin/postgres"));
    plain.remove().unwrap();

    // 2. Its binary replaced on disk while it runs, as dpkg does: a new file renamed over the old name.
    let install = tmp.path().join("inst");
    let bin_dir = copy_installation(&install);
    let copied = hostfacts::pgbin::BinDir {
        dir: bin_dir.clone(),
        major: Some(15),
    };
    let mut upgraded = Cluster::create(copied, Some(tmp.path())).unwrap();
    upgraded.start(&settings()).unwrap();
    init_tables(&upgraded.socket_dir(), upgraded.port());
    let pm = upgraded.postmaster_pid().unwrap();
    let other = Path::new(PG).join("bin/pgbench");
    std::fs::copy(&other, bin_dir.join("postgres.new")).unwrap();
    std::fs::rename(bin_dir.join("postgres.new"), bin_dir.join("postgres")).unwrap();
    let (_, u_inst) = diagnose(pm, &upgraded.socket_dir(), upgraded.port(), &[]);
    same_share("replaced on disk", named(&u_inst), plain_named);
    let wrong: BTreeSet<String> = functions_of(&other)
        .difference(&postgres_fns)
        .cloned()
        .collect();
    for n in user_names(&u_inst) {
        assert!(
            !wrong.contains(&n),
            "{n} is pgbench's, the file now at the path: {}",
            u_inst["top_functions"]
        );
    }
    let b = &u_inst["binary"];
    assert_eq!(b["replaced_on_disk"], true, "{b}");
    assert!(
        b["read_through"].as_str().unwrap().contains("/map_files/"),
        "{b}"
    );
    // The replacement is put back so that pg_ctl (a copy beside it) can stop the server.
    std::fs::copy(
        Path::new(PG).join("bin/postgres"),
        bin_dir.join("postgres.new"),
    )
    .unwrap();
    std::fs::rename(bin_dir.join("postgres.new"), bin_dir.join("postgres")).unwrap();
    upgraded.remove().unwrap();

    // 3. In a container: its own mount and PID namespaces and cgroup.
    let ctr = Container::start(tmp.path());
    let (doc, c_inst) = diagnose(ctr.pm, &ctr.socket_from_host(), ctr.port, &[]);
    same_share("in a container", named(&c_inst), plain_named);
    assert!(doc["unmeasured"]
        .as_array()
        .unwrap()
        .iter()
        .all(|u| !u["why"].as_str().unwrap().contains("kallsyms")));
    let b = &c_inst["binary"];
    assert_eq!(
        b["path"],
        format!("{}/bin/postgres", ctr.bin_mount.display()),
        "{b}"
    );
    assert_eq!(b["replaced_on_disk"], false, "{b}");
    // The audit reads its files under its own root, and its socket is reachable from here.
    let audit = Command::new(cargo_bin("preemptlab"))
        .args(["audit", "--format", "json"])
        .output()
        .unwrap();
    let audit: Value = serde_json::from_slice(&audit.stdout).unwrap();
    let a = audit["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["postmaster_pid"] == ctr.pm)
        .unwrap();
    assert_eq!(a["version"]["value"], "15", "{}", a["version"]);
    // Read through the postmaster's own working directory (its data directory), not this host's path.
    assert_eq!(
        a["version"]["source"],
        format!("/proc/{}/cwd/PG_VERSION", ctr.pm),
        "{}",
        a["version"]
    );
    let c = &a["container"];
    assert_eq!(c["root"], format!("/proc/{}/root", ctr.pm), "{c}");
    assert!(c["pid_in_namespace"].as_u64().is_some(), "{c}");
    assert_eq!(c["cgroup"], ctr.cgroup.path, "{c}");
    assert_eq!(
        c["socket_dir_from_host"],
        ctr.socket_from_host().display().to_string(),
        "{c}"
    );
    assert_eq!(
        a["settings"]["shared_buffers"]["value"], "128MB",
        "{}",
        a["settings"]
    );
    // --pg through that socket: the server is matched to the instance (its backend PID is the
    // container's) and its wait events sampled.
    let dsn = format!(
        "host={} port={} user=postgres dbname=postgres",
        ctr.socket_from_host().display(),
        ctr.port
    );
    let (_, w_inst) = diagnose(ctr.pm, &ctr.socket_from_host(), ctr.port, &["--pg", &dsn]);
    assert!(w_inst["waits"].is_object(), "{}", w_inst["waits"]);
}

/// PostgreSQL 15 in `unshare --mount --pid --fork`: PostgreSQL's installation bind-mounted on an empty
/// directory, the data directory on another, the socket directory a tmpfs; moved into a cgroup of its own
/// first. Stopped (the namespace's every process killed) when dropped.
struct Container {
    pm: u32,
    port: u16,
    bin_mount: PathBuf,
    socket_dir: PathBuf,
    cgroup: common::cgroup::TestCgroup,
    shell: std::process::Child,
    /// The data directory's cluster, removed once the server is gone.
    _data: Cluster,
}

impl Container {
    fn start(parent: &Path) -> Container {
        let c = Cluster::create(bin(), Some(parent)).unwrap();
        let data = c.data_dir();
        let root = parent.join("ctr");
        let (bin_mount, data_mount, socket_dir) =
            (root.join("pg"), root.join("data"), root.join("run"));
        for d in [&bin_mount, &data_mount, &socket_dir] {
            std::fs::create_dir_all(d).unwrap();
        }
        let cgroup = common::cgroup::TestCgroup::make("preemptlab-test-ctr");
        let port = 5000 + (std::process::id() % 1000) as u16;
        let script = format!(
            "set -e\necho $$ > {procs}\nmount --bind {pg} {bm}\nmount --bind {data} {dm}\n\
             mount -t tmpfs -o mode=0777 tmpfs {sd}\n\
             exec setpriv --reuid={uid} --regid={gid} --clear-groups {bm}/bin/postgres -D {dm} -p {port} \
             -c listen_addresses= -c unix_socket_directories={sd} -c shared_buffers=128MB \
             -c max_connections=30 -c fsync=off\n",
            procs = cgroup.dir.join("cgroup.procs").display(),
            pg = PG,
            bm = bin_mount.display(),
            data = data.display(),
            dm = data_mount.display(),
            sd = socket_dir.display(),
            uid = c.run_as().uid,
            gid = c.run_as().gid,
        );
        let shell = Command::new("unshare")
            .args([
                "--mount",
                "--pid",
                "--fork",
                "--propagation",
                "private",
                "--mount-proc",
                "sh",
                "-c",
                &script,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The postmaster is the namespace's first process, unshare's child; ready once its socket answers.
        let started = Instant::now();
        let (mut ctr, mut ready) = (None, false);
        while started.elapsed() < Duration::from_secs(60) && !ready {
            std::thread::sleep(Duration::from_millis(200));
            let kids = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", shell.id()))
                .unwrap_or_default();
            ctr = kids
                .split_whitespace()
                .filter_map(|w| w.parse::<u32>().ok())
                .next();
            if let Some(pm) = ctr {
                let sock = socket_via(pm, &socket_dir);
                ready = Command::new(bin().dir.join("pg_isready"))
                    .arg("-h")
                    .arg(&sock)
                    .args(["-p", &port.to_string()])
                    .output()
                    .is_ok_and(|o| o.status.success());
            }
        }
        let pm = ctr
            .filter(|_| ready)
            .expect("the containerised server started within 60 s");
        // The host sees empty directories where the container has its installation and socket.
        assert_eq!(std::fs::read_dir(&bin_mount).unwrap().count(), 0);
        assert_eq!(std::fs::read_dir(&socket_dir).unwrap().count(), 0);
        let me = Container {
            pm,
            port,
            bin_mount,
            socket_dir,
            cgroup,
            shell,
            _data: c,
        };
        init_tables(&me.socket_from_host(), port);
        me
    }

    /// The socket directory through the postmaster's root.
    fn socket_from_host(&self) -> PathBuf {
        socket_via(self.pm, &self.socket_dir)
    }
}

fn socket_via(pm: u32, dir: &Path) -> PathBuf {
    PathBuf::from(format!("/proc/{pm}/root{}", dir.display()))
}

impl Drop for Container {
    fn drop(&mut self) {
        // SAFETY: kill has no memory preconditions; the PID is the postmaster this test started.
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
