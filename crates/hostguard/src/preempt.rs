//! The preemption-model guard: [`PreemptGuard`] switches the kernel's preemption model through
//! `/sys/kernel/debug/sched/preempt` (PREEMPT_DYNAMIC kernels, root, debugfs mounted, not locked down) and
//! switches it back on drop, with a crash record under [`crate::record_dir`] that the next switch undoes
//! when its run died.

use std::path::PathBuf;

use osutil::explain_io_error;

use crate::record_dir;

/// The kernel's switch of the preemption model: `/sys/kernel/debug/sched/preempt`. Reading it prints the
/// offered modes with the active one in parentheses (`none voluntary (full) lazy`; Linux 7.0 on x86 and
/// arm64 offers `full lazy` only); writing a mode's name switches to it, and an unknown or unsupported
/// name fails with EINVAL.
pub trait PreemptControl {
    /// Where it lives, for messages and the crash record.
    fn path(&self) -> String;
    /// Its text.
    fn read(&self) -> std::io::Result<String>;
    /// Asks for `mode`.
    fn write(&self, mode: &str) -> std::io::Result<()>;
}

/// The real file, under a root directory (`/` on the host).
#[derive(Debug, Clone)]
pub struct DebugfsPreempt {
    file: PathBuf,
}

impl DebugfsPreempt {
    /// `<root>/sys/kernel/debug/sched/preempt`.
    pub fn under(root: &std::path::Path) -> DebugfsPreempt {
        DebugfsPreempt {
            file: root.join("sys/kernel/debug/sched/preempt"),
        }
    }
}

impl PreemptControl for DebugfsPreempt {
    fn path(&self) -> String {
        self.file.display().to_string()
    }
    fn read(&self) -> std::io::Result<String> {
        std::fs::read_to_string(&self.file)
    }
    fn write(&self, mode: &str) -> std::io::Result<()> {
        std::fs::write(&self.file, mode)
    }
}

/// The preemption modes a PREEMPT_DYNAMIC kernel can offer.
pub const PREEMPT_MODES: [&str; 4] = ["none", "voluntary", "full", "lazy"];

/// Why the preemption model was not switched. `UnknownMode` and `NotOffered` start with the mode asked
/// for (a command line puts its option's name before it); `HeldByRun` is about the switch as a whole.
#[derive(Debug, thiserror::Error)]
pub enum PreemptError {
    /// Not one of [`PREEMPT_MODES`].
    #[error("{mode}: one of {}", PREEMPT_MODES.join(", "))]
    UnknownMode {
        /// The mode asked for.
        mode: String,
    },
    /// A mode this kernel does not offer.
    #[error("{mode}: this kernel offers {} ({path}); Linux 7.0 dropped none and voluntary on most architectures", .offered.join(", "))]
    NotOffered {
        /// The mode asked for.
        mode: String,
        /// The modes the kernel offers.
        offered: Vec<String>,
        /// The control file.
        path: String,
    },
    /// A live run holds a switch (its "before" would be taken for the host's own mode).
    #[error("preemptlab run {pid} has the preemption model switched; wait for it to end")]
    HeldByRun {
        /// That run's process.
        pid: u64,
    },
    /// The kernel's mode is not the one this run switched to: something else switched it.
    #[error("the preemption model is {now}, not {mode}: something else switched it ({path})")]
    Changed {
        /// The control file.
        path: String,
        /// The mode this run set.
        mode: String,
        /// The mode it reports.
        now: String,
    },
    /// The control file could not be read.
    #[error("switching the preemption model: reading {path}: {}; {}", explain_io_error(.err), read_fix(.err))]
    Read {
        /// The control file.
        path: String,
        /// What the read said.
        err: std::io::Error,
    },
    /// The control file's text is not a list of modes.
    #[error("switching the preemption model: {path}: {err}")]
    Unparseable {
        /// The control file.
        path: String,
        /// What is wrong with its text.
        err: hostfacts::parse::DebugfsPreemptError,
    },
    /// Something other than a regular file is where the record lives (a FIFO there hung the run).
    #[error("the preemption model's record {}: {}", .path.display(), explain_io_error(.err))]
    NotARecord {
        /// The record's path.
        path: PathBuf,
        /// What is there, and the fix.
        err: std::io::Error,
    },
    /// The crash record could not be written.
    #[error("writing {}: {}", .path.display(), explain_io_error(.err))]
    Record {
        /// The record or its directory.
        path: PathBuf,
        /// What the write said.
        err: std::io::Error,
    },
    /// The kernel refused the mode.
    #[error("switching the preemption model: writing {mode} to {path}: {}", explain_io_error(.err))]
    Write {
        /// The mode asked for.
        mode: String,
        /// The control file.
        path: String,
        /// What the write said.
        err: std::io::Error,
    },
    /// The kernel took the write but reports another mode.
    #[error("switching the preemption model: asked {path} for {mode}, the kernel reports {now}")]
    NotTaken {
        /// The control file.
        path: String,
        /// The mode asked for.
        mode: String,
        /// The mode it reports.
        now: String,
    },
}

/// What to do when the control file cannot be read.
fn read_fix(err: &std::io::Error) -> &'static str {
    if err.kind() == std::io::ErrorKind::NotFound {
        "mount debugfs (mount -t debugfs none /sys/kernel/debug) on a PREEMPT_DYNAMIC kernel"
    } else {
        "this host cannot switch its preemption model: `preemptlab sim --models` models it"
    }
}

/// Is `mode` one of [`PREEMPT_MODES`]? The error names them.
pub fn check_preempt_mode(mode: &str) -> Result<(), PreemptError> {
    if PREEMPT_MODES.contains(&mode) {
        Ok(())
    } else {
        Err(PreemptError::UnknownMode { mode: mode.into() })
    }
}

fn preempt_state(ctl: &dyn PreemptControl) -> Result<(String, Vec<String>), PreemptError> {
    let path = ctl.path();
    let text = ctl.read().map_err(|err| PreemptError::Read {
        path: path.clone(),
        err,
    })?;
    hostfacts::parse::debugfs_preempt(&text).map_err(|err| PreemptError::Unparseable { path, err })
}

/// The preemption model temporarily switched; switched back on drop.
pub struct PreemptGuard {
    ctl: Box<dyn PreemptControl>,
    before: String,
    record: PathBuf,
    /// Whether this guard wrote the record (it removes it when done, if the record is still its own).
    claimed: bool,
    /// Whether it switched the mode (the drop switches back).
    active: bool,
    /// The mode it last switched to.
    last: Option<String>,
}

impl std::fmt::Debug for PreemptGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreemptGuard")
            .field("path", &self.ctl.path())
            .field("before", &self.before)
            .field("active", &self.active)
            .finish()
    }
}

impl PreemptGuard {
    /// Switches to `mode` and checks the kernel took it. A mode already active gives a guard that changes
    /// nothing. Before anything it restores a switch a dead run left behind (so "before" is the host's own
    /// mode), and writes its own record until the drop restores the mode.
    pub fn switch(ctl: Box<dyn PreemptControl>, mode: &str) -> Result<PreemptGuard, PreemptError> {
        PreemptGuard::switch_recorded_in(ctl, mode, &record_dir())
    }

    /// [`PreemptGuard::switch`] with its record in `dir`.
    pub fn switch_recorded_in(
        ctl: Box<dyn PreemptControl>,
        mode: &str,
        dir: &std::path::Path,
    ) -> Result<PreemptGuard, PreemptError> {
        let mut guard = PreemptGuard::hold_recorded_in(ctl, &[mode], dir)?;
        guard.to(mode)?;
        Ok(guard)
        // On an error the guard drops here and switches back.
    }

    /// A guard that has switched nothing yet, for a run that moves between `modes` ([`PreemptGuard::to`]);
    /// the drop switches back to the mode the kernel has now. Checks every mode is known and offered
    /// before anything, and restores a switch a dead run left behind first (so "before" is the host's own
    /// mode). It writes its record at once, so that another run refuses to switch from here on
    /// ([`PreemptError::HeldByRun`]), not only from the first switch.
    pub fn hold(
        ctl: Box<dyn PreemptControl>,
        modes: &[&str],
    ) -> Result<PreemptGuard, PreemptError> {
        PreemptGuard::hold_recorded_in(ctl, modes, &record_dir())
    }

    /// [`PreemptGuard::hold`] with its record in `dir`.
    pub fn hold_recorded_in(
        ctl: Box<dyn PreemptControl>,
        modes: &[&str],
        dir: &std::path::Path,
    ) -> Result<PreemptGuard, PreemptError> {
        for mode in modes {
            check_preempt_mode(mode)?;
        }
        for line in settle_record(ctl.as_ref(), &dir.join("preempt.json"))? {
            osutil::msg!("preemptlab: {line}");
        }
        let (before, offered) = preempt_state(ctl.as_ref())?;
        let path = ctl.path();
        if let Some(mode) = modes.iter().find(|m| !offered.iter().any(|o| o == *m)) {
            return Err(PreemptError::NotOffered {
                mode: mode.to_string(),
                offered,
                path,
            });
        }
        let mut guard = PreemptGuard {
            ctl,
            before,
            record: dir.join("preempt.json"),
            claimed: false,
            active: false,
            last: None,
        };
        guard.claim(dir, &path)?;
        Ok(guard)
    }

    /// Writes the record (the file, the mode to restore, this process), created new: a record of a live
    /// run that appeared since [`settle_record`] holds the switch. One that is no run's (not a record, or
    /// its run dead and its mode not restorable) is written over, as before there were holds.
    fn claim(&mut self, dir: &std::path::Path, path: &str) -> Result<(), PreemptError> {
        use std::io::Write;
        std::fs::create_dir_all(dir).map_err(|err| PreemptError::Record {
            path: dir.to_path_buf(),
            err,
        })?;
        let me = std::process::id();
        let record = serde_json::json!({
            "preempt_file": path,
            "restore_to": self.before,
            "pid": me,
            // With the pid, names this run: a pid reused after a crash is another process.
            "start_ticks": crate::hugetlb_pool::start_ticks(me).unwrap_or(0),
        });
        let text = format!("{record}\n");
        let failed = |err| PreemptError::Record {
            path: self.record.clone(),
            err,
        };
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.record);
        let written = match created {
            Ok(mut f) => f.write_all(text.as_bytes()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if let Some(err) = crate::not_a_record(&self.record) {
                    return Err(PreemptError::NotARecord {
                        path: self.record.clone(),
                        err,
                    });
                }
                match record_value(&self.record).as_ref().and_then(live_run) {
                    Some(pid) => return Err(PreemptError::HeldByRun { pid }),
                    None => std::fs::write(&self.record, &text),
                }
            }
            Err(err) => return Err(failed(err)),
        };
        if let Err(err) = written {
            // A record cut short would block every later run: none at all.
            let _ = std::fs::remove_file(&self.record);
            return Err(failed(err));
        }
        self.claimed = true;
        Ok(())
    }

    /// Switches to `mode` and checks the kernel took it; nothing when it is active already. The drop
    /// switches back to [`PreemptGuard::before`] whatever the mode in between.
    pub fn to(&mut self, mode: &str) -> Result<(), PreemptError> {
        check_preempt_mode(mode)?;
        let (now, offered) = preempt_state(self.ctl.as_ref())?;
        let path = self.ctl.path();
        if now == mode {
            self.last = Some(now);
            return Ok(());
        }
        if !offered.iter().any(|m| m == mode) {
            return Err(PreemptError::NotOffered {
                mode: mode.into(),
                offered,
                path,
            });
        }
        // The record was written by the hold, before any write here.
        if let Err(err) = self.ctl.write(mode) {
            return Err(PreemptError::Write {
                mode: mode.into(),
                path,
                err,
            });
        }
        self.active = true;
        self.last = Some(mode.to_string());
        match preempt_state(self.ctl.as_ref()) {
            Ok((now, _)) if now == mode => Ok(()),
            Ok((now, _)) => Err(PreemptError::NotTaken {
                path,
                mode: mode.into(),
                now,
            }),
            Err(e) => Err(e),
        }
    }

    /// Checks the kernel is still in `mode`, the mode the guard switched to (something else may have
    /// switched it since).
    pub fn still(&self, mode: &str) -> Result<(), PreemptError> {
        let (now, _) = preempt_state(self.ctl.as_ref())?;
        if now == mode {
            Ok(())
        } else {
            Err(PreemptError::Changed {
                path: self.ctl.path(),
                mode: mode.into(),
                now,
            })
        }
    }

    /// The mode before the switch.
    pub fn before(&self) -> &str {
        &self.before
    }

    /// Whether this guard changed the mode (and will switch it back).
    pub fn switched(&self) -> bool {
        self.active
    }

    fn restore(&mut self) {
        if !self.active {
            self.unclaim();
            return;
        }
        // Someone else switched the mode since this guard's last switch: say so before writing over it.
        if let (Ok((now, _)), Some(last)) = (preempt_state(self.ctl.as_ref()), &self.last) {
            if now != *last && now != self.before {
                osutil::msg!(
                    "preemptlab: the preemption model is {now}, not the {last} this run set: something else switched it; switching back to {} as before the run",
                    self.before
                );
            }
        }
        let back = self
            .ctl
            .write(&self.before)
            .map_err(|e| explain_io_error(&e))
            .and_then(|()| {
                preempt_state(self.ctl.as_ref())
                    .map(|(now, _)| now)
                    .map_err(|e| e.to_string())
            })
            .and_then(|now| {
                if now == self.before {
                    Ok(())
                } else {
                    Err(format!("the kernel reports {now}"))
                }
            });
        match back {
            Ok(()) => {
                self.active = false;
                self.unclaim();
            }
            // Keep the record: the next run retries.
            Err(e) => osutil::msg!(
                "preemptlab: switching the preemption model back to {} ({}): {e}",
                self.before,
                self.ctl.path()
            ),
        }
    }
}

impl PreemptGuard {
    /// Removes the record if this guard wrote it and it is still its own.
    fn unclaim(&mut self) {
        if self.claimed && record_pid(&self.record) == Some(u64::from(std::process::id())) {
            let _ = std::fs::remove_file(&self.record);
        }
        self.claimed = false;
    }
}

/// The record at `path`, when a regular file holding JSON is there.
fn record_value(path: &std::path::Path) -> Option<serde_json::Value> {
    serde_json::from_str(&crate::read_record(path).ok()??).ok()
}

/// The process a record names.
fn record_pid(path: &std::path::Path) -> Option<u64> {
    record_value(path)?["pid"].as_u64()
}

/// The run of a record, when it is still running: its pid runs and is that run, by the start time the
/// record keeps (`/proc/PID/stat` field 22, as the pool's shares do), or, in a record written before it was
/// kept, by the process's name. A pid reused after a crash (any other process) is no run: it blocked every
/// later switch for ever, "wait for it to end" (issue 46 item 7).
fn live_run(v: &serde_json::Value) -> Option<u64> {
    let pid = v["pid"].as_u64()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let same = match v["start_ticks"].as_u64().filter(|&t| t != 0) {
        Some(t) => hostfacts::hugepages::record::stat_start_ticks(&stat) == Some(t),
        None => stat_comm(&stat) == Some("preemptlab"),
    };
    same.then_some(pid)
}

/// The command name in the text of `/proc/PID/stat` (in parentheses; it may hold spaces and parentheses).
fn stat_comm(stat: &str) -> Option<&str> {
    stat.get(stat.find('(')? + 1..stat.rfind(')')?)
}

impl Drop for PreemptGuard {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Deals with an earlier run's switch record before a new switch: one whose run died is undone (its mode
/// written back to the file it names, when that is this switch's file), so that "before" is the host's own
/// mode; one whose run is alive refuses the new switch (it would take that run's mode for the host's and
/// restore it). Returns what it did, one line each.
fn settle_record(
    ctl: &dyn PreemptControl,
    path: &std::path::Path,
) -> Result<Vec<String>, PreemptError> {
    let text = match crate::read_record(path) {
        Ok(Some(text)) => text,
        Ok(None) => return Ok(Vec::new()),
        Err(err) => {
            return Err(PreemptError::NotARecord {
                path: path.to_path_buf(),
                err,
            })
        }
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(vec![format!(
            "{}: not a preemptlab record, left alone",
            path.display()
        )]);
    };
    let Some(pid) = v["pid"].as_u64() else {
        return Ok(Vec::new());
    };
    if let Some(pid) = live_run(&v) {
        return Err(PreemptError::HeldByRun { pid });
    }
    let (Some(file), Some(to)) = (v["preempt_file"].as_str(), v["restore_to"].as_str()) else {
        return Ok(Vec::new());
    };
    if file != ctl.path() {
        return Ok(Vec::new()); // another host root
    }
    if !PREEMPT_MODES.contains(&to) {
        return Ok(vec![format!(
            "{}: unknown mode {to:?}, left alone",
            path.display()
        )]);
    }
    Ok(match ctl.write(to) {
        Ok(()) => {
            let _ = std::fs::remove_file(path);
            vec![format!(
                "switched the preemption model back to {to}, left switched by run {pid}"
            )]
        }
        Err(e) => vec![format!(
            "could not switch the preemption model back to {to} (left by run {pid}): {}",
            explain_io_error(&e)
        )],
    })
}

#[cfg(test)]
mod tests;
