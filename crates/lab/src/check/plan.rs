//! `check`'s plan and reproduction: what to run (pg vs adaptive, 4 KB pages vs the best huge-page backing
//! the host can give, 8x CPUs workers) and running it as a `bench lock` matrix. The effects, verdict and
//! fixes are pure and live in [`crate::check::judge`].

use std::path::PathBuf;

use axes::{Backing, Count, LockKind, ReconnectGiven, StartAge};
use results::host::audit::Audit;

use crate::lock::run::{self, LockRunError, RunOptions};
use crate::lock::{self};
use results::lock::LockResult;
use results::lock::Spec;

/// Why the reproduction has no huge-page side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoHugeBacking {
    /// Free pages in the 2 MB pool.
    pub free_2m: u64,
    /// Pages the reproduction's region needs.
    pub need: u64,
    /// `shmem_enabled` of transparent huge pages, as read.
    pub thp_shmem: String,
}

impl NoHugeBacking {
    /// The reason in words; `grow` says how the caller can grow the pool (the binary names its flag).
    pub fn describe(&self, grow: &str) -> String {
        format!(
            "no huge pages to compare with: the 2 MB pool has {} free pages (needs {}; {grow}) and shared-memory THP is {}",
            self.free_2m, self.need, self.thp_shmem
        )
    }
}

/// The best huge-page backing this host can give a region of `bytes`: the 2 MB pool
/// ([`Backing::Hugetlb2m`]) when it has the pages free or `may_grow` (root, and the run reserves them),
/// else shared-memory THP ([`Backing::Thp`]) when enabled.
pub fn huge_backing(audit: &Audit, bytes: u64, may_grow: bool) -> Result<Backing, NoHugeBacking> {
    let pool = audit.memory.pool(2048);
    let free_2m = pool.map(|p| p.available()).unwrap_or(0);
    let need = bytes.div_ceil(2 << 20);
    if pool.is_some() && (free_2m >= need || may_grow) {
        return Ok(Backing::Hugetlb2m);
    }
    if hostfacts::memory::shmem_thp_unusable(&audit.memory.thp_shmem_enabled).is_none() {
        return Ok(Backing::Thp);
    }
    Err(NoHugeBacking {
        free_2m,
        need,
        thp_shmem: audit
            .memory
            .thp_shmem_enabled
            .value
            .as_deref()
            .unwrap_or("unavailable")
            .to_string(),
    })
}

/// What the check reproduces.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The `bench lock` matrix.
    pub spec: Spec,
    /// The huge-page side (hugetlb-2m or thp), or why there is none.
    pub huge: Result<Backing, NoHugeBacking>,
    /// CPUs of the host (the workers are 8x this, capped by the lock's waiter limit).
    pub cpus: u32,
}

/// Plans the reproduction: `quick` (under 15 s) runs fewer, shorter repetitions; `reserve_hugepages` lets
/// it grow the 2 MB pool when run as root.
pub fn plan(audit: &Audit, quick: bool, reserve_hugepages: bool) -> Plan {
    let cpus = audit.kernel.cpus.value.unwrap_or(1);
    let descriptors: u64 = if quick { 1 << 21 } else { 4 << 20 };
    let (duration_s, warmup_s, repeat) = if quick { (0.8, 0.2, 2) } else { (2.0, 0.5, 3) };
    let bytes = lock::region_bytes(descriptors) as u64;
    let huge = huge_backing(audit, bytes, reserve_hugepages && osutil::is_root());
    let mut pages = vec![Backing::Page4k];
    pages.extend(huge.as_ref().ok().copied());
    let workers = (8 * cpus).min(shmlock::MAX_WAITERS as u32);
    let spec = Spec {
        locks: vec![LockKind::Pg, LockKind::Adaptive],
        pages,
        workers_given: vec![Count::PerCpu(8.0)],
        workers: vec![workers],
        duration_s,
        warmup_s,
        repeat,
        descriptors,
        cs_ns: 0,
        work_ns: 1000,
        reconnect_every: Some(lock::auto_reconnect_every(descriptors)),
        reconnect_every_given: ReconnectGiven::Auto,
        threads: false,
        prefetch_next: false,
        start_age: StartAge::Uniform,
        seed: 1,
    };
    Plan { spec, huge, cpus }
}

/// Seconds a reproduction spends outside its measured repetitions: the fault-cost and cost measurements
/// before the cells, forking the workers and laying out the region of each repetition.
const SETUP_S: f64 = 3.0;

impl Plan {
    /// What the reproduction costs the host while it runs: every CPU, for about this long.
    pub fn cost(&self) -> results::check::BenchCost {
        let s = &self.spec;
        let cells = (s.locks.len() * s.pages.len() * s.workers.len()) as f64;
        results::check::BenchCost {
            workers: s.workers.iter().copied().max().unwrap_or(0),
            cpus: self.cpus,
            duration_s: SETUP_S + cells * f64::from(s.repeat) * (s.warmup_s + s.duration_s),
        }
    }
}

/// Runs the plan's matrix, writing the result to `out` after each cell and calling `on_cell` with each;
/// `grow` says how the caller can grow the 2 MB pool (as for [`NoHugeBacking::describe`]), for the reason
/// of a huge-page cell that finds too few free pages after all.
pub fn reproduce(
    plan: &Plan,
    reserve_hugepages: bool,
    out: PathBuf,
    on_cell: Box<dyn FnMut(&results::lock::Cell)>,
    grow: &str,
) -> Result<LockResult, LockRunError> {
    run::run(
        plan.spec.clone(),
        RunOptions {
            reserve_hugepages,
            out,
            progress: Box::new(|_, _, _, _, _, _| {}),
            on_cell,
            grow_hint: grow.into(),
            models: None,
        },
    )
}
