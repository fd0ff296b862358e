//! `--switch-preempt MODE` of the benches: the preemption model switched for one run.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use lab::guard::{DebugfsPreempt, PreemptGuard, PREEMPT_MODES};

/// Switches the host's preemption model to `mode` (when given) until the returned guard drops, which
/// switches it back; SIGINT and SIGTERM only set the benches' stop flag from here on.
pub fn preempt(mode: Option<&str>) -> Result<Option<PreemptGuard>> {
    let Some(mode) = mode else {
        return Ok(None);
    };
    if !PREEMPT_MODES.contains(&mode) {
        bail!(
            "--switch-preempt {mode}: one of {}",
            PREEMPT_MODES.join(", ")
        );
    }
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
