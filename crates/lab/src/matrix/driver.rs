//! The driver's loops ([`Matrix::run`]): rounds or cell by cell, a group opened and closed around its
//! cells, each step's outcome applied to its cell (or its group), the stop flag read between steps, and the
//! file rewritten as the module's rules say.

use std::ops::Range;

use results::Status;

use super::{At, Bench, Cell, Doc, Matrix, Order, Step, Switching, Unopened};
use osutil::output::OutputError;

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
    switching: Option<Switching>,
}

impl<B: Bench> Run<'_, '_, B> {
    fn stop_seen(&mut self) -> bool {
        self.stopped |= osutil::stop::interrupted();
        self.stopped
    }

    fn write(&mut self) -> Result<(), OutputError> {
        self.written = true;
        let tail = self.doc.cells_mut().split_off(self.shown);
        let r = osutil::output::write_json(self.m.out, &self.doc);
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

    /// Switches the host to group `gi`'s preemption model, when that is an axis; the error is the
    /// reason its cells fail.
    fn switch_for(&mut self, gi: usize) -> Result<(), String> {
        let Some(sw) = self.switching.as_mut() else {
            return Ok(());
        };
        let m = sw.of_group[gi];
        sw.switch
            .to(m)
            .map_err(|e| format!("switching the preemption model to {m}: {e}"))
    }

    /// After group `gi` ran: when the host is no longer in its model (something else switched it), its
    /// cells fail, since what they measured last ran under another.
    fn check_model(&mut self, gi: usize, g: &Range<usize>) {
        let Some(sw) = self.switching.as_ref() else {
            return;
        };
        if let Err(e) = sw.switch.still(sw.of_group[gi]) {
            let why = format!("{e} while its cells ran");
            for ci in g.clone() {
                if self.cell(ci).status() == Status::Ok {
                    self.cell(ci).mark(Status::Failed, Some(why.clone()));
                }
            }
        }
    }

    /// The groups of `round` in run order: as given, but with the preemption model as an axis its blocks
    /// reversed in odd rounds ([`Switching::blocks`]).
    fn round_order(&self, round: u32) -> Vec<usize> {
        let n = self.m.groups.len();
        match &self.switching {
            Some(sw) if round % 2 == 1 && sw.blocks > 1 => {
                debug_assert_eq!(n % sw.blocks, 0, "a block of groups per model");
                let per = n / sw.blocks;
                (0..sw.blocks)
                    .rev()
                    .flat_map(|b| b * per..(b + 1) * per)
                    .collect()
            }
            _ => (0..n).collect(),
        }
    }

    fn rounds(&mut self) -> Result<(), B::Error> {
        let (n, repeat) = (self.doc.cells_mut().len(), self.m.repeat);
        for round in 0..repeat {
            // Steps count in run order, for progress.
            let mut offset = round as usize * n;
            for gi in self.round_order(round) {
                let g = &self.m.groups[gi];
                let first_step = offset;
                offset += g.len();
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
                if let Err(why) = self.switch_for(gi) {
                    for &ci in &todo {
                        self.cell(ci).mark(Status::Failed, Some(why.clone()));
                    }
                    self.write()?;
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
                let ran = self.group_round(&mut shared, g, &todo, round, first_step, n);
                let closed = self.bench.close(shared);
                ran?;
                closed?;
                self.check_model(gi, g);
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
        first_step: usize,
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
                step: first_step + (ci - g.start),
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
        for (gi, g) in self.m.groups.iter().enumerate() {
            if self.stop_seen() {
                return Ok(());
            }
            let any = g
                .clone()
                .any(|ci| self.doc.cells_mut()[ci].status() == Status::Ok);
            let mut shared = None;
            let switched = if any { self.switch_for(gi) } else { Ok(()) };
            if let Err(why) = switched {
                for ci in g.clone() {
                    if self.doc.cells_mut()[ci].status() == Status::Ok {
                        self.cell(ci).mark(Status::Failed, Some(why.clone()));
                    }
                }
            } else if any {
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
            let opened = shared.is_some();
            let closed = shared.map_or(Ok(()), |s| self.bench.close(s));
            ran?;
            closed?;
            if opened {
                self.check_model(gi, g);
            }
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
    ///
    /// With the preemption model as an axis ([`Matrix::switching`]), the host is switched to a group's
    /// model before the group opens, and switched back to its own when the run ends by any path (the
    /// switch is dropped).
    pub fn run<B: Bench<Doc = D>, D: Doc>(
        mut self,
        bench: &mut B,
        mut doc: D,
    ) -> Result<D, B::Error> {
        let shown = match self.order {
            Order::Rounds => doc.cells_mut().len(),
            Order::CellMajor => 0,
        };
        let switching = self.switching.take();
        let mut run = Run {
            m: &self,
            bench,
            doc,
            shown,
            written: self.written,
            stopped: false,
            switching,
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
