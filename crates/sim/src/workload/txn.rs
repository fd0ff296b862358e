//! The `txn` workload: pgbench-like transactions of `txn_stmts` statements. A statement is a recv of the
//! client's statement, user work in chunks between `txn_allocs / txn_stmts` buffer allocations on
//! average (each the free-list pop under the lock, then the block's pread and first-touch fault outside
//! it), and a send of the result; then the backend sleeps for the client's part of the round trip
//! (`client_ns`) until a remote CPU wakes it.

use crate::event::Ev;
use crate::sim::Sim;
use crate::task::Phase;

impl Sim {
    /// A chunk of statement work on `c` is done: the next allocation, or the send.
    pub(crate) fn txn_work_end(&mut self, c: u32, t: u32) {
        let task = &mut self.tasks[t as usize];
        if task.allocs_left > 0 {
            task.allocs_left -= 1;
            task.acquire_start = self.clock.now;
            self.try_lock(c, t);
        } else {
            self.start_phase(c, t, Phase::Send);
        }
    }

    /// A recv (a statement starts: its allocations, one draw, and its work between them) or a block read
    /// on `c` is done: back to user work.
    pub(crate) fn txn_recv_or_read_end(&mut self, c: u32, t: u32, phase: Phase) {
        if phase == Phase::Recv {
            let m = self.p.txn_allocs.max(0.0) / self.p.txn_stmts.max(1) as f64;
            let extra = u32::from(self.rng.unit() < m.fract());
            let a = m.trunc() as u32 + extra;
            let task = &mut self.tasks[t as usize];
            task.allocs_left = a;
            task.chunk_ns = self.p.stmt_ns / (a as u64 + 1);
        }
        let task = &mut self.tasks[t as usize];
        task.phase = Phase::Work;
        task.remaining = 0;
        if !self.return_to_user(c, true) {
            self.start_phase(c, t, Phase::Work);
        }
    }

    /// The send on `c` is done: the statement (maybe the transaction) ends, and the backend waits for the
    /// client's next statement; a pgbench thread on another CPU wakes it.
    pub(crate) fn txn_send_end(&mut self, c: u32, t: u32) {
        let measured = self.metrics.measuring && self.clock.now >= self.p.warmup_ns;
        let stmts = self.p.txn_stmts.max(1);
        let task = &mut self.tasks[t as usize];
        task.stmts_left = task.stmts_left.saturating_sub(1);
        if task.stmts_left == 0 {
            task.stmts_left = stmts;
            if measured {
                self.metrics.txns += 1;
            }
        }
        task.phase = Phase::Recv;
        task.remaining = self.p.syscall_ns;
        let at = self.clock.now + self.p.client_ns;
        self.block(c, t, None);
        self.clock.push(at, Ev::RemoteWake(t));
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::quick;
    use crate::{simulate, Model, Pages, Params, Workload};

    #[test]
    fn txn_workload_counts_transactions_and_client_round_trips() {
        let run = |pages, model| {
            simulate(&Params {
                workload: Workload::Txn,
                model,
                pages,
                cpus: 4,
                workers: 64,
                duration_ns: 200_000_000,
                warmup_ns: 20_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        let a = run(Pages::P4k, Model::None);
        let tps = a.txn_per_s.expect("txn reports transactions");
        // Two allocations (lock operations) per transaction on average.
        let per_tx = a.ops_per_s / tps;
        assert!((per_tx - 2.0).abs() < 0.2, "{per_tx}");
        // 64 backends on 4 CPUs, ~0.93 ms of CPU per transaction: CPU-bound near 4 / 0.93 ms.
        assert!(tps > 2500.0 && tps < 4500.0, "{tps}");
        // In order pops by 64 backends: every block (8 per 64 KB fault-around group) is a first touch for
        // its backend on 4 KB pages, and one descriptor read in 16 (1,024 per group); on 2 MB pages a
        // backend maps each 2 MB page of blocks once per 256 buffers handed out.
        let b = run(Pages::P2m, Model::None);
        assert!(
            a.minflt_per_op > 1.0 && a.minflt_per_op < 1.2,
            "{}",
            a.minflt_per_op
        );
        assert!(b.minflt_per_op < a.minflt_per_op, "{}", b.minflt_per_op);
        assert!(
            a.hold_ns.p50 > b.hold_ns.p50,
            "faults under the lock on 4 KB pages"
        );
        // The lock workload has no transactions.
        assert!(quick(Model::None, Pages::P2m, 2, 4).txn_per_s.is_none());
        // Deterministic like the rest.
        assert_eq!(
            serde_json::to_string(&run(Pages::P4k, Model::Lazy)).unwrap(),
            serde_json::to_string(&run(Pages::P4k, Model::Lazy)).unwrap()
        );
    }
}
