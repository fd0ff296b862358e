//! Hugetlb pool reservations that several runs can hold at once.
//!
//! `--reserve-hugepages` grows a pool for a run and gives the pages back afterwards. Two runs that overlap
//! must not undo each other: each run adds its own share to one record per page size and removes only its
//! share, and the pool is always set to the size before any run grew it (`base`) plus the shares still held.
//! The record, `<record_dir>/pool-<kib>kB.json`, is read and written under an exclusive `flock` on
//! `pool-<kib>kB.lock` beside it, so the read-decide-write steps of two runs never interleave.
//!
//! A share names its run by pid and the process start time (field 22 of `/proc/PID/stat`), so a pid reused
//! after a crash is not mistaken for the run. Shares of runs that died are dropped (and their pages given
//! back) by the next run that takes the lock, or by [`recover_stale_pools`].
//!
//! Records written before shares existed (`{"page_kib", "restore_to", "pid"}`) load as one share of unknown
//! size held by that pid: when it is dead, the pool returns to `restore_to`.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::guard::record_dir;

pub use hostfacts::pool_record::{Registry, Share};

/// How many pages a run must add so that `need` pages are free for it, given the pool's free pages and the
/// pages other live runs hold (counted as still free-but-promised: an overestimate that can only grow the pool
/// a little more than needed, never leave a run short).
pub fn share_needed(need: u64, free: u64, held_by_others: u64) -> u64 {
    need.saturating_sub(free.saturating_sub(held_by_others))
}

/// The start time of `pid` (clock ticks since boot), when it runs.
pub fn start_ticks(pid: u32) -> Option<u64> {
    hostfacts::pool_record::stat_start_ticks(
        &std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?,
    )
}

/// Is the run that took `share` still running?
fn alive(share: &Share) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", share.pid)).ok();
    hostfacts::pool_record::share_alive(share, stat.as_deref())
}

fn pool_file(page_kib: u64, name: &str) -> String {
    format!("/sys/kernel/mm/hugepages/hugepages-{page_kib}kB/{name}")
}

fn read_number(path: &str) -> Result<u64, String> {
    let t = std::fs::read_to_string(path)
        .map_err(|e| format!("reading {path}: {}", hostfacts::host::explain_io_error(&e)))?;
    t.trim()
        .parse()
        .map_err(|_| format!("{path}: not a number"))
}

fn read_pool(page_kib: u64) -> Result<u64, String> {
    read_number(&pool_file(page_kib, "nr_hugepages"))
}

fn free_pages(page_kib: u64) -> Result<u64, String> {
    read_number(&pool_file(page_kib, "free_hugepages"))
}

fn write_pool(page_kib: u64, pages: u64) -> Result<(), String> {
    let p = pool_file(page_kib, "nr_hugepages");
    std::fs::write(&p, format!("{pages}\n")).map_err(|e| {
        format!(
            "writing {p}: {} (needs root)",
            hostfacts::host::explain_io_error(&e)
        )
    })
}

/// The record of one pool, held under its lock for as long as this value lives.
struct Locked {
    _lock: std::fs::File,
    path: PathBuf,
    page_kib: u64,
}

impl Locked {
    fn take(dir: &Path, page_kib: u64) -> Result<Locked, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let lock_path = dir.join(format!("pool-{page_kib}kB.lock"));
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| format!("opening {}: {e}", lock_path.display()))?;
        // SAFETY: flock on a file descriptor this function owns (`lock` lives in the returned value and
        // closes, releasing the lock, when it drops); no memory is passed.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(format!(
                "locking {}: {}",
                lock_path.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(Locked {
            _lock: lock,
            path: dir.join(format!("pool-{page_kib}kB.json")),
            page_kib,
        })
    }

    fn load(&self) -> Option<Registry> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        Registry::parse(&text).filter(|r| r.page_kib == self.page_kib)
    }

    /// Writes the record (a unique temp file renamed into place), or removes it when no share is left.
    fn store(&self, reg: &Registry) -> Result<(), String> {
        if reg.shares.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(format!("removing {}: {e}", self.path.display())),
            };
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut tmp = tempfile::NamedTempFile::new_in(dir)
            .map_err(|e| format!("writing a record in {}: {e}", dir.display()))?;
        let text = serde_json::to_string(reg).map_err(|e| e.to_string())?;
        writeln!(tmp, "{text}").map_err(|e| format!("writing {}: {e}", self.path.display()))?;
        tmp.persist(&self.path)
            .map_err(|e| format!("writing {}: {e}", self.path.display()))?;
        Ok(())
    }
}

/// A run's share of a hugetlb pool; given back on drop.
#[derive(Debug)]
pub struct PoolGuard {
    page_kib: u64,
    pages: u64,
    before: u64,
    dir: PathBuf,
    active: bool,
}

impl PoolGuard {
    /// Makes sure `pages` free pages of `page_kib` exist for this run, growing the pool by this run's share
    /// when the free pages (less those other live runs hold) fall short. Returns a guard that gives the share
    /// back (a no-op guard when nothing had to change).
    pub fn ensure_free(page_kib: u64, pages: u64) -> Result<PoolGuard, String> {
        PoolGuard::ensure_free_recorded_in(page_kib, pages, &record_dir())
    }

    /// [`PoolGuard::ensure_free`] with its record in `dir`.
    pub fn ensure_free_recorded_in(
        page_kib: u64,
        pages: u64,
        dir: &Path,
    ) -> Result<PoolGuard, String> {
        let me = std::process::id();
        let locked = Locked::take(dir, page_kib)?;
        let pool = read_pool(page_kib)?;
        let mut reg = locked.load().unwrap_or(Registry {
            page_kib,
            base: pool,
            shares: Vec::new(),
        });
        let dead = reg.prune(alive);
        if !dead.is_empty() {
            // Give back what dead runs held before deciding anything.
            write_pool(page_kib, reg.target())?;
            locked.store(&reg)?;
        }
        let free = free_pages(page_kib)?;
        let share = share_needed(pages, free, reg.held_by_others(me));
        let mut guard = PoolGuard {
            page_kib,
            pages: share,
            before: read_pool(page_kib)?,
            dir: dir.to_path_buf(),
            active: false,
        };
        // Recorded even when nothing is added: the free pages this run counts on are spoken for.
        reg.shares.push(Share {
            pid: me,
            start_ticks: start_ticks(me).unwrap_or(0),
            pages: share,
            need: pages,
        });
        locked.store(&reg)?;
        guard.active = true;
        let target = reg.target().max(guard.before + share);
        write_pool(page_kib, target)?;
        let got = read_pool(page_kib)?;
        if got < target {
            drop(locked);
            guard.give_back();
            return Err(format!(
                "asked the kernel for {target} pages of {page_kib} kB (to have {pages} free) and got {got}: memory is too fragmented; reserve them at boot (hugepages= on the kernel command line)"
            ));
        }
        Ok(guard)
    }

    /// The pool size before this run's share was added.
    pub fn before(&self) -> u64 {
        self.before
    }

    /// Pages this run added (0 when the pool already had enough free).
    pub fn pages(&self) -> u64 {
        self.pages
    }

    fn give_back(&mut self) {
        if !self.active {
            return;
        }
        let res = (|| -> Result<(), String> {
            let locked = Locked::take(&self.dir, self.page_kib)?;
            let Some(mut reg) = locked.load() else {
                return Ok(()); // someone restored it already
            };
            let me = std::process::id();
            reg.shares.retain(|s| s.pid != me);
            reg.prune(alive);
            write_pool(self.page_kib, reg.target())?;
            locked.store(&reg)
        })();
        match res {
            Ok(()) => self.active = false,
            // Keep the share recorded: the next run (or recover_stale_pools) gives it back.
            Err(e) => eprintln!(
                "preemptlab: giving back {} pages of the {} kB pool: {e}",
                self.pages, self.page_kib
            ),
        }
    }
}

impl Drop for PoolGuard {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// Gives back the shares of runs that died without doing so; returns what it did, one line per pool.
pub fn recover_stale_pools() -> Vec<String> {
    recover_stale_pools_in(&record_dir())
}

/// [`recover_stale_pools`] for the records in `dir`.
pub fn recover_stale_pools_in(dir: &Path) -> Vec<String> {
    let mut done = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return done;
    };
    let kibs: Vec<u64> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_prefix("pool-")?
                .strip_suffix("kB.json")?
                .parse()
                .ok()
        })
        .collect();
    for kib in kibs {
        let res = (|| -> Result<Option<String>, String> {
            let locked = Locked::take(dir, kib)?;
            let Some(mut reg) = locked.load() else {
                return Ok(None);
            };
            let dead = reg.prune(alive);
            if dead.is_empty() {
                return Ok(None);
            }
            write_pool(kib, reg.target())?;
            locked.store(&reg)?;
            let pids: Vec<String> = dead.iter().map(|s| s.pid.to_string()).collect();
            Ok(Some(format!(
                "gave back the {kib} kB hugetlb pages left by run(s) {}: pool now {} pages",
                pids.join(", "),
                reg.target()
            )))
        })();
        match res {
            Ok(Some(line)) => done.push(line),
            Ok(None) => {}
            Err(e) => done.push(format!("could not restore the {kib} kB pool: {e}")),
        }
    }
    done
}

/// Pages of each pool (by page size, kB) that live preemptlab runs added for themselves, read from the
/// records in `dir`: an audit counts them as temporary, not as another user's demand.
pub fn held_by_runs(dir: &Path) -> Vec<(u64, u64)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(u64, u64)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| Registry::parse(&std::fs::read_to_string(e.path()).ok()?))
        .map(|mut r| {
            r.prune(alive);
            (r.page_kib, r.target() - r.base)
        })
        .filter(|&(_, p)| p > 0)
        .collect();
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_record_is_one_share_of_unknown_size() {
        let r = Registry::parse(r#"{"page_kib": 2048, "restore_to": 0, "pid": 42}"#).unwrap();
        assert_eq!(r.base, 0);
        assert_eq!(r.shares.len(), 1);
        assert_eq!(r.target(), 0);
    }

    #[test]
    fn share_counts_other_runs_pages_as_promised() {
        // Pool of 513 grown by run A for 513 pages, all still free: run B needing 513 grows by its own 513.
        assert_eq!(share_needed(513, 513, 513), 513);
        // An admin's free pool of 1000 covers a run needing 513.
        assert_eq!(share_needed(513, 1000, 0), 0);
        // Partly covered.
        assert_eq!(share_needed(513, 600, 200), 113);
    }

    #[test]
    fn overlapping_runs_give_back_in_either_order() {
        let mut r = Registry {
            page_kib: 2048,
            base: 7,
            shares: vec![],
        };
        r.shares.push(Share {
            pid: 1,
            start_ticks: 5,
            pages: 513,
            need: 0,
        });
        r.shares.push(Share {
            pid: 2,
            start_ticks: 6,
            pages: 300,
            need: 0,
        });
        assert_eq!(r.target(), 820);
        r.shares.retain(|s| s.pid != 1);
        assert_eq!(r.target(), 307);
        r.shares.retain(|s| s.pid != 2);
        assert_eq!(r.target(), 7);
    }

    #[test]
    fn a_reused_pid_is_not_the_run() {
        let me = std::process::id();
        let now = start_ticks(me).unwrap();
        assert!(alive(&Share {
            pid: me,
            start_ticks: now,
            pages: 1,
            need: 0,
        }));
        assert!(!alive(&Share {
            pid: me,
            start_ticks: now + 1,
            pages: 1,
            need: 0,
        }));
    }

    #[test]
    fn records_round_trip_and_prune() {
        let dir = tempfile::tempdir().unwrap();
        let locked = Locked::take(dir.path(), 2048).unwrap();
        let reg = Registry {
            page_kib: 2048,
            base: 3,
            shares: vec![
                Share {
                    pid: std::process::id(),
                    start_ticks: start_ticks(std::process::id()).unwrap(),
                    pages: 10,
                    need: 0,
                },
                Share {
                    pid: u32::MAX - 1,
                    start_ticks: 1,
                    pages: 20,
                    need: 0,
                },
            ],
        };
        locked.store(&reg).unwrap();
        assert_eq!(locked.load().unwrap(), reg);
        drop(locked);
        assert_eq!(held_by_runs(dir.path()), vec![(2048, 10)]);
        // No temp file is left beside the record.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
