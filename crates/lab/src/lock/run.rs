//! The `bench lock` matrix: locks x page backings x workers x repetitions, with skip reasons, hugetlb
//! reservation through [`PoolGuard`] and the fault-cost calibration behind the throughput ceiling,
//! on the matrix driver ([`crate::matrix`]: rounds, the result file rewritten after each repetition).

use std::ops::Range;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axes::Backing;
use shmlock::shm::{ShmError, ShmRegion};

use crate::lock::costs::CostError;
use crate::lock::{self, BenchError, RepInput};
use crate::matrix::{self, At, Bench, Matrix, Order, Step, Unopened};
use hostguard::hugetlb_pool::{self, PoolGuard};
use hostguard::workers::Children;
use osutil::output::OutputError;
use osutil::stop::SignalError;
use results::lock::{Rep, Spec};

use results::lock::{Cell, CellSummary, FaultCost, LockResult};
use results::Status;

/// Why the matrix could not run (a cell that fails is recorded in the result instead).
#[derive(Debug, thiserror::Error)]
pub enum LockRunError {
    /// The stop signals' handlers could not be installed.
    #[error(transparent)]
    Signal(#[from] SignalError),
    /// The result file could not be written.
    #[error(transparent)]
    Write(#[from] OutputError),
}

/// Measures the cost of a minor fault on a populated 4 KB shared page: the parent populates a region, a
/// fresh child touches every page once and times it.
pub fn measure_fault_cost() -> Result<FaultCost, CostError> {
    const PAGES: usize = 16_384;
    let region = ShmRegion::new(PAGES * 4096, Backing::Page4k)?;
    region.populate_write()?;
    let slot = ShmRegion::new(4096, Backing::Page4k)?;
    let mut child = Children::new();
    child
        .spawn((), c"plab-faultcal", || {
            let p = region.as_ptr();
            let t = Instant::now();
            for i in 0..PAGES {
                // SAFETY: i * 4096 < region length.
                unsafe { std::ptr::write_volatile(p.add(i * 4096), 1u8) };
            }
            let ns = t.elapsed().as_nanos() as u64;
            // SAFETY: the slot region is 4096 bytes, page-aligned, so u64-aligned.
            unsafe { std::ptr::write_volatile(slot.as_ptr() as *mut u64, ns) };
            0
        })
        .map_err(|err| CostError::Fork { err })?;
    child.reap_all(Duration::from_secs(60), |_, _| {});
    // SAFETY: the child wrote the u64 before exiting.
    let ns = unsafe { std::ptr::read_volatile(slot.as_ptr() as *const u64) };
    if ns == 0 {
        return Err(CostError::ChildFailed {
            what: "the fault calibration child",
        });
    }
    Ok(FaultCost {
        ns_per_fault: ns as f64 / PAGES as f64,
        faults: PAGES as u64,
    })
}

fn summarize(reps: &[Rep], fault: Option<&FaultCost>, cpus: u32) -> CellSummary {
    let s = |f: &dyn Fn(&Rep) -> f64| stats::summarize(&reps.iter().map(f).collect::<Vec<_>>());
    let minflt = s(&|r| r.minflt_per_op);
    CellSummary {
        ops_per_s: s(&|r| r.ops_per_s),
        acquire_p99_ns: s(&|r| r.acquire_ns.p99 as f64),
        hold_p99_ns: s(&|r| r.hold_ns.p99 as f64),
        stalled_per_mop: s(&|r| r.stalled_per_mop),
        minflt_per_op: minflt,
        cpu_ns_per_op: s(&|r| r.cpu_ns_per_op),
        ivcsw_per_op: s(&|r| r.ivcsw_per_op),
        jain: s(&|r| r.jain),
        sleeps_per_op: s(&|r| r.sleeps_per_op),
        fault_ceiling_ops_per_s: fault
            .filter(|_| minflt.median > 0.01)
            .map(|f| 1e9 / (minflt.median * f.ns_per_fault)),
        hold_ceiling_ops_per_s: 1e9
            / stats::median(
                &reps
                    .iter()
                    .map(|r| r.hold_ns.mean.unwrap_or(0.0).max(1.0))
                    .collect::<Vec<_>>(),
            ),
        cpu_ceiling_ops_per_s: cpus.max(1) as f64 * 1e9
            / stats::median(
                &reps
                    .iter()
                    .map(|r| r.cpu_ns_per_op.max(1.0))
                    .collect::<Vec<_>>(),
            ),
    }
}

/// Progress callback: (cell index, cell count, cell label, phase, fraction done, live ops/s).
pub type ProgressFn = Box<dyn FnMut(usize, usize, &str, &str, f64, f64)>;

/// Options of a run beyond the spec.
pub struct RunOptions {
    /// Grow hugetlb pools as needed (root), restoring them afterwards.
    pub reserve_hugepages: bool,
    /// Where the result goes.
    pub out: PathBuf,
    /// Progress: (cell index, cell count, cell label, phase, fraction, live ops/s).
    pub progress: ProgressFn,
    /// Called after each cell with the cell.
    pub on_cell: Box<dyn FnMut(&Cell)>,
    /// How the caller's user grows a hugetlb pool for the run (a command line names its option), for the
    /// reason of a hugetlb cell skipped for want of free pages: "needs N free 2048 kB huge pages, the pool
    /// has F: <grow_hint>".
    pub grow_hint: String,
    /// The preemption model as an axis (`--switch-preempt` with two or more models).
    pub models: Option<matrix::ModelAxis>,
}

/// The free pages of the `kib` pool; the error is a skipped cell's reason, as the result records it.
fn pool_free(kib: u64) -> Result<u64, String> {
    hostfacts::hugepages::sysfs::HugetlbPool::of(kib)
        .available()
        .map_err(|e| e.to_string())
}

/// Runs the matrix. Returns the result (also written to `opts.out` after each cell).
pub fn run(spec: Spec, mut opts: RunOptions) -> Result<LockResult, LockRunError> {
    osutil::stop::install_signal_flag()?;
    for line in hugetlb_pool::recover_stale_pools() {
        osutil::msg!("preemptlab: {line}");
    }
    let (locks, backings) = (spec.locks.clone(), spec.pages.clone());

    // Reasons a backing cannot run here, and hugetlb reservations (held until the run ends).
    let mut backing_skip: Vec<Option<String>> = Vec::new();
    let mut guards: Vec<PoolGuard> = Vec::new();
    let mut free_seen: Vec<results::lock::FreeSeen> = Vec::new();
    for &b in &backings {
        let reason = match b {
            Backing::Thp => {
                let setting = hostfacts::memory::shmem_thp(&hostfacts::Host::live());
                hostfacts::memory::shmem_thp_unusable(&setting)
            }
            Backing::Hugetlb2m | Backing::Hugetlb1g => {
                let kib = b.hugetlb_kib().unwrap_or(2048);
                let bytes = lock::region_bytes(spec.descriptors);
                let need = (bytes as u64).div_ceil(kib * 1024);
                match pool_free(kib) {
                    Err(e) => Some(e),
                    // Through the shared record even when the pool looks free enough: the free pages may be
                    // another run's share.
                    Ok(free) if opts.reserve_hugepages => {
                        if !osutil::is_root() {
                            Some(format!("needs {need} free {kib} kB pages (has {free}); growing the pool needs root"))
                        } else {
                            match PoolGuard::ensure_free(kib, need) {
                                Ok(g) => {
                                    guards.push(g);
                                    None
                                }
                                Err(e) => Some(e.to_string()),
                            }
                        }
                    }
                    Ok(free) if free >= need => {
                        // Counted on, not reserved: recorded (issue 29).
                        free_seen.push(results::lock::FreeSeen {
                            page_kib: kib,
                            free_pages: free,
                            needed_pages: need,
                        });
                        None
                    }
                    Ok(free) => Some(format!(
                        "needs {need} free {kib} kB huge pages, the pool has {free}: {}",
                        opts.grow_hint
                    )),
                }
            }
            _ => None,
        };
        backing_skip.push(reason);
    }

    let fault_cost = if backings.contains(&Backing::Page4k) {
        measure_fault_cost().ok()
    } else {
        None
    };
    // What the model takes (`sim --costs-from`), measured before the cells; the 2 MB mapping when the
    // hugetlb-2m cells can run.
    let map_2m = backings
        .iter()
        .zip(&backing_skip)
        .any(|(&b, skip)| b == Backing::Hugetlb2m && skip.is_none())
        .then(|| (lock::region_bytes(spec.descriptors) as u64).div_ceil(2 << 20));
    let costs = lock::costs::measure(map_2m)
        .map_err(|e| osutil::msg!("preemptlab: costs not measured: {e}"))
        .ok();
    let mut res = LockResult {
        envelope: matrix::unfinished(results::Kind::BenchLock),
        spec: spec.clone(),
        fault_cost,
        costs,
        cells: Vec::new(),
        hugetlb_free_seen: free_seen,
    };
    // Backing-major order within a round: one region alive at a time, shared by the backing's cells (a
    // group). Every cell starts as ok or skipped (with the reason).
    for (bi, &b) in backings.iter().enumerate() {
        for &l in &locks {
            for &w in &spec.workers {
                let skip = shmlock::availability(l)
                    .err()
                    .map(|e| e.to_string())
                    .or_else(|| backing_skip[bi].clone());
                res.cells.push(Cell {
                    lock: l,
                    pages: b,
                    workers: w,
                    preempt: None,
                    status: if skip.is_some() {
                        Status::Skipped
                    } else {
                        Status::Ok
                    },
                    reason: skip,
                    reps: vec![],
                    summary: None,
                });
            }
        }
    }
    // Repetitions run as rounds over all cells, each round with a fresh region per backing: repetitions
    // of a cell then see different physical placements and different moments of the machine, so their
    // spread includes what separates two runs (it did not when a cell's repetitions ran back to back on one
    // region: two runs of the same config differed "significantly" in p99).
    // With the preemption model as an axis, the models are outermost: a round runs every cell under one
    // model, then under the next.
    let (groups, switching) = matrix::plan(
        &mut res.cells,
        locks.len() * spec.workers.len(),
        opts.models.take(),
        |c, m| c.preempt = Some(m),
    );
    let out = opts.out.clone();
    let matrix = Matrix {
        groups,
        repeat: spec.repeat,
        order: Order::Rounds,
        noun: "repetitions",
        out: &out,
        written: false,
        switching,
    };
    let mut bench = LockBench {
        cpus: res.envelope.host.kernel.cpus.value.unwrap_or(1),
        fault_cost: res.fault_cost.clone(),
        spec: &spec,
        opts: &mut opts,
    };
    let res = matrix.run(&mut bench, res)?;
    drop(guards);
    Ok(res)
}

/// `bench lock` on the matrix driver: a group is a backing's cells, sharing a region mapped per round.
struct LockBench<'a> {
    spec: &'a Spec,
    opts: &'a mut RunOptions,
    fault_cost: Option<FaultCost>,
    cpus: u32,
}

impl Bench for LockBench<'_> {
    type Doc = LockResult;
    type Shared = ShmRegion;
    type Error = LockRunError;

    fn open(
        &mut self,
        doc: &mut LockResult,
        cells: Range<usize>,
        _round: u32,
    ) -> Result<ShmRegion, Unopened<LockRunError>> {
        let b = doc.cells[cells.start].pages;
        lock::new_region(b, self.spec.descriptors).map_err(|e| {
            let why = match e {
                ShmError::PoolTooSmall { .. } if !self.opts.reserve_hugepages => {
                    format!("{e}; or {}", self.opts.grow_hint)
                }
                e => e.to_string(),
            };
            Unopened::Cells(Status::Failed, why)
        })
    }

    fn rep(&mut self, region: &mut ShmRegion, cell: &Cell, at: At) -> Step<Rep, LockRunError> {
        let (l, b, w) = (cell.lock, cell.pages, cell.workers);
        let model = cell.preempt.map(|m| format!("{m} ")).unwrap_or_default();
        let label = format!(
            "{model}{l} {b} {w}w rep {}/{}",
            at.round + 1,
            self.spec.repeat
        );
        let p = &mut self.opts.progress;
        let r = lock::run_rep(RepInput {
            lock: l,
            backing: b,
            region,
            workers: w,
            spec: self.spec,
            rep: at.round,
            progress: &mut |phase, frac, rate| p(at.step, at.steps, &label, phase, frac, rate),
        });
        match r {
            Ok(rep) => Step::Rep(rep),
            Err(BenchError::Interrupted) => Step::Interrupted,
            Err(BenchError::Failed(e)) => Step::Cell(Status::Failed, e),
        }
    }

    fn close(&mut self, region: ShmRegion) -> Result<(), LockRunError> {
        drop(region);
        Ok(())
    }

    fn summarize(&self, cell: &mut Cell) {
        let fault = self.fault_cost.as_ref();
        let fault = fault.filter(|_| cell.pages == Backing::Page4k);
        cell.summary = Some(summarize(&cell.reps, fault, self.cpus));
    }

    fn on_done(&mut self, cell: &Cell) {
        (self.opts.on_cell)(cell);
    }
}
