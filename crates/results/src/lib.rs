//! The result schema of preemptlab, in one place: the envelope, every kind's spec, cell, repetition and
//! summary types, the typed loader [`Document`] and the metric catalogue [`metrics::METRICS`] that
//! `compare`, `report` and the tables share. Pure: no I/O, no system calls; `lab` fills these from the live
//! host and writes them.

pub mod check;
pub mod diagnose;
pub mod document;
pub mod envelope;
pub mod from_lock;
pub mod hugepages;
pub mod latency;
pub mod lock;
pub mod metrics;
pub mod net;
pub mod pg;
pub mod sim;

/// hostfacts itself (its pure part: no PostgreSQL client), for the types [`host`] does not name.
pub use hostfacts;

pub use document::{Document, Kind, LoadError};
pub use envelope::{utc, Envelope, Status, SCHEMA_VERSION};
pub use metrics::{Better, Metric, RepRef, Unit, METRICS};

/// Host facts and the audit: hostfacts' pure types, re-exported so readers of results need one crate.
pub mod host {
    pub use hostfacts::fact::Fact;
    pub use hostfacts::findings::{Finding, Severity, Verdict};
    pub use hostfacts::{Audit, HostFacts};
}
