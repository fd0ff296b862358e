//! Virtual time: an integer-nanosecond clock and the event heap, ordered by (time, sequence) so that
//! events at the same instant run in the order they were scheduled.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::event::Ev;

/// The clock and the pending events.
pub(crate) struct Clock {
    /// Now, ns of virtual time.
    pub(crate) now: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
}

impl Clock {
    /// Time 0, nothing scheduled.
    pub(crate) fn new() -> Clock {
        Clock {
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
        }
    }

    /// Schedules `ev` at `at` ns, after everything already scheduled for that instant.
    pub(crate) fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    /// The next event and its time, unless it is later than `end` or there is none; the clock does not
    /// move (the caller sets `now`).
    pub(crate) fn pop(&mut self, end: u64) -> Option<(u64, Ev)> {
        let Reverse((at, _, ev)) = self.heap.pop()?;
        (at <= end).then_some((at, ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_at_one_instant_keep_their_order() {
        let mut c = Clock::new();
        c.push(5, Ev::Tick(1));
        c.push(3, Ev::Ipi(0));
        c.push(5, Ev::Tick(0));
        assert_eq!(c.pop(10), Some((3, Ev::Ipi(0))));
        assert_eq!(c.pop(10), Some((5, Ev::Tick(1))));
        assert_eq!(c.pop(4), None, "later than the end");
    }
}
