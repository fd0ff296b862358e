//! The hugetlb pool record as runs that end badly and pool users that come and go leave it, with real
//! pools: what the audit says of a killed `--reserve-hugepages` run's pages, and the pool given back
//! exactly whatever else used it meanwhile. Root (the 2 MB pool is resized for a moment and restored; see
//! `common::hugetlb`).

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use common::hugetlb::{self, Bench, EmptyPool, Pool};
use serde_json::Value;

/// The tests resize the 2 MB pool and read it back: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Gives back what killed runs left in the pool when dropped (the test passing or failing), as the next
/// run would.
struct Recover;

impl Drop for Recover {
    fn drop(&mut self) {
        for line in hostguard::hugetlb_pool::recover_stale_pools() {
            eprintln!("{line}");
        }
    }
}

/// `bench lock` on hugetlb-2m with `--reserve-hugepages` for `secs`, in its own process group, its stderr
/// to `stderr`.
fn reserving_bench(secs: u32, out: &std::path::Path, stderr: Stdio) -> Bench {
    let child = Command::new(cargo_bin("preemptlab"))
        .args([
            "bench",
            "lock",
            "--quiet",
            "--locks",
            "pg",
            "--workers",
            "1",
        ])
        .args(["--pages", "hugetlb-2m", "--warmup", "0s", "--repeat", "1"])
        .arg("--duration")
        .arg(format!("{secs}s"))
        .args(["--reserve-hugepages", "--out"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .unwrap();
    Bench::new(child)
}

/// Waits (up to 20 s) for the run `pid` to hold a share of the pool; returns it.
fn share_taken(pid: u32) -> hostfacts::hugepages::record::Share {
    let t = Instant::now();
    loop {
        if let Some(s) = hugetlb::share_of(pid) {
            return s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "run {pid} took no share"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Regression (issue 46 item 7): after a SIGKILLed `--reserve-hugepages` run, the audit said the pages it
/// added were "reserved and nobody uses them", naming neither the dead run's record nor that the next bench
/// gives them back. The pool fact names them (pages, run, record), and so does the finding when the pool is
/// otherwise unused; the next run's recovery gives them back, leaving the pool as before.
#[test]
fn audit_after_a_sigkilled_reserving_run_names_neither_record_nor_remedy_regression() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _empty = EmptyPool::make();
    let before = Pool::read();
    let _recover = Recover;
    let dir = tempfile::tempdir().unwrap();
    let mut bench = reserving_bench(60, &dir.path().join("k.json"), Stdio::null());
    let pid = bench.id();
    let share = share_taken(pid);
    assert!(share.pages > 0, "the run grew the pool: {share:?}");
    // SAFETY: killing our own child's process group (it and its workers).
    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
    let t = Instant::now();
    while bench.try_wait().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "SIGKILL did not end it"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        hugetlb::share_of(pid),
        Some(share.clone()),
        "its share is left"
    );
    let o = Command::new(cargo_bin("preemptlab"))
        .args(["audit", "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let audit: Value = serde_json::from_slice(&o.stdout).unwrap();
    let pool = audit["memory"]["pools"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["page_size_kib"] == 2048)
        .unwrap()
        .clone();
    let ended = &pool["left_by_ended_runs"];
    assert_eq!(ended["pages"], share.pages, "{pool}");
    assert_eq!(ended["pids"], serde_json::json!([pid]), "{pool}");
    assert_eq!(ended["record"], "/run/preemptlab/pool-2048kB.json");
    let unused = audit["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "hugetlb-pool-unused");
    if let Some(f) = unused {
        let title = f["title"].as_str().unwrap();
        let want = format!(
            "{} of them added by preemptlab run {pid}, which ended without giving them back",
            share.pages
        );
        assert!(title.contains(&want), "{title}");
        let fix = f["fix"].to_string();
        assert!(fix.contains("the next preemptlab bench"), "{fix}");
    }
    // What the next run does first.
    let lines = hostguard::hugetlb_pool::recover_stale_pools();
    assert!(
        lines.iter().any(|l| l.contains(&pid.to_string())),
        "{lines:?}"
    );
    assert_eq!(hugetlb::share_of(pid), None);
    assert_eq!(
        Pool::read().persistent,
        before.persistent,
        "the pool as before"
    );
}

/// Puts the 2 MB pool back to `to` persistent pages when dropped (the test passing or failing).
struct PoolBack {
    to: u64,
}

impl Drop for PoolBack {
    fn drop(&mut self) {
        let pool = hostfacts::hugepages::sysfs::HugetlbPool::of(2048);
        if let Err(e) = pool.set_persistent(self.to) {
            eprintln!("could not put the 2 MB pool back to {} pages: {e}", self.to);
        }
    }
}

/// Regression (issue 46 item 11): two overlapping `--reserve-hugepages` runs left the pool 491 pages above
/// where they found it after a PostgreSQL on huge pages stopped while they ran. A run reads the persistent
/// pool as `nr_hugepages` less `surplus_hugepages`, two files one after the other; a user leaving a pool
/// shrunk under it frees surplus pages, each lowering both counts, and a read that straddled the frees saw
/// the pool larger by the pages freed in between: a run took that for the operator resizing the pool and
/// kept its share's pages as the operator's. Here this process maps 256 pages, the pool is shrunk under
/// them (256 surplus) and they are freed one by one while the pool is read: every read is the persistent
/// pool as set. The pool is restored whatever happens; the record's lock is held throughout so that no run
/// interleaves.
#[test]
fn a_user_leaving_the_pool_mid_read_made_a_run_keep_its_share_regression() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const N: u64 = 256;
    const PAGE: usize = 2 << 20;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _empty = EmptyPool::make();
    let _lock = hugetlb::record_lock(libc::LOCK_EX);
    let pool = hostfacts::hugepages::sysfs::HugetlbPool::of(2048);
    let p0 = pool.persistent().unwrap();
    let _back = PoolBack { to: p0 };
    pool.set_persistent(p0 + N).unwrap();
    assert_eq!(
        pool.read("nr_hugepages").unwrap(),
        p0 + N,
        "the kernel gave {N} pages of 2 MB (memory fragmented?)"
    );
    let len = N as usize * PAGE;
    // SAFETY: a new anonymous shared mapping of hugetlb pages; no existing memory is touched, and the
    // result is checked against MAP_FAILED before use.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB,
            -1,
            0,
        )
    };
    assert_ne!(addr, libc::MAP_FAILED, "mapping {N} huge pages");
    for i in 0..N as usize {
        // SAFETY: within the mapping just made (i < N pages of PAGE bytes), writable, owned by this test.
        unsafe { *(addr as *mut u8).add(i * PAGE) = 1 };
    }
    // The pool shrunk under its user: its pages in use beyond it are surplus.
    pool.set_persistent(p0).unwrap();
    assert_eq!(pool.read("surplus_hugepages").unwrap(), N);
    let base = addr as usize;
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let freed = done.clone();
    let leaving = std::thread::spawn(move || {
        for i in 0..N as usize {
            // SAFETY: unmaps page i of the mapping made above, once each; nothing reads it any more.
            let rc = unsafe { libc::munmap((base + i * PAGE) as *mut libc::c_void, PAGE) };
            assert_eq!(rc, 0);
        }
        // Release: the frees are done before the flag reads true (Acquire below).
        freed.store(true, Ordering::Release);
    });
    let (mut reads, mut wrong) = (0u64, Vec::new());
    while !done.load(Ordering::Acquire) {
        let p = pool.persistent().unwrap();
        reads += 1;
        if p != p0 {
            wrong.push(p);
        }
    }
    leaving.join().unwrap();
    assert!(
        wrong.is_empty(),
        "{} of {reads} reads of the pool while its surplus pages were freed were not {p0}: {wrong:?}",
        wrong.len()
    );
    assert!(reads > 0);
    assert_eq!(pool.read("surplus_hugepages").unwrap(), 0);
    assert_eq!(pool.read("nr_hugepages").unwrap(), p0);
}

/// Regression (issue 46 item 11): a pool user that arrives while a run holds its share can take the
/// share's pages; the run cannot give those back, and said nothing of it. Here this test maps the pages a
/// `bench lock --reserve-hugepages` run added before the run maps them: the run gives the pool back to
/// where it found it, and says that pages stay in use beyond it, naming this process; once the test lets
/// them go, the pool is exactly as before.
#[test]
fn a_user_that_takes_a_runs_share_is_named_when_the_run_gives_it_back_regression() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let _empty = EmptyPool::make();
    let before = Pool::read();
    let _recover = Recover;
    let dir = tempfile::tempdir().unwrap();
    let bench = reserving_bench(2, &dir.path().join("r.json"), Stdio::piped());
    let share = share_taken(bench.id());
    assert!(share.pages > 0, "{share:?}");
    // Take every page a new mapping can have (the run's share, not mapped yet), as an arriving user would.
    const PAGE: usize = 2 << 20;
    let pool = hostfacts::hugepages::sysfs::HugetlbPool::of(2048);
    let (mut addr, mut len) = (libc::MAP_FAILED, 0usize);
    let t = Instant::now();
    while addr == libc::MAP_FAILED && t.elapsed() < Duration::from_secs(10) {
        len = pool.available().unwrap() as usize * PAGE;
        if len > 0 {
            // SAFETY: a new anonymous shared hugetlb mapping; checked against MAP_FAILED before use.
            addr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB,
                    -1,
                    0,
                )
            };
        }
    }
    assert_ne!(addr, libc::MAP_FAILED, "took none of the run's pages");
    for i in 0..len / PAGE {
        // SAFETY: within the mapping just made, writable, owned by this test.
        unsafe { *(addr as *mut u8).add(i * PAGE) = 1 };
    }
    let out = bench.wait_with_output();
    let err = String::from_utf8_lossy(&out.stderr);
    let held = hugetlb::share_of(std::process::id());
    // SAFETY: unmaps the whole mapping made above; nothing uses it any more.
    assert_eq!(unsafe { libc::munmap(addr, len) }, 0);
    assert_eq!(held, None, "the test holds no share");
    let want = format!("(pid {}) maps {}", std::process::id(), len / PAGE);
    assert!(
        err.contains("pages in use beyond it stay until their users let them go")
            && err.contains(&want),
        "{want}: {err}"
    );
    let after = Pool::read();
    assert_eq!(
        after.persistent, before.persistent,
        "{before:?} -> {after:?}"
    );
    assert_eq!(pool.surplus().unwrap(), 0);
}
