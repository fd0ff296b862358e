//! Test-and-set: swap until it was free. Never backs off, never sleeps: the baseline that collapses under
//! oversubscription (every waiter burns its whole slice while a preempted holder waits for a CPU).
//!
//! State word: 0 = free, 1 = held.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::spin::cpu_relax;
use crate::{Acquired, RawLock};

/// A test-and-set lock.
#[repr(C, align(64))]
pub struct TasLock {
    word: AtomicU32,
    _pad: [u8; 60],
}

const _: () = assert!(std::mem::size_of::<TasLock>() == 64);

impl RawLock for TasLock {
    type Waiter = ();

    fn waiter(&self, _id: u32) {}

    #[inline]
    fn lock(&self, _w: &mut ()) -> Acquired {
        let mut spins = 0;
        // Acquire: pairs with the Release store in unlock().
        while self.word.swap(1, Ordering::Acquire) != 0 {
            cpu_relax();
            spins += 1;
        }
        Acquired { spins, sleeps: 0 }
    }

    #[inline]
    fn unlock(&self, _w: &mut ()) {
        // Release: publishes the critical section to the next Acquire swap.
        self.word.store(0, Ordering::Release);
    }
}
