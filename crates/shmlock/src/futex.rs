//! The one futex wrapper. Locks live in MAP_SHARED memory used by several processes, so every operation
//! is a *shared* futex op (no FUTEX_PRIVATE_FLAG): the kernel keys the wait queue on the physical page,
//! not on the process's address space (futex(2)).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `*word == expected`, at most `timeout` if given. Returns false on timeout. Spurious wakes
/// and EAGAIN (value already changed) return true: callers re-check their state word.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> bool {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call; FUTEX_WAIT only reads it; the
    // timespec pointer is null or points to a live local.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
            0usize,
            0u32,
        )
    };
    !(r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT))
}

/// Wakes up to `n` waiters on `word`; returns how many were woken.
pub fn wake(word: &AtomicU32, n: u32) -> u32 {
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE does not dereference it beyond keying the queue.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            n as i32,
            0usize,
            0usize,
            0u32,
        )
    };
    r.max(0) as u32
}
