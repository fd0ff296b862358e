//! The one matrix driver every bench runs on: cells x repetitions, in the order the bench asks for, the
//! result file rewritten after each step, stop signals, cells that cannot run, and how a run that did not
//! complete is marked.
//!
//! A bench ([`Bench`]) says what one repetition of a cell does and what consecutive cells share (a mapped
//! region, a running server, a background load: a *group*, started by [`Bench::open`] and ended by
//! [`Bench::close`]); [`Matrix::run`] owns the loops:
//!
//! - [`Order::Rounds`] (`bench lock`, `bench pg`): each round runs every cell once, group by group, so slow
//!   drift of the machine spreads over all cells instead of biasing one, and a cell's repetitions see
//!   different placements and moments. Every cell is in the file from the start; the file is rewritten
//!   after each repetition.
//! - [`Order::CellMajor`] (`bench latency`, `bench net`, `sim`): a cell's repetitions run back to back and
//!   the cell enters the file when it is done; the file is rewritten after each cell.
//!
//! The rules every bench gets from here:
//!
//! - A cell that is not `ok` when its turn comes (skipped at planning, failed in an earlier round) is not
//!   run. A group with no cell to run is not opened.
//! - The stop flag ([`osutil::stop`]) is read before each group and each repetition; a repetition a stop
//!   signal cut short ([`Step::Interrupted`]) is not a data point, and the run ends there.
//! - The document's envelope says `interrupted` from the start ([`unfinished`]) until the matrix completes,
//!   so that a file left by a run that died another way (SIGKILL, a panic, an error) says so; the last write
//!   says how it ended. When it was stopped, every `ok` cell short of its repetitions is marked
//!   `interrupted` with how far it got.
//! - An error that ends the run ([`Step::Abort`], [`Unopened::Abort`], a group that does not close) is
//!   returned after the file, if one was started, is rewritten (the cells measured so far stay).

use std::ops::Range;
use std::path::Path;

use results::{Envelope, Kind, Status};
use serde::Serialize;

use crate::result::{self, OutputError};

/// A result document the driver fills: an envelope and a list of cells.
pub trait Doc: Serialize {
    /// Its cell.
    type Cell: Cell;
    /// The envelope (`interrupted` is the driver's).
    fn envelope_mut(&mut self) -> &mut Envelope;
    /// The cells, in run order.
    fn cells_mut(&mut self) -> &mut Vec<Self::Cell>;
}

/// A cell of a matrix: a status with its reason and the repetitions it ran.
pub trait Cell {
    /// What one step of the cell gives.
    type Rep;
    /// Whether it runs (`ok`) or why not.
    fn status(&self) -> Status;
    /// Sets the status and its reason.
    fn mark(&mut self, status: Status, reason: Option<String>);
    /// The repetitions it holds.
    fn reps(&self) -> usize;
    /// Adds a step's data.
    fn push(&mut self, rep: Self::Rep);
}

/// Implements [`Doc`] and [`Cell`] for a result type whose fields are `envelope`/`cells` and
/// `status`/`reason`/`reps`; `$push` is how a step's data joins `reps` (`push` one repetition, `extend`
/// with several).
macro_rules! matrix_doc {
    ($($doc:ty => $cell:ty, $rep:ty, $push:ident;)*) => {$(
        impl Doc for $doc {
            type Cell = $cell;
            fn envelope_mut(&mut self) -> &mut Envelope {
                &mut self.envelope
            }
            fn cells_mut(&mut self) -> &mut Vec<$cell> {
                &mut self.cells
            }
        }
        impl Cell for $cell {
            type Rep = $rep;
            fn status(&self) -> Status {
                self.status
            }
            fn mark(&mut self, status: Status, reason: Option<String>) {
                self.status = status;
                self.reason = reason;
            }
            fn reps(&self) -> usize {
                self.reps.len()
            }
            fn push(&mut self, rep: $rep) {
                self.reps.$push(rep);
            }
        }
    )*};
}

matrix_doc! {
    results::lock::LockResult => results::lock::Cell, results::lock::Rep, push;
    results::pg::PgResult => results::pg::Cell, results::pg::Rep, push;
    results::latency::LatencyResult => results::latency::Cell, results::latency::Rep, push;
    results::net::NetResult => results::net::Cell, results::net::Rep, push;
    // A model cell runs its seeds in one step (`sim::matrix::Cell::run`): its step gives every run.
    results::sim::SimResult => results::sim::SimCell, Vec<results::model::Outcome>, extend;
}

/// A new envelope of `kind` for a matrix's document: `interrupted` until [`Matrix::run`] completes.
pub fn unfinished(kind: Kind) -> Envelope {
    let mut e = result::envelope(kind);
    e.interrupted = true;
    e
}

/// The order of the loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// `for round { for group { for cell { one repetition } } }`; every cell in the file from the start.
    Rounds,
    /// `for group { for cell { every repetition } }`; a cell enters the file when it is done.
    CellMajor,
}

/// Where a step is.
#[derive(Debug, Clone, Copy)]
pub struct At {
    /// The repetition (the round, in [`Order::Rounds`]), from 0.
    pub round: u32,
    /// The cell's index in the document.
    pub cell: usize,
    /// The steps before this one (for progress).
    pub step: usize,
    /// The steps in all.
    pub steps: usize,
}

/// What one repetition of a cell gave.
pub enum Step<R, E> {
    /// A data point.
    Rep(R),
    /// A stop signal cut it short: not a data point; the run ends.
    Interrupted,
    /// The cell ends with this status and reason; the matrix goes on.
    Cell(Status, String),
    /// Every cell of the group that is still running (`ok`) fails with this reason (what they share
    /// failed: a server); the matrix goes on with the next group.
    Group(String),
    /// The run cannot go on.
    Abort(E),
}

/// Why a group was not started.
pub enum Unopened<E> {
    /// Its cells that were to run get this status and reason; the matrix goes on.
    Cells(Status, String),
    /// The run cannot go on.
    Abort(E),
}

/// A bench: what a group shares and what one repetition of a cell does.
pub trait Bench {
    /// The result document.
    type Doc: Doc;
    /// What a group's cells share while they run.
    type Shared;
    /// Why a run stops.
    type Error: From<OutputError>;

    /// Starts what the cells of `cells` share for `round` (in [`Order::CellMajor`], once, round 0). It may
    /// record what it found in the document.
    fn open(
        &mut self,
        doc: &mut Self::Doc,
        cells: Range<usize>,
        round: u32,
    ) -> Result<Self::Shared, Unopened<Self::Error>>;

    /// Runs one repetition of `cell`.
    fn rep(
        &mut self,
        shared: &mut Self::Shared,
        cell: &<Self::Doc as Doc>::Cell,
        at: At,
    ) -> Step<<<Self::Doc as Doc>::Cell as Cell>::Rep, Self::Error>;

    /// Ends what [`Bench::open`] started.
    fn close(&mut self, shared: Self::Shared) -> Result<(), Self::Error>;

    /// Recomputes the cell's summary after a data point.
    fn summarize(&self, cell: &mut <Self::Doc as Doc>::Cell);

    /// After each data point.
    fn on_rep(&mut self, _cell: &<Self::Doc as Doc>::Cell) {}

    /// When a cell is done: in [`Order::CellMajor`] every cell, as it enters the file; in
    /// [`Order::Rounds`] after the repetition that ended it (its last round, or a status other than ok).
    fn on_done(&mut self, _cell: &<Self::Doc as Doc>::Cell) {}
}

/// A matrix to run: its groups of cells, repetitions, order and result file.
pub struct Matrix<'a> {
    /// Consecutive ranges of the document's cells, each sharing what [`Bench::open`] starts; together
    /// they cover every cell, in order.
    pub groups: Vec<Range<usize>>,
    /// Repetitions of each cell.
    pub repeat: u32,
    /// The order of the loops.
    pub order: Order,
    /// What a repetition is called in an interrupted cell's reason ("interrupted after 2 of 3 runs").
    pub noun: &'static str,
    /// The result file.
    pub out: &'a Path,
    /// Whether the caller wrote the file already (then an error rewrites it).
    pub written: bool,
}

/// Consecutive groups of `size` cells each.
pub fn groups_of(cells: usize, size: usize) -> Vec<Range<usize>> {
    (0..cells)
        .step_by(size.max(1))
        .map(|s| s..(s + size.max(1)).min(cells))
        .collect()
}

/// Whether a cell's repetitions go on after a step.
enum Flow {
    Go,
    Stop,
}

struct Run<'m, 'a, B: Bench> {
    m: &'m Matrix<'a>,
    bench: &'m mut B,
    doc: B::Doc,
    /// In [`Order::CellMajor`], the cells done (the file shows these); else every cell.
    shown: usize,
    written: bool,
    stopped: bool,
}

impl<B: Bench> Run<'_, '_, B> {
    fn stop_seen(&mut self) -> bool {
        self.stopped |= osutil::stop::interrupted();
        self.stopped
    }

    fn write(&mut self) -> Result<(), OutputError> {
        self.written = true;
        let tail = self.doc.cells_mut().split_off(self.shown);
        let r = result::write(self.m.out, &self.doc);
        self.doc.cells_mut().extend(tail);
        r
    }

    /// Ends the run with `e`, the file rewritten first if there is one (its own error is not the one to
    /// report).
    fn abort(mut self, e: B::Error) -> Result<B::Doc, B::Error> {
        if self.written {
            let _ = self.write();
        }
        Err(e)
    }

    fn cell(&mut self, ci: usize) -> &mut <B::Doc as Doc>::Cell {
        &mut self.doc.cells_mut()[ci]
    }

    fn mark_interrupted(&mut self, ci: usize) {
        let (noun, repeat) = (self.m.noun, self.m.repeat);
        let c = self.cell(ci);
        if c.status() == Status::Ok && c.reps() < repeat as usize {
            let why = format!("interrupted after {} of {repeat} {noun}", c.reps());
            c.mark(Status::Interrupted, Some(why));
        }
    }

    /// One step of cell `ci`; what the loop does next.
    fn step(
        &mut self,
        shared: &mut B::Shared,
        group: &Range<usize>,
        at: At,
    ) -> Result<Flow, B::Error> {
        let ci = at.cell;
        let step = self.bench.rep(shared, &self.doc.cells_mut()[ci], at);
        match step {
            Step::Rep(r) => {
                let c = &mut self.doc.cells_mut()[ci];
                c.push(r);
                self.bench.summarize(c);
                self.bench.on_rep(c);
                Ok(Flow::Go)
            }
            Step::Interrupted => {
                self.stopped = true;
                Ok(Flow::Stop)
            }
            Step::Cell(status, why) => {
                self.cell(ci).mark(status, Some(why));
                Ok(Flow::Stop)
            }
            Step::Group(why) => {
                // Only the cells that were running: one skipped at planning, or ended by a failure of its
                // own in an earlier round, keeps its status and reason.
                for c in group.clone() {
                    if self.cell(c).status() == Status::Ok {
                        self.cell(c).mark(Status::Failed, Some(why.clone()));
                    }
                }
                Ok(Flow::Stop)
            }
            Step::Abort(e) => Err(e),
        }
    }

    fn rounds(&mut self) -> Result<(), B::Error> {
        let (n, repeat) = (self.doc.cells_mut().len(), self.m.repeat);
        for round in 0..repeat {
            for g in &self.m.groups {
                if self.stop_seen() {
                    return Ok(());
                }
                let todo: Vec<usize> = g
                    .clone()
                    .filter(|&ci| self.doc.cells_mut()[ci].status() == Status::Ok)
                    .collect();
                if todo.is_empty() {
                    continue;
                }
                let mut shared = match self.bench.open(&mut self.doc, g.clone(), round) {
                    Ok(s) => s,
                    Err(Unopened::Cells(status, why)) => {
                        for &ci in &todo {
                            self.cell(ci).mark(status, Some(why.clone()));
                        }
                        self.write()?;
                        continue;
                    }
                    Err(Unopened::Abort(e)) => return Err(e),
                };
                let ran = self.group_round(&mut shared, g, &todo, round, n);
                let closed = self.bench.close(shared);
                ran?;
                closed?;
                self.write()?;
                if self.stopped {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn group_round(
        &mut self,
        shared: &mut B::Shared,
        g: &Range<usize>,
        todo: &[usize],
        round: u32,
        n: usize,
    ) -> Result<(), B::Error> {
        let repeat = self.m.repeat;
        for &ci in todo {
            // A cell of a group that failed (`Step::Group`) waits for nothing more this round.
            if self.doc.cells_mut()[ci].status() != Status::Ok {
                continue;
            }
            let at = At {
                round,
                cell: ci,
                step: round as usize * n + ci,
                steps: n * repeat as usize,
            };
            if !self.stop_seen() {
                self.step(shared, g, at)?;
            }
            if self.stopped {
                self.mark_interrupted(ci);
            }
            let c = &self.doc.cells_mut()[ci];
            if round + 1 == repeat || c.status() != Status::Ok {
                self.bench.on_done(c);
            }
            self.write()?;
            if self.stopped {
                return Ok(());
            }
        }
        Ok(())
    }

    fn cell_major(&mut self) -> Result<(), B::Error> {
        let (n, repeat) = (self.doc.cells_mut().len(), self.m.repeat);
        for g in &self.m.groups {
            if self.stop_seen() {
                return Ok(());
            }
            let any = g
                .clone()
                .any(|ci| self.doc.cells_mut()[ci].status() == Status::Ok);
            let mut shared = None;
            if any {
                match self.bench.open(&mut self.doc, g.clone(), 0) {
                    Ok(s) => shared = Some(s),
                    Err(Unopened::Cells(status, why)) => {
                        for ci in g.clone() {
                            if self.doc.cells_mut()[ci].status() == Status::Ok {
                                self.cell(ci).mark(status, Some(why.clone()));
                            }
                        }
                    }
                    Err(Unopened::Abort(e)) => return Err(e),
                }
            }
            let ran = self.group_cells(shared.as_mut(), g, n, repeat);
            let closed = shared.map_or(Ok(()), |s| self.bench.close(s));
            ran?;
            closed?;
            if self.stopped {
                return Ok(());
            }
        }
        Ok(())
    }

    fn group_cells(
        &mut self,
        mut shared: Option<&mut B::Shared>,
        g: &Range<usize>,
        n: usize,
        repeat: u32,
    ) -> Result<(), B::Error> {
        for ci in g.clone() {
            // A stop between two cells ends the run there: the next cell does not enter the file.
            if self.stop_seen() {
                return Ok(());
            }
            for round in 0..repeat {
                let Some(shared) = shared.as_deref_mut() else {
                    break;
                };
                if self.doc.cells_mut()[ci].status() != Status::Ok || self.stop_seen() {
                    break;
                }
                let at = At {
                    round,
                    cell: ci,
                    step: ci * repeat as usize + round as usize,
                    steps: n * repeat as usize,
                };
                if let Flow::Stop = self.step(shared, g, at)? {
                    break;
                }
            }
            if self.stop_seen() {
                self.mark_interrupted(ci);
            }
            self.shown = ci + 1;
            let c = &self.doc.cells_mut()[ci];
            self.bench.on_done(c);
            self.write()?;
            if self.stopped {
                return Ok(());
            }
        }
        Ok(())
    }
}

impl Matrix<'_> {
    /// Runs `bench` over `doc`'s cells (their order is the run order; cells not `ok` are not run) and
    /// returns the document as the file has it last: in [`Order::CellMajor`] the cells a stop left unreached
    /// are not in it.
    pub fn run<B: Bench<Doc = D>, D: Doc>(&self, bench: &mut B, mut doc: D) -> Result<D, B::Error> {
        let shown = match self.order {
            Order::Rounds => doc.cells_mut().len(),
            Order::CellMajor => 0,
        };
        let mut run = Run {
            m: self,
            bench,
            doc,
            shown,
            written: self.written,
            stopped: false,
        };
        let ran = match self.order {
            Order::Rounds => run.rounds(),
            Order::CellMajor => run.cell_major(),
        };
        if let Err(e) = ran {
            return run.abort(e);
        }
        let stopped = run.stop_seen();
        if stopped {
            for ci in 0..run.shown {
                run.mark_interrupted(ci);
            }
        }
        let shown = run.shown;
        run.doc.cells_mut().truncate(shown);
        run.doc.envelope_mut().interrupted = stopped;
        run.write()?;
        Ok(run.doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::net::{Cell as NetCell, NetPath, NetResult, NetTest, Rep, Spec};

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
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.json");
        // The file exists before the first step (a caller that wrote it, as bench pg does).
        result::write(&out, &doc).unwrap();
        let m = Matrix {
            groups,
            repeat: 2,
            order,
            noun: "runs",
            out: &out,
            written: true,
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
}
