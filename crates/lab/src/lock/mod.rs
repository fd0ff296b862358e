//! `bench lock`: process-shared lock contention on a buffer-pool free list in shared memory.
//!
//! The workload is modelled on PostgreSQL's `StrategyGetBuffer` (PG 9.5-18, `freelist.c`): a control block
//! (lock, free-list head, clock hand) and an array of 64-byte buffer descriptors. The free list is a random
//! permutation of the descriptors, linked through `free_next`, initialized by the parent (as the postmaster
//! initializes shared buffers). One operation:
//!
//! 1. take the lock (`acquire_ns` is the wait);
//! 2. pop the free-list head: read the descriptor it names (a random one: on 4 KB pages, the first touch
//!    of its page in this process is a minor fault, taken while holding the lock), unlink it; when the list
//!    is empty, one clock-sweep step instead;
//! 3. optionally spin `cs_ns` more inside, then release (`hold_ns` runs from 1 to here);
//! 4. work `work_ns` outside the lock.
//!
//! A hold above 100 µs is a *stalled hold*: the holder was descheduled (or stuck in the kernel) while
//! holding. Correctness is checked on every run: a plain counter bumped under the lock must equal the
//! operations the workers counted, and the free list must still be a consistent permutation.

//!
//! The modules: [`costs`] (the kernel and lock costs the model takes, measured before the cells, with
//! [`crowd`], the lock's line under crowds of spinners), [`layout`] (the region: lock area, control block, slots, descriptors and the free list
//! through them), [`workload`] (what one operation does), `worker` (the loop a process or thread runs and
//! its report) and `rep` (one repetition: start, phase, reap, check, sum). The matrix of cells and
//! repetitions is [`run`]; forking and reaping go through `hostguard::workers`.

pub mod costs;
pub mod crowd;
pub mod layout;
pub mod options;
mod rep;
pub mod run;
mod worker;
pub mod workload;

pub use layout::{new_region, region_bytes};
pub use rep::{run_rep, RepInput};
use results::lock::{Check, Rep, RseqSlice, Spec};
use stats::Percentiles;
pub use workload::{auto_reconnect_every, default_descriptors, start_age, STALL_NS};

/// Errors of a repetition.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// SIGINT/SIGTERM.
    #[error("interrupted")]
    Interrupted,
    /// The repetition failed: the cell's failure reason, as the result records it (a worker's own report,
    /// a broken exclusion check, a worker that would not stop), in words.
    #[error("{0}")]
    Failed(String),
}

fn failed(s: impl Into<String>) -> BenchError {
    BenchError::Failed(s.into())
}
