//! A discrete-event model of `bench lock` on a machine of any size: C CPUs with per-CPU run queues, a tick,
//! fair-class slices and wakeup preemption, the four preemption models (docs/references.md#preempt-semantics), page faults
//! taken inside the critical section, and the locks `pg` (s_lock's spin-then-sleep with adaptive
//! spins_per_delay), `futex` (three-state mutex), `rseq` (`pg` whose holder asks for a time-slice
//! extension) and `adaptive` (the shmlock crate's lock). `Workload::Txn` runs pgbench-like transactions
//! instead: statements that each wait for a client on another CPU, with buffer allocations (the pop, then
//! a pread and a first touch outside the lock).
//!
//! Pure and deterministic: integer-nanosecond clock, one event heap ordered by (time, sequence), one seeded
//! RNG; the same parameters give the same result, byte for byte. docs/model.md explains the model, its
//! assumptions and where it is known to be wrong.
//!
//! | module | concept |
//! |---|---|
//! | [`params`] | the choices and parameters, grouped by concern, and their validation |
//! | [`costs`] | costs measured by `bench lock` and the parameters they set |
//! | `event`, `clock`, `rng` | what can happen; virtual time and the event heap; the seeded RNG |
//! | `sim` | the model's state, the event loop, the dispatch of a phase's end |
//! | `task` | a worker process and its phases |
//! | `sched` | run queues, wakeups, the tick, slices, and where each preemption model reschedules |
//! | `eevdf` | the fair class's pick, placement, lag, delayed dequeue and wakeup preemption (fair.c) |
//! | `lock` (`pg`, `futex`, `rseq`, `adaptive`) | acquisition and release; each algorithm's rules |
//! | `memory` | the descriptor array, page faults and zeroing, the fault-path hypothesis |
//! | `workload` (`lock`, `txn`) | what the workers do between acquisitions |
//! | [`matrix`] | the model over CPUs x workers x pages x locks x models (x a swept parameter), seeds per run |
//! | [`metrics`] | counters, histograms, CPU-time accounts and the [`Outcome`] |
//! | [`trace`] | the scheduler's diagnostics on request (holders off their CPU, run queues, wakeups), outside the result |

mod clock;
pub mod costs;
mod eevdf;
mod event;
mod lock;
pub mod matrix;
mod memory;
pub mod metrics;
pub mod params;
mod rng;
mod sched;
mod sim;
mod task;
mod touch;
pub mod trace;
mod workload;

pub use lock::ADAPTIVE_SLOTS;
pub use params::{validate, Invalid};
pub use sched::base_slice_ns;
pub use trace::{simulate_traced, SchedTrace};

use results::model::{Outcome, Params};

/// Runs the model.
pub fn simulate(p: &Params) -> Result<Outcome, Invalid> {
    validate(p)?;
    Ok(sim::Sim::new(p.clone()).run())
}

#[cfg(test)]
mod test_support {
    use crate::simulate;
    use axes::model::{Model, Pages, Workload};
    use results::model::{Outcome, Params};

    /// The April 2026 report's host and workload as docs/model-calibration.md ("The reported host") runs them: 96
    /// CPUs, 1,024 backends, pgbench-like transactions, the sourced or measured costs there (a 45 ns line
    /// transfer, a 2.5 us fault-around fault, a 15 ns spin iteration), `ms` of measured virtual time after
    /// 300 ms of warm-up.
    pub(crate) fn reported_host(model: Model, pages: Pages, ms: u64) -> Params {
        Params {
            cpus: 96,
            workers: 1024,
            workload: Workload::Txn,
            model,
            pages,
            lock_transfer_ns: 45,
            fault_4k_ns: 2500,
            spin_ns: 15,
            duration_ns: ms * 1_000_000,
            // The spinning takes a few hundred ms of virtual time to settle.
            warmup_ns: 300_000_000,
            ..Params::default()
        }
    }

    /// A short run of the defaults with these choices.
    pub(crate) fn quick(model: Model, pages: Pages, cpus: u32, workers: u32) -> Outcome {
        simulate(&Params {
            model,
            pages,
            cpus,
            workers,
            duration_ns: 200_000_000,
            warmup_ns: 20_000_000,
            ..Params::default()
        })
        .unwrap()
    }
}
