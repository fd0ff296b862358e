//! The adaptive lock: this project's answer to lock-holder preemption in an oversubscribed, fault-prone
//! critical section.
//!
//! Why each rule:
//! 1. **Spin briefly, and never more spinners than CPUs.** Spinning beats sleeping when the holder is
//!    running and about to release (a futex wake + switch costs 2-7 µs here, docs/references.md#dev-machine-costs). But a spinner
//!    beyond the CPU count only spins on a run queue, and every spinner takes a CPU a preempted holder may
//!    need: at most one spinner per CPU (up to 8), the rest park. A spinner holds a *slot* stamped with the
//!    time it started; a running spinner gives it back within `SPIN_BUDGET`, so a slot older than
//!    `STALE_SLOT` belongs to a spinner that was preempted mid-spin, and a newcomer takes it over. (With a
//!    plain counter, a preempted spinner kept its place: on 2 CPUs with 32 workers 13% of acquisitions
//!    parked behind spinners that were not running, p99 acquire 3 ms. A cap of CPUs/2 was worse still.)
//! 2. **Spin only while the holder may be running.** The holder records the CPU it took the lock on (glibc
//!    reads it from the rseq area: one load). A waiter running on that same CPU knows the holder is not
//!    running (it is queued behind this waiter, or migrated): it parks at once, which hands the CPU back
//!    sooner than a spin or a `sched_yield` would. Elsewhere the spin is bounded in time (`SPIN_BUDGET`,
//!    50 µs). The budget is set by the tail of the hold time while the holder runs, not by its median: on
//!    4 KB pages a hold is 0.7 µs at p50 and 6.3 µs at p99, but 40 µs at p99.9 (a fault that also allocates
//!    a page table, fault-around of 16 pages, an interrupt), while a descheduled holder is gone for a
//!    slice (milliseconds). With the fourth version's 6 µs budget, spinners gave up on 1-8% of operations at
//!    8-32 workers and everyone behind them parked (parks 0.03-0.25 per operation, most ending in a
//!    timeout); with 50 µs, 0.06-0.26% (parks 0.003-0.02), while a stalled hold (> 100 µs: 0.03-0.07% of
//!    operations) costs one spinner at most 50 µs, about 25 ns per operation. A hold that outlasts a whole
//!    budget means its holder is descheduled: the spinner marks the hold `STALLED`, and every later
//!    arrival parks without spinning until the release clears the mark (one wasted budget per stalled
//!    hold, not one per waiter). No `sched_yield`: under EEVDF a yield
//!    pushes the yielder's deadline back a slice, and the third version's one yield after a spent budget
//!    cost fairness (Jain 0.56-0.76 at 32 workers on 2 CPUs; 0.70-0.83 at 16 when combined with the
//!    same-CPU rule, against 0.98-0.99 for this version in the same interleaved runs).
//! 3. **Park in the kernel** on a shared futex (no 1 ms..1 s guessing as in `pg`, whose waiters sleep
//!    through ~10^4 critical sections).
//! 4. **No handoff, and no needless wakes.** Unlock releases the word first and then wakes one sleeper,
//!    which must compete again: handing the lock to a sleeper would make every release wait for a wakeup
//!    and a context switch (a convoy). Unlock does not wake at all while a fresh spinner is active (it will
//!    take the lock; `PARKED` stays set, so a later unlock reconsiders), and at most one wake is in flight
//!    (`WAKING`): a futex wake is a syscall in the holder's path, and waking a second sleeper before the
//!    first has run only costs CPU.
//! 5. **Bounded sleeps.** A parked waiter sleeps at most `PARK_TIMEOUT_MIN`, doubling up to
//!    `PARK_TIMEOUT_MAX`, then retries: with unlocks skipping wakes while spinners are active, no sleeper
//!    can be stranded behind two processes passing the lock back and forth.
//! 6. **rseq slice extension** (where the kernel has it, Linux 7.0+): the holder asks not to be preempted
//!    for a few µs, so the common "preempted at the tick while holding" case does not happen at all.
//!
//! | state bit | meaning |
//! |---|---|
//! | `LOCKED` (1) | held |
//! | `PARKED` (2) | a waiter may be asleep on the futex: an unlock with no spinner around must wake one |
//! | `WAKING` (4) | a wake is in flight: no other unlock wakes until the wakee has run |
//! | `STALLED` (8) | a spinner waited a whole budget for this hold: arrivals park at once; cleared by unlock |
//!
//! `PARKED` is cleared only when a wake finds nobody queued; a parker that raced with that sees the word
//! change (its futex wait fails with EAGAIN) and sets it again: no lost wakeups.
//!
//! **Memory ordering.** Exclusion and the publication of the critical section rest on two operations only:
//! the Acquire compare-exchange that sets `LOCKED` (`try_take` and the fast path of `lock`)
//! and the Release `fetch_and` that clears it in `unlock`. Everything else is Relaxed, for one of three
//! reasons named at each site: (a) *hint*: the owner word, the spinner slots and the `PARKED`/`WAKING`/
//! `STALLED` bits decide only whether a waiter spins, parks or wakes someone, never whether it holds the
//! lock, and no data is handed over through them, so a stale value costs a spin, a park or a wake, and a
//! missed wake is bounded by the park timeout (rule 5); (b) *one location*: every read-modify-write of
//! `state` acts on the latest value in that word's single modification order whatever its ordering, so a
//! `PARKED` set by a waiter is either seen by the unlock's `fetch_and` or makes the waiter's
//! compare-exchange fail; and the futex wait compares the word in the kernel atomically with going to sleep
//! (futex(2)), so a wake cannot fall between the check and the sleep; (c) *failure*: a failed
//! compare-exchange takes nothing and reads nothing the lock protects.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use crate::spin::cpu_relax;
use crate::{futex, Acquired, RawLock};

const LOCKED: u32 = 1;
const PARKED: u32 = 2;
const WAKING: u32 = 4;
const STALLED: u32 = 8;

use lockparams::adaptive::{PARK_TIMEOUT_MAX, PARK_TIMEOUT_MIN, SLOTS, SPIN_BUDGET, STALE_SLOT};

/// The adaptive lock.
#[repr(C, align(64))]
pub struct AdaptiveLock {
    state: AtomicU32,
    _pad0: [u8; 4],
    /// The current hold: its sequence number (high 32 bits) and the CPU it was taken on (low 32 bits).
    /// Written by the holder only, on the line it has just taken.
    owner: AtomicU64,
    _pad1: [u8; 48],
    /// Spinner slots: CLOCK_MONOTONIC ns when their spinner started, 0 when free.
    slots: [AtomicU64; SLOTS],
}

const _: () = assert!(std::mem::size_of::<AdaptiveLock>() == 128);

/// Per-process state: the spin budget in relax iterations, and the rseq slice extension if enabled.
#[derive(Debug)]
pub struct AdaptiveWaiter {
    spin_iterations: u32,
    max_spinners: u32,
    slice: Option<rseqslice::SliceExtension>,
}

/// Relax iterations that take about `SPIN_BUDGET` on this CPU (measured once per process).
fn spin_iterations() -> u32 {
    static ITER: OnceLock<u32> = OnceLock::new();
    *ITER.get_or_init(|| {
        let n = 20_000u32;
        let t = Instant::now();
        for _ in 0..n {
            cpu_relax();
        }
        let per = t.elapsed().as_nanos().max(1) as f64 / n as f64;
        ((SPIN_BUDGET.as_nanos() as f64 / per) as u32).clamp(16, 100_000)
    })
}

/// CLOCK_MONOTONIC in ns: one clock for every process on the host (vDSO, ~27 ns here).
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// The CPU this thread runs on (glibc reads it from the registered rseq area: a load, no syscall).
fn this_cpu() -> u32 {
    // SAFETY: sched_getcpu has no preconditions; -1 (unknown) maps to u32::MAX, which matches no holder.
    unsafe { libc::sched_getcpu() as u32 }
}

impl AdaptiveLock {
    #[inline(always)]
    fn try_take(&self, s: u32) -> bool {
        // Acquire: pairs with the Release fetch_and in unlock(). Relaxed on failure: (c) in the module doc.
        s & LOCKED == 0
            && self
                .state
                .compare_exchange_weak(s, s | LOCKED, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Claims a free or stale spinner slot: returns its index and stamp.
    fn claim_slot(&self, w: &AdaptiveWaiter) -> Option<(usize, u64)> {
        let now = now_ns();
        let stale = STALE_SLOT.as_nanos() as u64;
        for (i, slot) in self.slots[..w.max_spinners as usize].iter().enumerate() {
            // Relaxed: slots are hints (a); the compare-exchange below acts on the slot's latest value (b).
            let t = slot.load(Ordering::Relaxed);
            if (t == 0 || now.saturating_sub(t) > stale)
                && slot
                    .compare_exchange(t, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
            {
                return Some((i, now));
            }
        }
        None
    }

    /// Is a spinner running now (a slot stamped less than `STALE_SLOT` ago)?
    fn fresh_spinner(&self) -> bool {
        let stale = STALE_SLOT.as_nanos() as u64;
        let mut now = 0;
        for slot in &self.slots {
            // Relaxed: a hint (a); a stale stamp skips a wake the sleeper's timeout makes up for, or wakes one
            // that was not needed.
            let t = slot.load(Ordering::Relaxed);
            if t != 0 {
                if now == 0 {
                    now = now_ns();
                }
                if now.saturating_sub(t) <= stale {
                    return true;
                }
            }
        }
        false
    }

    /// Records the new hold (called by the holder right after taking the lock).
    #[inline(always)]
    fn record_owner(&self) {
        // Relaxed: only holders write the owner word, each after its Acquire on `state`, which follows the
        // previous holder's Release, which follows that holder's store here: this load sees the latest
        // sequence number by happens-before. Waiters read it as a hint (a).
        let seq = (self.owner.load(Ordering::Relaxed) >> 32).wrapping_add(1);
        self.owner
            .store((seq << 32) | this_cpu() as u64, Ordering::Relaxed);
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self, w: &AdaptiveWaiter) -> Acquired {
        let mut spins = 0u64;
        let mut sleeps = 0u32;
        let mut timeout = PARK_TIMEOUT_MIN;
        let mut me = this_cpu();
        loop {
            // Relaxed: a snapshot to choose the next step; taking the lock goes through try_take's Acquire.
            let s = self.state.load(Ordering::Relaxed);
            if s & LOCKED == 0 {
                if self.try_take(s) {
                    return Acquired { spins, sleeps };
                }
                continue;
            }
            // 1-2: a bounded spin, unless the holder cannot be running (it took the lock on this CPU, and
            // this waiter is what runs here now), or a spinner already waited a whole budget for this very
            // hold, or every spinner slot is taken by a running spinner.
            // Relaxed: a hint (a): a stale owner makes this waiter spin or park when the other was better.
            let owner = self.owner.load(Ordering::Relaxed);
            if s & STALLED == 0 && owner as u32 != me {
                if let Some((slot, stamp)) = self.claim_slot(w) {
                    let mut i = 0;
                    let mut got = false;
                    while i < w.spin_iterations {
                        // Relaxed: a poll; the take is try_take's Acquire.
                        let s = self.state.load(Ordering::Relaxed);
                        if self.try_take(s) {
                            got = true;
                            break;
                        }
                        cpu_relax();
                        i += 1;
                    }
                    // Give the slot back unless a newcomer took it over while this spinner was descheduled.
                    // Relaxed: a hint (a), on the slot's latest value (b).
                    let _ = self.slots[slot].compare_exchange(
                        stamp,
                        0,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                    spins += i as u64;
                    if got {
                        return Acquired { spins, sleeps };
                    }
                    // The same hold outlasted the whole budget: its holder is descheduled (or in a long
                    // fault). Say so, so that later arrivals park at once instead of spinning too.
                    // Relaxed: STALLED and the owner are hints (a); the compare-exchange fails if the word
                    // changed (b), and if it marks a newer hold by mistake, arrivals park for that one hold.
                    let s = self.state.load(Ordering::Relaxed);
                    if s & (LOCKED | STALLED) == LOCKED
                        && self.owner.load(Ordering::Relaxed) == owner
                    {
                        let _ = self.state.compare_exchange(
                            s,
                            s | STALLED,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        );
                    }
                    continue;
                }
            }
            // 3: park. Announce ourselves with PARKED, then sleep while the word still says so.
            // Relaxed: (b): the unlock's fetch_and either follows this in the word's order and sees PARKED,
            // or precedes it and makes it fail; the futex wait then rechecks the word in the kernel.
            let parked = s | PARKED;
            if s & PARKED == 0
                && self
                    .state
                    .compare_exchange(s, parked, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            futex::wait(&self.state, parked, Some(timeout));
            sleeps += 1;
            timeout = (timeout * 2).min(PARK_TIMEOUT_MAX);
            me = this_cpu();
            // We may be the wakee: let the next unlock wake another sleeper if needed.
            // Relaxed: WAKING is a hint (a) and the fetch_and acts on the latest value (b).
            if self.state.load(Ordering::Relaxed) & WAKING != 0 {
                self.state.fetch_and(!WAKING, Ordering::Relaxed);
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_one(&self) {
        // Claim the single in-flight wake; give up if someone holds the lock again (their unlock will
        // reconsider), a wake is already in flight, or nobody is parked any more.
        // Relaxed: WAKING and PARKED are hints (a) on one word (b); the wakee takes the lock through
        // try_take's Acquire, nothing is handed to it here.
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            if cur & (LOCKED | WAKING) != 0 || cur & PARKED == 0 {
                return;
            }
            match self.state.compare_exchange_weak(
                cur,
                cur | WAKING,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        if futex::wake(&self.state, 1) == 0 {
            // Nobody was queued: clear the marks (a parker in flight sees the change and re-marks).
            // Relaxed: (b), and the parker's futex wait fails with EAGAIN on the changed word.
            self.state.fetch_and(!(PARKED | WAKING), Ordering::Relaxed);
        }
    }
}

impl RawLock for AdaptiveLock {
    type Waiter = AdaptiveWaiter;

    fn waiter(&self, _id: u32) -> AdaptiveWaiter {
        AdaptiveWaiter {
            spin_iterations: spin_iterations(),
            max_spinners: osutil::cpus::online().clamp(1, SLOTS as u32),
            slice: rseqslice::SliceExtension::enable().ok(),
        }
    }

    fn slice_counts(w: &AdaptiveWaiter) -> Option<rseqslice::SliceCounts> {
        w.slice.as_ref().map(rseqslice::SliceExtension::counts)
    }

    #[inline]
    fn lock(&self, w: &mut AdaptiveWaiter) -> Acquired {
        // Acquire: pairs with the Release fetch_and in unlock(); Relaxed on failure: (c) in the module doc.
        let a = if self
            .state
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            Acquired::default()
        } else {
            self.lock_slow(w)
        };
        self.record_owner();
        if let Some(s) = &w.slice {
            s.request();
        }
        a
    }

    #[inline]
    fn unlock(&self, w: &mut AdaptiveWaiter) {
        // 4: release first (Release: publishes the critical section), then maybe wake one sleeper.
        let prev = self.state.fetch_and(!(LOCKED | STALLED), Ordering::Release);
        if prev & PARKED != 0 && prev & WAKING == 0 && !self.fresh_spinner() {
            self.wake_one();
        }
        if let Some(s) = &w.slice {
            s.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::thread;
    use std::time::Duration;

    fn pin(cpu: usize) {
        // SAFETY: a zeroed cpu_set_t is valid; CPU_SET and sched_setaffinity get valid pointers.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
        }
    }

    fn new_lock() -> Box<AdaptiveLock> {
        // SAFETY: the lock's fields are atomics and byte arrays, for which all-zero is the initial state.
        Box::new(unsafe { std::mem::zeroed() })
    }

    /// A holder that is not running (here: asleep while holding) keeps the lock `hold` long after the
    /// barrier; each waiter runs pinned to its CPU, starts `delay` after the barrier and reports what its
    /// acquisition cost.
    fn contend(holder_cpu: usize, waiters: &[(usize, Duration)], hold: Duration) -> Vec<Acquired> {
        let lock = new_lock();
        let barrier = Barrier::new(1 + waiters.len());
        thread::scope(|s| {
            let lock = &*lock;
            let barrier = &barrier;
            s.spawn(move || {
                pin(holder_cpu);
                let mut w = lock.waiter(0);
                lock.lock(&mut w);
                barrier.wait();
                thread::sleep(hold);
                lock.unlock(&mut w);
            });
            let handles: Vec<_> = waiters
                .iter()
                .enumerate()
                .map(|(i, &(cpu, delay))| {
                    s.spawn(move || {
                        pin(cpu);
                        let mut w = lock.waiter(i as u32 + 1);
                        barrier.wait();
                        thread::sleep(delay);
                        let a = lock.lock(&mut w);
                        lock.unlock(&mut w);
                        a
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn a_waiter_on_the_holders_cpu_parks_without_spinning() {
        let a = contend(0, &[(0, Duration::ZERO)], Duration::from_millis(30));
        assert_eq!(a[0].spins, 0, "{:?}", a[0]);
        assert!(a[0].sleeps >= 1, "{:?}", a[0]);
    }

    #[test]
    fn after_one_spent_budget_later_arrivals_park_without_spinning() {
        if osutil::cpus::online() < 2 {
            eprintln!("skipped: needs two CPUs");
            return;
        }
        let a = contend(
            0,
            &[(1, Duration::ZERO), (1, Duration::from_millis(10))],
            Duration::from_millis(50),
        );
        // The first waiter spent its budget on a holder that never ran, marked the hold, then parked.
        assert!(a[0].spins > 0 && a[0].sleeps >= 1, "{:?}", a[0]);
        // The later one saw the mark and parked at once.
        assert_eq!(a[1].spins, 0, "{:?}", a[1]);
        assert!(a[1].sleeps >= 1, "{:?}", a[1]);
    }
}
