//! `--switch-preempt MODE[,MODE...]` of the benches: the preemption model switched for one run, or, with
//! two or more, an axis of the run (each cell under each model, the host switched between them).

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use axes::model::Model;
use hostguard::preempt::{check_preempt_mode, DebugfsPreempt, PreemptError, PreemptGuard};
use lab::matrix::ModelAxis;

use crate::cli::SwitchPreemptArgs;

/// What `--switch-preempt` set up: with one mode, the host switched now, until the guard drops; with
/// several, the axis the bench runs (the host switched group by group, and back when the bench's run
/// ends). SIGINT and SIGTERM only set the benches' stop flag from here on.
pub enum Switched {
    /// Not asked.
    No,
    /// One mode for the whole run.
    Run {
        /// Held for its drop, which switches back.
        _guard: PreemptGuard,
    },
    /// Several: the bench's axis.
    Axis(ModelAxis),
}

impl Switched {
    /// The axis for the bench's run options.
    pub fn axis(&mut self) -> Option<ModelAxis> {
        match std::mem::replace(self, Switched::No) {
            Switched::Axis(a) => Some(a),
            other => {
                *self = other;
                None
            }
        }
    }
}

/// Switches as `--switch-preempt` asks (see [`Switched`]).
pub fn preempt(args: &SwitchPreemptArgs) -> Result<Switched> {
    let modes = check(args)?;
    if modes.is_empty() {
        return Ok(Switched::No);
    }
    if !osutil::is_root() {
        bail!("--switch-preempt needs root (it writes /sys/kernel/debug/sched/preempt)");
    }
    osutil::stop::install_signal_flag()?;
    let ctl = Box::new(DebugfsPreempt::under(Path::new("/")));
    if let [mode] = modes.as_slice() {
        let guard = PreemptGuard::switch(ctl, mode.name()).map_err(flag)?;
        if guard.switched() {
            osutil::msg!(
                "preemptlab: preemption model {} -> {mode} for this run; switched back when it ends",
                guard.before()
            );
        }
        return Ok(Switched::Run { _guard: guard });
    }
    let names: Vec<&str> = modes.iter().map(|m| m.name()).collect();
    let guard = PreemptGuard::hold(ctl, &names).map_err(flag)?;
    osutil::msg!(
        "preemptlab: every cell under {}, the preemption model switched between them; back to {} when the run ends",
        names.join(" and "),
        guard.before()
    );
    Ok(Switched::Axis(ModelAxis {
        models: modes,
        switch: Box::new(guard),
    }))
}

/// The modes `--switch-preempt` names, checked without touching the host (`vm` checks its guest command
/// so): each a model's name, none twice.
pub fn check(args: &SwitchPreemptArgs) -> Result<Vec<Model>> {
    let mut modes: Vec<Model> = Vec::new();
    for s in &args.switch_preempt {
        check_preempt_mode(s).map_err(flag)?;
        let m = Model::parse(s).map_err(|e| anyhow!("--switch-preempt {e}"))?;
        if modes.contains(&m) {
            bail!(
                "--switch-preempt {}: {m} given twice",
                args.switch_preempt.join(",")
            );
        }
        modes.push(m);
    }
    Ok(modes)
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
