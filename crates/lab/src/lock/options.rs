//! `bench lock`'s options as given, checked and resolved against the host into a `lock::Spec`.

use std::time::Duration;

use axes::{Backing, LockKind, ReconnectGiven, StartAge};

use crate::lock::{self};
use crate::options::{self, HostShape, OptionError};
use results::lock::Spec;
use results::lock::{Cell, LockResult};
use results::Status;

/// `bench lock`'s options as given.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct LockOptions {
    /// Locks: pg, tas, ttas, ticket, mcs, futex, pthread, adaptive, rseq (comma-separated).
    #[cfg_attr(
        feature = "cli",
        arg(long, default_value = "pg,futex,pthread,adaptive")
    )]
    pub locks: String,
    /// Page backings: 4k, 4k-populate, thp, hugetlb-2m, hugetlb-1g.
    #[cfg_attr(feature = "cli", arg(long, default_value = "4k,hugetlb-2m"))]
    pub pages: String,
    /// Worker counts: numbers or multiples of the CPU count (1x,4x,8x,16x).
    #[cfg_attr(feature = "cli", arg(long, default_value = "1x,4x,8x"))]
    pub workers: String,
    /// Measured time per repetition (3s, 500ms).
    #[cfg_attr(feature = "cli", arg(long, default_value = "3s"))]
    pub duration: String,
    /// Warm-up per repetition, not measured.
    #[cfg_attr(feature = "cli", arg(long, default_value = "1s"))]
    pub warmup: String,
    /// Repetitions per cell.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 3))]
    pub repeat: u32,
    /// Buffer descriptors of 64 bytes (default: sized to the host, 1 GiB of descriptors when RAM allows).
    #[cfg_attr(feature = "cli", arg(long))]
    pub descriptors: Option<u64>,
    /// Extra busy time inside the critical section, ns.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0))]
    pub cs_ns: u64,
    /// Busy time outside the lock per operation, ns.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1000))]
    pub work_ns: u64,
    /// Replace each worker process after K operations (fresh page tables, like new backends): a number,
    /// `none` (workers live for the whole run), or `auto` = 5 pops per 64 KB fault-around group of the
    /// descriptor array, the fault density of the reported backends (docs/notes/2026-11-22-lock-bench-worker-lifetime-and-start-ages.md).
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "K|auto|none", default_value = "auto")
    )]
    pub reconnect_every: String,
    /// With --reconnect-every: the first workers start at random ages spread over a life (`uniform`: each
    /// first maps what a worker of its age would have), so the measured window sees the steady state at
    /// any worker count; `young`: all start new together (as results without this field did).
    #[cfg_attr(feature = "cli", arg(long, value_name = "uniform|young", default_value = "uniform",
          value_parser = ["uniform", "young"]))]
    pub start_age: String,
    /// Threads instead of fork()ed processes (shared page tables: far fewer faults).
    #[cfg_attr(feature = "cli", arg(long))]
    pub threads: bool,
    /// Touch the free-list head's descriptor before acquiring (moves its fault out of the lock).
    #[cfg_attr(feature = "cli", arg(long))]
    pub prefetch_next: bool,
    /// Grow hugetlb pools for hugetlb cells (root); restored afterwards, also on Ctrl-C.
    #[cfg_attr(feature = "cli", arg(long))]
    pub reserve_hugepages: bool,
    /// Seed for the free-list permutation and the workers.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 1))]
    pub seed: u64,
}

impl LockOptions {
    /// Checks every option and resolves it against `host`.
    pub fn spec(&self, host: &HostShape) -> Result<Spec, OptionError> {
        // The names' own errors say what they are and what there is: the option as a whole is refused.
        let whole = |option, why: String| OptionError::Whole { option, why };
        let locks = options::list(&self.locks)
            .iter()
            .map(|l| LockKind::parse(l).map_err(|e| whole("locks", e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let pages = options::list(&self.pages)
            .iter()
            .map(|p| Backing::parse(p).map_err(|e| whole("pages", e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        if locks.is_empty() || pages.is_empty() {
            return Err(OptionError::Empty {
                options: &["locks", "pages"],
            });
        }
        let max_workers = shmlock::MAX_WAITERS as u32;
        let (workers_given, workers) =
            options::counts("workers", "workers", &self.workers, host.cpus, max_workers)?;
        let duration =
            options::duration_at_least("duration", &self.duration, Duration::from_millis(100))?;
        let warmup = options::duration_at_least("warmup", &self.warmup, Duration::ZERO)?;
        let repeat = options::repeat(self.repeat)?;
        let descriptors = self
            .descriptors
            .unwrap_or_else(|| lock::default_descriptors(host.mem_total_kib));
        if !(1024..=(1 << 28)).contains(&descriptors) {
            return Err(OptionError::Invalid {
                option: "descriptors",
                value: descriptors.to_string(),
                why: "1024..268435456".into(),
            });
        }
        let reconnect_given =
            ReconnectGiven::parse(&self.reconnect_every).ok_or_else(|| OptionError::Invalid {
                option: "reconnect_every",
                value: self.reconnect_every.clone(),
                why: "give a positive number of operations, auto or none".into(),
            })?;
        let reconnect_every = match reconnect_given {
            ReconnectGiven::Never => None,
            ReconnectGiven::Auto if self.threads => None,
            ReconnectGiven::Auto => Some(lock::auto_reconnect_every(descriptors)),
            ReconnectGiven::Every(_) if self.threads => {
                return Err(OptionError::Excludes {
                    option: "reconnect_every",
                    other: "threads",
                    why: "replaces worker processes",
                })
            }
            ReconnectGiven::Every(n) => Some(n),
        };
        let start_age =
            StartAge::from_name(&self.start_age).ok_or_else(|| OptionError::Invalid {
                option: "start_age",
                value: self.start_age.clone(),
                why: format!("expected {}", StartAge::expected()),
            })?;
        // Longer than a second per operation is no lock benchmark; far longer overflows the deadline arithmetic.
        for (option, ns) in [("cs_ns", self.cs_ns), ("work_ns", self.work_ns)] {
            if ns > 1_000_000_000 {
                return Err(OptionError::Invalid {
                    option,
                    value: ns.to_string(),
                    why: "at most 1000000000 (1 s of busy work per operation)".into(),
                });
            }
        }
        if self.reserve_hugepages && pages.iter().any(|p| p.hugetlb_kib().is_some()) && !host.root {
            return Err(NEEDS_ROOT);
        }
        Ok(Spec {
            locks,
            pages,
            workers_given,
            workers,
            duration_s: duration.as_secs_f64(),
            warmup_s: warmup.as_secs_f64(),
            repeat,
            descriptors,
            cs_ns: self.cs_ns,
            work_ns: self.work_ns,
            reconnect_every,
            reconnect_every_given: reconnect_given,
            threads: self.threads,
            prefetch_next: self.prefetch_next,
            start_age,
            seed: self.seed,
        })
    }
}

/// `reserve_hugepages` without root, in either bench.
pub(crate) const NEEDS_ROOT: OptionError = OptionError::NeedsRoot {
    option: "reserve_hugepages",
    does: "resizes the hugetlb pool",
    fix: "leave it out and grow the pool yourself",
};

/// The failed cells of a result, one `lock pages Nw: reason` each.
pub fn failures(res: &LockResult) -> Vec<String> {
    let failed = res.cells.iter().filter(|c| c.status == Status::Failed);
    failed
        .map(|c: &Cell| {
            let why = c.reason.as_deref().unwrap_or("");
            format!("{} {} {}w: {why}", c.lock, c.pages, c.workers)
        })
        .collect()
}
