//! Host guards: every change a run makes to the host goes through a guard here that undoes it on every
//! exit path (return, error, panic, and the stop signals, which set [`osutil::stop`]'s flag instead of
//! killing the process, so that a run unwinds through its guards).
//!
//! - [`hugetlb_pool`]: a hugetlb pool grown by a run's share ([`hugetlb_pool::PoolGuard`]) and given back on
//!   drop; concurrent runs each hold their own share of one record under [`record_dir`], and a run that died
//!   without giving its share back (SIGKILL, power loss) is undone by the next
//!   ([`hugetlb_pool::recover_stale_pools`]). `hugepages --apply` grows the operator's part through it too.
//! - [`preempt`]: the kernel's preemption model switched for a run and switched back, with the same kind of
//!   record.
//! - [`workers`]: worker processes forked for a bench, reaped, and killed on drop (no exit path leaves one
//!   behind). Child processes of other programs are `osutil::child`'s.
//!
//! The word "pool" here is always the hugetlb pool (`report`'s pooled runs are another thing).

#![warn(clippy::undocumented_unsafe_blocks)]

pub mod hugetlb_pool;
pub mod preempt;
pub mod workers;

use std::path::PathBuf;

/// Where crash records live: `$PREEMPTLAB_STATE_DIR`, else `/run/preemptlab`.
pub fn record_dir() -> PathBuf {
    std::env::var_os("PREEMPTLAB_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/preemptlab"))
}
