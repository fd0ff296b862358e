//! `check`: the audit, a short `bench lock` reproduction, the effects measured in it, a verdict and the
//! fixes: the document's shape (`lab::check` plans and runs the reproduction, `lab::judge` decides, `report::check` lays it out).

use serde::{Deserialize, Serialize};

use crate::lock::LockResult;

fn check_kind() -> String {
    "check".into()
}

/// One measured effect: `b` relative to `a` on ops/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// What is compared, in words.
    pub what: String,
    /// Baseline cell (lock pages).
    pub a: String,
    /// Other cell.
    pub b: String,
    /// Median ops/s of the baseline.
    pub a_ops_per_s: f64,
    /// Median ops/s of the other cell.
    pub b_ops_per_s: f64,
    /// B/A with its 95% bootstrap interval.
    pub ratio: f64,
    /// Lower bound of the interval.
    pub ci_lo: f64,
    /// Upper bound of the interval.
    pub ci_hi: f64,
    /// The interval clears 1 by more than 2% and Welch's test agrees (`stats::judge`, as `compare`).
    pub significant: bool,
}

/// A fix, with the effect measured here and the exact commands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fix {
    /// What to do.
    pub title: String,
    /// Measured throughput gain of the fix in the reproduction, % (None when not measurable here).
    pub measured_gain_pct: Option<f64>,
    /// The commands and settings.
    pub commands: Vec<String>,
}

/// The `check` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckDoc {
    /// Schema version of this document.
    pub schema_version: u32,
    /// Always `check` (absent in documents written before kinds were recorded here).
    #[serde(default = "check_kind")]
    pub kind: String,
    /// Wall time the check took, s.
    pub elapsed_s: f64,
    /// The audit.
    pub audit: crate::host::Audit,
    /// The reproduction (a `bench lock` result).
    pub reproduction: Option<LockResult>,
    /// Why there was no reproduction, if there was none.
    pub reproduction_skipped: Option<String>,
    /// Measured effects.
    pub effects: Vec<Effect>,
    /// One-line verdict.
    pub verdict: String,
    /// Exposure from the audit: ok, warn, at-risk.
    pub exposure: String,
    /// Fixes, most effective first.
    pub fixes: Vec<Fix>,
    /// `check --pg`: a short diagnosis of those servers, taken before the reproduction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<Box<crate::diagnose::DiagnoseResult>>,
    /// Why there is no diagnosis although `--pg` was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis_skipped: Option<String>,
}
