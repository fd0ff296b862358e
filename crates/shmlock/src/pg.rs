//! PostgreSQL's spinlock, ported faithfully from `src/backend/storage/lmgr/s_lock.c` and
//! `src/include/storage/s_lock.h` (PG 9.5-18; docs/references.md#s-lock).
//!
//! - `S_LOCK`: one `TAS` (x86_64: `lock xchgb`); on failure `s_lock()`.
//! - `s_lock()`: `while TAS_SPIN(lock) perform_spin_delay()`, where `TAS_SPIN` reads first (TTAS) and
//!   `SPIN_DELAY` is `pause`.
//! - `perform_spin_delay`: after `spins_per_delay` spins, sleep `cur_delay` µs (first 1000 µs), then
//!   `cur_delay += cur_delay * random[0,1) + 0.5`, wrapping to 1000 µs above 1 s; more than `NUM_DELAYS`
//!   sleeps is a PANIC ("stuck spinlock").
//! - `finish_spin_delay`: never slept -> `spins_per_delay += 100` (cap 1000); slept -> `-= 1` (floor 10).
//!   `spins_per_delay` is per process, starting at `DEFAULT_SPINS_PER_DELAY`.
//!
//! State word: one byte, 0 = free, 1 = held.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use crate::spin::{cpu_relax, XorShift};
use crate::{Acquired, RawLock};

use lockparams::pg::{
    DEFAULT_SPINS_PER_DELAY, MAX_DELAY_USEC, MAX_SPINS_PER_DELAY, MIN_DELAY_USEC,
    MIN_SPINS_PER_DELAY, NUM_DELAYS, SPINS_PER_DELAY_GROWTH, SPINS_PER_DELAY_SHRINK,
};

/// `slock_t` on x86_64: one byte, padded to a cache line here.
#[repr(C, align(64))]
pub struct PgSpinLock {
    slock: AtomicU8,
    _pad: [u8; 63],
}

const _: () =
    assert!(std::mem::size_of::<PgSpinLock>() == 64 && std::mem::align_of::<PgSpinLock>() == 64);

/// Per-process state: PostgreSQL's static `spins_per_delay` and the PRNG behind the sleep jitter.
#[derive(Debug, Clone)]
pub struct PgWaiter {
    /// The adaptive spin count (starts at 100, 10..=1000).
    pub spins_per_delay: u32,
    rng: XorShift,
}

impl PgWaiter {
    /// A fresh backend's state.
    pub fn new(seed: u64) -> Self {
        PgWaiter {
            spins_per_delay: DEFAULT_SPINS_PER_DELAY,
            rng: XorShift::new(seed),
        }
    }
}

/// `SpinDelayStatus`: one acquisition's spin and sleep bookkeeping.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SpinDelayStatus {
    /// Spins since the last sleep.
    pub spins: u32,
    /// Sleeps so far.
    pub delays: u32,
    /// The next sleep in µs (0 = never slept).
    pub cur_delay_usec: u64,
}

impl SpinDelayStatus {
    /// `perform_spin_delay`: one `pause`, and a sleep every `spins_per_delay` spins. `sleep` performs the
    /// sleep (real: `pg_usleep`); tests pass a recorder. Panics like PostgreSQL's PANIC after NUM_DELAYS.
    #[inline]
    pub fn perform(
        &mut self,
        spins_per_delay: u32,
        rng: &mut XorShift,
        sleep: &mut impl FnMut(u64),
    ) {
        cpu_relax();
        self.spins += 1;
        if self.spins >= spins_per_delay {
            self.delays += 1;
            if self.delays > NUM_DELAYS {
                panic!("stuck spinlock detected (more than {NUM_DELAYS} delays)");
            }
            if self.cur_delay_usec == 0 {
                self.cur_delay_usec = MIN_DELAY_USEC;
            }
            sleep(self.cur_delay_usec);
            // Increase the delay by a random fraction between 1X and 2X.
            self.cur_delay_usec += (self.cur_delay_usec as f64 * rng.next_f64() + 0.5) as u64;
            if self.cur_delay_usec > MAX_DELAY_USEC {
                self.cur_delay_usec = MIN_DELAY_USEC;
            }
            self.spins = 0;
        }
    }

    /// `finish_spin_delay`: adapts `spins_per_delay`.
    pub fn finish(&self, spins_per_delay: &mut u32) {
        if self.cur_delay_usec == 0 {
            if *spins_per_delay < MAX_SPINS_PER_DELAY {
                *spins_per_delay =
                    (*spins_per_delay + SPINS_PER_DELAY_GROWTH).min(MAX_SPINS_PER_DELAY);
            }
        } else if *spins_per_delay > MIN_SPINS_PER_DELAY {
            *spins_per_delay = (*spins_per_delay - SPINS_PER_DELAY_SHRINK).max(MIN_SPINS_PER_DELAY);
        }
    }
}

/// `pg_usleep`: a plain sleep (select()/nanosleep in PostgreSQL; ~50 µs timer slack on Linux).
pub fn pg_usleep(usec: u64) {
    std::thread::sleep(Duration::from_micros(usec));
}

impl PgSpinLock {
    /// `TAS`: `lock xchgb` — returns true when the lock was already held.
    #[inline(always)]
    fn tas(&self) -> bool {
        // Acquire: pairs with the Release store in unlock(), so the critical section sees the previous one.
        self.slock.swap(1, Ordering::Acquire) != 0
    }

    /// `TAS_SPIN`: read first, TAS only when it looks free.
    #[inline(always)]
    fn tas_spin(&self) -> bool {
        self.slock.load(Ordering::Relaxed) != 0 || self.tas()
    }

    /// `s_lock()` with an injectable sleep, for tests of the schedule.
    pub fn lock_with(&self, w: &mut PgWaiter, sleep: &mut impl FnMut(u64)) -> Acquired {
        if !self.tas() {
            return Acquired::default();
        }
        self.s_lock(w, sleep)
    }

    #[cold]
    #[inline(never)]
    fn s_lock(&self, w: &mut PgWaiter, sleep: &mut impl FnMut(u64)) -> Acquired {
        let mut status = SpinDelayStatus::default();
        let mut total_spins = 0u64;
        while self.tas_spin() {
            status.perform(w.spins_per_delay, &mut w.rng, sleep);
            total_spins += 1;
        }
        status.finish(&mut w.spins_per_delay);
        Acquired {
            spins: total_spins,
            sleeps: status.delays,
        }
    }
}

impl RawLock for PgSpinLock {
    type Waiter = PgWaiter;

    fn waiter(&self, id: u32) -> PgWaiter {
        PgWaiter::new(0x5EED_0000 + id as u64 * 7919 + std::process::id() as u64)
    }

    #[inline]
    fn lock(&self, w: &mut PgWaiter) -> Acquired {
        self.lock_with(w, &mut pg_usleep)
    }

    #[inline]
    fn unlock(&self, _w: &mut PgWaiter) {
        // S_UNLOCK: Release publishes the critical section to the next Acquire in tas().
        self.slock.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_schedule_follows_postgres_constants() {
        // Drive perform() through many sleeps with spins_per_delay = 10 and record the delays.
        let mut rng = XorShift::new(1);
        let mut st = SpinDelayStatus::default();
        let mut slept = Vec::new();
        for _ in 0..10 * 200 {
            st.perform(10, &mut rng, &mut |us| slept.push(us));
        }
        assert_eq!(slept.len(), 200, "one sleep every spins_per_delay spins");
        assert_eq!(slept[0], MIN_DELAY_USEC, "the first sleep is 1 ms");
        for pair in slept.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b == MIN_DELAY_USEC && a > MAX_DELAY_USEC / 2 {
                continue; // wrapped past 1 s
            }
            assert!(
                b >= a && b <= 2 * a + 1,
                "grows by a random factor in [1, 2]: {a} -> {b}"
            );
        }
        assert!(slept.iter().all(|&d| d <= MAX_DELAY_USEC));
        assert!(
            slept
                .windows(2)
                .any(|p| p[1] == MIN_DELAY_USEC && p[0] > MIN_DELAY_USEC),
            "wraps to 1 ms above 1 s"
        );
    }

    #[test]
    fn spins_per_delay_adapts() {
        let mut spd = DEFAULT_SPINS_PER_DELAY;
        SpinDelayStatus::default().finish(&mut spd);
        assert_eq!(spd, 200, "+100 without sleeping");
        for _ in 0..20 {
            SpinDelayStatus::default().finish(&mut spd);
        }
        assert_eq!(spd, MAX_SPINS_PER_DELAY);
        let slept = SpinDelayStatus {
            spins: 0,
            delays: 1,
            cur_delay_usec: 1500,
        };
        slept.finish(&mut spd);
        assert_eq!(spd, MAX_SPINS_PER_DELAY - 1, "-1 after sleeping");
        let mut low = 11;
        slept.finish(&mut low);
        slept.finish(&mut low);
        assert_eq!(low, MIN_SPINS_PER_DELAY);
    }

    #[test]
    #[should_panic(expected = "stuck spinlock")]
    fn stuck_after_num_delays() {
        let mut rng = XorShift::new(1);
        let mut st = SpinDelayStatus::default();
        for _ in 0..(NUM_DELAYS as u64 + 1) * 10 {
            st.perform(10, &mut rng, &mut |_| {});
        }
    }
}
