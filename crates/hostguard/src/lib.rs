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

use std::path::{Path, PathBuf};

/// Where crash records live: [`osutil::run_dir`] (`$PREEMPTLAB_STATE_DIR`, else `/run/preemptlab`).
pub fn record_dir() -> PathBuf {
    osutil::run_dir()
}

/// An error when something other than a regular file is at a record's `path` (a FIFO, a socket, a device, a
/// directory): reading a FIFO there waited for a writer for ever, and the stop signals could not end the
/// run (issue 46 item 7). None when it is a regular file or nothing is there.
fn not_a_record(path: &Path) -> Option<std::io::Error> {
    let ft = std::fs::metadata(path).ok()?.file_type();
    (!ft.is_file()).then(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{}, not a regular file: preemptlab keeps its record there; remove it",
                osutil::input::kind_of(ft)
            ),
        )
    })
}

/// The text of the record at `path`; None when there is none. Read only when it is a regular file, opened
/// without blocking ([`osutil::input::read_regular`]); anything else is an error ([`not_a_record`]).
fn read_record(path: &Path) -> std::io::Result<Option<String>> {
    if let Some(e) = not_a_record(path) {
        return Err(e);
    }
    match osutil::input::read_regular(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(not_a_record(path).unwrap_or(e)),
    }
}

/// Opens (creating it when missing) the lock file at `path` for `flock`: never blocking, and only a regular
/// file ([`not_a_record`]): opening a FIFO for writing waits for a reader.
fn open_lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(e) = not_a_record(path) {
        return Err(e);
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    match f.metadata()?.file_type().is_file() {
        true => Ok(f),
        false => Err(not_a_record(path).unwrap_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file")
        })),
    }
}
