//! Host-state guards: every change a bench makes to the host is made through a guard that restores it on
//! every exit path (return, error, panic, SIGINT, SIGTERM).
//!
//! - [`interrupted`]: SIGINT and SIGTERM set a flag instead of killing the process; benches poll it, stop
//!   their workers, and unwind through the guards.
//! - [`PoolGuard`]: grows a hugetlb pool and shrinks it back on drop. Before changing anything it writes a
//!   record under `/run/preemptlab/`; a run that died without restoring (SIGKILL, power loss) leaves the
//!   record, and the next run restores the pool from it ([`recover_stale_pools`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Installs the SIGINT/SIGTERM handlers (idempotent). After this, Ctrl-C sets the flag; a second Ctrl-C
/// while the flag is set still only sets it: the bench always cleans up.
pub fn install_signal_flag() -> Result<(), String> {
    let flag = FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(flag))
            .map_err(|e| format!("installing a signal handler: {e}"))?;
    }
    Ok(())
}

/// True once SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// Where crash records live.
pub fn record_dir() -> PathBuf {
    std::env::var_os("PREEMPTLAB_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/preemptlab"))
}

fn pool_path(page_kib: u64) -> String {
    format!("/sys/kernel/mm/hugepages/hugepages-{page_kib}kB/nr_hugepages")
}

fn read_pool(page_kib: u64) -> Result<u64, String> {
    let p = pool_path(page_kib);
    let t = std::fs::read_to_string(&p)
        .map_err(|e| format!("reading {p}: {}", hostfacts::host::explain_io_error(&e)))?;
    t.trim().parse().map_err(|_| format!("{p}: not a number"))
}

fn write_pool(page_kib: u64, pages: u64) -> Result<(), String> {
    let p = pool_path(page_kib);
    std::fs::write(&p, format!("{pages}\n")).map_err(|e| {
        format!(
            "writing {p}: {} (needs root)",
            hostfacts::host::explain_io_error(&e)
        )
    })
}

fn free_pages(page_kib: u64) -> Result<u64, String> {
    let p = format!("/sys/kernel/mm/hugepages/hugepages-{page_kib}kB/free_hugepages");
    let t = std::fs::read_to_string(&p).map_err(|e| format!("reading {p}: {e}"))?;
    t.trim().parse().map_err(|_| format!("{p}: not a number"))
}

/// A hugetlb pool temporarily grown; restored to its prior size on drop.
#[derive(Debug)]
pub struct PoolGuard {
    page_kib: u64,
    before: u64,
    record: PathBuf,
    active: bool,
}

impl PoolGuard {
    /// Makes sure `pages` free pages of `page_kib` exist, growing the pool if needed. Returns a guard
    /// that restores the pool's size (a no-op guard when nothing had to change).
    pub fn ensure_free(page_kib: u64, pages: u64) -> Result<PoolGuard, String> {
        let before = read_pool(page_kib)?;
        let free = free_pages(page_kib)?;
        let record = record_dir().join(format!("pool-{page_kib}kB.json"));
        if free >= pages {
            return Ok(PoolGuard {
                page_kib,
                before,
                record,
                active: false,
            });
        }
        let target = before + (pages - free);
        std::fs::create_dir_all(record_dir())
            .map_err(|e| format!("creating {}: {e}", record_dir().display()))?;
        let text = format!(
            "{{\"page_kib\": {page_kib}, \"restore_to\": {before}, \"pid\": {}}}\n",
            std::process::id()
        );
        std::fs::write(&record, text).map_err(|e| format!("writing {}: {e}", record.display()))?;
        let mut guard = PoolGuard {
            page_kib,
            before,
            record,
            active: true,
        };
        write_pool(page_kib, target)?;
        let got = read_pool(page_kib)?;
        if got < target {
            guard.restore();
            return Err(format!(
                "asked the kernel for {target} pages of {page_kib} kB (to have {pages} free) and got {got}: memory is too fragmented; reserve them at boot (hugepages= on the kernel command line)"
            ));
        }
        Ok(guard)
    }

    /// The pool size before the guard changed it.
    pub fn before(&self) -> u64 {
        self.before
    }

    fn restore(&mut self) {
        if !self.active {
            return;
        }
        if let Err(e) = write_pool(self.page_kib, self.before) {
            eprintln!(
                "preemptlab: restoring the {} kB pool to {} pages: {e}",
                self.page_kib, self.before
            );
            return; // keep the record so the next run can retry
        }
        let _ = std::fs::remove_file(&self.record);
        self.active = false;
    }
}

impl Drop for PoolGuard {
    fn drop(&mut self) {
        self.restore();
    }
}

/// Restores pools that a dead run left grown; returns what it did, one line per pool.
pub fn recover_stale_pools() -> Vec<String> {
    let mut done = Vec::new();
    let Ok(rd) = std::fs::read_dir(record_dir()) else {
        return done;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let path = e.path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let (Some(kib), Some(to), Some(pid)) = (
            v["page_kib"].as_u64(),
            v["restore_to"].as_u64(),
            v["pid"].as_u64(),
        ) else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue; // still running
        }
        match write_pool(kib, to) {
            Ok(()) => {
                let _ = std::fs::remove_file(&path);
                done.push(format!(
                    "restored the {kib} kB hugetlb pool to {to} pages, left grown by run {pid}"
                ));
            }
            Err(err) => done.push(format!(
                "could not restore the {kib} kB pool left by run {pid}: {err}"
            )),
        }
    }
    done
}
