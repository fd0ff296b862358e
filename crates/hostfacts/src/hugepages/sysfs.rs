//! One hugetlb pool's sysfs files, read and resized: the one reader of the pool's size that `hugepages
//! --apply` and the benches' reservations (crate `lab`, module `pool`) share.
//!
//! What the kernel's files mean (Documentation/admin-guide/mm/hugetlbpage.rst, mm/hugetlb.c):
//! - `nr_hugepages` in sysfs counts the persistent pages *and* the surplus ones (pages still in use after the
//!   pool was shrunk below them, or overcommitted pages); writing it sets the persistent count, which is what
//!   `/proc/sys/vm/nr_hugepages` shows. The pool the operator set is `nr_hugepages - surplus_hugepages`:
//!   counting surplus pages in would turn a leftover user's pages into persistent ones at the next write.
//! - `free_hugepages` counts pages not faulted in, including those reserved (`resv_hugepages`) for mappings
//!   already made: a PostgreSQL server maps its whole segment at start and faults it in as it goes. Only
//!   `free - resv` is there for a new mapping.

use std::path::{Path, PathBuf};

use osutil::explain_io_error as explain;

/// Why a pool's files could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PoolFileError {
    /// The kernel has no pool of this page size.
    #[error("this kernel has no {page_kib} kB hugetlb pool ({} is missing)", dir.display())]
    NoPool {
        /// Huge page size, kB.
        page_kib: u64,
        /// The pool's sysfs directory.
        dir: PathBuf,
    },
    /// A pool file could not be read (`why` is the explained I/O error).
    #[error("reading {}: {why}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// A pool file held something other than a count.
    #[error("{}: not a number ({text:?})", path.display())]
    NotANumber {
        /// The file.
        path: PathBuf,
        /// What it held.
        text: String,
    },
    /// The pool's counts moved in every read of them (surplus pages freed without pause).
    #[error("the pool in {} kept changing while it was read ({PERSISTENT_READS} reads; last {last} pages): try again", dir.display())]
    Unsettled {
        /// The pool's sysfs directory.
        dir: PathBuf,
        /// The last figure read.
        last: u64,
    },
    /// The pool could not be resized (`why` is the explained I/O error).
    #[error("resizing the pool through {}: {why}", path.display())]
    Resize {
        /// The file written.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
}

/// How many times [`HugetlbPool::persistent`] and [`HugetlbPool::available`] read the counts for a pair
/// that did not move.
pub const PERSISTENT_READS: usize = 1000;

/// One hugetlb pool's files: `<root>/sys/kernel/mm/hugepages/hugepages-<kib>kB/` (root `/` on the host; tests
/// give a directory of their own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HugetlbPool {
    dir: PathBuf,
    page_kib: u64,
}

impl HugetlbPool {
    /// The host's pool of `page_kib` pages.
    pub fn of(page_kib: u64) -> HugetlbPool {
        HugetlbPool::under(Path::new("/"), page_kib)
    }

    /// The pool of `page_kib` pages under `root`.
    pub fn under(root: &Path, page_kib: u64) -> HugetlbPool {
        HugetlbPool {
            dir: root.join(format!("sys/kernel/mm/hugepages/hugepages-{page_kib}kB")),
            page_kib,
        }
    }

    /// The page size, kB.
    pub fn page_kib(&self) -> u64 {
        self.page_kib
    }

    /// The pool's sysfs directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The count in one of the pool's files (`nr_hugepages`, `free_hugepages`, ...).
    pub fn read(&self, name: &str) -> Result<u64, PoolFileError> {
        let path = self.dir.join(name);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound && !self.dir.is_dir() {
                PoolFileError::NoPool {
                    page_kib: self.page_kib,
                    dir: self.dir.clone(),
                }
            } else {
                PoolFileError::Read {
                    path: path.clone(),
                    why: explain(&e),
                }
            }
        })?;
        text.trim().parse().map_err(|_| PoolFileError::NotANumber {
            path,
            text: text.trim().to_string(),
        })
    }

    /// The persistent pool: what `vm.nr_hugepages` shows and writing `nr_hugepages` sets, without the
    /// surplus pages that the kernel frees as their users release them.
    ///
    /// Two files, read one after the other: a surplus page freed between the reads lowers both counts, and
    /// `nr_hugepages` read before it with `surplus_hugepages` read after it gave a pool larger by the pages
    /// freed meanwhile (as many as a departing user's whole mapping, read by a process preempted between the
    /// two reads on a loaded host). A run that took that for the operator resizing the pool kept those pages
    /// for good (issue 46 item 11). So `nr_hugepages` is read again after `surplus_hugepages`, and the pair
    /// counts only when it did not move ([`PERSISTENT_READS`] tries).
    pub fn persistent(&self) -> Result<u64, PoolFileError> {
        self.settled("nr_hugepages", "surplus_hugepages")
    }

    /// `first` less `second`, read as `first`, `second`, `first` again until `first` did not move between
    /// (both move together when pages are freed or faulted in), at most [`PERSISTENT_READS`] times.
    fn settled(&self, first: &str, second: &str) -> Result<u64, PoolFileError> {
        let mut last = 0;
        for _ in 0..PERSISTENT_READS {
            let a = self.read(first)?;
            let b = self.read(second)?;
            let again = self.read(first)?;
            if a == again {
                return Ok(a.saturating_sub(b));
            }
            last = again.saturating_sub(b);
        }
        Err(PoolFileError::Unsettled {
            dir: self.dir.clone(),
            last,
        })
    }

    /// Pages in use beyond the persistent pool (`surplus_hugepages`).
    pub fn surplus(&self) -> Result<u64, PoolFileError> {
        self.read("surplus_hugepages")
    }

    /// Pages a new mapping can have: free ones not reserved for mappings already made. Read as
    /// [`HugetlbPool::persistent`] is: `free_hugepages` again after `resv_hugepages`, the pair taken only
    /// when it did not move (a mapping faulting its reserved pages in, or a user leaving, moves both).
    pub fn available(&self) -> Result<u64, PoolFileError> {
        self.settled("free_hugepages", "resv_hugepages")
    }

    /// Sets the persistent pool to `pages` (the kernel keeps pages in use beyond it as surplus).
    pub fn set_persistent(&self, pages: u64) -> Result<(), PoolFileError> {
        let path = self.dir.join("nr_hugepages");
        std::fs::write(&path, format!("{pages}\n")).map_err(|e| PoolFileError::Resize {
            path,
            why: explain(&e),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(nr: u64, free: u64, resv: u64, surplus: u64) -> (tempfile::TempDir, HugetlbPool) {
        let root = tempfile::tempdir().unwrap();
        let pool = HugetlbPool::under(root.path(), 2048);
        std::fs::create_dir_all(pool.dir()).unwrap();
        for (name, v) in [
            ("nr_hugepages", nr),
            ("free_hugepages", free),
            ("resv_hugepages", resv),
            ("surplus_hugepages", surplus),
        ] {
            std::fs::write(pool.dir().join(name), format!("{v}\n")).unwrap();
        }
        (root, pool)
    }

    #[test]
    fn surplus_pages_are_not_the_persistent_pool() {
        // 100 persistent pages and 20 overcommitted ones in use: sysfs nr_hugepages says 120.
        let (_root, p) = pool(120, 5, 3, 20);
        assert_eq!(p.persistent().unwrap(), 100);
        assert_eq!(p.available().unwrap(), 2);
        p.set_persistent(150).unwrap();
        assert_eq!(p.read("nr_hugepages").unwrap(), 150);
    }

    #[test]
    fn a_missing_pool_and_a_bad_count_say_so() {
        let root = tempfile::tempdir().unwrap();
        let e = HugetlbPool::under(root.path(), 1048576)
            .persistent()
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("this kernel has no 1048576 kB hugetlb pool"),
            "{e}"
        );
        let (_root, p) = pool(1, 1, 0, 0);
        std::fs::write(p.dir().join("surplus_hugepages"), "x\n").unwrap();
        assert!(p
            .persistent()
            .unwrap_err()
            .to_string()
            .contains("not a number"));
    }
}
