//! A discrete-event model of `bench lock` on a machine of any size: C CPUs with per-CPU run queues, a tick,
//! fair-class slices and wakeup preemption, the four preemption models of REFERENCE.md §2, page faults
//! taken inside the critical section, and the locks `pg` (s_lock's spin-then-sleep with adaptive
//! spins_per_delay), `futex` (three-state mutex), `rseq` (`pg` whose holder asks for a time-slice
//! extension). `Workload::Txn` runs pgbench-like transactions instead: statements that each wait for a
//! client on another CPU, with buffer allocations (the pop, then a pread and a first touch outside the lock).
//!
//! Pure and deterministic: integer-nanosecond clock, one event heap ordered by (time, sequence), one seeded
//! RNG; the same parameters give the same result, byte for byte. GUIDE.md ("sim") explains the model, its
//! assumptions and where it is known to be wrong.
//!
//! Where the models differ (REFERENCE.md §2), and nowhere else:
//! - in kernel mode (a page fault, a syscall): `full` switches as soon as a reschedule is requested; `lazy`
//!   when the request is upgraded at the tick; `none` and `voluntary` only on the way back to user mode;
//! - a wakeup aimed at a busy CPU: `none`/`voluntary`/`full` set NEED_RESCHED and send an IPI, so the
//!   target reschedules within `ipi_ns` (at once in user mode; in kernel mode as above); `lazy` sets only
//!   the lazy flag and sends nothing: the target notices at its next tick or its next return to user.
//! - Every model reschedules on return to user mode when either flag is set.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Preemption model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    /// No preemption in the kernel.
    None,
    /// Also at cond_resched() points (the modelled fault path has none).
    Voluntary,
    /// Preemption anywhere preemption is enabled.
    Full,
    /// Lazy requests, upgraded at the tick; no IPI for fair-class wakeups.
    Lazy,
}

impl Model {
    /// Parses `none|voluntary|full|lazy`.
    pub fn parse(s: &str) -> Result<Model, String> {
        match s {
            "none" => Ok(Model::None),
            "voluntary" => Ok(Model::Voluntary),
            "full" => Ok(Model::Full),
            "lazy" => Ok(Model::Lazy),
            _ => Err(format!("{s}: expected none, voluntary, full or lazy")),
        }
    }
    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            Model::None => "none",
            Model::Voluntary => "voluntary",
            Model::Full => "full",
            Model::Lazy => "lazy",
        }
    }
}

/// The lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LockKind {
    /// PostgreSQL's s_lock.
    Pg,
    /// Three-state futex mutex.
    Futex,
    /// `pg` with the rseq time-slice extension for the holder.
    Rseq,
    /// The shmlock crate's `adaptive` lock (its rseq request with `adaptive_rseq`): at most
    /// min(CPUs, `ADAPTIVE_SLOTS`) waiters spin, each for a bounded time; a waiter on the CPU the holder took the lock on, or one arriving after a
    /// spinner spent a whole budget on this hold (`STALLED`), parks on a futex with a bounded sleep;
    /// unlock wakes one sleeper when no spinner is around and no wake is in flight.
    Adaptive,
}

impl LockKind {
    /// Parses `pg|futex|rseq|adaptive`.
    pub fn parse(s: &str) -> Result<LockKind, String> {
        match s {
            "pg" => Ok(LockKind::Pg),
            "futex" => Ok(LockKind::Futex),
            "rseq" => Ok(LockKind::Rseq),
            "adaptive" => Ok(LockKind::Adaptive),
            _ => Err(format!("{s}: expected pg, futex, rseq or adaptive")),
        }
    }
    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Pg => "pg",
            LockKind::Futex => "futex",
            LockKind::Rseq => "rseq",
            LockKind::Adaptive => "adaptive",
        }
    }
}

/// `adaptive`: spinner slots in the lock (shmlock's `SLOTS`); the cap is the smaller of this and the CPUs.
pub const ADAPTIVE_SLOTS: u32 = 8;

/// Page size of the shared descriptor array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pages {
    /// 4 KB pages (faults map a fault-around group).
    #[serde(rename = "4k")]
    P4k,
    /// 2 MB pages.
    #[serde(rename = "2m")]
    P2m,
}

impl Pages {
    /// Parses `4k|2m` (also `hugetlb-2m`).
    pub fn parse(s: &str) -> Result<Pages, String> {
        match s {
            "4k" => Ok(Pages::P4k),
            "2m" | "hugetlb-2m" => Ok(Pages::P2m),
            _ => Err(format!("{s}: expected 4k or 2m")),
        }
    }
    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            Pages::P4k => "4k",
            Pages::P2m => "2m",
        }
    }
}

/// What the workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// `bench lock`'s operation in a loop: work, then the free-list pop under the lock (random order).
    #[default]
    Lock,
    /// pgbench-like transactions: statements, each a client round trip (the backend sleeps and a remote
    /// CPU wakes it), recv, user work with buffer allocations (the free-list pop under the lock, then the
    /// block's pread and its first-touch fault outside the lock), send. The free list pops buffers in
    /// order, as PostgreSQL's initial free list does.
    Txn,
}

impl Workload {
    /// Parses `lock|txn`.
    pub fn parse(s: &str) -> Result<Workload, String> {
        match s {
            "lock" => Ok(Workload::Lock),
            "txn" => Ok(Workload::Txn),
            _ => Err(format!("{s}: expected lock or txn")),
        }
    }
    /// The name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Lock => "lock",
            Workload::Txn => "txn",
        }
    }
}

/// Everything the model takes. Costs default to this project's measurements (REFERENCE.md §6, GUIDE.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Params {
    /// CPUs.
    pub cpus: u32,
    /// Worker processes.
    pub workers: u32,
    /// Preemption model.
    pub model: Model,
    /// Lock.
    pub lock: LockKind,
    /// Page size.
    pub pages: Pages,
    /// Timer ticks per second.
    pub hz: u32,
    /// Measured virtual time, ns.
    pub duration_ns: u64,
    /// Virtual time before measuring, ns.
    pub warmup_ns: u64,
    /// RNG seed.
    pub seed: u64,
    /// 64-byte buffer descriptors in the shared array.
    pub descriptors: u64,
    /// User work outside the lock per operation, ns.
    pub work_ns: u64,
    /// Other user time per operation outside the lock (the loop, the RNG, timers), ns.
    pub op_ns: u64,
    /// User time inside the lock (pop the head, read its descriptor), ns.
    pub cs_ns: u64,
    /// Extra time per operation on 4 KB pages (TLB misses and page walks over the array), ns.
    pub access_4k_ns: u64,
    /// A minor fault on 4 KB pages (maps a fault-around group), ns.
    pub fault_4k_ns: u64,
    /// 4 KB pages one fault maps (fault-around: 64 KB).
    pub fault_around_pages: u64,
    /// Mapping an existing 2 MB page in a new process, ns.
    pub fault_2m_map_ns: u64,
    /// The first touch of a 2 MB page by anyone (zeroing), ns.
    pub fault_2m_zero_ns: u64,
    /// Replace a worker after this many operations (fresh page tables); 0: never.
    pub reconnect_every: u64,
    /// Replacing a worker (exit, fork), ns of kernel time.
    pub respawn_ns: u64,
    /// One spin-loop iteration (`pause` plus the test), ns.
    pub spin_ns: u64,
    /// Cache-line transfer from the releaser to the next holder, ns.
    pub lock_transfer_ns: u64,
    /// What every other running spinner adds to a hold, ns: the lock word and the free-list head share one
    /// cache line, which the spinners keep reading, so the new holder's fetch of it and its writes to it
    /// wait behind their re-reads, served one at a time (a TTAS handoff's cost grows linearly with the
    /// spinners). 0 by default; it cannot show on 2 CPUs, where no other spinner runs at a handoff.
    pub line_ns: u64,
    /// A context switch, ns.
    pub ctx_switch_ns: u64,
    /// Entering and leaving a syscall, ns.
    pub syscall_ns: u64,
    /// futex_wake with a waiter, ns.
    pub futex_wake_ns: u64,
    /// What futex_wake costs the waker on top when the woken task goes to an idle CPU (the IPI that wakes
    /// it), ns. 0 keeps the model as first calibrated.
    pub futex_wake_idle_ns: u64,
    /// IPI delivery to a remote CPU, ns.
    pub ipi_ns: u64,
    /// Leaving idle on a wakeup, ns.
    pub idle_exit_ns: u64,
    /// Timer slack added to pg_usleep, ns.
    pub sleep_slack_ns: u64,
    /// Hypothesis knob (GUIDE.md): the probability that a 4 KB fault blocks on a sleeping lock in the fault
    /// path (woken by another CPU). 0 in the defaults.
    pub fault_block_p: f64,
    /// How long such a block lasts before the wakeup, ns.
    pub fault_block_ns: u64,
    /// rseq slice extension granted to the holder, ns.
    pub rseq_grant_ns: u64,
    /// `adaptive`: how long a waiter spins before it parks, ns (shmlock's `SPIN_BUDGET`).
    pub adaptive_spin_ns: u64,
    /// `adaptive`: a parked waiter's first bounded sleep, ns (shmlock's `PARK_TIMEOUT_MIN`); it doubles
    /// with every further sleep of the same acquisition up to `adaptive_park_max_ns`.
    pub adaptive_park_min_ns: u64,
    /// `adaptive`: the longest bounded sleep, ns (shmlock's `PARK_TIMEOUT_MAX`).
    pub adaptive_park_max_ns: u64,
    /// `adaptive`: the holder requests the rseq slice extension (`rseq_grant_ns`), as the real lock does on
    /// kernels that have it (7.0+); off by default because this machine's kernel has none.
    pub adaptive_rseq: bool,
    /// A woken task preempts the running one only after that one has run this long since it was switched
    /// in (EEVDF's RUN_TO_PARITY protects the current task's slice); None: the base slice.
    pub wakeup_preempt_after_ns: Option<u64>,
    /// EEVDF's delayed dequeue (Linux 6.12+): a task that goes to sleep owing time stays queued until it
    /// owes none, and a wakeup before then keeps its deadline, so a slice is used up across short sleeps;
    /// the expiry is noticed at the tick and whenever a task is enqueued on the CPU (`update_curr`), and the
    /// reschedule it asks for follows the model (an IPI to a remote CPU, or only the lazy flag); the
    /// default. false: a slice counts from the switch-in and only the tick notices it (the model before).
    pub delayed_dequeue: bool,
    /// `delayed_dequeue`: a sleep shorter than this keeps the task's deadline, ns. None: EEVDF's arithmetic
    /// with equal weights: a task that ran `burst` with n - 1 others queued is owed nothing again after
    /// burst x (n - 1).
    pub delayed_dequeue_window_ns: Option<u64>,
    /// What the workers run.
    pub workload: Workload,
    /// `txn`: statements per transaction (pgbench simple-update: BEGIN, UPDATE, SELECT, INSERT, END).
    pub txn_stmts: u32,
    /// `txn`: buffer allocations (free-list pops) per transaction, spread over its statements.
    pub txn_allocs: f64,
    /// `txn`: backend user time per statement (parse, plan, execute), ns.
    pub stmt_ns: u64,
    /// `txn`: the client's part of a statement's round trip (network, pgbench), ns; the backend sleeps.
    pub client_ns: u64,
    /// `txn`: reading the allocated buffer's block from the page cache (pread of 8 KB), ns of kernel time.
    pub read_ns: u64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            cpus: 2,
            workers: 16,
            model: Model::None,
            lock: LockKind::Pg,
            pages: Pages::P4k,
            hz: 250,
            duration_ns: 1_000_000_000,
            warmup_ns: 100_000_000,
            seed: 1,
            descriptors: 16 << 20,
            work_ns: 1000,
            op_ns: 460,
            cs_ns: 200,
            access_4k_ns: 450,
            fault_4k_ns: 4000,
            fault_around_pages: 16,
            fault_2m_map_ns: 1000,
            fault_2m_zero_ns: 500_000,
            reconnect_every: 81_920,
            respawn_ns: 150_000,
            spin_ns: 30,
            lock_transfer_ns: 100,
            line_ns: 0,
            ctx_switch_ns: 1500,
            syscall_ns: 300,
            futex_wake_ns: 300,
            futex_wake_idle_ns: 0,
            ipi_ns: 2000,
            idle_exit_ns: 5000,
            sleep_slack_ns: 50_000,
            fault_block_p: 0.0,
            fault_block_ns: 5000,
            rseq_grant_ns: 5000,
            adaptive_spin_ns: 50_000,
            adaptive_park_min_ns: 100_000,
            adaptive_park_max_ns: 1_600_000,
            adaptive_rseq: false,
            wakeup_preempt_after_ns: None,
            delayed_dequeue: true,
            delayed_dequeue_window_ns: None,
            workload: Workload::Lock,
            txn_stmts: 5,
            txn_allocs: 2.0,
            stmt_ns: 185_000,
            client_ns: 100_000,
            read_ns: 3000,
        }
    }
}

/// Percentiles of a distribution, ns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pcts {
    /// Median.
    pub p50: u64,
    /// 90th.
    pub p90: u64,
    /// 99th.
    pub p99: u64,
    /// 99.9th.
    pub p999: u64,
    /// Maximum.
    pub max: u64,
}

fn pcts(h: &Histogram<u64>) -> Pcts {
    Pcts {
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    }
}

/// Where the CPUs' time went, as fractions of CPU time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSplit {
    /// Work, per-operation overhead and critical sections.
    pub useful: f64,
    /// Spinning on the lock.
    pub spinning: f64,
    /// Page faults.
    pub faults: f64,
    /// Syscalls (sleep, futex), worker replacement.
    pub kernel: f64,
    /// Context switches.
    pub scheduler: f64,
    /// Idle.
    pub idle: f64,
}

/// The outcome of one simulated run (a `bench lock` repetition's fields where they exist).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Operations per second of virtual time.
    pub ops_per_s: f64,
    /// Operations in the measured window.
    pub ops: u64,
    /// `txn`: transactions per second of virtual time (named `tps` as in `bench pg`, so `compare` pairs
    /// them); absent for `lock`.
    #[serde(rename = "tps", default, skip_serializing_if = "Option::is_none")]
    pub txn_per_s: Option<f64>,
    /// Acquire latency, ns.
    pub acquire_ns: Pcts,
    /// Hold time, ns.
    pub hold_ns: Pcts,
    /// Holds longer than 100 us per million operations.
    pub stalled_per_mop: f64,
    /// Lock-holder preemptions (the holder descheduled while holding) per second.
    pub lhp_per_s: f64,
    /// Faults per operation.
    pub minflt_per_op: f64,
    /// CPU time per operation, ns (busy time / operations).
    pub cpu_ns_per_op: f64,
    /// Sleeps (pg_usleep or futex waits) per operation.
    pub sleeps_per_op: f64,
    /// Context switches per operation.
    pub switches_per_op: f64,
    /// Jain's fairness index over per-worker operations.
    pub jain: f64,
    /// CPU split.
    pub cpu: CpuSplit,
    /// Events processed.
    pub events: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    /// User work outside the lock.
    Work,
    /// Spinning for the lock (pg, rseq).
    Spin,
    /// The fault inside the critical section (kernel).
    Fault,
    /// The critical section proper (user).
    Cs,
    /// Entering pg_usleep (kernel), then sleeping.
    SleepEnter,
    /// Entering futex_wait (kernel), then sleeping.
    FutexWaitEnter,
    /// futex_wake after release (kernel).
    FutexWake,
    /// rseq_slice_yield after a granted extension (kernel).
    SliceYield,
    /// Replacing the worker process (kernel).
    Respawn,
    /// Switching to this task (kernel, scheduler).
    Switch,
    /// `txn`: recv of the client's statement (kernel).
    Recv,
    /// `txn`: pread of the allocated buffer's block and its first-touch fault (kernel).
    Read,
    /// `txn`: send of the result (kernel); then the backend sleeps until the client's next statement.
    Send,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Running,
    Runnable,
    Sleeping,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Acct {
    Useful,
    Spin,
    Fault,
    Kernel,
    Sched,
}

impl Phase {
    fn kernel(self) -> bool {
        matches!(
            self,
            Phase::Fault
                | Phase::SleepEnter
                | Phase::FutexWaitEnter
                | Phase::FutexWake
                | Phase::SliceYield
                | Phase::Respawn
                | Phase::Switch
                | Phase::Recv
                | Phase::Read
                | Phase::Send
        )
    }
    fn acct(self) -> Acct {
        match self {
            Phase::Work | Phase::Cs => Acct::Useful,
            Phase::Spin => Acct::Spin,
            Phase::Fault => Acct::Fault,
            Phase::Switch => Acct::Sched,
            _ => Acct::Kernel,
        }
    }
}

#[derive(Clone, Debug)]
struct Task {
    state: State,
    phase: Phase,
    /// What to resume after a Switch segment.
    resume: Phase,
    remaining: u64,
    cpu: u32,
    vruntime: u64,
    /// `delayed_dequeue`: the vruntime at which the current slice began, and when the task last slept.
    slice_start: u64,
    slept_at: u64,
    /// `delayed_dequeue`: how long after `slept_at` the task would still be queued (owing time).
    owes_for: u64,
    /// Pages (fault groups) this process has mapped.
    touched: u64,
    ops_since_spawn: u64,
    spins_per_delay: u32,
    cur_delay_ns: u64,
    slept_this_acquire: bool,
    acquire_start: u64,
    hold_start: u64,
    holding: bool,
    /// The pending fault blocks halfway (hypothesis knob).
    fault_blocks: bool,
    /// rseq: extension granted and not yet yielded.
    granted: bool,
    ops: u64,
    /// Woken from a futex wait: retry the lock.
    retry: bool,
    /// `adaptive`: the current bounded sleep (0: none yet in this acquisition), the park it belongs to,
    /// and the hold this task's spin waits for.
    park_timeout_ns: u64,
    park_gen: u64,
    spin_hold: u64,
    /// `txn`: statements left in the transaction, allocations left in the statement, its work chunk.
    stmts_left: u32,
    allocs_left: u32,
    chunk_ns: u64,
    /// `txn`: the descriptor and block groups this process mapped last (the pops go in order).
    desc_group: u64,
    block_group: u64,
    /// `txn`: the buffer this process popped last.
    buf: u64,
}

#[derive(Clone, Debug)]
struct Cpu {
    cur: Option<u32>,
    rq: Vec<u32>,
    need: bool,
    lazy: bool,
    gen: u64,
    seg_start: u64,
    seg_end: u64,
    switched_in: u64,
    idle_since: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Ev {
    /// The running segment on a CPU ends (generation).
    SegEnd(u32, u64),
    /// Timer tick on a CPU.
    Tick(u32),
    /// A sleeping task wakes (timer or remote waker).
    Wake(u32),
    /// An IPI reaches a CPU.
    Ipi(u32),
    /// A granted rseq extension runs out (CPU, generation).
    ExtEnd(u32, u64),
    /// `adaptive`: a parked waiter's bounded sleep ends (task, park).
    ParkTimeout(u32, u64),
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The EEVDF base slice of REFERENCE.md §2 (since 6.15): 0.70 ms x (1 + log2(min(cpus, 8))).
pub fn base_slice_ns(cpus: u32) -> u64 {
    let n = cpus.clamp(1, 8);
    700_000 * (1 + (31 - n.leading_zeros()) as u64)
}

struct Sim {
    p: Params,
    now: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    rng: Rng,
    cpus: Vec<Cpu>,
    tasks: Vec<Task>,
    holder: Option<u32>,
    /// Running tasks currently spinning on the lock.
    spinners: Vec<u32>,
    /// Tasks asleep in futex_wait.
    futex_waiters: Vec<u32>,
    /// `adaptive`: the CPU the current hold was taken on, the holds so far, the `STALLED` mark, and
    /// whether a wake is in flight (`WAKING`).
    holder_cpu: u32,
    hold_seq: u64,
    ad_stalled: bool,
    ad_waking: bool,
    slice: u64,
    groups: u64,
    zeroed_2m: u64,
    /// `txn`: the next buffer the free list hands out.
    next_buf: u64,
    /// `txn`: block groups (64 KB on 4 KB pages, 2 MB pages) somebody has touched (they go in order).
    blocks_zeroed: u64,
    // measurement
    txns: u64,
    measuring: bool,
    ops: u64,
    faults: u64,
    sleeps: u64,
    switches: u64,
    lhp: u64,
    stalled: u64,
    acct: [u64; 5],
    acquire: Histogram<u64>,
    hold: Histogram<u64>,
    events: u64,
}

impl Sim {
    fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    fn fault_groups(p: &Params) -> u64 {
        let bytes = p.descriptors * 64;
        match p.pages {
            Pages::P4k => (bytes / (4096 * p.fault_around_pages.max(1))).max(1),
            Pages::P2m => (bytes / (2 << 20)).max(1),
        }
    }

    fn new(p: Params) -> Sim {
        let mut rng = Rng(p.seed ^ 0x005E_ED0F_5EED);
        let slice = base_slice_ns(p.cpus);
        let mut cpus = vec![
            Cpu {
                cur: None,
                rq: Vec::new(),
                need: false,
                lazy: false,
                gen: 0,
                seg_start: 0,
                seg_end: 0,
                switched_in: 0,
                idle_since: Some(0),
            };
            p.cpus as usize
        ];
        let mut tasks = Vec::with_capacity(p.workers as usize);
        for i in 0..p.workers {
            let cpu = i % p.cpus;
            tasks.push(Task {
                state: State::Runnable,
                phase: Phase::Work,
                resume: Phase::Work,
                remaining: rng.below(p.work_ns.max(1)),
                cpu,
                vruntime: 0,
                slice_start: 0,
                slept_at: 0,
                owes_for: 0,
                touched: 0,
                // Workers start at staggered ages, as after a while of replacements.
                ops_since_spawn: if p.reconnect_every > 0 {
                    rng.below(p.reconnect_every)
                } else {
                    0
                },
                spins_per_delay: 100,
                cur_delay_ns: 0,
                slept_this_acquire: false,
                acquire_start: 0,
                hold_start: 0,
                holding: false,
                fault_blocks: false,
                granted: false,
                ops: 0,
                retry: false,
                park_timeout_ns: 0,
                park_gen: 0,
                spin_hold: 0,
                stmts_left: p.txn_stmts.max(1),
                allocs_left: 0,
                chunk_ns: p.work_ns,
                desc_group: u64::MAX,
                block_group: u64::MAX,
                buf: 0,
            });
            cpus[cpu as usize].rq.push(i);
        }
        // A worker that has done k operations has mapped about groups x (1 - (1 - 1/groups)^k) groups.
        let groups = Sim::fault_groups(&p);
        for t in &mut tasks {
            let k = t.ops_since_spawn as f64;
            t.touched = (groups as f64 * (1.0 - (-k / groups as f64).exp())) as u64;
        }
        let hist = || Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds");
        let mut s = Sim {
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            rng,
            cpus,
            tasks,
            holder: None,
            spinners: Vec::new(),
            futex_waiters: Vec::new(),
            holder_cpu: u32::MAX,
            hold_seq: 0,
            ad_stalled: false,
            ad_waking: false,
            slice,
            groups,
            zeroed_2m: if p.pages == Pages::P2m { groups } else { 0 },
            next_buf: 0,
            blocks_zeroed: 0,
            txns: 0,
            measuring: false,
            ops: 0,
            faults: 0,
            sleeps: 0,
            switches: 0,
            lhp: 0,
            stalled: 0,
            acct: [0; 5],
            acquire: hist(),
            hold: hist(),
            events: 0,
            p,
        };
        let tick = 1_000_000_000 / s.p.hz.max(1) as u64;
        for c in 0..s.p.cpus {
            // Ticks are staggered across CPUs.
            let first = tick * c as u64 / s.p.cpus as u64 + 1;
            s.push(first, Ev::Tick(c));
            s.schedule(c);
        }
        s
    }

    fn account(&mut self, acct: Acct, from: u64, to: u64) {
        if !self.measuring || to <= from {
            return;
        }
        let start = from.max(self.p.warmup_ns);
        if to > start {
            self.acct[acct as usize] += to - start;
        }
    }

    /// Starts (or resumes) the current task's phase on `c` for `dur` ns.
    fn run_segment(&mut self, c: u32, dur: u64) {
        let cpu = &mut self.cpus[c as usize];
        cpu.gen += 1;
        cpu.seg_start = self.now;
        cpu.seg_end = self.now + dur.max(1);
        let (end, gen) = (cpu.seg_end, cpu.gen);
        self.push(end, Ev::SegEnd(c, gen));
    }

    /// Picks the next task on `c` (the lowest vruntime) or goes idle; pulls from the busiest CPU when its own
    /// queue is empty.
    fn schedule(&mut self, c: u32) {
        let ci = c as usize;
        if self.cpus[ci].rq.is_empty() {
            // Idle balance: take a waiting task from the longest queue.
            let (mut best, mut len) = (usize::MAX, 0);
            for (i, o) in self.cpus.iter().enumerate() {
                if o.rq.len() > len {
                    best = i;
                    len = o.rq.len();
                }
            }
            if best != usize::MAX {
                let t = self.cpus[best].rq.pop().expect("non-empty");
                self.cpus[ci].rq.push(t);
            }
        }
        if self.cpus[ci].rq.is_empty() {
            self.cpus[ci].cur = None;
            self.cpus[ci].idle_since = Some(self.now);
            self.cpus[ci].need = false;
            self.cpus[ci].lazy = false;
            self.cpus[ci].gen += 1;
            return;
        }
        let (mut bi, mut bv) = (0, u64::MAX);
        for (i, &t) in self.cpus[ci].rq.iter().enumerate() {
            if self.tasks[t as usize].vruntime < bv {
                bv = self.tasks[t as usize].vruntime;
                bi = i;
            }
        }
        let t = self.cpus[ci].rq.swap_remove(bi);
        // Idle time is not tracked here (it is what is left of the CPU time); leaving idle costs idle_exit_ns.
        let was_idle = self.cpus[ci].idle_since.take().is_some();
        let cpu = &mut self.cpus[ci];
        cpu.cur = Some(t);
        cpu.need = false;
        cpu.lazy = false;
        cpu.switched_in = self.now;
        let task = &mut self.tasks[t as usize];
        task.state = State::Running;
        task.cpu = c;
        task.resume = task.phase;
        task.phase = Phase::Switch;
        if self.measuring {
            self.switches += 1;
        }
        let d = self.p.ctx_switch_ns + if was_idle { self.p.idle_exit_ns } else { 0 };
        self.run_segment(c, d);
    }

    /// Takes the current task off `c` (it stays runnable) and schedules.
    fn preempt(&mut self, c: u32) {
        let ci = c as usize;
        let Some(t) = self.cpus[ci].cur else { return };
        self.stop_segment(c, t);
        let task = &mut self.tasks[t as usize];
        task.state = State::Runnable;
        if task.holding && self.measuring {
            self.lhp += 1;
        }
        self.spinners.retain(|&x| x != t);
        self.cpus[ci].rq.push(t);
        self.schedule(c);
    }

    /// Stops the running segment early: accounts the time run and keeps the rest.
    fn stop_segment(&mut self, c: u32, t: u32) {
        let (start, end) = (
            self.cpus[c as usize].seg_start,
            self.cpus[c as usize].seg_end,
        );
        let ran = self.now.saturating_sub(start);
        let phase = self.tasks[t as usize].phase;
        self.account(phase.acct(), start, self.now);
        let task = &mut self.tasks[t as usize];
        task.vruntime += ran;
        if phase == Phase::Switch {
            // An interrupted switch is redone in full next time.
            task.phase = task.resume;
        } else {
            // What is left of the segment (for a spin: its budget).
            task.remaining = end.saturating_sub(self.now);
        }
        self.cpus[c as usize].gen += 1;
    }

    /// The current task on `c` blocks (sleeps); `wake_at` schedules its wakeup, None waits for a waker.
    fn block(&mut self, c: u32, t: u32, wake_at: Option<u64>) {
        // EEVDF lag with equal weights: running `burst` while n tasks share the CPU puts a task
        // burst x (1 - 1/n) ahead of the average, which then needs burst x (n - 1) of wall time to catch up.
        let burst = self.now.saturating_sub(self.cpus[c as usize].switched_in);
        let others = self.cpus[c as usize].rq.len() as u64;
        let task = &mut self.tasks[t as usize];
        task.state = State::Sleeping;
        task.slept_at = self.now;
        task.owes_for = burst * others;
        if task.holding && self.measuring {
            self.lhp += 1;
        }
        self.spinners.retain(|&x| x != t);
        if let Some(at) = wake_at {
            self.push(at, Ev::Wake(t));
        }
        self.schedule(c);
    }

    /// Is a reschedule due on `c` for a task in kernel mode right now?
    fn kernel_preemptible(&self, c: u32) -> bool {
        let cpu = &self.cpus[c as usize];
        match self.p.model {
            Model::Full => cpu.need || cpu.lazy,
            Model::Lazy => cpu.need,
            Model::None | Model::Voluntary => false,
        }
    }

    /// On the way back to user mode: reschedule when either flag is set (every model). Returns true when
    /// the task was switched out. rseq: a holder that asked gets one extension instead.
    fn return_to_user(&mut self, c: u32, from_irq_or_fault: bool) -> bool {
        let ci = c as usize;
        if !(self.cpus[ci].need || self.cpus[ci].lazy) {
            return false;
        }
        let Some(t) = self.cpus[ci].cur else {
            return false;
        };
        if (self.p.lock == LockKind::Rseq
            || (self.p.lock == LockKind::Adaptive && self.p.adaptive_rseq))
            && from_irq_or_fault
            && self.tasks[t as usize].holding
            && !self.tasks[t as usize].granted
        {
            self.tasks[t as usize].granted = true;
            let gen = self.cpus[ci].gen;
            self.push(self.now + self.p.rseq_grant_ns, Ev::ExtEnd(c, gen));
            return false;
        }
        if self.tasks[t as usize].granted {
            return false; // still inside its extension
        }
        self.preempt(c);
        true
    }

    /// The first idle CPU, where a woken task goes when its own CPU is busy.
    fn idle_cpu(&self) -> Option<usize> {
        self.cpus.iter().position(|x| x.cur.is_none())
    }

    /// Makes a sleeping task runnable (`remote`: woken by another CPU) with wakeup preemption.
    fn wake(&mut self, t: u32, remote: bool) {
        if self.tasks[t as usize].state != State::Sleeping {
            return;
        }
        // Placement: its last CPU, or an idle one if it is busy.
        let mut c = self.tasks[t as usize].cpu;
        if self.cpus[c as usize].cur.is_some() {
            if let Some(i) = self.idle_cpu() {
                c = i as u32;
            }
        }
        let ci = c as usize;
        let minv = self.cpus[ci]
            .cur
            .map(|x| self.tasks[x as usize].vruntime)
            .unwrap_or(0);
        let task = &mut self.tasks[t as usize];
        task.state = State::Runnable;
        let placed = task.vruntime.max(minv.saturating_sub(self.slice / 2));
        let window = self.p.delayed_dequeue_window_ns.unwrap_or(task.owes_for);
        if self.p.delayed_dequeue && self.now - task.slept_at < window {
            // Still queued (delayed): same deadline; the placement is not runtime.
            task.slice_start += placed - task.vruntime;
        } else {
            task.slice_start = placed;
        }
        task.vruntime = placed;
        self.cpus[ci].rq.push(t);
        match self.cpus[ci].cur {
            None => {
                // Idle CPU: it leaves idle and picks the task.
                self.schedule(c);
            }
            Some(_) => {
                // The enqueue updates the current task's runtime: a used-up slice asks for a reschedule.
                let expired = self.p.delayed_dequeue && self.slice_used_up(c);
                // Wakeup preemption once the current task has used its protected slice.
                let ran = self.now.saturating_sub(self.cpus[ci].switched_in);
                if !expired && ran < self.p.wakeup_preempt_after_ns.unwrap_or(self.slice) {
                    return;
                }
                match self.p.model {
                    Model::Lazy => self.cpus[ci].lazy = true,
                    _ => {
                        self.cpus[ci].need = true;
                        if remote {
                            self.push(self.now + self.p.ipi_ns, Ev::Ipi(c));
                        }
                    }
                }
                if !remote {
                    // A local wakeup comes from an interrupt on that CPU (the timer): its return path
                    // checks the flags now, in every model.
                    self.interrupt_exit(c);
                }
            }
        }
    }

    /// A running task on `c` tries the lock now.
    fn try_lock(&mut self, c: u32, t: u32) {
        if self.holder.is_none() {
            self.take_lock(c, t, 0);
            return;
        }
        match self.p.lock {
            LockKind::Pg | LockKind::Rseq => {
                self.tasks[t as usize].phase = Phase::Spin;
                self.spinners.push(t);
                self.run_segment(c, self.spin_budget(t));
            }
            LockKind::Futex => {
                self.tasks[t as usize].phase = Phase::FutexWaitEnter;
                self.run_segment(c, self.p.syscall_ns);
            }
            LockKind::Adaptive => {
                // Spin only while the holder may be running (not queued on this very CPU), no spinner
                // has spent a whole budget on this hold, and a spinner slot is free; else park.
                let cap = self.p.cpus.min(ADAPTIVE_SLOTS) as usize;
                if !self.ad_stalled && self.holder_cpu != c && self.spinners.len() < cap {
                    let task = &mut self.tasks[t as usize];
                    task.phase = Phase::Spin;
                    task.spin_hold = self.hold_seq;
                    self.spinners.push(t);
                    self.run_segment(c, self.spin_budget(t));
                } else {
                    self.tasks[t as usize].phase = Phase::FutexWaitEnter;
                    self.run_segment(c, self.p.syscall_ns);
                }
            }
        }
    }

    /// A whole spin of `t`, ns: `pg`'s spins_per_delay iterations, or `adaptive`'s time budget.
    fn spin_budget(&self, t: u32) -> u64 {
        match self.p.lock {
            LockKind::Adaptive => self.p.adaptive_spin_ns,
            _ => self.tasks[t as usize].spins_per_delay as u64 * self.p.spin_ns,
        }
    }

    /// `t` (running on `c`) becomes the holder after `delay` ns of transfer.
    fn take_lock(&mut self, c: u32, t: u32, delay: u64) {
        self.holder = Some(t);
        self.holder_cpu = c;
        self.hold_seq += 1;
        self.tasks[t as usize].park_timeout_ns = 0;
        self.spinners.retain(|&x| x != t);
        let now = self.now;
        let measuring = self.measuring;
        let p = &self.p;
        let faults = match p.workload {
            Workload::Lock => {
                let task = &self.tasks[t as usize];
                let fault_p = 1.0 - task.touched as f64 / self.groups as f64;
                self.rng.unit() < fault_p
            }
            Workload::Txn => {
                // The free list hands out buffers in order; the holder reads the head's descriptor.
                let buf = self.next_buf;
                self.next_buf = (buf + 1) % p.descriptors;
                let per = match p.pages {
                    Pages::P4k => p.fault_around_pages.max(1) * 4096 / 64,
                    Pages::P2m => (2 << 20) / 64,
                };
                let task = &mut self.tasks[t as usize];
                task.buf = buf;
                let g = buf / per;
                std::mem::replace(&mut task.desc_group, g) != g
            }
        };
        let blocks = faults && p.pages == Pages::P4k && self.rng.unit() < p.fault_block_p;
        // Every spinner still polling the line slows this hold.
        let delay = delay + p.line_ns * self.spinners.len() as u64;
        let task = &mut self.tasks[t as usize];
        if measuring && now >= p.warmup_ns {
            let _ = self.acquire.record((now - task.acquire_start).max(1));
        }
        // spins_per_delay adapts as in s_lock.c.
        if task.slept_this_acquire {
            task.spins_per_delay = (task.spins_per_delay.saturating_sub(1)).max(10);
        } else {
            task.spins_per_delay = (task.spins_per_delay + 100).min(1000);
        }
        task.slept_this_acquire = false;
        task.cur_delay_ns = 0;
        task.holding = true;
        task.hold_start = now;
        task.fault_blocks = blocks;
        task.granted = false;
        if faults {
            task.touched += 1;
            if self.measuring {
                self.faults += 1;
            }
            let mut d = match p.pages {
                Pages::P4k => p.fault_4k_ns,
                Pages::P2m => p.fault_2m_map_ns,
            };
            if p.pages == Pages::P2m && self.zeroed_2m < self.groups {
                self.zeroed_2m += 1;
                d += p.fault_2m_zero_ns;
            }
            task.phase = Phase::Fault;
            task.remaining = d;
            self.run_segment(c, delay + d);
        } else {
            task.phase = Phase::Cs;
            let d = p.cs_ns
                + match p.pages {
                    Pages::P4k => p.access_4k_ns / 2,
                    Pages::P2m => 0,
                };
            self.run_segment(c, delay + d);
        }
    }

    /// The holder on `c` releases the lock.
    fn release(&mut self, c: u32, t: u32) {
        let now = self.now;
        let task = &mut self.tasks[t as usize];
        task.holding = false;
        let held = now - task.hold_start;
        task.ops += 1;
        task.ops_since_spawn += 1;
        let granted = std::mem::replace(&mut task.granted, false);
        self.holder = None;
        self.ad_stalled = false;
        // adaptive: unlock wakes a sleeper only when no spinner is around to take the lock and no wake
        // is in flight.
        let adaptive_wake = self.p.lock == LockKind::Adaptive
            && !self.futex_waiters.is_empty()
            && !self.ad_waking
            && self.spinners.is_empty();
        if self.measuring && now >= self.p.warmup_ns {
            self.ops += 1;
            let _ = self.hold.record(held.max(1));
            if held > 100_000 {
                self.stalled += 1;
            }
        }
        // A running spinner notices and takes it.
        if !self.spinners.is_empty() {
            let i = self.rng.below(self.spinners.len() as u64) as usize;
            let w = self.spinners.swap_remove(i);
            let wc = self.tasks[w as usize].cpu;
            // Stop its spin segment and hand over.
            self.stop_segment(wc, w);
            let d = self.p.lock_transfer_ns;
            self.take_lock(wc, w, d);
        }
        let next = if self.p.lock == LockKind::Futex && !self.futex_waiters.is_empty() {
            Phase::FutexWake
        } else if adaptive_wake {
            self.ad_waking = true;
            Phase::FutexWake
        } else if granted {
            Phase::SliceYield
        } else {
            self.after_op(t)
        };
        self.start_phase(c, t, next);
    }

    fn start_phase(&mut self, c: u32, t: u32, ph: Phase) {
        let p = &self.p;
        let d = match ph {
            Phase::Work if p.workload == Workload::Txn => self.tasks[t as usize].chunk_ns,
            Phase::Work => {
                p.work_ns
                    + p.op_ns
                    + match p.pages {
                        Pages::P4k => p.access_4k_ns / 2,
                        Pages::P2m => 0,
                    }
            }
            Phase::Read => {
                // The block of the buffer just popped: a first touch in this process faults (outside the
                // lock); the first touch by anyone also zeroes the memory.
                let (per, bytes) = match p.pages {
                    Pages::P4k => (
                        (p.fault_around_pages.max(1) * 4096 / 8192).max(1),
                        p.fault_around_pages.max(1) * 4096,
                    ),
                    Pages::P2m => ((2 << 20) / 8192, 2 << 20),
                };
                let g = self.tasks[t as usize].buf / per;
                let mut d = p.read_ns;
                if std::mem::replace(&mut self.tasks[t as usize].block_group, g) != g {
                    d += match p.pages {
                        Pages::P4k => p.fault_4k_ns,
                        Pages::P2m => p.fault_2m_map_ns,
                    };
                    if g >= self.blocks_zeroed {
                        self.blocks_zeroed = g + 1;
                        d += p.fault_2m_zero_ns * bytes / (2 << 20);
                    }
                    if self.measuring && self.now >= p.warmup_ns {
                        self.faults += 1;
                    }
                }
                d
            }
            Phase::Send => p.syscall_ns,
            Phase::FutexWake => {
                // The first waiter goes to an idle CPU when there is one (see `wake`): that costs the
                // waker an IPI to a halted CPU.
                let to_idle = p.futex_wake_idle_ns > 0
                    && !self.futex_waiters.is_empty()
                    && self.idle_cpu().is_some();
                p.futex_wake_ns + if to_idle { p.futex_wake_idle_ns } else { 0 }
            }
            Phase::SliceYield => p.syscall_ns,
            Phase::Respawn => p.respawn_ns,
            _ => unreachable!("start_phase {ph:?}"),
        };
        let task = &mut self.tasks[t as usize];
        task.phase = ph;
        if ph == Phase::Work {
            task.acquire_start = 0;
        }
        self.run_segment(c, d);
    }

    /// The segment on `c` ran to its end.
    fn seg_end(&mut self, c: u32) {
        let Some(t) = self.cpus[c as usize].cur else {
            return;
        };
        let (start, end) = (
            self.cpus[c as usize].seg_start,
            self.cpus[c as usize].seg_end,
        );
        let phase = self.tasks[t as usize].phase;
        self.account(phase.acct(), start, end);
        self.tasks[t as usize].vruntime += end - start;
        // The segment is consumed: a preemption from here on accounts nothing twice.
        self.cpus[c as usize].seg_start = self.now;
        self.cpus[c as usize].seg_end = self.now;
        match phase {
            Phase::Switch => {
                let task = &mut self.tasks[t as usize];
                task.phase = task.resume;
                let resume = task.phase;
                let rem = task.remaining;
                if resume.kernel() || !self.return_to_user(c, false) {
                    self.resume(c, t, resume, rem);
                }
            }
            Phase::Work if self.p.workload == Workload::Txn => {
                let task = &mut self.tasks[t as usize];
                if task.allocs_left > 0 {
                    task.allocs_left -= 1;
                    task.acquire_start = self.now;
                    self.try_lock(c, t);
                } else {
                    self.start_phase(c, t, Phase::Send);
                }
            }
            Phase::Work => {
                self.tasks[t as usize].acquire_start = self.now;
                self.try_lock(c, t);
            }
            Phase::Read | Phase::Recv => {
                if phase == Phase::Recv {
                    // A statement starts: its allocations and its work between them.
                    let m = self.p.txn_allocs.max(0.0) / self.p.txn_stmts.max(1) as f64;
                    let extra = u32::from(self.rng.unit() < m.fract());
                    let a = m.trunc() as u32 + extra;
                    let task = &mut self.tasks[t as usize];
                    task.allocs_left = a;
                    task.chunk_ns = self.p.stmt_ns / (a as u64 + 1);
                }
                let task = &mut self.tasks[t as usize];
                task.phase = Phase::Work;
                task.remaining = 0;
                if !self.return_to_user(c, true) {
                    self.start_phase(c, t, Phase::Work);
                }
            }
            Phase::Send => {
                let measured = self.measuring && self.now >= self.p.warmup_ns;
                let stmts = self.p.txn_stmts.max(1);
                let task = &mut self.tasks[t as usize];
                task.stmts_left = task.stmts_left.saturating_sub(1);
                if task.stmts_left == 0 {
                    task.stmts_left = stmts;
                    if measured {
                        self.txns += 1;
                    }
                }
                // Wait for the client's next statement; a pgbench thread on another CPU wakes this backend.
                task.phase = Phase::Recv;
                task.remaining = self.p.syscall_ns;
                let at = self.now + self.p.client_ns;
                self.block(c, t, None);
                self.push(at, Ev::Wake(t | 1 << 31));
            }
            Phase::Spin if self.p.lock == LockKind::Adaptive => {
                // Budget used up. If it was all one hold, mark it STALLED; then try again (which parks
                // unless the lock changed hands meanwhile).
                self.spinners.retain(|&x| x != t);
                if self.holder.is_some() && self.hold_seq == self.tasks[t as usize].spin_hold {
                    self.ad_stalled = true;
                }
                self.try_lock(c, t);
            }
            Phase::Spin => {
                // Budget used up: pg_usleep.
                self.spinners.retain(|&x| x != t);
                self.tasks[t as usize].phase = Phase::SleepEnter;
                self.run_segment(c, self.p.syscall_ns);
            }
            Phase::SleepEnter => {
                let task = &mut self.tasks[t as usize];
                task.slept_this_acquire = true;
                task.cur_delay_ns = if task.cur_delay_ns == 0 {
                    1_000_000
                } else {
                    let r = self.rng.unit();
                    let d = task.cur_delay_ns as f64 * (1.0 + r) + 500.0;
                    if d > 1e9 {
                        1_000_000
                    } else {
                        d as u64
                    }
                };
                let at = self.now + task.cur_delay_ns + self.p.sleep_slack_ns;
                task.phase = Phase::Spin; // retry after waking
                task.remaining = 0;
                if self.measuring {
                    self.sleeps += 1;
                }
                self.block(c, t, Some(at));
            }
            Phase::FutexWaitEnter => {
                if self.holder.is_none() {
                    // Released meanwhile: take it.
                    self.take_lock(c, t, 0);
                } else {
                    self.tasks[t as usize].retry = true;
                    self.futex_waiters.push(t);
                    if self.measuring {
                        self.sleeps += 1;
                    }
                    if self.p.lock == LockKind::Adaptive {
                        // A bounded sleep: 100 us doubling to 1.6 ms, plus the timer slack.
                        let p = &self.p;
                        let task = &mut self.tasks[t as usize];
                        task.park_timeout_ns = if task.park_timeout_ns == 0 {
                            p.adaptive_park_min_ns
                        } else {
                            (task.park_timeout_ns * 2).min(p.adaptive_park_max_ns)
                        };
                        task.park_gen += 1;
                        let at = self.now + task.park_timeout_ns + p.sleep_slack_ns;
                        let gen = task.park_gen;
                        self.push(at, Ev::ParkTimeout(t, gen));
                    }
                    self.block(c, t, None);
                }
            }
            Phase::Fault => {
                let task = &mut self.tasks[t as usize];
                if task.fault_blocks {
                    // The fault path sleeps on a lock; another CPU wakes it.
                    task.fault_blocks = false;
                    task.remaining = 0;
                    let at = self.now + self.p.fault_block_ns;
                    self.block(c, t, None);
                    self.push(at, Ev::Wake(t | 1 << 31));
                    return;
                }
                task.phase = Phase::Cs;
                if !self.return_to_user(c, true) {
                    let d = self.p.cs_ns
                        + match self.p.pages {
                            Pages::P4k => self.p.access_4k_ns / 2,
                            Pages::P2m => 0,
                        };
                    self.run_segment(c, d);
                } else {
                    let d = self.p.cs_ns;
                    self.tasks[t as usize].remaining = d;
                }
            }
            Phase::Cs => self.release(c, t),
            Phase::FutexWake => {
                if !self.futex_waiters.is_empty() {
                    let w = self.futex_waiters.remove(0);
                    let remote = self.tasks[w as usize].cpu != c;
                    self.wake(w, remote);
                } else {
                    // Nobody left to wake (their sleeps timed out): no wake in flight.
                    self.ad_waking = false;
                }
                self.after_release_syscall(c, t);
            }
            Phase::SliceYield => {
                // rseq_slice_yield: the deferred reschedule happens now.
                self.cpus[c as usize].need = true;
                let next = self.after_op(t);
                let task = &mut self.tasks[t as usize];
                task.phase = next;
                task.remaining = 0;
                if !self.return_to_user(c, false) {
                    self.start_phase(c, t, next);
                }
            }
            Phase::Respawn => {
                let task = &mut self.tasks[t as usize];
                task.touched = 0;
                task.ops_since_spawn = 0;
                task.spins_per_delay = 100;
                task.phase = Phase::Work;
                task.remaining = 0;
                if !self.return_to_user(c, false) {
                    self.start_phase(c, t, Phase::Work);
                }
            }
        }
    }

    /// What follows an operation once the lock is released (and any futex wake or slice yield is done).
    fn after_op(&self, t: u32) -> Phase {
        match self.p.workload {
            Workload::Txn => Phase::Read,
            Workload::Lock
                if self.p.reconnect_every > 0
                    && self.tasks[t as usize].ops_since_spawn >= self.p.reconnect_every =>
            {
                Phase::Respawn
            }
            Workload::Lock => Phase::Work,
        }
    }

    fn after_release_syscall(&mut self, c: u32, t: u32) {
        let next = self.after_op(t);
        if !self.return_to_user(c, false) {
            self.start_phase(c, t, next);
        } else {
            let task = &mut self.tasks[t as usize];
            task.phase = next;
            task.remaining = 0;
        }
    }

    /// Continues a task's phase after it was switched in.
    fn resume(&mut self, c: u32, t: u32, phase: Phase, rem: u64) {
        match phase {
            Phase::Spin => {
                if self.holder.is_none() {
                    self.take_lock(c, t, 0);
                } else {
                    let budget = if rem > 0 { rem } else { self.spin_budget(t) };
                    self.spinners.push(t);
                    self.run_segment(c, budget);
                }
            }
            Phase::FutexWaitEnter
                if self.tasks[t as usize].retry && self.p.lock == LockKind::Adaptive =>
            {
                // Back from a wake or a timeout: let the next unlock wake another sleeper, then go
                // through the rules again.
                self.tasks[t as usize].retry = false;
                self.ad_waking = false;
                self.try_lock(c, t);
            }
            Phase::FutexWaitEnter if self.tasks[t as usize].retry => {
                self.tasks[t as usize].retry = false;
                if self.holder.is_none() {
                    self.take_lock(c, t, 0);
                } else {
                    self.run_segment(c, self.p.syscall_ns);
                }
            }
            Phase::Work
            | Phase::FutexWake
            | Phase::SliceYield
            | Phase::Respawn
            | Phase::Read
            | Phase::Send
                if rem == 0 =>
            {
                self.start_phase(c, t, phase)
            }
            _ => {
                let d = if rem == 0 { 1 } else { rem };
                self.run_segment(c, d);
            }
        }
    }

    fn tick(&mut self, c: u32) {
        let tick = 1_000_000_000 / self.p.hz.max(1) as u64;
        self.push(self.now + tick, Ev::Tick(c));
        let ci = c as usize;
        if self.cpus[ci].cur.is_none() {
            return;
        }
        let ran = self.now.saturating_sub(self.cpus[ci].switched_in);
        if self.p.model == Model::Lazy && self.cpus[ci].lazy {
            self.cpus[ci].need = true; // the tick upgrades a lazy request
        }
        let due = if self.p.delayed_dequeue {
            self.slice_used_up(c)
        } else {
            ran >= self.slice
        };
        if due && !self.cpus[ci].rq.is_empty() {
            match self.p.model {
                Model::Lazy => {
                    if !self.cpus[ci].need {
                        self.cpus[ci].lazy = true;
                    }
                }
                _ => self.cpus[ci].need = true,
            }
        }
        self.interrupt_exit(c);
    }

    /// `delayed_dequeue`: has the current task on `c` used up its slice (runtime since its deadline was
    /// set, the running segment included)? If so its next slice starts now (EEVDF's `update_deadline`).
    fn slice_used_up(&mut self, c: u32) -> bool {
        let cpu = &self.cpus[c as usize];
        let Some(t) = cpu.cur else { return false };
        let runtime = self.tasks[t as usize].vruntime + self.now.saturating_sub(cpu.seg_start);
        let task = &mut self.tasks[t as usize];
        if runtime.saturating_sub(task.slice_start) < self.slice {
            return false;
        }
        task.slice_start = runtime;
        true
    }

    /// Leaving an interrupt (the tick, an IPI, the timer of a local wakeup) on `c`: in kernel mode the
    /// model decides whether to preempt; to user mode every model reschedules when a flag is set.
    fn interrupt_exit(&mut self, c: u32) {
        let ci = c as usize;
        let Some(t) = self.cpus[ci].cur else { return };
        if !(self.cpus[ci].need || self.cpus[ci].lazy) {
            return;
        }
        if self.tasks[t as usize].phase.kernel() {
            if self.kernel_preemptible(c) && self.tasks[t as usize].phase != Phase::Switch {
                self.preempt(c);
            }
        } else {
            self.return_to_user(c, true);
        }
    }

    /// `adaptive`: a bounded sleep ends; the waiter leaves the futex queue and retries.
    fn park_timeout(&mut self, t: u32, gen: u64) {
        if self.tasks[t as usize].park_gen != gen || self.tasks[t as usize].state != State::Sleeping
        {
            return;
        }
        if let Some(i) = self.futex_waiters.iter().position(|&x| x == t) {
            self.futex_waiters.remove(i);
            self.wake(t, false);
        }
    }

    fn ext_end(&mut self, c: u32, gen: u64) {
        // The generation names the segment that was running when the grant was made; the grant belongs to
        // the task, so it expires whatever the task is doing now.
        let _ = gen;
        let ci = c as usize;
        let Some(t) = self.cpus[ci].cur else { return };
        if self.tasks[t as usize].granted {
            self.tasks[t as usize].granted = false;
            if self.cpus[ci].need || self.cpus[ci].lazy {
                self.preempt(c);
            }
        }
    }

    fn run(mut self) -> Outcome {
        let end = self.p.warmup_ns + self.p.duration_ns;
        self.measuring = true;
        while let Some(Reverse((at, _, ev))) = self.heap.pop() {
            if at > end {
                break;
            }
            self.now = at;
            self.events += 1;
            match ev {
                Ev::SegEnd(c, gen) => {
                    if self.cpus[c as usize].gen == gen && self.cpus[c as usize].cur.is_some() {
                        self.seg_end(c);
                    }
                }
                Ev::Tick(c) => self.tick(c),
                Ev::Wake(t) => {
                    let remote = t & (1 << 31) != 0;
                    self.wake(t & !(1 << 31), remote);
                }
                Ev::Ipi(c) => self.interrupt_exit(c),
                Ev::ExtEnd(c, gen) => self.ext_end(c, gen),
                Ev::ParkTimeout(t, gen) => self.park_timeout(t, gen),
            }
        }
        // Close the running segments at the end.
        self.now = end;
        for c in 0..self.p.cpus {
            if let Some(t) = self.cpus[c as usize].cur {
                let start = self.cpus[c as usize].seg_start;
                let ph = self.tasks[t as usize].phase;
                self.account(ph.acct(), start, end);
            }
        }
        let total = self.p.duration_ns as f64 * self.p.cpus as f64;
        let busy: u64 = self.acct.iter().sum();
        let f = |x: u64| x as f64 / total;
        let per_task: Vec<f64> = self.tasks.iter().map(|t| t.ops as f64).collect();
        let secs = self.p.duration_ns as f64 / 1e9;
        let ops = self.ops.max(1) as f64;
        Outcome {
            ops_per_s: self.ops as f64 / secs,
            ops: self.ops,
            txn_per_s: (self.p.workload == Workload::Txn).then(|| self.txns as f64 / secs),
            acquire_ns: pcts(&self.acquire),
            hold_ns: pcts(&self.hold),
            stalled_per_mop: self.stalled as f64 / ops * 1e6,
            lhp_per_s: self.lhp as f64 / secs,
            minflt_per_op: self.faults as f64 / ops,
            cpu_ns_per_op: busy as f64 / ops,
            sleeps_per_op: self.sleeps as f64 / ops,
            switches_per_op: self.switches as f64 / ops,
            jain: jain(&per_task),
            cpu: CpuSplit {
                useful: f(self.acct[Acct::Useful as usize]),
                spinning: f(self.acct[Acct::Spin as usize]),
                faults: f(self.acct[Acct::Fault as usize]),
                kernel: f(self.acct[Acct::Kernel as usize]),
                scheduler: f(self.acct[Acct::Sched as usize]),
                idle: (1.0 - busy as f64 / total).max(0.0),
            },
            events: self.events,
        }
    }
}

fn jain(xs: &[f64]) -> f64 {
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if s2 == 0.0 {
        return 1.0;
    }
    s * s / (xs.len() as f64 * s2)
}

/// Checks the parameters a run cannot work with.
pub fn validate(p: &Params) -> Result<(), String> {
    if p.cpus == 0 || p.cpus > 4096 {
        return Err(format!("--cpus {}: 1..4096", p.cpus));
    }
    if p.workers == 0 || p.workers > 100_000 {
        return Err(format!("--workers {}: 1..100000", p.workers));
    }
    if p.hz == 0 || p.hz > 10_000 {
        return Err(format!("--hz {}: 1..10000", p.hz));
    }
    if p.duration_ns == 0 {
        return Err("--duration: more than 0".into());
    }
    if !(0.0..=1.0).contains(&p.fault_block_p) {
        return Err(format!("--fault-block-p {}: 0..1", p.fault_block_p));
    }
    if p.adaptive_park_min_ns == 0 || p.adaptive_park_max_ns < p.adaptive_park_min_ns {
        return Err(format!(
            "adaptive_park_min_ns {} / adaptive_park_max_ns {}: min more than 0, max at least min",
            p.adaptive_park_min_ns, p.adaptive_park_max_ns
        ));
    }
    if p.descriptors < 1024 {
        return Err(format!("--descriptors {}: at least 1024", p.descriptors));
    }
    Ok(())
}

/// Runs the model.
pub fn simulate(p: &Params) -> Result<Outcome, String> {
    validate(p)?;
    Ok(Sim::new(p.clone()).run())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quick(model: Model, pages: Pages, cpus: u32, workers: u32) -> Outcome {
        simulate(&Params {
            model,
            pages,
            cpus,
            workers,
            duration_ns: 200_000_000,
            warmup_ns: 20_000_000,
            ..Params::default()
        })
        .unwrap()
    }

    #[test]
    fn base_slice_follows_the_formula() {
        assert_eq!(base_slice_ns(1), 700_000);
        assert_eq!(base_slice_ns(2), 1_400_000);
        assert_eq!(base_slice_ns(8), 2_800_000);
        assert_eq!(base_slice_ns(96), 2_800_000);
    }

    #[test]
    fn same_seed_same_outcome_other_seed_other_outcome() {
        let a = quick(Model::Lazy, Pages::P4k, 4, 32);
        let b = quick(Model::Lazy, Pages::P4k, 4, 32);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        let c = simulate(&Params {
            seed: 2,
            model: Model::Lazy,
            cpus: 4,
            workers: 32,
            duration_ns: 200_000_000,
            warmup_ns: 20_000_000,
            ..Params::default()
        })
        .unwrap();
        assert_ne!(a.ops, c.ops);
    }

    #[test]
    fn line_contention_slows_holds_only_where_other_spinners_run() {
        let run = |cpus: u32, line_ns: u64| {
            simulate(&Params {
                cpus,
                workers: 8 * cpus,
                pages: Pages::P2m,
                line_ns,
                duration_ns: 100_000_000,
                warmup_ns: 10_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        // Two CPUs: at a handoff one runs the releaser, the other the new holder; nobody else spins.
        let (a, b) = (run(2, 0), run(2, 500));
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        );
        // Eight CPUs: up to six other spinners poll the line at every handoff.
        let (c, d) = (run(8, 0), run(8, 500));
        assert!(
            d.hold_ns.p50 >= c.hold_ns.p50 + 500,
            "hold p50 {} -> {}",
            c.hold_ns.p50,
            d.hold_ns.p50
        );
        assert!(
            d.ops_per_s < 0.8 * c.ops_per_s,
            "{} -> {}",
            c.ops_per_s,
            d.ops_per_s
        );
    }

    /// Seed 000's shape (96 CPUs, 1,024 backends, the txn workload, 4 KB pages) with the seed host's costs
    /// of GUIDE.md "Bar 1 on the seed's host".
    fn seed_txn(model: Model, delayed_dequeue: bool) -> Outcome {
        simulate(&Params {
            cpus: 96,
            workers: 1024,
            workload: Workload::Txn,
            model,
            delayed_dequeue,
            fault_4k_ns: 1500,
            spin_ns: 500,
            duration_ns: 200_000_000,
            warmup_ns: 50_000_000,
            ..Params::default()
        })
        .unwrap()
    }

    #[test]
    fn with_delayed_dequeue_lazy_preempts_more_holders_than_none() {
        // A slice counted from the switch-in never runs out for backends that sleep every statement:
        // nobody is preempted, and the two models run the same schedule.
        let (n, l) = (seed_txn(Model::None, false), seed_txn(Model::Lazy, false));
        assert_eq!((n.lhp_per_s, l.lhp_per_s), (0.0, 0.0));
        assert_eq!(n.ops, l.ops);
        // Counted across short sleeps, slices run out; noticed at a remote enqueue, `none` preempts at
        // once (an IPI, mostly outside the lock) and `lazy` at the next return to user, often the fault
        // inside the critical section.
        let (n, l) = (seed_txn(Model::None, true), seed_txn(Model::Lazy, true));
        assert!(n.lhp_per_s > 0.0, "none: {}", n.lhp_per_s);
        assert!(
            l.lhp_per_s > 1.3 * n.lhp_per_s,
            "holder preemptions none {} lazy {}",
            n.lhp_per_s,
            l.lhp_per_s
        );
        let (tn, tl) = (n.txn_per_s.unwrap(), l.txn_per_s.unwrap());
        assert!(tl < 0.7 * tn, "tx/s none {tn} lazy {tl}");
        assert!(l.cpu.spinning > n.cpu.spinning);
    }

    #[test]
    fn a_wake_sent_to_an_idle_cpu_costs_the_futex_releaser() {
        let run = |lock: LockKind, futex_wake_idle_ns: u64| {
            simulate(&Params {
                lock,
                workers: 2,
                futex_wake_idle_ns,
                duration_ns: 100_000_000,
                warmup_ns: 10_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        // Two futex workers on two CPUs: the waiter sleeps on an otherwise idle CPU, so most releases
        // pay for the IPI.
        let (a, b) = (run(LockKind::Futex, 0), run(LockKind::Futex, 10_000));
        assert!(
            b.ops_per_s < 0.9 * a.ops_per_s,
            "{} -> {}",
            a.ops_per_s,
            b.ops_per_s
        );
        // pg never calls futex_wake.
        let (c, d) = (run(LockKind::Pg, 0), run(LockKind::Pg, 10_000));
        assert_eq!(c.ops, d.ops);
    }

    #[test]
    fn cpu_time_adds_up_and_one_worker_never_waits() {
        let o = quick(Model::None, Pages::P2m, 2, 1);
        let s = &o.cpu;
        let sum = s.useful + s.spinning + s.faults + s.kernel + s.scheduler + s.idle;
        assert!((sum - 1.0).abs() < 1e-6, "{s:?}");
        assert!(s.idle > 0.45, "one worker on two CPUs: {s:?}");
        assert_eq!(o.acquire_ns.p99, 1, "no contention with one worker");
        assert_eq!(o.lhp_per_s, 0.0);
        // One worker: ops/s = 1e9 / per-op time.
        let per_op = 1000.0 + 460.0 + 200.0;
        assert!(
            (o.ops_per_s - 1e9 / per_op).abs() / (1e9 / per_op) < 0.05,
            "{}",
            o.ops_per_s
        );
    }

    #[test]
    fn txn_workload_counts_transactions_and_client_round_trips() {
        let run = |pages, model| {
            simulate(&Params {
                workload: Workload::Txn,
                model,
                pages,
                cpus: 4,
                workers: 64,
                duration_ns: 200_000_000,
                warmup_ns: 20_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        let a = run(Pages::P4k, Model::None);
        let tps = a.txn_per_s.expect("txn reports transactions");
        // Two allocations (lock operations) per transaction on average.
        let per_tx = a.ops_per_s / tps;
        assert!((per_tx - 2.0).abs() < 0.2, "{per_tx}");
        // 64 backends on 4 CPUs, ~0.93 ms of CPU per transaction: CPU-bound near 4 / 0.93 ms.
        assert!(tps > 2500.0 && tps < 4500.0, "{tps}");
        // In order pops by 64 backends: every block (8 per 64 KB fault-around group) is a first touch for
        // its backend on 4 KB pages, and one descriptor read in 16 (1,024 per group); on 2 MB pages a
        // backend maps each 2 MB page of blocks once per 256 buffers handed out.
        let b = run(Pages::P2m, Model::None);
        assert!(
            a.minflt_per_op > 1.0 && a.minflt_per_op < 1.2,
            "{}",
            a.minflt_per_op
        );
        assert!(b.minflt_per_op < a.minflt_per_op, "{}", b.minflt_per_op);
        assert!(
            a.hold_ns.p50 > b.hold_ns.p50,
            "faults under the lock on 4 KB pages"
        );
        // The lock workload has no transactions.
        assert!(quick(Model::None, Pages::P2m, 2, 4).txn_per_s.is_none());
        // Deterministic like the rest.
        assert_eq!(
            serde_json::to_string(&run(Pages::P4k, Model::Lazy)).unwrap(),
            serde_json::to_string(&run(Pages::P4k, Model::Lazy)).unwrap()
        );
    }

    #[test]
    fn faults_show_on_4k_only_and_cost_throughput() {
        let a = quick(Model::None, Pages::P4k, 2, 8);
        let b = quick(Model::None, Pages::P2m, 2, 8);
        assert!(
            a.minflt_per_op > 0.05 && b.minflt_per_op < 0.01,
            "{} {}",
            a.minflt_per_op,
            b.minflt_per_op
        );
        assert!(a.ops_per_s < b.ops_per_s);
        assert!(a.cpu.faults > 0.0 && b.cpu.faults < a.cpu.faults);
    }

    /// Measured virtual time of `holder_asleep`, ns.
    const ASLEEP_NS: u64 = 300_000_000;

    /// Every 4 KB fault under the lock sleeps 2 ms in the fault path: the holder is off both CPUs.
    fn holder_asleep(lock: LockKind) -> Outcome {
        simulate(&Params {
            lock,
            cpus: 2,
            workers: 8,
            fault_block_p: 1.0,
            fault_block_ns: 2_000_000,
            duration_ns: ASLEEP_NS,
            warmup_ns: 30_000_000,
            ..Params::default()
        })
        .unwrap()
    }

    #[test]
    fn adaptive_spends_at_most_a_budget_per_spinner_on_a_stalled_hold() {
        let p = Params::default();
        let a = holder_asleep(LockKind::Adaptive);
        let stalled = a.stalled_per_mop * a.ops as f64 / 1e6;
        assert!(stalled > 10.0, "the holds must stall: {a:?}");
        let spun_ns = a.cpu.spinning * ASLEEP_NS as f64 * 2.0;
        // At most one spinner per CPU (2 here), each for one budget, then STALLED parks the rest.
        let per_hold = spun_ns / stalled;
        assert!(
            per_hold > 0.0 && per_hold <= 2.0 * p.adaptive_spin_ns as f64,
            "{per_hold} ns of spinning per stalled hold"
        );
        assert!(
            a.sleeps_per_op > 0.5,
            "the waiters park: {}",
            a.sleeps_per_op
        );
        // It still gets work done, and deterministically.
        assert!(a.ops > 100);
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&holder_asleep(LockKind::Adaptive)).unwrap()
        );
    }

    #[test]
    fn adaptive_with_the_slice_extension_is_not_preempted_while_holding() {
        let run = |adaptive_rseq| {
            simulate(&Params {
                workload: Workload::Txn,
                lock: LockKind::Adaptive,
                model: Model::Lazy,
                cpus: 8,
                workers: 128,
                spin_ns: 300,
                wakeup_preempt_after_ns: Some(0),
                adaptive_rseq,
                duration_ns: 200_000_000,
                warmup_ns: 20_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        let without = run(false);
        let with = run(true);
        assert!(without.lhp_per_s > 100.0, "{}", without.lhp_per_s);
        assert!(
            with.lhp_per_s < without.lhp_per_s / 10.0,
            "{} vs {}",
            with.lhp_per_s,
            without.lhp_per_s
        );
    }

    #[test]
    fn adaptive_without_faults_spins_and_hardly_parks() {
        let run = |lock| {
            simulate(&Params {
                lock,
                pages: Pages::P2m,
                cpus: 2,
                workers: 2,
                duration_ns: 200_000_000,
                warmup_ns: 20_000_000,
                ..Params::default()
            })
            .unwrap()
        };
        // Two workers on two CPUs: nobody is ever descheduled while holding, so a waiter spins and wins.
        let a = run(LockKind::Adaptive);
        assert!(a.sleeps_per_op < 0.001, "{}", a.sleeps_per_op);
        assert!(a.cpu.spinning > 0.0);
        // The futex mutex sleeps at once instead and pays for it in switches.
        let f = run(LockKind::Futex);
        assert!(f.sleeps_per_op > 10.0 * a.sleeps_per_op.max(1e-4));
    }
}
