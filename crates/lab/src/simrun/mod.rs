//! `sim`'s front end: its options and run, what `bench lock` result files give it.

pub mod files;
pub mod from_lock;
pub mod options;
