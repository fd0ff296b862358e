//! The driver on a scripted bench: the order of its steps, what the file says after each, and how
//! skipped, failed, interrupted and aborted runs end.

use super::*;
use axes::{NetPath, NetTest};
use hostguard::preempt::PreemptError;
use results::net::{Cell as NetCell, NetResult, Rep, Spec};

/// A bench whose steps are scripted per (cell, round); it records what ran and what the file said.
struct Scripted {
    script: fn(usize, u32) -> Step<Rep, OutputError>,
    out: std::path::PathBuf,
    log: Vec<String>,
}

impl Scripted {
    fn file(&self) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(&self.out).unwrap()).unwrap()
    }
}

impl Bench for Scripted {
    type Doc = NetResult;
    type Shared = usize;
    type Error = OutputError;

    fn open(
        &mut self,
        _: &mut NetResult,
        cells: Range<usize>,
        round: u32,
    ) -> Result<usize, Unopened<OutputError>> {
        self.log.push(format!("open {cells:?} r{round}"));
        Ok(cells.start)
    }

    fn rep(&mut self, group: &mut usize, cell: &NetCell, at: At) -> Step<Rep, OutputError> {
        assert_eq!(
            cell.msg_size, at.cell,
            "the cell asked for is the one given"
        );
        let f = self.file();
        self.log.push(format!(
            "g{group} c{} r{} file:{}",
            at.cell,
            at.round,
            f["cells"].as_array().unwrap().len()
        ));
        assert_eq!(f["interrupted"], true, "until the matrix completes");
        (self.script)(at.cell, at.round)
    }

    fn close(&mut self, group: usize) -> Result<(), OutputError> {
        self.log.push(format!("close g{group}"));
        Ok(())
    }

    fn summarize(&self, _: &mut NetCell) {}

    fn on_done(&mut self, cell: &NetCell) {
        self.log
            .push(format!("done c{} {:?}", cell.msg_size, cell.status));
    }
}

fn doc(cells: usize, skip: &[usize]) -> NetResult {
    let spec = Spec {
        tests: vec![NetTest::TcpStream],
        msg_sizes: (0..cells).collect(),
        streams: 1,
        duration_s: 1.0,
        repeat: 2,
        netns: false,
    };
    let cells = (0..cells)
        .map(|i| NetCell {
            test: NetTest::TcpStream,
            msg_size: i,
            streams: 1,
            path: NetPath::Loopback,
            preempt: None,
            status: if skip.contains(&i) {
                Status::Skipped
            } else {
                Status::Ok
            },
            reason: skip.contains(&i).then(|| "cannot".to_string()),
            reps: vec![],
            summary: None,
        })
        .collect();
    NetResult {
        envelope: unfinished(Kind::BenchNet),
        spec,
        cells,
    }
}

fn run(
    order: Order,
    groups: Vec<Range<usize>>,
    doc: NetResult,
    script: fn(usize, u32) -> Step<Rep, OutputError>,
) -> (Result<NetResult, OutputError>, Scripted, tempfile::TempDir) {
    run_switching(order, groups, doc, script, None)
}

fn run_switching(
    order: Order,
    groups: Vec<Range<usize>>,
    doc: NetResult,
    script: fn(usize, u32) -> Step<Rep, OutputError>,
    switching: Option<Switching>,
) -> (Result<NetResult, OutputError>, Scripted, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    // The file exists before the first step (a caller that wrote it, as bench pg does).
    osutil::output::write_json(&out, &doc).unwrap();
    let m = Matrix {
        groups,
        repeat: 2,
        order,
        noun: "runs",
        out: &out,
        written: true,
        switching,
    };
    let mut b = Scripted {
        script,
        out: out.clone(),
        log: vec![],
    };
    let r = m.run(&mut b, doc);
    (r, b, dir)
}

#[test]
fn rounds_run_every_cell_once_per_round_group_by_group_and_skip_what_cannot_run() {
    let (r, b, _dir) = run(
        Order::Rounds,
        groups_of(4, 2),
        doc(4, &[1]),
        |c, r| match (c, r) {
            (2, 0) => Step::Cell(Status::Failed, "broke".into()),
            _ => Step::Rep(Rep::default()),
        },
    );
    let r = r.unwrap();
    assert_eq!(
        b.log,
        [
            "open 0..2 r0",
            "g0 c0 r0 file:4",
            "close g0",
            "open 2..4 r0",
            "g2 c2 r0 file:4",
            "done c2 Failed",
            "g2 c3 r0 file:4",
            "close g2",
            "open 0..2 r1",
            "g0 c0 r1 file:4",
            "done c0 Ok",
            "close g0",
            "open 2..4 r1",
            "g2 c3 r1 file:4",
            "done c3 Ok",
            "close g2",
        ]
    );
    let reps: Vec<usize> = r.cells.iter().map(|c| c.reps.len()).collect();
    assert_eq!(reps, [2, 0, 0, 2]);
    assert_eq!(r.cells[2].reason.as_deref(), Some("broke"));
    assert!(!r.envelope.interrupted);
    assert_eq!(
        b.file()["interrupted"],
        false,
        "the last write says how it ended"
    );
}

#[test]
fn a_failed_group_is_not_run_again_and_a_stop_marks_what_is_short() {
    let (r, b, _dir) = run(Order::Rounds, groups_of(4, 2), doc(4, &[]), |c, r| {
        match (c, r) {
            (1, 0) => Step::Group("the server died".into()),
            (3, 1) => Step::Interrupted,
            _ => Step::Rep(Rep::default()),
        }
    });
    let r = r.unwrap();
    let status: Vec<Status> = r.cells.iter().map(|c| c.status).collect();
    assert_eq!(
        status,
        [
            Status::Failed,
            Status::Failed,
            Status::Ok,
            Status::Interrupted
        ]
    );
    assert_eq!(r.cells[0].reason.as_deref(), Some("the server died"));
    assert_eq!(
        r.cells[3].reason.as_deref(),
        Some("interrupted after 1 of 2 runs")
    );
    assert!(
        b.log.iter().all(|l| !l.starts_with("g0 c0 r1")),
        "{:?}",
        b.log
    );
    assert!(r.envelope.interrupted);
    assert_eq!(b.file()["interrupted"], true);
    assert_eq!(b.file()["cells"][3]["status"], "interrupted");
}

/// Regression: a group that failed (`Step::Group`) marked every cell of it failed, the cells skipped at
/// planning and those that failed on their own in an earlier round included; they keep their status
/// and reason.
#[test]
fn a_failed_group_leaves_its_skipped_cells_skipped_regression() {
    let (r, _b, _dir) = run(
        Order::Rounds,
        groups_of(4, 4),
        doc(4, &[0]),
        |c, r| match (c, r) {
            (1, 0) => Step::Cell(Status::Failed, "broke".into()),
            (3, 1) => Step::Group("the server died".into()),
            _ => Step::Rep(Rep::default()),
        },
    );
    let r = r.unwrap();
    let status: Vec<Status> = r.cells.iter().map(|c| c.status).collect();
    assert_eq!(
        status,
        [
            Status::Skipped,
            Status::Failed,
            Status::Failed,
            Status::Failed
        ]
    );
    let reasons: Vec<Option<&str>> = r.cells.iter().map(|c| c.reason.as_deref()).collect();
    assert_eq!(
        reasons,
        [
            Some("cannot"),
            Some("broke"),
            Some("the server died"),
            Some("the server died")
        ]
    );
}

#[test]
fn cell_major_cells_enter_the_file_when_done_and_a_stop_leaves_the_rest_out() {
    let (r, b, _dir) = run(
        Order::CellMajor,
        groups_of(4, 4),
        doc(4, &[0]),
        |c, r| match (c, r) {
            (2, 1) => Step::Interrupted,
            _ => Step::Rep(Rep::default()),
        },
    );
    let r = r.unwrap();
    assert_eq!(
        b.log,
        [
            "open 0..4 r0",
            "done c0 Skipped",
            "g0 c1 r0 file:1",
            "g0 c1 r1 file:1",
            "done c1 Ok",
            "g0 c2 r0 file:2",
            "g0 c2 r1 file:2",
            "done c2 Interrupted",
            "close g0",
        ]
    );
    assert_eq!(
        r.cells.len(),
        3,
        "the cell not reached is not in the result"
    );
    assert_eq!(b.file()["cells"].as_array().unwrap().len(), 3);
    assert_eq!(
        r.cells[2].reason.as_deref(),
        Some("interrupted after 1 of 2 runs")
    );
    assert!(r.envelope.interrupted);
}

#[test]
fn an_error_that_ends_the_run_leaves_a_file_that_says_interrupted() {
    let (r, b, _dir) = run(
        Order::CellMajor,
        groups_of(3, 1),
        doc(3, &[]),
        |c, _| match c {
            1 => Step::Abort(OutputError::Serialize {
                path: "x".into(),
                err: serde_json::from_str::<u8>("x").unwrap_err(),
            }),
            _ => Step::Rep(Rep::default()),
        },
    );
    assert!(r.is_err());
    assert_eq!(b.log.last().map(String::as_str), Some("close g1"));
    let f = b.file();
    assert_eq!(f["interrupted"], true);
    assert_eq!(f["cells"].as_array().unwrap().len(), 1, "the cells done");
}

/// Switches into a shared log; refuses `refuse` once `after` switches have been made; reports `drift`
/// (the model something else switched to) right after its `after`th switch when asked whether it is still
/// in its model; logs its drop (the host switched back).
struct LogSwitch {
    log: Log,
    refuse: Option<(Model, usize)>,
    drift: Option<(Model, usize)>,
    made: usize,
}

type Log = std::rc::Rc<std::cell::RefCell<Vec<String>>>;

impl SwitchModel for LogSwitch {
    fn to(&mut self, model: Model) -> Result<(), PreemptError> {
        self.log.borrow_mut().push(format!("to {model}"));
        if let Some((m, after)) = self.refuse {
            if m == model && self.made >= after {
                return Err(PreemptError::NotTaken {
                    path: "debugfs".into(),
                    mode: model.to_string(),
                    now: "full".into(),
                });
            }
        }
        self.made += 1;
        Ok(())
    }
    fn still(&self, model: Model) -> Result<(), PreemptError> {
        match self.drift {
            Some((now, after)) if self.made == after => Err(PreemptError::Changed {
                path: "debugfs".into(),
                mode: model.to_string(),
                now: now.to_string(),
            }),
            _ => Ok(()),
        }
    }
}

impl Drop for LogSwitch {
    fn drop(&mut self) {
        self.log.borrow_mut().push("dropped".into());
    }
}

#[test]
fn plan_repeats_the_cells_per_model_outermost_in_groups_that_keep_to_one_model() {
    let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let axis = ModelAxis {
        models: vec![Model::None, Model::Lazy],
        switch: Box::new(LogSwitch {
            log: log.clone(),
            refuse: None,
            drift: None,
            made: 0,
        }),
    };
    let mut cells: Vec<(u32, Option<Model>)> = (0..3).map(|i| (i, None)).collect();
    let (groups, sw) = axis.plan(&mut cells, 2, |c, m| c.1 = Some(m));
    let none = Some(Model::None);
    let lazy = Some(Model::Lazy);
    assert_eq!(
        cells,
        [
            (0, none),
            (1, none),
            (2, none),
            (0, lazy),
            (1, lazy),
            (2, lazy)
        ]
    );
    assert_eq!(groups, [0..2, 2..3, 3..5, 5..6]);
    assert_eq!(
        sw.of_group,
        [Model::None, Model::None, Model::Lazy, Model::Lazy]
    );
    assert_eq!(sw.blocks, 2);
    assert!(log.borrow().is_empty(), "planning switches nothing");
}

/// Four cells, two per model: none (0, 1), lazy (2, 3), a group each.
fn switching(refuse: Option<(Model, usize)>, drift: Option<(Model, usize)>) -> (Switching, Log) {
    let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let sw = Switching {
        of_group: vec![Model::None, Model::Lazy],
        blocks: 2,
        switch: Box::new(LogSwitch {
            log: log.clone(),
            refuse,
            drift,
            made: 0,
        }),
    };
    (sw, log)
}

/// Four cells, two per model (none: 0, 1; lazy: 2, 3), a group each, run under [`switching`]'s switch.
fn axis_run(
    order: Order,
    script: fn(usize, u32) -> Step<Rep, OutputError>,
    refuse: Option<(Model, usize)>,
    drift: Option<(Model, usize)>,
) -> (
    Result<NetResult, OutputError>,
    Scripted,
    Log,
    tempfile::TempDir,
) {
    let (sw, log) = switching(refuse, drift);
    let (r, b, dir) = run_switching(order, groups_of(4, 2), doc(4, &[]), script, Some(sw));
    (r, b, log, dir)
}

#[test]
fn rounds_switch_before_each_group_and_alternate_the_models_by_round() {
    let (r, b, switches, _dir) =
        axis_run(Order::Rounds, |_, _| Step::Rep(Rep::default()), None, None);
    let r = r.unwrap();
    assert!(r.cells.iter().all(|c| c.reps.len() == 2));
    // Round 0: none, then lazy; round 1: lazy, then none (it starts on the model round 0 ended on); the
    // switch dropped (the host switched back) when the run ended.
    assert_eq!(
        *switches.borrow(),
        ["to none", "to lazy", "to lazy", "to none", "dropped"]
    );
    let opens: Vec<&String> = b.log.iter().filter(|l| l.starts_with("open")).collect();
    assert_eq!(
        opens,
        [
            "open 0..2 r0",
            "open 2..4 r0",
            "open 2..4 r1",
            "open 0..2 r1"
        ]
    );
}

#[test]
fn a_switch_that_fails_fails_that_groups_cells_and_the_run_goes_on() {
    // lazy is refused after two switches: round 0 runs both models, round 1 only none.
    let (r, _b, switches, _dir) = axis_run(
        Order::Rounds,
        |_, _| Step::Rep(Rep::default()),
        Some((Model::Lazy, 2)),
        None,
    );
    let r = r.unwrap();
    assert_eq!(
        *switches.borrow(),
        ["to none", "to lazy", "to lazy", "to none", "dropped"]
    );
    for c in &r.cells[..2] {
        assert_eq!((c.status, c.reps.len()), (Status::Ok, 2));
    }
    for c in &r.cells[2..] {
        assert_eq!(c.status, Status::Failed);
        assert_eq!(c.reps.len(), 1, "round 0's data kept");
        assert_eq!(
            c.reason.as_deref(),
            Some("switching the preemption model to lazy: switching the preemption model: asked debugfs for lazy, the kernel reports full")
        );
    }
    assert!(!r.envelope.interrupted);
    // Cell by cell: the same switch before each group, and the same failure.
    let (r, _b, switches, _dir) = axis_run(
        Order::CellMajor,
        |_, _| Step::Rep(Rep::default()),
        None,
        None,
    );
    assert!(r.unwrap().cells.iter().all(|c| c.reps.len() == 2));
    assert_eq!(*switches.borrow(), ["to none", "to lazy", "dropped"]);
    let (r, _b, _, _dir) = axis_run(
        Order::CellMajor,
        |_, _| Step::Rep(Rep::default()),
        Some((Model::Lazy, 1)),
        None,
    );
    let r = r.unwrap();
    let status: Vec<Status> = r.cells.iter().map(|c| c.status).collect();
    assert_eq!(
        status,
        [Status::Ok, Status::Ok, Status::Failed, Status::Failed]
    );
    assert!(r.cells[2].reps.is_empty());
}

#[test]
fn a_model_switched_by_something_else_fails_the_group_that_ran_under_it() {
    // After the second switch (round 0's lazy group) the host reports voluntary.
    let (r, _b, _, _dir) = axis_run(
        Order::Rounds,
        |_, _| Step::Rep(Rep::default()),
        None,
        Some((Model::Voluntary, 2)),
    );
    let r = r.unwrap();
    for c in &r.cells[..2] {
        assert_eq!((c.status, c.reps.len()), (Status::Ok, 2), "{c:?}");
    }
    for c in &r.cells[2..] {
        assert_eq!(c.status, Status::Failed);
        let why = c.reason.as_deref().unwrap();
        assert!(
            why.contains("is voluntary, not lazy") && why.ends_with("while its cells ran"),
            "{why}"
        );
    }
}

#[test]
fn an_aborted_or_stopped_run_still_drops_the_switch() {
    let (r, _b, switches, _dir) = axis_run(
        Order::Rounds,
        |c, _| match c {
            2 => Step::Abort(OutputError::Serialize {
                path: "x".into(),
                err: serde_json::from_str::<u8>("x").unwrap_err(),
            }),
            _ => Step::Rep(Rep::default()),
        },
        None,
        None,
    );
    assert!(r.is_err());
    assert_eq!(*switches.borrow(), ["to none", "to lazy", "dropped"]);
    let (r, _b, switches, _dir) = axis_run(
        Order::Rounds,
        |c, _| match c {
            1 => Step::Interrupted,
            _ => Step::Rep(Rep::default()),
        },
        None,
        None,
    );
    assert!(r.unwrap().envelope.interrupted);
    assert_eq!(*switches.borrow(), ["to none", "dropped"]);
}
