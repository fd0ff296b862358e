//! Mutual exclusion for every lock, with threads and across fork()ed processes, and a holder stopped with
//! SIGSTOP: waiters must neither break exclusion nor deadlock, and must finish after SIGCONT.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use axes::Backing;
use axes::LockKind;
use shmlock::shm::ShmRegion;
use shmlock::{with_lock_type, RawLock};

/// The test's shared block: the lock at offset 0, then the data it protects.
#[repr(C, align(64))]
struct Data {
    counter: u64, // plain, non-atomic: only exclusion keeps it right
    in_cs: AtomicU32,
    violations: AtomicU32,
    holding: AtomicU32,
    release: AtomicU32,
}

fn layout<L>() -> usize {
    std::mem::size_of::<L>().div_ceil(64) * 64
}

struct Shared<L> {
    _region: ShmRegion,
    lock: *const L,
    data: *mut Data,
}

// SAFETY: the pointers point into `_region`, which the struct owns and which stays mapped while it
// lives; the lock is built for concurrent use and the data is touched only under it (or through atomics).
unsafe impl<L> Send for Shared<L> {}
// SAFETY: as for Send: shared references only reach the lock's own synchronised API and atomics.
unsafe impl<L> Sync for Shared<L> {}

fn shared<L: RawLock>() -> Shared<L> {
    let off = layout::<L>();
    let region = ShmRegion::new(off + std::mem::size_of::<Data>(), Backing::Page4k).unwrap();
    let lock = region.as_ptr() as *mut L;
    // SAFETY: fresh zeroed region, not yet shared.
    unsafe { L::init(lock).unwrap() };
    // SAFETY: Data fits after the lock in the region.
    let data = unsafe { region.as_ptr().add(off) } as *mut Data;
    Shared {
        _region: region,
        lock,
        data,
    }
}

/// One critical section: enter, check nobody else is inside, bump the counter, leave.
fn critical<L: RawLock>(s: &Shared<L>, w: &mut L::Waiter) {
    // SAFETY: lock and data point into the live shared region.
    let (lock, data) = unsafe { (&*s.lock, &mut *s.data) };
    lock.lock(w);
    if data.in_cs.fetch_add(1, Ordering::Relaxed) != 0 {
        data.violations.fetch_add(1, Ordering::Relaxed);
    }
    // A non-atomic read-modify-write, slow enough to expose overlap.
    // SAFETY: `counter` is a live, aligned u64 in the mapped region; the lock is held, so only this
    // worker touches it (a second one inside would be the violation the test counts).
    let v = unsafe { std::ptr::read_volatile(&data.counter) };
    std::hint::spin_loop();
    // SAFETY: as for the read above.
    unsafe { std::ptr::write_volatile(&mut data.counter, v + 1) };
    data.in_cs.fetch_sub(1, Ordering::Relaxed);
    lock.unlock(w);
}

/// The fork tests run one at a time: each oversubscribes the machine on its own.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Processes and iterations per lock. FIFO locks (ticket, MCS) and plain spinning (tas) convoy when
/// oversubscribed: each handoff can wait a whole time slice for the next waiter to be scheduled. That is
/// the pathology the bench measures; here they get sizes that finish in seconds.
fn size(k: LockKind) -> (u32, u64) {
    match k {
        LockKind::Ticket | LockKind::Mcs | LockKind::Tas => (3, 3_000),
        _ => (6, 20_000),
    }
}

fn kinds() -> Vec<LockKind> {
    LockKind::ALL
        .iter()
        .copied()
        .filter(|&k| shmlock::availability(k).is_ok())
        .collect()
}

fn threads_case<L: RawLock>(k: LockKind) {
    let (threads, iters) = size(k);
    let s = shared::<L>();
    std::thread::scope(|scope| {
        for id in 0..threads {
            let s = &s;
            scope.spawn(move || {
                // SAFETY: the lock lives as long as `s`.
                let mut w = unsafe { &*s.lock }.waiter(id);
                for _ in 0..iters {
                    critical(s, &mut w);
                }
            });
        }
    });
    // SAFETY: all threads are done.
    let d = unsafe { &*s.data };
    assert_eq!(d.violations.load(Ordering::Relaxed), 0, "{k}");
    assert_eq!(d.counter, threads as u64 * iters, "{k}");
}

fn fork_workers<L: RawLock>(
    s: &Shared<L>,
    ids: std::ops::Range<u32>,
    iters: u64,
) -> Vec<libc::pid_t> {
    ids.map(|id| {
        // SAFETY: the child only runs lock operations on shared memory and exits with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: the child inherited the MAP_SHARED region, which stays mapped until it exits.
            let mut w = unsafe { &*s.lock }.waiter(id);
            for _ in 0..iters {
                critical(s, &mut w);
            }
            // SAFETY: _exit ends the forked child without running the parent's atexit handlers or
            // destructors twice.
            unsafe { libc::_exit(0) };
        }
        pid
    })
    .collect()
}

fn wait_all(pids: &[libc::pid_t], timeout: Duration, k: LockKind) {
    let t = Instant::now();
    for &pid in pids {
        loop {
            let mut status = 0;
            // SAFETY: waiting for our own child.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                assert!(
                    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                    "{k}: worker {pid} failed: {status}"
                );
                break;
            }
            if t.elapsed() > timeout {
                for &p in pids {
                    // SAFETY: killing our own children, which we have not reaped yet.
                    unsafe { libc::kill(p, libc::SIGKILL) };
                }
                panic!("{k}: workers did not finish within {timeout:?}: deadlock?");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn processes_case<L: RawLock>(k: LockKind) {
    let (procs, iters) = size(k);
    let s = shared::<L>();
    let pids = fork_workers(&s, 0..procs, iters);
    wait_all(&pids, Duration::from_secs(120), k);
    // SAFETY: the region is mapped for as long as `s` lives, and every worker has exited.
    let d = unsafe { &*s.data };
    assert_eq!(d.violations.load(Ordering::Relaxed), 0, "{k}");
    assert_eq!(d.counter, procs as u64 * iters, "{k}");
}

fn sigstop_case<L: RawLock>(k: LockKind) {
    const WAITERS: u32 = 3;
    const ITERS: u64 = 1_000;
    let s = shared::<L>();
    // The holder: takes the lock, says so, and keeps it until told to release.
    // SAFETY: the child only runs lock operations on shared memory and exits with _exit.
    let holder = unsafe { libc::fork() };
    assert!(holder >= 0);
    if holder == 0 {
        // SAFETY: the child inherited the MAP_SHARED region, mapped until it exits.
        let lock = unsafe { &*s.lock };
        // SAFETY: as above; the data's flags are atomics, shared with the parent by design.
        let d = unsafe { &*s.data };
        let mut w = lock.waiter(100);
        lock.lock(&mut w);
        d.holding.store(1, Ordering::Release);
        while d.release.load(Ordering::Acquire) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        lock.unlock(&mut w);
        // SAFETY: _exit ends the forked child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    // SAFETY: the region is mapped for as long as `s` lives; the parent reads only atomics and, with
    // volatile reads, the counter.
    let d = unsafe { &*s.data };
    let t = Instant::now();
    while d.holding.load(Ordering::Acquire) == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "holder never took the lock"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(holder, libc::SIGSTOP) };
    let waiters = fork_workers(&s, 0..WAITERS, ITERS);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        // SAFETY: a live, aligned u64 in the mapped region; a racy value is what the test looks for.
        unsafe { std::ptr::read_volatile(&d.counter) },
        0,
        "{k}: a waiter entered while the stopped holder held the lock"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(holder, libc::SIGCONT) };
    d.release.store(1, Ordering::Release);
    let mut all = waiters;
    all.push(holder);
    wait_all(&all, Duration::from_secs(120), k);
    assert_eq!(d.violations.load(Ordering::Relaxed), 0, "{k}");
    assert_eq!(
        // SAFETY: every worker has exited; the region is still mapped.
        unsafe { std::ptr::read_volatile(&d.counter) },
        WAITERS as u64 * ITERS,
        "{k}: waiters made progress after SIGCONT"
    );
}

#[test]
fn exclusion_with_threads() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for k in kinds() {
        let t = Instant::now();
        with_lock_type!(k, L => threads_case::<L>(k));
        eprintln!("threads {k}: {:?}", t.elapsed());
    }
}

#[test]
fn exclusion_across_processes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for k in kinds() {
        let t = Instant::now();
        with_lock_type!(k, L => processes_case::<L>(k));
        eprintln!("processes {k}: {:?}", t.elapsed());
    }
}

#[test]
fn stopped_holder_keeps_exclusion_and_waiters_resume() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for k in kinds() {
        let t = Instant::now();
        with_lock_type!(k, L => sigstop_case::<L>(k));
        eprintln!("sigstop {k}: {:?}", t.elapsed());
    }
}

#[test]
fn rseq_reports_why_it_is_unavailable() {
    match shmlock::availability(LockKind::Rseq) {
        Ok(()) => {}
        Err(why) => {
            let why = why.to_string();
            assert!(why.contains("rseq") || why.contains("prctl"), "{why}")
        }
    }
    assert!(LockKind::parse("nope")
        .unwrap_err()
        .to_string()
        .contains("choose from"));
}
