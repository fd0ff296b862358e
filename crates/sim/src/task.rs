//! A worker process: what it is doing (its phase), whether it runs, and the per-process state the locks,
//! the memory model and the workloads keep in it.

use crate::lock::pg;
use crate::metrics::Acct;
use crate::sched::base_slice_ns;
use crate::touch::STRUCTURES;
use results::model::Params;

/// What a task is doing; a phase runs as segments on a CPU.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Phase {
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
    /// `txn`: a pgbench thread handles one connection's result and sends its next statement (user time
    /// and its socket calls).
    Client,
    /// `txn`, `clocksweep`: the clock hand's atomic tick (waiting its turn on the line) and the victim's
    /// header check (user).
    Sweep,
    /// `txn`, `clocksweep`: the first-touch fault on the victim's descriptor, no lock held (kernel).
    SweepFault,
    /// `txn`: a statement's first touches of the shared segment besides its allocations (kernel; in the
    /// real system mostly under an LWLock the model does not have).
    Touch,
}

/// Where a task is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum State {
    /// On a CPU.
    Running,
    /// In a run queue.
    Runnable,
    /// Waiting for a wakeup.
    Sleeping,
}

impl Phase {
    /// Runs in kernel mode (where the preemption models differ).
    pub(crate) fn kernel(self) -> bool {
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
                | Phase::SweepFault
                | Phase::Touch
        )
    }
    /// Where its CPU time is accounted.
    pub(crate) fn acct(self) -> Acct {
        match self {
            Phase::Work | Phase::Cs | Phase::Client | Phase::Sweep => Acct::Useful,
            Phase::Spin => Acct::Spin,
            Phase::Fault | Phase::SweepFault | Phase::Touch => Acct::Fault,
            Phase::Switch => Acct::Sched,
            _ => Acct::Kernel,
        }
    }
}

/// One worker process.
#[derive(Clone, Debug)]
pub(crate) struct Task {
    /// Running, queued or asleep.
    pub(crate) state: State,
    /// What it is doing.
    pub(crate) phase: Phase,
    /// What to resume after a Switch segment.
    pub(crate) resume: Phase,
    /// What is left of the phase after a preemption (0: start it afresh), ns.
    pub(crate) remaining: u64,
    /// The CPU it runs or last ran on.
    pub(crate) cpu: u32,
    /// CPU time received, ns (equal weights: the scheduler's virtual runtime). `eevdf`: in the frame of
    /// the CPU whose queue the task is on (placement sets it from its lag).
    pub(crate) vruntime: i64,
    /// `eevdf`: the virtual deadline (the vruntime at which its request is used up), the vruntime up to
    /// which it is protected from wakeup preemption (RUN_TO_PARITY), and its lag as of its last dequeue
    /// (the CPU's average vruntime less its own, clamped).
    pub(crate) deadline: i64,
    pub(crate) vprot: i64,
    pub(crate) vlag: i64,
    /// `eevdf`: asleep but still queued on its CPU (delayed dequeue: it went to sleep not eligible).
    pub(crate) delayed: bool,
    /// `delayed_dequeue` without `eevdf`: the vruntime at which the current slice began, and when the task
    /// last slept.
    pub(crate) slice_start: i64,
    pub(crate) slept_at: u64,
    /// `delayed_dequeue`: how long after `slept_at` the task would still be queued (owing time).
    pub(crate) owes_for: u64,
    /// Pages (fault groups) this process has mapped.
    pub(crate) touched: u64,
    /// Operations since the process was (re)spawned.
    pub(crate) ops_since_spawn: u64,
    /// `pg`: s_lock's adaptive spin count, the current sleep (0: none yet in this acquisition), and
    /// whether this acquisition slept.
    pub(crate) spins_per_delay: u32,
    pub(crate) cur_delay_ns: u64,
    pub(crate) slept_this_acquire: bool,
    /// When the current acquisition and hold began, ns.
    pub(crate) acquire_start: u64,
    pub(crate) hold_start: u64,
    /// Holds the lock.
    pub(crate) holding: bool,
    /// The pending fault blocks halfway (hypothesis knob).
    pub(crate) fault_blocks: bool,
    /// `line_fifo`: the holder has still to write the free-list head after its descriptor fault.
    pub(crate) head_write_pending: bool,
    /// rseq: extension granted and not yet yielded.
    pub(crate) granted: bool,
    /// Operations done in the measured window, for fairness (Jain).
    pub(crate) ops: u64,
    /// Woken from a futex wait: retry the lock.
    pub(crate) retry: bool,
    /// `adaptive`: the current bounded sleep (0: none yet in this acquisition), the park it belongs to,
    /// and the hold this task's spin waits for.
    pub(crate) park_timeout_ns: u64,
    pub(crate) park_gen: u64,
    pub(crate) spin_hold: u64,
    /// `pg`, `rseq` counting iterations: the iteration clock when this spin's progress was last taken,
    /// and the iterations it has left.
    pub(crate) spin_mark: f64,
    pub(crate) spin_left: f64,
    /// `txn`: statements left in the transaction, allocations left in the statement, its work chunk.
    pub(crate) stmts_left: u32,
    pub(crate) allocs_left: u32,
    pub(crate) chunk_ns: u64,
    /// `txn`: the descriptor and block groups this process mapped last (the pops go in order).
    pub(crate) desc_group: u64,
    pub(crate) block_group: u64,
    /// `txn`: the buffer this process popped last.
    pub(crate) buf: u64,
    /// `txn`: a pgbench thread, not a backend.
    pub(crate) is_client: bool,
    /// `txn`, `clocksweep`: the victim's descriptor faults after the tick.
    pub(crate) sweep_faults: bool,
    /// `txn`: groups of each structure of the segment this process has mapped (`touch`), and the current
    /// statement's first-touch faults, ns.
    pub(crate) mapped: [u64; STRUCTURES],
    pub(crate) touch_ns: u64,
}

impl Task {
    /// A worker on `cpu` that starts with `first_work_ns` of work, `ops_since_spawn` operations into its
    /// life, having mapped `touched` fault groups.
    pub(crate) fn new(
        p: &Params,
        cpu: u32,
        first_work_ns: u64,
        ops_since_spawn: u64,
        touched: u64,
    ) -> Task {
        Task {
            state: State::Runnable,
            phase: Phase::Work,
            resume: Phase::Work,
            remaining: first_work_ns,
            cpu,
            vruntime: 0,
            deadline: base_slice_ns(p.cpus) as i64,
            vprot: 0,
            vlag: 0,
            delayed: false,
            slice_start: 0,
            slept_at: 0,
            owes_for: 0,
            touched,
            ops_since_spawn,
            spins_per_delay: pg::DEFAULT_SPINS_PER_DELAY,
            cur_delay_ns: 0,
            slept_this_acquire: false,
            acquire_start: 0,
            hold_start: 0,
            holding: false,
            fault_blocks: false,
            head_write_pending: false,
            granted: false,
            ops: 0,
            retry: false,
            park_timeout_ns: 0,
            park_gen: 0,
            spin_hold: 0,
            spin_mark: 0.0,
            spin_left: 0.0,
            stmts_left: p.txn_stmts.max(1),
            allocs_left: 0,
            chunk_ns: p.work_ns,
            desc_group: u64::MAX,
            block_group: u64::MAX,
            buf: 0,
            is_client: false,
            sweep_faults: false,
            mapped: [0; STRUCTURES],
            touch_ns: 0,
        }
    }
}
