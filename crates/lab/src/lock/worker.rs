//! A `bench lock` worker: the loop one process or thread runs (wait for the start, operate until told to
//! stop or its life is over, record acquire and hold times while measuring) and the report it hands back
//! (in memory for a thread, as a JSON file for a forked process).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use shmlock::shm::ShmRegion;
use shmlock::spin::XorShift;
use shmlock::RawLock;

use super::layout::{Shared, PHASE_MEASURE, PHASE_STOP, PHASE_WAIT};
use super::workload::{now_ns, spin_for, STALL_NS};
use super::RseqSlice;
use hostfacts::rusage::{Usage, Who};

/// What a worker reports (serialized to a file by a process worker).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct WorkerOut {
    pub(super) slot: u32,
    pub(super) total_ops: u64,
    pub(super) ops: u64,
    pub(super) stalled: u64,
    pub(super) sleeps: u64,
    pub(super) spins: u64,
    pub(super) minflt: u64,
    pub(super) vcsw: u64,
    pub(super) ivcsw: u64,
    pub(super) user_ns: u64,
    pub(super) sys_ns: u64,
    pub(super) acquire_hist: Vec<u8>,
    pub(super) hold_hist: Vec<u8>,
    pub(super) slice: Option<RseqSlice>,
    pub(super) error: Option<String>,
}

/// One worker's settings.
pub(super) struct WorkerCfg {
    pub(super) slot: u32,
    /// Operations after which the worker leaves (to be replaced), if any.
    pub(super) limit: Option<u64>,
    /// Operations this worker is taken to have done already (it maps what they would have mapped first).
    pub(super) age: u64,
    pub(super) seed: u64,
    pub(super) cs_ns: u64,
    pub(super) work_ns: u64,
    pub(super) prefetch: bool,
    pub(super) rusage_who: Who,
}

/// An empty histogram of ns (1 ns to 120 s, 3 significant figures).
pub(super) fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000_000, 3).expect("valid histogram bounds")
}

fn ser(h: &Histogram<u64>) -> Vec<u8> {
    let mut v = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut v)
        .expect("serializing a histogram to memory");
    v
}

/// Reads back a histogram a worker serialized.
pub(super) fn de(b: &[u8]) -> Result<Histogram<u64>, super::BenchError> {
    Deserializer::new()
        .deserialize(&mut &b[..])
        .map_err(|e| super::failed(format!("reading a worker histogram: {e:?}")))
}

/// The lock's counters as the result records them.
fn rseq_slice_of(c: rseqslice::SliceCounts) -> RseqSlice {
    RseqSlice {
        requests: c.requests,
        grants: c.grants,
        yields: c.yields,
        cleared: c.cleared,
    }
}

/// The worker loop. Runs until the phase says stop or `limit` operations were done.
pub(super) fn worker<L: RawLock>(sh: &Shared<L>, cfg: &WorkerCfg) -> WorkerOut {
    // SAFETY: the lock lives in the region for the whole run.
    let lock = unsafe { &*sh.lock };
    let mut w = lock.waiter(cfg.slot);
    let control = sh.control();
    sh.age(cfg.age, cfg.seed);
    control.ready.fetch_add(1, Ordering::AcqRel);
    while control.phase.load(Ordering::Acquire) == PHASE_WAIT {
        std::thread::sleep(Duration::from_micros(200));
    }
    let t0 = Instant::now();
    let mut rng = XorShift::new(cfg.seed);
    let mut out = WorkerOut {
        slot: cfg.slot,
        ..Default::default()
    };
    let mut acq = hist();
    let mut hold = hist();
    let mut measuring = false;
    let mut published = 0u64;
    let mut ru0 = Usage::now(cfg.rusage_who);
    let mut slice0 = L::slice_counts(&w);
    loop {
        let phase = control.phase.load(Ordering::Relaxed);
        if phase == PHASE_STOP || cfg.limit.is_some_and(|l| cfg.age + out.total_ops >= l) {
            break;
        }
        if phase == PHASE_MEASURE && !measuring {
            measuring = true;
            ru0 = Usage::now(cfg.rusage_who);
            slice0 = L::slice_counts(&w);
        }
        if cfg.prefetch {
            sh.prefetch_head();
        }
        let a0 = now_ns(t0);
        let got = lock.lock(&mut w);
        let a1 = now_ns(t0);
        // SAFETY: we hold the lock (taken just above, released just below).
        unsafe { sh.pop_or_sweep(&mut rng) };
        spin_for(t0, a1, cfg.cs_ns);
        let a2 = now_ns(t0);
        lock.unlock(&mut w);
        out.total_ops += 1;
        if measuring {
            out.ops += 1;
            let _ = acq.record((a1 - a0).max(1));
            let h = (a2 - a1).max(1);
            let _ = hold.record(h);
            if h > STALL_NS {
                out.stalled += 1;
            }
            out.sleeps += got.sleeps as u64;
            out.spins += got.spins;
        }
        if out.total_ops.is_multiple_of(256) {
            // Increments, not totals: a replacement worker keeps the slot's count rising.
            sh.slot(cfg.slot)
                .ops
                .fetch_add(out.total_ops - published, Ordering::Relaxed);
            published = out.total_ops;
        }
        spin_for(t0, now_ns(t0), cfg.work_ns);
    }
    sh.slot(cfg.slot)
        .ops
        .fetch_add(out.total_ops - published, Ordering::Relaxed);
    if measuring {
        let used = Usage::now(cfg.rusage_who).since(ru0);
        out.minflt = used.minflt;
        out.vcsw = used.nvcsw;
        out.ivcsw = used.nivcsw;
        out.user_ns = used.user_ns;
        out.sys_ns = used.sys_ns;
        out.slice = L::slice_counts(&w)
            .zip(slice0)
            .map(|(now, then)| rseq_slice_of(now.since(then)));
    }
    out.acquire_hist = ser(&acq);
    out.hold_hist = ser(&hold);
    out
}

/// The body of a forked worker process: populate the region's page tables first if asked, run the worker,
/// write its report (or the panic or populate error) as JSON to `out`. Returns the exit code: 0, or 3
/// when the report could not be written.
pub(super) fn process_worker<L: RawLock>(
    sh: &Shared<L>,
    cfg: &WorkerCfg,
    out: &Path,
    populate: Option<&ShmRegion>,
) -> i32 {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Some(r) = populate {
            if let Err(e) = r.populate_write() {
                return WorkerOut {
                    slot: cfg.slot,
                    error: Some(e.to_string()),
                    ..Default::default()
                };
            }
        }
        worker(sh, cfg)
    }));
    let out_val = match result {
        Ok(o) => o,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            WorkerOut {
                slot: cfg.slot,
                error: Some(format!("worker {} panicked: {msg}", cfg.slot)),
                ..Default::default()
            }
        }
    };
    match serde_json::to_vec(&out_val).map(|b| std::fs::write(out, b)) {
        Ok(Ok(())) => 0,
        _ => 3,
    }
}
