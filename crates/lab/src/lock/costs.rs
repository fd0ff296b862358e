//! The kernel and lock costs the model takes (`sim::costs`), measured once per `bench lock` run before its
//! cells, on the machine the bench runs on (a guest included): a spin-loop iteration, a syscall round
//! trip, a context switch between two processes on one CPU, `futex_wake` with nobody queued and waking a
//! sleeper on another CPU, the handover of one cache line between two CPUs, a fresh process's read fault on
//! populated 4 KB shared memory (it maps a fault-around group), and mapping a 2 MB hugetlb page in a new
//! process when the run has a 2 MB pool to run its cells on, and the lock's line under crowds of spinners
//! ([`super::crowd`]). Each is the median of many timed repetitions; all of them take well under a second
//! on two CPUs, about 0.3 s more per crowd size on more ([`super::crowd::sizes`]).
//! The minor fault on 4 KB pages is the run's `fault_cost` ([`crate::lock::run::measure_fault_cost`]).

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use axes::Backing;
use lockparams::pg::MAX_SPINS_PER_DELAY;
use shmlock::shm::ShmRegion;
use shmlock::spin::cpu_relax;
use shmlock::{futex, wake_cost};

use hostfacts::rusage::{Usage, Who};
use hostguard::workers::Children;

use results::model::Costs;

/// Why a cost could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    /// The process may run on no CPU (an empty affinity mask).
    #[error("no CPU in this process's affinity mask")]
    NoCpu,
    /// The calibration's shared memory could not be mapped or populated.
    #[error(transparent)]
    Region(#[from] shmlock::shm::ShmError),
    /// A calibration child could not be forked.
    #[error("fork: {err}")]
    Fork {
        /// What fork said.
        err: std::io::Error,
    },
    /// A calibration child failed or wrote no figure (`what` names it: "the fault calibration child").
    #[error("{what} failed")]
    ChildFailed {
        /// The child or children.
        what: &'static str,
    },
    /// SIGINT or SIGTERM came during the measurement.
    #[error("interrupted")]
    Interrupted,
    /// A fresh process took no faults on hugetlb pages it had not touched (kernels before 6.0 copy hugetlb
    /// page tables at fork).
    #[error("a fresh process took {faults} faults touching {pages} pages it had not mapped (page tables copied at fork?)")]
    NoFaults {
        /// The faults it took.
        faults: f64,
        /// The pages it touched.
        pages: usize,
    },
}

/// Timed batches per figure (the median over them is the figure).
const BATCHES: usize = 201;
/// Wakes of a remote sleeper (each lets it fall asleep for 50 us first).
const WAKE_ROUNDS: usize = 1000;
/// Round trips per timed batch of the context-switch ping-pong.
const SWITCH_BATCH: u32 = 10;
/// Untimed round trips before the batches.
const SWITCH_WARMUP: u32 = 100;
/// Fresh processes that each map the 2 MB pages once.
const MAP_2M_CHILDREN: usize = 31;
/// 2 MB pages each of them maps, at most.
const MAP_2M_PAGES: u64 = 8;

/// Median ns per call of `f`, timed in `BATCHES` batches of `per_batch` calls.
fn per_call(per_batch: u32, mut f: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_batch {
                f();
            }
            t.elapsed().as_nanos() as f64 / per_batch as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One iteration of the `pg` lock's spin on a held lock (s_lock's `TAS_SPIN` reads the word, sees it taken,
/// `perform_spin_delay` pauses), timed over a full `spins_per_delay` round.
fn spin_ns() -> f64 {
    let word = AtomicU32::new(1);
    per_call(1, || {
        let mut spins = 0;
        while black_box(&word).load(Ordering::Relaxed) != 0 && spins < MAX_SPINS_PER_DELAY {
            cpu_relax();
            spins += 1;
        }
    }) / MAX_SPINS_PER_DELAY as f64
}

fn syscall_ns() -> f64 {
    per_call(100, || {
        // SAFETY: getppid has no preconditions; through syscall(2) so libc cannot cache it.
        black_box(unsafe { libc::syscall(libc::SYS_getppid) });
    })
}

fn futex_wake_nobody_ns() -> f64 {
    let word = AtomicU32::new(0);
    per_call(100, || {
        black_box(futex::wake(&word, 1));
    })
}

/// Two processes pinned to one CPU hand a futex word back and forth (each waits for its turn, takes it,
/// passes it on and wakes the other); half the median round trip.
fn switch_half_round_trip_ns() -> Result<f64, CostError> {
    let cpu = *wake_cost::allowed_cpus().first().ok_or(CostError::NoCpu)?;
    let shm = ShmRegion::new(4096, Backing::Page4k)?;
    // SAFETY: the region is 4096 bytes, page-aligned and zeroed: a valid AtomicU32 (the turn: 0 or 1) at
    // offset 0, and an f64 slot for the result at offset 64, both shared with the children.
    let turn = unsafe { &*(shm.as_ptr() as *const AtomicU32) };
    // SAFETY: as above; offset 64 is inside the region and 8-byte aligned.
    let out = unsafe { shm.as_ptr().add(64) as *mut f64 };
    let mut kids = Children::new();
    for me in 0..2u32 {
        kids.spawn((), c"plab-switchcal", move || {
            if wake_cost::pin(cpu).is_err() {
                return 1;
            }
            let mut pass = || {
                while turn.load(Ordering::Acquire) != me {
                    futex::wait(turn, 1 - me, Some(Duration::from_secs(1)));
                }
                turn.store(1 - me, Ordering::Release);
                futex::wake(turn, 1);
            };
            // Both make the same number of passes; the first one's pass is a round trip (it waits for the
            // other's).
            for _ in 0..SWITCH_WARMUP {
                pass();
            }
            if me == 1 {
                for _ in 0..SWITCH_BATCH * BATCHES as u32 {
                    pass();
                }
                return 0;
            }
            let ns = per_call(SWITCH_BATCH, &mut pass) / 2.0;
            // SAFETY: `out` points into the shared region (see above).
            unsafe { std::ptr::write_volatile(out, ns) };
            0
        })
        .map_err(|err| CostError::Fork { err })?;
    }
    let mut ok = true;
    kids.reap_all(Duration::from_secs(30), |_, exit| ok &= exit.success());
    // SAFETY: the child wrote the f64 before exiting (or it is still 0.0).
    let ns = unsafe { std::ptr::read_volatile(out) };
    if !ok || ns <= 0.0 {
        return Err(CostError::ChildFailed {
            what: "the context-switch calibration children",
        });
    }
    Ok(ns)
}

/// Round trips per timed batch of the cache-line ping-pong.
const LINE_BATCH: u32 = 1000;

/// The handover time of one cache line between two CPUs: two processes pinned to the first two CPUs this
/// process may use take turns on a counter in one 64-byte line of shared memory (each spins, reading the
/// line, until the other's increment arrives, then increments it), as a lock word goes from a releaser to
/// the next holder. Per timed batch of [`LINE_BATCH`] round trips, half the mean round trip is one handover;
/// returns the median, 10th and 90th percentiles over [`BATCHES`] batches, ns. None on one CPU.
fn line_transfer_ns() -> Result<Option<[f64; 3]>, CostError> {
    let cpus = wake_cost::allowed_cpus();
    let [a, b, ..] = cpus[..] else {
        return Ok(None);
    };
    let shm = ShmRegion::new(4096, Backing::Page4k)?;
    // SAFETY: the region is 4096 bytes, page-aligned and zeroed: a valid AtomicU32 (the counter) at offset
    // 0, alone in its 64-byte line, and BATCHES f64 slots for the batches' times from offset 64 (8 + 201 x 8
    // bytes, inside the page), all shared with the children.
    let word = unsafe { &*(shm.as_ptr() as *const AtomicU32) };
    // SAFETY: as above; offset 64 is inside the region and 8-byte aligned.
    let out = unsafe { shm.as_ptr().add(64) as *mut f64 };
    const _: () = assert!(64 + 8 * BATCHES <= 4096);
    let mut kids = Children::new();
    for (me, cpu) in [(0u32, a), (1u32, b)] {
        kids.spawn((), c"plab-linecal", move || {
            if wake_cost::pin(cpu).is_err() {
                return 1;
            }
            // My turn when the counter's parity is mine; each pass hands the line to the other CPU.
            let pass = || {
                loop {
                    // Acquire: pairs with the other's Release increment, so its turn is complete.
                    let v = word.load(Ordering::Acquire);
                    if v % 2 == me {
                        // Release: publishes the pass to the other's Acquire load.
                        word.store(v + 1, Ordering::Release);
                        return;
                    }
                    std::hint::spin_loop();
                }
            };
            // Both make the same number of passes: warm-up, then the timed batches (timed by process 0).
            for _ in 0..SWITCH_WARMUP {
                pass();
            }
            for i in 0..BATCHES {
                let t = Instant::now();
                for _ in 0..LINE_BATCH {
                    pass();
                }
                if me == 0 {
                    let ns = t.elapsed().as_nanos() as f64 / (2 * LINE_BATCH) as f64;
                    // SAFETY: i < BATCHES: the slot is inside the shared region (see above).
                    unsafe { std::ptr::write_volatile(out.add(i), ns) };
                }
            }
            0
        })
        .map_err(|err| CostError::Fork { err })?;
    }
    let mut ok = true;
    kids.reap_all(Duration::from_secs(30), |_, exit| ok &= exit.success());
    // SAFETY: the children wrote the slots before exiting (or they are still 0.0).
    let v: Vec<f64> = (0..BATCHES)
        .map(|i| unsafe { std::ptr::read_volatile(out.add(i)) })
        .collect();
    if !ok || v.iter().any(|&x| x <= 0.0) {
        return Err(CostError::ChildFailed {
            what: "the cache-line calibration children",
        });
    }
    Ok(Some(p50_p10_p90(v)))
}

/// The median, 10th and 90th percentiles of a non-empty sample (nearest rank).
pub(super) fn p50_p10_p90(mut v: Vec<f64>) -> [f64; 3] {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    [at(0.5), at(0.1), at(0.9)]
}

/// A fresh process's first read of memory another process populated, as a `bench lock` worker's first touch
/// of a page of the shared region: the parent maps `touches` strides of `backing` (at most
/// [`MAP_2M_PAGES`]) and writes them, then [`MAP_2M_CHILDREN`] fresh children, one after another, each time
/// their first touch (a read) of every stride; the median over all touches, ns. On hugetlb-2m a touch maps
/// one 2 MB page; on 4 KB pages, with a 64 KB stride, it maps the page's fault-around group. The first touch
/// in a child also allocates the page-table page that maps the region, as a worker's first fault does. An
/// error when the region cannot be had (a 2 MB pool with no free page), or when the children take fewer
/// faults than touches (kernels before 6.0 copy hugetlb page tables at fork).
fn first_touch_ns(backing: Backing, stride: usize, touches: u64) -> Result<f64, CostError> {
    let n = touches.clamp(1, MAP_2M_PAGES) as usize;
    let region = ShmRegion::new(n * stride, backing)?;
    region.populate_write()?;
    let slot = ShmRegion::new(4096, Backing::Page4k)?;
    // The slot is 4096 bytes, page-aligned and zeroed, shared with the children: room for MAP_2M_PAGES
    // f64s (the child's touches) and, after them, its fault count.
    let out = slot.as_ptr() as *mut f64;
    let mut v = Vec::with_capacity(MAP_2M_CHILDREN * n);
    for _ in 0..MAP_2M_CHILDREN {
        let mut kids = Children::new();
        kids.spawn((), c"plab-mapcal", || {
            // Fault in what the timed loop uses before counting faults: the clock and the slot.
            let _ = Instant::now();
            for i in 0..=n {
                // SAFETY: i <= MAP_2M_PAGES, inside the slot (see above).
                unsafe { std::ptr::write_volatile(out.add(i), 0.0) };
            }
            let before = Usage::now(Who::Process);
            for i in 0..n {
                let t = Instant::now();
                // SAFETY: i * stride < the region's length.
                black_box(unsafe { std::ptr::read_volatile(region.as_ptr().add(i * stride)) });
                let ns = t.elapsed().as_nanos() as f64;
                // SAFETY: as above.
                unsafe { std::ptr::write_volatile(out.add(i), ns) };
            }
            let faults = Usage::now(Who::Process).since(before).minflt;
            // SAFETY: as above.
            unsafe { std::ptr::write_volatile(out.add(n), faults as f64) };
            0
        })
        .map_err(|err| CostError::Fork { err })?;
        let mut ok = true;
        kids.reap_all(Duration::from_secs(10), |_, exit| ok &= exit.success());
        // SAFETY: the child wrote the slot before exiting (or it is still zeroed).
        let faults = unsafe { std::ptr::read_volatile(out.add(n)) };
        if !ok {
            return Err(CostError::ChildFailed {
                what: "the first-touch calibration child",
            });
        }
        if faults < n as f64 {
            return Err(CostError::NoFaults { faults, pages: n });
        }
        // SAFETY: as above.
        v.extend((0..n).map(|i| unsafe { std::ptr::read_volatile(out.add(i)) }));
    }
    v.sort_by(f64::total_cmp);
    Ok(v[v.len() / 2])
}

/// The bytes a read fault on 4 KB shared memory maps by default (the kernel's `fault_around_bytes`).
const FAULT_AROUND_BYTES: usize = 64 << 10;

/// Measures the costs. `hugetlb_2m_pages`: the 2 MB pages the run's hugetlb-2m cells will map, when they
/// can run (their pool has them free); the 2 MB mapping is measured then, on up to [`MAP_2M_PAGES`] of them.
/// A figure that cannot be measured here (the remote wake on one CPU, the 2 MB mapping without a pool) is
/// null; a failure of the ping-pong children is an error.
pub fn measure(hugetlb_2m_pages: Option<u64>) -> Result<Costs, CostError> {
    let remote = wake_cost::measure(WAKE_ROUNDS, false).ok().and_then(|w| {
        let mut v = w.woke;
        v.sort_unstable();
        (v.len() >= WAKE_ROUNDS / 2).then(|| v[v.len() / 2] as f64)
    });
    let line = line_transfer_ns()?;
    // The crowd is the most demanding part (a process pinned to every CPU): its failure leaves it out and
    // keeps the other figures.
    let line_crowd = match super::crowd::measure(line.map(|l| l[0])) {
        Ok(c) => c,
        Err(CostError::Interrupted) => return Err(CostError::Interrupted),
        Err(e) => {
            osutil::msg!("preemptlab: the lock's line under a crowd not measured: {e}");
            Vec::new()
        }
    };
    Ok(Costs {
        line_crowd,
        line_transfer_ns: line.map(|l| l[0]),
        line_transfer_p10_ns: line.map(|l| l[1]),
        line_transfer_p90_ns: line.map(|l| l[2]),
        spin_ns: spin_ns(),
        syscall_ns: syscall_ns(),
        switch_half_round_trip_ns: switch_half_round_trip_ns()?,
        futex_wake_nobody_ns: futex_wake_nobody_ns(),
        futex_wake_remote_ns: remote,
        fault_4k_read_ns: first_touch_ns(Backing::Page4k, FAULT_AROUND_BYTES, MAP_2M_PAGES)
            .map_err(|e| osutil::msg!("preemptlab: the 4 KB read fault not measured: {e}"))
            .ok(),
        fault_2m_map_ns: hugetlb_2m_pages.and_then(|n| {
            first_touch_ns(Backing::Hugetlb2m, Backing::Hugetlb2m.page_bytes(), n)
                .map_err(|e| osutil::msg!("preemptlab: the 2 MB mapping cost not measured: {e}"))
                .ok()
        }),
    })
}

/// The costs as one line, with the fault cost when measured.
pub fn line(c: &Costs, fault_ns: Option<f64>) -> String {
    let us = |ns: f64| {
        if ns >= 1000.0 {
            format!("{:.2} us", ns / 1000.0)
        } else {
            format!("{ns:.0} ns")
        }
    };
    let fault = fault_ns.map_or(String::new(), |f| format!("fault (4 KB) {}, ", us(f)));
    let remote = c
        .futex_wake_remote_ns
        .map_or("not measured (one CPU)".into(), us);
    let read_4k = c.fault_4k_read_ns.map_or(String::new(), |r| {
        format!(", a read fault mapping 64 KB {}", us(r))
    });
    let map_2m = c.fault_2m_map_ns.map_or(String::new(), |m| {
        format!(", mapping a 2 MB page {}", us(m))
    });
    let handover = match (
        c.line_transfer_ns,
        c.line_transfer_p10_ns,
        c.line_transfer_p90_ns,
    ) {
        (Some(m), Some(lo), Some(hi)) => {
            format!(
                ", cache-line handover {} (p10 {}, p90 {})",
                us(m),
                us(lo),
                us(hi)
            )
        }
        _ => String::new(),
    };
    let crowd = match (c.line_crowd.first(), c.line_crowd.last()) {
        (Some(a), Some(b)) if a.spinners == b.spinners => format!(
            "; with {} spinning: a handover {}, a write of the line costs each spinner {}",
            a.spinners,
            us(a.handover_ns),
            us(a.write_stall_ns)
        ),
        (Some(a), Some(b)) => format!(
            "; from {} to {} spinning: a handover {} to {}, a write of the line costs each spinner {} to {}",
            a.spinners,
            b.spinners,
            us(a.handover_ns),
            us(b.handover_ns),
            us(a.write_stall_ns),
            us(b.write_stall_ns)
        ),
        _ => String::new(),
    };
    format!(
        "measured costs: {fault}spin iteration {}, syscall {}, context switch (half round trip) {}, futex_wake with nobody queued {}, waking a sleeper on another CPU {remote}{read_4k}{map_2m}{handover}{crowd}",
        us(c.spin_ns),
        us(c.syscall_ns),
        us(c.switch_half_round_trip_ns),
        us(c.futex_wake_nobody_ns),
    )
}
