//! The axes of preemptlab's matrices and the other closed choices of their specs, as types: parsed once
//! where a person gives them (`lab`'s option structs, the command line), carried typed through the specs
//! and the cells to `report` and the judges, and written to result files with the same spelling a person
//! types (`"hugetlb-2m"`, `"fifo"`, `"tcp-pingpong"`), so files written before these types existed load
//! unchanged (`results/tests/docs_results.rs`).
//!
//! Pure: serde and the names, nothing else, so that the schema (`results`), the real locks (`shmlock`)
//! and the model (`sim`) share them without depending on each other.
//!
//! - [`LockKind`]: the locks of `bench lock`; [`Backing`]: its page backings; [`StartAge`],
//!   [`ReconnectGiven`]: its worker lifetimes.
//! - [`Count`]: a count as given, a number or a multiple of the CPUs (`8`, `4x`): workers, clients.
//! - [`Policy`], [`Load`]: `bench latency`'s scheduling policies and background loads.
//! - [`NetTest`], [`NetPath`]: `bench net`'s tests and the path they take.
//! - [`HugePages`], [`Driver`], [`Pooler`], [`Protocol`], [`PssWhen`]: `bench pg`'s settings.
//! - [`model`]: the model's choices (preemption model, the modelled locks and page sizes, workload).

#[macro_use]
mod names;

mod count;
mod latency;
mod lock;
pub mod model;
mod net;
mod pages;
mod pg;

pub use count::{Count, CountError};
pub use latency::{Load, Policy};
pub use lock::{LockKind, ReconnectGiven, StartAge, UnknownLock};
pub use names::{join, or_list, Named};
pub use net::{NetPath, NetTest};
pub use pages::{Backing, UnknownBacking};
pub use pg::{Driver, HugePages, Pooler, Protocol, PssWhen};
