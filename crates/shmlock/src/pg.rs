//! PostgreSQL's spinlock, ported faithfully from `src/backend/storage/lmgr/s_lock.c` and
//! `src/include/storage/s_lock.h` (PG 9.5-18; docs/references.md#s-lock).
//!
//! - `S_LOCK`: one `TAS`; on failure `s_lock()`.
//! - `s_lock()`: `while TAS_SPIN(lock) perform_spin_delay()`, where `TAS_SPIN` reads first (TTAS).
//! - Per architecture, as PG 18's s_lock.h has it (and this port, compiled for that architecture):
//!
//!   | arch    | `slock_t`       | `TAS`                                   | `SPIN_DELAY` | `S_UNLOCK`              |
//!   |---------|-----------------|-----------------------------------------|--------------|-------------------------|
//!   | x86_64  | `unsigned char` | `lock xchgb`                            | `rep; nop` (`pause`) | a plain store   |
//!   | aarch64 | `int`           | `__sync_lock_test_and_set(lock, 1)`: an acquire swap (`ldaxr`/`stxr`, or LSE `swpa` through GCC's and Rust's outline atomics) | `isb` | `__sync_lock_release`: a release store of 0 |
//!   | other   | (theirs)        | an acquire swap                         | none (PG's default `((void) 0)`) | a release store |
//!
//!   On aarch64 `TAS_SPIN` reads first too ("a win on ARM64", s_lock.h).
//! - `perform_spin_delay`: after `spins_per_delay` spins, sleep `cur_delay` µs (first 1000 µs), then
//!   `cur_delay += cur_delay * random[0,1) + 0.5`, wrapping to 1000 µs above 1 s; more than `NUM_DELAYS`
//!   sleeps is a PANIC ("stuck spinlock").
//! - `finish_spin_delay`: never slept -> `spins_per_delay += 100` (cap 1000); slept -> `-= 1` (floor 10).
//!   `spins_per_delay` is per process, starting at `DEFAULT_SPINS_PER_DELAY`.
//!
//! State word: one byte, 0 = free, 1 = held.

#[cfg(target_arch = "aarch64")]
use std::sync::atomic::AtomicU32;
#[cfg(not(target_arch = "aarch64"))]
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::spin::XorShift;
use crate::{Acquired, RawLock};

use lockparams::pg::{
    DEFAULT_SPINS_PER_DELAY, MAX_DELAY_USEC, MAX_SPINS_PER_DELAY, MIN_DELAY_USEC,
    MIN_SPINS_PER_DELAY, NUM_DELAYS, SPINS_PER_DELAY_GROWTH, SPINS_PER_DELAY_SHRINK,
};

/// `slock_t` as PostgreSQL declares it on the architecture compiled for: `int` on aarch64 (s_lock.h: "the
/// int-width variant of the builtin because it works on more chips"), `unsigned char` on x86_64 (and here
/// elsewhere).
#[cfg(target_arch = "aarch64")]
type Slock = AtomicU32;
#[cfg(not(target_arch = "aarch64"))]
type Slock = AtomicU8;

/// The width of [`Slock`], bytes (4 on aarch64, 1 elsewhere).
pub const SLOCK_BYTES: usize = std::mem::size_of::<Slock>();

/// `slock_t`, padded to a cache line here.
#[repr(C, align(64))]
pub struct PgSpinLock {
    slock: Slock,
    _pad: [u8; 64 - SLOCK_BYTES],
}

/// `SPIN_DELAY()`: `pause` on x86/x86_64 (`rep; nop`), `isb` on aarch64, nothing elsewhere (s_lock.h's
/// default). Not [`crate::spin::cpu_relax`], whose "elsewhere" is the compiler's spin hint: this one is
/// PostgreSQL's.
#[inline(always)]
pub fn spin_delay() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: isb is a barrier with no memory or register effects visible to Rust.
    unsafe {
        std::arch::asm!("isb", options(nomem, nostack, preserves_flags));
    }
    #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
    std::hint::spin_loop(); // pause
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
    /// `perform_spin_delay`: one [`spin_delay`], and a sleep every `spins_per_delay` spins. `sleep` performs the
    /// sleep (real: `pg_usleep`); tests pass a recorder. Panics like PostgreSQL's PANIC after NUM_DELAYS.
    #[inline]
    pub fn perform(
        &mut self,
        spins_per_delay: u32,
        rng: &mut XorShift,
        sleep: &mut impl FnMut(u64),
    ) {
        spin_delay();
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
    /// `TAS`: an acquire swap of 1 (`lock xchgb` on x86_64, `__sync_lock_test_and_set` on aarch64) —
    /// returns true when the lock was already held.
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
        // S_UNLOCK (`__sync_lock_release` on aarch64): Release publishes the critical section to the next
        // Acquire in tas().
        self.slock.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lock word is PostgreSQL's `slock_t` on the architecture this test runs on (scripts/cross-arm64
    /// test runs it on aarch64 under QEMU's user-mode emulator).
    #[test]
    fn the_lock_word_is_postgres_slock_t_here() {
        let want = if cfg!(target_arch = "aarch64") { 4 } else { 1 };
        assert_eq!(SLOCK_BYTES, want);
        let l = PgSpinLock {
            slock: Slock::new(0),
            _pad: [0; 64 - SLOCK_BYTES],
        };
        let mut w = PgWaiter::new(1);
        assert_eq!(l.lock(&mut w), Acquired::default());
        assert!(l.tas(), "held");
        l.unlock(&mut w);
        assert!(!l.tas_spin(), "free again, taken by TAS_SPIN");
    }

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
