//! `preemptlab diagnose` against real PostgreSQL 15 in throwaway clusters, and against processes whose own
//! accounting says where their CPU went. Root (perf events system-wide, the hugetlb pool for the huge-page
//! half); the pool is grown only through the project's pool guard and given back.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use osutil::child::Child;
use pgharness::pgcluster::Cluster;
use serde_json::Value;

fn cluster(parent: &std::path::Path) -> Cluster {
    let bin = hostfacts::pgbin::find(None, Some(15))
        .expect("PostgreSQL 15 server binaries (scripts/test installs postgresql-15)");
    Cluster::create(bin, Some(parent)).expect("a throwaway cluster")
}

fn settings(huge: &str) -> Vec<(String, String)> {
    [
        ("shared_buffers", SHARED_BUFFERS),
        ("huge_pages", huge),
        ("max_connections", "30"),
        ("fsync", "off"),
        // One process a connection: a parallel scan would fork workers that each scan part of the table
        // and fault their own share of it, and the backends a second would be the workers' count.
        ("max_parallel_workers_per_gather", "0"),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .to_vec()
}

/// A small buffer pool that the reconnecting load's table nearly fills (see [`reconnecting_load`]).
const SHARED_BUFFERS: &str = "32MB";

/// Connections (transactions) a second of the reconnecting load, `pgbench -R`.
const LOAD_RATE: &str = "30";

/// pgbench's scale for the load: 200,000 accounts, a 26 MB table, about 3,300 of the pool's 4,096 buffers.
const SCALE: &str = "2";

/// Makes the load's tables and reads the accounts table into the buffer pool (`pg_prewarm`, buffer mode:
/// ordinary reads, no ring, so the table stays resident in about 3,300 consecutive buffers). Run after
/// every start: a restarted server's pool is empty.
fn load_tables(c: &Cluster, init: bool) {
    if init {
        let out = c
            .command("pgbench")
            .arg("-h")
            .arg(c.socket_dir())
            .arg("-p")
            .arg(c.port().to_string())
            .args(["-i", "-q", "-s", SCALE, "postgres"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pgbench -i: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        c.psql("postgres", "CREATE EXTENSION pg_prewarm")
            .expect("pg_prewarm (in Debian's postgresql-15)");
    }
    let pages: u64 = c
        .psql("postgres", "SELECT pg_prewarm('pgbench_accounts')")
        .unwrap()
        .parse()
        .unwrap();
    assert!(pages > 3000, "prewarmed {pages} pages of pgbench_accounts");
}

/// A connect-per-transaction pgbench (`-C`): every transaction is a new backend that faults on the shared
/// segment from scratch, and each scans the whole accounts table, resident in the pool (a sequential scan
/// finds every page in the buffer pool, so its ring strategy never evicts one). Every backend touches every
/// 64 KB block of 26 MB of consecutive buffers, 13 huge pages' worth: many 64 KB blocks within few 2 MB
/// pages. On 4 KB pages a read fault maps up to 16 neighbouring pages of shared memory (fault-around,
/// 64 KB), so a backend takes one fault per block, 462-477 a backend measured here; on huge pages one per
/// 2 MB page it touches, 16-19 of the segment's 19. Segment-fault rates 23.2x-26.9x apart in six runs
/// with a load average of 13-14 from other work. (The load before, a 200,000-account index range in
/// a 128 MB pool, touched a few blocks in each of many 2 MB pages: 9.4x-11.5x. Shorter connections separate
/// the two less: select-only's four lookups, a 1,000- and a 10,000-row range measured 7x, 7.7x and 8.4x,
/// GUIDE.md "diagnose".)
///
/// The load is rate-limited ([`LOAD_RATE`] connections a second, well under what this 2-vCPU machine
/// serves when busy) so both page sizes see the same number of backends a second and the rates
/// compare what a backend does, not how many backends the machine had CPU for: unlimited, the huge-page
/// run served 1.4x more backends a second than the 4 KB one.
fn reconnecting_load(c: &Cluster, seconds: u32) -> Child {
    let script = c.root().join("scan.sql");
    std::fs::write(&script, "SELECT sum(abalance) FROM pgbench_accounts;\n").unwrap();
    let mut cmd = c.command("pgbench");
    cmd.arg("-h")
        .arg(c.socket_dir())
        .arg("-p")
        .arg(c.port().to_string())
        .args([
            "-C",
            "-n",
            "-R",
            LOAD_RATE,
            "-c",
            "4",
            "-j",
            "2",
            "-T",
            &seconds.to_string(),
            "-f",
        ])
        .arg(&script)
        .arg("postgres");
    Child::spawn(
        &mut cmd,
        Stdio::null(),
        Stdio::null(),
        Duration::from_secs(5),
    )
    .expect("pgbench")
}

fn diagnose(args: &[&str]) -> Output {
    Command::new(cargo_bin("preemptlab"))
        .arg("diagnose")
        .args(args)
        .output()
        .unwrap()
}

fn json(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "diagnose failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("diagnose --format json prints JSON")
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a number: {v}"))
}

/// Diagnoses the cluster under the load for 6 s with the events system-wide; returns the instance's JSON.
fn diagnose_under_load(c: &Cluster, pm: u32) -> Value {
    let doc = diagnose_scoped(c, "system");
    assert_eq!(doc["spec"]["scope"]["kind"], "system", "{}", doc["spec"]);
    instance(&doc, pm)
}

/// Diagnoses the cluster under the load for 6 s with `--scope scope`; returns the whole result.
fn diagnose_scoped(c: &Cluster, scope: &str) -> Value {
    diagnose_with(c, scope, &[])
}

/// [`diagnose_scoped`] with more arguments.
fn diagnose_with(c: &Cluster, scope: &str, more: &[&str]) -> Value {
    // The load outlasts the window (6 s unless `more` sets one) by its 2 s lead and some.
    let window_s: u32 = more
        .iter()
        .position(|a| *a == "--duration")
        .and_then(|i| more.get(i + 1)?.trim_end_matches('s').parse().ok())
        .unwrap_or(6);
    let _load = reconnecting_load(c, window_s + 6);
    std::thread::sleep(Duration::from_secs(2));
    let dsn = c.dsn("postgres");
    let mut args = vec!["--pg", &dsn, "--scope", scope, "--format", "json"];
    if !more.contains(&"--duration") {
        args.extend_from_slice(&["--duration", "6s"]);
    }
    args.extend_from_slice(more);
    let out = diagnose(&args);
    let doc = json(&out);
    assert_eq!(doc["kind"], "diagnose");
    doc
}

/// The instance `pm`'s part of a result.
fn instance(doc: &Value, pm: u32) -> Value {
    let inst = doc["instances"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["postmaster_pid"] == pm)
        .unwrap_or_else(|| panic!("the instance {pm} is named: {doc}"))
        .clone();
    inst
}

/// Sampled faults (scaled) against the kernel's minflt counters of the same processes: within `within`
/// (a share of minflt).
fn faults_match_minflt(inst: &Value, within: f64) -> (f64, f64) {
    let t = &inst["totals"];
    let sampled = f(&t["segment_faults"]) + f(&t["other_faults"]);
    let minflt = f(&t["minflt"]);
    assert!(
        (sampled - minflt).abs() <= within * minflt,
        "sampled faults {sampled} vs minflt {minflt}: {t}"
    );
    (sampled, minflt)
}

/// Issue 24's cgroup scope: a cluster in its own cgroup2 directory is watched with cgroup events
/// (`--scope cgroup`; `auto` stays system-wide, which measured cheaper), and the counts still agree with the kernel's own: sampled faults with minflt,
/// on-CPU samples and switches seen. A process of the instance moved out of the cgroup is named as not
/// measured.
#[test]
fn an_instance_in_its_own_cgroup_is_watched_through_cgroup_events() {
    // Declared before the cluster: dropped after it stops, when the directories are empty.
    let outside = common::cgroup::TestCgroup::make("preemptlab-test-outside");
    let cg = common::cgroup::TestCgroup::make("preemptlab-test-diagnose");
    let parent = tempfile::tempdir().unwrap();
    let mut c = cluster(parent.path());
    c.start(&settings("off")).unwrap();
    let pm = c.postmaster_pid().unwrap();
    cg.adopt_instance(pm);
    load_tables(&c, true);
    let doc = diagnose_scoped(&c, "cgroup");
    let scope = &doc["spec"]["scope"];
    assert_eq!(scope["kind"], "cgroup", "{scope}");
    assert_eq!(scope["cgroups"][0], cg.path.as_str(), "{scope}");
    let inst = instance(&doc, pm);
    let (sampled, minflt) = faults_match_minflt(&inst, 0.3);
    assert!(
        f(&inst["rates"]["segment_faults_per_s"]) > 100.0,
        "a -C load faults on the segment: {}",
        inst["rates"]
    );
    let t = &inst["totals"];
    assert!(f(&t["cpu"]["samples"]) > 0.0, "on-CPU samples: {t}");
    assert!(f(&t["processes_started"]) > 20.0, "backends followed: {t}");
    assert!(
        !doc["unmeasured"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["what"].as_str().unwrap().contains("outside")
                || u["why"].as_str().unwrap().contains("cgroup")),
        "{}",
        doc["unmeasured"]
    );
    eprintln!(
        "cgroup scope: sampled faults {sampled:.0} vs minflt {minflt:.0}; {}",
        t["switches"]
    );

    // A process of the instance moved out of the cgroup (the checkpointer, into a sibling this test made) is
    // named as not measured.
    let kids = std::fs::read_to_string(format!("/proc/{pm}/task/{pm}/children")).unwrap();
    let moved: u32 = kids
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .find(|k: &u32| {
            std::fs::read_to_string(format!("/proc/{k}/cmdline"))
                .is_ok_and(|c| c.contains("checkpointer"))
        })
        .expect("a checkpointer");
    outside.adopt(moved);
    let doc = diagnose_scoped(&c, "cgroup");
    assert_eq!(doc["spec"]["scope"]["kind"], "cgroup");
    let un = doc["unmeasured"].to_string();
    assert!(
        un.contains(&moved.to_string()) && un.contains("outside"),
        "{un}"
    );
    c.remove().unwrap();
}

/// Issue 24's cost: a bound on the faults counted a second (`--fault-counts`) turns the fault event on for
/// only part of each second under the reconnecting load (its counter is paid by every fault while it is
/// on), each sample counts as much more, and the counts still agree with the kernel's minflt.
#[test]
fn a_bound_on_fault_counts_turns_the_event_on_part_time_and_the_counts_still_agree() {
    let parent = tempfile::tempdir().unwrap();
    let mut c = cluster(parent.path());
    c.start(&settings("off")).unwrap();
    load_tables(&c, true);
    let pm = c.postmaster_pid().unwrap();
    // Part-time, the count is of the connections that came while the event was on, each a lump of about
    // 1,000 faults (a new backend's first touches): a tenth of each second sees ~3 of the 30 a second
    // here, so the count's standard error is about sqrt((1 - f) / (f n)) for n connections and the share f
    // of the window on: 12% over 12 s (measured: -11% and +31% in two runs; +30% once in 6 s). Within
    // 40%, over three of those; a weight off by a factor of 2 still fails.
    let doc = diagnose_with(
        &c,
        "system",
        &["--fault-counts", "1000", "--duration", "12s"],
    );
    let spec = &doc["spec"];
    assert_eq!(spec["fault_counts_max"], 1000, "{spec}");
    let pct = spec["fault_duty_pct_min"].as_u64().unwrap_or(100);
    let (on, observed) = (f(&spec["fault_on_s"]), f(&spec["observed_s"]));
    assert!(
        pct <= 50 && on < 0.7 * observed && on > 0.0,
        "the fault event on down to {pct}% of a second, {on:.2} s of {observed:.2}: {spec}"
    );
    let inst = instance(&doc, pm);
    let (sampled, minflt) = faults_match_minflt(&inst, 0.4);
    eprintln!(
        "--fault-counts 1000: down to {pct}%, on {on:.2} s of {observed:.2}, sampled faults {sampled:.0} vs minflt {minflt:.0}"
    );
    c.remove().unwrap();
}

/// Issue 24's cost: a bound on the fault samples a second (`--fault-samples`) raises the period above
/// `--fault-period` under the reconnecting load, the instance gets far fewer samples than a fixed period
/// would give, and its counts, each sample counted as the period it was taken at, still agree with the
/// kernel's minflt.
#[test]
fn a_bound_on_fault_samples_raises_the_period_and_the_counts_still_agree() {
    let parent = tempfile::tempdir().unwrap();
    let mut c = cluster(parent.path());
    c.start(&settings("off")).unwrap();
    load_tables(&c, true);
    let pm = c.postmaster_pid().unwrap();
    let doc = diagnose_with(&c, "system", &["--fault-samples", "100"]);
    let spec = &doc["spec"];
    assert_eq!(spec["fault_samples_max"], 100, "{spec}");
    let floor = spec["fault_period"].as_u64().unwrap();
    let hi = spec["fault_period_max"].as_u64().unwrap_or(floor);
    assert!(
        hi >= 4 * floor,
        "the period rose from {floor} to {hi}: {spec}"
    );
    let inst = instance(&doc, pm);
    let (sampled, minflt) = faults_match_minflt(&inst, 0.3);
    let samples = f(&inst["totals"]["fault_samples"]);
    // The first second is at the floor; from then on at a quarter of its rate or less.
    assert!(
        samples < 0.6 * minflt / floor as f64,
        "{samples} samples for {minflt} faults at periods {floor}..{hi}"
    );
    eprintln!(
        "--fault-samples 100: periods {floor}..{hi}, {samples} samples, sampled faults {sampled:.0} vs minflt {minflt:.0}"
    );
    c.remove().unwrap();
}

/// `--scope cgroup` where it cannot be had (a postmaster in the root cgroup) is refused in one line.
#[test]
fn scope_cgroup_for_an_instance_in_the_root_cgroup_is_refused() {
    if !std::fs::read_to_string("/proc/self/cgroup").is_ok_and(|t| t.contains("0::/\n")) {
        eprintln!("this test runs in a cgroup other than the root: nothing to check");
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    let mut c = cluster(parent.path());
    c.start(&settings("off")).unwrap();
    let pm = c.postmaster_pid().unwrap().to_string();
    let out = diagnose(&["--pid", &pm, "--duration", "1s", "--scope", "cgroup"]);
    common::assert_refused(&out, "--scope cgroup in the root cgroup", "--scope system");
    c.remove().unwrap();
}

/// The bar of issue 24: on 4 KB pages a connect-per-transaction load faults on the segment at least ten
/// times as often as on huge pages, the sampled faults agree with the kernel's own minflt counters, and
/// the result names the instance, the backing, a spinlock share with its sample count and the wait events.
#[test]
fn four_kb_against_huge_pages_under_a_reconnecting_load() {
    let parent = tempfile::tempdir().unwrap();
    let mut c = cluster(parent.path());
    c.start(&settings("off")).unwrap();
    load_tables(&c, true);
    let pm = c.postmaster_pid().unwrap();
    let small = diagnose_under_load(&c, pm);
    assert_eq!(small["segment"]["page_size_kib"], 4, "{small}");
    assert_eq!(small["segment"]["on_huge_pages"], false);
    let rate_4k = f(&small["rates"]["segment_faults_per_s"]);
    assert!(
        rate_4k > 100.0,
        "a -C load faults on the segment: {rate_4k}/s"
    );
    // Sampled faults (scaled) against the kernel's counters: the same order, within 30%.
    let (sampled, minflt) = faults_match_minflt(&small, 0.3);
    let spin = &small["verdict"]["spinlock_share"];
    assert!(f(&spin["of"]) > 0.0 && spin["samples"].is_u64(), "{spin}");
    let waits = &small["waits"];
    assert!(f(&waits["reads"]) > 5.0, "{waits}");
    assert!(!waits["events"].as_array().unwrap().is_empty(), "{waits}");
    c.stop().unwrap();

    // The same on huge pages, with the pool grown through the project's guard (given back on drop).
    let needed: u64 = c
        .computed("shared_memory_size_in_huge_pages", &settings("on"))
        .unwrap()
        .parse()
        .unwrap();
    let _pool =
        hostguard::hugetlb_pool::PoolGuard::ensure_free(2048, needed + 8).expect("2 MB huge pages");
    c.start(&settings("on")).unwrap();
    load_tables(&c, false);
    let pm = c.postmaster_pid().unwrap();
    let huge = diagnose_under_load(&c, pm);
    assert_eq!(huge["segment"]["page_size_kib"], 2048, "{huge}");
    let rate_huge = f(&huge["rates"]["segment_faults_per_s"]);
    let per_backend = |d: &Value| {
        f(&d["totals"]["segment_faults"]) / f(&d["totals"]["processes_started"]).max(1.0)
    };
    eprintln!(
        "segment faults/s: 4 KB {rate_4k:.0} (sampled {sampled:.0} vs minflt {minflt:.0} in all), huge pages {rate_huge:.0}: {:.1}x; per backend started {:.0} vs {:.0}; segment {needed} huge pages; processes started {} vs {}",
        rate_4k / rate_huge.max(1e-9),
        per_backend(&small),
        per_backend(&huge),
        small["totals"]["processes_started"],
        huge["totals"]["processes_started"]
    );
    assert!(
        rate_4k >= 10.0 * rate_huge,
        "segment faults: {rate_4k}/s on 4 KB vs {rate_huge}/s on huge pages; 4 KB {} {}; huge {} {}",
        small["totals"],
        small["by_type"],
        huge["totals"],
        huge["by_type"]
    );
    c.remove().unwrap();
}

/// Not a postmaster: one line naming what to give instead, exit 2.
#[test]
fn pid_of_a_process_that_is_not_a_postmaster() {
    let me = std::process::id().to_string();
    let o = diagnose(&["--pid", &me, "--duration", "1s"]);
    common::assert_refused(&o, "--pid of the test", "not a PostgreSQL postmaster");
    let o = diagnose(&["--pid", "4194304", "--duration", "1s"]);
    common::assert_refused(&o, "--pid past pid_max", "no such process");
    let o = diagnose(&["--duration", "0s"]);
    common::assert_refused(&o, "--duration 0s", "--duration");
    let o = diagnose(&["--fault-period", "0"]);
    common::assert_refused(&o, "--fault-period 0", "--fault-period");
}

/// Regression (issue 46 item 8): `--pid X --pid X` observed the one instance twice over.
#[test]
fn diagnose_pid_x_pid_x_measured_twice_regression() {
    let parent = tempfile::tempdir().unwrap();
    let mut c = cluster(parent.path());
    c.start(&settings("off")).unwrap();
    let pm = c.postmaster_pid().unwrap().to_string();
    let args = ["--pid", &pm, "--pid", &pm, "--duration", "1s", "--format"];
    let doc = json(&diagnose(&[&args[..], &["json"]].concat()));
    let pms: Vec<&Value> = doc["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["postmaster_pid"])
        .collect();
    assert_eq!(pms, [&Value::from(pm.parse::<u32>().unwrap())], "{doc}");
    c.remove().unwrap();
}

/// An instance that exits during the window: a partial result, said so, exit 0.
#[test]
fn an_instance_that_exits_mid_window() {
    let parent = tempfile::tempdir().unwrap();
    let mut c = cluster(parent.path());
    c.start(&settings("off")).unwrap();
    let pm = c.postmaster_pid().unwrap().to_string();
    let child = Command::new(cargo_bin("preemptlab"))
        .args([
            "diagnose",
            "--pid",
            &pm,
            "--duration",
            "20s",
            "--format",
            "json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let t = Instant::now();
    c.stop().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "the window ends with the instance"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exited during the window"), "{err}");
    let doc = json(&out);
    let exited = f(&doc["instances"][0]["exited_at_s"]);
    assert!((2.0..12.0).contains(&exited), "{exited}");
    c.remove().unwrap();
}

/// SIGINT: the partial result is printed and written, marked interrupted, exit 130, and nothing of it is
/// left running.
#[test]
fn sigint_writes_a_partial_result() {
    let parent = tempfile::tempdir().unwrap();
    let mut c = cluster(parent.path());
    c.start(&settings("off")).unwrap();
    let pm = c.postmaster_pid().unwrap().to_string();
    let out_file = parent.path().join("d.json");
    let child = Command::new(cargo_bin("preemptlab"))
        .args([
            "diagnose",
            "--pid",
            &pm,
            "--duration",
            "60s",
            "--quiet",
            "--out",
        ])
        .arg(&out_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill with a PID this test spawned and a valid signal.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    assert_eq!(doc["interrupted"], true);
    assert!(f(&doc["spec"]["observed_s"]) < 30.0);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "it exited"
    );
    c.remove().unwrap();
}

/// Not root: one line per thing it cannot measure and why, the rest measured.
#[test]
fn unprivileged_measures_what_it_can() {
    use std::os::unix::process::CommandExt;
    let parent = tempfile::tempdir().unwrap();
    let mut c = cluster(parent.path());
    c.start(&settings("off")).unwrap();
    let pm = c.postmaster_pid().unwrap().to_string();
    let out = Command::new(cargo_bin("preemptlab"))
        .args([
            "diagnose",
            "--pid",
            &pm,
            "--duration",
            "2s",
            "--format",
            "json",
        ])
        .uid(65534)
        .gid(65534)
        .env("HOME", "/")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let doc = json(&out);
    let unmeasured = doc["unmeasured"].as_array().unwrap();
    assert!(!unmeasured.is_empty(), "{doc}");
    for u in unmeasured {
        let why = u["why"].as_str().unwrap();
        assert!(
            why.contains("root") || why.contains("paranoid"),
            "each says why: {why}"
        );
    }
    assert_eq!(
        err.lines().filter(|l| l.contains("not measured")).count(),
        unmeasured.len(),
        "one line each on stderr: {err}"
    );
    let inst = &doc["instances"][0];
    assert!(
        f(&inst["totals"]["processes_seen"]) >= 4.0,
        "the /proc part is measured: {inst}"
    );
    assert!(!common::rust_panic(&err), "{err}");
    c.remove().unwrap();
}

/// `--events` leaves events out (named as not measured, their rows not counted) and `--switch-duty` turns
/// the switch tracepoint on for part of each second: the time it was on is recorded and the switch rate
/// divides by it. `--cpu-duty` does the same for the on-CPU samples: they come only from the time on.
/// Bad values are refused in one line.
#[test]
fn events_left_out_and_the_switch_and_cpu_duty() {
    let o = diagnose(&["--events", "cpu,bogus", "--duration", "1s"]);
    common::assert_refused(&o, "--events with a bad name", "cpu, faults, switches");
    let o = diagnose(&["--switch-duty", "15", "--duration", "1s"]);
    common::assert_refused(&o, "--switch-duty 15", "--switch-duty 15");
    let o = diagnose(&["--cpu-duty", "0", "--duration", "1s"]);
    common::assert_refused(&o, "--cpu-duty 0", "--cpu-duty 0");

    let parent = tempfile::tempdir().unwrap();
    let mut c = cluster(parent.path());
    c.start(&settings("off")).unwrap();
    load_tables(&c, true);
    let pm = c.postmaster_pid().unwrap();
    let _load = reconnecting_load(&c, 10);
    std::thread::sleep(Duration::from_secs(2));
    let out = diagnose(&[
        "--pid",
        &pm.to_string(),
        "--duration",
        "5s",
        "--events",
        "switches,cpu",
        "--switch-duty",
        "50",
        "--cpu-duty",
        "30",
        "--frequency",
        "199",
        "--format",
        "json",
    ]);
    let doc = json(&out);
    let spec = &doc["spec"];
    assert_eq!(
        spec["events"],
        serde_json::json!(["cpu", "switches"]),
        "{spec}"
    );
    assert_eq!(spec["switch_duty_pct"], 50, "{spec}");
    let (on_s, observed_s) = (f(&spec["switch_on_s"]), f(&spec["observed_s"]));
    assert!(
        on_s > 0.3 * observed_s && on_s < 0.8 * observed_s,
        "on for about half the window: {on_s} of {observed_s} s"
    );
    let unmeasured = doc["unmeasured"].as_array().unwrap();
    assert_eq!(unmeasured.len(), 1, "{unmeasured:?}");
    assert!(
        unmeasured[0]["what"]
            .as_str()
            .unwrap()
            .contains("page-fault")
            && unmeasured[0]["why"].as_str().unwrap().contains("--events"),
        "{unmeasured:?}"
    );
    let inst = instance(&doc, pm);
    let t = &inst["totals"];
    assert_eq!(f(&t["segment_faults"]) + f(&t["other_faults"]), 0.0, "{t}");
    assert!(
        f(&t["minflt"]) > 0.0,
        "the kernel's counters are still read: {t}"
    );
    // On-CPU samples only in the 30% of the window the cpu-clock was on: fewer than the CPUs could give
    // in that time (all of it would give three times as many), more than none.
    assert_eq!(spec["cpu_duty_pct"], 30, "{spec}");
    let cpu_on_s = f(&spec["cpu_on_s"]);
    assert!(
        cpu_on_s > 0.15 * observed_s && cpu_on_s < 0.5 * observed_s,
        "samples on for about 30% of the window: {cpu_on_s} of {observed_s} s"
    );
    let cpus = std::thread::available_parallelism().unwrap().get() as f64;
    let samples = f(&t["cpu"]["samples"]);
    assert!(
        samples > 0.0 && samples <= 1.2 * 199.0 * cpus * cpu_on_s,
        "{samples} samples in {cpu_on_s} s on of {observed_s} s: {t}"
    );
    // The forks and exits come from an always-on event: the short-lived backends of the reconnecting
    // load are seen although the samples were off most of the time.
    assert!(f(&t["processes_started"]) >= 20.0, "{t}");
    let sw = &t["switches"];
    assert!(f(&sw["runnable"]) > 0.0, "switches recorded while on: {sw}");
    // The rate divides by the time on, not by the window.
    let window = f(&spec["observed_s"]);
    let rate = f(&inst["rates"]["preempted_in_fault_per_s"]);
    let want = f(&sw["runnable_in_fault"]) / (window * (on_s / observed_s));
    assert!(
        (rate - want).abs() <= 1e-6 * want.max(1.0),
        "{rate} vs {want}"
    );
    c.remove().unwrap();
}

#[test]
fn control_turns_the_events_off_and_on_and_stops_the_window() {
    use std::io::{BufRead, BufReader, Write};
    let parent = tempfile::tempdir().unwrap();
    let mut c = cluster(parent.path());
    c.start(&settings("off")).unwrap();
    load_tables(&c, true);
    let pm = c.postmaster_pid().unwrap();
    let _load = reconnecting_load(&c, 30);
    let (ctl, ack) = (parent.path().join("ctl"), parent.path().join("ack"));
    for p in [&ctl, &ack] {
        let path = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
    }
    let spec = format!("fifo:{},{}", ctl.display(), ack.display());
    /// Kills diagnose if the test fails before it ends.
    struct Guard(Option<std::process::Child>);
    impl Drop for Guard {
        fn drop(&mut self) {
            if let Some(c) = self.0.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
    let child = Command::new(cargo_bin("preemptlab"))
        .args(["diagnose", "--pid", &pm.to_string(), "--duration", "60s"])
        .args(["--format", "json", "--frequency", "199", "--control", &spec])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = Guard(Some(child));
    let mut to = std::fs::OpenOptions::new().write(true).open(&ctl).unwrap();
    let mut from = BufReader::new(std::fs::File::open(&ack).unwrap());
    let mut say = |line: &str| {
        writeln!(to, "{line}").unwrap();
        let mut got = String::new();
        from.read_line(&mut got).unwrap();
        got.trim().to_string()
    };
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(say("disable"), "ack");
    let off_at = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(say("hello"), "err hello");
    assert_eq!(say("enable"), "ack");
    let off_s = off_at.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs(2));
    let started = Instant::now();
    assert_eq!(say("stop"), "ack");
    let out = guard.0.take().unwrap().wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "stop ended the window"
    );
    let doc = json(&out);
    assert_eq!(doc["interrupted"], false, "stopped, not interrupted");
    let spec = &doc["spec"];
    let (observed_s, events_off_s) = (f(&spec["observed_s"]), f(&spec["events_off_s"]));
    assert!(observed_s < 30.0, "{spec}");
    assert!(
        (events_off_s - off_s).abs() < 0.5,
        "off {events_off_s} s by the result, {off_s} s by the clock: {spec}"
    );
    let cpu_on_s = f(&spec["cpu_on_s"]);
    assert!(
        (cpu_on_s + events_off_s - observed_s).abs() < 0.5,
        "samples on whenever not off: {spec}"
    );
    let inst = instance(&doc, pm);
    let t = &inst["totals"];
    let cpus = std::thread::available_parallelism().unwrap().get() as f64;
    let samples = f(&t["cpu"]["samples"]);
    assert!(
        samples > 0.0 && samples <= 1.2 * 199.0 * cpus * cpu_on_s,
        "{samples} samples in {cpu_on_s} s on: {t}"
    );
    // Processes are followed while the events are off: the reconnecting load's backends keep coming.
    assert!(f(&t["processes_started"]) >= 20.0, "{t}");
    // The fault rates are of the time the fault event was on.
    let faults = f(&t["segment_faults"]) + f(&t["other_faults"]);
    let r = &inst["rates"];
    let rate = f(&r["segment_faults_per_s"]) + f(&r["other_faults_per_s"]);
    let want = faults / (observed_s - events_off_s);
    assert!(
        faults > 0.0 && (rate - want).abs() <= 0.05 * want,
        "{rate} faults/s vs {want}: {t}"
    );
}
