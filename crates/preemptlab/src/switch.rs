//! `--switch-preempt MODE` of the benches: the preemption model switched for one run.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use lab::guard::{check_preempt_mode, DebugfsPreempt, PreemptGuard};

use crate::cli::SwitchPreemptArgs;

/// Switches the host's preemption model to the mode `--switch-preempt` names (when given) until the
/// returned guard drops, which switches it back; SIGINT and SIGTERM only set the benches' stop flag from
/// here on.
pub fn preempt(args: &SwitchPreemptArgs) -> Result<Option<PreemptGuard>> {
    let Some(mode) = args.switch_preempt.as_deref() else {
        return Ok(None);
    };
    check_preempt_mode(mode).map_err(|e| anyhow!(e))?;
    if !hostfacts::host::is_root() {
        bail!("--switch-preempt needs root (it writes /sys/kernel/debug/sched/preempt)");
    }
    lab::guard::install_signal_flag().map_err(|e| anyhow!(e))?;
    let guard = PreemptGuard::switch(Box::new(DebugfsPreempt::under(Path::new("/"))), mode)
        .map_err(|e| anyhow!(e))?;
    if guard.switched() {
        eprintln!(
            "preemptlab: preemption model {} -> {mode} for this run; switched back when it ends",
            guard.before()
        );
    }
    Ok(Some(guard))
}
