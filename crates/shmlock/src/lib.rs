//! Process-shared locks in shared memory, for reproducing and beating lock-holder preemption.
//!
//! Every lock is a `#[repr(C)]`, cache-line-aligned struct that works when placed in MAP_SHARED memory and
//! used from fork()ed processes (or threads). The all-zero bit pattern is the unlocked state, except for
//! `pthread`, which needs `init`. Waiters keep per-process state (PostgreSQL's `spins_per_delay`, an MCS
//! queue node, an RNG) in a `Waiter` value.
//!
//! | name | algorithm | module |
//! |---|---|---|
//! | `pg` | PostgreSQL's s_lock: TAS, TTAS spin with `pause`, adaptive spins_per_delay, 1 ms..1 s randomized sleeps | [`pg`] |
//! | `tas` | test-and-set, spin forever | [`tas`] |
//! | `ttas` | test-and-test-and-set with bounded exponential backoff | [`ttas`] |
//! | `ticket` | FIFO ticket lock | [`ticket`] |
//! | `mcs` | MCS queue lock, nodes in shared memory | [`mcs`] |
//! | `futex` | three-state futex mutex (Drepper, "Futexes Are Tricky", mutex 3; docs/references.md#futex-mutex) | [`futex_mutex`] |
//! | `pthread` | `PTHREAD_PROCESS_SHARED` glibc mutex | [`pthread`] |
//! | `adaptive` | this project's design: time-bounded spinning in at most one slot per CPU (stale slots taken over), no yield, then park; no handoff | [`adaptive`] |
//! | `rseq` | `pg` whose holder requests an rseq time-slice extension (Linux 7.0+) | [`rseq`] |

pub mod adaptive;
pub mod futex;
pub mod futex_mutex;
pub mod mcs;
pub mod pg;
pub mod pthread;
pub mod rseq;
pub mod shm;
pub mod spin;
pub mod tas;
pub mod ticket;
pub mod ttas;
pub mod wake_cost;

/// The size of a cache line assumed for padding (64 bytes on x86_64 and most arm64 parts).
pub const CACHE_LINE: usize = 64;

/// The most waiters a lock can serve at once (MCS nodes are preallocated for this many).
pub const MAX_WAITERS: usize = 1024;

/// What one acquisition cost the waiter.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    /// Spin iterations (relax instructions or failed polls) before the lock was taken.
    pub spins: u64,
    /// Times the waiter slept (a `pg_usleep` for `pg`, a futex wait for the futex-based locks).
    pub sleeps: u32,
}

/// A lock that lives in shared memory.
pub trait RawLock: Sync {
    /// Per-process (or per-thread) waiter state.
    type Waiter: Send;

    /// Makes the lock usable in place.
    ///
    /// # Safety
    /// `ptr` must point to writable, suitably aligned, zero-filled memory of `size_of::<Self>()` bytes that
    /// no other process or thread uses yet.
    unsafe fn init(_ptr: *mut Self) -> Result<(), InitError> {
        Ok(())
    }

    /// Waiter state for worker `id` (unique among concurrent users, `< MAX_WAITERS`).
    fn waiter(&self, id: u32) -> Self::Waiter;

    /// Acquires the lock.
    fn lock(&self, w: &mut Self::Waiter) -> Acquired;

    /// Releases the lock; only the holder may call it.
    fn unlock(&self, w: &mut Self::Waiter);

    /// What the rseq slice extension did for this waiter so far, for locks that request it.
    fn slice_counts(_w: &Self::Waiter) -> Option<rseqslice::SliceCounts> {
        None
    }
}

/// Why a lock could not be made usable in place: a pthread attribute or init call's error number (the
/// other locks cannot fail).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: {}", std::io::Error::from_raw_os_error(*.code))]
pub struct InitError {
    /// The call that failed.
    pub call: &'static str,
    /// The error number it returned.
    pub code: i32,
}

// The locks by command-line name: the names are `axes`' (the schema and the command line share them),
// the algorithms this crate's.
use axes::LockKind;

/// Whether this host can run the lock; the reason when not (only `rseq` depends on the kernel).
pub fn availability(kind: LockKind) -> Result<(), rseqslice::Unavailable> {
    match kind {
        LockKind::Rseq => rseqslice::probe(),
        _ => Ok(()),
    }
}

/// Runs `f` with the concrete lock type for `kind`, an `axes::LockKind` (static dispatch inside the
/// benchmark loop; the caller depends on `axes`).
#[macro_export]
macro_rules! with_lock_type {
    ($kind:expr, $L:ident => $body:expr) => {
        match $kind {
            ::axes::LockKind::Pg => {
                type $L = $crate::pg::PgSpinLock;
                $body
            }
            ::axes::LockKind::Tas => {
                type $L = $crate::tas::TasLock;
                $body
            }
            ::axes::LockKind::Ttas => {
                type $L = $crate::ttas::TtasLock;
                $body
            }
            ::axes::LockKind::Ticket => {
                type $L = $crate::ticket::TicketLock;
                $body
            }
            ::axes::LockKind::Mcs => {
                type $L = $crate::mcs::McsLock;
                $body
            }
            ::axes::LockKind::Futex => {
                type $L = $crate::futex_mutex::FutexMutex;
                $body
            }
            ::axes::LockKind::Pthread => {
                type $L = $crate::pthread::PthreadMutex;
                $body
            }
            ::axes::LockKind::Adaptive => {
                type $L = $crate::adaptive::AdaptiveLock;
                $body
            }
            ::axes::LockKind::Rseq => {
                type $L = $crate::rseq::RseqLock;
                $body
            }
        }
    };
}
