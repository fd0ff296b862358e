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
        let record = serde_json::json!({
            "preempt_file": path,
            "restore_to": self.before,
            "pid": std::process::id(),
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
                match record_pid(&self.record) {
                    Some(pid) if std::path::Path::new(&format!("/proc/{pid}")).exists() => {
                        return Err(PreemptError::HeldByRun { pid });
                    }
                    _ => std::fs::write(&self.record, &text),
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

/// The process a record names.
fn record_pid(path: &std::path::Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str::<serde_json::Value>(&text).ok()?["pid"].as_u64()
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
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(Vec::new());
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
    if std::path::Path::new(&format!("/proc/{pid}")).exists() {
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
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    /// Stands in for the kernel's file, which this machine refuses to read or write even as root: reads
    /// give the offered modes with the active one in parentheses, a write of an offered mode moves the
    /// parentheses, any other write fails with EINVAL, as `kernel/sched/debug.c` does.
    #[derive(Clone)]
    struct Kernel {
        text: Rc<RefCell<String>>,
        writes: Rc<Cell<u32>>,
        refuse_reads: bool,
        ignore_writes: bool,
        refuse_writes: bool,
    }

    impl Kernel {
        fn from_fixture(host: &str) -> Kernel {
            let p = format!(
                "{}/../../tests/fixtures/{host}/sys/kernel/debug/sched/preempt",
                env!("CARGO_MANIFEST_DIR")
            );
            Kernel {
                text: Rc::new(RefCell::new(std::fs::read_to_string(&p).expect(&p))),
                writes: Rc::new(Cell::new(0)),
                refuse_reads: false,
                ignore_writes: false,
                refuse_writes: false,
            }
        }
        fn active(&self) -> String {
            hostfacts::parse::debugfs_preempt(&self.text.borrow())
                .unwrap()
                .0
        }
    }

    impl PreemptControl for Kernel {
        fn path(&self) -> String {
            "/sys/kernel/debug/sched/preempt".into()
        }
        fn read(&self) -> std::io::Result<String> {
            if self.refuse_reads {
                return Err(std::io::Error::from_raw_os_error(libc::EPERM));
            }
            Ok(self.text.borrow().clone())
        }
        fn write(&self, mode: &str) -> std::io::Result<()> {
            self.writes.set(self.writes.get() + 1);
            if self.refuse_writes {
                return Err(std::io::Error::from_raw_os_error(libc::EPERM));
            }
            let offered = hostfacts::parse::choices(&self.text.borrow());
            if !offered.iter().any(|m| m == mode) {
                return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
            }
            if !self.ignore_writes {
                let text: Vec<String> = offered
                    .iter()
                    .map(|m| {
                        if m == mode {
                            format!("({m})")
                        } else {
                            m.clone()
                        }
                    })
                    .collect();
                *self.text.borrow_mut() = text.join(" ") + "\n";
            }
            Ok(())
        }
    }

    #[test]
    fn switches_and_switches_back_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let k = Kernel::from_fixture("hugepages-1g-thp-always");
        assert_eq!(k.active(), "full");
        let g = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "lazy", dir.path()).unwrap();
        assert!(g.switched());
        assert_eq!(g.before(), "full");
        assert_eq!(k.active(), "lazy");
        assert!(
            dir.path().join("preempt.json").exists(),
            "record while switched"
        );
        drop(g);
        assert_eq!(k.active(), "full");
        assert!(!dir.path().join("preempt.json").exists(), "record removed");
    }

    #[test]
    fn a_held_guard_moves_between_modes_and_switches_back_once() {
        let dir = tempfile::tempdir().unwrap();
        let k = Kernel::from_fixture("hugepages-1g-thp-always");
        let rec = dir.path().join("preempt.json");
        let mut g =
            PreemptGuard::hold_recorded_in(Box::new(k.clone()), &["none", "lazy"], dir.path())
                .unwrap();
        assert!(!g.switched(), "nothing switched yet");
        assert!(rec.exists(), "the record from the hold on");
        assert_eq!(k.writes.get(), 0);
        // Another run cannot switch while this one holds, switched or not.
        let e = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "lazy", dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("has the preemption model switched"), "{e}");
        assert_eq!(k.writes.get(), 0);
        g.to("none").unwrap();
        assert_eq!(k.active(), "none");
        assert!(rec.exists(), "record while switched");
        g.to("lazy").unwrap();
        assert_eq!(k.active(), "lazy");
        g.to("lazy").unwrap();
        assert_eq!(k.writes.get(), 2, "a mode already active is not written");
        g.still("lazy").unwrap();
        // Something else switches the mode: the guard sees it, and the drop still restores the host's.
        k.write("voluntary").unwrap();
        let e = g.still("lazy").unwrap_err().to_string();
        assert!(e.contains("is voluntary, not lazy"), "{e}");
        let e = g.to("rt").unwrap_err().to_string();
        assert_eq!(e, "rt: one of none, voluntary, full, lazy");
        drop(g);
        assert_eq!(
            k.active(),
            "full",
            "the host's own mode, not the first switched to"
        );
        assert!(!rec.exists(), "record removed");
        // Every mode is checked before anything: one the kernel does not offer refuses the hold.
        let k7 = Kernel::from_fixture("linux-7.0-lazy-debugfs");
        let e = PreemptGuard::hold_recorded_in(Box::new(k7.clone()), &["full", "none"], dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("none: this kernel offers full, lazy"), "{e}");
        assert_eq!(k7.writes.get(), 0);
    }

    #[test]
    fn the_active_mode_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let k = Kernel::from_fixture("linux-7.0-lazy-debugfs");
        let g = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "lazy", dir.path()).unwrap();
        assert!(!g.switched());
        drop(g);
        assert_eq!(k.writes.get(), 0);
    }

    #[test]
    fn a_mode_the_kernel_does_not_offer_is_refused_before_any_write() {
        let dir = tempfile::tempdir().unwrap();
        let k = Kernel::from_fixture("linux-7.0-lazy-debugfs");
        let e = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "none", dir.path())
            .unwrap_err()
            .to_string();
        // The mode first, no option's name: the command line puts its own before it.
        assert!(e.starts_with("none: this kernel offers full, lazy"), "{e}");
        let e = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "rt", dir.path())
            .unwrap_err()
            .to_string();
        assert_eq!(e, "rt: one of none, voluntary, full, lazy");
        assert_eq!(k.writes.get(), 0);
        assert_eq!(k.active(), "lazy");
        assert!(!dir.path().join("preempt.json").exists());
    }

    #[test]
    fn a_refused_read_says_this_host_cannot_switch() {
        let dir = tempfile::tempdir().unwrap();
        let mut k = Kernel::from_fixture("hugepages-1g-thp-always");
        k.refuse_reads = true;
        let e = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "lazy", dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot switch") && e.contains("sim"), "{e}");
        assert_eq!(k.writes.get(), 0);
        // And the real file on a root without debugfs names the mount.
        let e = PreemptGuard::switch_recorded_in(
            Box::new(DebugfsPreempt::under(dir.path())),
            "lazy",
            dir.path(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("mount -t debugfs"), "{e}");
    }

    #[test]
    fn a_switch_the_kernel_did_not_take_is_an_error_and_undone() {
        let dir = tempfile::tempdir().unwrap();
        let mut k = Kernel::from_fixture("hugepages-1g-thp-always");
        k.ignore_writes = true;
        let e = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "none", dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("kernel reports full"), "{e}");
        // The switch and the way back were both written; no record stays.
        assert_eq!(k.writes.get(), 2);
        assert!(!dir.path().join("preempt.json").exists());
    }

    #[test]
    fn a_refused_write_leaves_neither_a_switch_nor_a_record() {
        let dir = tempfile::tempdir().unwrap();
        let mut k = Kernel::from_fixture("hugepages-1g-thp-always");
        k.refuse_writes = true;
        let e = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "lazy", dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("writing lazy"), "{e}");
        assert_eq!(k.writes.get(), 1, "no write back: nothing was switched");
        assert!(!dir.path().join("preempt.json").exists());
    }

    #[test]
    fn a_file_that_is_no_runs_record_is_written_over_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let k = Kernel::from_fixture("hugepages-1g-thp-always");
        let rec = dir.path().join("preempt.json");
        std::fs::write(&rec, "not json").unwrap();
        let g = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "lazy", dir.path()).unwrap();
        assert_eq!(k.active(), "lazy");
        drop(g);
        assert_eq!(k.active(), "full");
        assert!(!rec.exists());
    }

    #[test]
    fn a_switch_held_by_a_live_run_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let k = Kernel::from_fixture("hugepages-1g-thp-always");
        k.write("none").unwrap();
        // Run 1 (init, always alive) holds a switch from full.
        let record = serde_json::json!({"preempt_file": k.path(), "restore_to": "full", "pid": 1});
        std::fs::write(dir.path().join("preempt.json"), record.to_string()).unwrap();
        let e = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "lazy", dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("run 1 has the preemption model switched"), "{e}");
        assert_eq!(k.active(), "none", "nothing written");
        assert!(dir.path().join("preempt.json").exists(), "its record kept");
    }

    #[test]
    fn a_switch_left_by_a_dead_run_is_undone_first() {
        let dir = tempfile::tempdir().unwrap();
        let k = Kernel::from_fixture("hugepages-1g-thp-always");
        // A run (pid beyond any pid_max) switched full -> none and died.
        k.write("none").unwrap();
        let record = serde_json::json!({
            "preempt_file": k.path(), "restore_to": "full", "pid": 1u64 << 40,
        });
        std::fs::write(dir.path().join("preempt.json"), record.to_string()).unwrap();
        let g = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "lazy", dir.path()).unwrap();
        assert_eq!(
            g.before(),
            "full",
            "the host's own mode, not the dead run's"
        );
        drop(g);
        assert_eq!(k.active(), "full");
        assert!(!dir.path().join("preempt.json").exists());
    }
}
