//! `rseq`: `pg` whose holder asks for a time-slice extension (Linux 7.0+). A reschedule that would take
//! the holder off its CPU on the way back to user mode from an interrupt or a fault is deferred once by
//! `rseq_grant_ns`; the holder yields (rseq_slice_yield) after its release, or the grant runs out and the
//! deferred reschedule happens then. `adaptive` asks the same way with `adaptive_rseq`.

use crate::event::Ev;
use crate::sim::Sim;
use axes::model::LockKind;

impl Sim {
    /// On the way back to user mode from an interrupt or a fault with a reschedule due: does `t`, on `c`,
    /// get an extension instead? Grants it when so.
    pub(crate) fn grant_extension(&mut self, c: u32, t: u32) -> bool {
        let asks = self.p.lock == LockKind::Rseq
            || (self.p.lock == LockKind::Adaptive && self.p.adaptive_rseq);
        let task = &mut self.tasks[t as usize];
        if !asks || !task.holding || task.granted {
            return false;
        }
        task.granted = true;
        let gen = self.cpus[c as usize].gen;
        self.clock
            .push(self.clock.now + self.p.rseq_grant_ns, Ev::ExtEnd(c, gen));
        true
    }

    /// A grant made on `c` runs out: the deferred reschedule happens unless the holder yielded already.
    pub(crate) fn ext_end(&mut self, c: u32, gen: u64) {
        // The generation names the segment that was running when the grant was made; the grant belongs to
        // the task, so it expires whatever the task is doing now.
        let _ = gen;
        let ci = c as usize;
        let Some(t) = self.cpus[ci].cur else { return };
        if self.tasks[t as usize].granted {
            self.tasks[t as usize].granted = false;
            if self.cpus[ci].need || self.cpus[ci].lazy {
                self.preempt(c);
            }
        }
    }

    /// rseq_slice_yield on `c` is done: the deferred reschedule happens now.
    pub(crate) fn slice_yield(&mut self, c: u32, t: u32) {
        self.cpus[c as usize].need = true;
        let next = self.after_op(t);
        let task = &mut self.tasks[t as usize];
        task.phase = next;
        task.remaining = 0;
        if !self.return_to_user(c, false) {
            self.start_phase(c, t, next);
        }
    }
}
