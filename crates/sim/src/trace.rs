//! The scheduler's trace: diagnostics a run can collect on request ([`simulate_traced`]) and that never
//! enter a result file, so a traced run's [`Outcome`] is the untraced run's, byte for byte. It answers how
//! long a lock holder that lost its CPU stays off it and why it lost it, how crowded the run queues are,
//! how often a wakeup asks for a reschedule, and how long a pg_usleep sleeper waits for its CPU after its
//! timer fires: the quantities that decide how much lock-holder preemption costs.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::sim::Sim;
use crate::task::Phase;
use results::model::Outcome;
use results::model::Params;
use stats::Percentiles as Pcts;

/// What a traced run saw in its measured window.
#[derive(Debug, Clone, Serialize)]
pub struct SchedTrace {
    /// Holders switched out while runnable (preempted), and how long each stayed off its CPU, ns.
    pub holder_preemptions: u64,
    pub holder_off_cpu_ns: Pcts,
    pub holder_off_cpu_mean_ns: f64,
    /// Where the preempted holders were: (phase, count), most first.
    pub holder_preempted_in: Vec<(String, u64)>,
    /// How far ahead of its CPU's average virtual runtime a holder was when it was preempted, ns (p50,
    /// p90); positive: it had run more than its share (EEVDF: not eligible).
    pub holder_lead_p50_ns: i64,
    pub holder_lead_p90_ns: i64,
    /// Tasks queued behind a preempted holder on its CPU at the preemption (mean).
    pub holder_queue_mean: f64,
    /// Share of the measured time the lock was held by a task that was off its CPU.
    pub lock_frozen_share: f64,
    /// Tasks on a CPU (running or queued), mean over ticks, and the queued spinners' share of them.
    pub runnable_per_cpu: f64,
    pub spinning_per_cpu: f64,
    /// Wakeups onto a busy CPU, and those that asked the running task to reschedule.
    pub busy_wakeups: u64,
    pub wakeup_resched: u64,
    /// Spinners switched out while spinning (preempted, runnable).
    pub spinner_preemptions: u64,
    /// pg_usleep sleepers: from the timer's wakeup to running again, ns.
    pub sleeper_return_ns: Pcts,
    /// Backends woken by their client: from the wakeup to running, ns.
    pub backend_return_ns: Pcts,
    /// `txn_first_touches`: backends switched out inside a first-touch fault (in the real system mostly
    /// while holding a content, mapping or WAL insertion LWLock, which the model does not have), and how
    /// long each stayed off its CPU, ns. Only a model that preempts in the kernel has any.
    pub touch_preemptions: u64,
    pub touch_off_cpu_ns: Pcts,
    pub touch_off_cpu_mean_ns: f64,
}

/// The trace's state during a run.
pub(crate) struct Trace {
    warmup_ns: u64,
    /// Per task: when it was switched out holding the lock (preempted), and when it was woken.
    off_at: Vec<Option<u64>>,
    woken_at: Vec<Option<(u64, bool)>>,
    holder_preemptions: u64,
    off_cpu: Histogram<u64>,
    off_cpu_sum: u64,
    phases: Vec<(Phase, u64)>,
    leads: Vec<i64>,
    queue_sum: u64,
    tick_samples: u64,
    tick_tasks: u64,
    tick_spinners: u64,
    busy_wakeups: u64,
    wakeup_resched: u64,
    spinner_preemptions: u64,
    sleeper_return: Histogram<u64>,
    backend_return: Histogram<u64>,
    touch_off_at: Vec<Option<u64>>,
    touch_preemptions: u64,
    touch_off: Histogram<u64>,
    touch_off_sum: u64,
}

fn hist() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 1 << 42, 3).expect("bounds")
}

fn pcts(h: &Histogram<u64>) -> Pcts {
    Pcts {
        mean: None,
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    }
}

impl Trace {
    pub(crate) fn new(p: &Params, tasks: usize) -> Trace {
        Trace {
            warmup_ns: p.warmup_ns,
            off_at: vec![None; tasks],
            woken_at: vec![None; tasks],
            holder_preemptions: 0,
            off_cpu: hist(),
            off_cpu_sum: 0,
            phases: Vec::new(),
            leads: Vec::new(),
            queue_sum: 0,
            tick_samples: 0,
            tick_tasks: 0,
            tick_spinners: 0,
            busy_wakeups: 0,
            wakeup_resched: 0,
            spinner_preemptions: 0,
            sleeper_return: hist(),
            backend_return: hist(),
            touch_off_at: vec![None; tasks],
            touch_preemptions: 0,
            touch_off: hist(),
            touch_off_sum: 0,
        }
    }
}

impl Sim {
    /// `t`, switched out of `c` while runnable, held the lock (`holding`) or was spinning.
    pub(crate) fn trace_preempted(&mut self, c: u32, t: u32, holding: bool, phase: Phase) {
        let now = self.clock.now;
        let Some(tr) = self.trace.as_deref_mut() else {
            return;
        };
        if now < tr.warmup_ns {
            return;
        }
        if phase == Phase::Spin {
            tr.spinner_preemptions += 1;
        }
        // Inside the faults (what is left of them): not on the way to user mode before they start.
        if phase == Phase::Touch && self.tasks[t as usize].remaining > 0 {
            tr.touch_preemptions += 1;
            tr.touch_off_at[t as usize] = Some(now);
        }
        if !holding {
            return;
        }
        tr.holder_preemptions += 1;
        tr.off_at[t as usize] = Some(now);
        match tr.phases.iter_mut().find(|(ph, _)| *ph == phase) {
            Some(e) => e.1 += 1,
            None => tr.phases.push((phase, 1)),
        }
        let rq = &self.cpus[c as usize].rq;
        let queued: Vec<i64> = rq
            .iter()
            .filter(|&&x| !self.tasks[x as usize].delayed)
            .map(|&x| self.tasks[x as usize].vruntime)
            .collect();
        tr.queue_sum += queued.len().saturating_sub(1) as u64;
        // V as EEVDF has it: every queued task (delayed ones too).
        let all = rq.len().max(1) as i128;
        let avg = rq
            .iter()
            .map(|&x| self.tasks[x as usize].vruntime as i128)
            .sum::<i128>()
            / all;
        tr.leads
            .push((self.tasks[t as usize].vruntime as i128 - avg) as i64);
    }

    /// `t` is switched in.
    pub(crate) fn trace_switched_in(&mut self, t: u32) {
        let now = self.clock.now;
        let Some(tr) = self.trace.as_deref_mut() else {
            return;
        };
        if let Some(at) = tr.off_at[t as usize].take() {
            let d = now - at;
            let _ = tr.off_cpu.record(d.max(1));
            tr.off_cpu_sum += d;
        }
        if let Some(at) = tr.touch_off_at[t as usize].take() {
            let d = now - at;
            let _ = tr.touch_off.record(d.max(1));
            tr.touch_off_sum += d;
        }
        if let Some((at, timer)) = tr.woken_at[t as usize].take() {
            if at >= tr.warmup_ns {
                let h = if timer {
                    &mut tr.sleeper_return
                } else {
                    &mut tr.backend_return
                };
                let _ = h.record((now - at).max(1));
            }
        }
    }

    /// `t` was woken (`timer`: its pg_usleep ended); `busy`: onto a busy CPU, `resched`: asking it to
    /// reschedule.
    pub(crate) fn trace_woken(&mut self, t: u32, timer: bool, busy: bool, resched: bool) {
        let now = self.clock.now;
        let is_client = self.tasks[t as usize].is_client;
        let Some(tr) = self.trace.as_deref_mut() else {
            return;
        };
        if !is_client {
            tr.woken_at[t as usize] = Some((now, timer));
        }
        if now >= tr.warmup_ns && busy {
            tr.busy_wakeups += 1;
            tr.wakeup_resched += u64::from(resched);
        }
    }

    /// The tick on `c`: samples its run queue.
    pub(crate) fn trace_tick(&mut self, c: u32) {
        let now = self.clock.now;
        let cpu = &self.cpus[c as usize];
        let running = u64::from(cpu.cur.is_some());
        let spinning = cpu
            .rq
            .iter()
            .chain(cpu.cur.iter())
            .filter(|&&x| !self.tasks[x as usize].delayed)
            .filter(|&&x| {
                self.tasks[x as usize].phase == Phase::Spin || {
                    let task = &self.tasks[x as usize];
                    task.phase == Phase::Switch && task.resume == Phase::Spin
                }
            })
            .count() as u64;
        let queued = cpu
            .rq
            .iter()
            .filter(|&&x| !self.tasks[x as usize].delayed)
            .count() as u64;
        let Some(tr) = self.trace.as_deref_mut() else {
            return;
        };
        if now < tr.warmup_ns {
            return;
        }
        tr.tick_samples += 1;
        tr.tick_tasks += running + queued;
        tr.tick_spinners += spinning;
    }

    /// The report at the end of the run.
    pub(crate) fn trace_report(&self) -> Option<SchedTrace> {
        let tr = self.trace.as_deref()?;
        let mut phases: Vec<(String, u64)> = tr
            .phases
            .iter()
            .map(|(ph, n)| (format!("{ph:?}"), *n))
            .collect();
        phases.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut leads = tr.leads.clone();
        leads.sort_unstable();
        let lead = |q: f64| {
            leads
                .get(((leads.len() as f64 * q) as usize).min(leads.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0)
        };
        let n = tr.holder_preemptions.max(1) as f64;
        let ticks = tr.tick_samples.max(1) as f64;
        Some(SchedTrace {
            holder_preemptions: tr.holder_preemptions,
            holder_off_cpu_ns: pcts(&tr.off_cpu),
            holder_off_cpu_mean_ns: tr.off_cpu_sum as f64 / tr.off_cpu.len().max(1) as f64,
            holder_preempted_in: phases,
            holder_lead_p50_ns: lead(0.5),
            holder_lead_p90_ns: lead(0.9),
            holder_queue_mean: tr.queue_sum as f64 / n,
            lock_frozen_share: tr.off_cpu_sum as f64 / self.p.duration_ns as f64,
            runnable_per_cpu: tr.tick_tasks as f64 / ticks,
            spinning_per_cpu: tr.tick_spinners as f64 / ticks,
            busy_wakeups: tr.busy_wakeups,
            wakeup_resched: tr.wakeup_resched,
            spinner_preemptions: tr.spinner_preemptions,
            sleeper_return_ns: pcts(&tr.sleeper_return),
            backend_return_ns: pcts(&tr.backend_return),
            touch_preemptions: tr.touch_preemptions,
            touch_off_cpu_ns: pcts(&tr.touch_off),
            touch_off_cpu_mean_ns: tr.touch_off_sum as f64 / tr.touch_off.len().max(1) as f64,
        })
    }
}

/// Runs the model with the scheduler's trace on: the same [`Outcome`] as [`crate::simulate`], and the trace.
pub fn simulate_traced(p: &Params) -> Result<(Outcome, SchedTrace), crate::Invalid> {
    crate::validate(p)?;
    let mut s = Sim::new(p.clone());
    s.trace = Some(Box::new(Trace::new(p, s.tasks.len())));
    Ok(s.run_traced())
}
