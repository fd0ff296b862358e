//! What the workers run between acquisitions: [`lock`] (`bench lock`'s operation in a loop, with worker
//! replacement) or [`txn`] (pgbench-like transactions with client round trips, served by the pgbench
//! threads of [`client`]).

pub(crate) mod client;
pub(crate) mod lock;
pub(crate) mod txn;

use crate::sim::Sim;
use crate::task::Phase;
use axes::model::Workload;

impl Sim {
    /// What follows an operation once the lock is released (and any futex wake or slice yield is done).
    pub(crate) fn after_op(&self, t: u32) -> Phase {
        match self.p.workload {
            Workload::Txn => Phase::Read,
            Workload::Lock if self.respawn_due(t) => Phase::Respawn,
            Workload::Lock => Phase::Work,
        }
    }

    /// User work on `c` is done: the next acquisition (or, in `txn`, the statement's send).
    pub(crate) fn work_end(&mut self, c: u32, t: u32) {
        match self.p.workload {
            Workload::Txn => self.txn_work_end(c, t),
            Workload::Lock => {
                self.tasks[t as usize].acquire_start = self.clock.now;
                self.try_lock(c, t);
            }
        }
    }

    /// User work of `t`, ns: a `txn` statement's chunk, or the `lock` operation's work.
    pub(crate) fn work_phase_ns(&self, t: u32) -> u64 {
        match self.p.workload {
            Workload::Txn => self.tasks[t as usize].chunk_ns,
            Workload::Lock => self.work_ns(),
        }
    }
}
