//! Kernel facts: release, architecture, CPUs, HZ, and the effective preemption model with its evidence.
//!
//! Where a switch can happen under each model is described in docs/references.md#preempt-semantics (reading it: #detecting-the-model). The active mode of a
//! PREEMPT_DYNAMIC kernel is printed by `/sys/kernel/debug/sched/preempt` (`kernel/sched/debug.c`), logged
//! at boot and at every change through debugfs as `Dynamic Preempt: <mode>` (`kernel/sched/core.c`,
//! `__sched_dynamic_update`: "if (mode != preempt_dynamic_mode) pr_info(...)"), chosen by `preempt=` on the command
//! line, and defaults to the CONFIG_PREEMPT_* choice. Linux 7.0 (commit 7dadeaa6e851) leaves only `full` and
//! `lazy` on x86, arm64, powerpc, riscv, s390 and loongarch.

use results::host::kernel::{Evidence, IgnoredMode, KernelFacts, PreemptModel, Preemption};
use std::collections::BTreeMap;
use std::io::Read;

use crate::host::Host;
use crate::parse;
use results::host::fact::Fact;

mod preempt;
pub mod warn_header;
pub use preempt::{accepted_modes, decide_preemption, Inputs};

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

pub(crate) fn config_is(cfg: Option<&BTreeMap<String, String>>, name: &str) -> Option<bool> {
    cfg.map(|c| c.get(name).is_some_and(|v| v == "y"))
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
