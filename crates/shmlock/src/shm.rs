//! Shared anonymous memory with a chosen page backing, inherited by fork()ed workers.
//!
//! After fork() a child does not inherit page-table entries for MAP_SHARED memory (the kernel copies them
//! only for private anonymous and PFN mappings), so every worker takes its own first-touch minor faults on
//! 4 KB pages, exactly like PostgreSQL backends on `shared_buffers`.

// How the region is backed: the names are `axes`' (the schema and the command line share them).
use axes::Backing;

/// Why a region could not be mapped or prepared.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// A hugetlb mapping the pool has too few free pages for (mmap: ENOMEM).
    #[error(
        "mapping {} MiB on {backing} pages: the hugetlb pool has too few free pages (need {pages}; grow it as root: /sys/kernel/mm/hugepages/hugepages-{}kB/nr_hugepages)",
        .bytes >> 20,
        .backing.hugetlb_kib().unwrap_or(0)
    )]
    PoolTooSmall {
        /// The mapping's length.
        bytes: usize,
        /// Its backing.
        backing: Backing,
        /// The pages it needs.
        pages: u64,
    },
    /// mmap refused for another reason.
    #[error("mmap of {} MiB ({backing}): {err}", .bytes >> 20)]
    Map {
        /// The mapping's length.
        bytes: usize,
        /// Its backing.
        backing: Backing,
        /// What mmap said.
        err: std::io::Error,
    },
    /// madvise(MADV_HUGEPAGE) refused (shared-memory THP).
    #[error("madvise(MADV_HUGEPAGE): {err}")]
    AdviseHuge {
        /// What madvise said.
        err: std::io::Error,
    },
    /// madvise(MADV_POPULATE_WRITE) refused or not known to the kernel.
    #[error("madvise(MADV_POPULATE_WRITE): {err} (Linux 5.14+)")]
    Populate {
        /// What madvise said.
        err: std::io::Error,
    },
}

const MAP_HUGE_SHIFT: libc::c_int = 26;
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// A shared anonymous mapping, unmapped on drop.
#[derive(Debug)]
pub struct ShmRegion {
    ptr: *mut u8,
    len: usize,
    backing: Backing,
}

// SAFETY: the region is plain shared memory; what is stored in it decides its own synchronization.
unsafe impl Send for ShmRegion {}
// SAFETY: as above; ShmRegion itself only hands out its base pointer.
unsafe impl Sync for ShmRegion {}

impl ShmRegion {
    /// Maps `len` bytes (rounded up to the backing's page size), zero-filled.
    pub fn new(len: usize, backing: Backing) -> Result<ShmRegion, ShmError> {
        let page = backing.page_bytes();
        let len = len.div_ceil(page) * page;
        let mut flags = libc::MAP_SHARED | libc::MAP_ANONYMOUS;
        match backing {
            Backing::Hugetlb2m => flags |= libc::MAP_HUGETLB | (21 << MAP_HUGE_SHIFT),
            Backing::Hugetlb1g => flags |= libc::MAP_HUGETLB | (30 << MAP_HUGE_SHIFT),
            _ => {}
        }
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            return Err(match (backing.hugetlb_kib(), err.raw_os_error()) {
                (Some(kib), Some(libc::ENOMEM)) => ShmError::PoolTooSmall {
                    bytes: len,
                    backing,
                    pages: len as u64 / (kib * 1024),
                },
                _ => ShmError::Map {
                    bytes: len,
                    backing,
                    err,
                },
            });
        }
        let region = ShmRegion {
            ptr: ptr as *mut u8,
            len,
            backing,
        };
        if backing == Backing::Thp {
            // SAFETY: advising our own fresh mapping.
            if unsafe { libc::madvise(ptr, len, libc::MADV_HUGEPAGE) } != 0 {
                let err = std::io::Error::last_os_error();
                return Err(ShmError::AdviseHuge { err });
            }
        }
        Ok(region)
    }

    /// The base address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The mapped length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the mapping is empty (never: mappings are at least one page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The backing.
    pub fn backing(&self) -> Backing {
        self.backing
    }

    /// Pre-faults the whole region writable in the calling process (MADV_POPULATE_WRITE, Linux 5.14+).
    pub fn populate_write(&self) -> Result<(), ShmError> {
        // SAFETY: advising our own mapping; populating does not change its contents.
        if unsafe { libc::madvise(self.ptr as *mut libc::c_void, self.len, MADV_POPULATE_WRITE) }
            != 0
        {
            let err = std::io::Error::last_os_error();
            return Err(ShmError::Populate { err });
        }
        Ok(())
    }
}

impl Drop for ShmRegion {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping we created; nothing borrows it past the region's life.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_k_region_is_zeroed_and_rounded() {
        let r = ShmRegion::new(5000, Backing::Page4k).unwrap();
        assert_eq!(r.len(), 8192);
        // SAFETY: the region is 8192 bytes and ours.
        let s = unsafe { std::slice::from_raw_parts(r.as_ptr(), r.len()) };
        assert!(s.iter().all(|b| *b == 0));
        r.populate_write().unwrap();
    }
}
