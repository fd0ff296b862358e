//! The tuning constants of preemptlab's locks, in one place for the two that need them: the real locks in
//! shared memory (`shmlock`) and their discrete-event model (`sim`). A pure crate with no dependencies, so
//! the model (and the result schema that embeds its parameters) does not pull in the locks' system code.

/// PostgreSQL's s_lock (`src/backend/storage/lmgr/s_lock.c`, `src/include/storage/s_lock.h`).
pub mod pg {
    /// `DEFAULT_SPINS_PER_DELAY` (s_lock.h).
    pub const DEFAULT_SPINS_PER_DELAY: u32 = 100;
    /// `MIN_SPINS_PER_DELAY`.
    pub const MIN_SPINS_PER_DELAY: u32 = 10;
    /// `MAX_SPINS_PER_DELAY`.
    pub const MAX_SPINS_PER_DELAY: u32 = 1000;
    /// What `finish_spin_delay` adds to `spins_per_delay` after an acquisition that never slept.
    pub const SPINS_PER_DELAY_GROWTH: u32 = 100;
    /// What `finish_spin_delay` takes from `spins_per_delay` after an acquisition that slept.
    pub const SPINS_PER_DELAY_SHRINK: u32 = 1;
    /// `NUM_DELAYS`: sleeps before "stuck spinlock".
    pub const NUM_DELAYS: u32 = 1000;
    /// `MIN_DELAY_USEC`.
    pub const MIN_DELAY_USEC: u64 = 1000;
    /// `MAX_DELAY_USEC`.
    pub const MAX_DELAY_USEC: u64 = 1_000_000;
}

/// The project's `adaptive` lock: spin briefly with a few spinner slots, then park with bounded sleeps.
pub mod adaptive {
    use std::time::Duration;

    /// How long a waiter spins before parking.
    pub const SPIN_BUDGET: Duration = Duration::from_micros(50);
    /// A spinner slot older than this belongs to a spinner that was descheduled mid-spin.
    pub const STALE_SLOT: Duration = Duration::from_micros(100);
    /// Spinner slots in the lock (the cap is the smaller of this and the CPU count).
    pub const SLOTS: usize = 8;
    /// The first bounded sleep of a parked waiter.
    pub const PARK_TIMEOUT_MIN: Duration = Duration::from_micros(100);
    /// The longest bounded sleep.
    pub const PARK_TIMEOUT_MAX: Duration = Duration::from_micros(1600);
}
