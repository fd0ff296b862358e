//! The effective preemption model, decided from its sources, most trusted first: the debugfs file, the boot
//! log, `preempt=` on the command line, the kernel config, `uname -v`.
//!
//! Which modes a PREEMPT_DYNAMIC kernel offers is decided as the kernel decides it (kernel/sched/core.c
//! `sched_dynamic_mode`, which parses both `preempt=` and writes to the debugfs file, and
//! kernel/sched/debug.c `sched_dynamic_show`, which lists them; docs/references.md#preempt-modes-7x):
//! - Linux 7.0+ (commit 7dadeaa6e851): `none` and `voluntary` only where the architecture has no lazy
//!   preemption (`CONFIG_ARCH_HAS_PREEMPT_LAZY`, selected by x86, arm64, powerpc, riscv, s390 and loongarch)
//!   and the kernel is not PREEMPT_RT; `full` always; `lazy` where the architecture has it. On those six
//!   architectures that is `full lazy`.
//! - 6.12 to 6.x: `none` and `voluntary` unless PREEMPT_RT; `full`; `lazy` where the architecture has it.
//!
//! A mode the kernel does not offer, given as `preempt=`, is refused at boot (`Dynamic Preempt: unsupported
//! mode: none`, a warning) and the kernel runs its built default (`preempt_dynamic_init`: CONFIG_PREEMPT_LAZY
//! gives `lazy`, CONFIG_PREEMPT `full`). A kernel without PREEMPT_DYNAMIC has no `preempt=` parameter at all.

use std::collections::BTreeMap;

use super::{config_is, Evidence, IgnoredMode, PreemptModel, Preemption};
use crate::parse;
use results::host::fact::Fact;

/// Architectures (as `uname -m` names them) whose kernels select `CONFIG_ARCH_HAS_PREEMPT_LAZY` (arch/*/Kconfig
/// of Linux 7.x: x86, arm64, powerpc, riscv, s390, loongarch).
const LAZY_ARCHES: [&str; 15] = [
    "x86_64",
    "x86",
    "i386",
    "i486",
    "i586",
    "i686",
    "aarch64",
    "arm64",
    "powerpc",
    "ppc",
    "ppc64",
    "ppc64le",
    "riscv64",
    "s390x",
    "loongarch64",
];

/// The modes `sched_dynamic_mode` accepts on a PREEMPT_DYNAMIC kernel of version `kver`, PREEMPT_RT or not,
/// whose architecture has lazy preemption or not (see the module doc).
pub fn accepted_modes(kver: Option<(u32, u32)>, rt: bool, lazy_arch: bool) -> Vec<PreemptModel> {
    let seven = kver.is_some_and(|v| v >= (7, 0));
    let mut out = Vec::new();
    if !(rt || (seven && lazy_arch)) {
        out.extend([PreemptModel::None, PreemptModel::Voluntary]);
    }
    out.push(PreemptModel::Full);
    if lazy_arch && kver.is_none_or(|v| v >= (6, 12)) {
        out.push(PreemptModel::Lazy);
    }
    out
}

fn mode_list(modes: &[PreemptModel]) -> String {
    modes
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(" ")
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
    /// Kernel log text and where it was read, or why not (the reason in words, as for `debugfs`).
    pub boot_log: Result<(String, String), String>,
    /// `/proc/cmdline`.
    pub cmdline: Option<&'a str>,
}

/// Decides the preemption model from the evidence, most trusted source first: debugfs, the boot log,
/// `preempt=` on the command line, the kernel config, `uname -v`. Each source adds its evidence; the first
/// that names a model decides.
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
    let (lazy_arch, lazy_source) = match config_is(i.config, "CONFIG_ARCH_HAS_PREEMPT_LAZY") {
        Some(b) => (
            b,
            format!(
                "CONFIG_ARCH_HAS_PREEMPT_LAZY{} in the kernel config",
                if b { "=y" } else { " not set" }
            ),
        ),
        None => {
            let arch = i.arch.unwrap_or("?");
            let b = LAZY_ARCHES.contains(&arch);
            let has = if b { "has" } else { "has no" };
            (b, format!("architecture {arch} {has} lazy preemption"))
        }
    };
    let accepted = accepted_modes(kver, is_rt, lazy_arch);
    let release = i.release.unwrap_or("?");

    let mut d = Decision::default();
    let offered = from_debugfs(i, is_rt, &mut d);
    let refused_in_boot_log = from_boot_log(i, is_rt, &mut d);
    let (offers, offers_source) = match &offered {
        Some((o, src)) => (o.clone(), src.clone()),
        None => (accepted.clone(), format!("Linux {release}: {lazy_source}")),
    };
    let ignored = from_cmdline(i, is_rt, &dynamic, (&offers, &offers_source), &mut d);
    from_config(i, &dynamic, &mut d);
    let lazy_possible = lazy_arch && kver.is_none_or(|v| v >= (6, 12));
    let mut candidates = from_uname(i.version, lazy_possible, &mut d);
    let Decision { evidence, decided } = d;

    let offered = offered.unwrap_or_else(|| {
        if dynamic.get() == Some(&true) {
            (
                accepted.clone(),
                format!(
                    "inferred as kernel/sched/core.c decides: Linux {release}, {}{lazy_source}",
                    if is_rt { "PREEMPT_RT, " } else { "" }
                ),
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
        Some((m, s)) => {
            candidates.clear();
            (m, Some(s))
        }
        None => (PreemptModel::Unknown, None),
    };
    let ignored_cmdline = ignored.map(|(asked, why)| IgnoredMode {
        refused_in_boot_log: refused_in_boot_log.as_deref() == Some(asked.as_str()),
        asked,
        runs: model,
        offered: offered.0.clone(),
        why,
        none_unavailable: dynamic.get() == Some(&true) && !offered.0.contains(&PreemptModel::None),
    });
    Preemption {
        model,
        decided_by,
        dynamic,
        offered: offered.0,
        offered_source: offered.1,
        evidence,
        ignored_cmdline,
        candidates,
    }
}

/// The evidence gathered so far and the model the first source that named one decided.
#[derive(Default)]
struct Decision {
    evidence: Vec<Evidence>,
    decided: Option<(PreemptModel, String)>,
}

impl Decision {
    /// `m` from `src` decides, unless an earlier source did.
    fn decide(&mut self, m: Option<PreemptModel>, src: String) {
        if self.decided.is_none() {
            if let Some(m) = m {
                self.decided = Some((m, src));
            }
        }
    }
}

/// Source 1, debugfs: the live truth, when readable and naming one mode; the modes it offers.
fn from_debugfs(
    i: &Inputs<'_>,
    is_rt: bool,
    d: &mut Decision,
) -> Option<(Vec<PreemptModel>, String)> {
    let mut offered = None;
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
                d.evidence.push(Evidence {
                    source: src.clone(),
                    says: Some(text.trim().to_string()),
                    implies: m,
                    note: None,
                });
                d.decide(m, src);
            }
            Err(e) => d.evidence.push(Evidence {
                source: src,
                says: Some(text.trim().to_string()),
                implies: None,
                note: Some(format!("{e}; the next source decides")),
            }),
        },
        Err(why) => d.evidence.push(Evidence {
            source: src,
            says: None,
            implies: None,
            note: Some(why.clone()),
        }),
    }

    offered
}

/// Source 2, the boot log: a refused `preempt=` (returned), then the mode chosen at boot (a later debugfs write
/// would not show here), and a WARN/oops header's model.
fn from_boot_log(i: &Inputs<'_>, is_rt: bool, d: &mut Decision) -> Option<String> {
    let mut refused_in_boot_log = None;
    match &i.boot_log {
        Ok((text, from)) => {
            if let Some(mode) = parse::boot_log_refused(text) {
                d.evidence.push(Evidence {
                    source: format!("boot log ({from}) \"Dynamic Preempt: unsupported mode\""),
                    says: Some(format!("Dynamic Preempt: unsupported mode: {mode}")),
                    implies: None,
                    note: Some(format!(
                        "the kernel refused preempt={mode} at boot and ran its default"
                    )),
                });
                refused_in_boot_log = Some(mode);
            }
            let src = format!("boot log ({from}) \"Dynamic Preempt:\"");
            match parse::boot_log_preempt(text) {
                Some(mode) => {
                    let m = PreemptModel::parse(&mode)
                        .map(|m| if is_rt { PreemptModel::Rt } else { m });
                    let note = if m.is_some() {
                        "the last mode the kernel logged: at boot, and again at each switch through debugfs"
                            .to_string()
                    } else {
                        format!("not a mode this audit knows ({mode})")
                    };
                    d.evidence.push(Evidence {
                        source: src.clone(),
                        says: Some(format!("Dynamic Preempt: {mode}")),
                        implies: m,
                        note: Some(note),
                    });
                    d.decide(m, src);
                }
                None => d.evidence.push(Evidence {
                    source: src,
                    says: None,
                    implies: None,
                    note: Some("no \"Dynamic Preempt:\" line (not a dynamic kernel, or the ring buffer wrapped)".to_string()),
                }),
            }
            // A WARN/oops header of this boot names the model it ran under (6.15+; super::warn_header):
            // the one source that tells a lazy kernel without PREEMPT_DYNAMIC from a full one.
            if let Some((line, word)) = super::warn_header::last_header(text) {
                let src = format!("kernel log ({from}) WARN/oops header");
                let m = super::warn_header::model_of(&word);
                d.evidence.push(Evidence {
                    source: src.clone(),
                    says: Some(line),
                    implies: m.as_ref().ok().copied(),
                    note: Some(match &m {
                        Ok(_) => format!("{word}: the mode when the kernel printed it (Linux 6.15+, lib/dump_stack.c)"),
                        Err(why) => why.clone(),
                    }),
                });
                d.decide(m.ok(), src);
            }
        }
        Err(why) => d.evidence.push(Evidence {
            source: "boot log".into(),
            says: None,
            implies: None,
            note: Some(why.clone()),
        }),
    }

    refused_in_boot_log
}

/// Source 3, `preempt=` on the command line, if the kernel follows it; when it does not, what was asked and why.
fn from_cmdline(
    i: &Inputs<'_>,
    is_rt: bool,
    dynamic: &Fact<bool>,
    (offers, offers_source): (&[PreemptModel], &str),
    d: &mut Decision,
) -> Option<(String, String)> {
    let src = "/proc/cmdline preempt=".to_string();
    let mut ignored: Option<(String, String)> = None;
    match i.cmdline {
        Some(cl) => match parse::cmdline_param(cl, "preempt") {
            Some(v) => {
                let m = PreemptModel::parse(&v).filter(|m| *m != PreemptModel::Rt);
                let not_dynamic = dynamic.get() == Some(&false);
                let refused = !m.is_some_and(|m| offers.contains(&m));
                let why = if not_dynamic {
                    Some("the kernel is not PREEMPT_DYNAMIC: it has no preempt= parameter, and its model is built in".to_string())
                } else if refused {
                    Some(format!(
                        "this kernel offers {} ({offers_source}): it refuses preempt={v} at boot (\"Dynamic Preempt: unsupported mode: {v}\") and runs its default",
                        mode_list(offers)
                    ))
                } else {
                    None
                };
                let implies = if why.is_some() { None } else { m };
                d.evidence.push(Evidence {
                    source: src.clone(),
                    says: Some(format!("preempt={v}")),
                    implies,
                    note: why.clone().map(|w| format!("ignored: {w}")),
                });
                if let Some(w) = why {
                    ignored = Some((v, w));
                }
                d.decide(
                    implies.map(|m| if is_rt { PreemptModel::Rt } else { m }),
                    src,
                );
            }
            None => d.evidence.push(Evidence {
                source: src,
                says: None,
                implies: None,
                note: Some("no preempt= parameter".into()),
            }),
        },
        None => d.evidence.push(Evidence {
            source: src,
            says: None,
            implies: None,
            note: Some("/proc/cmdline unreadable".into()),
        }),
    }

    ignored
}

/// Source 4, the kernel config: the built model, or a dynamic kernel's default.
fn from_config(i: &Inputs<'_>, dynamic: &Fact<bool>, d: &mut Decision) {
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
            d.evidence.push(Evidence {
                source: src.clone(),
                says,
                implies: m,
                note,
            });
            d.decide(m, src);
        }
        None => d.evidence.push(Evidence {
            source: src,
            says: None,
            implies: None,
            note: Some("no kernel config readable".into()),
        }),
    }
}

/// Source 5, uname -v: PREEMPT_RT names a built model, PREEMPT_DYNAMIC none. Plain PREEMPT is
/// CONFIG_PREEMPT_BUILD (init/Makefile's UTS_VERSION has no flag for lazy), which full and lazy both
/// select: full only where lazy cannot be (before 6.12, or an architecture without it). The candidates
/// when it cannot tell.
fn from_uname(version: Option<&str>, lazy_possible: bool, d: &mut Decision) -> Vec<PreemptModel> {
    let src = "/proc/sys/kernel/version (uname -v)".to_string();
    let words: Vec<&str> = version.unwrap_or("").split_whitespace().collect();
    let mut candidates = Vec::new();
    let (m, note) = if words.contains(&"PREEMPT_RT") {
        (Some(PreemptModel::Rt), None)
    } else if words.contains(&"PREEMPT_DYNAMIC") {
        (None, Some("names no mode: PREEMPT_DYNAMIC".to_string()))
    } else if words.contains(&"PREEMPT_LAZY") {
        (Some(PreemptModel::Lazy), None)
    } else if words.contains(&"PREEMPT") && lazy_possible {
        candidates = vec![PreemptModel::Full, PreemptModel::Lazy];
        (None, Some("full or lazy: cannot tell: a kernel built with CONFIG_PREEMPT_LAZY prints PREEMPT too (init/Makefile names CONFIG_PREEMPT_BUILD, which both select); the kernel config, or a WARN/oops header in the kernel log (6.15+: PREEMPT or PREEMPTLAZY), tells them apart".to_string()))
    } else if words.contains(&"PREEMPT") {
        (Some(PreemptModel::Full), None)
    } else {
        (None, None)
    };
    d.evidence.push(Evidence {
        source: src.clone(),
        says: version.map(str::to_string),
        implies: m,
        note,
    });
    d.decide(m, src);

    candidates
}

#[cfg(test)]
mod tests;
