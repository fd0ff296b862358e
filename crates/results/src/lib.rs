//! The result schema of preemptlab, in one place: the envelope, every kind's spec, cell, repetition and
//! summary types, the typed loader [`Document`] and the metric catalogue [`metrics::METRICS`] that
//! `compare`, `report` and the tables share. Pure: no I/O, no system calls; `lab` fills these from the live
//! host and writes them.

pub mod check;
pub mod diagnose;
pub mod document;
pub mod envelope;
pub mod hugepages;
pub mod latency;
pub mod lock;
pub mod metrics;
pub mod model;
pub mod net;
pub mod pg;
pub mod sim;
pub mod vm;

/// The records hostfacts produces (host facts, the audit, plans, the fleet).
pub mod host;

pub use document::{Document, Kind, LoadError};
pub use envelope::{utc, Envelope, Status, SCHEMA_VERSION};
pub use metrics::{Better, Metric, RepRef, Unit, METRICS};
