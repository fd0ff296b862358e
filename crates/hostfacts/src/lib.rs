//! Host facts for preemptlab: the kernel's preemption model with its evidence, memory and huge pages,
//! running PostgreSQL instances and their page-table cost, findings and a verdict.
//!
//! Parsing (`parse`) is separate from reading (`host`): every parser takes text, and `Host::at(dir)` reads
//! a fixture tree as if it were `/`. See docs/references.md (the regression, how the kernel preempts, PostgreSQL) for the facts the rules rely on.

pub mod audit;
pub mod duration;
pub mod envelope;
pub mod findings;
pub mod fleet;
pub mod host;
pub mod hostid;
pub mod hugepages;
pub mod kernel;
pub mod memory;
pub mod parse;
pub mod pgbin;
pub mod pgquery;
pub mod postgres;
pub mod rusage;
pub mod stopped;
pub mod targets;

pub use audit::{audit, audit_light, audit_of, host_facts};
pub use host::Host;
