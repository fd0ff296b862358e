//! Experiments and the host-state guards they run under.
//!
//! - `guard`: SIGINT/SIGTERM flag, hugetlb pool guard with crash records.
//! - `lockbench`: `bench lock`, the StrategyGetBuffer-like workload.
//! - `pgbench`: parsing pgbench's summary and progress output (PostgreSQL 13 to 17).
//! - `pgcluster`: throwaway PostgreSQL clusters (initdb in a private temp dir, run as an unprivileged
//!   user, unix socket only, removed on drop).

pub mod guard;
pub mod lockbench;
pub mod lockrun;
pub mod pgbench;
pub mod pgcluster;
pub mod result;
