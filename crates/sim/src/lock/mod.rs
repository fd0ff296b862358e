//! The lock: who holds it, who spins on it, who sleeps in its futex; what acquiring and releasing do for
//! every algorithm (the holder's fault or critical section, the handoff to a running spinner, the hold's
//! measurements); and the dispatch to each algorithm's own rules: [`pg`] (s_lock's spin-then-sleep),
//! [`futex`] (three-state mutex), [`rseq`] (`pg` whose holder asks for a slice extension), [`adaptive`]
//! (shmlock's bounded spinning and parking). How the lock's cache line is paid: [`spin`] (at writes, the
//! default) and [`line`] (`line_fifo`: one queue for every request of the line).

pub(crate) mod adaptive;
pub(crate) mod futex;
pub(crate) mod line;
pub(crate) mod pg;
pub(crate) mod rseq;
pub(crate) mod spin;

pub use adaptive::ADAPTIVE_SLOTS;

use crate::sim::Sim;
use crate::task::Phase;
use axes::model::LockKind;

/// The lock's state.
pub(crate) struct LockState {
    /// The holder.
    pub(crate) holder: Option<u32>,
    /// The CPU the current hold was taken on.
    pub(crate) holder_cpu: u32,
    /// Holds so far (names a hold).
    pub(crate) hold_seq: u64,
    /// Running tasks currently spinning on the lock.
    pub(crate) spinners: Vec<u32>,
    /// Tasks asleep in futex_wait, in the order they went to sleep.
    pub(crate) futex_waiters: Vec<u32>,
    /// `adaptive`: a spinner spent a whole budget on this hold (`STALLED`), and a wake is in flight
    /// (`WAKING`).
    pub(crate) stalled: bool,
    pub(crate) waking: bool,
    /// The spin loop's iteration clock (`spin`): iterations a spinner running since time 0 would have
    /// done, as of `spin_clock_at_ns`.
    pub(crate) spin_clock: f64,
    pub(crate) spin_clock_at_ns: u64,
    /// Until when the running spinners wait for their re-reads of the lock's line after the writes so
    /// far (`spin`), ns: the iteration clock stands still until then.
    pub(crate) line_busy_until_ns: u64,
    /// `txn`, `clocksweep`: when the strategy line is next free for a tick of the clock hand, ns.
    pub(crate) tick_free_at: u64,
    /// `line_fifo`: when the lock's line has served every request queued so far, ns, and the CPU that holds
    /// it alone (wrote it last, nobody has read it since; `u32::MAX`: shared or nobody's).
    pub(crate) line_free_at_ns: u64,
    pub(crate) line_excl_cpu: u32,
}

impl LockState {
    /// Free, nobody waiting.
    pub(crate) fn new() -> LockState {
        LockState {
            holder: None,
            holder_cpu: u32::MAX,
            hold_seq: 0,
            spinners: Vec::new(),
            futex_waiters: Vec::new(),
            stalled: false,
            waking: false,
            spin_clock: 0.0,
            spin_clock_at_ns: 0,
            line_busy_until_ns: 0,
            tick_free_at: 0,
            line_free_at_ns: 0,
            line_excl_cpu: u32::MAX,
        }
    }
}

impl Sim {
    /// A running task on `c` tries the lock now.
    pub(crate) fn try_lock(&mut self, c: u32, t: u32) {
        if self.line_fifo() {
            let done = self.line_arrive(c);
            if self.lock.holder.is_none() {
                let delay = done - self.clock.now;
                self.take_lock(c, t, delay);
            } else {
                self.start_spin(c, t);
            }
            return;
        }
        if self.lock.holder.is_none() {
            self.take_lock(c, t, 0);
            return;
        }
        match self.p.lock {
            LockKind::Pg | LockKind::Rseq => {
                // Its first test-and-set (and the allocation counter's add before it) writes the line.
                self.line_written();
                self.start_spin(c, t)
            }
            LockKind::Futex => self.enter_futex_wait(c, t),
            LockKind::Adaptive => self.adaptive_try_lock(c, t),
        }
    }

    /// What a handover with `others` running spinners costs on the lock's line, ns (`line_ns` each, one
    /// line transfer when unset).
    fn line_cost_ns(&self, others: usize) -> u64 {
        self.p.line_ns.unwrap_or(self.p.lock_transfer_ns) * others as u64
    }

    /// `t` (running on `c`) becomes the holder after `delay` ns of transfer; it reads the free list's head
    /// descriptor, which may fault.
    pub(crate) fn take_lock(&mut self, c: u32, t: u32, delay: u64) {
        self.lock.holder = Some(t);
        self.lock.holder_cpu = c;
        self.lock.hold_seq += 1;
        self.tasks[t as usize].park_timeout_ns = 0;
        self.remove_spinner(t);
        let now = self.clock.now;
        let faults = self.descriptor_faults(t);
        let blocks = self.fault_blocks(faults);
        // Every spinner still polling the line slows this handover, and re-reads the line the handover
        // wrote (`line_fifo`: the caller queued the handover's requests on the line).
        let fifo = self.line_fifo();
        let delay = if fifo {
            delay
        } else {
            let d = delay + self.line_cost_ns(self.lock.spinners.len());
            self.line_written();
            d
        };
        let waited = now - self.tasks[t as usize].acquire_start;
        self.metrics.acquired(now, waited);
        let task = &mut self.tasks[t as usize];
        task.spins_per_delay =
            pg::adapt_spins_per_delay(task.spins_per_delay, task.slept_this_acquire);
        task.slept_this_acquire = false;
        task.cur_delay_ns = 0;
        task.holding = true;
        task.hold_start = now;
        task.fault_blocks = blocks;
        task.granted = false;
        if faults {
            self.tasks[t as usize].head_write_pending = fifo;
            let d = self.start_descriptor_fault(t);
            self.run_segment(c, delay + d);
        } else {
            self.tasks[t as usize].phase = Phase::Cs;
            // `line_fifo`: the write of the head waits its turn on the line after the read.
            let at = now + delay;
            let delay = if fifo {
                self.line_access(c, at, true) - now
            } else {
                delay
            };
            let d = self.cs_ns();
            self.run_segment(c, delay + d);
        }
    }

    /// `line_fifo`: the holder on `c`, back from its descriptor fault, writes the head (waiting its turn on
    /// the line) and runs the rest of its critical section, `cs` ns.
    pub(crate) fn cs_after_fault(&mut self, c: u32, t: u32, cs: u64) {
        let task = &mut self.tasks[t as usize];
        let wait = if std::mem::replace(&mut task.head_write_pending, false) {
            let now = self.clock.now;
            self.line_access(c, now, true) - now
        } else {
            0
        };
        self.run_segment(c, wait + cs);
    }

    /// The holder on `c` releases the lock: a running spinner takes it over; the releaser wakes a sleeper,
    /// yields its slice extension, or goes on.
    pub(crate) fn release(&mut self, c: u32, t: u32) {
        let now = self.clock.now;
        let task = &mut self.tasks[t as usize];
        task.holding = false;
        let held = now - task.hold_start;
        if self.metrics.counts(now) {
            task.ops += 1;
        }
        task.ops_since_spawn += 1;
        let granted = std::mem::replace(&mut task.granted, false);
        self.lock.holder = None;
        self.lock.stalled = false;
        let adaptive_wake = self.adaptive_unlock_wakes();
        self.metrics.released(now, held);
        // A running spinner notices and takes it.
        if !self.lock.spinners.is_empty() {
            let i = self.rng.below(self.lock.spinners.len() as u64) as usize;
            let w = self.remove_spinner_at(i);
            let wc = self.tasks[w as usize].cpu;
            // Stop its spin segment and hand over.
            self.stop_segment(wc, w);
            let d = if self.line_fifo() {
                self.line_handover(wc) - now
            } else {
                self.p.lock_transfer_ns
            };
            self.take_lock(wc, w, d);
        } else if self.line_fifo() {
            // The release's store; the releaser goes on.
            self.line_access(c, now, true);
        }
        let next = if self.p.lock == LockKind::Futex && !self.lock.futex_waiters.is_empty() {
            Phase::FutexWake
        } else if adaptive_wake {
            self.lock.waking = true;
            Phase::FutexWake
        } else if granted {
            Phase::SliceYield
        } else {
            self.after_op(t)
        };
        self.start_phase(c, t, next);
    }
}

#[cfg(test)]
mod tests {
    use crate::simulate;
    use axes::model::Pages;
    use results::model::Params;

    #[test]
    fn line_contention_slows_holds_only_where_other_spinners_run() {
        let run = |cpus: u32, line_ns: u64| {
            simulate(&Params {
                cpus,
                workers: 8 * cpus,
                pages: Pages::P2m,
                line_ns: Some(line_ns),
                duration_ns: 100_000_000,
                warmup_ns: 10_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        // Two CPUs: at a handoff one runs the releaser, the other the new holder; nobody else spins.
        let (a, b) = (run(2, 0), run(2, 500));
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        // Eight CPUs: up to six other spinners poll the line at every handoff.
        let (c, d) = (run(8, 0), run(8, 500));
        assert!(
            d.hold_ns.p50 >= c.hold_ns.p50 + 500,
            "hold p50 {} -> {}",
            c.hold_ns.p50,
            d.hold_ns.p50
        );
        assert!(
            d.ops_per_s < 0.8 * c.ops_per_s,
            "{} -> {}",
            c.ops_per_s,
            d.ops_per_s
        );
    }
}
