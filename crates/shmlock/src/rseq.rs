//! The `rseq` lock: PostgreSQL's spinlock whose holder asks the scheduler for a few more µs instead of being
//! preempted, through the rseq time-slice extension ([`rseqslice`]: the ABI, the protocol and the probe).

use rseqslice::{SliceCounts, SliceExtension};

use crate::pg::{PgSpinLock, PgWaiter};
use crate::{Acquired, RawLock};

/// PostgreSQL's spinlock plus a slice-extension request around the critical section.
#[repr(C, align(64))]
pub struct RseqLock {
    inner: PgSpinLock,
}

/// A `pg` waiter with this thread's slice extension.
#[derive(Debug)]
pub struct RseqWaiter {
    pg: PgWaiter,
    slice: SliceExtension,
}

impl RawLock for RseqLock {
    type Waiter = RseqWaiter;

    fn waiter(&self, id: u32) -> RseqWaiter {
        let slice = SliceExtension::enable()
            .unwrap_or_else(|e| panic!("the rseq lock is unavailable here: {e}"));
        RseqWaiter {
            pg: self.inner.waiter(id),
            slice,
        }
    }

    #[inline]
    fn lock(&self, w: &mut RseqWaiter) -> Acquired {
        let a = self.inner.lock(&mut w.pg);
        w.slice.request();
        a
    }

    #[inline]
    fn unlock(&self, w: &mut RseqWaiter) {
        self.inner.unlock(&mut w.pg);
        w.slice.release();
    }

    fn slice_counts(w: &RseqWaiter) -> Option<SliceCounts> {
        Some(w.slice.counts())
    }
}
