//! `bench latency`: its options and its run.

pub mod options;
pub mod run;
