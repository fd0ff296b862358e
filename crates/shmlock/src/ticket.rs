//! FIFO ticket lock: take a ticket, wait until it is served. Perfectly fair, and for that reason the worst
//! under preemption: a descheduled waiter whose turn comes blocks everyone behind it.
//!
//! | word | meaning |
//! |---|---|
//! | `next` | the next ticket to hand out |
//! | `serving` | the ticket that holds the lock |
//! The lock is free when `next == serving`.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::spin::cpu_relax;
use crate::{Acquired, RawLock};

/// A ticket lock; the two counters sit on separate cache lines.
#[repr(C, align(64))]
pub struct TicketLock {
    next: AtomicU32,
    _pad0: [u8; 60],
    serving: AtomicU32,
    _pad1: [u8; 60],
}

const _: () = assert!(std::mem::size_of::<TicketLock>() == 128);

impl RawLock for TicketLock {
    type Waiter = ();

    fn waiter(&self, _id: u32) {}

    #[inline]
    fn lock(&self, _w: &mut ()) -> Acquired {
        let my = self.next.fetch_add(1, Ordering::Relaxed);
        let mut spins = 0;
        // Acquire: pairs with the Release increment of `serving` in unlock().
        while self.serving.load(Ordering::Acquire) != my {
            cpu_relax();
            spins += 1;
        }
        Acquired { spins, sleeps: 0 }
    }

    #[inline]
    fn unlock(&self, _w: &mut ()) {
        // Only the holder writes `serving`. Release: publishes the critical section to the next ticket.
        let s = self.serving.load(Ordering::Relaxed);
        self.serving.store(s.wrapping_add(1), Ordering::Release);
    }
}
