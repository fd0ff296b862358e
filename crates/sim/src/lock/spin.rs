//! Spinning: who spins, and how far a spin gets. A `pg` or `rseq` waiter spins `spins_per_delay`
//! iterations before it sleeps; `adaptive` spins for a time budget. An iteration reads the lock word, which
//! shares its cache line with the free-list head: a read that follows a write to the line by another CPU
//! misses and waits while the line serves the other spinners' reads (the line is written at every
//! allocation: the allocation counter's atomic add, each waiter's first test-and-set, the holder's own
//! stores; src/backend/storage/buffer/freelist.c, `StrategyGetBuffer`). So an iteration costs `spin_ns`
//! plus `spin_line_ns` (one line transfer unless set) for every other running spinner, and a spin's
//! iterations are counted against a clock whose rate falls as spinners join (`tick_spin_clock`), not fixed
//! when the spin starts. With `spin_line_ns` 0 an iteration is `spin_ns` whatever the crowd (the model
//! before). The cost applies whether the holder runs or not (a simplification, as the line is quieter while
//! a preempted holder writes nothing; new arrivals still write it), unless `quiet_line_off_cpu` drops it
//! while the holder is off its CPU, re-timing every running spin when the holder leaves or regains it.

use crate::sim::Sim;
use crate::task::{Phase, State};
use crate::LockKind;

impl Sim {
    /// What every other running spinner adds to an iteration, ns.
    fn spin_line_ns(&self) -> u64 {
        self.p.spin_line_ns.unwrap_or(self.p.lock_transfer_ns)
    }

    /// One iteration of a running spinner now, ns (`quiet_line_off_cpu`: no crowd cost while the holder is
    /// off its CPU).
    fn spin_iter_ns(&self) -> f64 {
        let others = self.lock.spinners.len().saturating_sub(1) as f64;
        let line = if self.p.quiet_line_off_cpu && self.holder_off_cpu() {
            0
        } else {
            self.spin_line_ns()
        };
        self.p.spin_ns as f64 + line as f64 * others
    }

    /// The lock is held by a task that is not running.
    fn holder_off_cpu(&self) -> bool {
        self.lock
            .holder
            .is_some_and(|h| self.tasks[h as usize].state != State::Running)
    }

    /// `quiet_line_off_cpu`: the holder `t` is about to leave or regain its CPU, which changes the rate of
    /// every running spin: brings the iteration clock to now at the old rate. Pair with [`Sim::respin`]
    /// after the change.
    pub(crate) fn holder_moving(&mut self, t: u32) {
        if self.p.quiet_line_off_cpu && self.lock.holder == Some(t) {
            self.tick_spin_clock();
        }
    }

    /// `quiet_line_off_cpu`: the holder `t` left or regained its CPU: every running spinner's segment is
    /// set again at the new rate (what it spun so far is accounted and comes off its iterations).
    pub(crate) fn respin(&mut self, t: u32) {
        if !(self.p.quiet_line_off_cpu && self.lock.holder == Some(t) && self.counts_iterations()) {
            return;
        }
        for i in 0..self.lock.spinners.len() {
            let w = self.lock.spinners[i];
            self.settle_spin(w);
            let c = self.tasks[w as usize].cpu;
            self.stop_segment(c, w);
            let d = self.spin_segment_ns(w);
            self.run_segment(c, d);
        }
    }

    /// Whether spins count iterations against the clock (`pg`, `rseq`, unless `spin_line_ns` is 0).
    fn counts_iterations(&self) -> bool {
        self.spin_line_ns() > 0 && matches!(self.p.lock, LockKind::Pg | LockKind::Rseq)
    }

    /// Brings the iteration clock to now, at the rate of the spinners running since it was last brought.
    /// Called before every change of the running spinners.
    fn tick_spin_clock(&mut self) {
        let now = self.clock.now;
        if self.counts_iterations() {
            let ran = now.saturating_sub(self.lock.spin_clock_at_ns) as f64;
            self.lock.spin_clock += ran / self.spin_iter_ns();
        }
        self.lock.spin_clock_at_ns = now;
    }

    /// `t` spins from now with `iterations` left.
    fn add_spinner(&mut self, t: u32, iterations: f64) {
        self.tick_spin_clock();
        self.lock.spinners.push(t);
        let task = &mut self.tasks[t as usize];
        task.spin_mark = self.lock.spin_clock;
        task.spin_left = iterations;
    }

    /// What `t` spun since its mark comes off its iterations left.
    fn settle_spin(&mut self, t: u32) {
        let task = &mut self.tasks[t as usize];
        task.spin_left -= self.lock.spin_clock - task.spin_mark;
        task.spin_mark = self.lock.spin_clock;
    }

    /// `t` stops spinning (it got the lock, gave up, or left its CPU), keeping the order of the others.
    pub(crate) fn remove_spinner(&mut self, t: u32) {
        if let Some(i) = self.lock.spinners.iter().position(|&x| x == t) {
            self.tick_spin_clock();
            self.settle_spin(t);
            self.lock.spinners.remove(i);
        }
    }

    /// The `i`-th running spinner takes the lock over at a release (the last spinner takes its place).
    pub(crate) fn remove_spinner_at(&mut self, i: usize) -> u32 {
        self.tick_spin_clock();
        let t = self.lock.spinners[i];
        self.settle_spin(t);
        self.lock.spinners.swap_remove(i)
    }

    /// The running segment for `t`'s spin from now, ns: its iterations left at the present rate
    /// (`adaptive`: its time budget).
    fn spin_segment_ns(&self, t: u32) -> u64 {
        let task = &self.tasks[t as usize];
        match self.p.lock {
            LockKind::Adaptive => self.p.adaptive_spin_ns,
            _ if self.counts_iterations() => (task.spin_left.max(0.0) * self.spin_iter_ns())
                .round()
                .max(1.0) as u64,
            _ => task.spins_per_delay as u64 * self.p.spin_ns,
        }
    }

    /// `t` starts a whole spin on `c`.
    pub(crate) fn start_spin(&mut self, c: u32, t: u32) {
        self.tasks[t as usize].phase = Phase::Spin;
        let spins = self.tasks[t as usize].spins_per_delay as f64;
        self.add_spinner(t, spins);
        let d = self.spin_segment_ns(t);
        self.run_segment(c, d);
    }

    /// A spin segment on `c` ran to its end. Counting iterations, a spin slowed by spinners that joined
    /// since the segment was set goes on for what is left; a spin that did its iterations (or its time
    /// budget) without the lock coming free ends, and the lock's rules decide.
    pub(crate) fn spin_end(&mut self, c: u32, t: u32) {
        if self.counts_iterations() {
            self.tick_spin_clock();
            self.settle_spin(t);
            if self.tasks[t as usize].spin_left >= 0.5 {
                let d = self.spin_segment_ns(t);
                self.run_segment(c, d);
                return;
            }
        }
        self.remove_spinner(t);
        match self.p.lock {
            LockKind::Adaptive => self.adaptive_spin_end(c, t),
            _ => self.pg_spin_end(c, t),
        }
    }

    /// `t` is switched back in while spinning, with `rem` ns of its segment left when it was switched out:
    /// the lock may have come free meanwhile; else it spins on (`pg`, `rseq` counting iterations: the
    /// iterations it had left, at the present rate).
    pub(crate) fn resume_spin(&mut self, c: u32, t: u32, rem: u64) {
        if self.lock.holder.is_none() {
            self.take_lock(c, t, 0);
            return;
        }
        let left = self.tasks[t as usize].spin_left;
        self.add_spinner(t, left);
        let d = if self.counts_iterations() {
            self.spin_segment_ns(t)
        } else if rem > 0 {
            rem
        } else {
            self.spin_segment_ns(t)
        };
        self.run_segment(c, d);
    }
}

#[cfg(test)]
mod tests {
    use crate::{simulate, Pages, Params};

    #[test]
    fn a_quiet_line_while_the_holder_is_off_its_cpu_spares_the_spinners() {
        let run = |quiet_line_off_cpu| {
            simulate(&Params {
                cpus: 16,
                workers: 256,
                model: crate::Model::Lazy,
                pages: Pages::P4k,
                spin_line_ns: Some(200),
                quiet_line_off_cpu,
                duration_ns: 200_000_000,
                warmup_ns: 50_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        let (loud, quiet) = (run(false), run(true));
        // Holders lose their CPU here; while one is off it, a quiet line lets the spinners' rounds end
        // instead of stretching: less of the CPU spins, and no fewer operations get done.
        assert!(loud.lhp_per_s > 0.0);
        assert!(
            quiet.cpu.spinning < loud.cpu.spinning,
            "{} -> {}",
            loud.cpu.spinning,
            quiet.cpu.spinning
        );
        assert!(quiet.ops_per_s >= loud.ops_per_s);
        assert_eq!(
            serde_json::to_string(&run(true)).unwrap(),
            serde_json::to_string(&quiet).unwrap()
        );
    }

    #[test]
    fn a_crowd_on_the_line_slows_every_iteration() {
        let run = |spin_line_ns| {
            simulate(&Params {
                cpus: 16,
                workers: 256,
                pages: Pages::P4k,
                spin_line_ns: Some(spin_line_ns),
                duration_ns: 200_000_000,
                warmup_ns: 50_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        // With each other spinner adding to an iteration, a spins_per_delay round lasts longer: waiters
        // sleep less often and spin more of the CPU away.
        let (free, crowded) = (run(0), run(200));
        assert!(
            crowded.sleeps_per_op < 0.5 * free.sleeps_per_op,
            "{} -> {}",
            free.sleeps_per_op,
            crowded.sleeps_per_op
        );
        assert!(crowded.cpu.spinning > free.cpu.spinning);
        assert!(crowded.ops_per_s < free.ops_per_s);
        // Deterministic like the rest.
        assert_eq!(
            serde_json::to_string(&run(200)).unwrap(),
            serde_json::to_string(&crowded).unwrap()
        );
    }
}
