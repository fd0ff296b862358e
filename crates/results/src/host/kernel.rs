//! Kernel facts: the preemption model with its evidence, HZ, CPUs, rseq.

use serde::{Deserialize, Serialize};

use super::fact::Fact;

/// A kernel preemption model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PreemptModel {
    /// No preemption in the kernel (PREEMPT_NONE).
    None,
    /// Also at `cond_resched()` points (PREEMPT_VOLUNTARY).
    Voluntary,
    /// Whenever NEED_RESCHED is set and preemption is enabled (PREEMPT).
    Full,
    /// Fair-class requests wait for return to user or the next tick (PREEMPT_LAZY, 6.12+).
    Lazy,
    /// PREEMPT_RT: fully preemptible, sleeping spinlocks.
    Rt,
    /// Could not be determined.
    Unknown,
}

impl PreemptModel {
    /// Parses a mode name as the kernel prints it.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim() {
            "none" => Self::None,
            "voluntary" => Self::Voluntary,
            "full" => Self::Full,
            "lazy" => Self::Lazy,
            "rt" => Self::Rt,
            _ => return None,
        })
    }

    /// The mode name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Voluntary => "voluntary",
            Self::Full => "full",
            Self::Lazy => "lazy",
            Self::Rt => "rt",
            Self::Unknown => "unknown",
        }
    }

    /// True for models that can preempt a task inside the kernel (in a page fault, say) when it has
    /// exhausted its slice: the models under which a spinlock holder can be descheduled mid-fault.
    pub fn preempts_in_kernel(self) -> bool {
        matches!(self, Self::Full | Self::Lazy | Self::Rt)
    }

    /// All named models, in order.
    pub const ALL: [PreemptModel; 5] = [
        Self::None,
        Self::Voluntary,
        Self::Full,
        Self::Lazy,
        Self::Rt,
    ];
}

impl std::fmt::Display for PreemptModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One link of the evidence chain for the preemption model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Where we looked.
    pub source: String,
    /// What it said (verbatim or condensed), or null.
    pub says: Option<String>,
    /// The model it implies, if any.
    pub implies: Option<PreemptModel>,
    /// Why it says nothing (unreadable, absent, empty, ambiguous), or a caveat about what it says.
    pub note: Option<String>,
}

/// A `preempt=` on the kernel command line that the kernel did not follow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IgnoredMode {
    /// The mode asked for, as written (`none`).
    pub asked: String,
    /// The mode that runs instead (`unknown` when no source says).
    pub runs: PreemptModel,
    /// The modes this kernel offers.
    pub offered: Vec<PreemptModel>,
    /// Why it was not followed, in words.
    pub why: String,
    /// True when the boot log shows the kernel refusing it (`Dynamic Preempt: unsupported mode: ...`).
    pub refused_in_boot_log: bool,
    /// True when no boot parameter gives `none` on this kernel (7.0+ on an architecture with lazy
    /// preemption, or PREEMPT_RT): older advice to boot `preempt=none` cannot be followed here.
    pub none_unavailable: bool,
}

/// The effective preemption model and how it was decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Preemption {
    /// The effective model.
    pub model: PreemptModel,
    /// The source that decided it (the first link of `evidence` that implied a model).
    pub decided_by: Option<String>,
    /// True when the kernel was built with PREEMPT_DYNAMIC (mode selectable at boot or run time).
    pub dynamic: Fact<bool>,
    /// The modes this kernel offers.
    pub offered: Vec<PreemptModel>,
    /// Where `offered` comes from.
    pub offered_source: String,
    /// Every source consulted, most trusted first.
    pub evidence: Vec<Evidence>,
    /// A `preempt=` on the command line that the kernel did not follow, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored_cmdline: Option<IgnoredMode>,
    /// When no source decided the model (`model` unknown): the models the evidence leaves, if it narrows
    /// them (`uname -v`'s plain `PREEMPT`: full or lazy). Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<PreemptModel>,
}

impl Preemption {
    /// The model in words: its name, or the candidates when only they are known (`full or lazy (cannot
    /// tell which)`).
    pub fn words(&self) -> String {
        match (self.model, self.candidates.as_slice()) {
            (PreemptModel::Unknown, [a, rest @ ..]) if !rest.is_empty() => {
                let mut names: Vec<&str> = vec![a.as_str()];
                names.extend(rest.iter().map(|m| m.as_str()));
                let last = names.pop().unwrap_or_default();
                format!("{} or {last} (cannot tell which)", names.join(", "))
            }
            (m, _) => m.as_str().to_string(),
        }
    }

    /// Whether the kernel preempts inside the kernel: the model's answer, or every candidate's when only
    /// they are known (None when neither says).
    pub fn preempts_in_kernel(&self) -> Option<bool> {
        match (self.model, self.candidates.as_slice()) {
            (PreemptModel::Unknown, []) => None,
            (PreemptModel::Unknown, c) => {
                let all = c.iter().all(|m| m.preempts_in_kernel());
                let none = !c.iter().any(|m| m.preempts_in_kernel());
                (all || none).then_some(all)
            }
            (m, _) => Some(m.preempts_in_kernel()),
        }
    }
}

/// Kernel facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelFacts {
    /// `uname -r`.
    pub release: Fact<String>,
    /// `uname -v` (shows PREEMPT_DYNAMIC / PREEMPT_RT, never the active dynamic mode).
    pub version: Fact<String>,
    /// Machine architecture.
    pub arch: Fact<String>,
    /// Online CPUs.
    pub cpus: Fact<u32>,
    /// Timer frequency (CONFIG_HZ).
    pub hz: Fact<u32>,
    /// The kernel command line.
    pub cmdline: Fact<String>,
    /// Where the kernel config was read from, if anywhere.
    pub config_source: Fact<String>,
    /// The preemption model.
    pub preemption: Preemption,
    /// Whether the rseq time-slice extension can be used: a thread registers an rseq area of the kernel's
    /// feature size and enables the extension with prctl(PR_RSEQ_SLICE_EXTENSION_SET), as the `rseq` lock does.
    pub rseq_slice_extension: Fact<bool>,
    /// Why the extension cannot be used, when the probe said no (absent otherwise): the kernel predates it
    /// (EINVAL), was built without CONFIG_RSEQ_SLICE_EXTENSION or has it off at boot (ENOTSUPP, the config
    /// or command line naming which), or the registration was too short.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rseq_slice_extension_why: Option<String>,
}
