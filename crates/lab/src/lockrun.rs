//! The `bench lock` matrix: locks x page backings x workers x repetitions, with skip reasons, hugetlb
//! reservation through [`guard::PoolGuard`], the fault-cost calibration behind the throughput ceiling, and
//! the result file rewritten after each cell.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use shmlock::shm::{Backing, ShmError, ShmRegion};

use crate::fork::Children;
use crate::guard::{self, PoolGuard};
use crate::lockbench::costs::CostError;
use crate::lockbench::{self, BenchError, Rep, RepInput, Spec};
use crate::result::{self, OutputError};
use osutil::stop::SignalError;

pub use results::lock::{Cell, CellSummary, FaultCost, LockResult};
pub use results::Status;

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
}

fn thp_reason() -> Option<String> {
    let p = "/sys/kernel/mm/transparent_hugepage/shmem_enabled";
    match std::fs::read_to_string(p) {
        Ok(t) => {
            let sel = hostfacts::parse::bracketed(&t).unwrap_or_default();
            if sel == "never" || sel == "deny" {
                Some(format!(
                    "shared-memory THP is off ({p} = {sel}; echo advise > {p} to allow it)"
                ))
            } else {
                None
            }
        }
        Err(e) => Some(format!("{p}: {e} (kernel without THP?)")),
    }
}

/// The free pages of the `kib` pool; the error is a skipped cell's reason, as the result records it.
fn pool_free(kib: u64) -> Result<u64, String> {
    crate::pool::HugetlbPool::of(kib)
        .available()
        .map_err(|e| e.to_string())
}

/// Runs the matrix. Returns the result (also written to `opts.out` after each cell).
pub fn run(spec: Spec, mut opts: RunOptions) -> Result<LockResult, LockRunError> {
    osutil::stop::install_signal_flag()?;
    for line in guard::recover_stale_pools() {
        osutil::msg!("preemptlab: {line}");
    }
    let (locks, backings) = (spec.locks.clone(), spec.pages.clone());

    // Reasons a backing cannot run here, and hugetlb reservations (held until the run ends).
    let mut backing_skip: Vec<Option<String>> = Vec::new();
    let mut guards: Vec<PoolGuard> = Vec::new();
    let mut free_seen: Vec<results::lock::FreeSeen> = Vec::new();
    for &b in &backings {
        let reason = match b {
            Backing::Thp => thp_reason(),
            Backing::Hugetlb2m | Backing::Hugetlb1g => {
                let kib = b.hugetlb_kib().unwrap_or(2048);
                let bytes = lockbench::region_bytes(spec.descriptors);
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
        .then(|| (lockbench::region_bytes(spec.descriptors) as u64).div_ceil(2 << 20));
    let costs = lockbench::costs::measure(map_2m)
        .map_err(|e| osutil::msg!("preemptlab: costs not measured: {e}"))
        .ok();
    let mut res = LockResult {
        envelope: result::envelope(results::Kind::BenchLock),
        spec: spec.clone(),
        fault_cost,
        costs,
        cells: Vec::new(),
        hugetlb_free_seen: free_seen,
    };
    // Backing-major order within a round: one region alive at a time, shared by the round's cells.
    let mut plan = Vec::new();
    for (bi, &b) in backings.iter().enumerate() {
        for &l in &locks {
            for &w in &spec.workers {
                plan.push((l, bi, b, w));
            }
        }
    }
    let mut region: Option<ShmRegion> = None;
    // Every cell starts as ok, skipped (with the reason) or failed to map.
    let ncells = plan.len();
    for &(l, bi, b, w) in &plan {
        let skip = shmlock::availability(l)
            .err()
            .map(|e| e.to_string())
            .or_else(|| backing_skip[bi].clone());
        res.cells.push(Cell {
            lock: l,
            pages: b,
            workers: w,
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
    // Repetitions run as rounds over all cells, each round with a fresh region per backing: repetitions
    // of a cell then see different physical placements and different moments of the machine, so their
    // spread includes what separates two runs (it did not when a cell's repetitions ran back to back on one
    // region: two runs of the same config differed "significantly" in p99).
    let cpus = res.envelope.host.kernel.cpus.value.unwrap_or(1);
    'rounds: for rep in 0..spec.repeat {
        for (bi, &b) in backings.iter().enumerate() {
            let todo: Vec<usize> = (0..ncells)
                .filter(|&ci| plan[ci].1 == bi && res.cells[ci].status == Status::Ok)
                .collect();
            if todo.is_empty() {
                continue;
            }
            region = None; // unmap the previous region first
            match lockbench::new_region(b, spec.descriptors) {
                Ok(r) => region = Some(r),
                Err(e) => {
                    let why = match e {
                        ShmError::PoolTooSmall { .. } if !opts.reserve_hugepages => {
                            format!("{e}; or {}", opts.grow_hint)
                        }
                        e => e.to_string(),
                    };
                    for &ci in &todo {
                        res.cells[ci].status = Status::Failed;
                        res.cells[ci].reason = Some(why.clone());
                    }
                    continue;
                }
            }
            let Some(reg) = region.as_ref() else { continue };
            for ci in todo {
                let (l, _, _, w) = plan[ci];
                let label = format!("{l} {b} {w}w rep {}/{}", rep + 1, spec.repeat);
                let p = &mut opts.progress;
                let step = rep as usize * ncells + ci;
                let r = lockbench::run_rep(RepInput {
                    lock: l,
                    backing: b,
                    region: reg,
                    workers: w,
                    spec: &spec,
                    rep,
                    progress: &mut |phase, frac, rate| {
                        p(
                            step,
                            ncells * spec.repeat as usize,
                            &label,
                            phase,
                            frac,
                            rate,
                        )
                    },
                });
                let cell = &mut res.cells[ci];
                match r {
                    Ok(rep) => cell.reps.push(rep),
                    Err(BenchError::Interrupted) => {
                        res.envelope.interrupted = true;
                        cell.status = Status::Interrupted;
                    }
                    Err(BenchError::Failed(e)) => {
                        cell.status = Status::Failed;
                        cell.reason = Some(e);
                    }
                }
                if !cell.reps.is_empty() {
                    cell.summary = Some(summarize(
                        &cell.reps,
                        res.fault_cost.as_ref().filter(|_| b == Backing::Page4k),
                        cpus,
                    ));
                }
                if rep + 1 == spec.repeat || cell.status != Status::Ok {
                    (opts.on_cell)(cell);
                }
                result::write(&opts.out, &res)?;
                if res.envelope.interrupted {
                    break 'rounds;
                }
            }
        }
    }
    if res.envelope.interrupted {
        for c in res
            .cells
            .iter_mut()
            .filter(|c| c.status == Status::Ok && c.reps.len() < spec.repeat as usize)
        {
            c.status = Status::Interrupted;
        }
        result::write(&opts.out, &res)?;
    }
    drop(region);
    drop(guards);
    Ok(res)
}
