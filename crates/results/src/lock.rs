//! `bench lock`: the StrategyGetBuffer-like workload's spec, repetitions, cells and result file.

use axes::{Backing, Count, LockKind, ReconnectGiven, StartAge};
use serde::{Deserialize, Serialize};
use stats::{Percentiles, Summary};

// The costs `bench lock` measures before its cells are the model's record of them
// (`results::model::Costs`), so the bench writes what `sim --costs-from` reads.
use crate::model::Costs;
use crate::{Envelope, Status};

/// The whole experiment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Spec {
    /// Locks to compare.
    pub locks: Vec<LockKind>,
    /// Page backings.
    pub pages: Vec<Backing>,
    /// Worker counts as given (`8`, `4x`).
    pub workers_given: Vec<Count>,
    /// Worker counts resolved against the CPU count.
    pub workers: Vec<u32>,
    /// Measured seconds per repetition.
    pub duration_s: f64,
    /// Warm-up seconds per repetition (not measured).
    pub warmup_s: f64,
    /// Repetitions per cell.
    pub repeat: u32,
    /// Buffer descriptors (64 bytes each).
    pub descriptors: u64,
    /// Busy work inside the critical section, ns.
    pub cs_ns: u64,
    /// Busy work outside the lock per operation, ns.
    pub work_ns: u64,
    /// Replace a worker process after this many operations (fresh page tables), if set.
    pub reconnect_every: Option<u64>,
    /// `--reconnect-every` as given (`auto`, `none` or a number).
    pub reconnect_every_given: ReconnectGiven,
    /// Threads instead of processes.
    pub threads: bool,
    /// Touch the descriptor at the free-list head before acquiring (moves its fault out of the lock).
    pub prefetch_next: bool,
    /// With `reconnect_every`: the first workers of a repetition start at random ages, uniform over a life
    /// (`uniform`), or all new together (`young`, and what results without the field did). See
    /// `lab::lock::workload::start_age`.
    #[serde(default = "young")]
    pub start_age: StartAge,
    /// Seed of the free-list permutation and the workers' RNGs.
    pub seed: u64,
}

/// The correctness check of one repetition.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Check {
    /// The counter bumped under the lock.
    pub counter: u64,
    /// Operations the workers counted (warm-up included).
    pub ops_counted: u64,
    /// Descriptors popped from the free list.
    pub popped: u64,
    /// Descriptors still on the free list, found by walking it.
    pub free_list_len: u64,
    /// Descriptors marked as not on the list.
    pub marked_not_in_list: u64,
    /// True when counter == ops_counted and the list is a consistent permutation.
    pub ok: bool,
}

/// One repetition's measurements (raw samples of the result file).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Rep {
    /// Operations in the measured window.
    pub ops: u64,
    /// Measured wall time, s.
    pub elapsed_s: f64,
    /// Throughput.
    pub ops_per_s: f64,
    /// Wait to acquire, ns.
    pub acquire_ns: Percentiles,
    /// Time holding the lock, ns.
    pub hold_ns: Percentiles,
    /// Acquire-latency CDF points `[ns, quantile]` for plots.
    pub acquire_cdf: Vec<[f64; 2]>,
    /// Holds longer than 100 µs.
    pub stalled_holds: u64,
    /// Stalled holds per million operations.
    pub stalled_per_mop: f64,
    /// Minor faults per operation (the workers touch shared memory only under the lock, so these are faults
    /// under the lock).
    pub minflt_per_op: f64,
    /// Voluntary context switches per operation.
    pub vcsw_per_op: f64,
    /// Involuntary context switches (preemptions) per operation.
    pub ivcsw_per_op: f64,
    /// User CPU per operation, ns.
    pub user_ns_per_op: f64,
    /// System CPU per operation, ns.
    pub sys_ns_per_op: f64,
    /// Total CPU per operation, ns.
    pub cpu_ns_per_op: f64,
    /// Sleeps (pg_usleep or futex waits) per operation.
    pub sleeps_per_op: f64,
    /// Spin iterations per operation.
    pub spins_per_op: f64,
    /// Jain's fairness index over per-worker operations.
    pub jain: f64,
    /// Operations per worker slot.
    pub worker_ops: Vec<u64>,
    /// Fraction of operations that popped the free list (the rest were clock-sweep steps).
    pub free_list_fraction: f64,
    /// Worker processes replaced by `--reconnect-every`.
    pub respawns: u64,
    /// CPU time the hypervisor stole from this machine during the repetition, % of all CPU time (from
    /// /proc/stat; null when unreadable). A noisy neighbour shows here.
    pub steal_pct: Option<f64>,
    /// CPU time the whole machine spent idle (idle + iowait in /proc/stat) during the measured window, % of
    /// all CPU time (null when unreadable, and in results written before it was recorded). A lock whose
    /// waiters sleep leaves CPUs idle that a spinning lock keeps busy: at equal throughput that alone sets
    /// their CPU per operation apart.
    #[serde(default)]
    pub idle_pct: Option<f64>,
    /// Rescheduling interrupts the machine's CPUs took in the measured window, per operation (all CPUs and
    /// every task's, from /proc/interrupts: the bench expects an otherwise idle host). A wakeup that should
    /// preempt a task running on another CPU sends one under `none`, `voluntary` and `full` and only sets
    /// the lazy flag under `lazy`. Null where the kernel prints no such row or /proc/interrupts cannot be
    /// read, in a window without operations, and in results written before 2026-11-27. Reading the file
    /// twice takes 0.2 ms on two CPUs (87 us a read) and more with more CPUs and interrupt lines.
    #[serde(default)]
    pub resched_ipis_per_op: Option<f64>,
    /// Function call interrupts the machine's CPUs took in the measured window, per operation (as above).
    #[serde(default)]
    pub call_ipis_per_op: Option<f64>,
    /// What the rseq time-slice extension did in the measured window, summed over the workers (null for
    /// locks that do not request it, and in results written before it was recorded).
    #[serde(default)]
    pub rseq_slice: Option<RseqSlice>,
    /// Correctness.
    pub check: Check,
}

/// The rseq time-slice extension's outcomes over a measured window.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct RseqSlice {
    /// Critical sections entered with an extension request.
    pub requests: u64,
    /// Critical sections left with the kernel's grant set: it extended the slice instead of preempting.
    pub grants: u64,
    /// `rseq_slice_yield` calls that gave the CPU back within the grant.
    pub yields: u64,
    /// Critical sections left with the request cleared and no grant (scheduled out, or grant revoked).
    pub cleared: u64,
}

impl RseqSlice {
    /// The sum of two windows' counts (workers of one repetition).
    pub fn plus(self, o: RseqSlice) -> RseqSlice {
        RseqSlice {
            requests: self.requests + o.requests,
            grants: self.grants + o.grants,
            yields: self.yields + o.yields,
            cleared: self.cleared + o.cleared,
        }
    }
}

fn young() -> StartAge {
    StartAge::Young
}

/// Centres and spreads over a cell's repetitions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellSummary {
    /// Throughput, ops/s (harmonic mean is the centre for rates).
    pub ops_per_s: Summary,
    /// p99 acquire latency, ns.
    pub acquire_p99_ns: Summary,
    /// p99 hold time, ns.
    pub hold_p99_ns: Summary,
    /// Stalled holds per million operations.
    pub stalled_per_mop: Summary,
    /// Minor faults (under the lock) per operation.
    pub minflt_per_op: Summary,
    /// CPU time per operation, ns.
    pub cpu_ns_per_op: Summary,
    /// Involuntary context switches per operation.
    pub ivcsw_per_op: Summary,
    /// Jain's fairness index.
    pub jain: Summary,
    /// Sleeps per operation.
    pub sleeps_per_op: Summary,
    /// The throughput the faults under the lock allow, if they were all that serialized:
    /// 1e9 / (faults per op x measured ns per fault). Only where faults occur.
    pub fault_ceiling_ops_per_s: Option<f64>,
    /// The throughput the lock's serial section allows: 1e9 / mean hold ns (median over repetitions).
    /// Everything done while holding, faults and page walks included, is serialized.
    pub hold_ceiling_ops_per_s: f64,
    /// The throughput the CPUs allow: CPUs x 1e9 / CPU ns per operation (median).
    pub cpu_ceiling_ops_per_s: f64,
}

/// One cell of the matrix.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cell {
    /// Lock.
    pub lock: LockKind,
    /// Page backing.
    pub pages: Backing,
    /// Workers.
    pub workers: u32,
    /// The preemption model it ran under, when the run switched between models (`--switch-preempt
    /// none,lazy`); otherwise absent, and the model is the host's (`host.kernel.preemption`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempt: Option<axes::model::Model>,
    /// Ran, skipped, failed, or interrupted.
    pub status: Status,
    /// Why it was skipped or failed.
    pub reason: Option<String>,
    /// Every repetition's raw measurements.
    pub reps: Vec<Rep>,
    /// Summary over the repetitions.
    pub summary: Option<CellSummary>,
}

/// The cost of one first-touch minor fault on a populated shared page, measured in a fresh process.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FaultCost {
    /// Mean ns per fault (4 KB pages already in the page cache, as in the bench).
    pub ns_per_fault: f64,
    /// Faults timed.
    pub faults: u64,
}

/// A `bench lock` result file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LockResult {
    /// Tool, command line, time, host.
    #[serde(flatten)]
    pub envelope: Envelope,
    /// The experiment.
    pub spec: Spec,
    /// The fault cost behind the ceiling.
    pub fault_cost: Option<FaultCost>,
    /// Kernel and lock costs measured before the cells, the ones `sim --costs-from` takes (null in results
    /// written before they were recorded).
    #[serde(default)]
    pub costs: Option<Costs>,
    /// The cells, in run order.
    pub cells: Vec<Cell>,
    /// Free huge pages a run without `--reserve-hugepages` counted on, per hugetlb backing, as seen before
    /// the cells (another user of the pool can take them during the run; empty when the run reserved its
    /// pages or used none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hugetlb_free_seen: Vec<FreeSeen>,
}

/// The free pages of one hugetlb pool as a run that did not reserve them saw them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FreeSeen {
    /// The pool's page size.
    pub page_kib: u64,
    /// Free pages in it (`free_hugepages`) before the cells.
    pub free_pages: u64,
    /// Pages the run needed from it.
    pub needed_pages: u64,
}

#[cfg(test)]
mod tests {
    use crate::Document;

    /// A result written before `costs` was recorded loads, with none; one with them keeps them.
    #[test]
    fn costs_are_optional_and_round_trip() {
        let old = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/results/bench-lock-ceiling-immortal.json"
        ))
        .unwrap();
        assert!(!old.contains("\"costs\""));
        let Ok(Document::Lock(mut r)) = Document::from_text(&old) else {
            panic!("an old bench-lock result loads");
        };
        assert_eq!(r.costs, None);
        assert!(r.fault_cost.is_some());
        r.costs = Some(super::Costs {
            spin_ns: 17.0,
            syscall_ns: 84.5,
            switch_half_round_trip_ns: 1073.5,
            futex_wake_nobody_ns: 141.3,
            futex_wake_remote_ns: None,
            fault_4k_read_ns: Some(2500.0),
            fault_2m_map_ns: Some(2410.0),
            line_transfer_ns: Some(48.0),
            line_transfer_p10_ns: Some(41.0),
            line_transfer_p90_ns: Some(66.0),
            line_crowd: vec![crate::model::LineCrowd {
                spinners: 1,
                handover_ns: 75.0,
                handover_p10_ns: 70.0,
                handover_p90_ns: 90.0,
                write_stall_ns: 40.0,
                write_stall_p10_ns: 31.0,
                write_stall_p90_ns: 52.0,
                cores: Some(2),
            }],
        });
        let text = serde_json::to_string(&r).unwrap();
        let Ok(Document::Lock(back)) = Document::from_text(&text) else {
            panic!("a result with costs loads");
        };
        assert_eq!(back, r);
    }
}
