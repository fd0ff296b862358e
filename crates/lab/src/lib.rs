//! The experiments: the benches' options, their runners on one matrix driver, `check`'s plan and
//! judgement, what a `bench lock` result gives the model. The guards they run under (the hugetlb pool,
//! the preemption model, worker processes) are `hostguard`'s; the stop flag, child processes, result
//! files, /proc/stat and `which` are `osutil`'s.
//!
//! - `check`: `check`'s plan (which locks, which huge-page backing) and its reproduction.
//! - `files`: input files: `*.json` found in the paths given, read on every CPU, result documents loaded.
//! - `from_lock`: what a `bench lock` result gives the model (its costs as parameters, its matrix as axes).
//! - `judge`: `check`'s judgement: effects, fixes ranked by measured gain, the verdict, the document.
//! - `latency`: `bench latency`, cyclictest-style wakeup latency under a background load.
//! - `load`: the other load `check` sees before it measures (instances, others' CPU share).
//! - `latopts`: `bench latency`'s options as given, checked and resolved into its spec.
//! - `lockbench`: `bench lock`, the StrategyGetBuffer-like workload.
//! - `lockopts`: `bench lock`'s options as given, checked and resolved into its spec.
//! - `net`: `bench net`, TCP/UDP stream and ping-pong over loopback or a veth pair between namespaces.
//! - `matrix`: the one matrix driver every bench runs on (cells x repetitions in rounds or cell by cell,
//!   the result file after each step, stop signals, skips, how an unfinished run is marked).
//! - `netopts`: `bench net`'s options as given, checked and resolved into its spec.
//! - `options`: what the benches' options share: lists, durations, counts, the host's shape, `OptionError`.
//! - `pgrun`: `bench pg`, the builds x shared_buffers x huge_pages x clients matrix over pgbench or sysbench (the
//!   clusters, pooler, drivers and /proc sampling are `pgharness`').
//! - `pgopts`: `bench pg`'s options as given, checked (setting names too) before any cluster exists.
//! - `pgbuild`: the builds axis of `bench pg` (bin directories and scripts/pg-build's cache, their
//!   manifests) and the rseq-spinlock build's counters.
//! - `rusage`: the one getrusage wrapper (hostfacts', re-exported).
//! - `simfrom`: what `bench lock` result files give a `sim` run (their matrix, their measured costs).
//! - `simopts`: `sim`'s options as given, resolved into the model's matrix, and its run.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod check;
pub mod files;
pub mod from_lock;
pub mod judge;
pub mod latency;
pub mod latopts;
pub mod load;
pub mod lockbench;
pub mod lockopts;
pub mod lockrun;
pub mod matrix;
pub mod net;
pub mod netopts;
pub mod options;
pub mod pgbuild;
mod pghuge;
pub mod pgopts;
pub mod pgrun;
pub mod result;
pub use hostfacts::rusage;
pub mod simfrom;
pub mod simopts;
