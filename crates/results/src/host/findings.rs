//! Findings, their severity, the verdict, and `--fail-on`'s threshold.

use serde::{Deserialize, Serialize};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Costs memory or throughput, or will after a likely change.
    Warn,
    /// Exposed now, or will fail at the next restart.
    Critical,
}

impl Severity {
    /// The name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Critical => "critical",
        }
    }
}

/// The overall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Nothing above info.
    Ok,
    /// At least one warning.
    Warn,
    /// At least one critical finding.
    AtRisk,
}

impl Verdict {
    /// The name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::AtRisk => "at-risk",
        }
    }
}

/// `--fail-on`: the severity at which an audit (its worst finding) or a fleet (a host's verdict) makes the
/// command exit 1. The decision is here, beside the severities and verdicts it judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOn {
    /// A warning or worse (a fleet: a host at warn or at-risk).
    Warn,
    /// Critical only (a fleet: a host at risk).
    Critical,
}

impl FailOn {
    /// Every threshold, in the order a command line lists them.
    pub const ALL: [FailOn; 2] = [FailOn::Warn, FailOn::Critical];

    /// The name a command line gives it.
    pub fn name(self) -> &'static str {
        match self {
            FailOn::Warn => "warn",
            FailOn::Critical => "critical",
        }
    }

    /// The least severity that fails.
    fn severity(self) -> Severity {
        match self {
            FailOn::Warn => Severity::Warn,
            FailOn::Critical => Severity::Critical,
        }
    }

    /// Whether these findings fail: their worst severity is at or above the threshold.
    pub fn fails_findings(self, findings: &[Finding]) -> bool {
        findings.iter().map(|f| f.severity).max() >= Some(self.severity())
    }

    /// Whether a host with this verdict fails.
    pub fn fails_verdict(self, v: Verdict) -> bool {
        match self {
            FailOn::Warn => v != Verdict::Ok,
            FailOn::Critical => v == Verdict::AtRisk,
        }
    }
}

impl std::str::FromStr for FailOn {
    type Err = String;

    fn from_str(s: &str) -> Result<FailOn, String> {
        FailOn::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("{s}: one of warn, critical"))
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable identifier (`preempt-4k-shm`, `hugetlb-pool-too-small`, ...).
    pub id: String,
    /// Severity.
    pub severity: Severity,
    /// The postmaster PID of the instance it concerns, if any.
    pub instance: Option<u32>,
    /// One line: what is wrong.
    pub title: String,
    /// The facts behind it, each naming its source.
    pub evidence: Vec<String>,
    /// The exact fix: commands and configuration lines, in order.
    pub fix: Vec<String>,
    /// When the fix is a huge page pool: its exact size, for machines (fleets) to act on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolFix>,
}

/// The pool a fix asks for, and what the figure rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolFix {
    /// Huge page size, kB.
    pub page_size_kib: u64,
    /// Pages the instance needs, margin included.
    pub pages_needed: u64,
    /// The pool size to set: the host's target (every instance's need plus the pages other users hold),
    /// the same in every finding of the host.
    pub pool_target: u64,
    /// `postgres` (the server's shared_memory_size_in_huge_pages via --pg), `postgres_size`, `segment`
    /// (the running segment in smaps), `vm_peak` (the postmaster's VmPeak) or `given`.
    pub basis: String,
    /// The basis in words, with where it was read.
    pub basis_detail: String,
    /// The commands that set it (sysctl or sysfs, and how to persist it).
    pub commands: Vec<String>,
    /// The target in words: this instance's need and the host's other users.
    #[serde(default)]
    pub describe: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_on_thresholds() {
        let f = |severity| Finding {
            id: "x".into(),
            severity,
            instance: None,
            title: String::new(),
            evidence: vec![],
            fix: vec![],
            pool: None,
        };
        assert!(!FailOn::Warn.fails_findings(&[]));
        assert!(!FailOn::Warn.fails_findings(&[f(Severity::Info)]));
        assert!(FailOn::Warn.fails_findings(&[f(Severity::Info), f(Severity::Warn)]));
        assert!(!FailOn::Critical.fails_findings(&[f(Severity::Warn)]));
        assert!(FailOn::Critical.fails_findings(&[f(Severity::Critical)]));
        assert!(FailOn::Warn.fails_verdict(Verdict::Warn));
        assert!(!FailOn::Critical.fails_verdict(Verdict::Warn));
        assert!(FailOn::Critical.fails_verdict(Verdict::AtRisk));
        assert!(!FailOn::Warn.fails_verdict(Verdict::Ok));
        assert_eq!("critical".parse::<FailOn>(), Ok(FailOn::Critical));
        assert!("never".parse::<FailOn>().is_err());
    }
}
