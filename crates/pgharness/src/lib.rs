//! The PostgreSQL harness `bench pg` runs on: real servers and tools, driven as child processes, and the
//! parsers of what they print. Moved out of `lab` (issue 26 item 2) so that the bench runner holds the
//! matrix and this crate holds PostgreSQL.
//!
//! - `pgcluster`: throwaway PostgreSQL clusters (initdb in a private temp dir, run as an unprivileged
//!   user, unix socket only, removed on drop).
//! - `pgbouncer`: a session pooler in front of a throwaway cluster.
//! - `pgdriver`: pgbench and sysbench: command lines, output parsing, latencies.
//! - `pgbench`: parsing pgbench's summary and progress output (PostgreSQL 13 to 17).
//! - `sysbench`: parsing sysbench 1.0's OLTP output.
//! - `procsample`: per-second /proc sampling of a process tree (page tables, Pss, faults, switches).
//! - `sizing`: a configuration's huge pages as PostgreSQL itself computes them, on a scratch cluster.

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod pgbench;
pub mod pgbouncer;
pub mod pgcluster;
pub mod pgdriver;
pub mod procsample;
pub mod sizing;
pub mod sysbench;
