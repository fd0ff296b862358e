//! Kernel facts: release, architecture, CPUs, HZ, and the effective preemption model with its evidence.
//!
//! Where a switch can happen under each model is described in docs/references.md#preempt-semantics (reading it: #detecting-the-model). The active mode of a
//! PREEMPT_DYNAMIC kernel is printed by `/sys/kernel/debug/sched/preempt` (`kernel/sched/debug.c`), logged
//! once at boot as `Dynamic Preempt: <mode>` (`kernel/sched/core.c`), chosen by `preempt=` on the command
//! line, and defaults to the CONFIG_PREEMPT_* choice. Linux 7.0 (commit 7dadeaa6e851) leaves only `full` and
//! `lazy` on x86, arm64, powerpc, riscv, s390 and loongarch.

use std::collections::BTreeMap;
use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::fact::Fact;
use crate::host::Host;
use crate::parse;

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
    /// Why it says nothing (unreadable, absent), or a caveat about what it says.
    pub note: Option<String>,
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

/// Architectures on which Linux 7.0+ offers only `full` and `lazy`.
const RESTRICTED_ARCHES: [&str; 8] = [
    "x86_64", "x86", "aarch64", "arm64", "powerpc", "ppc64le", "riscv64", "s390x",
];

/// Bytes that are not a gzipped text (a `/proc/config.gz` that is no kernel config).
#[derive(Debug, thiserror::Error)]
#[error("not gzip text ({err})")]
pub struct NotGzipText {
    /// What the decoder said.
    pub err: std::io::Error,
}

/// Parses the bytes of `/proc/config.gz` (gzip of a kernel `.config`); the error says why it is not one.
pub fn config_gz(gz: &[u8]) -> Result<BTreeMap<String, String>, NotGzipText> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .map_err(|err| NotGzipText { err })?;
    Ok(parse::kernel_config(&text))
}

/// Reads the kernel config: `/proc/config.gz`, else `/boot/config-<release>`.
fn read_config(
    host: &Host,
    release: Option<&str>,
) -> (Option<BTreeMap<String, String>>, Fact<String>) {
    let mut reasons = Vec::new();
    match host.read_bytes("/proc/config.gz") {
        Ok(gz) => match config_gz(&gz) {
            Ok(cfg) => {
                return (
                    Some(cfg),
                    Fact::known("/proc/config.gz".into(), "/proc/config.gz"),
                )
            }
            Err(e) => reasons.push(format!("/proc/config.gz: {e}")),
        },
        Err(e) => reasons.push(format!("/proc/config.gz: {}", e.reason)),
    }
    if let Some(rel) = release {
        let path = format!("/boot/config-{rel}");
        match host.read(&path) {
            Ok(text) => {
                return (
                    Some(parse::kernel_config(&text)),
                    Fact::known(path.clone(), path),
                )
            }
            Err(e) => reasons.push(format!("{path}: {}", e.reason)),
        }
    }
    (
        None,
        Fact::unavailable(
            "/proc/config.gz, /boot/config-<release>",
            reasons.join("; "),
        ),
    )
}

fn config_is(cfg: Option<&BTreeMap<String, String>>, name: &str) -> Option<bool> {
    cfg.map(|c| c.get(name).is_some_and(|v| v == "y"))
}

/// The model a kernel config builds in (for a PREEMPT_DYNAMIC kernel: the default boot mode).
fn config_model(cfg: &BTreeMap<String, String>) -> Option<PreemptModel> {
    let y = |n: &str| cfg.get(n).is_some_and(|v| v == "y");
    if y("CONFIG_PREEMPT_RT") {
        Some(PreemptModel::Rt)
    } else if y("CONFIG_PREEMPT_LAZY") {
        Some(PreemptModel::Lazy)
    } else if y("CONFIG_PREEMPT") {
        Some(PreemptModel::Full)
    } else if y("CONFIG_PREEMPT_VOLUNTARY") {
        Some(PreemptModel::Voluntary)
    } else if y("CONFIG_PREEMPT_NONE") {
        Some(PreemptModel::None)
    } else {
        None
    }
}

/// Probes the rseq time-slice extension as the `rseq` lock uses it ([`rseqslice::probe`]): Ok(true),
/// or Ok(false) with the reason. ENOTSUPP's cause is named from `config` (read from `config_source`) and
/// `cmdline` when they tell.
#[cfg(feature = "live-probes")]
pub fn probe_rseq_slice_extension(
    config: Option<&BTreeMap<String, String>>,
    config_source: Option<&str>,
    cmdline: Option<&str>,
) -> (bool, Option<String>) {
    use rseqslice::{enotsupp_detail, probe, Unavailable};
    match probe() {
        Ok(()) => (true, None),
        Err(Unavailable::NotSupported { detail }) => {
            let from_config = enotsupp_detail(
                config_is(config, "CONFIG_RSEQ_SLICE_EXTENSION")
                    .zip(config_source.or(Some("the kernel config"))),
                cmdline,
            );
            let why = Unavailable::NotSupported {
                detail: from_config.or(detail),
            };
            (false, Some(why.to_string()))
        }
        Err(e) => (false, Some(e.to_string())),
    }
}

/// Without the `live-probes` feature the extension is not probed.
#[cfg(not(feature = "live-probes"))]
pub fn probe_rseq_slice_extension(
    _config: Option<&BTreeMap<String, String>>,
    _config_source: Option<&str>,
    _cmdline: Option<&str>,
) -> (bool, Option<String>) {
    (
        false,
        Some("not probed: built without hostfacts' live-probes feature".into()),
    )
}

/// Reads the kernel facts of `host`.
pub fn read(host: &Host) -> KernelFacts {
    let release = host.fact("/proc/sys/kernel/osrelease");
    let version = host.fact("/proc/sys/kernel/version");
    let (cfg, config_source) = read_config(host, release.get().map(String::as_str));
    let arch = {
        let f = host.fact("/proc/sys/kernel/arch");
        if f.value.is_some() {
            f
        } else if host.is_live() {
            Fact::known(
                std::env::consts::ARCH.to_string(),
                "compile-time target of this binary",
            )
        } else {
            f
        }
    };
    let cpus = host
        .fact("/sys/devices/system/cpu/online")
        .and_then(|s| parse::cpu_list_count(&s));
    let hz = match &cfg {
        Some(c) => match c.get("CONFIG_HZ").and_then(|v| v.parse::<u32>().ok()) {
            Some(hz) => Fact::known(hz, "kernel config CONFIG_HZ"),
            None => Fact::unavailable("kernel config CONFIG_HZ", "not set in the config"),
        },
        None => Fact::unavailable("kernel config CONFIG_HZ", "no kernel config readable"),
    };
    let cmdline = host.fact("/proc/cmdline");
    let debugfs = host.read("/sys/kernel/debug/sched/preempt").map_err(|e| {
        if e.kind == std::io::ErrorKind::NotFound && !host.exists("/sys/kernel/debug/sched") {
            "debugfs is not mounted or has no sched/ directory (mount -t debugfs none /sys/kernel/debug, as root)".to_string()
        } else {
            e.reason
        }
    });
    let boot_log = host.read_kernel_log().map_err(|e| e.to_string());
    let rseq_source =
        "rseq registration of AT_RSEQ_FEATURE_SIZE + prctl(PR_RSEQ_SLICE_EXTENSION_SET)";
    let (rseq, rseq_why) = if !host.is_live() {
        (
            // The probe starts with this read-only prctl (the name result snapshots carry).
            Fact::unavailable(
                "prctl(PR_RSEQ_SLICE_EXTENSION_GET)",
                "not probed: a live probe, and --sysroot reads another host",
            ),
            None,
        )
    } else {
        let (ok, why) = probe_rseq_slice_extension(
            cfg.as_ref(),
            config_source.get().map(String::as_str),
            cmdline.get().map(String::as_str),
        );
        (Fact::known(ok, rseq_source), why)
    };
    let preemption = decide_preemption(&Inputs {
        release: release.get().map(String::as_str),
        version: version.get().map(String::as_str),
        arch: arch.get().map(String::as_str),
        config: cfg.as_ref(),
        config_source: config_source.get().map(String::as_str),
        debugfs,
        boot_log,
        cmdline: cmdline.get().map(String::as_str),
    });
    KernelFacts {
        release,
        version,
        arch,
        cpus,
        hz,
        cmdline,
        config_source,
        preemption,
        rseq_slice_extension: rseq,
        rseq_slice_extension_why: rseq_why,
    }
}

/// What the preemption decision is made from (pure, so fixtures and unit tests can drive it).
pub struct Inputs<'a> {
    /// `uname -r`.
    pub release: Option<&'a str>,
    /// `uname -v`.
    pub version: Option<&'a str>,
    /// Architecture.
    pub arch: Option<&'a str>,
    /// Parsed kernel config.
    pub config: Option<&'a BTreeMap<String, String>>,
    /// Where the config came from.
    pub config_source: Option<&'a str>,
    /// `/sys/kernel/debug/sched/preempt` text, or why not: the reason in words, as the audit records it in
    /// the evidence (an unreadable file is a fact, never an error that stops the audit).
    pub debugfs: Result<String, String>,
    /// Kernel log text, or why not (the reason in words, as for `debugfs`).
    pub boot_log: Result<(String, &'static str), String>,
    /// `/proc/cmdline`.
    pub cmdline: Option<&'a str>,
}

/// Decides the preemption model from the evidence, most trusted source first.
pub fn decide_preemption(i: &Inputs<'_>) -> Preemption {
    let version = i.version.unwrap_or("");
    let is_rt =
        config_is(i.config, "CONFIG_PREEMPT_RT").unwrap_or(false) || version.contains("PREEMPT_RT");
    let dynamic: Fact<bool> = match config_is(i.config, "CONFIG_PREEMPT_DYNAMIC") {
        Some(d) => Fact::known(
            d,
            format!(
                "kernel config CONFIG_PREEMPT_DYNAMIC ({})",
                i.config_source.unwrap_or("?")
            ),
        ),
        None if version.contains("PREEMPT_DYNAMIC") => {
            Fact::known(true, "/proc/sys/kernel/version (uname -v)")
        }
        None if i.version.is_some() => Fact::known(
            false,
            "/proc/sys/kernel/version (uname -v shows no PREEMPT_DYNAMIC)",
        ),
        None => Fact::unavailable("kernel config, uname -v", "neither is readable"),
    };
    let kver = i.release.and_then(parse::kernel_version);
    let restricted =
        kver.is_some_and(|v| v >= (7, 0)) && i.arch.is_some_and(|a| RESTRICTED_ARCHES.contains(&a));
    let lazy_built = config_is(i.config, "CONFIG_ARCH_HAS_PREEMPT_LAZY")
        .unwrap_or(kver.is_some_and(|v| v >= (6, 12)));

    let mut evidence = Vec::new();
    let mut decided: Option<(PreemptModel, String)> = None;
    let mut offered: Option<(Vec<PreemptModel>, String)> = None;

    // 1. debugfs: the live truth, when readable.
    let src = "/sys/kernel/debug/sched/preempt".to_string();
    match &i.debugfs {
        Ok(text) => match parse::debugfs_preempt(text) {
            Ok((active, list)) => {
                let m = PreemptModel::parse(&active);
                let m = if is_rt { Some(PreemptModel::Rt) } else { m };
                offered = Some((
                    list.iter().filter_map(|s| PreemptModel::parse(s)).collect(),
                    src.clone(),
                ));
                evidence.push(Evidence {
                    source: src.clone(),
                    says: Some(text.trim().to_string()),
                    implies: m,
                    note: None,
                });
                if let Some(m) = m {
                    decided = Some((m, src));
                }
            }
            Err(e) => evidence.push(Evidence {
                source: src,
                says: Some(text.trim().to_string()),
                implies: None,
                note: Some(e.0),
            }),
        },
        Err(why) => evidence.push(Evidence {
            source: src,
            says: None,
            implies: None,
            note: Some(why.clone()),
        }),
    }

    // 2. The boot log line (the mode chosen at boot; a later debugfs write would not show here).
    match &i.boot_log {
        Ok((text, from)) => {
            let src = format!("boot log ({from}) \"Dynamic Preempt:\"");
            match parse::boot_log_preempt(text) {
                Some(mode) => {
                    let m = PreemptModel::parse(&mode).map(|m| if is_rt { PreemptModel::Rt } else { m });
                    let note = if m.is_some() {
                        Some("the mode at boot; a later switch through debugfs would not show here".to_string())
                    } else {
                        Some(format!("the kernel did not accept a mode ({mode})"))
                    };
                    evidence.push(Evidence { source: src.clone(), says: Some(format!("Dynamic Preempt: {mode}")), implies: m, note });
                    if decided.is_none() {
                        if let Some(m) = m {
                            decided = Some((m, src));
                        }
                    }
                }
                None => evidence.push(Evidence {
                    source: src,
                    says: None,
                    implies: None,
                    note: Some("no \"Dynamic Preempt:\" line (not a dynamic kernel, or the ring buffer wrapped)".to_string()),
                }),
            }
        }
        Err(why) => evidence.push(Evidence {
            source: "boot log".into(),
            says: None,
            implies: None,
            note: Some(why.clone()),
        }),
    }

    // 3. preempt= on the command line.
    let src = "/proc/cmdline preempt=".to_string();
    match i.cmdline {
        Some(cl) => match parse::cmdline_param(cl, "preempt") {
            Some(v) => {
                let m = PreemptModel::parse(&v);
                let rejected =
                    restricted && matches!(m, Some(PreemptModel::None | PreemptModel::Voluntary));
                let not_dynamic = dynamic.get() == Some(&false);
                let note = if rejected {
                    Some("Linux 7.0+ rejects this mode on this architecture (\"Dynamic Preempt: unsupported mode\")".to_string())
                } else if not_dynamic {
                    Some("ignored: the kernel is not PREEMPT_DYNAMIC".to_string())
                } else {
                    None
                };
                let implies = if rejected || not_dynamic { None } else { m };
                evidence.push(Evidence {
                    source: src.clone(),
                    says: Some(format!("preempt={v}")),
                    implies,
                    note,
                });
                if decided.is_none() {
                    if let Some(m) = implies {
                        decided = Some((if is_rt { PreemptModel::Rt } else { m }, src));
                    }
                }
            }
            None => evidence.push(Evidence {
                source: src,
                says: None,
                implies: None,
                note: Some("no preempt= parameter".into()),
            }),
        },
        None => evidence.push(Evidence {
            source: src,
            says: None,
            implies: None,
            note: Some("/proc/cmdline unreadable".into()),
        }),
    }

    // 4. The kernel config: the built model, or a dynamic kernel's default.
    let src = format!(
        "kernel config ({})",
        i.config_source.unwrap_or("unavailable")
    );
    match i.config {
        Some(cfg) => {
            let m = config_model(cfg);
            let says = m.map(|m| match m {
                PreemptModel::None => "CONFIG_PREEMPT_NONE=y".to_string(),
                PreemptModel::Voluntary => "CONFIG_PREEMPT_VOLUNTARY=y".to_string(),
                PreemptModel::Full => "CONFIG_PREEMPT=y".to_string(),
                PreemptModel::Lazy => "CONFIG_PREEMPT_LAZY=y".to_string(),
                PreemptModel::Rt => "CONFIG_PREEMPT_RT=y".to_string(),
                PreemptModel::Unknown => String::new(),
            });
            let note = if dynamic.get() == Some(&true) {
                Some("PREEMPT_DYNAMIC: this is only the default mode at boot".to_string())
            } else {
                None
            };
            evidence.push(Evidence {
                source: src.clone(),
                says,
                implies: m,
                note,
            });
            if decided.is_none() {
                if let Some(m) = m {
                    decided = Some((m, src));
                }
            }
        }
        None => evidence.push(Evidence {
            source: src,
            says: None,
            implies: None,
            note: Some("no kernel config readable".into()),
        }),
    }

    // 5. uname -v: PREEMPT_RT, PREEMPT_LAZY or plain PREEMPT name a built model; PREEMPT_DYNAMIC names none.
    let src = "/proc/sys/kernel/version (uname -v)".to_string();
    let words: Vec<&str> = version.split_whitespace().collect();
    let m = if words.contains(&"PREEMPT_RT") {
        Some(PreemptModel::Rt)
    } else if words.contains(&"PREEMPT_DYNAMIC") {
        None
    } else if words.contains(&"PREEMPT_LAZY") {
        Some(PreemptModel::Lazy)
    } else if words.contains(&"PREEMPT") {
        Some(PreemptModel::Full)
    } else {
        None
    };
    evidence.push(Evidence {
        source: src.clone(),
        says: i.version.map(str::to_string),
        implies: m,
        note: if words.contains(&"PREEMPT_DYNAMIC") {
            Some("names no mode: PREEMPT_DYNAMIC".into())
        } else {
            None
        },
    });
    if decided.is_none() {
        if let Some(m) = m {
            decided = Some((m, src));
        }
    }

    let offered = offered.unwrap_or_else(|| {
        if dynamic.get() == Some(&true) {
            let list = if restricted {
                vec![PreemptModel::Full, PreemptModel::Lazy]
            } else {
                let mut v = vec![
                    PreemptModel::None,
                    PreemptModel::Voluntary,
                    PreemptModel::Full,
                ];
                if lazy_built {
                    v.push(PreemptModel::Lazy);
                }
                if is_rt {
                    v = vec![PreemptModel::Full, PreemptModel::Lazy];
                }
                v
            };
            (
                list,
                "inferred from the kernel version, architecture and config".into(),
            )
        } else {
            match &decided {
                Some((m, _)) => (
                    vec![*m],
                    "a kernel without PREEMPT_DYNAMIC offers only its built model".into(),
                ),
                None => (vec![], "unknown".into()),
            }
        }
    });

    let (model, decided_by) = match decided {
        Some((m, s)) => (m, Some(s)),
        None if restricted => (PreemptModel::Unknown, None),
        None => (PreemptModel::Unknown, None),
    };
    Preemption {
        model,
        decided_by,
        dynamic,
        offered: offered.0,
        offered_source: offered.1,
        evidence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lines: &str) -> BTreeMap<String, String> {
        parse::kernel_config(lines)
    }

    fn inputs<'a>(cfg: Option<&'a BTreeMap<String, String>>) -> Inputs<'a> {
        Inputs {
            release: Some("6.18.44"),
            version: Some("#1 SMP PREEMPT_DYNAMIC"),
            arch: Some("x86_64"),
            config: cfg,
            config_source: Some("/proc/config.gz"),
            debugfs: Err("not mounted".into()),
            boot_log: Err("no log".into()),
            cmdline: Some("quiet"),
        }
    }

    #[test]
    fn debugfs_wins() {
        let c = cfg("CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_NONE=y\n");
        let mut i = inputs(Some(&c));
        i.debugfs = Ok("none voluntary full (lazy)\n".into());
        i.boot_log = Ok(("Dynamic Preempt: none".into(), "/dev/kmsg"));
        let p = decide_preemption(&i);
        assert_eq!(p.model, PreemptModel::Lazy);
        assert_eq!(
            p.decided_by.as_deref(),
            Some("/sys/kernel/debug/sched/preempt")
        );
        assert_eq!(p.offered.len(), 4);
    }

    #[test]
    fn boot_log_then_config() {
        let c = cfg(
            "CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_NONE=y\nCONFIG_ARCH_HAS_PREEMPT_LAZY=y\n",
        );
        let mut i = inputs(Some(&c));
        i.boot_log = Ok(("6,88,243510,-;Dynamic Preempt: none\n".into(), "/dev/kmsg"));
        let p = decide_preemption(&i);
        assert_eq!(p.model, PreemptModel::None);
        assert!(p.decided_by.unwrap().starts_with("boot log"));
        assert_eq!(
            p.offered,
            vec![
                PreemptModel::None,
                PreemptModel::Voluntary,
                PreemptModel::Full,
                PreemptModel::Lazy
            ]
        );
        let p = decide_preemption(&inputs(Some(&c)));
        assert_eq!(p.model, PreemptModel::None);
        assert!(p.decided_by.unwrap().starts_with("kernel config"));
    }

    #[test]
    fn seven_zero_rejects_none_on_cmdline() {
        let c = cfg("CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_LAZY=y\n");
        let mut i = inputs(Some(&c));
        i.release = Some("7.0.1");
        i.cmdline = Some("preempt=none");
        let p = decide_preemption(&i);
        assert_eq!(p.model, PreemptModel::Lazy);
        assert_eq!(p.offered, vec![PreemptModel::Full, PreemptModel::Lazy]);
        assert!(p.evidence[2].note.as_deref().unwrap().contains("rejects"));
    }

    #[test]
    fn not_dynamic_and_rt() {
        let c = cfg("# CONFIG_PREEMPT_DYNAMIC is not set\nCONFIG_PREEMPT_VOLUNTARY=y\n");
        let mut i = inputs(Some(&c));
        i.version = Some("#1 SMP Debian 6.1.0");
        i.cmdline = Some("preempt=full");
        let p = decide_preemption(&i);
        assert_eq!(p.model, PreemptModel::Voluntary);
        assert_eq!(p.offered, vec![PreemptModel::Voluntary]);
        let c = cfg("CONFIG_PREEMPT_RT=y\n");
        let mut i = inputs(Some(&c));
        i.version = Some("#1 SMP PREEMPT_RT");
        assert_eq!(decide_preemption(&i).model, PreemptModel::Rt);
    }

    #[test]
    fn nothing_readable_is_unknown() {
        let mut i = inputs(None);
        i.version = None;
        i.cmdline = None;
        let p = decide_preemption(&i);
        assert_eq!(p.model, PreemptModel::Unknown);
        assert!(p.decided_by.is_none());
        assert_eq!(p.evidence.len(), 5);
    }
}
