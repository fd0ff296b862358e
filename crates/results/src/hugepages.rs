//! `hugepages`: the pool sizing plans, one per instance, data directory or size.

use crate::host::hugepages::{Applied, Plan};
use serde::{Deserialize, Serialize};

fn hugepages_kind() -> String {
    "hugepages".into()
}

/// The JSON document of `hugepages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HugepagesDoc {
    /// Schema version of this document.
    pub schema_version: u32,
    /// Always `hugepages` (absent in documents written before kinds were recorded here).
    #[serde(default = "hugepages_kind")]
    pub kind: String,
    /// One plan per instance sized.
    pub plans: Vec<SizedPlan>,
}

/// One sized target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizedPlan {
    /// What was sized (an instance, a data directory, a size).
    pub target: String,
    /// The plan.
    pub plan: Plan,
    /// What --apply did, if asked.
    pub applied: Option<Applied>,
}
