//! Per-second sampling of a process tree (a postmaster and its children) and of the host's memory counters
//! while a benchmark runs: page tables (the sum of VmPTE), Pss, minor faults and context switches of the
//! tree, and PageTables and the hugetlb pool from /proc/meminfo.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// One process's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcCounters {
    /// VmPTE, kB.
    pub vm_pte_kib: u64,
    /// Pss from smaps_rollup, kB.
    pub pss_kib: u64,
    /// Minor faults (stat field 10).
    pub minflt: u64,
    /// Voluntary context switches.
    pub nvcsw: u64,
    /// Involuntary context switches.
    pub nivcsw: u64,
}

/// The tree and the host at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds since the sampler started.
    pub t_s: f64,
    /// Processes in the tree.
    pub processes: u32,
    /// Sum of VmPTE over the tree, kB.
    pub vm_pte_kib: u64,
    /// Sum of Pss over the tree, kB.
    pub pss_kib: u64,
    /// Sum of minor faults over the tree (processes alive now).
    pub minflt: u64,
    /// Sum of voluntary context switches.
    pub nvcsw: u64,
    /// Sum of involuntary context switches.
    pub nivcsw: u64,
    /// /proc/meminfo PageTables, kB (the whole host).
    pub host_page_tables_kib: u64,
    /// /proc/meminfo HugePages_Free.
    pub hugepages_free: u64,
    /// /proc/meminfo HugePages_Rsvd.
    pub hugepages_rsvd: u64,
}

/// What a sampling run returns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sampled {
    /// One sample per interval, the first at the start and the last at the stop.
    pub samples: Vec<Sample>,
    /// Minor faults of the tree during the run: per PID, the last value seen minus the first (0 for PIDs
    /// born during the run).
    pub minflt: u64,
    /// Voluntary context switches during the run (same rule).
    pub nvcsw: u64,
    /// Involuntary context switches during the run (same rule).
    pub nivcsw: u64,
}

impl Sampled {
    /// The peak of the tree's page tables, kB.
    pub fn peak_vm_pte_kib(&self) -> u64 {
        self.samples.iter().map(|s| s.vm_pte_kib).max().unwrap_or(0)
    }
    /// The peak of the tree's Pss, kB.
    pub fn peak_pss_kib(&self) -> u64 {
        self.samples.iter().map(|s| s.pss_kib).max().unwrap_or(0)
    }
    /// The peak of the host's PageTables, kB.
    pub fn peak_host_page_tables_kib(&self) -> u64 {
        self.samples
            .iter()
            .map(|s| s.host_page_tables_kib)
            .max()
            .unwrap_or(0)
    }
}

/// Parses the fields this module needs from `/proc/PID/stat`: (ppid, minflt).
pub fn stat_fields(text: &str) -> Option<(u32, u64)> {
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): ppid is field 4, minflt field 10.
    Some((f.get(1)?.parse().ok()?, f.get(7)?.parse().ok()?))
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    read(&format!("/proc/{pid}/stat"))
        .and_then(|t| {
            t.rfind(')')
                .map(|i| t[i + 1..].trim_start().starts_with('Z'))
        })
        .is_some_and(|zombie| !zombie)
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// Reads one process's counters; None when it is gone.
pub fn read_process(pid: u32) -> Option<ProcCounters> {
    let (_, minflt) = stat_fields(&read(&format!("/proc/{pid}/stat"))?)?;
    let status = read(&format!("/proc/{pid}/status"))?;
    let kib = hostfacts::parse::kv_kib(&status);
    let num = |k: &str| kib.get(k).copied().unwrap_or(0);
    let pss = read(&format!("/proc/{pid}/smaps_rollup"))
        .map(|t| {
            hostfacts::parse::kv_kib(&t)
                .get("Pss")
                .copied()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    Some(ProcCounters {
        vm_pte_kib: num("VmPTE"),
        pss_kib: pss,
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
    seen: &mut BTreeMap<u32, (ProcCounters, ProcCounters)>,
) -> Sample {
    let mut s = Sample {
        t_s: t0.elapsed().as_secs_f64(),
        ..Sample::default()
    };
    for pid in tree(root) {
        let Some(c) = read_process(pid) else { continue };
        s.processes += 1;
        s.vm_pte_kib += c.vm_pte_kib;
        s.pss_kib += c.pss_kib;
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

/// A sampler running on its own thread until [`Sampler::stop`].
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Sampled>,
}

impl Sampler {
    /// Starts sampling the tree under `root` every `interval` (a first sample now).
    pub fn start(root: u32, interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        // The first sample is taken before returning, so nothing the caller starts next is missed.
        let t0 = Instant::now();
        // PIDs present at the start: their counters count from the first value seen.
        let mut seen = BTreeMap::new();
        let mut samples = vec![snapshot(root, t0, &mut seen)];
        let born_before: Vec<u32> = seen.keys().copied().collect();
        let handle = std::thread::spawn(move || {
            let mut next = interval;
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
                if t0.elapsed() >= next {
                    samples.push(snapshot(root, t0, &mut seen));
                    next += interval;
                }
            }
            samples.push(snapshot(root, t0, &mut seen));
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
        let t = "1234 (postgres: x (y)) S 77 1234 1234 0 -1 4194560 5821 0 3 0 12 3 0 0 20 0 1 0 100 0 0";
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
        let s = Sampler::start(me, Duration::from_millis(50));
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
        assert!(out.samples.iter().all(|x| x.processes >= 2));
        assert!(out.peak_vm_pte_kib() > 0 && out.peak_pss_kib() > 0);
        assert!(out.peak_host_page_tables_kib() >= out.peak_vm_pte_kib());
        assert!(
            out.minflt >= 1000,
            "8 MiB of fresh pages faulted: {}",
            out.minflt
        );
    }
}
