//! EEVDF as the fair class runs it for tasks of equal weight (`--set eevdf=true`; off by default):
//! kernel/sched/fair.c of Linux 6.12 to 7.x with the features.h defaults (PLACE_LAG, RUN_TO_PARITY,
//! DELAY_DEQUEUE, DELAY_ZERO and PLACE_REL_DEADLINE on, NEXT_BUDDY off), each rule with the function it comes
//! from:
//! - V, a CPU's average virtual runtime over its queued tasks (delayed ones included) and the running one
//!   (`avg_vruntime`); a task is eligible while its virtual runtime is at most V (`vruntime_eligible`);
//! - the pick: the running task while it is eligible and protected (up to `vprot`, its deadline when all
//!   slices are equal: `set_protect_slice`, RUN_TO_PARITY), else the eligible task with the earliest
//!   virtual deadline (`__pick_eevdf`); a delayed task that is picked is dequeued and the pick repeats
//!   (`pick_next_entity`); the same task picked again is not switched (`__schedule`);
//! - deadlines: vruntime + the base slice when a task is placed or its vruntime reaches its deadline, which
//!   also asks for a reschedule, as does the end of its protection, whenever the running task's time is
//!   brought up to date with others queued (the tick, an enqueue: `update_curr`, `update_deadline`);
//! - lag: at a dequeue, V - vruntime clamped to +/-(slice + a tick) (`update_entity_lag`); a placement puts
//!   the task at V - lag x (n + 1) / n, so that adding it to the average keeps its lag (`place_entity`);
//!   a migrating task keeps its deadline relative to its vruntime (PLACE_REL_DEADLINE);
//! - sleep: a task that blocks while not eligible stays queued, delayed (`dequeue_entity`); picked, it
//!   leaves with a lag of at most 0 (DELAY_ZERO, `finish_delayed_dequeue_entity`); woken, it is requeued
//!   on that CPU (`ttwu_runnable` in core.c) with its vruntime and deadline, or at V with a fresh
//!   deadline if its lag has turned positive (`requeue_delayed_entity`);
//! - wakeup preemption: after the enqueue's `update_curr`, the woken task preempts the running one when
//!   the pick, the running task's protection included, is the woken task (`wakeup_preempt_fair`,
//!   `check_preempt_wakeup_fair` before 6.19). So a running task that is not eligible (it has had more than
//!   its share, as a long spinner has) loses its CPU to the next eligible wakee with an earlier deadline.

use crate::sim::Sim;
use crate::task::State;

impl Sim {
    /// The bound on a lag: a slice and a tick (`update_entity_lag`), ns.
    fn lag_limit(&self) -> i64 {
        (self.slice + 1_000_000_000 / self.p.hz.max(1) as u64) as i64
    }

    /// The running task on `c` and its virtual runtime now, its running segment included.
    pub(crate) fn running_vruntime(&self, c: u32) -> Option<(u32, i64)> {
        let cpu = &self.cpus[c as usize];
        let t = cpu.cur?;
        let ran = self.clock.now.saturating_sub(cpu.seg_start) as i64;
        Some((t, self.tasks[t as usize].vruntime + ran))
    }

    /// The sum and count of the virtual runtimes queued on `c` (delayed ones included, `skip` left out),
    /// with `running` (a running task's virtual runtime, not in the queue) added.
    fn queue_sum(&self, c: u32, running: Option<i64>, skip: Option<u32>) -> (i128, i128) {
        let mut sum = running.map_or(0, i128::from);
        let mut n = i128::from(running.is_some());
        for &x in &self.cpus[c as usize].rq {
            if Some(x) != skip {
                sum += i128::from(self.tasks[x as usize].vruntime);
                n += 1;
            }
        }
        (sum, n)
    }

    /// V on `c` from a sum and count; with nothing queued, the last V there (`zero_vruntime`).
    fn average(&mut self, c: u32, (sum, n): (i128, i128)) -> i64 {
        if n > 0 {
            // Floor, as avg_vruntime's left bias makes V + 0 eligible.
            self.cpus[c as usize].zero_vruntime = sum.div_euclid(n) as i64;
        }
        self.cpus[c as usize].zero_vruntime
    }

    /// `__pick_eevdf` on `c`: `running` is the running task when it is not in the queue, `prev` the
    /// running task when it is (just preempted); either keeps the CPU while eligible and protected.
    pub(crate) fn pick_eevdf(
        &self,
        c: u32,
        running: Option<(u32, i64)>,
        prev: Option<u32>,
    ) -> Option<u32> {
        let rq = &self.cpus[c as usize].rq;
        let (sum, n) = self.queue_sum(c, running.map(|x| x.1), None);
        match (n, running) {
            (0, _) => return None,
            (1, Some((t, _))) => return Some(t),
            (1, None) => return rq.first().copied(),
            _ => {}
        }
        let eligible = |v: i64| i128::from(v) * n <= sum;
        let task = |x: u32| &self.tasks[x as usize];
        let cur = running.or_else(|| prev.map(|t| (t, task(t).vruntime)));
        if let Some((t, v)) = cur {
            if eligible(v) && v < task(t).vprot {
                return Some(t);
            }
        }
        let mut best: Option<(u32, i64)> = None;
        let candidates = rq.iter().map(|&x| (x, task(x).vruntime)).chain(running);
        for (x, v) in candidates {
            if eligible(v) && best.is_none_or(|(b, _)| task(x).deadline < task(b).deadline) {
                best = Some((x, v));
            }
        }
        // Someone is always eligible (V is their average); the lowest runtime otherwise, for safety.
        best.map(|b| b.0)
            .or_else(|| rq.iter().copied().min_by_key(|&x| task(x).vruntime))
    }

    /// `update_curr` for `t` at virtual runtime `v`: a deadline reached is renewed; true when a reschedule
    /// is due (the deadline reached, or the protection over).
    pub(crate) fn eevdf_update_curr(&mut self, t: u32, v: i64) -> bool {
        let slice = self.slice as i64;
        let task = &mut self.tasks[t as usize];
        if v >= task.deadline {
            task.deadline = v + slice;
            return true;
        }
        v >= task.vprot
    }

    /// Places `t` on `c` (it is not queued anywhere) from its lag; `rel_deadline`: its deadline relative
    /// to its vruntime (a migration), None: a fresh one (a wakeup).
    fn place(&mut self, c: u32, t: u32, rel_deadline: Option<i64>) {
        let running = self.running_vruntime(c).map(|x| x.1);
        let (sum, n) = self.queue_sum(c, running, None);
        let avg = self.average(c, (sum, n));
        let vlag = i128::from(self.tasks[t as usize].vlag);
        // Inflated so that the average's move when t joins leaves it this lag (truncating, as div_s64).
        let lag = if n > 0 { vlag * (n + 1) / n } else { 0 } as i64;
        let task = &mut self.tasks[t as usize];
        task.vruntime = avg - lag;
        task.deadline = task.vruntime + rel_deadline.unwrap_or(self.slice as i64);
        task.cpu = c;
    }

    /// `update_entity_lag` for `t`, queued on `c` or running there at `v`.
    fn save_lag(&mut self, c: u32, t: u32, v: i64, queued: bool) {
        let running = if queued {
            self.running_vruntime(c)
                .filter(|&(x, _)| !self.cpus[c as usize].rq.contains(&x))
                .map(|x| x.1)
        } else {
            Some(v)
        };
        let s = self.queue_sum(c, running, None);
        let avg = self.average(c, s);
        let limit = self.lag_limit();
        self.tasks[t as usize].vlag = (avg - v).clamp(-limit, limit);
    }

    /// The running task `t` on `c` blocks: it stays queued, delayed, when it is not eligible (and delayed
    /// dequeue is on), else it leaves the queue with its lag.
    pub(crate) fn eevdf_block(&mut self, c: u32, t: u32) {
        let v = self.tasks[t as usize].vruntime;
        self.eevdf_update_curr(t, v);
        let (sum, n) = self.queue_sum(c, Some(v), None);
        if self.p.delayed_dequeue && i128::from(v) * n > sum {
            self.tasks[t as usize].delayed = true;
            self.cpus[c as usize].rq.push(t);
        } else {
            self.save_lag(c, t, v, false);
        }
    }

    /// A delayed task `t` queued on `c` is picked: it leaves the queue, with a lag of at most 0.
    fn finish_delayed(&mut self, c: u32, t: u32) {
        let v = self.tasks[t as usize].vruntime;
        self.save_lag(c, t, v, true);
        let task = &mut self.tasks[t as usize];
        task.vlag = task.vlag.min(0);
        task.delayed = false;
        let rq = &mut self.cpus[c as usize].rq;
        let i = rq
            .iter()
            .position(|&x| x == t)
            .expect("a delayed task is queued");
        rq.remove(i);
    }

    /// A delayed task `t` queued on `c` wakes there: it keeps its vruntime and deadline unless its lag has
    /// turned positive, then it is placed at V with a fresh deadline.
    fn requeue_delayed(&mut self, c: u32, t: u32) {
        let v = self.tasks[t as usize].vruntime;
        self.save_lag(c, t, v, true);
        self.tasks[t as usize].delayed = false;
        if self.tasks[t as usize].vlag > 0 {
            let running = self.running_vruntime(c).map(|x| x.1);
            let s = self.queue_sum(c, running, Some(t));
            let avg = self.average(c, s);
            let task = &mut self.tasks[t as usize];
            task.vlag = 0;
            task.vruntime = avg;
            task.deadline = avg + self.slice as i64;
        }
    }

    /// Makes the sleeping task `t` runnable: requeued where it sleeps if delayed, else placed on its last
    /// CPU or an idle one if that is busy. Returns the CPU.
    pub(crate) fn eevdf_enqueue_woken(&mut self, t: u32) -> u32 {
        let mut c = self.tasks[t as usize].cpu;
        if self.tasks[t as usize].delayed {
            self.requeue_delayed(c, t);
        } else {
            if self.cpus[c as usize].cur.is_some() {
                if let Some(i) = self.idle_cpu() {
                    c = i as u32;
                }
            }
            self.place(c, t, None);
            self.cpus[c as usize].rq.push(t);
        }
        self.tasks[t as usize].state = State::Runnable;
        c
    }

    /// Would waking `t` onto busy `c` preempt the running task? (`update_curr`, then the pick.)
    pub(crate) fn eevdf_wakeup_preempts(&mut self, c: u32, t: u32) -> bool {
        let Some((cur, v)) = self.running_vruntime(c) else {
            return false;
        };
        self.eevdf_update_curr(cur, v) || self.pick_eevdf(c, Some((cur, v)), None) == Some(t)
    }

    /// An idle `c` pulls a runnable task from the CPU with the most (its last queued), migrating it with
    /// its lag and its relative deadline. Returns whether it found one.
    fn eevdf_idle_pull(&mut self, c: u32) -> bool {
        let runnable = |s: &Sim, i: usize| {
            s.cpus[i]
                .rq
                .iter()
                .filter(|&&x| !s.tasks[x as usize].delayed)
                .count()
        };
        let (mut best, mut most) = (usize::MAX, 0);
        for i in 0..self.cpus.len() {
            let n = runnable(self, i);
            if n > most {
                best = i;
                most = n;
            }
        }
        if best == usize::MAX {
            return false;
        }
        let rq = &self.cpus[best].rq;
        let j = rq
            .iter()
            .rposition(|&x| !self.tasks[x as usize].delayed)
            .expect("a runnable task");
        let t = rq[j];
        let v = self.tasks[t as usize].vruntime;
        self.save_lag(best as u32, t, v, true);
        self.cpus[best].rq.remove(j);
        let rel = self.tasks[t as usize].deadline - v;
        self.place(c, t, Some(rel));
        self.cpus[c as usize].rq.push(t);
        true
    }

    /// Picks the next task on `c` (`prev`: the running task, just preempted and queued) or goes idle.
    pub(crate) fn schedule_eevdf(&mut self, c: u32, prev: Option<u32>) {
        let ci = c as usize;
        loop {
            if self.cpus[ci].rq.is_empty() && !self.eevdf_idle_pull(c) {
                self.cpus[ci].cur = None;
                self.cpus[ci].idle_since = Some(self.clock.now);
                self.cpus[ci].need = false;
                self.cpus[ci].lazy = false;
                self.cpus[ci].gen += 1;
                return;
            }
            let t = self.pick_eevdf(c, None, prev).expect("a queued task");
            if self.tasks[t as usize].delayed {
                self.finish_delayed(c, t);
                continue;
            }
            let i = self.cpus[ci]
                .rq
                .iter()
                .position(|&x| x == t)
                .expect("picked from the queue");
            self.cpus[ci].rq.remove(i);
            self.trace_switched_in(t);
            if prev == Some(t) {
                // The same task again: no switch; it goes on where it was.
                let cpu = &mut self.cpus[ci];
                cpu.need = false;
                cpu.lazy = false;
                let task = &mut self.tasks[t as usize];
                task.state = State::Running;
                let (phase, rem) = (task.phase, task.remaining);
                self.resume(c, t, phase, rem);
                return;
            }
            let task = &self.tasks[t as usize];
            let vprot = match self.p.wakeup_preempt_after_ns {
                Some(q) => task.deadline.min(task.vruntime + q as i64),
                None => task.deadline,
            };
            self.tasks[t as usize].vprot = vprot;
            self.switch_to(c, t);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::sim::Sim;
    use crate::task::State;
    use axes::model::Model;
    use results::model::Params;

    /// One CPU, `n` tasks queued with these virtual runtimes and deadlines, none running.
    fn queued(v: &[(i64, i64)]) -> Sim {
        let mut s = Sim::new(Params {
            cpus: 1,
            workers: v.len() as u32,
            model: Model::None,
            ..Params::default()
        });
        // Sim::new switched the first task in; put it back.
        let c = &mut s.cpus[0];
        if let Some(t) = c.cur.take() {
            c.rq.push(t);
        }
        c.rq.sort();
        for (i, &(vr, dl)) in v.iter().enumerate() {
            let t = &mut s.tasks[i];
            t.vruntime = vr;
            t.deadline = dl;
            t.vprot = 0;
            t.state = State::Runnable;
        }
        s
    }

    #[test]
    fn the_earliest_deadline_among_the_eligible_runs_not_the_lowest_vruntime() {
        // V = 2000: task 0 (vruntime 1000) and 1 (2000) are eligible, 2 (3000) is not. Task 1's deadline
        // is the earliest of the eligible; task 2's, earlier still, does not count.
        let s = queued(&[(1000, 9000), (2000, 5000), (3000, 4000)]);
        assert_eq!(s.pick_eevdf(0, None, None), Some(1));
        // Lowest vruntime first would have picked task 0.
    }

    #[test]
    fn a_preempted_task_keeps_its_cpu_while_eligible_and_protected() {
        let mut s = queued(&[(1000, 9000), (2000, 5000), (3000, 4000)]);
        s.tasks[0].vprot = 9000;
        assert_eq!(s.pick_eevdf(0, None, Some(0)), Some(0));
        // Not eligible: no protection.
        s.tasks[2].vprot = 9000;
        assert_eq!(s.pick_eevdf(0, None, Some(2)), Some(1));
    }

    #[test]
    fn lag_survives_a_sleep_and_a_placement() {
        // Three tasks at V = 2000; task 0, at 1000, has a lag of +1000.
        let mut s = queued(&[(1000, 9000), (2000, 5000), (3000, 4000)]);
        s.cpus[0].rq.retain(|&x| x != 0);
        s.save_lag(0, 0, 1000, false);
        assert_eq!(s.tasks[0].vlag, 1000);
        // The two left: V = 2500. Placed back, its lag is inflated by 3/2 so that the new average (V')
        // less its vruntime is the lag it left with.
        s.place(0, 0, None);
        s.cpus[0].rq.push(0);
        let v = s.tasks[0].vruntime;
        assert_eq!(v, 2500 - 1500);
        let (sum, n) = s.queue_sum(0, None, None);
        assert_eq!((sum / n) as i64 - v, 1000);
        assert_eq!(s.tasks[0].deadline, v + s.slice as i64);
    }

    #[test]
    fn an_ineligible_sleeper_stays_queued_and_leaves_with_no_credit() {
        let mut s = queued(&[(1000, 9000), (2000, 5000), (6000, 7000)]);
        // Task 2 runs and blocks at vruntime 6000, ahead of V: delayed.
        s.cpus[0].rq.retain(|&x| x != 2);
        s.cpus[0].cur = Some(2);
        s.cpus[0].seg_start = s.clock.now;
        s.eevdf_block(0, 2);
        assert!(s.tasks[2].delayed);
        assert!(s.cpus[0].rq.contains(&2));
        // Woken while still behind: requeued with its own vruntime and deadline.
        s.cpus[0].cur = None;
        s.tasks[2].state = State::Sleeping;
        let c = s.eevdf_enqueue_woken(2);
        assert_eq!(
            (c, s.tasks[2].vruntime, s.tasks[2].deadline),
            (0, 6000, 7000)
        );
        // Finished while it owed time: a lag of at most 0.
        s.tasks[2].delayed = true;
        s.finish_delayed(0, 2);
        assert!(s.tasks[2].vlag < 0 && !s.cpus[0].rq.contains(&2));
        s.tasks[1].delayed = true;
        s.tasks[1].vruntime = 0;
        s.finish_delayed(0, 1);
        assert_eq!(s.tasks[1].vlag, 0, "positive lag is clipped (DELAY_ZERO)");
    }
}
