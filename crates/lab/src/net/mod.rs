//! `bench net`: its options, its run, the two ends of a repetition, the counters they record and the
//! network namespace they measure across.

pub mod counters;
mod ends;
pub mod netns;
pub mod options;
pub mod run;
