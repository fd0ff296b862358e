//! `bench lock`: process-shared lock contention on a buffer-pool free list in shared memory.
//!
//! The workload is modelled on PostgreSQL's `StrategyGetBuffer` (PG 9.5-18, `freelist.c`): a control block
//! (lock, free-list head, clock hand) and an array of 64-byte buffer descriptors. The free list is a random
//! permutation of the descriptors, linked through `free_next`, initialized by the parent (as the postmaster
//! initializes shared buffers). One operation:
//!
//! 1. take the lock (`acquire_ns` is the wait);
//! 2. pop the free-list head: read the descriptor it names (a random one: on 4 KB pages, the first touch
//!    of its page in this process is a minor fault, taken while holding the lock), unlink it; when the list
//!    is empty, one clock-sweep step instead;
//! 3. optionally spin `cs_ns` more inside, then release (`hold_ns` runs from 1 to here);
//! 4. work `work_ns` outside the lock.
//!
//! A hold above 100 µs is a *stalled hold*: the holder was descheduled (or stuck in the kernel) while
//! holding. Correctness is checked on every run: a plain counter bumped under the lock must equal the
//! operations the workers counted, and the free list must still be a consistent permutation.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use shmlock::shm::{Backing, ShmRegion};
use shmlock::spin::XorShift;
use shmlock::{with_lock_type, LockKind, RawLock, MAX_WAITERS};

use crate::guard;

pub use results::lock::{CellSpec, Check, Percentiles, Rep, RseqSlice, Spec};

/// A hold longer than this is a stalled hold.
pub const STALL_NS: u64 = 100_000;
const NOT_IN_LIST: i32 = -2;
const END_OF_LIST: i32 = -1;

const PHASE_WAIT: u32 = 0;
const PHASE_WARMUP: u32 = 1;
const PHASE_MEASURE: u32 = 2;
const PHASE_STOP: u32 = 3;

/// One buffer descriptor, the size of PostgreSQL's padded `BufferDesc`.
#[repr(C, align(64))]
struct Desc {
    buf_id: u32,
    free_next: i32,
    usage_count: u32,
    refcount: u32,
    flags: u32,
    tag: [u32; 5],
    _pad: [u8; 24],
}
const _: () = assert!(std::mem::size_of::<Desc>() == 64);

/// The strategy control block. Line 0 is only touched under the lock.
#[repr(C, align(64))]
struct Control {
    free_head: i64,
    clock_hand: u64,
    counter: u64,
    popped: u64,
    sweeps: u64,
    _pad0: [u8; 24],
    phase: AtomicU32,
    _pad1: [u8; 60],
    ready: AtomicU32,
    _pad2: [u8; 60],
}
const _: () = assert!(std::mem::size_of::<Control>() == 192);

/// A worker's published progress (its own cache line).
#[repr(C, align(64))]
struct Slot {
    ops: AtomicU64,
    _pad: [u8; 56],
}

/// The percentiles of a histogram of ns.
fn percentiles(h: &Histogram<u64>) -> Percentiles {
    if h.is_empty() {
        return Percentiles::default();
    }
    Percentiles {
        mean: h.mean(),
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    }
}

/// The lock's counters as the result records them.
fn rseq_slice_of(c: shmlock::rseq::SliceCounts) -> RseqSlice {
    RseqSlice {
        requests: c.requests,
        grants: c.grants,
        yields: c.yields,
        cleared: c.cleared,
    }
}

/// What a worker reports (serialized to a file by a process worker).
#[derive(Debug, Default, Serialize, Deserialize)]
struct WorkerOut {
    slot: u32,
    total_ops: u64,
    ops: u64,
    stalled: u64,
    sleeps: u64,
    spins: u64,
    minflt: u64,
    vcsw: u64,
    ivcsw: u64,
    user_ns: u64,
    sys_ns: u64,
    acquire_hist: Vec<u8>,
    hold_hist: Vec<u8>,
    slice: Option<RseqSlice>,
    error: Option<String>,
}

/// Errors of a run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// SIGINT/SIGTERM.
    #[error("interrupted")]
    Interrupted,
    /// Something failed; the message says what.
    #[error("{0}")]
    Failed(String),
}

fn failed(s: impl Into<String>) -> BenchError {
    BenchError::Failed(s.into())
}

struct Layout {
    lock_off: usize,
    control_off: usize,
    slots_off: usize,
    descs_off: usize,
    total: usize,
}

/// Room reserved for any lock (the largest is MCS, with a node per waiter), so one region serves every
/// lock of a run.
const LOCK_AREA: usize = std::mem::size_of::<shmlock::mcs::McsLock>().div_ceil(4096) * 4096;

fn layout(descriptors: u64) -> Layout {
    let lock_off = 0;
    let control_off = LOCK_AREA;
    let slots_off = control_off + std::mem::size_of::<Control>();
    let descs_off = (slots_off + MAX_WAITERS * 64).div_ceil(4096) * 4096;
    Layout {
        lock_off,
        control_off,
        slots_off,
        descs_off,
        total: descs_off + descriptors as usize * 64,
    }
}

/// Maps the shared region for `descriptors` on `backing`. A run keeps one region per backing and
/// re-initializes it for every repetition (as shared_buffers outlives backends); workers are new processes
/// each time, so their page tables start empty.
pub fn new_region(backing: Backing, descriptors: u64) -> Result<ShmRegion, String> {
    ShmRegion::new(layout(descriptors).total, backing)
}

/// Shared pointers into the region.
struct Shared<L> {
    lock: *const L,
    control: *mut Control,
    slots: *const Slot,
    descs: *mut Desc,
    n: u64,
}

// SAFETY: everything behind the pointers is shared memory designed for concurrent use: atomics, or plain
// fields accessed only while holding the lock.
unsafe impl<L> Send for Shared<L> {}
// SAFETY: as above.
unsafe impl<L> Sync for Shared<L> {}

impl<L> Shared<L> {
    fn control(&self) -> &Control {
        // SAFETY: the region outlives every worker.
        unsafe { &*self.control }
    }
    fn slot(&self, i: u32) -> &Slot {
        // SAFETY: i < MAX_WAITERS (checked when the spec is built); the slots array is in the region.
        unsafe { &*self.slots.add(i as usize) }
    }
}

fn now_ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

fn rusage(who: libc::c_int) -> libc::rusage {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the pointer we pass.
    unsafe { libc::getrusage(who, ru.as_mut_ptr()) };
    // SAFETY: zeroed and then filled by the kernel.
    unsafe { ru.assume_init() }
}

fn tv_ns(tv: libc::timeval) -> u64 {
    tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000
}

fn spin_for(t0: Instant, from_ns: u64, ns: u64) {
    if ns == 0 {
        return;
    }
    while now_ns(t0) - from_ns < ns {
        std::hint::spin_loop();
    }
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000_000, 3).expect("valid histogram bounds")
}

fn ser(h: &Histogram<u64>) -> Vec<u8> {
    let mut v = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut v)
        .expect("serializing a histogram to memory");
    v
}

fn de(b: &[u8]) -> Result<Histogram<u64>, String> {
    Deserializer::new()
        .deserialize(&mut &b[..])
        .map_err(|e| format!("reading a worker histogram: {e:?}"))
}

struct WorkerCfg {
    slot: u32,
    limit: Option<u64>,
    /// Operations this worker is taken to have done already (it maps what they would have mapped first).
    age: u64,
    seed: u64,
    cs_ns: u64,
    work_ns: u64,
    prefetch: bool,
    rusage_who: libc::c_int,
}

/// The worker loop. Runs until the phase says stop or `limit` operations were done.
fn worker<L: RawLock>(sh: &Shared<L>, cfg: &WorkerCfg) -> WorkerOut {
    // SAFETY: the lock lives in the region for the whole run.
    let lock = unsafe { &*sh.lock };
    let mut w = lock.waiter(cfg.slot);
    let control = sh.control();
    age(sh, cfg);
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
    let mut ru0 = rusage(cfg.rusage_who);
    let mut slice0 = L::slice_counts(&w);
    let ctl = sh.control;
    loop {
        let phase = control.phase.load(Ordering::Relaxed);
        if phase == PHASE_STOP || cfg.limit.is_some_and(|l| cfg.age + out.total_ops >= l) {
            break;
        }
        if phase == PHASE_MEASURE && !measuring {
            measuring = true;
            ru0 = rusage(cfg.rusage_who);
            slice0 = L::slice_counts(&w);
        }
        if cfg.prefetch {
            // Racy read of the head outside the lock, only to map its page in this process.
            // SAFETY: reading shared memory; a stale value is harmless (bounds-checked below).
            let head = unsafe { std::ptr::read_volatile(&(*ctl).free_head) };
            if head >= 0 && (head as u64) < sh.n {
                // SAFETY: head < n, inside the descriptor array.
                unsafe { std::ptr::read_volatile(&(*sh.descs.add(head as usize)).buf_id) };
            }
        }
        let a0 = now_ns(t0);
        let got = lock.lock(&mut w);
        let a1 = now_ns(t0);
        // SAFETY: we hold the lock: line 0 of the control block and the descriptors are ours alone. Plain
        // (volatile) accesses, so that broken exclusion would show up as a wrong counter.
        unsafe {
            let head = std::ptr::read_volatile(&(*ctl).free_head);
            if head >= 0 {
                let d = sh.descs.add(head as usize);
                let next = std::ptr::read_volatile(&(*d).free_next);
                std::ptr::write_volatile(&mut (*ctl).free_head, next as i64);
                std::ptr::write_volatile(&mut (*d).free_next, NOT_IN_LIST);
                std::ptr::write_volatile(&mut (*d).refcount, (*d).refcount + 1);
                std::ptr::write_volatile(&mut (*ctl).popped, (*ctl).popped + 1);
            } else {
                let hand = std::ptr::read_volatile(&(*ctl).clock_hand);
                std::ptr::write_volatile(&mut (*ctl).clock_hand, (hand + 1) % sh.n);
                let d = sh.descs.add(hand as usize);
                let u = std::ptr::read_volatile(&(*d).usage_count);
                std::ptr::write_volatile(
                    &mut (*d).usage_count,
                    u.saturating_sub(1) + (rng.next_u64() & 1) as u32,
                );
                std::ptr::write_volatile(&mut (*ctl).sweeps, (*ctl).sweeps + 1);
            }
            std::ptr::write_volatile(&mut (*ctl).counter, (*ctl).counter + 1);
        }
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
        if out.total_ops % 256 == 0 {
            // Increments, not totals: a replacement worker (--reconnect-every) keeps the slot's count rising.
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
        let ru1 = rusage(cfg.rusage_who);
        out.minflt = (ru1.ru_minflt - ru0.ru_minflt) as u64;
        out.vcsw = (ru1.ru_nvcsw - ru0.ru_nvcsw) as u64;
        out.ivcsw = (ru1.ru_nivcsw - ru0.ru_nivcsw) as u64;
        out.user_ns = tv_ns(ru1.ru_utime).saturating_sub(tv_ns(ru0.ru_utime));
        out.sys_ns = tv_ns(ru1.ru_stime).saturating_sub(tv_ns(ru0.ru_stime));
        out.slice = L::slice_counts(&w)
            .zip(slice0)
            .map(|(now, then)| rseq_slice_of(now.since(then)));
    }
    out.acquire_hist = ser(&acq);
    out.hold_hist = ser(&hold);
    out
}

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
    let base = region.as_ptr();
    // A clean slate for the lock, the control block and the slots (the descriptors are rewritten below).
    // SAFETY: no worker exists yet; the range is inside the region.
    unsafe { std::ptr::write_bytes(base, 0, lay.descs_off) };
    // SAFETY: offsets are inside the region (layout computed its size); the region is fresh and zeroed.
    let sh = unsafe {
        Shared::<L> {
            lock: base.add(lay.lock_off) as *const L,
            control: base.add(lay.control_off) as *mut Control,
            slots: base.add(lay.slots_off) as *const Slot,
            descs: base.add(lay.descs_off) as *mut Desc,
            n: spec.descriptors,
        }
    };
    // SAFETY: the lock's memory is zeroed and not shared yet.
    unsafe { L::init(sh.lock as *mut L) }.map_err(failed)?;
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
            Some(life) if gen == 0 && !populate && spec.start_age == "uniform" => {
                start_age(life, spec.seed, input.rep, slot)
            }
            _ => 0,
        },
        seed: spec.seed ^ ((slot as u64) << 20) ^ gen as u64 ^ ((input.rep as u64) << 40),
        cs_ns: spec.cs_ns,
        work_ns: spec.work_ns,
        prefetch: spec.prefetch_next,
        rusage_who: if spec.threads {
            libc::RUSAGE_THREAD
        } else {
            libc::RUSAGE_SELF
        },
    };

    let mut outs: Vec<WorkerOut> = Vec::new();
    let mut respawns = 0u64;
    let progress = input.progress;
    let warmup = Duration::from_secs_f64(spec.warmup_s);
    let duration = Duration::from_secs_f64(spec.duration_s);
    let stat0 = CpuTimes::now();
    let measured;
    if spec.threads {
        let result = std::thread::scope(|scope| -> Result<(Vec<WorkerOut>, Window), BenchError> {
            let mut handles = Vec::new();
            for slot in 0..input.workers {
                let cfg = mk_cfg(slot, 0);
                let sh = &sh;
                handles.push(scope.spawn(move || worker(sh, &cfg)));
            }
            let r = drive(&sh, input.workers, warmup, duration, progress, &mut |_| {
                Ok(())
            });
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
        });
        let (o, m) = result?;
        outs = o;
        measured = m;
    } else {
        let mut children: HashMap<libc::pid_t, (u32, u32)> = HashMap::new();
        let mut gens = vec![0u32; input.workers as usize];
        let spawn = |slot: u32,
                     gen: u32,
                     children: &mut HashMap<libc::pid_t, (u32, u32)>|
         -> Result<(), BenchError> {
            let cfg = mk_cfg(slot, gen);
            let path = dir.path().join(format!("slot-{slot}-{gen}.json"));
            let pid = fork_worker(&sh, &cfg, &path, if populate { Some(region) } else { None })?;
            children.insert(pid, (slot, gen));
            Ok(())
        };
        let mut started = Ok(());
        for slot in 0..input.workers {
            if let Err(e) = spawn(slot, 0, &mut children) {
                started = Err(e);
                break;
            }
        }
        let r = started.and_then(|_| {
            drive(
                &sh,
                input.workers,
                warmup,
                duration,
                progress,
                &mut |phase| {
                    // Reap workers that left for --reconnect-every and start their replacements.
                    loop {
                        let mut status = 0;
                        // SAFETY: reaping our own children without blocking.
                        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                        if pid <= 0 {
                            return Ok(());
                        }
                        let Some((slot, gen)) = children.remove(&pid) else {
                            continue;
                        };
                        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
                            return Err(failed(format!(
                                "worker {slot} (pid {pid}) died: status {status:#x}"
                            )));
                        }
                        if phase < PHASE_STOP && spec.reconnect_every.is_some() {
                            gens[slot as usize] = gen + 1;
                            respawns += 1;
                            spawn(slot, gen + 1, &mut children)?;
                        }
                    }
                },
            )
        });
        sh.control().phase.store(PHASE_STOP, Ordering::Release);
        let reaped = reap_all(&mut children, Duration::from_secs(30));
        measured = r?;
        reaped?;
        for e in std::fs::read_dir(dir.path()).map_err(|e| failed(e.to_string()))? {
            let p = e.map_err(|e| failed(e.to_string()))?.path();
            let text = std::fs::read(&p).map_err(|e| failed(format!("{}: {e}", p.display())))?;
            outs.push(
                serde_json::from_slice(&text)
                    .map_err(|e| failed(format!("{}: {e}", p.display())))?,
            );
        }
    }
    if let Some(e) = outs.iter().find_map(|o| o.error.clone()) {
        return Err(failed(format!("a worker failed: {e}")));
    }
    let mut rep = summarize_rep(&sh, &perm, &outs, measured.length, input.workers, respawns)?;
    rep.steal_pct = CpuTimes::steal_pct_since(stat0);
    rep.idle_pct = measured.idle_pct;
    if !rep.check.ok {
        return Err(failed(format!(
            "CORRECTNESS VIOLATION with lock {} on {}: counter {} vs {} operations counted; free list {} + popped {} vs {} descriptors ({} marked not in list)",
            input.lock, input.backing, rep.check.counter, rep.check.ops_counted, rep.check.free_list_len, rep.check.popped, spec.descriptors, rep.check.marked_not_in_list
        )));
    }
    Ok(rep)
}

/// The measured window: how long it lasted, and the share of the machine's CPU time left idle in it.
struct Window {
    length: Duration,
    idle_pct: Option<f64>,
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
        if guard::interrupted() {
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
            if guard::interrupted() {
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
    let idle0 = CpuTimes::now();
    wait(PHASE_MEASURE, "measure", duration, progress)?;
    let idle_pct = CpuTimes::idle_pct_since(idle0);
    let length = m0.elapsed();
    c.phase.store(PHASE_STOP, Ordering::Release);
    Ok(Window { length, idle_pct })
}

fn fork_worker<L: RawLock>(
    sh: &Shared<L>,
    cfg: &WorkerCfg,
    out: &Path,
    populate: Option<&ShmRegion>,
) -> Result<libc::pid_t, BenchError> {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the parent is single-threaded while it forks (progress is drawn from the main thread), so the
    // child inherits no held locks; glibc's fork keeps malloc usable in the child.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(failed(format!("fork: {}", std::io::Error::last_os_error())));
    }
    if pid > 0 {
        return Ok(pid);
    }
    // Child. Die with the parent; leave SIGINT to the parent, which stops us through the phase word.
    // SAFETY: prctl/signal with constant arguments; getppid has no preconditions.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        if libc::getppid() != parent {
            libc::_exit(9);
        }
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
        libc::prctl(
            libc::PR_SET_NAME,
            c"plab-worker".as_ptr() as libc::c_ulong,
            0,
            0,
            0,
        );
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if let Some(r) = populate {
            if let Err(e) = r.populate_write() {
                return WorkerOut {
                    slot: cfg.slot,
                    error: Some(e),
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
    let code = match serde_json::to_vec(&out_val).map(|b| std::fs::write(out, b)) {
        Ok(Ok(())) => 0,
        _ => 3,
    };
    // SAFETY: leave without running the parent's atexit handlers or destructors.
    unsafe { libc::_exit(code) }
}

/// Waits for every child; kills the ones still running after `timeout`.
fn reap_all(
    children: &mut HashMap<libc::pid_t, (u32, u32)>,
    timeout: Duration,
) -> Result<(), BenchError> {
    let t = Instant::now();
    let mut err = None;
    while !children.is_empty() {
        let mut status = 0;
        // SAFETY: reaping our own children.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid > 0 {
            if let Some((slot, _)) = children.remove(&pid) {
                if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) && err.is_none() {
                    err = Some(failed(format!(
                        "worker {slot} (pid {pid}) ended abnormally: status {status:#x}"
                    )));
                }
            }
            continue;
        }
        if pid < 0 {
            break;
        }
        if t.elapsed() > timeout || (guard::interrupted() && t.elapsed() > Duration::from_secs(2)) {
            for &p in children.keys() {
                // SAFETY: killing our own children.
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            for &p in children.keys() {
                let mut st = 0;
                // SAFETY: reaping our own children.
                unsafe { libc::waitpid(p, &mut st, 0) };
            }
            let n = children.len();
            children.clear();
            if !guard::interrupted() {
                return Err(failed(format!("{n} workers did not stop within {timeout:?} and were killed (a waiter stuck behind a lock?)")));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    match err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// One reading of the first line of /proc/stat (user nice system idle iowait irq softirq steal [guest
/// guest_nice], jiffies of all CPUs): the total and the two parts the benches report.
#[derive(Debug, Clone, Copy)]
pub struct CpuTimes {
    total: u64,
    idle: u64,
    steal: u64,
}

impl CpuTimes {
    /// Reads /proc/stat; None where it cannot be read or has fewer than eight CPU fields.
    pub fn now() -> Option<Self> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// Parses the text of /proc/stat (its first, aggregate `cpu` line); public for the fuzz targets.
    pub fn parse(text: &str) -> Option<Self> {
        let f: Vec<u64> = text
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .map_while(|f| f.parse().ok())
            .collect();
        // guest and guest_nice are already in user and nice. Sums that overflow are no reading.
        if f.len() < 8 {
            return None;
        }
        Some(Self {
            total: f[..8].iter().try_fold(0u64, |a, x| a.checked_add(*x))?,
            idle: f[3].checked_add(f[4])?,
            steal: f[7],
        })
    }

    /// The hypervisor's CPU steal since `start` (a reading taken earlier), % of all CPU time.
    pub fn steal_pct_since(start: Option<Self>) -> Option<f64> {
        start?.share(Self::now()?, |t| t.steal)
    }

    /// The share of all CPU time left idle (idle + iowait) since `start`, %.
    pub fn idle_pct_since(start: Option<Self>) -> Option<f64> {
        start?.share(Self::now()?, |t| t.idle)
    }

    /// The share of `part` in the CPU time between two readings, %; None when no time passed or a counter
    /// went back.
    fn share(self, later: Self, part: fn(&Self) -> u64) -> Option<f64> {
        let (dt, dp) = (
            later.total.checked_sub(self.total)?,
            part(&later).checked_sub(part(&self))?,
        );
        (dt > 0).then(|| dp as f64 / dt as f64 * 100.0)
    }
}

/// Links the descriptors into a free list in random order; returns the order (the permutation).
fn init_free_list<L>(sh: &Shared<L>, seed: u64) -> Vec<u32> {
    let n = sh.n as usize;
    let mut perm: Vec<u32> = (0..n as u32).collect();
    let mut rng = XorShift::new(seed);
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        perm.swap(i, j);
    }
    // SAFETY: the region is not shared yet; indices are < n.
    unsafe {
        for i in 0..n {
            let d = &mut *sh.descs.add(i);
            d.buf_id = i as u32;
            d.usage_count = 0;
        }
        for w in 0..n {
            let next = if w + 1 < n {
                perm[w + 1] as i32
            } else {
                END_OF_LIST
            };
            (*sh.descs.add(perm[w] as usize)).free_next = next;
        }
        (*sh.control).free_head = if n > 0 {
            perm[0] as i64
        } else {
            END_OF_LIST as i64
        };
    }
    perm
}

/// Checks the free list against the permutation it was built from. Pops only ever remove the head, so a
/// consistent list is exactly `perm[popped..]` in order and every popped descriptor is marked not in the
/// list. (Independent loads in permutation order: far faster than chasing the pointers.)
fn check_free_list<L>(sh: &Shared<L>, perm: &[u32], ops_counted: u64) -> Check {
    let n = sh.n as usize;
    // SAFETY: all workers have exited; the parent reads the region alone.
    let (counter, popped, head) = unsafe {
        (
            (*sh.control).counter,
            (*sh.control).popped,
            (*sh.control).free_head,
        )
    };
    let p = (popped as usize).min(n);
    let next_of = |i: usize| -> i32 {
        // SAFETY: perm holds indices < n.
        unsafe { (*sh.descs.add(perm[i] as usize)).free_next }
    };
    let mut ok = popped as usize <= n;
    ok &= if p < n {
        head == perm[p] as i64
    } else {
        head == END_OF_LIST as i64
    };
    let mut len = 0u64;
    for i in p..n {
        let expect = if i + 1 < n {
            perm[i + 1] as i32
        } else {
            END_OF_LIST
        };
        if next_of(i) == expect {
            len += 1;
        } else {
            ok = false;
        }
    }
    let marked = (0..p).filter(|&i| next_of(i) == NOT_IN_LIST).count() as u64;
    let consistent = ok && len + popped == n as u64 && marked == popped && counter == ops_counted;
    Check {
        counter,
        ops_counted,
        popped,
        free_list_len: len,
        marked_not_in_list: marked,
        ok: consistent,
    }
}

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
        acq.add(de(&o.acquire_hist).map_err(failed)?)
            .map_err(|e| failed(format!("{e:?}")))?;
        hold.add(de(&o.hold_hist).map_err(failed)?)
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
    // SAFETY: workers are gone.
    let (popped, sweeps) = unsafe { ((*sh.control).popped, (*sh.control).sweeps) };
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
        rseq_slice: slice,
        check,
    })
}

/// The age a first worker starts at, uniform in [0, life): with `--reconnect-every`, workers that all start
/// new together are all young in the measured window whenever a life outlasts warm-up plus measurement
/// (at 32 workers on 2 CPUs a worker does ~10k operations a second against a life of 81,920, and the
/// slower locks measured up to 0.33 faults per operation instead of the steady 0.20). A population whose
/// ages are spread over a life is in its steady state from the start, like backends that connected at
/// different times (docs/notes/2026-11-22-lock-bench-worker-lifetime-and-start-ages.md).
pub fn start_age(life: u64, seed: u64, rep: u32, slot: u32) -> u64 {
    let mut rng = XorShift::new(
        seed ^ 0xA6E5_0000_0000_0000
            ^ ((rep as u64) << 32)
            ^ (slot as u64).wrapping_mul(0x9E37_79B9),
    );
    rng.next_u64() % life
}

/// Maps what `cfg.age` operations would have mapped: as many reads of random descriptors (a pop reads the
/// descriptor at the head of a randomly permuted free list). Before the worker reports ready, so neither
/// warm-up nor measurement sees it.
fn age<L>(sh: &Shared<L>, cfg: &WorkerCfg) {
    let mut rng = XorShift::new(cfg.seed ^ 0x05EE_DA6E);
    for _ in 0..cfg.age {
        let i = rng.next_u64() % sh.n;
        // SAFETY: i < n, inside the descriptor array; a racy read of shared memory, only to map its page.
        unsafe { std::ptr::read_volatile(&(*sh.descs.add(i as usize)).buf_id) };
    }
}

/// Bytes of shared memory a run's region needs (for sizing hugetlb reservations).
pub fn region_bytes(descriptors: u64) -> usize {
    layout(descriptors).total
}

/// `--reconnect-every auto`: five pops per 64 KB fault-around group of the descriptor array (1024
/// descriptors), so a worker touches ~99% of the groups in its life and averages ~0.2 faults per pop: the
/// density of the backends in the April 2026 report (docs/references.md#lhp-halving) (~73k pops each over ~15.7k groups in a 5-minute run of 50k TPS x ~5 buffer
/// allocations per transaction over 1,024 clients). Immortal workers map everything in about a second here
/// and the faults the regression is about disappear from the measured window.
pub fn auto_reconnect_every(descriptors: u64) -> u64 {
    (5 * descriptors.div_ceil(1024)).max(1000)
}

/// The default descriptor count for this host: 1 GiB of descriptors (16 Mi) when RAM allows, else RAM/16,
/// at least 64 Ki. Large enough that the free list outlasts a default run, so pops stay random.
pub fn default_descriptors(mem_total_kib: Option<u64>) -> u64 {
    let ram = mem_total_kib.unwrap_or(4 << 20) * 1024;
    ((ram / 16) / 64).clamp(64 << 10, 16 << 20)
}

#[cfg(test)]
mod tests {
    use super::{start_age, CpuTimes};

    #[test]
    fn start_ages_spread_over_a_life() {
        let life = 81_920;
        let ages: Vec<u64> = (0..4096).map(|slot| start_age(life, 1, 0, slot)).collect();
        assert!(ages.iter().all(|&a| a < life));
        // Uniform on [0, life): mean life/2 (sd of the mean ~0.0045 life), each quarter ~1/4 of the slots.
        let mean = ages.iter().sum::<u64>() as f64 / ages.len() as f64 / life as f64;
        assert!((mean - 0.5).abs() < 0.03, "{mean}");
        for q in 0..4 {
            let n = ages.iter().filter(|&&a| a * 4 / life == q).count();
            assert!((900..1150).contains(&n), "quarter {q}: {n}");
        }
        // Deterministic, and different per repetition.
        assert_eq!(start_age(life, 1, 0, 7), start_age(life, 1, 0, 7));
        assert_ne!(
            (0..8).map(|s| start_age(life, 1, 0, s)).collect::<Vec<_>>(),
            (0..8).map(|s| start_age(life, 1, 1, s)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn cpu_times_parse_and_share() {
        let a = CpuTimes::parse("cpu  100 0 50 800 40 5 5 10 7 0\ncpu0 1 2 3 4 5 6 7 8\n").unwrap();
        assert_eq!((a.total, a.idle, a.steal), (1010, 840, 10));
        let b = CpuTimes::parse("cpu  200 0 90 1000 50 5 5 60 9 0\n").unwrap();
        // 400 jiffies passed: 210 idle + iowait, 50 steal.
        assert_eq!(a.share(b, |t| t.idle), Some(52.5));
        assert_eq!(a.share(b, |t| t.steal), Some(12.5));
        assert_eq!(a.share(a, |t| t.steal), None, "no time passed");
        assert_eq!(b.share(a, |t| t.steal), None, "counters went back");
        assert!(CpuTimes::parse("cpu  1 2 3 4 5 6 7\n").is_none());
        assert!(CpuTimes::parse("").is_none());
    }

    #[test]
    fn cpu_times_parse_overflowing_sum_is_no_reading() {
        // Found by fuzzing (fuzz/corpus/proc_stat/crash-cpu-times-sum-overflow): the sum of the fields overflowed.
        let max = u64::MAX;
        assert!(CpuTimes::parse(&format!("cpu  {max} 1 0 0 0 0 0 0\n")).is_none());
        assert!(CpuTimes::parse(&format!("cpu  0 0 0 {max} 1 0 0 0\n")).is_none());
        assert!(CpuTimes::parse(&format!("cpu  0 0 0 {max} 0 0 0 0\n")).is_some());
        let now = CpuTimes::now();
        assert!(now.is_some(), "/proc/stat readable");
        assert!(CpuTimes::idle_pct_since(now).is_none_or(|p| (0.0..=100.0).contains(&p)));
    }
}
