//! The model's records: its parameters (with their defaults, this project's measured costs), the axes it
//! takes (preemption model, lock, page size, workload: `axes::model`'s), one run's outcome, and the costs a bench result
//! gives it. Plain serde types: `sim` runs them and depends on this crate, so the schema depends on no
//! engine.

use serde::{Deserialize, Serialize};
use stats::Percentiles as Pcts;

/// The adaptive lock's spin budget, ns: the real lock's `SPIN_BUDGET` (lockparams), the model's default.
pub const ADAPTIVE_SPIN_NS: u64 = lockparams::adaptive::SPIN_BUDGET.as_nanos() as u64;
/// The adaptive lock's shortest park, ns (`PARK_TIMEOUT_MIN`).
pub const ADAPTIVE_PARK_MIN_NS: u64 = lockparams::adaptive::PARK_TIMEOUT_MIN.as_nanos() as u64;
/// The adaptive lock's longest park, ns (`PARK_TIMEOUT_MAX`).
pub const ADAPTIVE_PARK_MAX_NS: u64 = lockparams::adaptive::PARK_TIMEOUT_MAX.as_nanos() as u64;

/// The model's choices: one home for them, `axes::model` (the command line, the schema and the model
/// share them).
use axes::model::{LockKind, Model, Pages, Workload};

/// How a `txn` backend gets a buffer for a block that is not in shared buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BufferStrategy {
    /// PostgreSQL 9.5-18: pop the free list under `buffer_strategy_lock`, reading the head's descriptor
    /// inside the lock.
    #[default]
    Freelist,
    /// PostgreSQL 19: no free list; an atomic tick of the clock hand, the victim's descriptor read with no
    /// lock held (the lock only on the hand's wraparound, once per pass over all buffers: not modelled).
    Clocksweep,
}

/// Everything the model takes. Costs default to this project's measurements (docs/references.md#dev-machine-costs, docs/model.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Params {
    // The run.
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
    // The operation (the `lock` workload's; `txn` uses `work_ns` per chunk too).
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
    // Memory and faults, and replacing workers (fresh page tables).
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
    // Lock costs.
    /// One spin-loop iteration (`pause` plus the test), ns.
    pub spin_ns: u64,
    /// One cache-line transfer between two CPUs (the lock word handed from the releaser to the next
    /// holder), ns. `bench lock` measures it (`costs.line_transfer_ns`); it also prices `line_ns` and
    /// `spin_line_ns` when they are unset and, in `txn`, the struct-page lines a shared fault pulls from
    /// other CPUs.
    pub lock_transfer_ns: u64,
    /// What every other running spinner adds to a handover, ns: the lock word and the free-list head share
    /// one cache line, which the spinners keep reading, so the new holder's fetch of it and its writes to it
    /// wait behind their re-reads, served one at a time (a TTAS handoff's cost grows linearly with the
    /// spinners, docs/references.md#non-scalable-locks). None: one line transfer (`lock_transfer_ns`) per
    /// spinner. It cannot show on 2 CPUs, where no other spinner runs at a handoff.
    pub line_ns: Option<u64>,
    /// What each running `pg` or `rseq` spinner's re-read of the lock's line costs after a write to it, ns:
    /// PostgreSQL's spin loop reads before its test-and-set, so a spinner hits its own copy until someone
    /// writes the line (an arriving backend, a handover); then the spinners' re-reads are served one at a
    /// time. None: one line transfer (`lock_transfer_ns`); 0: an iteration costs `spin_ns` whatever the
    /// writes. Before 2026-11-26 it was charged on every iteration per other running spinner. See the sim's
    /// `lock::spin`.
    pub spin_line_ns: Option<u64>,
    /// What one write of the lock's line costs a running `pg` or `rseq` spinner's iteration clock per place in
    /// the queue of re-reads (the mean spinner waits (n + 1) / 2 places with n spinning), ns: what `bench
    /// lock` measures as the write stall (`costs.line_crowd`), which is less than a transfer, since the
    /// spinner's `pause` hides part of its miss. None: `spin_line_ns`. Used only without `line_fifo`, where
    /// the line's requests are served `spin_line_ns` each. Left out of a result when None, so files and hashes
    /// from before it are unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reread_ns: Option<u64>,
    /// `pg`, `rseq`: the lock's line as one server, one transfer (`spin_line_ns`, one line transfer when
    /// unset) at a time, first come first served, since the lock word, the free-list head and
    /// `numBufferAllocs` share it (src/backend/storage/buffer/freelist.c). Every write queues the running
    /// spinners' re-reads; the arriving backend's add and test-and-set (`txn`), the release, the herd of
    /// test-and-sets it sets off (every spinner that reads it free tries the swap; `TAS_SPIN`,
    /// src/include/storage/s_lock.h), the new holder's read of the head and its write of it all wait their
    /// turn, so a hold lengthens with the crowd (docs/model-calibration.md, "The line as a queue"). Replaces `line_ns`.
    /// false: a handover alone pays `line_ns` per other spinner (the model before 2026-11-27); left out of
    /// a result when false, so files and hashes from before it are unchanged.
    #[serde(skip_serializing_if = "is_false")]
    pub line_fifo: bool,
    /// No longer modelled (refused when true): the switch that dropped the per-iteration crowd cost while the
    /// holder was off its CPU, which since 2026-11-26 the crowd pays only when the line is written.
    pub quiet_line_off_cpu: bool,
    // Kernel costs.
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
    // The fault-path hypothesis.
    /// Hypothesis knob (docs/notes/2026-11-22-sim-lock-workload-regression.md): the probability that a 4 KB fault blocks on a sleeping lock in the fault
    /// path (woken by another CPU). 0 in the defaults.
    pub fault_block_p: f64,
    /// How long such a block lasts before the wakeup, ns.
    pub fault_block_ns: u64,
    // Lock tuning: `rseq` and `adaptive`.
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
    // The scheduler.
    /// EEVDF as kernel/sched/fair.c runs it (6.12+): a task is eligible while it has received no more
    /// than its CPU's average virtual runtime, the eligible task with the earliest virtual deadline runs,
    /// a woken task keeps its lag and preempts the running one when it is the one EEVDF would pick and
    /// the running one has used up its protected slice or is not eligible, and an ineligible sleeper stays
    /// queued (delayed dequeue) and wakes where it slept. Off by default: at the reported host it misses
    /// two of issue 28's three bars (docs/model-calibration.md, "EEVDF's rules"). false, the default: the lowest
    /// virtual runtime runs, a woken task is placed half a slice behind the running one and preempts only
    /// after that one has run its protected slice.
    pub eevdf: bool,
    /// A woken task preempts the running one only after that one has run this long since it was switched
    /// in (RUN_TO_PARITY protects the current task's slice); None: the base slice (`eevdf`: until its
    /// virtual deadline).
    pub wakeup_preempt_after_ns: Option<u64>,
    /// EEVDF's delayed dequeue (Linux 6.12+): a task that goes to sleep owing time stays queued until it
    /// owes none, and a wakeup before then keeps its deadline, so a slice is used up across short sleeps;
    /// the expiry is noticed at the tick and whenever a task is enqueued on the CPU (`update_curr`), and the
    /// reschedule it asks for follows the model (an IPI to a remote CPU, or only the lazy flag); the
    /// default. false: a slice counts from the switch-in and only the tick notices it (the model before).
    pub delayed_dequeue: bool,
    /// `delayed_dequeue` without `eevdf`: a sleep shorter than this keeps the task's deadline, ns. None:
    /// EEVDF's arithmetic with equal weights: a task that ran `burst` with n - 1 others queued is owed
    /// nothing again after burst x (n - 1). (`eevdf` tracks the lag itself.)
    pub delayed_dequeue_window_ns: Option<u64>,
    /// Without `eevdf`: how far behind the running task's virtual runtime a woken task may be placed, ns
    /// (CFS's sleeper credit). None: half a slice (the model before 2026-11-26); 0: no credit, a woken task
    /// keeps its own virtual runtime or takes the running task's, whichever is later (EEVDF's placement of
    /// a task with no lag).
    pub sleeper_credit_ns: Option<u64>,
    /// Every CPU's tick at the same instant, as the kernel has them unless booted with `skew_tick=1`
    /// (kernel/time/tick-sched.c, `tick_setup_sched_timer`: each CPU's tick timer expires on the same
    /// jiffy boundary; the skew offsets them over half a tick). false: the ticks staggered evenly across a
    /// whole tick (the model before 2026-11-27). Left out of a result when false.
    #[serde(skip_serializing_if = "is_false")]
    pub ticks_aligned: bool,
    // The workload.
    /// What the workers run.
    pub workload: Workload,
    /// `txn`: statements per transaction (pgbench simple-update: BEGIN, UPDATE, SELECT, INSERT, END).
    pub txn_stmts: u32,
    /// `txn`: buffer allocations (free-list pops) per transaction, spread over its statements.
    pub txn_allocs: f64,
    /// `txn`: backend user time per statement (parse, plan, execute), ns.
    pub stmt_ns: u64,
    /// `txn` on 4 KB pages: a statement's extra CPU outside the lock against 2 MB pages (TLB misses and
    /// page walks over the buffer pool, first touches of the pages it reads besides the allocated
    /// buffer's), ns. 0: a statement costs the same on both page sizes (the model before 2026-11-26).
    pub stmt_4k_ns: u64,
    /// `txn` with no client threads (`txn_client_threads` 0): the client's part of a statement's round
    /// trip, ns, during which the backend sleeps and no CPU is used for it.
    pub client_ns: u64,
    /// `txn`: reading the allocated buffer's block from the page cache (pread of 8 KB), ns of kernel time.
    pub read_ns: u64,
    /// `txn`: pgbench's threads (`-j`), tasks on the same CPUs as the backends, each serving the
    /// connections of `workers / threads` backends: a backend's result wakes its thread, which spends
    /// `client_stmt_ns` on it and sends the next statement, which wakes the backend. None: one per CPU (the
    /// April 2026 report ran 96 threads on 96 vCPUs); 0: no client tasks, a fixed `client_ns` sleep instead
    /// (the model before client threads).
    pub txn_client_threads: Option<u32>,
    /// `txn`: pgbench's CPU per statement (receive and parse the result, build and send the next statement),
    /// ns.
    pub client_stmt_ns: u64,
    /// `txn`: PostgreSQL's buffer allocation. `freelist` (9.5-18): pop the free list under
    /// `buffer_strategy_lock` while it is not empty (the model's `txn` always is: the buffer pool is
    /// filling); `clocksweep` (19, no free list): an atomic tick of the clock hand on the strategy line,
    /// then the victim's descriptor read with no lock held.
    pub buffer_strategy: BufferStrategy,
    /// `txn`: each backend takes its own minor fault the first time it touches a fault group of the shared
    /// segment it has not mapped (page tables are per process): the blocks of cached buffers it reads, the
    /// index's inner pages, their descriptors, the buffer-mapping hash table and the WAL buffers, with the
    /// probability that it has not mapped the group yet; `fault_4k_ns` (a fault-around group) or
    /// `fault_2m_map_ns` each, kernel time at the statement's start (docs/model.md, "First touches per
    /// backend"). false: faults only on allocations (the model before 2026-11-26, and what a result file
    /// written before then, which lacks the field, ran).
    #[serde(default = "before_first_touches")]
    pub txn_first_touches: bool,
    /// `txn_first_touches`: transactions each backend ran before the simulated run, which decide how much
    /// of the segment it has mapped. 0: a fresh postmaster, the run's start (as the free list the cell pops).
    pub txn_backend_txns: u64,
}

/// Leaves a switch that is off out of a result.
fn is_false(b: &bool) -> bool {
    !*b
}

/// `txn_first_touches` of a result file written before it existed.
fn before_first_touches() -> bool {
    false
}

impl Params {
    /// Every parameter by name, as `--set` addresses them: the serialized form with the switches a result
    /// leaves out when off (`line_fifo`, `ticks_aligned`) put back.
    pub fn to_json_all(&self) -> serde_json::Value {
        let mut j = serde_json::to_value(self).expect("params serialize");
        if let Some(obj) = j.as_object_mut() {
            obj.insert("line_fifo".into(), serde_json::Value::Bool(self.line_fifo));
            obj.insert(
                "reread_ns".into(),
                self.reread_ns.map_or(serde_json::Value::Null, Into::into),
            );
            obj.insert(
                "ticks_aligned".into(),
                serde_json::Value::Bool(self.ticks_aligned),
            );
        }
        j
    }
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
            line_ns: None,
            spin_line_ns: None,
            reread_ns: None,
            line_fifo: false,
            quiet_line_off_cpu: false,
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
            adaptive_spin_ns: ADAPTIVE_SPIN_NS,
            adaptive_park_min_ns: ADAPTIVE_PARK_MIN_NS,
            adaptive_park_max_ns: ADAPTIVE_PARK_MAX_NS,
            adaptive_rseq: false,
            eevdf: false,
            wakeup_preempt_after_ns: None,
            delayed_dequeue: true,
            delayed_dequeue_window_ns: None,
            sleeper_credit_ns: None,
            ticks_aligned: false,
            workload: Workload::Lock,
            txn_stmts: 5,
            txn_allocs: 2.0,
            stmt_ns: 82_000,
            stmt_4k_ns: 0,
            client_ns: 100_000,
            read_ns: 3000,
            txn_client_threads: None,
            client_stmt_ns: 15_000,
            buffer_strategy: BufferStrategy::Freelist,
            txn_first_touches: true,
            txn_backend_txns: 0,
        }
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

/// The lock's cache line under a crowd of spinners, at one crowd size (`bench lock`'s costs,
/// `lab::lock::crowd`): processes pinned one to a CPU, `spinners` of them besides the one that writes.
/// Each figure is the median over timed windows, with the windows' 10th and 90th percentiles, ns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LineCrowd {
    /// The CPUs that read the line besides the writer: in the handover, the processes waiting while one
    /// holds the lock (`spinners` + 1 contend in all); in the write stall, the spinners on a held lock.
    pub spinners: u32,
    /// One handover of a test-and-test-and-set lock whose every waiter spins on its line (PostgreSQL's
    /// `TAS_SPIN`: read until free, then swap): a window's length over the acquisitions in it, where no
    /// process takes the lock twice in a row, so each acquisition moves the line from one CPU to another.
    pub handover_ns: f64,
    /// The 10th percentile of the handover over the windows.
    pub handover_p10_ns: f64,
    /// The 90th percentile of the handover over the windows.
    pub handover_p90_ns: f64,
    /// What one write of the line (an atomic add to another word of it, as an arriving backend's add to
    /// `numBufferAllocs`) costs the mean spinner on a held lock: the share of its spin iterations lost while
    /// another CPU writes, over the writes, against the next window without writes.
    pub write_stall_ns: f64,
    /// The 10th percentile of the write stall over the pairs of windows.
    pub write_stall_p10_ns: f64,
    /// The 90th percentile of the write stall over the pairs of windows.
    pub write_stall_p90_ns: f64,
    /// The distinct cores among the `spinners` + 1 CPUs used (one CPU per core is taken first, so fewer
    /// than `spinners` + 1 means SMT siblings, which share a core's caches, are among them). Null where the
    /// CPU topology could not be read, and in results written before it was recorded.
    #[serde(default)]
    pub cores: Option<u32>,
}

/// What `bench lock` measures before its cells, each the median of many repetitions, ns. The minor fault
/// is not here: the result's `fault_cost` has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Costs {
    /// One iteration of the `pg` lock's spin loop on a held lock: the test (a load of the lock word) and
    /// `pause`.
    pub spin_ns: f64,
    /// A syscall round trip (`getppid`).
    pub syscall_ns: f64,
    /// Two processes pinned to one CPU handing a futex back and forth: half a round trip, which is one
    /// `futex_wake` of a waiter on the same CPU, one `futex_wait` and one context switch.
    pub switch_half_round_trip_ns: f64,
    /// `futex_wake` with nobody queued.
    pub futex_wake_nobody_ns: f64,
    /// What `futex_wake` costs the waker when it wakes a task sleeping on another, idle CPU
    /// (`shmlock::wake_cost`). Null where the bench's process may use only one CPU.
    pub futex_wake_remote_ns: Option<f64>,
    /// Mapping an existing (zeroed) 2 MB hugetlb page in a new process: a fresh process's first touch of
    /// it. Null when the run had no hugetlb-2m cells that could run (no pool with free pages), and in
    /// results written before it was measured.
    #[serde(default)]
    pub fault_2m_map_ns: Option<f64>,
    /// A fresh process's first read of populated 4 KB shared memory: a minor fault that maps the page's
    /// fault-around group (64 KB), as a worker's first read of a descriptor does. Null in results written
    /// before it was measured (the write fault of `fault_cost`, one page, stands in then).
    #[serde(default)]
    pub fault_4k_read_ns: Option<f64>,
    /// The handover of one cache line between two CPUs (two processes pinned to two CPUs take turns on a
    /// word in shared memory; half a round trip): the median over timed batches, and the batches' 10th and
    /// 90th percentiles. Null on one CPU, and in results written before it was measured.
    #[serde(default)]
    pub line_transfer_ns: Option<f64>,
    /// The 10th percentile of the handover over the timed batches.
    #[serde(default)]
    pub line_transfer_p10_ns: Option<f64>,
    /// The 90th percentile of the handover over the timed batches.
    #[serde(default)]
    pub line_transfer_p90_ns: Option<f64>,
    /// The lock's line under crowds of spinners, one entry per crowd size (1, 2, 4, ... up to 64 spinners,
    /// and one fewer than the CPUs): what a handover and a write cost as the crowd grows. Empty on one CPU,
    /// and in results written before it was measured (2026-11-27).
    #[serde(default)]
    pub line_crowd: Vec<LineCrowd>,
}

/// One parameter set from a measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Taken {
    /// The parameter (`spec.params`' name).
    pub param: &'static str,
    /// Its value.
    pub value: u64,
    /// The measurement it comes from, as the lock result names it.
    pub from: &'static str,
}

/// The operation as one uncontended worker ran it: `bench lock`'s `pg` cells with a single worker, medians
/// over their repetitions, ns. The model's per-operation user costs (`cs_ns`, `op_ns`, `access_4k_ns`)
/// were calibrated on the development machine; a machine (or a guest under software emulation) that runs
/// the same code several times slower needs its own, and these cells carry them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Uncontended {
    /// The bench's work outside the lock per operation (`spec.work_ns`).
    pub work_ns: u64,
    /// A lone worker's time per operation on 2 MB pages (no faults to speak of): its wall time, all of
    /// which its CPU spends on the operation (its rusage can miss part of it: 1.45-1.51x less in the TCG
    /// guests of docs/results/vm).
    pub op_2m_ns: f64,
    /// Hold time p50 on 2 MB pages: the pop under the lock, nobody to hand the line over to.
    pub hold_2m_p50_ns: f64,
    /// A lone worker's time per operation on 4 KB pages and its minor faults per operation, when measured.
    pub op_4k: Option<(f64, f64)>,
}
