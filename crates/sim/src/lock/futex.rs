//! `futex` (the three-state mutex: a waiter that finds the lock taken sleeps in futex_wait at once, and
//! the releaser wakes the first sleeper with futex_wake), and the futex sleep and wake that `adaptive`
//! shares with it.

use crate::metrics::Count;
use crate::sim::Sim;
use crate::task::Phase;
use axes::model::LockKind;

impl Sim {
    /// `t` on `c` enters futex_wait.
    pub(crate) fn enter_futex_wait(&mut self, c: u32, t: u32) {
        self.tasks[t as usize].phase = Phase::FutexWaitEnter;
        self.run_segment(c, self.p.syscall_ns);
    }

    /// In futex_wait on `c`: the lock was released meanwhile (take it) or `t` sleeps until woken
    /// (`adaptive`: or until its bounded sleep ends).
    pub(crate) fn futex_wait(&mut self, c: u32, t: u32) {
        if self.lock.holder.is_none() {
            // Released meanwhile: take it.
            self.take_lock(c, t, 0);
            return;
        }
        self.tasks[t as usize].retry = true;
        self.lock.futex_waiters.push(t);
        self.metrics.count(Count::Sleep, self.clock.now);
        if self.p.lock == LockKind::Adaptive {
            self.arm_park_timeout(t);
        }
        self.block(c, t, None);
    }

    /// `t` is switched back in after a futex sleep (`retry`): `futex` takes the lock if it is free, else
    /// sleeps again; `adaptive` goes through its rules again.
    pub(crate) fn futex_retry(&mut self, c: u32, t: u32) {
        self.tasks[t as usize].retry = false;
        if self.p.lock == LockKind::Adaptive {
            self.adaptive_retry(c, t);
        } else if self.lock.holder.is_none() {
            self.take_lock(c, t, 0);
        } else {
            self.run_segment(c, self.p.syscall_ns);
        }
    }

    /// futex_wake, ns: the first waiter goes to an idle CPU when there is one (see `wake`), which costs
    /// the waker an IPI to a halted CPU.
    pub(crate) fn futex_wake_ns(&self) -> u64 {
        let p = &self.p;
        let to_idle = p.futex_wake_idle_ns > 0
            && !self.lock.futex_waiters.is_empty()
            && self.idle_cpu().is_some();
        p.futex_wake_ns + if to_idle { p.futex_wake_idle_ns } else { 0 }
    }

    /// futex_wake on `c` is done: the first waiter wakes; the releaser goes on.
    pub(crate) fn futex_wake(&mut self, c: u32, t: u32) {
        if !self.lock.futex_waiters.is_empty() {
            let w = self.lock.futex_waiters.remove(0);
            let remote = self.tasks[w as usize].cpu != c;
            self.wake(w, remote);
        } else {
            // Nobody left to wake (their sleeps timed out): no wake in flight.
            self.lock.waking = false;
        }
        let next = self.after_op(t);
        if !self.return_to_user(c, false) {
            self.start_phase(c, t, next);
        } else {
            let task = &mut self.tasks[t as usize];
            task.phase = next;
            task.remaining = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::simulate;
    use axes::model::LockKind;
    use results::model::Params;

    #[test]
    fn a_wake_sent_to_an_idle_cpu_costs_the_futex_releaser() {
        let run = |lock: LockKind, futex_wake_idle_ns: u64| {
            simulate(&Params {
                lock,
                workers: 2,
                futex_wake_idle_ns,
                duration_ns: 100_000_000,
                warmup_ns: 10_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        // Two futex workers on two CPUs: the waiter sleeps on an otherwise idle CPU, so most releases
        // pay for the IPI.
        let (a, b) = (run(LockKind::Futex, 0), run(LockKind::Futex, 10_000));
        assert!(
            b.ops_per_s < 0.9 * a.ops_per_s,
            "{} -> {}",
            a.ops_per_s,
            b.ops_per_s
        );
        // pg never calls futex_wake.
        let (c, d) = (run(LockKind::Pg, 0), run(LockKind::Pg, 10_000));
        assert_eq!(c.ops, d.ops);
    }
}
