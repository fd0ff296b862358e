//! Spinning: who spins, and how far a spin gets. A `pg` or `rseq` waiter spins `spins_per_delay`
//! iterations before it sleeps; `adaptive` spins for a time budget. PostgreSQL's spin loop is a
//! test-and-test-and-set: `TAS_SPIN` reads the lock word first and tries the atomic only when it reads free,
//! and `SPIN_DELAY` (`pause` on x86_64, `isb` on arm64) paces the loop (src/include/storage/s_lock.h,
//! src/backend/storage/lmgr/s_lock.c). So a waiter spinning on a held lock keeps the line in its own cache
//! and an iteration costs `spin_ns` (the delay and a cache hit) however many others spin. The crowd pays the
//! line only when someone writes it: the lock word shares its line with the free-list head, written by every
//! arriving backend (the allocation counter's atomic add and its first test-and-set; src/backend/storage/
//! buffer/freelist.c, `StrategyGetBuffer`) and at every handover (the release, the new holder's
//! test-and-set and its pop). Each write invalidates every spinner's copy, and their re-reads are served
//! one at a time: `spin_line_ns` each (one line transfer unless set), the mean spinner waiting for
//! (n + 1) / 2 of them. The model stops the spinners' common iteration clock for that long at each write
//! (`line_written`; writes that come faster than the line serves the re-reads queue behind each other).
//! With `spin_line_ns` 0 an iteration is `spin_ns` whatever the writes. With `line_fifo` the writes, the
//! re-reads and the holder's own accesses share one queue (`line`), and a handover's cost comes from it
//! instead of `line_ns`. Until 2026-11-26 the model charged the crowd on every iteration instead (each
//! iteration `spin_ns` plus `spin_line_ns` per other running spinner, whether the line was written or
//! not), which is what an always-writing test-and-set loop costs, not PostgreSQL's.

use crate::sim::Sim;
use crate::task::Phase;
use axes::model::LockKind;

impl Sim {
    /// What each running spinner's re-read of the line costs after a write, ns.
    fn spin_line_ns(&self) -> u64 {
        self.p.spin_line_ns.unwrap_or(self.p.lock_transfer_ns)
    }

    /// What a write costs the spinners' iteration clock per place in the queue of re-reads, ns (the
    /// measured write stall when set, else a re-read).
    fn reread_ns(&self) -> u64 {
        self.p.reread_ns.unwrap_or_else(|| self.spin_line_ns())
    }

    /// One iteration of a running spinner, ns (the line's writes aside).
    fn spin_iter_ns(&self) -> f64 {
        self.p.spin_ns.max(1) as f64
    }

    /// Someone other than the running spinners wrote the lock's line now: each of them re-reads it, one
    /// read at a time, and the iteration clock stands still for the mean spinner's wait, (n + 1) / 2
    /// reads, after the waits of the writes before.
    pub(crate) fn line_written(&mut self) {
        let n = self.lock.spinners.len() as u64;
        if n == 0 || !self.counts_iterations() {
            return;
        }
        self.tick_spin_clock();
        let now = self.clock.now;
        let wait = self.reread_ns() * (n + 1) / 2;
        self.lock.line_busy_until_ns = self.lock.line_busy_until_ns.max(now) + wait;
    }

    /// Whether spins count iterations against the clock (`pg`, `rseq`, unless `spin_line_ns` is 0).
    pub(crate) fn counts_iterations(&self) -> bool {
        self.spin_line_ns() > 0 && matches!(self.p.lock, LockKind::Pg | LockKind::Rseq)
    }

    /// Brings the iteration clock to now: `spin_ns` an iteration outside the line's re-read waits.
    /// Called before every change of the running spinners and every write of the line.
    pub(crate) fn tick_spin_clock(&mut self) {
        let now = self.clock.now;
        if self.counts_iterations() {
            let at = self.lock.spin_clock_at_ns;
            let waited = self.lock.line_busy_until_ns.min(now).saturating_sub(at);
            let ran = now.saturating_sub(at).saturating_sub(waited) as f64;
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

    /// The running segment for `t`'s spin from now, ns: the rest of the line's re-read wait and its
    /// iterations left (`adaptive`: its time budget).
    fn spin_segment_ns(&self, t: u32) -> u64 {
        let task = &self.tasks[t as usize];
        match self.p.lock {
            LockKind::Adaptive => self.p.adaptive_spin_ns,
            _ if self.counts_iterations() => {
                let wait = self.lock.line_busy_until_ns.saturating_sub(self.clock.now);
                wait + (task.spin_left.max(0.0) * self.spin_iter_ns())
                    .round()
                    .max(1.0) as u64
            }
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

    /// A spin segment on `c` ran to its end. Counting iterations, a spin slowed by writes of the line
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
            let delay = if self.line_fifo() {
                // `line_fifo`: its read finds the word free, then its swap.
                let now = self.clock.now;
                let read = self.line_access(c, now, false);
                self.line_access(c, read, true) - now
            } else {
                0
            };
            self.take_lock(c, t, delay);
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
    use crate::sim::Sim;
    use crate::simulate;
    use axes::model::Pages;
    use results::model::Params;

    /// A machine whose lock is held by task 0 with tasks 1..=spinners spinning, at 1 us.
    fn spinning(spinners: u32) -> Sim {
        let mut s = Sim::new(Params {
            cpus: 8,
            workers: 8,
            spin_ns: 10,
            spin_line_ns: Some(100),
            ..Params::default()
        });
        s.lock.holder = Some(0);
        s.clock.now = 1000;
        s.lock.spin_clock_at_ns = 1000;
        s.lock.spinners = (1..=spinners).collect();
        s
    }

    #[test]
    fn spinners_on_a_held_lock_pay_the_line_only_when_it_is_written() {
        // Nobody writes: an iteration is spin_ns however many spin.
        for n in [1, 3, 7] {
            let mut s = spinning(n);
            s.clock.now = 2000;
            s.tick_spin_clock();
            assert_eq!(s.lock.spin_clock, 100.0, "{n} spinners");
        }
        // A write: three re-reads served in turn, the mean spinner waits for two (200 ns); a second
        // write 100 ns later queues behind the first.
        let mut s = spinning(3);
        s.line_written();
        assert_eq!(s.lock.line_busy_until_ns, 1200);
        s.clock.now = 1100;
        s.line_written();
        assert_eq!(s.lock.line_busy_until_ns, 1400);
        assert_eq!(s.lock.spin_clock, 0.0);
        s.clock.now = 2000;
        s.tick_spin_clock();
        assert_eq!(s.lock.spin_clock, 60.0);
        // A spinner's segment from now waits out the re-reads first.
        let mut s = spinning(3);
        s.tasks[1].spin_left = 50.0;
        s.line_written();
        assert_eq!(s.spin_segment_ns(1), 200 + 500);
    }

    #[test]
    fn the_crowd_on_the_line_slows_the_lock_and_runs_deterministically() {
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
        let (free, crowded) = (run(0), run(2000));
        assert!(
            crowded.ops_per_s < free.ops_per_s,
            "{} -> {}",
            free.ops_per_s,
            crowded.ops_per_s
        );
        assert!(crowded.cpu.spinning > free.cpu.spinning);
        assert_eq!(
            serde_json::to_string(&run(2000)).unwrap(),
            serde_json::to_string(&crowded).unwrap()
        );
    }

    #[test]
    fn the_old_quiet_line_switch_is_refused() {
        let err = simulate(&Params {
            quiet_line_off_cpu: true,
            ..Params::default()
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("quiet_line_off_cpu true: false"),
            "{err}"
        );
    }
}
