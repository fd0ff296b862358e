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
//!
//! Here the contract between a bench and the driver (the document and cell traits, [`Bench`], what a step
//! gives, the [`Matrix`] to run); in `driver` the loops that carry it out.

use std::ops::Range;
use std::path::Path;

use axes::model::Model;
use results::{Envelope, Kind, Status};
use serde::Serialize;

use osutil::output::OutputError;

mod driver;
#[cfg(test)]
mod tests;

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
    let mut e = hostfacts::envelope::envelope(kind);
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

/// What moves the host between preemption models during a run (a held
/// [`hostguard::preempt::PreemptGuard`]; it switches back to the host's own model when dropped).
pub trait SwitchModel {
    /// Switches to `model`.
    fn to(&mut self, model: Model) -> Result<(), hostguard::preempt::PreemptError>;
    /// Checks the host is still in `model` (after a group: something else may have switched it).
    fn still(&self, model: Model) -> Result<(), hostguard::preempt::PreemptError>;
}

impl SwitchModel for hostguard::preempt::PreemptGuard {
    fn to(&mut self, model: Model) -> Result<(), hostguard::preempt::PreemptError> {
        hostguard::preempt::PreemptGuard::to(self, model.name())
    }
    fn still(&self, model: Model) -> Result<(), hostguard::preempt::PreemptError> {
        hostguard::preempt::PreemptGuard::still(self, model.name())
    }
}

/// The preemption model as an axis of a run (`--switch-preempt none,lazy`): every cell planned once per
/// model, the models outermost, and the host switched to a group's model before the group opens.
pub struct ModelAxis {
    /// The models, in the order given (two or more).
    pub models: Vec<Model>,
    /// What switches.
    pub switch: Box<dyn SwitchModel>,
}

impl ModelAxis {
    /// Repeats the planned `cells` once per model (each copy marked with it by `mark`) and cuts them into
    /// groups of `group` consecutive cells, none spanning two models; returns the groups and what the
    /// matrix switches by.
    pub fn plan<C: Clone>(
        self,
        cells: &mut Vec<C>,
        group: usize,
        mark: impl Fn(&mut C, Model),
    ) -> (Vec<Range<usize>>, Switching) {
        let one: Vec<C> = std::mem::take(cells);
        let per_model = groups_of(one.len(), group);
        let mut groups = Vec::new();
        let mut of_group = Vec::new();
        for &m in &self.models {
            let base = cells.len();
            cells.extend(one.iter().cloned().map(|mut c| {
                mark(&mut c, m);
                c
            }));
            groups.extend(per_model.iter().map(|g| g.start + base..g.end + base));
            of_group.extend(per_model.iter().map(|_| m));
        }
        let switching = Switching {
            of_group,
            blocks: self.models.len(),
            switch: self.switch,
        };
        (groups, switching)
    }
}

/// A run's groups (consecutive runs of `group` cells) and, with `models`, the cells planned once per model
/// ([`ModelAxis::plan`], each copy marked by `mark`).
pub fn plan<C: Clone>(
    cells: &mut Vec<C>,
    group: usize,
    models: Option<ModelAxis>,
    mark: impl Fn(&mut C, Model),
) -> (Vec<Range<usize>>, Option<Switching>) {
    match models {
        Some(m) => {
            let (groups, switching) = m.plan(cells, group, mark);
            (groups, Some(switching))
        }
        None => (groups_of(cells.len(), group), None),
    }
}

/// The model of each group of a [`Matrix`] and what switches the host to it.
pub struct Switching {
    /// Per group, in group order.
    pub of_group: Vec<Model>,
    /// The models' blocks of consecutive groups ([`Order::Rounds`] runs them in reverse order in odd
    /// rounds: none, lazy; lazy, none; ..., so that drift of the machine within a round falls on both
    /// alike, and a round starts on the model the last one ended on).
    pub blocks: usize,
    /// What switches.
    pub switch: Box<dyn SwitchModel>,
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
    /// The preemption model of each group, when it is an axis ([`ModelAxis::plan`]).
    pub switching: Option<Switching>,
}

/// Consecutive groups of `size` cells each.
pub fn groups_of(cells: usize, size: usize) -> Vec<Range<usize>> {
    (0..cells)
        .step_by(size.max(1))
        .map(|s| s..(s + size.max(1)).min(cells))
        .collect()
}
