//! Experiments and the host-state guards they run under.
//!
//! `pgcluster`: throwaway PostgreSQL clusters (initdb in a private temp dir, run as an unprivileged user,
//! unix socket only, removed on drop).

pub mod pgcluster;
