//! The records `hostfacts` produces: host facts, the audit and its findings, huge page plans, the fleet's
//! answer. Plain serde types and their pure accessors; the readers, parsers and rules that fill them live in
//! `hostfacts`, which depends on this crate (not the other way round), so the schema depends on no engine.

pub mod audit;
pub mod bytes;
pub mod fact;
pub mod findings;
pub mod fleet;
pub mod hugepages;
pub mod kernel;
pub mod memory;
pub mod pgquery;
pub mod postgres;

pub use audit::{Audit, HostFacts};
pub use bytes::Bytes;
pub use fact::Fact;
pub use findings::{FailOn, Finding, Severity, Verdict};
