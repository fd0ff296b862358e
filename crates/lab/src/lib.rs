//! The experiments: the benches' options, their runners on one matrix driver, `check`'s plan and
//! judgement, what a `bench lock` result gives the model. The guards they run under (the hugetlb pool,
//! the preemption model, worker processes) are `hostguard`'s; the stop flag, child processes, result
//! files read and written, /proc/stat and `which` are `osutil`'s; a result's envelope is
//! `hostfacts::envelope`'s.
//!
//! - `check`: `check`'s plan and reproduction (`plan`), the other load it sees first (`load`), its
//!   judgement: effects, fixes ranked by measured gain, the verdict, the document (`judge`).
//! - `latency`: `bench latency`, cyclictest-style wakeup latency under a background load: its options
//!   as given, checked and resolved into its spec (`options`), and its run (`run`).
//! - `lock`: `bench lock`, the StrategyGetBuffer-like workload, its options (`options`) and its matrix
//!   (`run`).
//! - `matrix`: the one matrix driver every bench runs on (cells x repetitions in rounds or cell by cell,
//!   the result file after each step, stop signals, skips, how an unfinished run is marked).
//! - `net`: `bench net`, TCP/UDP stream and ping-pong over loopback or a veth pair between namespaces:
//!   its options (`options`) and its run (`run`).
//! - `options`: what the benches' options share: lists, durations, counts, the host's shape, `OptionError`.
//! - `pg`: `bench pg`, the builds x shared_buffers x huge_pages x clients matrix over pgbench or sysbench
//!   (`run`; the clusters, pooler, drivers and /proc sampling are `pgharness`'), its options checked
//!   (setting names too) before any cluster exists (`options`), the huge-page side of a cell (`huge`), the
//!   builds axis (`builds`: bin directories and scripts/pg-build's cache, their manifests, the
//!   rseq-spinlock build's counters).

//! - `simrun`: `sim`'s options as given, resolved into the model's matrix, and its run (`options`), what
//!   `bench lock` result files give a `sim` run (`files`) and what a `bench lock` result gives the model
//!   (`from_lock`: its costs as parameters, its matrix as axes).

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod check;
pub mod latency;
pub mod lock;
pub mod matrix;
pub mod net;
pub mod options;
pub mod pg;
pub mod simrun;
