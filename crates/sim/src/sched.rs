//! The scheduler and the preemption models: per-CPU run queues picked by lowest virtual runtime, idle
//! balancing, wakeup placement and wakeup preemption, the tick, EEVDF's base slice and delayed dequeue,
//! and where each model lets a reschedule request take effect (docs/references.md#preempt-semantics, #lazy-preemption):
//! - in kernel mode (a page fault, a syscall): `full` switches as soon as a reschedule is requested; `lazy`
//!   when the request is upgraded at the tick; `none` and `voluntary` only on the way back to user mode;
//! - a wakeup aimed at a busy CPU: `none`/`voluntary`/`full` set NEED_RESCHED and send an IPI, so the
//!   target reschedules within `ipi_ns` (at once in user mode; in kernel mode as above); `lazy` sets only
//!   the lazy flag and sends nothing: the target notices at its next tick or its next return to user;
//! - every model reschedules on return to user mode when either flag is set.

use crate::event::Ev;
use crate::metrics::Count;
use crate::sim::Sim;
use crate::task::{Phase, State};
use axes::model::Model;

/// One CPU.
#[derive(Clone, Debug)]
pub(crate) struct Cpu {
    /// The running task; None: idle.
    pub(crate) cur: Option<u32>,
    /// Queued tasks.
    pub(crate) rq: Vec<u32>,
    /// NEED_RESCHED and the lazy flag.
    pub(crate) need: bool,
    pub(crate) lazy: bool,
    /// Bumped whenever the running segment changes; a segment's end event carries the value it started with.
    pub(crate) gen: u64,
    /// The running segment, ns.
    pub(crate) seg_start: u64,
    pub(crate) seg_end: u64,
    /// When the running task was switched in.
    pub(crate) switched_in: u64,
    /// Idle since, ns; None: busy.
    pub(crate) idle_since: Option<u64>,
    /// `eevdf`: the last average virtual runtime of the queue (`zero_vruntime`), where a task placed on
    /// an empty queue goes.
    pub(crate) zero_vruntime: i64,
}

impl Cpu {
    /// An idle CPU at time 0.
    pub(crate) fn new() -> Cpu {
        Cpu {
            cur: None,
            rq: Vec::new(),
            need: false,
            lazy: false,
            gen: 0,
            seg_start: 0,
            seg_end: 0,
            switched_in: 0,
            idle_since: Some(0),
            zero_vruntime: 0,
        }
    }
}

/// The EEVDF base slice (docs/references.md#eevdf-slice) (since 6.15): 0.70 ms x (1 + log2(min(cpus, 8))).
pub fn base_slice_ns(cpus: u32) -> u64 {
    let n = cpus.clamp(1, 8);
    700_000 * (1 + (31 - n.leading_zeros()) as u64)
}

impl Sim {
    /// Starts (or resumes) the current task's phase on `c` for `dur` ns.
    pub(crate) fn run_segment(&mut self, c: u32, dur: u64) {
        let cpu = &mut self.cpus[c as usize];
        cpu.gen += 1;
        cpu.seg_start = self.clock.now;
        cpu.seg_end = self.clock.now + dur.max(1);
        let (end, gen) = (cpu.seg_end, cpu.gen);
        self.clock.push(end, Ev::SegEnd(c, gen));
    }

    /// Picks the next task on `c` or goes idle (`eevdf`: [`Sim::schedule_eevdf`]; else the lowest
    /// vruntime, pulling from the busiest CPU when its own queue is empty).
    pub(crate) fn schedule(&mut self, c: u32) {
        if self.p.eevdf {
            self.schedule_eevdf(c, None);
            return;
        }
        let ci = c as usize;
        if self.cpus[ci].rq.is_empty() {
            // Idle balance: take a waiting task from the longest queue.
            let (mut best, mut len) = (usize::MAX, 0);
            for (i, o) in self.cpus.iter().enumerate() {
                if o.rq.len() > len {
                    best = i;
                    len = o.rq.len();
                }
            }
            if best != usize::MAX {
                let t = self.cpus[best].rq.pop().expect("non-empty");
                self.cpus[ci].rq.push(t);
            }
        }
        if self.cpus[ci].rq.is_empty() {
            self.cpus[ci].cur = None;
            self.cpus[ci].idle_since = Some(self.clock.now);
            self.cpus[ci].need = false;
            self.cpus[ci].lazy = false;
            self.cpus[ci].gen += 1;
            return;
        }
        let (mut bi, mut bv) = (0, i64::MAX);
        for (i, &t) in self.cpus[ci].rq.iter().enumerate() {
            if self.tasks[t as usize].vruntime < bv {
                bv = self.tasks[t as usize].vruntime;
                bi = i;
            }
        }
        let t = self.cpus[ci].rq.swap_remove(bi);
        self.trace_switched_in(t);
        self.switch_to(c, t);
    }

    /// Switches `c` to `t` (taken off the queue): a context switch, and `t`'s phase resumes after it.
    pub(crate) fn switch_to(&mut self, c: u32, t: u32) {
        let ci = c as usize;
        // Idle time is not tracked here (it is what is left of the CPU time); leaving idle costs idle_exit_ns.
        let was_idle = self.cpus[ci].idle_since.take().is_some();
        let cpu = &mut self.cpus[ci];
        cpu.cur = Some(t);
        cpu.need = false;
        cpu.lazy = false;
        cpu.switched_in = self.clock.now;
        let task = &mut self.tasks[t as usize];
        task.state = State::Running;
        task.cpu = c;
        task.resume = task.phase;
        task.phase = Phase::Switch;
        self.metrics.count(Count::Switch, self.clock.now);
        let d = self.p.ctx_switch_ns + if was_idle { self.p.idle_exit_ns } else { 0 };
        self.run_segment(c, d);
    }

    /// Takes the current task off `c` (it stays runnable) and schedules.
    pub(crate) fn preempt(&mut self, c: u32) {
        let ci = c as usize;
        let Some(t) = self.cpus[ci].cur else { return };
        let phase = self.tasks[t as usize].phase;
        self.stop_segment(c, t);
        let task = &mut self.tasks[t as usize];
        task.state = State::Runnable;
        let holding = task.holding;
        if holding {
            self.metrics.count(Count::Lhp, self.clock.now);
        }
        self.remove_spinner(t);
        self.cpus[ci].rq.push(t);
        self.trace_preempted(c, t, holding, phase);
        if self.p.eevdf {
            // put_prev_entity's update_curr: a deadline reached is renewed before the pick.
            let v = self.tasks[t as usize].vruntime;
            self.eevdf_update_curr(t, v);
            self.schedule_eevdf(c, Some(t));
        } else {
            self.schedule(c);
        }
    }

    /// Stops the running segment early: accounts the time run and keeps the rest.
    pub(crate) fn stop_segment(&mut self, c: u32, t: u32) {
        let (start, end) = (
            self.cpus[c as usize].seg_start,
            self.cpus[c as usize].seg_end,
        );
        let ran = self.clock.now.saturating_sub(start);
        let phase = self.tasks[t as usize].phase;
        self.account(phase.acct(), start, self.clock.now);
        let task = &mut self.tasks[t as usize];
        task.vruntime += ran as i64;
        if phase == Phase::Switch {
            // An interrupted switch is redone in full next time.
            task.phase = task.resume;
        } else {
            // What is left of the segment (for a spin: its budget).
            task.remaining = end.saturating_sub(self.clock.now);
        }
        self.cpus[c as usize].gen += 1;
    }

    /// The current task on `c` blocks (sleeps); `wake_at` schedules its wakeup, None waits for a waker.
    pub(crate) fn block(&mut self, c: u32, t: u32, wake_at: Option<u64>) {
        // EEVDF lag with equal weights: running `burst` while n tasks share the CPU puts a task
        // burst x (1 - 1/n) ahead of the average, which then needs burst x (n - 1) of wall time to catch up.
        let burst = self
            .clock
            .now
            .saturating_sub(self.cpus[c as usize].switched_in);
        let others = self.cpus[c as usize].rq.len() as u64;
        let task = &mut self.tasks[t as usize];
        task.state = State::Sleeping;
        task.slept_at = self.clock.now;
        task.owes_for = burst * others;
        if task.holding {
            self.metrics.count(Count::Lhp, self.clock.now);
        }
        self.remove_spinner(t);
        if self.p.eevdf {
            self.eevdf_block(c, t);
        }
        if let Some(at) = wake_at {
            self.clock.push(at, Ev::TimerWake(t));
        }
        self.schedule(c);
    }

    /// Is a reschedule due on `c` for a task in kernel mode right now?
    pub(crate) fn kernel_preemptible(&self, c: u32) -> bool {
        let cpu = &self.cpus[c as usize];
        match self.p.model {
            Model::Full => cpu.need || cpu.lazy,
            Model::Lazy => cpu.need,
            Model::None | Model::Voluntary => false,
        }
    }

    /// On the way back to user mode: reschedule when either flag is set (every model). Returns true when
    /// the task was switched out. rseq: a holder that asked gets one extension instead.
    pub(crate) fn return_to_user(&mut self, c: u32, from_irq_or_fault: bool) -> bool {
        let ci = c as usize;
        if !(self.cpus[ci].need || self.cpus[ci].lazy) {
            return false;
        }
        let Some(t) = self.cpus[ci].cur else {
            return false;
        };
        if from_irq_or_fault && self.grant_extension(c, t) {
            return false;
        }
        if self.tasks[t as usize].granted {
            return false; // still inside its extension
        }
        self.preempt(c);
        true
    }

    /// The first idle CPU, where a woken task goes when its own CPU is busy.
    pub(crate) fn idle_cpu(&self) -> Option<usize> {
        self.cpus.iter().position(|x| x.cur.is_none())
    }

    /// Makes a sleeping task runnable (`remote`: woken by another CPU) with wakeup preemption.
    pub(crate) fn wake(&mut self, t: u32, remote: bool) {
        if self.tasks[t as usize].state != State::Sleeping {
            return;
        }
        let timer = self.tasks[t as usize].phase == Phase::Spin;
        let c = if self.p.eevdf {
            self.eevdf_enqueue_woken(t)
        } else {
            self.enqueue_woken(t)
        };
        let ci = c as usize;
        if self.cpus[ci].cur.is_none() {
            // Idle CPU: it leaves idle and picks the task.
            self.trace_woken(t, timer, false, false);
            self.schedule(c);
            return;
        }
        let resched = if self.p.eevdf {
            self.eevdf_wakeup_preempts(c, t)
        } else {
            // The enqueue updates the current task's runtime: a used-up slice asks for a reschedule.
            let expired = self.p.delayed_dequeue && self.slice_used_up(c);
            // Wakeup preemption once the current task has used its protected slice.
            let ran = self.clock.now.saturating_sub(self.cpus[ci].switched_in);
            expired || ran >= self.p.wakeup_preempt_after_ns.unwrap_or(self.slice)
        };
        self.trace_woken(t, timer, true, resched);
        if !resched {
            return;
        }
        match self.p.model {
            Model::Lazy => self.cpus[ci].lazy = true,
            _ => {
                self.cpus[ci].need = true;
                if remote {
                    self.clock.push(self.clock.now + self.p.ipi_ns, Ev::Ipi(c));
                }
            }
        }
        if !remote {
            // A local wakeup comes from an interrupt on that CPU (the timer): its return path checks the
            // flags now, in every model.
            self.interrupt_exit(c);
        }
    }

    /// Without `eevdf`: queues the sleeping `t` on its last CPU, or an idle one if that is busy, at most
    /// `sleeper_credit_ns` (half a slice) behind the running task; returns the CPU.
    fn enqueue_woken(&mut self, t: u32) -> u32 {
        let mut c = self.tasks[t as usize].cpu;
        if self.cpus[c as usize].cur.is_some() {
            if let Some(i) = self.idle_cpu() {
                c = i as u32;
            }
        }
        let ci = c as usize;
        let minv = self.cpus[ci]
            .cur
            .map(|x| self.tasks[x as usize].vruntime)
            .unwrap_or(0);
        let credit = self.p.sleeper_credit_ns.unwrap_or(self.slice / 2) as i64;
        let task = &mut self.tasks[t as usize];
        task.state = State::Runnable;
        let placed = task.vruntime.max((minv - credit).max(0));
        let window = self.p.delayed_dequeue_window_ns.unwrap_or(task.owes_for);
        if self.p.delayed_dequeue && self.clock.now - task.slept_at < window {
            // Still queued (delayed): same deadline; the placement is not runtime.
            task.slice_start += placed - task.vruntime;
        } else {
            task.slice_start = placed;
        }
        task.vruntime = placed;
        self.cpus[ci].rq.push(t);
        c
    }

    pub(crate) fn tick(&mut self, c: u32) {
        self.trace_tick(c);
        let tick = 1_000_000_000 / self.p.hz.max(1) as u64;
        self.clock.push(self.clock.now + tick, Ev::Tick(c));
        let ci = c as usize;
        if self.cpus[ci].cur.is_none() {
            return;
        }
        let ran = self.clock.now.saturating_sub(self.cpus[ci].switched_in);
        if self.p.model == Model::Lazy && self.cpus[ci].lazy {
            self.cpus[ci].need = true; // the tick upgrades a lazy request
        }
        let due = if self.p.eevdf {
            let (t, v) = self.running_vruntime(c).expect("a running task");
            self.eevdf_update_curr(t, v)
        } else if self.p.delayed_dequeue {
            self.slice_used_up(c)
        } else {
            ran >= self.slice
        };
        if due && !self.cpus[ci].rq.is_empty() {
            match self.p.model {
                Model::Lazy => {
                    if !self.cpus[ci].need {
                        self.cpus[ci].lazy = true;
                    }
                }
                _ => self.cpus[ci].need = true,
            }
        }
        self.interrupt_exit(c);
    }

    /// `delayed_dequeue`: has the current task on `c` used up its slice (runtime since its deadline was
    /// set, the running segment included)? If so its next slice starts now (EEVDF's `update_deadline`).
    pub(crate) fn slice_used_up(&mut self, c: u32) -> bool {
        let cpu = &self.cpus[c as usize];
        let Some(t) = cpu.cur else { return false };
        let runtime =
            self.tasks[t as usize].vruntime + self.clock.now.saturating_sub(cpu.seg_start) as i64;
        let task = &mut self.tasks[t as usize];
        if (runtime - task.slice_start).max(0) < self.slice as i64 {
            return false;
        }
        task.slice_start = runtime;
        true
    }

    /// Leaving an interrupt (the tick, an IPI, the timer of a local wakeup) on `c`: in kernel mode the
    /// model decides whether to preempt; to user mode every model reschedules when a flag is set.
    pub(crate) fn interrupt_exit(&mut self, c: u32) {
        let ci = c as usize;
        let Some(t) = self.cpus[ci].cur else { return };
        if !(self.cpus[ci].need || self.cpus[ci].lazy) {
            return;
        }
        if self.tasks[t as usize].phase.kernel() {
            if self.kernel_preemptible(c) && self.tasks[t as usize].phase != Phase::Switch {
                self.preempt(c);
            }
        } else {
            self.return_to_user(c, true);
        }
    }

    /// A switch to `t` on `c` is done: its phase resumes (after a reschedule check on the way to user mode).
    pub(crate) fn switched_in(&mut self, c: u32, t: u32) {
        let task = &mut self.tasks[t as usize];
        task.phase = task.resume;
        let resume = task.phase;
        let rem = task.remaining;
        if resume.kernel() || !self.return_to_user(c, false) {
            self.resume(c, t, resume, rem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate;
    use crate::test_support::reported_host;
    use axes::model::Pages;
    use results::model::{Outcome, Params};

    #[test]
    fn aligned_ticks_change_the_run_and_keep_it_deterministic() {
        let run = |ticks_aligned| {
            // A run whose ticks expire slices (at 8 CPUs and 64 workers the tick's phase happens to
            // change nothing in 100 ms).
            simulate(&Params {
                cpus: 4,
                workers: 32,
                model: Model::Lazy,
                ticks_aligned,
                duration_ns: 100_000_000,
                warmup_ns: 20_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        let (staggered, aligned) = (run(false), run(true));
        assert_ne!(
            serde_json::to_string(&staggered).unwrap(),
            serde_json::to_string(&aligned).unwrap()
        );
        assert_eq!(
            serde_json::to_string(&run(true)).unwrap(),
            serde_json::to_string(&aligned).unwrap()
        );
    }

    #[test]
    fn base_slice_follows_the_formula() {
        assert_eq!(base_slice_ns(1), 700_000);
        assert_eq!(base_slice_ns(2), 1_400_000);
        assert_eq!(base_slice_ns(8), 2_800_000);
        assert_eq!(base_slice_ns(96), 2_800_000);
    }

    /// The reported host (docs/references.md#lhp-halving) on 4 KB pages, with or without delayed dequeue.
    fn reported(model: Model, delayed_dequeue: bool) -> Outcome {
        simulate(&Params {
            delayed_dequeue,
            // The allocations' path alone: with the first touches' CPU the lock binds less in 300 ms.
            txn_first_touches: false,
            ..reported_host(model, Pages::P4k, 300)
        })
        .unwrap()
    }

    #[test]
    fn sleeper_credit_places_a_woken_task_behind_the_running_one() {
        let run = |sleeper_credit_ns| {
            simulate(&Params {
                workload: axes::model::Workload::Txn,
                cpus: 4,
                workers: 64,
                sleeper_credit_ns,
                duration_ns: 100_000_000,
                warmup_ns: 20_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        // Unset: half a slice, the model as it was.
        let half = Some(base_slice_ns(4) / 2);
        assert_eq!(
            serde_json::to_string(&run(None)).unwrap(),
            serde_json::to_string(&run(half)).unwrap()
        );
        assert_ne!(
            serde_json::to_string(&run(Some(0))).unwrap(),
            serde_json::to_string(&run(None)).unwrap()
        );
    }

    #[test]
    fn with_delayed_dequeue_lazy_preempts_more_holders_than_none() {
        // Slices run out for the spinners, which run long; noticed at a remote enqueue, `none` preempts a
        // spinner at once (an IPI) and `lazy` at its next return to user, which is often the fault inside
        // the critical section once it has the lock.
        let (n, l) = (reported(Model::None, true), reported(Model::Lazy, true));
        assert!(n.lhp_per_s > 0.0, "none: {}", n.lhp_per_s);
        assert!(
            l.lhp_per_s > 2.0 * n.lhp_per_s,
            "holder preemptions none {} lazy {}",
            n.lhp_per_s,
            l.lhp_per_s
        );
        // Since 2026-11-26 (spinners pay the lock's line only when it is written) the lock has the
        // headroom to absorb them at these costs: the two models' throughput stays within 2%.
        let (tn, tl) = (n.txn_per_s.unwrap(), l.txn_per_s.unwrap());
        assert!((tl / tn - 1.0).abs() < 0.02, "tx/s none {tn} lazy {tl}");
        // A slice counted from the switch-in runs out only for spins longer than a slice: fewer holder
        // preemptions under lazy than with slices counted across sleeps.
        let l0 = reported(Model::Lazy, false);
        assert!(
            l0.lhp_per_s < l.lhp_per_s,
            "{} vs {}",
            l0.lhp_per_s,
            l.lhp_per_s
        );
    }
}
