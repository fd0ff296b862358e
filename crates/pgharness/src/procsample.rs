//! Per-second sampling of a process tree (a postmaster and its children) and of the host's memory counters
//! while a benchmark runs: page tables (the sum of VmPTE), Pss, minor faults and context switches of the
//! tree, and PageTables and the hugetlb pool from /proc/meminfo.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use results::pg::{Sample, Sampled};

/// One process's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcCounters {
    /// VmPTE, kB.
    pub vm_pte_kib: u64,
    /// Pss from smaps_rollup, kB (when read).
    pub pss_kib: Option<u64>,
    /// RssShmem from status, kB (shared memory pages mapped, counted in every process mapping them).
    pub rss_shmem_kib: u64,
    /// Minor faults (stat field 10).
    pub minflt: u64,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
}

/// Parses the fields this module needs from `/proc/PID/stat`: (ppid, minflt).
pub fn stat_fields(text: &str) -> Option<(u32, u64)> {
    hostfacts::parse::PidStat::parse(text).map(|s| (s.ppid, s.minflt))
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    read(&format!("/proc/{pid}/stat"))
        .and_then(|t| hostfacts::parse::PidStat::parse(&t))
        .is_some_and(|s| s.state != 'Z')
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Reads one process's counters (Pss only with `pss`: smaps_rollup walks the process's page tables,
/// which costs CPU in proportion to them); None when it is gone.
pub fn read_process(pid: u32, pss: bool) -> Option<ProcCounters> {
    let (_, minflt) = stat_fields(&read(&format!("/proc/{pid}/stat"))?)?;
    let status = read(&format!("/proc/{pid}/status"))?;
    let kib = hostfacts::parse::kv_kib(&status);
    let num = |k: &str| kib.get(k).copied().unwrap_or(0);
    let pss = if pss {
        read(&format!("/proc/{pid}/smaps_rollup"))
            .and_then(|t| hostfacts::parse::kv_kib(&t).get("Pss").copied())
    } else {
        None
    };
    Some(ProcCounters {
        vm_pte_kib: num("VmPTE"),
        pss_kib: pss,
        rss_shmem_kib: num("RssShmem"),
        minflt,
        nvcsw: num("voluntary_ctxt_switches"),
        nivcsw: num("nonvoluntary_ctxt_switches"),
    })
}

/// `root` and its direct children (a postmaster's backends and auxiliary processes are its children).
pub fn tree(root: u32) -> Vec<u32> {
    let mut pids = vec![root];
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.filter_map(|e| e.ok()) {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((ppid, _)) =
                read(&format!("/proc/{pid}/stat")).and_then(|t| stat_fields(&t))
            {
                if ppid == root {
                    pids.push(pid);
                }
            }
        }
    }
    pids
}

fn snapshot(
    root: u32,
    t0: Instant,
    pss: bool,
    seen: &mut BTreeMap<u32, (ProcCounters, ProcCounters)>,
) -> Sample {
    let mut s = Sample {
        t_s: t0.elapsed().as_secs_f64(),
        ..Sample::default()
    };
    for pid in tree(root) {
        let Some(c) = read_process(pid, pss) else {
            continue;
        };
        s.processes += 1;
        s.vm_pte_kib += c.vm_pte_kib;
        if let Some(p) = c.pss_kib {
            *s.pss_kib.get_or_insert(0) += p;
        }
        s.rss_shmem_kib += c.rss_shmem_kib;
        s.minflt += c.minflt;
        s.nvcsw += c.nvcsw;
        s.nivcsw += c.nivcsw;
        seen.entry(pid)
            .and_modify(|(_, last)| *last = c)
            .or_insert((c, c));
    }
    if let Some(m) = read("/proc/meminfo") {
        let kib = hostfacts::parse::kv_kib(&m);
        let num = |k: &str| kib.get(k).copied().unwrap_or(0);
        s.host_page_tables_kib = num("PageTables");
        s.hugepages_free = num("HugePages_Free");
        s.hugepages_rsvd = num("HugePages_Rsvd");
    }
    s
}

/// When samples read Pss. Reading it walks every process's page tables: measured here, one pass over 38
/// PostgreSQL processes with 2 GB of shared buffers on 4 KB pages cost 0.45-0.50 s of system CPU, enough
/// to lower the TPS being measured when done every second (docs/notes/2026-11-22-bench-pg-huge-pages.md).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pss {
    /// Never.
    Never,
    /// Once, in the first sample at or after this many seconds.
    At(f64),
    /// In every sample.
    Every,
}

/// A sampler running on its own thread until [`Sampler::stop`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Sampled>,
}

impl Sampler {
    /// Starts sampling the tree under `root` every `interval` (a first sample now), reading Pss as `pss`
    /// says.
    pub fn start(root: u32, interval: Duration, pss: Pss) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        // The first sample is taken before returning, so nothing the caller starts next is missed.
        let t0 = Instant::now();
        // PIDs present at the start: their counters count from the first value seen.
        let mut seen = BTreeMap::new();
        let mut pss_done = false;
        let mut want_pss = move |t: f64| match pss {
            Pss::Never => false,
            Pss::Every => true,
            Pss::At(at) if !pss_done && t >= at => {
                pss_done = true;
                true
            }
            Pss::At(_) => false,
        };
        let first_pss = want_pss(0.0);
        let mut samples = vec![snapshot(root, t0, first_pss, &mut seen)];
        let born_before: Vec<u32> = seen.keys().copied().collect();
        let handle = std::thread::spawn(move || {
            let mut next = interval;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                if t0.elapsed() >= next {
                    let p = want_pss(t0.elapsed().as_secs_f64());
                    samples.push(snapshot(root, t0, p, &mut seen));
                    next += interval;
                }
            }
            let p = matches!(pss, Pss::Every);
            samples.push(snapshot(root, t0, p, &mut seen));
            let mut out = Sampled {
                samples,
                ..Sampled::default()
            };
            for (pid, (first, last)) in &seen {
                let base = if born_before.contains(pid) {
                    *first
                } else {
                    ProcCounters::default()
                };
                out.minflt += last.minflt.saturating_sub(base.minflt);
                out.nvcsw += last.nvcsw.saturating_sub(base.nvcsw);
                out.nivcsw += last.nivcsw.saturating_sub(base.nivcsw);
            }
            out
        });
        Sampler { stop, handle }
    }

    /// Takes a last sample and returns everything.
    pub fn stop(self) -> Sampled {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_a_command_holding_spaces_and_parens() {
        let t = "1234 (postgres: x (y)) S 77 1234 1234 0 -1 4194560 5821 0 3 0 12 3 0 0 20 0 1 0 100 0 0 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0";
        assert_eq!(stat_fields(t), Some((77, 5821)));
        assert_eq!(stat_fields("garbage"), None);
    }

    #[test]
    fn samples_this_process_tree() {
        let me = std::process::id();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let s = Sampler::start(me, Duration::from_millis(50), Pss::Every);
        // Touch a fresh anonymous mapping so this process's minor faults rise during the run.
        let len = 8 << 20;
        // SAFETY: a private anonymous mapping, written within its length and unmapped below.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            // 4 KB pages even where THP is `always` (else 8 MiB is four faults).
            libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
            for i in (0..len).step_by(4096) {
                std::ptr::write_volatile((p as *mut u8).add(i), 1);
            }
            std::thread::sleep(Duration::from_millis(200));
            libc::munmap(p, len);
        }
        let out = s.stop();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(out.samples.len() >= 3, "{}", out.samples.len());
        assert!(out
            .samples
            .iter()
            .all(|x| x.processes >= 2 && x.pss_kib.is_some()));
        assert!(out.peak_vm_pte_kib() > 0 && out.peak_pss_kib() > 0);
        assert!(out.peak_host_page_tables_kib() >= out.peak_vm_pte_kib());
        assert!(
            out.minflt >= 1000,
            "8 MiB of fresh pages faulted: {}",
            out.minflt
        );
    }
}

#[cfg(test)]
mod pss_schedule {
    use super::*;

    #[test]
    fn pss_is_read_once_when_asked_at_a_time_and_never_when_not() {
        let me = std::process::id();
        let s = Sampler::start(me, Duration::from_millis(40), Pss::At(0.1));
        std::thread::sleep(Duration::from_millis(300));
        let out = s.stop();
        let read: Vec<f64> = out
            .samples
            .iter()
            .filter(|x| x.pss_kib.is_some())
            .map(|x| x.t_s)
            .collect();
        assert_eq!(read.len(), 1, "{read:?}");
        assert!(read[0] >= 0.1);
        assert!(out.peak_pss_kib() > 0);
        let s = Sampler::start(me, Duration::from_millis(40), Pss::Never);
        std::thread::sleep(Duration::from_millis(100));
        let out = s.stop();
        assert!(out.samples.iter().all(|x| x.pss_kib.is_none()));
        assert!(out.peak_vm_pte_kib() > 0);
    }
}
