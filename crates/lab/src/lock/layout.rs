//! The shared-memory layout of `bench lock`: the lock area, the strategy control block, the workers'
//! progress slots and the buffer descriptors, and the free list linked through them (built by the parent
//! before the workers start, checked by it after they end).
//!
//! | offset              | what                                                              |
//! |---------------------|-------------------------------------------------------------------|
//! | 0                   | the lock ([`LOCK_AREA`] bytes, room for any lock)                 |
//! | `LOCK_AREA`         | [`Control`]: free-list head, clock hand, counters, phase, ready   |
//! | `+ 192`             | [`Slot`] x `MAX_WAITERS`: each worker's published operation count |
//! | next 4 KB boundary  | [`Desc`] x descriptors, 64 bytes each                             |

use std::sync::atomic::{AtomicU32, AtomicU64};

use axes::Backing;
use shmlock::shm::ShmRegion;
use shmlock::spin::XorShift;
use shmlock::MAX_WAITERS;

use super::Check;

/// `free_next` of a descriptor popped off the free list.
pub(super) const NOT_IN_LIST: i32 = -2;
/// `free_next` of the last descriptor of the free list (and the head of an empty one).
pub(super) const END_OF_LIST: i32 = -1;

/// [`Control::phase`]: workers wait to start.
pub(super) const PHASE_WAIT: u32 = 0;
/// [`Control::phase`]: workers run, nothing is recorded.
pub(super) const PHASE_WARMUP: u32 = 1;
/// [`Control::phase`]: workers run and record.
pub(super) const PHASE_MEASURE: u32 = 2;
/// [`Control::phase`]: workers report and leave.
pub(super) const PHASE_STOP: u32 = 3;

/// One buffer descriptor, the size of PostgreSQL's padded `BufferDesc`.
#[repr(C, align(64))]
pub(super) struct Desc {
    pub(super) buf_id: u32,
    pub(super) free_next: i32,
    pub(super) usage_count: u32,
    pub(super) refcount: u32,
    flags: u32,
    tag: [u32; 5],
    _pad: [u8; 24],
}
const _: () = assert!(std::mem::size_of::<Desc>() == 64);

/// The strategy control block. Line 0 is only touched under the lock.
#[repr(C, align(64))]
pub(super) struct Control {
    pub(super) free_head: i64,
    pub(super) clock_hand: u64,
    pub(super) counter: u64,
    pub(super) popped: u64,
    pub(super) sweeps: u64,
    _pad0: [u8; 24],
    /// One of the `PHASE_*` values, set by the parent.
    pub(super) phase: AtomicU32,
    _pad1: [u8; 60],
    /// Workers that finished ageing and wait for the start.
    pub(super) ready: AtomicU32,
    _pad2: [u8; 60],
}
const _: () = assert!(std::mem::size_of::<Control>() == 192);

/// A worker's published progress (its own cache line).
#[repr(C, align(64))]
pub(super) struct Slot {
    pub(super) ops: AtomicU64,
    _pad: [u8; 56],
}

/// Offsets of the parts in the region, and its size.
pub(super) struct Layout {
    pub(super) lock_off: usize,
    pub(super) control_off: usize,
    pub(super) slots_off: usize,
    pub(super) descs_off: usize,
    pub(super) total: usize,
}

/// Room reserved for any lock (the largest is MCS, with a node per waiter), so one region serves every
/// lock of a run.
pub(super) const LOCK_AREA: usize =
    std::mem::size_of::<shmlock::mcs::McsLock>().div_ceil(4096) * 4096;

/// The layout of a region of `descriptors` descriptors.
pub(super) fn layout(descriptors: u64) -> Layout {
    let lock_off = 0;
    let control_off = LOCK_AREA;
    let slots_off = control_off + std::mem::size_of::<Control>();
    let descs_off = (slots_off + MAX_WAITERS * 64).div_ceil(4096) * 4096;
    Layout {
        lock_off,
        control_off,
        slots_off,
        descs_off,
        total: descs_off + descriptors as usize * 64,
    }
}

/// Maps the shared region for `descriptors` on `backing`. A run keeps one region per backing and
/// re-initializes it for every repetition (as shared_buffers outlives backends); workers are new processes
/// each time, so their page tables start empty.
pub fn new_region(backing: Backing, descriptors: u64) -> Result<ShmRegion, shmlock::shm::ShmError> {
    ShmRegion::new(layout(descriptors).total, backing)
}

/// Bytes of shared memory a run's region needs (for sizing hugetlb reservations).
pub fn region_bytes(descriptors: u64) -> usize {
    layout(descriptors).total
}

/// Shared pointers into the region.
pub(super) struct Shared<L> {
    pub(super) lock: *const L,
    pub(super) control: *mut Control,
    pub(super) slots: *const Slot,
    pub(super) descs: *mut Desc,
    /// Descriptors.
    pub(super) n: u64,
}

// SAFETY: everything behind the pointers is shared memory designed for concurrent use: atomics, or plain
// fields accessed only while holding the lock.
unsafe impl<L> Send for Shared<L> {}
// SAFETY: as above.
unsafe impl<L> Sync for Shared<L> {}

impl<L> Shared<L> {
    /// Zeroes the lock, control and slot parts of `region` (the descriptors are rewritten by
    /// [`init_free_list`]) and points into it.
    ///
    /// # Safety
    /// No worker may be using the region, and it must be at least `layout(descriptors).total` bytes.
    pub(super) unsafe fn over(region: &ShmRegion, descriptors: u64) -> Self {
        let lay = layout(descriptors);
        let base = region.as_ptr();
        // SAFETY: no worker exists yet (the caller's precondition); the range is inside the region.
        unsafe { std::ptr::write_bytes(base, 0, lay.descs_off) };
        // SAFETY: offsets are inside the region (layout computed its size, the caller checked it).
        unsafe {
            Self {
                lock: base.add(lay.lock_off) as *const L,
                control: base.add(lay.control_off) as *mut Control,
                slots: base.add(lay.slots_off) as *const Slot,
                descs: base.add(lay.descs_off) as *mut Desc,
                n: descriptors,
            }
        }
    }

    /// The control block.
    pub(super) fn control(&self) -> &Control {
        // SAFETY: the region outlives every worker.
        unsafe { &*self.control }
    }

    /// Worker `i`'s progress slot.
    pub(super) fn slot(&self, i: u32) -> &Slot {
        // SAFETY: i < MAX_WAITERS (checked when the spec is built); the slots array is in the region.
        unsafe { &*self.slots.add(i as usize) }
    }

    /// The control block's (popped, sweeps) counters; read by the parent once the workers are gone.
    pub(super) fn popped_and_sweeps(&self) -> (u64, u64) {
        // SAFETY: workers are gone; the parent reads the region alone.
        unsafe { ((*self.control).popped, (*self.control).sweeps) }
    }
}

/// Links the descriptors into a free list in random order; returns the order (the permutation).
pub(super) fn init_free_list<L>(sh: &Shared<L>, seed: u64) -> Vec<u32> {
    let n = sh.n as usize;
    let mut perm: Vec<u32> = (0..n as u32).collect();
    let mut rng = XorShift::new(seed);
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        perm.swap(i, j);
    }
    // SAFETY: the region is not shared yet; indices are < n.
    unsafe {
        for i in 0..n {
            let d = &mut *sh.descs.add(i);
            d.buf_id = i as u32;
            d.usage_count = 0;
        }
        for w in 0..n {
            let next = if w + 1 < n {
                perm[w + 1] as i32
            } else {
                END_OF_LIST
            };
            (*sh.descs.add(perm[w] as usize)).free_next = next;
        }
        (*sh.control).free_head = if n > 0 {
            perm[0] as i64
        } else {
            END_OF_LIST as i64
        };
    }
    perm
}

/// Checks the free list against the permutation it was built from. Pops only ever remove the head, so a
/// consistent list is exactly `perm[popped..]` in order and every popped descriptor is marked not in the
/// list. (Independent loads in permutation order: far faster than chasing the pointers.)
pub(super) fn check_free_list<L>(sh: &Shared<L>, perm: &[u32], ops_counted: u64) -> Check {
    let n = sh.n as usize;
    // SAFETY: all workers have exited; the parent reads the region alone.
    let (counter, popped, head) = unsafe {
        (
            (*sh.control).counter,
            (*sh.control).popped,
            (*sh.control).free_head,
        )
    };
    let p = (popped as usize).min(n);
    let next_of = |i: usize| -> i32 {
        // SAFETY: perm holds indices < n.
        unsafe { (*sh.descs.add(perm[i] as usize)).free_next }
    };
    let mut ok = popped as usize <= n;
    ok &= if p < n {
        head == perm[p] as i64
    } else {
        head == END_OF_LIST as i64
    };
    let mut len = 0u64;
    for i in p..n {
        let expect = if i + 1 < n {
            perm[i + 1] as i32
        } else {
            END_OF_LIST
        };
        if next_of(i) == expect {
            len += 1;
        } else {
            ok = false;
        }
    }
    let marked = (0..p).filter(|&i| next_of(i) == NOT_IN_LIST).count() as u64;
    let consistent = ok && len + popped == n as u64 && marked == popped && counter == ops_counted;
    Check {
        counter,
        ops_counted,
        popped,
        free_list_len: len,
        marked_not_in_list: marked,
        ok: consistent,
    }
}
