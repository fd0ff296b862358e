//! The engine: the model's state, its start, the event loop, and the dispatch of a segment's end to the
//! module that owns the phase. A task runs its phase as segments on a CPU; a segment ends when it ran its
//! length (`Ev::SegEnd` of the CPU's current generation) or earlier when the task is switched out.

use std::collections::VecDeque;

use crate::clock::Clock;
use crate::event::Ev;
use crate::lock::LockState;
use crate::memory::Memory;
use crate::metrics::{Acct, Metrics};
use crate::rng::Rng;
use crate::sched::{base_slice_ns, Cpu};
use crate::task::{Phase, Task};
use crate::trace::{SchedTrace, Trace};
use results::model::Outcome;
use results::model::Params;

/// One run of the model.
pub(crate) struct Sim {
    /// The parameters.
    pub(crate) p: Params,
    pub(crate) clock: Clock,
    pub(crate) rng: Rng,
    pub(crate) cpus: Vec<Cpu>,
    pub(crate) tasks: Vec<Task>,
    /// The EEVDF base slice, ns.
    pub(crate) slice: u64,
    pub(crate) lock: LockState,
    pub(crate) mem: Memory,
    pub(crate) metrics: Metrics,
    /// `txn`'s pgbench threads: per thread, the backends whose results wait for it, oldest first (the
    /// thread's tasks follow the backends in `tasks`).
    pub(crate) clients: Vec<VecDeque<u32>>,
    /// The scheduler's trace, when asked for (`trace::simulate_traced`).
    pub(crate) trace: Option<Box<Trace>>,
}

impl Sim {
    /// The machine at time 0: every worker queued on CPU (its index mod the CPUs) with a random part of
    /// its first work left and (with replacement) a random age, the ticks staggered across the CPUs
    /// (or aligned, `ticks_aligned`).
    pub(crate) fn new(p: Params) -> Sim {
        let mut rng = Rng::new(p.seed);
        let mem = Memory::new(&p);
        let mut cpus = vec![Cpu::new(); p.cpus as usize];
        let mut tasks = Vec::with_capacity(p.workers as usize);
        for i in 0..p.workers {
            let cpu = i % p.cpus;
            let first_work_ns = rng.below(p.work_ns.max(1));
            // Workers start at staggered ages, as after a while of replacements.
            let age = if p.reconnect_every > 0 {
                rng.below(p.reconnect_every)
            } else {
                0
            };
            let mut task = Task::new(&p, cpu, first_work_ns, age, mem.touched_after(age));
            if p.txn_first_touches {
                task.mapped = mem.touches.mapped_after(p.txn_backend_txns);
            }
            tasks.push(task);
            cpus[cpu as usize].rq.push(i);
        }
        // pgbench's threads start asleep, waiting for results.
        let threads = crate::workload::client::threads(&p);
        for i in 0..threads {
            let mut task = Task::new(&p, i % p.cpus, 0, 0, 0);
            task.is_client = true;
            task.phase = Phase::Client;
            task.remaining = 0;
            task.state = crate::task::State::Sleeping;
            tasks.push(task);
        }
        let mut s = Sim {
            clock: Clock::new(),
            rng,
            cpus,
            tasks,
            slice: base_slice_ns(p.cpus),
            lock: LockState::new(),
            mem,
            metrics: Metrics::new(p.warmup_ns),
            clients: vec![VecDeque::new(); threads as usize],
            trace: None,
            p,
        };
        let tick = 1_000_000_000 / s.p.hz.max(1) as u64;
        for c in 0..s.p.cpus {
            // Ticks are staggered across CPUs, or all at once (`ticks_aligned`, the kernel's default).
            let first = if s.p.ticks_aligned {
                tick
            } else {
                tick * c as u64 / s.p.cpus as u64 + 1
            };
            s.clock.push(first, Ev::Tick(c));
            s.schedule(c);
        }
        s
    }

    /// Accounts CPU time from `from` to `to` (ns) to `acct`.
    pub(crate) fn account(&mut self, acct: Acct, from: u64, to: u64) {
        self.metrics.account(acct, from, to);
    }

    /// Starts phase `ph` of `t` on `c` afresh.
    pub(crate) fn start_phase(&mut self, c: u32, t: u32, ph: Phase) {
        let d = match ph {
            Phase::Work => self.work_phase_ns(t),
            Phase::Read => self.read_ns(t),
            Phase::Send | Phase::SliceYield => self.p.syscall_ns,
            Phase::Client => self.p.client_stmt_ns,
            Phase::FutexWake => self.futex_wake_ns(),
            Phase::Respawn => self.p.respawn_ns,
            Phase::Touch => self.tasks[t as usize].touch_ns,
            _ => unreachable!("start_phase {ph:?}"),
        };
        let task = &mut self.tasks[t as usize];
        task.phase = ph;
        if ph == Phase::Work {
            task.acquire_start = 0;
        }
        self.run_segment(c, d);
    }

    /// The segment on `c` ran to its end.
    fn seg_end(&mut self, c: u32) {
        let Some(t) = self.cpus[c as usize].cur else {
            return;
        };
        let (start, end) = (
            self.cpus[c as usize].seg_start,
            self.cpus[c as usize].seg_end,
        );
        let phase = self.tasks[t as usize].phase;
        self.account(phase.acct(), start, end);
        self.tasks[t as usize].vruntime += (end - start) as i64;
        // The segment is consumed: a preemption from here on accounts nothing twice.
        self.cpus[c as usize].seg_start = self.clock.now;
        self.cpus[c as usize].seg_end = self.clock.now;
        match phase {
            Phase::Switch => self.switched_in(c, t),
            Phase::Work => self.work_end(c, t),
            Phase::Read | Phase::Recv => self.txn_recv_or_read_end(c, t, phase),
            Phase::Send => self.txn_send_end(c, t),
            Phase::Spin => self.spin_end(c, t),
            Phase::SleepEnter => self.pg_sleep(c, t),
            Phase::FutexWaitEnter => self.futex_wait(c, t),
            Phase::Fault => self.fault_end(c, t),
            Phase::Cs => self.release(c, t),
            Phase::FutexWake => self.futex_wake(c, t),
            Phase::SliceYield => self.slice_yield(c, t),
            Phase::Respawn => self.respawned(c, t),
            Phase::Client => self.client_end(c, t),
            Phase::Sweep => self.sweep_end(c, t),
            Phase::SweepFault => self.sweep_done(c, t, true),
            Phase::Touch => self.touch_end(c, t),
        }
    }

    /// Continues a task's phase after it was switched in, with `rem` ns of it left (0: start afresh).
    pub(crate) fn resume(&mut self, c: u32, t: u32, phase: Phase, rem: u64) {
        match phase {
            Phase::Spin => self.resume_spin(c, t, rem),
            Phase::FutexWaitEnter if self.tasks[t as usize].retry => self.futex_retry(c, t),
            Phase::Cs if self.tasks[t as usize].head_write_pending => {
                self.cs_after_fault(c, t, rem.max(1))
            }
            Phase::Work
            | Phase::FutexWake
            | Phase::SliceYield
            | Phase::Respawn
            | Phase::Read
            | Phase::Send
            | Phase::Client
            | Phase::Touch
                if rem == 0 =>
            {
                self.start_phase(c, t, phase)
            }
            _ => {
                let d = if rem == 0 { 1 } else { rem };
                self.run_segment(c, d);
            }
        }
    }

    /// Runs the events up to the end of the measured window and reports.
    pub(crate) fn run(mut self) -> Outcome {
        self.run_events()
    }

    /// [`Sim::run`] with the trace's report.
    pub(crate) fn run_traced(mut self) -> (Outcome, SchedTrace) {
        let o = self.run_events();
        let t = self.trace_report().expect("a traced run");
        (o, t)
    }

    fn run_events(&mut self) -> Outcome {
        let end = self.p.warmup_ns + self.p.duration_ns;
        while let Some((at, ev)) = self.clock.pop(end) {
            self.clock.now = at;
            self.metrics.events += 1;
            match ev {
                Ev::SegEnd(c, gen) => {
                    if self.cpus[c as usize].gen == gen && self.cpus[c as usize].cur.is_some() {
                        self.seg_end(c);
                    }
                }
                Ev::Tick(c) => self.tick(c),
                Ev::TimerWake(t) => self.wake(t, false),
                Ev::RemoteWake(t) => self.wake(t, true),
                Ev::Ipi(c) => self.interrupt_exit(c),
                Ev::ExtEnd(c, gen) => self.ext_end(c, gen),
                Ev::ParkTimeout(t, gen) => self.park_timeout(t, gen),
            }
        }
        // Close the running segments at the end.
        self.clock.now = end;
        for c in 0..self.p.cpus {
            if let Some(t) = self.cpus[c as usize].cur {
                let start = self.cpus[c as usize].seg_start;
                let ph = self.tasks[t as usize].phase;
                self.account(ph.acct(), start, end);
            }
        }
        let per_task: Vec<f64> = self
            .tasks
            .iter()
            .filter(|t| !t.is_client)
            .map(|t| t.ops as f64)
            .collect();
        self.metrics.outcome(&self.p, &per_task)
    }
}

#[cfg(test)]
mod tests {
    use crate::simulate;
    use crate::test_support::quick;
    use axes::model::{Model, Pages};
    use results::model::Params;

    #[test]
    fn same_seed_same_outcome_other_seed_other_outcome() {
        let a = quick(Model::Lazy, Pages::P4k, 4, 32);
        let b = quick(Model::Lazy, Pages::P4k, 4, 32);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        let c = simulate(&Params {
            seed: 2,
            model: Model::Lazy,
            cpus: 4,
            workers: 32,
            duration_ns: 200_000_000,
            warmup_ns: 20_000_000,
            ..Params::default()
        })
        .unwrap();
        assert_ne!(a.ops, c.ops);
    }
}
