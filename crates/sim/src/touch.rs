//! `txn`: every backend's first touches of the shared segment (docs/model.md, "First touches per backend").
//! Page tables are per process, so a backend faults the first time it touches a fault group (a 64 KB
//! fault-around group on 4 KB pages, a 2 MB page on huge pages) it has not mapped, wherever that group is:
//! the block of a cached buffer, an index inner page, a descriptor, the buffer-mapping hash table, the WAL
//! buffers. Each touch is a first touch with the probability that the backend has not mapped the group yet
//! (one draw), and a first touch maps one more group. The allocations' own faults (the free list's head
//! descriptor under the lock, the new block after it) stay in `memory`.
//!
//! The touches are pgbench simple-update's at scale 8,470: the UPDATE reads an inner page, a leaf and a
//! heap page (the SELECT reads the same ones again), the INSERT the history's tail page, and the records go
//! through the WAL buffers; each buffer read is a hash lookup (a bucket, an element), a pin (the descriptor)
//! and the block.

use crate::memory::{map_fault_ns, HUGE};
use crate::metrics::Count;
use crate::sim::Sim;
use axes::model::Pages;
use results::model::Params;

/// The structures a transaction touches besides its allocations.
pub(crate) const STRUCTURES: usize = 6;

/// The accounts index's inner pages below its top levels at scale 8,470 (docs/model-calibration.md, "The free list's
/// life": ~8,200 inner pages over 2.31 million leaves).
const INNER_PAGES: u64 = 8_200;

/// A block, bytes (BLCKSZ).
const BLOCK: u64 = 8192;

/// The segment's structures: groups per structure and touches per transaction.
pub(crate) struct Touches {
    /// Fault groups of each structure.
    pub(crate) groups: [u64; STRUCTURES],
    /// Touches of each per transaction.
    pub(crate) per_tx: [f64; STRUCTURES],
}

impl Touches {
    /// The structures of a run of `p` (NBuffers = `descriptors`): the pool's blocks, the inner pages,
    /// the descriptors, the hash table's buckets (2^ceil(log2(NBuffers + 128)) pointers) and elements
    /// (40 bytes: a 16-byte element header, the 20-byte tag and the buffer id, aligned), the WAL buffers
    /// (NBuffers / 32 blocks, at most a 16 MB segment; first touched by a write, which maps one page).
    pub(crate) fn new(p: &Params) -> Touches {
        let n = p.descriptors;
        let buckets = (n + 128).next_power_of_two() * 8;
        let wal = (n / 32).min(2048) * BLOCK;
        let (group, wal_group) = match p.pages {
            Pages::P4k => (p.fault_around_pages.max(1) * 4096, 4096),
            Pages::P2m => (HUGE, HUGE),
        };
        let g = |bytes: u64, per: u64| (bytes / per).max(1);
        let blocks = g(n * BLOCK, group);
        // Hits: the leaf and the heap page when they are cached (a miss is an allocation).
        let hits = 2.0 - p.txn_allocs.clamp(0.0, 2.0);
        Touches {
            groups: [
                blocks,
                INNER_PAGES.min(blocks),
                g(n * 64, group),
                g(buckets, group),
                g(n * 40, group),
                g(wal, wal_group),
            ],
            per_tx: [1.0 + hits, 1.0, 2.0 + hits, 4.0, 4.0, 2.0],
        }
    }

    /// What a backend that has run `txns` transactions has mapped of each structure: about
    /// G (1 - e^(-d txns / G)) of its G groups at d touches a transaction.
    pub(crate) fn mapped_after(&self, txns: u64) -> [u64; STRUCTURES] {
        std::array::from_fn(|s| {
            let (g, d) = (self.groups[s] as f64, self.per_tx[s]);
            ((g * (1.0 - (-d * txns as f64 / g).exp())).round() as u64).min(self.groups[s])
        })
    }
}

impl Sim {
    /// `t` starts a statement: its share of the transaction's touches (`per_tx / txn_stmts` of each
    /// structure, the fraction by one draw), each a first touch with the probability that `t` has not
    /// mapped the group; returns the faults' time, ns (0 without `txn_first_touches`, with no draw).
    pub(crate) fn first_touch_ns(&mut self, t: u32) -> u64 {
        if !self.p.txn_first_touches {
            return 0;
        }
        let stmts = self.p.txn_stmts.max(1) as f64;
        let mut faults = 0u64;
        for s in 0..STRUCTURES {
            let m = self.mem.touches.per_tx[s] / stmts;
            let extra = m.fract() > 0.0 && self.rng.unit() < m.fract();
            let n = m.trunc() as u64 + u64::from(extra);
            let g = self.mem.touches.groups[s];
            for _ in 0..n {
                let mapped = self.tasks[t as usize].mapped[s];
                if mapped < g && self.rng.unit() * (g as f64) >= mapped as f64 {
                    self.tasks[t as usize].mapped[s] += 1;
                    faults += 1;
                }
            }
        }
        for _ in 0..faults {
            self.metrics.count(Count::Fault, self.clock.now);
        }
        faults * map_fault_ns(&self.p)
    }
}

#[cfg(test)]
mod tests {
    use super::Touches;
    use crate::{simulate, simulate_traced};
    use axes::model::{Model, Pages, Workload};
    use results::model::Params;

    fn run(pages: Pages, model: Model, first: bool, txns: u64) -> Params {
        Params {
            workload: Workload::Txn,
            model,
            pages,
            cpus: 4,
            workers: 64,
            txn_first_touches: first,
            txn_backend_txns: txns,
            duration_ns: 200_000_000,
            warmup_ns: 20_000_000,
            ..Params::default()
        }
    }

    #[test]
    fn on_by_default_and_off_in_a_result_file_written_before_it() {
        assert!(Params::default().txn_first_touches);
        let mut old = serde_json::to_value(Params::default()).unwrap();
        old.as_object_mut().unwrap().remove("txn_first_touches");
        let p: Params = serde_json::from_value(old).unwrap();
        assert!(!p.txn_first_touches);
    }

    #[test]
    fn the_reported_pools_structures_have_the_documented_groups() {
        let p = Params {
            descriptors: 15_728_640,
            ..Params::default()
        };
        let t = Touches::new(&p);
        assert_eq!(t.groups, [1_966_080, 8_200, 15_360, 2_048, 9_600, 4_096]);
        let h = Touches::new(&Params {
            pages: Pages::P2m,
            ..p
        });
        assert_eq!(h.groups, [61_440, 8_200, 480, 64, 300, 8]);
        // After 117,000 transactions a backend has mapped all of the small structures and 6% of the pool
        // (at two allocations a transaction its block touches are the history's only).
        let m = t.mapped_after(117_000);
        assert_eq!(&m[1..], &t.groups[1..]);
        assert!(
            (m[0] as f64 / t.groups[0] as f64 - 0.058).abs() < 0.01,
            "{m:?}"
        );
    }

    #[test]
    fn fresh_backends_fault_about_thirteen_times_a_transaction_more_on_4k_pages() {
        // 64 backends on 4 CPUs run ~25 transactions each in the window: nearly every touch of a
        // structure is a first touch, 1 + 1 + 2 + 4 + 4 + 2 = 14 touches, of which the hash buckets'
        // (4,096 groups here) are the first to be mapped.
        let (off, on) = (
            simulate(&run(Pages::P4k, Model::None, false, 0)).unwrap(),
            simulate(&run(Pages::P4k, Model::None, true, 0)).unwrap(),
        );
        let per_tx =
            |o: &results::model::Outcome| o.minflt_per_op * o.ops_per_s / o.txn_per_s.unwrap();
        let more = per_tx(&on) - per_tx(&off);
        assert!(more > 12.5 && more < 14.5, "{more}");
        assert!(on.cpu.faults > off.cpu.faults);
        assert!(on.txn_per_s < off.txn_per_s);
        // Old backends have mapped the small structures: only the pool's blocks still fault, the history's
        // page with the probability e^(-1,000,000 / 2,097,152) = 0.62 that its group is still unmapped.
        let old = simulate(&run(Pages::P4k, Model::None, true, 1_000_000)).unwrap();
        let more_old = per_tx(&old) - per_tx(&off);
        assert!(more_old > 0.5 && more_old < 0.75, "{more_old}");
        // Huge pages: fewer first touches (the small structures are a few hundred 2 MB pages, mapped within
        // a few dozen transactions), each cheaper, and the same bytes for the same seed.
        let huge = simulate(&run(Pages::P2m, Model::None, true, 0)).unwrap();
        let huge_off = simulate(&run(Pages::P2m, Model::None, false, 0)).unwrap();
        let more_huge = per_tx(&huge) - per_tx(&huge_off);
        assert!(more_huge > 1.0 && more_huge < more, "{more_huge}");
        assert_eq!(
            serde_json::to_string(&huge).unwrap(),
            serde_json::to_string(&simulate(&run(Pages::P2m, Model::None, true, 0)).unwrap())
                .unwrap()
        );
    }

    #[test]
    fn a_backend_in_a_first_touch_fault_is_preempted_in_the_kernel_only_where_the_model_allows() {
        // The reported host: a reschedule pending while a backend is inside its faults is honoured there
        // by `full` only (`lazy` only once the tick upgrades it, and a backend returns to user mode, where
        // every model reschedules, at every statement's syscalls).
        let traced = |model| {
            simulate_traced(&crate::test_support::reported_host(model, Pages::P4k, 300))
                .unwrap()
                .1
        };
        assert_eq!(traced(Model::None).touch_preemptions, 0);
        assert!(traced(Model::Full).touch_preemptions > 0);
    }
}
