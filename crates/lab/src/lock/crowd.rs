//! The lock's cache line under a crowd of spinners: what `sim`'s per-spinner line costs (`line_ns`,
//! `reread_ns`) stand for, measured as the crowd grows, one process pinned to each CPU so that only the line
//! is timed (at the largest size every CPU has one, and the parent, asleep through each 5 ms window, takes
//! a CPU from one of them for a few microseconds when it wakes to start the next). Two figures per crowd
//! size n:
//!
//! - **handover**: n + 1 processes contend for a test-and-test-and-set lock in one 64-byte line, as
//!   PostgreSQL's `s_lock` does (`TAS_SPIN`: read the word until it is free, pausing between reads, then
//!   swap). The holder reads and bumps a counter in the same line (the free-list head) and releases; it
//!   then waits until someone else has taken the lock before it contends again, so every acquisition moves
//!   the line to another CPU while the other n read it. The figure is a window's length over the
//!   acquisitions in it.
//! - **write stall**: n processes spin on the held lock word (a read and a pause per iteration, counted)
//!   while another CPU adds to another word of the line at a steady pace, as each arriving backend's add to
//!   `numBufferAllocs` writes `BufferStrategyControl`'s line (PostgreSQL 17-18, `StrategyGetBuffer`).
//!   Windows with the writes alternate with windows without; the spinners' lost share of iterations over
//!   the writes is what one write costs the mean spinner. The pace leaves the re-reads of one write time
//!   to end before the next: a write every max(150 ns, two transfers) per process reading the line, and a
//!   pair of windows in which the spinners lost more than half their iterations (the line saturated) is
//!   left out.
//!
//! The crowd sizes are 1, 2, 4, ... up to [`MAX_SPINNERS`] and the largest the CPUs allow (one fewer than
//! the CPUs this process may use): only 1 on two CPUs. The CPUs are taken one per core first ([`by_core`]),
//! so SMT siblings, which share a core's caches, join a crowd only when the cores run out; each size
//! records its cores. All of it takes about 0.3 s per size.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axes::Backing;
use shmlock::shm::ShmRegion;
use shmlock::spin::cpu_relax;
use shmlock::wake_cost;

use super::costs::{p50_p10_p90, CostError};
use hostguard::workers::Children;

use results::model::LineCrowd;

/// The largest crowd measured: the model's question is a crowd of about 50 spinners.
pub const MAX_SPINNERS: usize = 64;
/// One timed window.
const WINDOW: Duration = Duration::from_millis(5);
/// Windows of the handover (after one untimed window).
const HANDOVER_WINDOWS: usize = 20;
/// Pairs of windows (with writes, then without) of the write stall (after one untimed window).
const STALL_PAIRS: usize = 20;
/// The writer's pace, at least: one write every this many ns per process reading the line (two transfers
/// when that is more), so the spinners' re-reads of one write (served one at a time) end before the next.
const WRITE_EVERY_NS_PER_READER: u64 = 150;
/// A pair of windows whose spinners lost more than this share of their iterations to the writes is left
/// out: the line was saturated, and the stall is capped by the pace instead of measured.
const MAX_LOST_SHARE: f64 = 0.5;
/// Spin iterations between looks at the phase word.
const LOOK_EVERY: u32 = 32;
/// The phase that tells the children to stop.
const STOP: u32 = u32::MAX;

/// Windows at most, untimed one included (sizes the slots).
const MAX_WINDOWS: usize = 1 + if HANDOVER_WINDOWS > 2 * STALL_PAIRS {
    HANDOVER_WINDOWS
} else {
    2 * STALL_PAIRS
};
/// Bytes of slots per process: a count per window, on whole lines.
const SLOT_BYTES: usize = (MAX_WINDOWS * 8).div_ceil(64) * 64;
/// Where the slots start: the lock's line at 0, the phase's line at 64.
const SLOTS_AT: usize = 128;
const _: () = assert!(MAX_WINDOWS * 8 <= SLOT_BYTES && SLOT_BYTES.is_multiple_of(64));

/// The crowd sizes measured with `cpus` CPUs: 1, 2, 4, ... while n + 1 CPUs are there, up to
/// [`MAX_SPINNERS`], and `cpus - 1` itself. Empty on one CPU.
pub fn sizes(cpus: usize) -> Vec<usize> {
    let top = cpus.saturating_sub(1).min(MAX_SPINNERS);
    let mut v: Vec<usize> = std::iter::successors(Some(1usize), |n| Some(n * 2))
        .take_while(|&n| n <= top)
        .collect();
    if top > 0 && v.last() != Some(&top) {
        v.push(top);
    }
    v
}

/// `cpus` reordered one per core first: the first CPU of each core (in the order given), then the second,
/// and so on. `core_of` names a CPU's core (its SMT siblings share the name); a CPU without one is a core
/// of its own.
pub fn by_core(cpus: &[usize], core_of: impl Fn(usize) -> Option<String>) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut ranked: Vec<(usize, usize, usize)> = cpus
        .iter()
        .enumerate()
        .map(|(i, &cpu)| {
            let rank = core_of(cpu).map_or(0, |k| {
                let r = seen.entry(k).or_insert(0);
                *r += 1;
                *r - 1
            });
            (rank, i, cpu)
        })
        .collect();
    ranked.sort_unstable();
    ranked.into_iter().map(|(_, _, cpu)| cpu).collect()
}

/// A CPU's core, as the kernel names its SMT siblings (`topology/thread_siblings_list`).
fn core_of(cpu: usize) -> Option<String> {
    std::fs::read_to_string(format!(
        "/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
    ))
    .ok()
    .map(|s| s.trim().to_string())
    .filter(|s| !s.is_empty())
}

/// The distinct cores among `cpus` (`core` names each, as read once); None when a CPU's core is unknown.
fn cores(cpus: &[usize], core: &HashMap<usize, Option<String>>) -> Option<u32> {
    let names: Option<HashSet<&String>> = cpus.iter().map(|c| core.get(c)?.as_ref()).collect();
    names.map(|n| n.len() as u32)
}

/// The shared memory of one measurement: the lock's line (lock word, counter, the writer's word), the
/// phase's line (the phase the parent sets, the children's ready count), and each process's counts per
/// window.
struct Board {
    region: ShmRegion,
}

impl Board {
    fn new(procs: usize) -> Result<Self, CostError> {
        let bytes = (SLOTS_AT + procs * SLOT_BYTES).div_ceil(4096) * 4096;
        Ok(Self {
            region: ShmRegion::new(bytes, Backing::Page4k)?,
        })
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off.is_multiple_of(4) && off + 4 <= SLOTS_AT);
        // SAFETY: the region is page-aligned, zeroed and at least SLOTS_AT bytes; off is 4-aligned and
        // inside it; AtomicU32 has the layout of u32, and zero is a valid value.
        unsafe { &*(self.region.as_ptr().add(off) as *const AtomicU32) }
    }

    /// The lock word (0 free, 1 held).
    fn lock(&self) -> &AtomicU32 {
        self.u32_at(0)
    }

    /// The word the holder bumps (the free-list head).
    fn head(&self) -> &AtomicU32 {
        self.u32_at(4)
    }

    /// The word the writer adds to (`numBufferAllocs`).
    fn adds(&self) -> &AtomicU32 {
        self.u32_at(8)
    }

    /// The phase: 0 before the start, then the window's number + 1, then [`STOP`].
    fn phase(&self) -> &AtomicU32 {
        self.u32_at(64)
    }

    /// Children pinned and waiting for the start.
    fn ready(&self) -> &AtomicU32 {
        self.u32_at(68)
    }

    /// Process `p`'s count in window `w`.
    fn slot(&self, p: usize, w: usize) -> &AtomicU64 {
        assert!(w < MAX_WINDOWS);
        let off = SLOTS_AT + p * SLOT_BYTES + w * 8;
        assert!(off + 8 <= self.region.len());
        // SAFETY: inside the region (asserted), 8-aligned (SLOTS_AT and SLOT_BYTES are multiples of 64),
        // zeroed; AtomicU64 has the layout of u64.
        unsafe { &*(self.region.as_ptr().add(off) as *const AtomicU64) }
    }
}

/// What a child keeps of the windows: counts the current one and stores it when the phase moves on.
struct Tally<'a> {
    board: &'a Board,
    me: usize,
    phase: u32,
    count: u64,
}

impl<'a> Tally<'a> {
    /// Waits (spinning) for the start.
    fn start(board: &'a Board, me: usize) -> Self {
        // Release: the parent's Acquire load of the count sees this child pinned.
        board.ready().fetch_add(1, Ordering::AcqRel);
        // Acquire: pairs with the parent's Release store of each phase.
        while board.phase().load(Ordering::Acquire) == 0 {
            cpu_relax();
        }
        Self {
            board,
            me,
            phase: board.phase().load(Ordering::Acquire),
            count: 0,
        }
    }

    /// Looks at the phase; on a new one stores the finished window's count. The phase now, or None once
    /// told to stop.
    fn look(&mut self) -> Option<u32> {
        let now = self.board.phase().load(Ordering::Acquire);
        if now != self.phase {
            let w = (self.phase - 1) as usize;
            if w < MAX_WINDOWS {
                // Relaxed: the parent reads the slots only after reaping this process.
                self.board
                    .slot(self.me, w)
                    .store(self.count, Ordering::Relaxed);
            }
            self.phase = now;
            self.count = 0;
        }
        (now != STOP).then_some(now)
    }
}

/// Forks one child per CPU in `cpus`, each running `body(board, its index)` once pinned; runs `windows`
/// windows of [`WINDOW`] after an untimed one and returns their lengths (the first one's included).
fn run(
    cpus: &[usize],
    board: &Board,
    windows: usize,
    what: &'static str,
    body: impl Fn(&Board, usize) -> i32 + Copy,
) -> Result<Vec<f64>, CostError> {
    let mut kids = Children::new();
    for (me, &cpu) in cpus.iter().enumerate() {
        let spawned = kids.spawn((), c"plab-crowdcal", move || {
            if wake_cost::pin(cpu).is_err() {
                board.ready().fetch_add(1, Ordering::AcqRel);
                return 1;
            }
            body(board, me)
        });
        if let Err(err) = spawned {
            board.phase().store(STOP, Ordering::Release);
            kids.reap_all(Duration::from_secs(5), |_, _| {});
            return Err(CostError::Fork { err });
        }
    }
    let t = Instant::now();
    while (board.ready().load(Ordering::Acquire) as usize) < cpus.len()
        && t.elapsed() < Duration::from_secs(10)
        && !osutil::stop::interrupted()
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut lengths = Vec::with_capacity(windows + 1);
    if (board.ready().load(Ordering::Acquire) as usize) == cpus.len() {
        for w in 0..=windows {
            let t = Instant::now();
            board.phase().store(w as u32 + 1, Ordering::Release);
            std::thread::sleep(WINDOW);
            if osutil::stop::interrupted() {
                break;
            }
            lengths.push(t.elapsed().as_nanos() as f64);
        }
    }
    board.phase().store(STOP, Ordering::Release);
    let mut ok = true;
    let killed = kids.reap_all(Duration::from_secs(10), |_, exit| ok &= exit.success());
    if osutil::stop::interrupted() {
        return Err(CostError::Interrupted);
    }
    if killed > 0 || !ok || lengths.len() != windows + 1 {
        return Err(CostError::ChildFailed { what });
    }
    Ok(lengths)
}

/// One handover with `n` waiters: the median, 10th and 90th percentiles over the windows, ns.
fn handover(cpus: &[usize], n: usize) -> Result<[f64; 3], CostError> {
    let board = Board::new(n + 1)?;
    let lengths = run(
        &cpus[..=n],
        &board,
        HANDOVER_WINDOWS,
        "the lock-handover calibration children",
        |b, me| {
            let mut tally = Tally::start(b, me);
            let (lock, head) = (b.lock(), b.head());
            'run: loop {
                // Take the lock as s_lock does: swap; on failure read until free, then swap again.
                let mut looks = 0u32;
                while lock.swap(1, Ordering::Acquire) != 0 {
                    while lock.load(Ordering::Relaxed) != 0 {
                        cpu_relax();
                        looks += 1;
                        if looks.is_multiple_of(LOOK_EVERY) && tally.look().is_none() {
                            break 'run;
                        }
                    }
                }
                let mine = head.load(Ordering::Relaxed).wrapping_add(1);
                head.store(mine, Ordering::Relaxed);
                lock.store(0, Ordering::Release);
                tally.count += 1;
                if tally.look().is_none() {
                    break;
                }
                // Not again before someone else has had it: every acquisition is a handover.
                while head.load(Ordering::Relaxed) == mine {
                    cpu_relax();
                    looks += 1;
                    if looks.is_multiple_of(LOOK_EVERY) && tally.look().is_none() {
                        break 'run;
                    }
                }
            }
            0
        },
    )?;
    let per: Vec<f64> = (1..lengths.len())
        .map(|w| {
            let acquisitions: u64 = (0..=n)
                .map(|p| board.slot(p, w).load(Ordering::Relaxed))
                .sum();
            lengths[w] / acquisitions.max(1) as f64
        })
        .collect();
    Ok(p50_p10_p90(per))
}

/// What one write of the line costs the mean of `n` spinners on the held lock: the median, 10th and 90th
/// percentiles over the pairs of windows, ns. Odd windows have the writes, even ones not. `transfer_ns`:
/// the two-CPU handover measured before, which sets the writer's pace when it is slow.
fn write_stall(cpus: &[usize], n: usize, transfer_ns: Option<f64>) -> Result<[f64; 3], CostError> {
    let board = Board::new(n + 1)?;
    board.lock().store(1, Ordering::Release);
    let per_reader = transfer_ns
        .filter(|t| t.is_finite())
        .map_or(WRITE_EVERY_NS_PER_READER, |t| {
            WRITE_EVERY_NS_PER_READER.max((2.0 * t).round() as u64)
        });
    let every = per_reader * (n as u64 + 1);
    // Process 0 writes; 1..=n spin.
    let lengths = run(
        &cpus[..=n],
        &board,
        2 * STALL_PAIRS,
        "the write-stall calibration children",
        move |b, me| {
            let mut tally = Tally::start(b, me);
            if me == 0 {
                let adds = b.adds();
                let mut next = Instant::now();
                while let Some(phase) = tally.look() {
                    let now = Instant::now();
                    if phase % 2 == 0 && now >= next {
                        // Window number phase - 1 is odd: it has the writes.
                        adds.fetch_add(1, Ordering::AcqRel);
                        tally.count += 1;
                        next = now + Duration::from_nanos(every);
                    }
                }
            } else {
                let lock = b.lock();
                loop {
                    for _ in 0..LOOK_EVERY {
                        if lock.load(Ordering::Relaxed) == 0 {
                            return 1;
                        }
                        cpu_relax();
                    }
                    tally.count += LOOK_EVERY as u64;
                    if tally.look().is_none() {
                        break;
                    }
                }
            }
            0
        },
    )?;
    let rate = |p: usize, w: usize| board.slot(p, w).load(Ordering::Relaxed) as f64 / lengths[w];
    let per: Vec<f64> = (0..STALL_PAIRS)
        .map(|i| {
            let (on, off) = (2 * i + 1, 2 * i + 2);
            let writes = rate(0, on);
            let lost: f64 = (1..=n)
                .map(|p| 1.0 - rate(p, on) / rate(p, off))
                .sum::<f64>()
                / n as f64;
            if lost > MAX_LOST_SHARE {
                return f64::NAN;
            }
            lost / writes
        })
        .filter(|x| x.is_finite())
        .collect();
    if per.is_empty() {
        return Err(CostError::ChildFailed {
            what: "the write-stall calibration children",
        });
    }
    Ok(p50_p10_p90(per))
}

/// The crowd figures at every size this process's CPUs allow ([`sizes`]); empty on one CPU.
/// `transfer_ns`: the two-CPU handover (`costs.line_transfer_ns`), which paces the writes when it is slow.
pub fn measure(transfer_ns: Option<f64>) -> Result<Vec<LineCrowd>, CostError> {
    let allowed = wake_cost::allowed_cpus();
    let core: HashMap<usize, Option<String>> = allowed.iter().map(|&c| (c, core_of(c))).collect();
    let cpus = by_core(&allowed, |c| core[&c].clone());
    sizes(cpus.len())
        .into_iter()
        .map(|n| {
            let [h, h10, h90] = handover(&cpus, n)?;
            let [s, s10, s90] = write_stall(&cpus, n, transfer_ns)?;
            Ok(LineCrowd {
                spinners: n as u32,
                handover_ns: h,
                handover_p10_ns: h10,
                handover_p90_ns: h90,
                write_stall_ns: s,
                write_stall_p10_ns: s10,
                write_stall_p90_ns: s90,
                cores: cores(&cpus[..=n], &core),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_are_taken_one_per_core_first() {
        // Four cores of two threads, numbered as x86 hosts often are: siblings n and n + 4.
        let core = |c: usize| Some(format!("{},{}", c % 4, c % 4 + 4));
        let cpus: Vec<usize> = (0..8).collect();
        assert_eq!(by_core(&cpus, core), [0, 1, 2, 3, 4, 5, 6, 7]);
        // Siblings adjacent (0,1), (2,3), ...: the first threads first.
        let core = |c: usize| Some(format!("{}-{}", c / 2 * 2, c / 2 * 2 + 1));
        assert_eq!(by_core(&cpus, core), [0, 2, 4, 6, 1, 3, 5, 7]);
        // An affinity mask with a subset keeps its order within a rank; unknown cores are their own.
        assert_eq!(by_core(&[5, 1, 4, 0], core), [5, 1, 4, 0]);
        assert_eq!(
            by_core(&[3, 2, 9], |c| (c != 9).then(|| "x".into())),
            [3, 9, 2]
        );
        // This machine: every allowed CPU once.
        let mine = wake_cost::allowed_cpus();
        let mut got = by_core(&mine, core_of);
        got.sort_unstable();
        let mut want = mine.clone();
        want.sort_unstable();
        assert_eq!(got, want);
    }

    #[test]
    fn sizes_double_up_to_the_cpus_and_the_cap() {
        assert!(sizes(0).is_empty());
        assert!(sizes(1).is_empty());
        assert_eq!(sizes(2), [1]);
        assert_eq!(sizes(3), [1, 2]);
        assert_eq!(sizes(4), [1, 2, 3]);
        assert_eq!(sizes(9), [1, 2, 4, 8]);
        assert_eq!(sizes(96), [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(sizes(48), [1, 2, 4, 8, 16, 32, 47]);
    }
}
