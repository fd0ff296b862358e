//! The `txn` workload: pgbench-like transactions of `txn_stmts` statements. A statement is a recv of the
//! client's statement, user work in chunks between `txn_allocs / txn_stmts` buffer allocations on
//! average (each the free-list pop under the lock, then the block's pread and first-touch fault outside
//! it), and a send of the result; then the backend sleeps for the client's part of the round trip
//! (`client_ns`) until a remote CPU wakes it.

use crate::event::Ev;
use crate::metrics::Count;
use crate::sim::Sim;
use crate::task::Phase;
use axes::model::Pages;
use results::model::BufferStrategy;

impl Sim {
    /// A chunk of statement work on `c` is done: the next allocation, or the send.
    pub(crate) fn txn_work_end(&mut self, c: u32, t: u32) {
        let task = &mut self.tasks[t as usize];
        if task.allocs_left > 0 {
            task.allocs_left -= 1;
            task.acquire_start = self.clock.now;
            match self.p.buffer_strategy {
                BufferStrategy::Freelist => self.try_lock(c, t),
                BufferStrategy::Clocksweep => self.sweep_tick(c, t),
            }
        } else {
            self.start_phase(c, t, Phase::Send);
        }
    }

    /// A recv (a statement starts: its allocations, one draw, and its work between them, after its first
    /// touches of the shared segment) or a block read on `c` is done: back to user work, or to the first
    /// touches' faults.
    pub(crate) fn txn_recv_or_read_end(&mut self, c: u32, t: u32, phase: Phase) {
        let mut touch_ns = 0;
        if phase == Phase::Recv {
            let m = self.p.txn_allocs.max(0.0) / self.p.txn_stmts.max(1) as f64;
            let extra = u32::from(self.rng.unit() < m.fract());
            let a = m.trunc() as u32 + extra;
            let stmt_ns = self.p.stmt_ns
                + match self.p.pages {
                    Pages::P4k => self.p.stmt_4k_ns,
                    Pages::P2m => 0,
                };
            let task = &mut self.tasks[t as usize];
            task.allocs_left = a;
            task.chunk_ns = stmt_ns / (a as u64 + 1);
            touch_ns = self.first_touch_ns(t);
        }
        let next = if touch_ns > 0 {
            Phase::Touch
        } else {
            Phase::Work
        };
        let task = &mut self.tasks[t as usize];
        task.touch_ns = touch_ns;
        task.phase = next;
        task.remaining = 0;
        if !self.return_to_user(c, true) {
            self.start_phase(c, t, next);
        }
    }

    /// The statement's first-touch faults on `c` are done: its user work, once the way back to user mode
    /// has checked for a reschedule.
    pub(crate) fn touch_end(&mut self, c: u32, t: u32) {
        let task = &mut self.tasks[t as usize];
        task.touch_ns = 0;
        task.phase = Phase::Work;
        task.remaining = 0;
        if !self.return_to_user(c, true) {
            self.start_phase(c, t, Phase::Work);
        }
    }

    /// `clocksweep` (PostgreSQL 19): `t` on `c` ticks the clock hand, an atomic add on the strategy
    /// line served in turn with the other backends' ticks (`lock_transfer_ns` each), then checks the
    /// victim's header; the victim comes in order, as the free list gave them, and its descriptor is read
    /// with no lock held.
    fn sweep_tick(&mut self, c: u32, t: u32) {
        let now = self.clock.now;
        let done = now.max(self.lock.tick_free_at) + self.p.lock_transfer_ns;
        self.lock.tick_free_at = done;
        let faults = self.descriptor_faults(t);
        self.metrics.acquired(now, done - now);
        let task = &mut self.tasks[t as usize];
        task.sweep_faults = faults;
        task.phase = Phase::Sweep;
        let d = done - now + self.cs_ns();
        self.run_segment(c, d);
    }

    /// The tick and the header check on `c` are done: the descriptor's fault, if it faults.
    pub(crate) fn sweep_end(&mut self, c: u32, t: u32) {
        if !std::mem::replace(&mut self.tasks[t as usize].sweep_faults, false) {
            self.sweep_done(c, t, false);
            return;
        }
        let d = self.start_descriptor_fault(t);
        self.tasks[t as usize].phase = Phase::SweepFault;
        self.run_segment(c, d);
    }

    /// `t` on `c` has its buffer: one operation; then the block's read (after a fault, once the way back to
    /// user mode has checked for a reschedule).
    pub(crate) fn sweep_done(&mut self, c: u32, t: u32, from_fault: bool) {
        if self.metrics.counts(self.clock.now) {
            self.tasks[t as usize].ops += 1;
        }
        self.metrics.count(Count::Op, self.clock.now);
        let task = &mut self.tasks[t as usize];
        task.phase = Phase::Read;
        task.remaining = 0;
        if !(from_fault && self.return_to_user(c, true)) {
            self.start_phase(c, t, Phase::Read);
        }
    }

    /// The send on `c` is done: the statement (maybe the transaction) ends, and the backend waits for the
    /// client's next statement; a pgbench thread on another CPU wakes it.
    pub(crate) fn txn_send_end(&mut self, c: u32, t: u32) {
        let now = self.clock.now;
        let stmts = self.p.txn_stmts.max(1);
        let task = &mut self.tasks[t as usize];
        task.stmts_left = task.stmts_left.saturating_sub(1);
        if task.stmts_left == 0 {
            task.stmts_left = stmts;
            self.metrics.count(Count::Txn, now);
        }
        task.phase = Phase::Recv;
        task.remaining = self.p.syscall_ns;
        if self.clients.is_empty() {
            let at = self.clock.now + self.p.client_ns;
            self.block(c, t, None);
            self.clock.push(at, Ev::RemoteWake(t));
        } else {
            self.result_sent(c, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::simulate;
    use crate::test_support::quick;
    use axes::model::{Model, Pages, Workload};
    use results::model::{BufferStrategy, Params};

    #[test]
    fn txn_workload_counts_transactions_and_client_round_trips() {
        // The allocations' faults alone (the first touches are `touch`'s tests).
        let run = |pages, model| {
            simulate(&Params {
                txn_first_touches: false,
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
        // 64 backends and 4 pgbench threads on 4 CPUs, ~0.5 ms of CPU per transaction: CPU-bound near
        // 4 / 0.5 ms.
        assert!(tps > 6500.0 && tps < 9500.0, "{tps}");
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

    #[test]
    fn a_statement_on_4k_pages_costs_stmt_4k_ns_more_and_on_2m_pages_nothing() {
        let run = |pages, stmt_4k_ns| {
            simulate(&Params {
                workload: Workload::Txn,
                model: Model::None,
                pages,
                cpus: 4,
                workers: 64,
                stmt_4k_ns,
                duration_ns: 200_000_000,
                warmup_ns: 20_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        // CPU-bound: a statement twice as dear on 4 KB pages (82 + 82 us, against ~100 us of other CPU per
        // transaction) brings the transactions down to about 0.55 of what they were.
        let (cheap, dear) = (run(Pages::P4k, 0), run(Pages::P4k, 82_000));
        let r = dear.txn_per_s.unwrap() / cheap.txn_per_s.unwrap();
        assert!(r > 0.45 && r < 0.65, "{r}");
        assert!(dear.cpu.useful > cheap.cpu.useful);
        // Huge pages: the same run, byte for byte.
        assert_eq!(
            serde_json::to_string(&run(Pages::P2m, 0)).unwrap(),
            serde_json::to_string(&run(Pages::P2m, 82_000)).unwrap()
        );
    }

    #[test]
    fn the_clock_sweep_allocates_without_the_lock() {
        let run = |buffer_strategy| {
            simulate(&Params {
                workload: Workload::Txn,
                model: Model::Lazy,
                pages: Pages::P4k,
                cpus: 8,
                workers: 128,
                buffer_strategy,
                duration_ns: 200_000_000,
                warmup_ns: 50_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        let (pg18, pg19) = (
            run(BufferStrategy::Freelist),
            run(BufferStrategy::Clocksweep),
        );
        // The same two allocations per transaction, no hold at all, nobody spinning or preempted holding.
        let per_tx = pg19.ops_per_s / pg19.txn_per_s.unwrap();
        assert!((per_tx - 2.0).abs() < 0.2, "{per_tx}");
        assert_eq!((pg19.hold_ns.p50, pg19.lhp_per_s), (0, 0.0));
        assert_eq!(pg19.cpu.spinning, 0.0);
        assert!(pg18.hold_ns.p50 > 0);
        // The descriptor faults still happen, outside any lock.
        assert!(pg19.cpu.faults > 0.0);
        // No slower: at 8 CPUs both are CPU-bound (the free list's waiters spin on their own copy of the
        // line), so within noise of each other.
        assert!(
            pg19.txn_per_s.unwrap() >= 0.99 * pg18.txn_per_s.unwrap(),
            "{:?} {:?}",
            pg18.txn_per_s,
            pg19.txn_per_s
        );
    }

    #[test]
    fn a_shared_descriptor_fault_pulls_each_page_line_from_the_cpu_before() {
        let run = |lock_transfer_ns| {
            simulate(&Params {
                workload: Workload::Txn,
                pages: Pages::P4k,
                cpus: 4,
                workers: 64,
                lock_transfer_ns,
                spin_line_ns: Some(0),
                line_ns: Some(0),
                duration_ns: 100_000_000,
                warmup_ns: 20_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        // Holds that fault (the p99 of the hold) grow by the 16 pages' line transfers.
        let (near, far) = (run(0), run(100));
        let grew = far.hold_ns.p99 as f64 - near.hold_ns.p99 as f64;
        assert!(
            (grew - 1600.0).abs() < 200.0,
            "{} -> {}",
            near.hold_ns.p99,
            far.hold_ns.p99
        );
    }
}
