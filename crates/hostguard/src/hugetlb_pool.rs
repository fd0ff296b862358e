//! Hugetlb pool reservations that several runs can hold at once.
//!
//! `--reserve-hugepages` grows a pool for a run and gives the pages back afterwards. Two runs that overlap
//! must not undo each other: each run adds its own share to one record per page size and removes only its
//! share, and the pool is always set to the operator's part (`base`) plus the shares still held. The record,
//! `<record_dir>/pool-<kib>kB.json`, is read and written under an exclusive `flock` on `pool-<kib>kB.lock`
//! beside it, so the read-decide-write steps of two runs never interleave.
//!
//! What the pool's files mean, and the one reader of them, is [`hostfacts::hugepages::sysfs`].
//!
//! The operator's pages are never taken: while only preemptlab writes the pool, its persistent size is the
//! record's `base` plus every recorded share. When it is not, someone resized the pool by hand since the last
//! run wrote the record; the new size is theirs (`base` becomes the size less the live shares), and shares
//! of runs that died are left in the pool rather than taken out of what the operator set.
//!
//! A share names its run by pid and the process start time (field 22 of `/proc/PID/stat`), so a pid reused
//! after a crash is not mistaken for the run. Shares of runs that died are dropped (and their pages given
//! back) by the next run that takes the lock, or by [`recover_stale_pools`]. A run records its share even
//! when it adds nothing: the free pages it counts on are then spoken for, and an overlapping run grows the
//! pool for itself instead of counting them too.
//!
//! The pool's size is read as a pair of counts that did not move while read ([`HugetlbPool::persistent`]): a
//! user leaving a pool shrunk under it frees surplus pages, and a read straddling that took the pool for
//! larger by a whole mapping, a resize by hand, and the run kept its share's pages for good. A user that
//! arrives while a run holds its share can take the share's pages; the run gives the pool back to where it
//! was and says who holds the pages in use beyond it ([`still_in_use`]).
//!
//! Records written before shares existed (`{"page_kib", "restore_to", "pid"}`) load as one share of unknown
//! size held by that pid: when it is dead, the pool returns to `restore_to`.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use osutil::explain_io_error as explain;

use crate::record_dir;

use hostfacts::hugepages::record::{Registry, Share};
use hostfacts::hugepages::sysfs::{HugetlbPool, PoolFileError};
use results::host::hugepages::Applied;

/// Why a pool could not be read, grown, given back or recorded.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// A pool file could not be read or written.
    #[error(transparent)]
    File(#[from] PoolFileError),
    /// The kernel found fewer pages than asked for.
    #[error("asked the kernel for {target} pages of {page_kib} kB (to have {wanted} free) and got {got}: memory is too fragmented; reserve them at boot (hugepages= on the kernel command line)")]
    Fragmented {
        /// Huge page size, kB.
        page_kib: u64,
        /// The persistent pool size asked for.
        target: u64,
        /// Pages the run wanted free.
        wanted: u64,
        /// The size the pool reached.
        got: u64,
    },
    /// The shared record, its lock or its directory could not be used (`why` is the explained I/O error).
    #[error("{action} the pool record {}: {why}", path.display())]
    Record {
        /// What was being done: "creating", "locking", "writing", ...
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// The record could not be encoded.
    #[error("encoding the pool record: {0}")]
    Encode(#[from] serde_json::Error),
}

/// How many pages a run must add so that `need` pages are there for it, given the pages a new mapping can
/// have now (`available`: free, not reserved) and the pages other live runs count on. Those runs' pages
/// that are already mapped are missing from `available` and counted again in `held_by_others`: an
/// overestimate that can only grow the pool a little more than needed, never leave a run short.
pub fn share_needed(need: u64, available: u64, held_by_others: u64) -> u64 {
    need.saturating_sub(available.saturating_sub(held_by_others))
}

/// The start time of `pid` (clock ticks since boot), when it runs.
pub fn start_ticks(pid: u32) -> Option<u64> {
    hostfacts::hugepages::record::stat_start_ticks(
        &std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?,
    )
}

/// Is the run that took `share` still running?
pub fn alive(share: &Share) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", share.pid)).ok();
    hostfacts::hugepages::record::share_alive(share, stat.as_deref())
}

/// A share from a record written before shares had sizes: what it added is unknown.
fn unknown_size(share: &Share) -> bool {
    share.pages == 0 && share.need == 0
}

/// What [`reconcile`] did with the shares of runs that died.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reconciled {
    /// The shares dropped.
    dead: Vec<Share>,
    /// The pool was resized by someone else since the record was written: its size became the operator's
    /// and the dead runs' pages were left in it.
    resized: bool,
}

/// Brings `reg` in line with the pool's persistent size `now`: a size other than the record's means someone
/// else resized the pool, and what they set is the operator's (less the live shares); dead runs' shares are
/// dropped. The pool should then be `reg.target()`, or stay at `now` when that is less.
fn reconcile(reg: &mut Registry, now: u64, alive: impl Fn(&Share) -> bool) -> Reconciled {
    let resized = reg.target() != now && !reg.shares.iter().any(unknown_size);
    let dead = reg.prune(alive);
    if resized {
        let held: u64 = reg.shares.iter().map(|s| s.pages).sum();
        reg.base = now.saturating_sub(held);
    }
    Reconciled { dead, resized }
}

/// The record of one pool, held under its lock for as long as this value lives.
struct Locked {
    _lock: std::fs::File,
    path: PathBuf,
    page_kib: u64,
}

impl Locked {
    fn take(dir: &Path, page_kib: u64) -> Result<Locked, PoolError> {
        std::fs::create_dir_all(dir).map_err(|e| PoolError::Record {
            action: "creating",
            path: dir.to_path_buf(),
            why: explain(&e),
        })?;
        let lock_path = dir.join(format!("pool-{page_kib}kB.lock"));
        let lock = crate::open_lock_file(&lock_path).map_err(|e| PoolError::Record {
            action: "opening",
            path: lock_path.clone(),
            why: explain(&e),
        })?;
        // SAFETY: flock on a file descriptor this function owns (`lock` lives in the returned value and
        // closes, releasing the lock, when it drops); no memory is passed.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(PoolError::Record {
                action: "locking",
                path: lock_path,
                why: explain(&std::io::Error::last_os_error()),
            });
        }
        Ok(Locked {
            _lock: lock,
            path: dir.join(format!("pool-{page_kib}kB.json")),
            page_kib,
        })
    }

    /// The record, None when there is none (or it is no record of this pool); an error when something
    /// other than a regular file is there (a FIFO would hang the read).
    fn load(&self) -> Result<Option<Registry>, PoolError> {
        let text = crate::read_record(&self.path).map_err(|e| PoolError::Record {
            action: "reading",
            path: self.path.clone(),
            why: explain(&e),
        })?;
        Ok(text
            .and_then(|t| Registry::parse(&t))
            .filter(|r| r.page_kib == self.page_kib))
    }

    /// Writes the record (a unique temp file renamed into place), or removes it when no share is left.
    fn store(&self, reg: &Registry) -> Result<(), PoolError> {
        let failed = |action, e: std::io::Error| PoolError::Record {
            action,
            path: self.path.clone(),
            why: explain(&e),
        };
        if reg.shares.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(failed("removing", e)),
            };
        }
        let text = serde_json::to_string(reg)?;
        osutil::output::write_atomic(&self.path, &(text + "\n")).map_err(|e| PoolError::Record {
            action: "writing",
            path: self.path.clone(),
            why: e.explained(),
        })
    }

    /// The record reconciled with `pool` ([`reconcile`]), the pool set to what it calls for and the record
    /// stored when either changed; a fresh record (the whole pool the operator's) when there is none.
    fn sync(&self, pool: &HugetlbPool) -> Result<(Registry, Reconciled), PoolError> {
        let now = pool.persistent()?;
        let Some(mut reg) = self.load()? else {
            let fresh = Registry {
                page_kib: self.page_kib,
                base: now,
                shares: Vec::new(),
            };
            let done = Reconciled {
                dead: Vec::new(),
                resized: false,
            };
            return Ok((fresh, done));
        };
        let old = reg.clone();
        let done = reconcile(&mut reg, now, alive);
        // Only dead runs' pages go: after a resize by hand the target is the size found (or, when the
        // operator shrank it below the live shares, more: left as they set it). While a run of an earlier
        // version lives (a share of unknown size), its pages are in `now` but not in the target: nothing goes.
        if reg.target() < now && !reg.shares.iter().any(unknown_size) {
            pool.set_persistent(reg.target())?;
        }
        if reg != old {
            self.store(&reg)?;
        }
        Ok((reg, done))
    }
}

/// A run's share of a hugetlb pool; given back on drop.
#[derive(Debug)]
pub struct PoolGuard {
    pool: HugetlbPool,
    share: Share,
    dir: PathBuf,
    active: bool,
}

impl PoolGuard {
    /// Makes sure `pages` pages of `page_kib` are there for this run, growing the pool by this run's share
    /// when the available pages (less those other live runs count on) fall short. Returns a guard that gives
    /// the share back.
    pub fn ensure_free(page_kib: u64, pages: u64) -> Result<PoolGuard, PoolError> {
        PoolGuard::ensure_free_recorded_in(page_kib, pages, &record_dir())
    }

    /// [`PoolGuard::ensure_free`] with its record in `dir`.
    pub fn ensure_free_recorded_in(
        page_kib: u64,
        pages: u64,
        dir: &Path,
    ) -> Result<PoolGuard, PoolError> {
        PoolGuard::reserve(&HugetlbPool::of(page_kib), pages, dir)
    }

    /// [`PoolGuard::ensure_free`] on `pool` with its record in `dir`.
    pub fn reserve(pool: &HugetlbPool, pages: u64, dir: &Path) -> Result<PoolGuard, PoolError> {
        let me = std::process::id();
        let locked = Locked::take(dir, pool.page_kib())?;
        let (mut reg, _) = locked.sync(pool)?;
        let before = pool.persistent()?;
        let short = share_needed(pages, pool.available()?, reg.held_by_others(me));
        // Growing the pool first turns surplus pages (in use beyond it) into persistent ones, which frees
        // nothing (mm/hugetlb.c, set_max_huge_pages: "First take pages out of surplus state"): the share
        // counts them, so that `short` fresh pages come after them; given back, they are surplus again.
        let share = match short {
            0 => 0,
            n => n + pool.surplus()?,
        };
        let mine = Share {
            pid: me,
            start_ticks: start_ticks(me).unwrap_or(0),
            pages: share,
            need: pages,
        };
        // Recorded even when nothing is added: the pages this run counts on are spoken for. Recorded before
        // the pool grows: a run killed in between leaves a share the pool does not have, which the next run
        // reads as a resize and drops without taking anything from the operator's part.
        reg.shares.push(mine.clone());
        locked.store(&reg)?;
        let target = before + share;
        let grown = if share == 0 {
            Ok(())
        } else {
            // Checked on nr_hugepages itself: once the pool has grown past the pages in use, none is surplus.
            pool.set_persistent(target)
                .map_err(PoolError::from)
                .and_then(|()| match pool.read("nr_hugepages")? {
                    got if got < target => Err(PoolError::Fragmented {
                        page_kib: pool.page_kib(),
                        target,
                        wanted: pages,
                        got,
                    }),
                    _ => Ok(()),
                })
        };
        if let Err(e) = grown {
            let _ = pool.set_persistent(before);
            reg.shares.pop();
            let _ = locked.store(&reg);
            return Err(e);
        }
        Ok(PoolGuard {
            pool: pool.clone(),
            share: mine,
            dir: dir.to_path_buf(),
            active: true,
        })
    }

    /// Pages this run added (0 when the pool already had enough available).
    pub fn pages(&self) -> u64 {
        self.share.pages
    }

    fn give_back(&mut self) {
        if !self.active {
            return;
        }
        let res = (|| -> Result<u64, PoolError> {
            let locked = Locked::take(&self.dir, self.pool.page_kib())?;
            let (mut reg, _) = locked.sync(&self.pool)?;
            let Some(i) = reg.shares.iter().position(|s| *s == self.share) else {
                return Ok(0); // the record was removed: nothing of this run's is known any more
            };
            reg.shares.remove(i);
            // Never grows the pool, and never below the operator's part.
            if reg.target() < self.pool.persistent()? {
                self.pool.set_persistent(reg.target())?;
            }
            locked.store(&reg)?;
            Ok(self.pool.surplus().unwrap_or(0))
        })();
        match res {
            Ok(surplus) => {
                self.active = false;
                // Pages in use beyond the pool it went back to: a user that arrived while the run held its
                // share maps them; they return to the kernel as it lets them go (issue 46 item 11).
                if surplus > 0 {
                    osutil::msg!(
                        "preemptlab: {}",
                        still_in_use(&self.pool, surplus, &holders(self.pool.page_kib()))
                    );
                }
            }
            // Keep the share recorded: the next run (or recover_stale_pools) gives it back.
            Err(e) => osutil::msg!(
                "preemptlab: giving back {} pages of the {} kB pool: {e}",
                self.share.pages,
                self.pool.page_kib()
            ),
        }
    }
}

/// The processes that map pages of the `page_kib` pool, with how many: `(pid, command, pages)`, from every
/// `/proc/PID/smaps` readable ([`hostfacts::memory::hugetlb_pages_mapped`]). Read only when pages stay in
/// use beyond a pool given back.
pub fn holders(page_kib: u64) -> Vec<(u32, String, u64)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<(u32, String, u64)> = rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
            let pages = hostfacts::memory::hugetlb_pages_mapped(&smaps, page_kib);
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            (pages > 0).then(|| (pid, comm.trim().to_string(), pages))
        })
        .collect();
    out.sort_by_key(|h| std::cmp::Reverse(h.2));
    out
}

/// What a run says when it gave its share back and `surplus` pages of `pool` stay in use beyond it: the
/// pool is as before the run, and who holds those pages (`holders`, largest first; several processes of one
/// server map one segment, so the list names processes, not separate demands).
pub fn still_in_use(pool: &HugetlbPool, surplus: u64, holders: &[(u32, String, u64)]) -> String {
    const SHOWN: usize = 5;
    let mut named: Vec<String> = holders
        .iter()
        .take(SHOWN)
        .map(|(pid, comm, pages)| format!("{comm} (pid {pid}) maps {pages}"))
        .collect();
    if holders.len() > SHOWN {
        named.push(format!("and {} more processes", holders.len() - SHOWN));
    }
    format!(
        "gave back this run's pages of the {} kB pool; {surplus} pages in use beyond it stay until their users let them go (then the kernel frees them): {}",
        pool.page_kib(),
        match named.is_empty() {
            true => "no process's mapping readable here".to_string(),
            false => named.join(", "),
        }
    )
}

impl Drop for PoolGuard {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// Grows the operator's part of the host's pool of `page_kib` pages to `target` (never shrinks it): what
/// `hugepages --apply` does. See [`grow_operators_part_in`].
pub fn grow_operators_part(page_kib: u64, target: u64) -> Result<Applied, PoolError> {
    grow_operators_part_in(&HugetlbPool::of(page_kib), target, &record_dir())
}

/// Grows the operator's part of `pool` (its persistent size less the pages live runs added, recorded in
/// `dir`) to `target`, under the record's lock: the runs' shares stay on top of it, so that when they end
/// and give their pages back the pool is `target`, not `target` less their shares. Never shrinks it.
/// `before` and `obtained` in the answer are the operator's part; less than `target` obtained means the
/// kernel found too few free pages (fragmented memory).
pub fn grow_operators_part_in(
    pool: &HugetlbPool,
    target: u64,
    dir: &Path,
) -> Result<Applied, PoolError> {
    let locked = Locked::take(dir, pool.page_kib())?;
    let (mut reg, _) = locked.sync(pool)?;
    let held: u64 = reg.shares.iter().map(|s| s.pages).sum();
    let before = pool.persistent()?.saturating_sub(held);
    let path = pool.dir().join("nr_hugepages").display().to_string();
    if before >= target {
        return Ok(Applied {
            path,
            before,
            requested: target,
            obtained: before,
        });
    }
    pool.set_persistent(target + held)?;
    let obtained = pool.persistent()?.saturating_sub(held);
    if !reg.shares.is_empty() {
        reg.base = obtained;
        locked.store(&reg)?;
    }
    Ok(Applied {
        path,
        before,
        requested: target,
        obtained,
    })
}

/// Gives back the shares of runs that died without doing so; returns what it did, one line per pool.
pub fn recover_stale_pools() -> Vec<String> {
    recover_stale_pools_in(&record_dir())
}

/// [`recover_stale_pools`] for the records in `dir`.
pub fn recover_stale_pools_in(dir: &Path) -> Vec<String> {
    recover_stale_pools_under(Path::new("/"), dir)
}

/// [`recover_stale_pools_in`] for the pools under `root`.
fn recover_stale_pools_under(root: &Path, dir: &Path) -> Vec<String> {
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
        let res = (|| -> Result<Option<String>, PoolError> {
            let locked = Locked::take(dir, kib)?;
            let (reg, r) = locked.sync(&HugetlbPool::under(root, kib))?;
            if r.dead.is_empty() {
                return Ok(None);
            }
            let pids: Vec<String> = r.dead.iter().map(|s| s.pid.to_string()).collect();
            Ok(Some(if r.resized {
                format!(
                    "run(s) {} ended without giving back their {kib} kB hugetlb pages, and the pool was resized by hand since: left it at {} pages",
                    pids.join(", "),
                    reg.target()
                )
            } else {
                format!(
                    "gave back the {kib} kB hugetlb pages left by run(s) {}: pool now {} pages",
                    pids.join(", "),
                    reg.target()
                )
            }))
        })();
        match res {
            Ok(Some(line)) => done.push(line),
            Ok(None) => {}
            Err(e) => done.push(format!("could not restore the {kib} kB pool: {e}")),
        }
    }
    done
}

#[cfg(test)]
pub(crate) mod tests;
