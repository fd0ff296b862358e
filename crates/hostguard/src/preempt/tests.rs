//! `preempt`'s unit tests: the guard on a stand-in for the kernel's control file, records in a temp dir.

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
    fn from_text(text: &str) -> Kernel {
        Kernel {
            text: Rc::new(RefCell::new(text.to_string())),
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
        PreemptGuard::hold_recorded_in(Box::new(k.clone()), &["none", "lazy"], dir.path()).unwrap();
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
    // A live run (a child of this test, named by its pid and start time) holds a switch from full.
    let mut run = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let ticks = crate::hugetlb_pool::start_ticks(run.id()).unwrap();
    let record = serde_json::json!({
        "preempt_file": k.path(), "restore_to": "full", "pid": run.id(), "start_ticks": ticks,
    });
    std::fs::write(dir.path().join("preempt.json"), record.to_string()).unwrap();
    let e = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "lazy", dir.path())
        .unwrap_err()
        .to_string();
    let _ = run.kill();
    let _ = run.wait();
    assert!(
        e.contains(&format!(
            "run {} has the preemption model switched",
            run.id()
        )),
        "{e}"
    );
    assert_eq!(k.active(), "none", "nothing written");
    assert!(dir.path().join("preempt.json").exists(), "its record kept");
}

/// Regression (issue 46 item 7): a record naming a live pid that is not the run that wrote it (the pid
/// reused after a crash) blocked every later switch for ever ("wait for it to end"). A record with the
/// run's start time is that run's only when the time matches; one written before the start time was
/// kept, only when the process is a preemptlab. Here pid 1 (init) is neither: the dead run's switch is
/// undone and the new one goes ahead.
#[test]
fn a_preempt_record_naming_a_reused_pid_blocks_every_switch_regression() {
    let own_ticks = crate::hugetlb_pool::start_ticks(1).unwrap();
    for record in [
        serde_json::json!({"restore_to": "full", "pid": 1, "start_ticks": own_ticks + 1}),
        serde_json::json!({"restore_to": "full", "pid": 1}),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let k = Kernel::from_fixture("hugepages-1g-thp-always");
        k.write("none").unwrap();
        let mut record = record;
        record["preempt_file"] = k.path().into();
        std::fs::write(dir.path().join("preempt.json"), record.to_string()).unwrap();
        let g = PreemptGuard::switch_recorded_in(Box::new(k.clone()), "lazy", dir.path())
            .unwrap_or_else(|e| panic!("{record}: {e}"));
        assert_eq!(
            g.before(),
            "full",
            "{record}: the dead run's switch undone first"
        );
        drop(g);
        assert_eq!(k.active(), "full");
        assert!(!dir.path().join("preempt.json").exists());
    }
}

/// Regression (issue 46 item 7): a FIFO where the record lives hung the switch (reading it waits for a
/// writer), and the stop signals could not end it. Refused at once, naming it; nothing switched.
#[test]
fn a_fifo_where_the_preempt_record_lives_hangs_the_run_regression() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("preempt.json");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path in this test's own temp dir.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let k = Kernel::from_fixture("hugepages-1g-thp-always");
    let text = k.text.borrow().clone();
    let records = dir.path().to_path_buf();
    let e = crate::hugetlb_pool::tests::within(5, move || {
        let k = Kernel::from_text(&text);
        PreemptGuard::switch_recorded_in(Box::new(k), "lazy", &records)
            .map(drop)
            .map_err(|e| e.to_string())
    })
    .unwrap_err();
    assert!(
        e.contains("preempt.json") && e.contains("a FIFO, not a regular file"),
        "{e}"
    );
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
