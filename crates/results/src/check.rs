//! `check`: the audit, a short `bench lock` reproduction, the effects measured in it, a verdict and the
//! fixes: the document's shape (`lab::check::plan` plans and runs the reproduction, `lab::check::judge` decides, `report::check` lays it out).

use std::fmt;

use axes::{Backing, LockKind};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::host::Verdict;
use crate::lock::LockResult;
use crate::Kind;

fn check_kind() -> Kind {
    Kind::Check
}

/// What an effect measures; the document spells it as a phrase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EffectKind {
    /// Huge pages for PostgreSQL's spinlock: `pg` on 4 KB pages against `pg` on huge pages.
    #[serde(rename = "huge pages for a PostgreSQL-style spinlock")]
    HugePages,
    /// A lock that tolerates preemption: `pg` against `adaptive`, both on 4 KB pages.
    #[serde(rename = "a preemption-tolerant lock on 4 KB pages")]
    TolerantLock,
    /// Both: `pg` on 4 KB pages against `adaptive` on huge pages.
    #[serde(rename = "both")]
    Both,
}

/// One cell of the reproduction, by its lock and page backing; the document spells it `lock pages`
/// (`pg 4k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellKey {
    /// The lock.
    pub lock: LockKind,
    /// The page backing.
    pub pages: Backing,
}

impl fmt::Display for CellKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("{} {}", self.lock, self.pages))
    }
}

impl Serialize for CellKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CellKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        let bad = |why: String| serde::de::Error::custom(format!("cell {s:?}: {why}"));
        let (lock, pages) = s
            .split_once(' ')
            .ok_or_else(|| bad("expected `lock pages`".into()))?;
        Ok(CellKey {
            lock: LockKind::parse(lock).map_err(|e| bad(e.to_string()))?,
            pages: Backing::parse(pages).map_err(|e| bad(e.to_string()))?,
        })
    }
}

/// One measured effect: `b` relative to `a` on ops/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// What is compared.
    pub what: EffectKind,
    /// Baseline cell.
    pub a: CellKey,
    /// Other cell.
    pub b: CellKey,
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
    /// Why a ratio that is not significant is not: within noise (its interval includes 1 +/- the
    /// threshold), or too few repetitions for Welch's test although the interval clears the band. None
    /// when significant (and in documents written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_significant: Option<String>,
}

/// What the synthetic bench costs the host while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchCost {
    /// Worker processes.
    pub workers: u32,
    /// CPUs they run on (all of the host's).
    pub cpus: u32,
    /// Estimated wall time, s: the cells' repetitions, warm-ups and the cost measurements before them.
    pub duration_s: f64,
}

/// A PostgreSQL instance running on the host when `check` looked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadInstance {
    /// Postmaster PID.
    pub postmaster_pid: u32,
    /// Data directory, when known.
    pub data_dir: Option<String>,
}

/// The other load `check` saw on the host before measuring, and what it did about it
/// (`lab::check::judge::loaded` decides whether the host counts as loaded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// How long the CPU was sampled, s.
    pub window_s: f64,
    /// CPUs of the host.
    pub cpus: u32,
    /// CPU time others kept busy over the window, % of all CPUs' time (user, system, interrupts of every
    /// process but this one; idle, I/O wait and the hypervisor's steal are not busy). None when /proc/stat
    /// could not be read.
    pub others_busy_pct: Option<f64>,
    /// From this share of busy CPU time on, the host counts as loaded, %.
    pub busy_threshold_pct: f64,
    /// The PostgreSQL instances running (a running database counts as load whatever its CPU).
    pub instances: Vec<LoadInstance>,
    /// Why the host counts as loaded, in words; None when it does not.
    pub loaded: Option<String>,
    /// What the synthetic bench costs while it runs.
    pub bench_cost: BenchCost,
    /// Whether the synthetic bench ran (on an idle host, or beside the load with `--bench-beside-load`).
    pub bench_ran: bool,
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
    pub kind: Kind,
    /// Wall time the check took, s.
    pub elapsed_s: f64,
    /// The audit.
    pub audit: crate::host::Audit,
    /// The reproduction (a `bench lock` result); None when it did not run.
    pub reproduction: Option<LockResult>,
    /// Why the reproduction did not run, or ran without its huge-page side.
    pub reproduction_skipped: Option<String>,
    /// Measured effects.
    pub effects: Vec<Effect>,
    /// One-line verdict.
    pub verdict: String,
    /// Exposure from the audit: ok, warn, at-risk.
    pub exposure: Verdict,
    /// Fixes, most effective first.
    pub fixes: Vec<Fix>,
    /// A short diagnosis of the running instances (the `--pg` servers, else every instance the audit
    /// found), taken before the reproduction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<Box<crate::diagnose::DiagnoseResult>>,
    /// Why there is no diagnosis although `--pg` was given or instances run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis_skipped: Option<String>,
    /// The other load seen before measuring (absent in documents written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<Load>,
    /// Why no fix is listed, when `fixes` is empty: what was and was not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_fix: Option<String>,
}
