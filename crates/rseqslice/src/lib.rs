//! The rseq ABI and its time-slice extension: a thread's rseq registration long enough for the extension,
//! the per-thread switch (`prctl`), the request/grant protocol, and a probe of whether this kernel offers it.
//! The `rseq` and `adaptive` locks of `shmlock` use it around their critical sections; `hostfacts` probes
//! it for the audit. It has a crate of its own so that the audit does not depend on the lock crate.
//!
//! The kernel side (Linux 7.2 `Documentation/userspace-api/rseq.rst`, `include/uapi/linux/rseq.h`,
//! `kernel/rseq.c`):
//!
//! - The extension exists only with `CONFIG_RSEQ_SLICE_EXTENSION=y` (7.0+) and `rseq_slice_ext=` not turned
//!   off at boot. `prctl(PR_RSEQ_SLICE_EXTENSION, GET)` answers EINVAL on kernels before 7.0 (unknown option)
//!   and ENOTSUPP (524) on kernels built without the option.
//! - It is offered only to a thread whose rseq registration is "optimized V2": registered with a length of at
//!   least `getauxval(AT_RSEQ_FEATURE_SIZE)` (33 on 7.2), the area aligned on `getauxval(AT_RSEQ_ALIGN)`.
//!   A legacy 32-byte registration gets ENOTSUPP from `prctl(SET)`. glibc 2.35-2.40 registers 32 bytes
//!   (`__rseq_size` says 20), so [`Registration`] unregisters glibc's area in the calling thread and registers
//!   one of the kernel's feature size; where glibc already registered a long enough area it is used as is.
//! - The thread enables the extension with `prctl(PR_RSEQ_SLICE_EXTENSION, SET, PR_RSEQ_SLICE_EXT_ENABLE)`.
//! - Protocol, `slice_ctrl` at offset 28 (`u8 request; u8 granted; u16 reserved`): the holder sets
//!   `request = 1` entering the critical section. If an interrupt wants to reschedule the thread, the kernel
//!   may instead grant an extension (default 5 µs, debugfs `rseq/slice_ext_nsec`): it clears `request` and
//!   sets `granted`. Leaving, the holder clears `request`; if `granted` is set it calls `rseq_slice_yield`
//!   (syscall 471, returns 1 when it yielded within the grant). Both bytes clear at exit means the kernel
//!   cleared the request without a visible grant (the thread was scheduled out, or a grant was revoked).
//!   Any other syscall during a grant revokes it.

use std::alloc::Layout;
use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{compiler_fence, AtomicU8, Ordering};

const PR_RSEQ_SLICE_EXTENSION: libc::c_int = 79;
const PR_RSEQ_SLICE_EXTENSION_GET: libc::c_ulong = 1;
const PR_RSEQ_SLICE_EXTENSION_SET: libc::c_ulong = 2;
const PR_RSEQ_SLICE_EXT_ENABLE: libc::c_ulong = 1;
const SYS_RSEQ_SLICE_YIELD: libc::c_long = 471;
/// The kernel-internal "operation not supported" errno (`include/linux/errno.h`), not in libc.
pub const ENOTSUPP: i32 = 524;
const RSEQ_FLAG_UNREGISTER: libc::c_int = 1;
/// `RSEQ_CS_FLAG_SLICE_EXT_ENABLED`: the kernel's read-only mark in `rseq::flags` once enabled.
const RSEQ_CS_FLAG_SLICE_EXT_ENABLED: u32 = 1 << 5;
/// `getauxval` keys (`include/uapi/linux/auxvec.h`).
const AT_RSEQ_FEATURE_SIZE: libc::c_ulong = 27;
const AT_RSEQ_ALIGN: libc::c_ulong = 28;
/// The original (legacy) registration size and alignment.
const ORIG_RSEQ_SIZE: u32 = 32;
const FLAGS_OFFSET: usize = 16;
const SLICE_CTRL_OFFSET: usize = 28;
/// The signature glibc registers with (and the kernel checks on unregistration): `RSEQ_SIG`.
#[cfg(target_arch = "x86_64")]
const RSEQ_SIG: u32 = 0x5305_3053;
#[cfg(target_arch = "aarch64")]
const RSEQ_SIG: u32 = 0xd428_bc00;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const RSEQ_SIG: u32 = 0;

extern "C" {
    // glibc 2.35+: the registered rseq area's offset from the thread pointer, and its size (0: none).
    static __rseq_offset: isize;
    static __rseq_size: u32;
}

/// Why the slice extension cannot be used here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// `prctl` answered EINVAL: the kernel predates the extension (Linux 7.0).
    NotInKernel,
    /// `prctl` answered ENOTSUPP (524) to a long enough registration; `detail` says which cause applies
    /// when the kernel config or command line tells ([`enotsupp_detail`]).
    NotSupported {
        /// What the config or command line says, if readable.
        detail: Option<String>,
    },
    /// The thread's rseq registration is shorter than the kernel's feature size.
    RegistrationTooShort {
        /// Bytes registered.
        registered: u32,
        /// `getauxval(AT_RSEQ_FEATURE_SIZE)`.
        feature_size: u32,
    },
    /// Anything else (a failed registration, an unexpected errno), said in full.
    Other(String),
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::NotInKernel => f.write_str(
                "the kernel lacks the rseq time-slice extension (prctl PR_RSEQ_SLICE_EXTENSION: EINVAL; it came in Linux 7.0)",
            ),
            Unavailable::NotSupported { detail } => {
                f.write_str("rseq time-slice extension: kernel built without CONFIG_RSEQ_SLICE_EXTENSION or disabled at boot (prctl: ENOTSUPP)")?;
                match detail {
                    Some(d) => write!(f, ": {d}"),
                    None => Ok(()),
                }
            }
            Unavailable::RegistrationTooShort {
                registered,
                feature_size,
            } => write!(
                f,
                "rseq time-slice extension: this thread's rseq registration is {registered} bytes, shorter than the kernel's feature size {feature_size} (AT_RSEQ_FEATURE_SIZE); since Linux 7.1 only such registrations are offered the extension"
            ),
            Unavailable::Other(s) => write!(f, "rseq time-slice extension: {s}"),
        }
    }
}

impl std::error::Error for Unavailable {}

/// Which of ENOTSUPP's causes applies: `config` is CONFIG_RSEQ_SLICE_EXTENSION's state (`true` = `y`) in
/// the config read from `source`, when one was readable; `cmdline` is the kernel command line.
pub fn enotsupp_detail(config: Option<(bool, &str)>, cmdline: Option<&str>) -> Option<String> {
    let off_at_boot = cmdline.and_then(|c| {
        c.split_whitespace()
            .find_map(|w| w.strip_prefix("rseq_slice_ext="))
            .filter(|v| matches!(*v, "0" | "n" | "N" | "off" | "no" | "false"))
            .map(|v| format!("rseq_slice_ext={v}"))
    });
    match (config, off_at_boot) {
        (Some((false, src)), _) => Some(format!("CONFIG_RSEQ_SLICE_EXTENSION is not set in {src}")),
        (_, Some(arg)) => Some(format!(
            "disabled at boot by {arg} on the kernel command line"
        )),
        (Some((true, src)), None) => Some(format!(
            "CONFIG_RSEQ_SLICE_EXTENSION=y in {src} and no rseq_slice_ext= on the command line"
        )),
        (None, None) => None,
    }
}

/// Reads what [`enotsupp_detail`] needs from the running kernel: `/boot/config-<release>` (plain text; the
/// audit also reads `/proc/config.gz`) and `/proc/cmdline`.
fn live_enotsupp_detail() -> Option<String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok();
    let config = release.and_then(|r| {
        let path = format!("/boot/config-{}", r.trim());
        let text = std::fs::read_to_string(&path).ok()?;
        Some((config_has_slice_extension(&text), path))
    });
    let cmdline = std::fs::read_to_string("/proc/cmdline").ok();
    enotsupp_detail(
        config.as_ref().map(|(v, p)| (*v, p.as_str())),
        cmdline.as_deref(),
    )
}

/// Whether a kernel config text sets `CONFIG_RSEQ_SLICE_EXTENSION=y`.
pub fn config_has_slice_extension(config: &str) -> bool {
    config
        .lines()
        .any(|l| l.trim() == "CONFIG_RSEQ_SLICE_EXTENSION=y")
}

/// Classifies a failed `prctl(PR_RSEQ_SLICE_EXTENSION, ...)` by errno. `registered` and `feature_size` say
/// whether the thread's registration was long enough (ENOTSUPP then means: not built, or off at boot);
/// `detail` is called only for that case.
pub fn classify_prctl_error(
    errno: i32,
    registered: u32,
    feature_size: u32,
    detail: impl FnOnce() -> Option<String>,
) -> Unavailable {
    match errno {
        libc::EINVAL => Unavailable::NotInKernel,
        ENOTSUPP if registered <= ORIG_RSEQ_SIZE || registered < feature_size => {
            Unavailable::RegistrationTooShort {
                registered,
                feature_size,
            }
        }
        ENOTSUPP => Unavailable::NotSupported { detail: detail() },
        libc::ENXIO => Unavailable::Other("no rseq area registered for this thread (ENXIO)".into()),
        e => Unavailable::Other(format!(
            "prctl(PR_RSEQ_SLICE_EXTENSION): {}",
            std::io::Error::from_raw_os_error(e)
        )),
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `prctl(PR_RSEQ_SLICE_EXTENSION, GET)`: whether this kernel has the extension compiled in and enabled
/// for this thread (Ok(true)), compiled in (Ok(false)), or why not.
fn prctl_get() -> Result<bool, Unavailable> {
    // SAFETY: prctl with integer arguments; GET reads per-thread state and changes nothing.
    let r = unsafe {
        libc::prctl(
            PR_RSEQ_SLICE_EXTENSION,
            PR_RSEQ_SLICE_EXTENSION_GET,
            0,
            0,
            0,
        )
    };
    if r >= 0 {
        return Ok(r as libc::c_ulong & PR_RSEQ_SLICE_EXT_ENABLE != 0);
    }
    // GET does not look at the registration: ENOTSUPP here is the stub of a kernel built without it.
    Err(classify_prctl_error(
        errno(),
        u32::MAX,
        0,
        live_enotsupp_detail,
    ))
}

fn rseq_syscall(area: *mut u8, len: u32, flags: libc::c_int) -> Result<(), i32> {
    // SAFETY: the rseq syscall only records (or forgets) `area` for this thread; callers pass an area that
    // stays valid while registered (see Registration).
    let r = unsafe { libc::syscall(libc::SYS_rseq, area, len, flags, RSEQ_SIG) };
    if r == 0 {
        Ok(())
    } else {
        Err(errno())
    }
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

/// The kernel's rseq feature size and alignment (`getauxval`; 0 before Linux 6.3).
pub fn kernel_feature_size() -> (u32, u32) {
    // SAFETY: getauxval has no preconditions; unknown keys give 0.
    let (size, align) = unsafe {
        (
            libc::getauxval(AT_RSEQ_FEATURE_SIZE),
            libc::getauxval(AT_RSEQ_ALIGN),
        )
    };
    (size as u32, align as u32)
}

/// The allocation for an own rseq area: at least `max(feature_size, 32)` bytes, aligned on
/// `max(align, 32)` (include/uapi/linux/rseq.h), the size a multiple of the alignment.
pub fn area_layout(feature_size: u32, align: u32) -> Option<Layout> {
    let align = (align.max(ORIG_RSEQ_SIZE) as usize).next_power_of_two();
    let size = (feature_size.max(ORIG_RSEQ_SIZE) as usize).div_ceil(align) * align;
    Layout::from_size_align(size, align).ok()
}

/// The calling thread's rseq registration, long enough for the slice extension: glibc's when it is,
/// otherwise an own area that replaces glibc's for the life of this value (glibc's is put back on drop).
#[derive(Debug)]
pub struct Registration {
    area: *mut u8,
    len: u32,
    /// Set when the area is ours (freed on drop once unregistered).
    owned: Option<Layout>,
    /// glibc's area and registered length, when we unregistered it.
    glibc: Option<(*mut u8, u32)>,
}

impl Registration {
    /// Registers (or adopts) a long enough area for the calling thread.
    pub fn for_this_thread() -> Result<Registration, Unavailable> {
        let (feature_size, align) = kernel_feature_size();
        if feature_size <= ORIG_RSEQ_SIZE {
            return Err(Unavailable::Other(format!(
                "the kernel's rseq feature size is {feature_size} (AT_RSEQ_FEATURE_SIZE), not beyond the legacy 32 bytes"
            )));
        }
        Self::with_len(feature_size, align)
    }

    /// Registers an area of `len` bytes (at least the legacy 32) aligned on `align`, adopting glibc's when
    /// it registered that much.
    fn with_len(feature_size: u32, align: u32) -> Result<Registration, Unavailable> {
        let tp = thread_pointer();
        if tp.is_null() {
            return Err(Unavailable::Other(
                "no thread pointer on this architecture".into(),
            ));
        }
        // SAFETY: reading glibc's exported constants.
        let (glibc_size, glibc_off) = unsafe { (__rseq_size, __rseq_offset) };
        // SAFETY: glibc's area lives at tp + __rseq_offset for the life of the thread (when __rseq_size > 0).
        let glibc_area = unsafe { tp.offset(glibc_off) };
        if glibc_size >= feature_size {
            return Ok(Registration {
                area: glibc_area,
                len: glibc_size,
                owned: None,
                glibc: None,
            });
        }
        let mut glibc = None;
        if glibc_size > 0 {
            // glibc registers max(__rseq_size, 32) bytes; unregistration must name the same length.
            let mut last = 0;
            for len in [glibc_size.max(ORIG_RSEQ_SIZE), glibc_size] {
                match rseq_syscall(glibc_area, len, RSEQ_FLAG_UNREGISTER) {
                    Ok(()) => {
                        glibc = Some((glibc_area, len));
                        break;
                    }
                    Err(e) => last = e,
                }
            }
            if glibc.is_none() {
                return Err(Unavailable::Other(format!(
                    "glibc registered a {glibc_size}-byte rseq area (the kernel wants {feature_size}) and unregistering it failed: {} (run with GLIBC_TUNABLES=glibc.pthread.rseq=0)",
                    std::io::Error::from_raw_os_error(last)
                )));
            }
        }
        let restore = |glibc: Option<(*mut u8, u32)>| {
            if let Some((a, l)) = glibc {
                let _ = rseq_syscall(a, l, 0);
            }
        };
        let Some(layout) = area_layout(feature_size, align) else {
            restore(glibc);
            return Err(Unavailable::Other(format!(
                "no valid allocation for an rseq area of {feature_size} bytes aligned on {align}"
            )));
        };
        // SAFETY: layout has a non-zero size.
        let area = unsafe { std::alloc::alloc_zeroed(layout) };
        if area.is_null() {
            restore(glibc);
            return Err(Unavailable::Other("out of memory for the rseq area".into()));
        }
        let len = feature_size.max(ORIG_RSEQ_SIZE);
        if let Err(e) = rseq_syscall(area, len, 0) {
            restore(glibc);
            // SAFETY: allocated above with this layout and never registered.
            unsafe { std::alloc::dealloc(area, layout) };
            return Err(Unavailable::Other(format!(
                "registering a {len}-byte rseq area: {}",
                std::io::Error::from_raw_os_error(e)
            )));
        }
        Ok(Registration {
            area,
            len,
            owned: Some(layout),
            glibc,
        })
    }

    /// Bytes registered.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the registration is empty (never: kept for the `len` convention).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the area is this value's own (glibc's was too short).
    pub fn is_own(&self) -> bool {
        self.owned.is_some()
    }

    /// The kernel's `rseq::flags` word (read-only for user space).
    fn kernel_flags(&self) -> u32 {
        // SAFETY: the area is registered, live, at least 32 bytes and 32-byte aligned; flags is at 16.
        unsafe { std::ptr::read_volatile(self.area.add(FLAGS_OFFSET) as *const u32) }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(layout) = self.owned else { return };
        // Unregistration fails on another thread than the registering one: then the kernel may still write
        // the area, so it is leaked rather than freed.
        if rseq_syscall(self.area, self.len, RSEQ_FLAG_UNREGISTER).is_ok() {
            // SAFETY: allocated with this layout in for_this_thread, no longer registered.
            unsafe { std::alloc::dealloc(self.area, layout) };
            if let Some((a, l)) = self.glibc {
                let _ = rseq_syscall(a, l, 0);
            }
        }
    }
}

/// What the slice extension did for one thread (or, summed, one repetition).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SliceCounts {
    /// Critical sections entered with `request = 1`.
    pub requests: u64,
    /// Critical sections left with `granted` set: the kernel extended the slice instead of preempting.
    pub grants: u64,
    /// `rseq_slice_yield` calls that returned 1: the CPU given back within the grant.
    pub yields: u64,
    /// Critical sections left with both bytes clear: the kernel cleared the request without a grant in
    /// sight (the holder was scheduled out, or a grant was revoked).
    pub cleared: u64,
}

impl SliceCounts {
    /// The counts since `earlier`.
    pub fn since(self, earlier: SliceCounts) -> SliceCounts {
        SliceCounts {
            requests: self.requests - earlier.requests,
            grants: self.grants - earlier.grants,
            yields: self.yields - earlier.yields,
            cleared: self.cleared - earlier.cleared,
        }
    }

    /// Sums two counts.
    pub fn plus(self, o: SliceCounts) -> SliceCounts {
        SliceCounts {
            requests: self.requests + o.requests,
            grants: self.grants + o.grants,
            yields: self.yields + o.yields,
            cleared: self.cleared + o.cleared,
        }
    }
}

/// The protocol's exit step, as a decision: given `request` as found leaving the critical section and
/// `granted` read after clearing it, counts the outcome and says whether to call `rseq_slice_yield`.
pub fn on_exit(counts: &mut SliceCounts, request_left: u8, granted: u8) -> bool {
    if granted != 0 {
        counts.grants += 1;
        true
    } else {
        if request_left == 0 {
            counts.cleared += 1;
        }
        false
    }
}

/// This thread's slice-extension control word, once enabled.
#[derive(Debug)]
pub struct SliceExtension {
    ctrl: *const AtomicU8,
    counts: Cell<SliceCounts>,
    _reg: Registration,
}

// SAFETY: a SliceExtension is only used by the thread that created it (waiters are per thread); Send lets
// it move into that thread's closure before use. Dropped elsewhere, its registration is leaked, not freed.
unsafe impl Send for SliceExtension {}

impl SliceExtension {
    /// Enables the extension for the calling thread, registering a long enough rseq area if glibc's is not.
    pub fn enable() -> Result<SliceExtension, Unavailable> {
        // Check the kernel before touching glibc's registration.
        prctl_get()?;
        let reg = Registration::for_this_thread()?;
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
            let (feature_size, _) = kernel_feature_size();
            return Err(classify_prctl_error(
                errno(),
                reg.len(),
                feature_size,
                live_enotsupp_detail,
            ));
        }
        if reg.kernel_flags() & RSEQ_CS_FLAG_SLICE_EXT_ENABLED == 0 {
            return Err(Unavailable::Other(
                "prctl enabled the extension but the rseq area's flags do not say so".into(),
            ));
        }
        // SAFETY: the area is registered for this thread and at least SLICE_CTRL_OFFSET + 4 bytes long
        // (feature size >= 33); it lives as long as `reg`, which this value owns.
        let ctrl = unsafe { reg.area.add(SLICE_CTRL_OFFSET) } as *const AtomicU8;
        Ok(SliceExtension {
            ctrl,
            counts: Cell::new(SliceCounts::default()),
            _reg: reg,
        })
    }

    /// Sets `request = 1`: entering a critical section.
    #[inline]
    pub fn request(&self) {
        // SAFETY: ctrl points into this thread's live rseq area (see enable()). Relaxed: the byte is read by
        // the kernel on this CPU only; the fence keeps the compiler from moving critical-section accesses
        // above the store.
        unsafe { (*self.ctrl).store(1, Ordering::Relaxed) };
        compiler_fence(Ordering::SeqCst);
        let mut c = self.counts.get();
        c.requests += 1;
        self.counts.set(c);
    }

    /// Clears `request`; yields the CPU if the kernel granted an extension meanwhile.
    #[inline]
    pub fn release(&self) {
        // Keeps the critical section (the unlock included) above the clear.
        compiler_fence(Ordering::SeqCst);
        // SAFETY: as in request(); `granted` is the next byte, written by the kernel.
        let (left, granted) = unsafe {
            let left = (*self.ctrl).load(Ordering::Relaxed);
            (*self.ctrl).store(0, Ordering::Relaxed);
            (left, (*self.ctrl.add(1)).load(Ordering::Relaxed))
        };
        let mut c = self.counts.get();
        if on_exit(&mut c, left, granted) {
            Self::yield_cpu(&mut c);
        }
        self.counts.set(c);
    }

    #[cold]
    fn yield_cpu(c: &mut SliceCounts) {
        // SAFETY: a syscall with no arguments.
        if unsafe { libc::syscall(SYS_RSEQ_SLICE_YIELD) } == 1 {
            c.yields += 1;
        }
    }

    /// What the extension did so far in this thread.
    pub fn counts(&self) -> SliceCounts {
        self.counts.get()
    }
}

/// Whether a thread of this process can use the extension: probed in a fresh thread that registers,
/// enables, and unregisters again (the calling thread's rseq state is not touched).
pub fn probe() -> Result<(), Unavailable> {
    std::thread::spawn(|| SliceExtension::enable().map(drop))
        .join()
        .unwrap_or_else(|_| Err(Unavailable::Other("the probe thread panicked".into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_step_counts_grants_yields_and_clears() {
        let mut c = SliceCounts::default();
        // Request still set, nothing granted: no interrupt wanted the CPU.
        assert!(!on_exit(&mut c, 1, 0));
        // The kernel granted: request cleared, granted set -> yield.
        assert!(on_exit(&mut c, 0, 1));
        // Cleared without a grant: scheduled out or revoked.
        assert!(!on_exit(&mut c, 0, 0));
        assert_eq!(
            c,
            SliceCounts {
                requests: 0,
                grants: 1,
                yields: 0,
                cleared: 1
            }
        );
    }

    #[test]
    fn counts_subtract_and_add() {
        let a = SliceCounts {
            requests: 10,
            grants: 3,
            yields: 2,
            cleared: 1,
        };
        let b = SliceCounts {
            requests: 4,
            grants: 1,
            yields: 1,
            cleared: 0,
        };
        assert_eq!(a.since(b).plus(b), a);
    }

    #[test]
    fn errno_classification() {
        let none = || None;
        assert_eq!(
            classify_prctl_error(libc::EINVAL, 33, 33, none),
            Unavailable::NotInKernel
        );
        assert_eq!(
            classify_prctl_error(ENOTSUPP, 32, 33, none),
            Unavailable::RegistrationTooShort {
                registered: 32,
                feature_size: 33
            }
        );
        let e = classify_prctl_error(ENOTSUPP, 33, 33, || Some("why".into()));
        assert_eq!(
            e,
            Unavailable::NotSupported {
                detail: Some("why".into())
            }
        );
        assert!(e
            .to_string()
            .contains("kernel built without CONFIG_RSEQ_SLICE_EXTENSION or disabled at boot"));
        assert!(classify_prctl_error(libc::ENXIO, 33, 33, none)
            .to_string()
            .contains("no rseq area"));
        let short = Unavailable::RegistrationTooShort {
            registered: 32,
            feature_size: 33,
        }
        .to_string();
        assert!(
            short.contains("32 bytes") && short.contains("33"),
            "{short}"
        );
    }

    #[test]
    fn enotsupp_detail_names_the_cause() {
        assert_eq!(
            enotsupp_detail(Some((false, "/proc/config.gz")), None).unwrap(),
            "CONFIG_RSEQ_SLICE_EXTENSION is not set in /proc/config.gz"
        );
        assert_eq!(
            enotsupp_detail(
                Some((true, "/boot/config-7.2")),
                Some("ro rseq_slice_ext=0 quiet")
            )
            .unwrap(),
            "disabled at boot by rseq_slice_ext=0 on the kernel command line"
        );
        assert!(enotsupp_detail(None, Some("ro rseq_slice_ext=1")).is_none());
        assert!(enotsupp_detail(None, None).is_none());
        assert!(config_has_slice_extension(
            "CONFIG_RSEQ=y\nCONFIG_RSEQ_SLICE_EXTENSION=y\n"
        ));
        assert!(!config_has_slice_extension(
            "# CONFIG_RSEQ_SLICE_EXTENSION is not set\n"
        ));
    }

    #[test]
    fn area_layout_follows_the_uapi_rule() {
        // 7.2: feature size 33, AT_RSEQ_ALIGN 64.
        let l = area_layout(33, 64).unwrap();
        assert_eq!((l.size(), l.align()), (64, 64));
        // Never below the original 32 bytes / 32-byte alignment.
        let l = area_layout(20, 0).unwrap();
        assert_eq!((l.size(), l.align()), (32, 32));
    }

    /// Replaces glibc's registration with an own (legacy-size, so any rseq kernel takes it) area in a fresh
    /// thread, checks the kernel fills it, and that glibc's is back after the drop.
    #[test]
    fn own_registration_replaces_and_restores_glibcs() {
        std::thread::spawn(|| {
            // SAFETY: reading glibc's exported constants.
            let glibc_size = unsafe { __rseq_size };
            let reg = match Registration::with_len(ORIG_RSEQ_SIZE, ORIG_RSEQ_SIZE) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("SKIPPED: this kernel or glibc takes no rseq registration here: {e}");
                    return;
                }
            };
            if glibc_size >= ORIG_RSEQ_SIZE {
                assert!(!reg.is_own());
                return;
            }
            assert!(reg.is_own());
            assert_eq!(reg.area as usize % 32, 0);
            // A syscall returns through the kernel, which writes cpu_id (offset 4) on the way out.
            // SAFETY: getpid has no preconditions.
            unsafe { libc::getpid() };
            // SAFETY: the area is registered and live.
            let cpu = unsafe { std::ptr::read_volatile(reg.area.add(4) as *const i32) };
            assert!(cpu >= 0, "cpu_id {cpu} in the own area");
            drop(reg);
            if glibc_size > 0 {
                // SAFETY: reading glibc's exported constants.
                let area = unsafe { thread_pointer().offset(__rseq_offset) };
                assert_eq!(
                    rseq_syscall(area, glibc_size.max(ORIG_RSEQ_SIZE), 0),
                    Err(libc::EBUSY),
                    "glibc's area is registered again"
                );
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn probe_leaves_the_calling_thread_alone() {
        // SAFETY: reading glibc's exported constants.
        let before = unsafe { __rseq_size };
        let r = probe();
        eprintln!("rseq slice extension here: {r:?}");
        if let Err(e) = &r {
            assert!(!e.to_string().is_empty());
        }
        // glibc's registration of this thread still answers: re-registering the same area is EBUSY.
        if before > 0 {
            // SAFETY: reading glibc's exported constants.
            let area = unsafe { thread_pointer().offset(__rseq_offset) };
            let len = before.max(ORIG_RSEQ_SIZE);
            assert_eq!(rseq_syscall(area, len, 0), Err(libc::EBUSY));
        }
    }
}
