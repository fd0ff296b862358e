//! `--switch-preempt MODE` of the benches: the preemption model switched for one run.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use hostguard::preempt::{check_preempt_mode, DebugfsPreempt, PreemptError, PreemptGuard};

use crate::cli::SwitchPreemptArgs;

/// Switches the host's preemption model to the mode `--switch-preempt` names (when given) until the
/// returned guard drops, which switches it back; SIGINT and SIGTERM only set the benches' stop flag from
/// here on.
pub fn preempt(args: &SwitchPreemptArgs) -> Result<Option<PreemptGuard>> {
    check(args)?;
    let Some(mode) = args.switch_preempt.as_deref() else {
        return Ok(None);
    };
    if !osutil::is_root() {
        bail!("--switch-preempt needs root (it writes /sys/kernel/debug/sched/preempt)");
    }
    osutil::stop::install_signal_flag()?;
    let guard = PreemptGuard::switch(Box::new(DebugfsPreempt::under(Path::new("/"))), mode)
        .map_err(flag)?;
    if guard.switched() {
        osutil::msg!(
            "preemptlab: preemption model {} -> {mode} for this run; switched back when it ends",
            guard.before()
        );
    }
    Ok(Some(guard))
}

/// Checks the mode `--switch-preempt` names, without touching the host (`vm` checks its guest command so).
pub fn check(args: &SwitchPreemptArgs) -> Result<()> {
    match args.switch_preempt.as_deref() {
        Some(mode) => check_preempt_mode(mode).map_err(flag),
        None => Ok(()),
    }
}

/// The error with the option's name: before the mode it refuses, or before the whole when another run
/// holds a switch.
fn flag(e: PreemptError) -> anyhow::Error {
    match e {
        PreemptError::UnknownMode { .. } | PreemptError::NotOffered { .. } => {
            anyhow!("--switch-preempt {e}")
        }
        PreemptError::HeldByRun { .. } => anyhow!("--switch-preempt: {e}"),
        e => anyhow!(e),
    }
}
