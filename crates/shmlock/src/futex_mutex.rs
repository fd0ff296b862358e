//! The classic three-state futex mutex (Ulrich Drepper, "Futexes Are Tricky", mutex 3), the design the
//! patch proposed for PostgreSQL on aarch64 puts behind `LWLockWaitListLock` (docs/references.md#futex-mutex-aarch64): no spinning; a contended waiter marks the lock and sleeps in
//! the kernel; the unlocker wakes one sleeper only when the mark says there may be one.
//!
//! | state | meaning |
//! |---|---|
//! | 0 | unlocked |
//! | 1 | locked, no waiters |
//! | 2 | locked, maybe waiters (the unlocker must wake one) |

use std::sync::atomic::{AtomicU32, Ordering};

use crate::{futex, Acquired, RawLock};

/// A three-state futex mutex (shared futex: works across processes).
#[repr(C, align(64))]
pub struct FutexMutex {
    state: AtomicU32,
    _pad: [u8; 60],
}

const _: () = assert!(std::mem::size_of::<FutexMutex>() == 64);

impl FutexMutex {
    #[cold]
    #[inline(never)]
    fn lock_contended(&self) -> Acquired {
        let mut sleeps = 0;
        // Mark contended; Acquire on taking it (swap returned 0), pairing with unlock()'s Release.
        while self.state.swap(2, Ordering::Acquire) != 0 {
            futex::wait(&self.state, 2, None);
            sleeps += 1;
        }
        Acquired { spins: 0, sleeps }
    }
}

impl RawLock for FutexMutex {
    type Waiter = ();

    fn waiter(&self, _id: u32) {}

    #[inline]
    fn lock(&self, _w: &mut ()) -> Acquired {
        // Acquire: pairs with the Release swap in unlock().
        if self
            .state
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Acquired::default();
        }
        self.lock_contended()
    }

    #[inline]
    fn unlock(&self, _w: &mut ()) {
        // Release: publishes the critical section to the next Acquire.
        if self.state.swap(0, Ordering::Release) == 2 {
            futex::wake(&self.state, 1);
        }
    }
}
