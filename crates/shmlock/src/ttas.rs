//! Test-and-test-and-set with bounded exponential backoff ([`ExpBackoff`]): poll with plain loads (no
//! cache-line ping-pong), try the swap only when it looks free, and back off 1, 2, 4 ... 1024 `pause`s after
//! each failed attempt. Never sleeps.
//!
//! State word: 0 = free, 1 = held.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::spin::ExpBackoff;
use crate::{Acquired, RawLock};

/// A TTAS lock with exponential backoff.
#[repr(C, align(64))]
pub struct TtasLock {
    word: AtomicU32,
    _pad: [u8; 60],
}

const _: () = assert!(std::mem::size_of::<TtasLock>() == 64);

impl RawLock for TtasLock {
    type Waiter = ();

    fn waiter(&self, _id: u32) {}

    #[inline]
    fn lock(&self, _w: &mut ()) -> Acquired {
        let mut backoff = ExpBackoff::default();
        let mut spins = 0u64;
        loop {
            // Acquire on success: pairs with the Release store in unlock().
            if self.word.load(Ordering::Relaxed) == 0 && self.word.swap(1, Ordering::Acquire) == 0 {
                return Acquired { spins, sleeps: 0 };
            }
            spins += backoff.next_iterations() as u64;
            backoff.spin();
        }
    }

    #[inline]
    fn unlock(&self, _w: &mut ()) {
        // Release: publishes the critical section.
        self.word.store(0, Ordering::Release);
    }
}
