//! The repetition driver of `bench lock`: lay out the region, start the workers (threads, or forked
//! processes replaced after their life), step the phases (wait for readiness, warm up, measure, stop), reap
//! the workers, check the free list and sum their reports into a [`Rep`].

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axes::Backing;
use axes::LockKind;
use axes::StartAge;
use hdrhistogram::Histogram;
use shmlock::shm::ShmRegion;
use shmlock::{with_lock_type, RawLock, MAX_WAITERS};

use super::layout::{
    check_free_list, init_free_list, layout, Shared, LOCK_AREA, PHASE_MEASURE, PHASE_STOP,
    PHASE_WAIT, PHASE_WARMUP,
};
use super::worker::{de, hist, process_worker, worker, WorkerCfg, WorkerOut};
use super::workload::start_age;
use super::{failed, BenchError, Percentiles, Rep, RseqSlice, Spec};
use hostfacts::rusage::Who;
use hostguard::workers::Children;
use osutil::procinterrupts::{self, Ipis};
use osutil::procstat as cpustat;

/// Inputs of one repetition.
pub struct RepInput<'a> {
    /// The lock.
    pub lock: LockKind,
    /// The page backing.
    pub backing: Backing,
    /// The region (from [`new_region`]).
    pub region: &'a ShmRegion,
    /// Workers.
    pub workers: u32,
    /// The experiment.
    pub spec: &'a Spec,
    /// Repetition index (varies the seed).
    pub rep: u32,
    /// Called about every 100 ms with (phase name, fraction done, live ops/s).
    pub progress: &'a mut dyn FnMut(&str, f64, f64),
}

/// Runs one repetition of one cell.
pub fn run_rep(input: RepInput<'_>) -> Result<Rep, BenchError> {
    with_lock_type!(input.lock, L => run_rep_typed::<L>(input))
}

fn run_rep_typed<L: RawLock>(input: RepInput<'_>) -> Result<Rep, BenchError> {
    let spec = input.spec;
    const _: () = assert!(std::mem::size_of::<shmlock::mcs::McsLock>() <= LOCK_AREA);
    if std::mem::size_of::<L>() > LOCK_AREA || input.workers as usize > MAX_WAITERS {
        return Err(failed(format!("at most {MAX_WAITERS} workers")));
    }
    let lay = layout(spec.descriptors);
    let region = input.region;
    if region.len() < lay.total || region.backing() != input.backing {
        return Err(failed("internal: the region does not fit the spec"));
    }
    // A clean slate for the lock, the control block and the slots (the descriptors are rewritten below).
    // SAFETY: no worker exists yet; the region is at least `lay.total` bytes (checked above).
    let sh = unsafe { Shared::<L>::over(region, spec.descriptors) };
    // SAFETY: the lock's memory is zeroed (by `over`) and not shared yet.
    unsafe { L::init(sh.lock as *mut L) }.map_err(|e| failed(e.to_string()))?;
    let perm = init_free_list(
        &sh,
        spec.seed ^ (input.rep as u64).wrapping_mul(0x9E37_79B9),
    );

    let dir = tempfile::Builder::new()
        .prefix("preemptlab-lock-")
        .tempdir()
        .map_err(|e| failed(format!("temp dir: {e}")))?;
    let populate = input.backing == Backing::Page4kPopulate;
    let mk_cfg = |slot: u32, gen: u32| WorkerCfg {
        slot,
        limit: spec.reconnect_every,
        age: match spec.reconnect_every {
            Some(life) if gen == 0 && !populate && spec.start_age == StartAge::Uniform => {
                start_age(life, spec.seed, input.rep, slot)
            }
            _ => 0,
        },
        seed: spec.seed ^ ((slot as u64) << 20) ^ gen as u64 ^ ((input.rep as u64) << 40),
        cs_ns: spec.cs_ns,
        work_ns: spec.work_ns,
        prefetch: spec.prefetch_next,
        rusage_who: if spec.threads {
            Who::Thread
        } else {
            Who::Process
        },
    };

    let timing = Timing {
        warmup: Duration::from_secs_f64(spec.warmup_s),
        duration: Duration::from_secs_f64(spec.duration_s),
    };
    let stat0 = cpustat::now();
    let (outs, measured, respawns) = if spec.threads {
        let (outs, measured) = run_threads(&sh, input.workers, &mk_cfg, timing, input.progress)?;
        (outs, measured, 0)
    } else {
        let workers = Processes {
            sh: &sh,
            region,
            populate,
            dir: dir.path(),
            workers: input.workers,
            reconnect: spec.reconnect_every.is_some(),
        };
        workers.run(&mk_cfg, timing, input.progress)?
    };
    if let Some(e) = outs.iter().find_map(|o| o.error.clone()) {
        return Err(failed(format!("a worker failed: {e}")));
    }
    let mut rep = summarize_rep(&sh, &perm, &outs, measured.length, input.workers, respawns)?;
    rep.steal_pct = cpustat::steal_pct_since(stat0);
    rep.idle_pct = measured.idle_pct;
    let per_op = |n: Option<u64>| n.filter(|_| rep.ops > 0).map(|n| n as f64 / rep.ops as f64);
    rep.resched_ipis_per_op = per_op(measured.ipis.resched);
    rep.call_ipis_per_op = per_op(measured.ipis.call);
    if !rep.check.ok {
        return Err(failed(format!(
            "CORRECTNESS VIOLATION with lock {} on {}: counter {} vs {} operations counted; free list {} + popped {} vs {} descriptors ({} marked not in list)",
            input.lock, input.backing, rep.check.counter, rep.check.ops_counted, rep.check.free_list_len, rep.check.popped, spec.descriptors, rep.check.marked_not_in_list
        )));
    }
    Ok(rep)
}

/// The warm-up and the measured window of a repetition.
#[derive(Clone, Copy)]
struct Timing {
    warmup: Duration,
    duration: Duration,
}

/// The workers as threads of this process: spawned, driven through the window, stopped and joined.
fn run_threads<L: RawLock>(
    sh: &Shared<L>,
    workers: u32,
    mk_cfg: &dyn Fn(u32, u32) -> WorkerCfg,
    timing: Timing,
    progress: &mut dyn FnMut(&str, f64, f64),
) -> Result<(Vec<WorkerOut>, Window), BenchError> {
    std::thread::scope(|scope| -> Result<(Vec<WorkerOut>, Window), BenchError> {
        let mut handles = Vec::new();
        for slot in 0..workers {
            let cfg = mk_cfg(slot, 0);
            handles.push(scope.spawn(move || worker(sh, &cfg)));
        }
        let r = drive(
            sh,
            workers,
            timing.warmup,
            timing.duration,
            progress,
            &mut |_| Ok(()),
        );
        sh.control().phase.store(PHASE_STOP, Ordering::Release);
        let outs: Vec<WorkerOut> = handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| WorkerOut {
                    error: Some("worker thread panicked".into()),
                    ..Default::default()
                })
            })
            .collect();
        Ok((outs, r?))
    })
}

/// The workers as forked processes: each writes its report to `dir`; with a reconnect limit, one that
/// reached the end of its life is reaped and replaced (a new backend), counted in the respawns.
struct Processes<'a, L> {
    sh: &'a Shared<L>,
    region: &'a ShmRegion,
    populate: bool,
    dir: &'a std::path::Path,
    workers: u32,
    reconnect: bool,
}

impl<L: RawLock> Processes<'_, L> {
    fn run(
        &self,
        mk_cfg: &dyn Fn(u32, u32) -> WorkerCfg,
        timing: Timing,
        progress: &mut dyn FnMut(&str, f64, f64),
    ) -> Result<(Vec<WorkerOut>, Window, u64), BenchError> {
        let (sh, region, populate, dir) = (self.sh, self.region, self.populate, self.dir);
        let mut respawns = 0u64;
        let mut outs: Vec<WorkerOut> = Vec::new();
        let mut children: Children<(u32, u32)> = Children::new();
        let spawn = |slot: u32, gen: u32, children: &mut Children<(u32, u32)>| {
            let cfg = mk_cfg(slot, gen);
            let path = dir.join(format!("slot-{slot}-{gen}.json"));
            let populate = populate.then_some(region);
            children
                .spawn((slot, gen), c"plab-worker", || {
                    process_worker(sh, &cfg, &path, populate)
                })
                .map(drop)
                .map_err(|e| failed(format!("fork: {e}")))
        };
        let mut started = Ok(());
        for slot in 0..self.workers {
            if let Err(e) = spawn(slot, 0, &mut children) {
                started = Err(e);
                break;
            }
        }
        let r = started.and_then(|_| {
            drive(
                sh,
                self.workers,
                timing.warmup,
                timing.duration,
                progress,
                &mut |phase| {
                    // Reap workers that reached the end of their life and start their replacements.
                    while let Some(((slot, gen), exit)) = children.try_reap() {
                        if !exit.success() {
                            return Err(failed(format!(
                                "worker {slot} (pid {}) died: status {:#x}",
                                exit.pid, exit.status
                            )));
                        }
                        if phase < PHASE_STOP && self.reconnect {
                            respawns += 1;
                            spawn(slot, gen + 1, &mut children)?;
                        }
                    }
                    Ok(())
                },
            )
        });
        sh.control().phase.store(PHASE_STOP, Ordering::Release);
        let timeout = Duration::from_secs(30);
        let mut abnormal = None;
        let killed = children.reap_all(timeout, |(slot, _), exit| {
            if !exit.success() && abnormal.is_none() {
                abnormal = Some(failed(format!(
                    "worker {slot} (pid {}) ended abnormally: status {:#x}",
                    exit.pid, exit.status
                )));
            }
        });
        let measured = r?;
        if killed > 0 && !osutil::stop::interrupted() {
            return Err(failed(format!("{killed} workers did not stop within {timeout:?} and were killed (a waiter stuck behind a lock?)")));
        }
        if let Some(e) = abnormal {
            return Err(e);
        }
        for e in std::fs::read_dir(dir).map_err(|e| failed(e.to_string()))? {
            let p = e.map_err(|e| failed(e.to_string()))?.path();
            let text = std::fs::read(&p).map_err(|e| failed(format!("{}: {e}", p.display())))?;
            outs.push(
                serde_json::from_slice(&text)
                    .map_err(|e| failed(format!("{}: {e}", p.display())))?,
            );
        }

        Ok((outs, measured, respawns))
    }
}

/// The measured window: how long it lasted, the share of the machine's CPU time left idle in it, and the
/// machine's inter-processor interrupts in it.
struct Window {
    length: Duration,
    idle_pct: Option<f64>,
    ipis: Ipis,
}

/// Sets the phases: wait for readiness, warm up, measure. Returns the measured window.
fn drive<L>(
    sh: &Shared<L>,
    workers: u32,
    warmup: Duration,
    duration: Duration,
    progress: &mut dyn FnMut(&str, f64, f64),
    tick: &mut dyn FnMut(u32) -> Result<(), BenchError>,
) -> Result<Window, BenchError> {
    let c = sh.control();
    let t = Instant::now();
    while c.ready.load(Ordering::Acquire) < workers {
        tick(PHASE_WAIT)?;
        if osutil::stop::interrupted() {
            return Err(BenchError::Interrupted);
        }
        if t.elapsed() > Duration::from_secs(60) {
            return Err(failed(format!(
                "only {} of {workers} workers started within 60 s",
                c.ready.load(Ordering::Acquire)
            )));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let total_ops = || {
        (0..workers)
            .map(|i| sh.slot(i).ops.load(Ordering::Relaxed))
            .sum::<u64>()
    };
    let mut wait = |phase: u32,
                    name: &str,
                    d: Duration,
                    progress: &mut dyn FnMut(&str, f64, f64)|
     -> Result<(), BenchError> {
        let start = Instant::now();
        let mut last = (Instant::now(), total_ops());
        let mut rate = 0.0;
        while start.elapsed() < d {
            tick(phase)?;
            if osutil::stop::interrupted() {
                return Err(BenchError::Interrupted);
            }
            std::thread::sleep(Duration::from_millis(2));
            if last.0.elapsed() >= Duration::from_millis(100) {
                let ops = total_ops();
                rate = ops.saturating_sub(last.1) as f64 / last.0.elapsed().as_secs_f64();
                last = (Instant::now(), ops);
                progress(
                    name,
                    (start.elapsed().as_secs_f64() / d.as_secs_f64()).min(1.0),
                    rate,
                );
            }
        }
        progress(name, 1.0, rate);
        Ok(())
    };
    c.phase.store(PHASE_WARMUP, Ordering::Release);
    wait(PHASE_WARMUP, "warm-up", warmup, progress)?;
    c.phase.store(PHASE_MEASURE, Ordering::Release);
    let m0 = Instant::now();
    let idle0 = cpustat::now();
    let ipis0 = procinterrupts::now();
    wait(PHASE_MEASURE, "measure", duration, progress)?;
    let idle_pct = cpustat::idle_pct_since(idle0);
    let ipis = match (ipis0, procinterrupts::now()) {
        (Some(a), Some(b)) => a.since(b),
        _ => Ipis::default(),
    };
    let length = m0.elapsed();
    c.phase.store(PHASE_STOP, Ordering::Release);
    Ok(Window {
        length,
        idle_pct,
        ipis,
    })
}

/// The percentiles of a histogram of ns.
fn percentiles(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    Percentiles {
        mean: Some(h.mean()),
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    }
}

/// Sums the workers' reports into a repetition and checks the free list.
fn summarize_rep<L>(
    sh: &Shared<L>,
    perm: &[u32],
    outs: &[WorkerOut],
    measured: Duration,
    workers: u32,
    respawns: u64,
) -> Result<Rep, BenchError> {
    let mut acq = hist();
    let mut hold = hist();
    let mut per_slot = vec![0u64; workers as usize];
    let (mut ops, mut total, mut stalled, mut sleeps, mut spins) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let (mut minflt, mut vcsw, mut ivcsw, mut user, mut sys) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut slice: Option<RseqSlice> = None;
    for o in outs {
        if let Some(c) = o.slice {
            slice = Some(slice.unwrap_or_default().plus(c));
        }
        acq.add(de(&o.acquire_hist)?)
            .map_err(|e| failed(format!("{e:?}")))?;
        hold.add(de(&o.hold_hist)?)
            .map_err(|e| failed(format!("{e:?}")))?;
        if let Some(s) = per_slot.get_mut(o.slot as usize) {
            *s += o.ops;
        }
        ops += o.ops;
        total += o.total_ops;
        stalled += o.stalled;
        sleeps += o.sleeps;
        spins += o.spins;
        minflt += o.minflt;
        vcsw += o.vcsw;
        ivcsw += o.ivcsw;
        user += o.user_ns;
        sys += o.sys_ns;
    }
    let check = check_free_list(sh, perm, total);
    let per = |x: u64| if ops > 0 { x as f64 / ops as f64 } else { 0.0 };
    let elapsed_s = measured.as_secs_f64();
    let (popped, sweeps) = sh.popped_and_sweeps();
    let cdf_q = [
        0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0,
    ];
    Ok(Rep {
        ops,
        elapsed_s,
        ops_per_s: ops as f64 / elapsed_s,
        acquire_ns: percentiles(&acq),
        hold_ns: percentiles(&hold),
        acquire_cdf: if acq.is_empty() {
            vec![]
        } else {
            cdf_q
                .iter()
                .map(|q| [acq.value_at_quantile(*q) as f64, *q])
                .collect()
        },
        stalled_holds: stalled,
        stalled_per_mop: per(stalled) * 1e6,
        minflt_per_op: per(minflt),
        vcsw_per_op: per(vcsw),
        ivcsw_per_op: per(ivcsw),
        user_ns_per_op: per(user),
        sys_ns_per_op: per(sys),
        cpu_ns_per_op: per(user + sys),
        sleeps_per_op: per(sleeps),
        spins_per_op: per(spins),
        jain: stats::jain(&per_slot.iter().map(|&x| x as f64).collect::<Vec<_>>()),
        worker_ops: per_slot,
        free_list_fraction: if popped + sweeps > 0 {
            popped as f64 / (popped + sweeps) as f64
        } else {
            0.0
        },
        respawns,
        steal_pct: None,
        idle_pct: None,
        resched_ipis_per_op: None,
        call_ipis_per_op: None,
        rseq_slice: slice,
        check,
    })
}
