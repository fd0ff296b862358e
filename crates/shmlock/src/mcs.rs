//! MCS queue lock (Mellor-Crummey and Scott, 1991): each waiter spins on its own node, so the lock
//! scales without cache-line storms; FIFO, so it shares the ticket lock's weakness under preemption.
//! Nodes are preallocated in the lock (one per waiter id) because processes cannot share stack nodes.
//!
//! | word | meaning |
//! |---|---|
//! | `tail` | 0 = free; else 1 + the index of the last node in the queue |
//! | `node.next` | 0 = no successor yet; else 1 + the successor's index |
//! | `node.locked` | 1 while the node's owner must wait |

use std::sync::atomic::{AtomicU32, Ordering};

use crate::spin::cpu_relax;
use crate::{Acquired, RawLock, MAX_WAITERS};

#[repr(C, align(64))]
struct Node {
    next: AtomicU32,
    locked: AtomicU32,
    _pad: [u8; 56],
}

/// An MCS lock with `MAX_WAITERS` nodes.
#[repr(C, align(64))]
pub struct McsLock {
    tail: AtomicU32,
    _pad: [u8; 60],
    nodes: [Node; MAX_WAITERS],
}

const _: () = assert!(std::mem::size_of::<McsLock>() == 64 * (MAX_WAITERS + 1));

/// A waiter's node index.
#[derive(Debug, Clone, Copy)]
pub struct McsWaiter(u32);

impl RawLock for McsLock {
    type Waiter = McsWaiter;

    fn waiter(&self, id: u32) -> McsWaiter {
        assert!(
            (id as usize) < MAX_WAITERS,
            "MCS supports at most {MAX_WAITERS} waiters"
        );
        McsWaiter(id)
    }

    #[inline]
    fn lock(&self, w: &mut McsWaiter) -> Acquired {
        let me = &self.nodes[w.0 as usize];
        me.next.store(0, Ordering::Relaxed);
        me.locked.store(1, Ordering::Relaxed);
        // AcqRel: Release publishes our node's reset to the predecessor; Acquire orders us after the
        // previous tail owner's writes.
        let prev = self.tail.swap(w.0 + 1, Ordering::AcqRel);
        let mut spins = 0;
        if prev != 0 {
            // Release: the predecessor's Acquire load of `next` in unlock() sees our initialized node.
            self.nodes[(prev - 1) as usize]
                .next
                .store(w.0 + 1, Ordering::Release);
            // Acquire: pairs with the predecessor's Release store of `locked = 0`.
            while me.locked.load(Ordering::Acquire) != 0 {
                cpu_relax();
                spins += 1;
            }
        }
        Acquired { spins, sleeps: 0 }
    }

    #[inline]
    fn unlock(&self, w: &mut McsWaiter) {
        let me = &self.nodes[w.0 as usize];
        let mut next = me.next.load(Ordering::Acquire);
        if next == 0 {
            // No successor visible: try to empty the queue. Release publishes the critical section to the
            // next acquirer's AcqRel swap.
            if self
                .tail
                .compare_exchange(w.0 + 1, 0, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            // A successor swapped the tail but has not linked itself yet.
            loop {
                next = me.next.load(Ordering::Acquire);
                if next != 0 {
                    break;
                }
                cpu_relax();
            }
        }
        // Release: hands the critical section to the successor (pairs with its Acquire spin).
        self.nodes[(next - 1) as usize]
            .locked
            .store(0, Ordering::Release);
    }
}
