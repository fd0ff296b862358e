//! The rseq time-slice extension (Linux 7.0+, `Documentation/userspace-api/rseq.rst`) and the `rseq` lock:
//! PostgreSQL's spinlock whose holder asks the scheduler for a few more µs instead of being preempted.
//!
//! Enable per thread with `prctl(PR_RSEQ_SLICE_EXTENSION, PR_RSEQ_SLICE_EXTENSION_SET,
//! PR_RSEQ_SLICE_EXT_ENABLE)`. glibc registers each thread's `struct rseq` (at the thread pointer +
//! `__rseq_offset`); `slice_ctrl` sits at offset 28: `u8 request; u8 granted; u16 reserved`. The holder sets
//! `request = 1` on entry and clears it on exit; if the kernel `granted` an extension meanwhile, the holder
//! gives the CPU back with `rseq_slice_yield` (syscall 471). Any other syscall revokes a grant.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::pg::{PgSpinLock, PgWaiter};
use crate::{Acquired, RawLock};

const PR_RSEQ_SLICE_EXTENSION: libc::c_int = 79;
const PR_RSEQ_SLICE_EXTENSION_GET: libc::c_ulong = 1;
const PR_RSEQ_SLICE_EXTENSION_SET: libc::c_ulong = 2;
const PR_RSEQ_SLICE_EXT_ENABLE: libc::c_ulong = 1;
const SYS_RSEQ_SLICE_YIELD: libc::c_long = 471;
const SLICE_CTRL_OFFSET: usize = 28;

extern "C" {
    // glibc 2.35+: the registered rseq area's offset from the thread pointer, and its size (0: none).
    static __rseq_offset: isize;
    static __rseq_size: u32;
}

/// Whether the kernel offers the slice extension and glibc registered an rseq area large enough.
pub fn available() -> Result<(), String> {
    // SAFETY: prctl with integer arguments; GET changes nothing.
    let r = unsafe {
        libc::prctl(
            PR_RSEQ_SLICE_EXTENSION,
            PR_RSEQ_SLICE_EXTENSION_GET,
            0,
            0,
            0,
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EINVAL) => "the kernel has no rseq time-slice extension (Linux 7.0+ with CONFIG_RSEQ_SLICE_EXTENSION)".into(),
            _ => format!("prctl(PR_RSEQ_SLICE_EXTENSION): {e}"),
        });
    }
    // SAFETY: reading glibc's exported constants.
    let size = unsafe { __rseq_size };
    if (size as usize) < SLICE_CTRL_OFFSET + 4 {
        return Err(format!("glibc registered no rseq area large enough (__rseq_size = {size}; GLIBC_TUNABLES=glibc.pthread.rseq=0?)"));
    }
    Ok(())
}

fn thread_pointer() -> *mut u8 {
    let tp: *mut u8;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads the TCB self-pointer at %fs:0, which glibc sets up for every thread.
    unsafe {
        std::arch::asm!("mov {}, fs:0", out(reg) tp, options(nostack, readonly, preserves_flags));
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads the thread pointer register.
    unsafe {
        std::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags));
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        tp = std::ptr::null_mut();
    }
    tp
}

/// This thread's slice-extension control word, once enabled.
#[derive(Debug)]
pub struct SliceExtension {
    ctrl: *const AtomicU8,
}

// SAFETY: a SliceExtension is only used by the thread that created it (waiters are per thread); Send lets
// it move into that thread's closure before use.
unsafe impl Send for SliceExtension {}

impl SliceExtension {
    /// Enables the extension for the calling thread.
    pub fn enable() -> Result<SliceExtension, String> {
        available()?;
        // SAFETY: prctl with integer arguments; enables a per-thread feature.
        let r = unsafe {
            libc::prctl(
                PR_RSEQ_SLICE_EXTENSION,
                PR_RSEQ_SLICE_EXTENSION_SET,
                PR_RSEQ_SLICE_EXT_ENABLE,
                0,
                0,
            )
        };
        if r != 0 {
            return Err(format!(
                "enabling the slice extension: {}",
                std::io::Error::last_os_error()
            ));
        }
        let tp = thread_pointer();
        if tp.is_null() {
            return Err("no thread pointer on this architecture".into());
        }
        // SAFETY: glibc's rseq area lives at tp + __rseq_offset for the life of the thread and is at least
        // SLICE_CTRL_OFFSET + 4 bytes (checked in available()).
        let ctrl = unsafe { tp.offset(__rseq_offset).add(SLICE_CTRL_OFFSET) } as *const AtomicU8;
        Ok(SliceExtension { ctrl })
    }

    /// Sets `request = 1`: entering a critical section.
    #[inline]
    pub fn request(&self) {
        // SAFETY: ctrl points into this thread's live rseq area (see enable()).
        unsafe { (*self.ctrl).store(1, Ordering::Relaxed) };
    }

    /// Clears `request`; yields the CPU if the kernel granted an extension meanwhile.
    #[inline]
    pub fn release(&self) {
        // SAFETY: as in request(); `granted` is the next byte, written by the kernel.
        let granted = unsafe {
            (*self.ctrl).store(0, Ordering::Relaxed);
            (*self.ctrl.add(1)).load(Ordering::Relaxed)
        };
        if granted != 0 {
            // SAFETY: a syscall with no arguments.
            unsafe { libc::syscall(SYS_RSEQ_SLICE_YIELD) };
        }
    }
}

/// PostgreSQL's spinlock plus a slice-extension request around the critical section.
#[repr(C, align(64))]
pub struct RseqLock {
    inner: PgSpinLock,
}

/// A `pg` waiter with this thread's slice extension.
#[derive(Debug)]
pub struct RseqWaiter {
    pg: PgWaiter,
    slice: SliceExtension,
}

impl RawLock for RseqLock {
    type Waiter = RseqWaiter;

    fn waiter(&self, id: u32) -> RseqWaiter {
        let slice = SliceExtension::enable()
            .unwrap_or_else(|e| panic!("the rseq lock is unavailable here: {e}"));
        RseqWaiter {
            pg: self.inner.waiter(id),
            slice,
        }
    }

    #[inline]
    fn lock(&self, w: &mut RseqWaiter) -> Acquired {
        let a = self.inner.lock(&mut w.pg);
        w.slice.request();
        a
    }

    #[inline]
    fn unlock(&self, w: &mut RseqWaiter) {
        self.inner.unlock(&mut w.pg);
        w.slice.release();
    }
}
