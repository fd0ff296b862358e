//! `line_fifo`: the lock's cache line as one server. In PostgreSQL 17 the lock word
//! (`buffer_strategy_lock`), the free-list head (`firstFreeBuffer`) and the allocation counter
//! (`numBufferAllocs`) share one line (`BufferStrategyControl`, src/backend/storage/buffer/freelist.c). The
//! line moves between caches one transfer (`spin_line_ns`, one line transfer unless set) at a time, and the
//! model serves its requests first come, first served:
//!
//! | request | who | writes |
//! |---|---|---|
//! | the add to `numBufferAllocs`, then the first test-and-set (`txn`; the `lock` workload has no add) | every arriving backend | yes |
//! | a re-read after a write | every running spinner | no |
//! | the release | the holder | yes (its CPU goes on: the store waits in its store buffer) |
//! | the herd's swaps: every spinner that re-reads the released word free tries `TAS` | every running spinner | yes |
//! | the new holder's read of the head, then its write of it after reading the head's descriptor | the holder | the write |
//!
//! Each write queues a re-read by every running spinner behind it (`TAS_SPIN` reads before it swaps,
//! src/include/storage/s_lock.h, so a spinner polls its own copy until the line is written). The holder's
//! read and write of the head and its release wait behind those re-reads, so a hold with n spinners costs
//! about 4n transfers more than without (the herd's n re-reads and n swaps before the new holder can read
//! the head, the failed swappers' n re-reads before it can write it, the n re-reads of that write before
//! the release), where the model without `line_fifo` charges one handover n transfers (`line_ns`). The
//! spinners' iteration clock stops until the mean spinner has its copy back after each write. A CPU that
//! holds the line alone (written last, nobody has read it since) reads and writes it without a transfer.
//!
//! Not modelled: an arriving backend's own wait for its add and test-and-set (it starts spinning at once;
//! the spinners it joins wait for their re-reads anyway).

use crate::sim::Sim;
use axes::model::{LockKind, Workload};

impl Sim {
    /// Whether the lock's line is served as a queue (`line_fifo`, for `pg` and `rseq`).
    pub(crate) fn line_fifo(&self) -> bool {
        self.p.line_fifo && matches!(self.p.lock, LockKind::Pg | LockKind::Rseq)
    }

    /// One transfer of the line, ns.
    fn line_transfer_ns(&self) -> u64 {
        self.p.spin_line_ns.unwrap_or(self.p.lock_transfer_ns)
    }

    /// CPU `c` asks for the line at `at` (now or later): served after every request queued before it, one
    /// transfer, unless `c` holds the line alone and nothing is queued. A write makes `c` the line's only
    /// holder and queues every running spinner's re-read behind it. Returns when the request is done.
    pub(crate) fn line_access(&mut self, c: u32, at: u64, writes: bool) -> u64 {
        let t = self.line_transfer_ns();
        let own = self.lock.line_excl_cpu == c && at >= self.lock.line_free_at_ns;
        let done = if own {
            at
        } else {
            self.lock.line_free_at_ns.max(at) + t
        };
        self.lock.line_free_at_ns = self.lock.line_free_at_ns.max(done);
        if writes {
            self.lock.line_excl_cpu = c;
            self.spinners_reread(done, 0);
        } else if !own {
            // Shared with whoever had it.
            self.lock.line_excl_cpu = u32::MAX;
        }
        done
    }

    /// The line was written at `at`: the running spinners' re-reads (less `skip` of them, who have their
    /// own requests queued) follow it one at a time, and their iteration clock stands still until the mean
    /// spinner has its copy back.
    fn spinners_reread(&mut self, at: u64, skip: u64) {
        let n = (self.lock.spinners.len() as u64).saturating_sub(skip);
        if n == 0 {
            return;
        }
        let t = self.line_transfer_ns();
        self.lock.line_excl_cpu = u32::MAX;
        let start = self.lock.line_free_at_ns.max(at);
        self.lock.line_free_at_ns = start + n * t;
        if self.counts_iterations() {
            self.tick_spin_clock();
            let mean = start + t * (n + 1) / 2;
            self.lock.line_busy_until_ns = self.lock.line_busy_until_ns.max(mean);
        }
    }

    /// A backend on `c` arrives for the lock: its add to the allocation counter (`txn`) and its first
    /// test-and-set, both writes. Returns when the test-and-set is done.
    pub(crate) fn line_arrive(&mut self, c: u32) -> u64 {
        let now = self.clock.now;
        let at = if self.p.workload == Workload::Txn {
            self.line_access(c, now, true)
        } else {
            now
        };
        self.line_access(c, at, true)
    }

    /// The holder releases with the running spinners waiting, one of whom (on `wc`, already out of
    /// the spinner list) wins: the release, every spinner's re-read, every spinner's swap (the winner's
    /// first), the winner's read of the head behind the other swaps, then the losers' re-reads. Returns
    /// when the winner has read the head.
    pub(crate) fn line_handover(&mut self, wc: u32) -> u64 {
        let now = self.clock.now;
        let t = self.line_transfer_ns();
        let losers = self.lock.spinners.len() as u64;
        let n = losers + 1;
        // The release, then the n re-reads (the winner's among them).
        let released = self.lock.line_free_at_ns.max(now) + t;
        let reads_done = released + n * t;
        // The n swaps; the winner's read of the head waits behind the others'.
        let swaps_done = reads_done + n * t;
        let head_read = swaps_done + if losers > 0 { t } else { 0 };
        self.lock.line_free_at_ns = head_read;
        if losers > 0 {
            // The losers re-read after their failed swaps; the clock stands still until then.
            self.spinners_reread(head_read, 0);
        } else {
            self.lock.line_excl_cpu = wc;
        }
        head_read
    }
}

#[cfg(test)]
mod tests {
    use crate::sim::Sim;
    use crate::simulate;
    use axes::model::{LockKind, Pages, Workload};
    use results::model::Params;

    fn machine(spinners: u32) -> Sim {
        let mut s = Sim::new(Params {
            cpus: 8,
            workers: 8,
            spin_ns: 10,
            spin_line_ns: Some(100),
            line_fifo: true,
            ..Params::default()
        });
        s.lock.holder = Some(0);
        s.clock.now = 1000;
        s.lock.spin_clock_at_ns = 1000;
        s.lock.line_free_at_ns = 1000;
        s.lock.spinners = (1..=spinners).collect();
        s
    }

    #[test]
    fn a_write_queues_every_spinners_reread_and_the_holder_waits_behind_them() {
        let mut s = machine(3);
        // Another CPU writes: one transfer, then three re-reads.
        assert_eq!(s.line_access(5, 1000, true), 1100);
        assert_eq!(s.lock.line_free_at_ns, 1400);
        // The mean spinner has its copy back after two of them.
        assert_eq!(s.lock.line_busy_until_ns, 1300);
        // The holder's write at 1200 waits for the re-reads, then queues three more.
        assert_eq!(s.line_access(0, 1200, true), 1500);
        assert_eq!(s.lock.line_free_at_ns, 1800);
        // Nobody spinning: the last writer writes again without a transfer.
        let mut s = machine(0);
        assert_eq!(s.line_access(2, 1000, true), 1100);
        assert_eq!(s.line_access(2, 1100, true), 1100);
        assert_eq!(s.line_access(3, 1100, false), 1200);
    }

    #[test]
    fn a_handover_costs_the_herd_about_two_transfers_per_spinner() {
        // Four spinners, one of whom wins: release 100, 4 re-reads, 4 swaps, the winner's read of the
        // head 100, then the three losers' re-reads.
        let mut s = machine(4);
        s.lock.spinners.retain(|&x| x != 4);
        assert_eq!(s.line_handover(4), 1000 + 100 + 400 + 400 + 100);
        assert_eq!(s.lock.line_free_at_ns, 2000 + 300);
        // Alone: release, re-read, swap; the winner then holds the line.
        let mut s = machine(1);
        s.lock.spinners.clear();
        assert_eq!(s.line_handover(1), 1300);
        assert_eq!(s.line_access(1, 1300, true), 1300);
    }

    #[test]
    fn the_queue_lengthens_holds_where_spinners_run_and_runs_deterministically() {
        let run = |line_fifo, lock| {
            simulate(&Params {
                cpus: 16,
                workers: 256,
                pages: Pages::P4k,
                lock,
                workload: Workload::Txn,
                stmt_ns: 20_000,
                spin_ns: 15,
                lock_transfer_ns: 45,
                line_fifo,
                duration_ns: 100_000_000,
                warmup_ns: 50_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        let (before, queued) = (run(false, LockKind::Pg), run(true, LockKind::Pg));
        assert!(before.cpu.spinning > 0.0, "the lock is contended");
        assert!(
            queued.hold_ns.p90 > before.hold_ns.p90,
            "hold p90 {} -> {}",
            before.hold_ns.p90,
            queued.hold_ns.p90
        );
        assert_eq!(
            serde_json::to_string(&run(true, LockKind::Pg)).unwrap(),
            serde_json::to_string(&queued).unwrap()
        );
        // Only `pg` and `rseq` poll the line: `futex` runs as without it, byte for byte.
        assert_eq!(
            serde_json::to_string(&run(true, LockKind::Futex)).unwrap(),
            serde_json::to_string(&run(false, LockKind::Futex)).unwrap()
        );
    }
}
