//! The 2 MB hugetlb pool as the pool-touching tests see it, on any starting pool: what preemptlab's shared
//! record says runs hold and what is left (the operator's part), a guard that makes the pool empty for a test
//! that needs it and gives the operator's pages back on every path, and a guard that stops a bench a failed
//! assertion would leave running.
//!
//! The tests assert what a run owns (its share in the record while it runs, none afterwards, the operator's
//! part as it was), never that the pool started empty: the host may have free pages of its own, pages in use
//! by the operator's server, or another run's share.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use hostfacts::hugepages::record::{Registry, Share};
use hostfacts::hugepages::sysfs::HugetlbPool;
use hostguard::hugetlb_pool::alive;

const NR_2M: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";

/// The shared record of the 2 MB pool, when a run holds a share.
pub fn registry() -> Option<Registry> {
    let path = hostguard::record_dir().join("pool-2048kB.json");
    Registry::parse(&std::fs::read_to_string(path).ok()?)
}

/// The share the run with pid `pid` holds.
pub fn share_of(pid: u32) -> Option<Share> {
    registry()?.shares.into_iter().find(|s| s.pid == pid)
}

/// The 2 MB pool at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    /// Persistent pages (`vm.nr_hugepages`).
    pub persistent: u64,
    /// Pages a new mapping can have (free, not reserved).
    pub available: u64,
    /// Pages that runs' shares in the record added (live runs or not).
    pub recorded: u64,
}

/// The record's lock, `LOCK_SH` or `LOCK_EX`, as runs take it around their read-decide-write steps; held
/// until the file drops. None when no run ever made it (then there is no run to exclude).
pub fn record_lock(op: i32) -> Option<std::fs::File> {
    let path = hostguard::record_dir().join("pool-2048kB.lock");
    let f = if op == libc::LOCK_EX {
        std::fs::create_dir_all(path.parent()?).ok()?;
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .ok()?
    } else {
        std::fs::File::open(&path).ok()?
    };
    // SAFETY: flock on a descriptor this function owns; released when the returned file drops.
    let rc = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), op) };
    assert_eq!(rc, 0, "locking {}", path.display());
    Some(f)
}

impl Pool {
    /// Read under the record's lock, so that a run resizing the pool is not seen halfway.
    pub fn read() -> Pool {
        let _lock = record_lock(libc::LOCK_SH);
        Pool::read_locked()
    }

    fn read_locked() -> Pool {
        let p = HugetlbPool::of(2048);
        Pool {
            persistent: p.persistent().expect("the 2 MB pool"),
            available: p.available().expect("the 2 MB pool"),
            recorded: registry().map_or(0, |r| r.shares.iter().map(|s| s.pages).sum()),
        }
    }

    /// Pages no run added: the operator's.
    pub fn operators(&self) -> u64 {
        self.persistent.saturating_sub(self.recorded)
    }
}

/// After the run with pid `pid` ended: its share is gone from the record, and the operator's part of the pool
/// is what it was before the run (`before`): no page of the run's left in it, none of the operator's taken.
pub fn assert_given_back(before: &Pool, pid: u32, context: &str) {
    assert_eq!(
        share_of(pid),
        None,
        "{context}: the run's share is gone from the record"
    );
    let after = Pool::read();
    assert_eq!(
        after.operators(),
        before.operators(),
        "{context}: the pool less the runs' shares is as before the run (before {before:?}, after {after:?})"
    );
}

/// Sets the persistent 2 MB pool.
fn set_persistent(pages: u64) -> std::io::Result<()> {
    std::fs::write(NR_2M, format!("{pages}\n"))
}

/// The 2 MB pool with no page available, for a test that needs one; the pages taken away come back on drop
/// (the test passing, failing or panicking). The pool goes down only by its available pages: never below
/// pages in use or reserved. Runs that hold shares are waited for (their pages are not the test's to take);
/// both resizes happen under the record's lock, so a run starting meanwhile sees them as resizes by hand.
pub struct EmptyPool {
    removed: u64,
}

impl EmptyPool {
    pub fn make() -> EmptyPool {
        let t = Instant::now();
        loop {
            let lock = record_lock(libc::LOCK_EX);
            let held: Vec<Share> = registry()
                .map(|r| r.shares.into_iter().filter(alive).collect())
                .unwrap_or_default();
            if held.is_empty() {
                let p = Pool::read_locked();
                let guard = EmptyPool {
                    removed: p.available,
                };
                set_persistent(p.persistent.saturating_sub(p.available))
                    .expect("resizing the 2 MB pool (tests run as root)");
                let now = Pool::read_locked();
                drop(lock);
                assert_eq!(now.available, 0, "emptied the pool: {p:?} -> {now:?}");
                return guard;
            }
            drop(lock);
            assert!(
                t.elapsed() < Duration::from_secs(300),
                "preemptlab runs held shares of the 2 MB pool for 5 minutes ({held:?}): the test cannot empty it"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for EmptyPool {
    fn drop(&mut self) {
        let _lock = record_lock(libc::LOCK_EX);
        let back = HugetlbPool::of(2048)
            .persistent()
            .map_err(|e| e.to_string())
            .and_then(|now| set_persistent(now + self.removed).map_err(|e| e.to_string()));
        if let Err(e) = back {
            eprintln!(
                "could not give the 2 MB pool back its {} pages: {e}",
                self.removed
            );
        }
    }
}

/// A bench a test started; if the test ends while it runs (a failed assertion), it gets SIGINT, and SIGKILL
/// 30 s later, and is waited for: left running, it would outlive the temp dir its cluster or result is in and
/// leave a server, a segment and a pool share behind for the next test.
pub struct Bench(Option<Child>);

impl Bench {
    pub fn new(child: Child) -> Bench {
        Bench(Some(child))
    }

    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("running").id()
    }

    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.0.as_mut().expect("running").try_wait().unwrap()
    }

    pub fn wait_with_output(mut self) -> Output {
        self.0.take().expect("running").wait_with_output().unwrap()
    }

    /// Runs `cmd` to the end with its stdout and stderr captured: its output and its pid (the name of its
    /// share in the pool record).
    pub fn output(cmd: &mut Command) -> (Output, u32) {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        (Bench::new(child).wait_with_output(), pid)
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        let Some(child) = self.0.as_mut() else {
            return;
        };
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        // SAFETY: signalling our own child, which has not been waited for (its pid is not reused).
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let t = Instant::now();
        while child.try_wait().ok().flatten().is_none() {
            if t.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The operator's part of the 2 MB pool (persistent pages less live runs' shares) as a test found it, put
/// back when the guard drops (the test passing, failing or panicking), for a test that changes it (`hugepages
/// --apply`). Live runs' shares stay on top, as the pool record keeps them.
pub struct OperatorsPool {
    before: u64,
}

impl OperatorsPool {
    pub fn keep() -> OperatorsPool {
        let _lock = record_lock(libc::LOCK_SH);
        OperatorsPool {
            before: operators_now(),
        }
    }
}

impl OperatorsPool {
    /// Adds `pages` persistent pages as an operator would by hand (`sysctl vm.nr_hugepages`, outside the
    /// record): free pages a run without `--reserve-hugepages` can count on. Taken back on drop.
    pub fn grow_by(&self, pages: u64) {
        let _lock = record_lock(libc::LOCK_EX);
        let persistent = HugetlbPool::of(2048).persistent().expect("the 2 MB pool");
        set_persistent(persistent + pages).expect("growing the 2 MB pool (needs root)");
    }
}

/// The persistent 2 MB pool less the pages live runs added (read under the record's lock).
fn operators_now() -> u64 {
    let live: u64 = registry()
        .map(|r| r.shares.iter().filter(|s| alive(s)).map(|s| s.pages).sum())
        .unwrap_or(0);
    HugetlbPool::of(2048)
        .persistent()
        .expect("the 2 MB pool")
        .saturating_sub(live)
}

impl Drop for OperatorsPool {
    fn drop(&mut self) {
        let _lock = record_lock(libc::LOCK_EX);
        let now = operators_now();
        if now == self.before {
            return;
        }
        let persistent = HugetlbPool::of(2048).persistent().unwrap_or(now);
        let back = persistent.saturating_sub(now) + self.before;
        if let Err(e) = set_persistent(back) {
            eprintln!("could not put the 2 MB pool back to {back} pages: {e}");
        }
    }
}
