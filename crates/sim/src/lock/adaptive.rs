//! `adaptive`: the shmlock crate's lock. At most min(CPUs, [`ADAPTIVE_SLOTS`]) waiters spin, each for a
//! bounded time (`adaptive_spin_ns`); a waiter on the CPU the holder took the lock on, one arriving after
//! a spinner spent a whole budget on this hold (`STALLED`), or one finding no free slot parks on a futex
//! with a bounded sleep (`adaptive_park_min_ns` doubling up to `adaptive_park_max_ns`); unlock wakes one
//! sleeper when no spinner is around and no wake is in flight (`WAKING`). The defaults are shmlock's
//! constants.

use lockparams::adaptive::SLOTS;

use crate::event::Ev;
use crate::sim::Sim;
use crate::task::State;
use axes::model::LockKind;

/// `adaptive`: spinner slots in the lock (shmlock's `SLOTS`); the cap is the smaller of this and the CPUs.
pub const ADAPTIVE_SLOTS: u32 = SLOTS as u32;

impl Sim {
    /// The lock is taken: spin only while the holder may be running (not queued on this very CPU), no
    /// spinner has spent a whole budget on this hold, and a spinner slot is free; else park.
    pub(crate) fn adaptive_try_lock(&mut self, c: u32, t: u32) {
        let cap = self.p.cpus.min(ADAPTIVE_SLOTS) as usize;
        if !self.lock.stalled && self.lock.holder_cpu != c && self.lock.spinners.len() < cap {
            self.tasks[t as usize].spin_hold = self.lock.hold_seq;
            self.start_spin(c, t);
        } else {
            self.enter_futex_wait(c, t);
        }
    }

    /// Budget used up. If it was all one hold, mark it STALLED; then try again (which parks unless the
    /// lock changed hands meanwhile).
    pub(crate) fn adaptive_spin_end(&mut self, c: u32, t: u32) {
        if self.lock.holder.is_some() && self.lock.hold_seq == self.tasks[t as usize].spin_hold {
            self.lock.stalled = true;
        }
        self.try_lock(c, t);
    }

    /// Unlock wakes a sleeper only when no spinner is around to take the lock and no wake is in flight.
    pub(crate) fn adaptive_unlock_wakes(&self) -> bool {
        self.p.lock == LockKind::Adaptive
            && !self.lock.futex_waiters.is_empty()
            && !self.lock.waking
            && self.lock.spinners.is_empty()
    }

    /// `t` parks: a bounded sleep, `adaptive_park_min_ns` doubling to `adaptive_park_max_ns`, plus the
    /// timer slack.
    pub(crate) fn arm_park_timeout(&mut self, t: u32) {
        let p = &self.p;
        let task = &mut self.tasks[t as usize];
        task.park_timeout_ns = if task.park_timeout_ns == 0 {
            p.adaptive_park_min_ns
        } else {
            (task.park_timeout_ns * 2).min(p.adaptive_park_max_ns)
        };
        task.park_gen += 1;
        let at = self.clock.now + task.park_timeout_ns + p.sleep_slack_ns;
        let gen = task.park_gen;
        self.clock.push(at, Ev::ParkTimeout(t, gen));
    }

    /// A bounded sleep ends; the waiter leaves the futex queue and retries.
    pub(crate) fn park_timeout(&mut self, t: u32, gen: u64) {
        if self.tasks[t as usize].park_gen != gen || self.tasks[t as usize].state != State::Sleeping
        {
            return;
        }
        if let Some(i) = self.lock.futex_waiters.iter().position(|&x| x == t) {
            self.lock.futex_waiters.remove(i);
            self.wake(t, false);
        }
    }

    /// Back from a wake or a timeout: let the next unlock wake another sleeper, then go through the rules
    /// again.
    pub(crate) fn adaptive_retry(&mut self, c: u32, t: u32) {
        self.lock.waking = false;
        self.try_lock(c, t);
    }
}

#[cfg(test)]
mod tests {
    use crate::simulate;
    use axes::model::{LockKind, Model, Pages, Workload};
    use results::model::{Outcome, Params};

    /// Measured virtual time of `holder_asleep`, ns.
    const ASLEEP_NS: u64 = 300_000_000;

    /// Every 4 KB fault under the lock sleeps 2 ms in the fault path: the holder is off both CPUs.
    fn holder_asleep(lock: LockKind) -> Outcome {
        simulate(&Params {
            lock,
            cpus: 2,
            workers: 8,
            fault_block_p: 1.0,
            fault_block_ns: 2_000_000,
            duration_ns: ASLEEP_NS,
            warmup_ns: 30_000_000,
            ..Params::default()
        })
        .unwrap()
    }

    #[test]
    fn adaptive_spends_at_most_a_budget_per_spinner_on_a_stalled_hold() {
        let p = Params::default();
        let a = holder_asleep(LockKind::Adaptive);
        let stalled = a.stalled_per_mop * a.ops as f64 / 1e6;
        assert!(stalled > 10.0, "the holds must stall: {a:?}");
        let spun_ns = a.cpu.spinning * ASLEEP_NS as f64 * 2.0;
        // At most one spinner per CPU (2 here), each for one budget, then STALLED parks the rest.
        let per_hold = spun_ns / stalled;
        assert!(
            per_hold > 0.0 && per_hold <= 2.0 * p.adaptive_spin_ns as f64,
            "{per_hold} ns of spinning per stalled hold"
        );
        assert!(
            a.sleeps_per_op > 0.5,
            "the waiters park: {}",
            a.sleeps_per_op
        );
        // It still gets work done, and deterministically.
        assert!(a.ops > 100);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&holder_asleep(LockKind::Adaptive)).unwrap()
        );
    }

    #[test]
    fn adaptive_with_the_slice_extension_is_not_preempted_while_holding() {
        let run = |adaptive_rseq| {
            simulate(&Params {
                workload: Workload::Txn,
                lock: LockKind::Adaptive,
                model: Model::Lazy,
                cpus: 8,
                workers: 128,
                spin_ns: 300,
                wakeup_preempt_after_ns: Some(0),
                // The backends' own long runs, with no client threads to share the CPUs.
                txn_client_threads: Some(0),
                stmt_ns: 185_000,
                adaptive_rseq,
                duration_ns: 200_000_000,
                warmup_ns: 20_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        let without = run(false);
        let with = run(true);
        assert!(without.lhp_per_s > 100.0, "{}", without.lhp_per_s);
        assert!(
            with.lhp_per_s < without.lhp_per_s / 10.0,
            "{} vs {}",
            with.lhp_per_s,
            without.lhp_per_s
        );
    }

    #[test]
    fn adaptive_without_faults_spins_and_hardly_parks() {
        let run = |lock| {
            simulate(&Params {
                lock,
                pages: Pages::P2m,
                cpus: 2,
                workers: 2,
                duration_ns: 200_000_000,
                warmup_ns: 20_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        // Two workers on two CPUs: nobody is ever descheduled while holding, so a waiter spins and wins.
        let a = run(LockKind::Adaptive);
        assert!(a.sleeps_per_op < 0.001, "{}", a.sleeps_per_op);
        assert!(a.cpu.spinning > 0.0);
        // The futex mutex sleeps at once instead and pays for it in switches.
        let f = run(LockKind::Futex);
        assert!(f.sleeps_per_op > 10.0 * a.sleeps_per_op.max(1e-4));
    }
}
