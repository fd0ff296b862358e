//! Experiments and the host-state guards they run under.
//!
//! - `check`: `check`'s plan (which locks, which huge-page backing) and its reproduction.
//! - `files`: input files: `*.json` found in the paths given, read on every CPU, result documents loaded.
//! - `fork`: forking worker processes, reaping them, killing the ones left on drop.
//! - `guard`: the hugetlb pool and preemption-model guards with crash records (the stop flag, child
//!   processes, result files, /proc/stat and `which` are `osutil`'s).
//! - `from_lock`: what a `bench lock` result gives the model (its costs as parameters, its matrix as axes).
//! - `judge`: `check`'s judgement: effects, fixes ranked by measured gain, the verdict, the document.
//! - `latency`: `bench latency`, cyclictest-style wakeup latency under a background load.
//! - `latopts`: `bench latency`'s options as given, checked and resolved into its spec.
//! - `lockbench`: `bench lock`, the StrategyGetBuffer-like workload.
//! - `lockopts`: `bench lock`'s options as given, checked and resolved into its spec.
//! - `net`: `bench net`, TCP/UDP stream and ping-pong over loopback or a veth pair between namespaces.
//! - `netopts`: `bench net`'s options as given, checked and resolved into its spec.
//! - `options`: what the benches' options share: lists, durations, counts, the host's shape, `OptionError`.
//! - `pgbench`: parsing pgbench's summary and progress output (PostgreSQL 13 to 17).
//! - `pgcluster`: throwaway PostgreSQL clusters (initdb in a private temp dir, run as an unprivileged
//!   user, unix socket only, removed on drop).
//! - `pgdriver`: pgbench and sysbench: command lines, output parsing, latencies.
//! - `pgrun`: `bench pg`, the builds x shared_buffers x huge_pages x clients matrix over pgbench or sysbench.
//! - `pgopts`: `bench pg`'s options as given, checked (setting names too) before any cluster exists.
//! - `pgbouncer`: a session pooler in front of a throwaway cluster.
//! - `pgbuild`: the builds axis of `bench pg` (bin directories and scripts/pg-build's cache, their
//!   manifests) and the rseq-spinlock build's counters.
//! - `pool`: hugetlb pool shares that concurrent runs hold and give back.
//! - `procsample`: per-second /proc sampling of a process tree (page tables, Pss, faults, switches).
//! - `rusage`: the one getrusage wrapper (hostfacts', re-exported).
//! - `simfrom`: what `bench lock` result files give a `sim` run (their matrix, their measured costs).
//! - `simopts`: `sim`'s options as given, resolved into the model's matrix, and its run.
//! - `sysbench`: parsing sysbench 1.0's OLTP output.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod check;
pub mod files;
pub mod fork;
pub mod from_lock;
pub mod guard;
pub mod judge;
pub mod latency;
pub mod latopts;
pub mod lockbench;
pub mod lockopts;
pub mod lockrun;
pub mod net;
pub mod netopts;
pub mod options;
pub mod pgbench;
pub mod pgbouncer;
pub mod pgbuild;
pub mod pgcluster;
pub mod pgdriver;
mod pghuge;
pub mod pgopts;
pub mod pgrun;
pub mod pool;
pub mod procsample;
pub mod result;
pub use hostfacts::rusage;
pub mod simfrom;
pub mod simopts;
pub mod sysbench;
