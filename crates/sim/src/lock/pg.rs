//! `pg` (and `rseq`, which waits the same way): PostgreSQL's s_lock. A waiter spins `spins_per_delay`
//! iterations, then sleeps in pg_usleep: 1 ms first, then the delay grows by a random 1x..2x (plus half a
//! microsecond of rounding), wrapping to 1 ms above 1 s; after the acquisition `spins_per_delay` grows by
//! 100 (never slept) or shrinks by 1 (slept), within 10..1000. The constants are shmlock's `pg` module's,
//! which mirrors s_lock.c.

pub(crate) use lockparams::pg::DEFAULT_SPINS_PER_DELAY;
use lockparams::pg::{
    MAX_DELAY_USEC, MAX_SPINS_PER_DELAY, MIN_DELAY_USEC, MIN_SPINS_PER_DELAY,
    SPINS_PER_DELAY_GROWTH, SPINS_PER_DELAY_SHRINK,
};

use crate::metrics::Count;
use crate::sim::Sim;
use crate::task::Phase;

/// The first sleep, ns.
const MIN_DELAY_NS: u64 = MIN_DELAY_USEC * 1000;
/// Sleeps longer than this wrap to the first, ns.
const MAX_DELAY_NS: u64 = MAX_DELAY_USEC * 1000;

/// `finish_spin_delay`: the next acquisition's spin count.
pub(crate) fn adapt_spins_per_delay(spins_per_delay: u32, slept: bool) -> u32 {
    if slept {
        spins_per_delay
            .saturating_sub(SPINS_PER_DELAY_SHRINK)
            .max(MIN_SPINS_PER_DELAY)
    } else {
        (spins_per_delay + SPINS_PER_DELAY_GROWTH).min(MAX_SPINS_PER_DELAY)
    }
}

/// `perform_spin_delay`'s next sleep after `cur_ns` (0: none yet), with `r` uniform in [0, 1), ns.
fn next_delay_ns(cur_ns: u64, r: impl FnOnce() -> f64) -> u64 {
    if cur_ns == 0 {
        return MIN_DELAY_NS;
    }
    let d = cur_ns as f64 * (1.0 + r()) + 500.0;
    if d > MAX_DELAY_NS as f64 {
        MIN_DELAY_NS
    } else {
        d as u64
    }
}

impl Sim {
    /// A whole spin of `spins_per_delay` iterations without the lock: pg_usleep.
    pub(crate) fn pg_spin_end(&mut self, c: u32, t: u32) {
        self.tasks[t as usize].phase = Phase::SleepEnter;
        self.run_segment(c, self.p.syscall_ns);
    }

    /// Entered pg_usleep on `c`: sleep, then spin again.
    pub(crate) fn pg_sleep(&mut self, c: u32, t: u32) {
        let task = &mut self.tasks[t as usize];
        task.slept_this_acquire = true;
        let rng = &mut self.rng;
        task.cur_delay_ns = next_delay_ns(task.cur_delay_ns, || rng.unit());
        let at = self.clock.now + task.cur_delay_ns + self.p.sleep_slack_ns;
        task.phase = Phase::Spin; // retry after waking
        task.remaining = 0;
        self.metrics.count(Count::Sleep, self.clock.now);
        self.block(c, t, Some(at));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spins_per_delay_moves_within_postgres_bounds() {
        assert_eq!(adapt_spins_per_delay(100, false), 200);
        assert_eq!(adapt_spins_per_delay(950, false), 1000);
        assert_eq!(adapt_spins_per_delay(100, true), 99);
        assert_eq!(adapt_spins_per_delay(10, true), 10);
    }

    #[test]
    fn delays_start_at_1ms_grow_by_up_to_2x_and_wrap_above_1s() {
        assert_eq!(
            next_delay_ns(0, || unreachable!("no draw for the first sleep")),
            1_000_000
        );
        assert_eq!(next_delay_ns(1_000_000, || 0.0), 1_000_500);
        assert_eq!(next_delay_ns(1_000_000, || 0.5), 1_500_500);
        assert_eq!(next_delay_ns(900_000_000, || 0.5), 1_000_000);
    }
}
