//! How much of the host's CPU the guest's vCPUs got while the command ran: each vCPU thread of QEMU's run and
//! run-queue wait times (`/proc/PID/task/TID/schedstat`), from when the command started to when it ended.
//!
//! A vCPU is a host thread. Under TCG a vCPU that has work runs flat out; when the host gives its CPU to
//! another thread (QEMU's main loop, virtiofsd, anything else), the guest sees that vCPU slow down without a
//! trace inside the guest (TCG offers no steal time). The wait is that trace, seen from the host. QEMU names
//! its vCPU threads (`CPU 0/TCG`, `CPU 1/KVM`) when started with `-name debug-threads=on`, which `vm`
//! passes ([`QEMU_THREAD_NAMES`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hostfacts::parse::{PidStat, SchedStat};
use results::vm::VcpuTime;

/// The QEMU option that names its threads, vCPUs included (`-name` options are merged).
pub const QEMU_THREAD_NAMES: &str = "-name debug-threads=on";

/// Whether a thread name is a vCPU's: `CPU N/TCG`, `CPU N/KVM` (QEMU's `debug-threads` names).
pub fn is_vcpu(comm: &str) -> bool {
    comm.strip_prefix("CPU ")
        .and_then(|r| r.split_once('/'))
        .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// One reading of the vCPU threads: name -> (run, wait) ns.
pub type Reading = BTreeMap<String, SchedStat>;

/// The QEMU process in process group `pgid` under `proc` (`/proc`), if there is one.
pub fn find_qemu(proc: &Path, pgid: u32) -> Option<u32> {
    std::fs::read_dir(proc).ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        let stat = PidStat::parse(&std::fs::read_to_string(e.path().join("stat")).ok()?)?;
        (stat.pgrp == pgid && comm.trim_end().starts_with("qemu-system")).then_some(pid)
    })
}

/// The named vCPU threads of QEMU process `pid` under `proc`: each name with its schedstat file; None when
/// the process is gone or has no named vCPU thread. Found once: the vCPU threads live as long as the guest.
pub fn threads(proc: &Path, pid: u32) -> Option<Vec<(String, PathBuf)>> {
    let tasks = proc.join(pid.to_string()).join("task");
    let t: Vec<(String, PathBuf)> = std::fs::read_dir(tasks)
        .ok()?
        .flatten()
        .filter_map(|t| {
            let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
            let comm = comm.trim_end();
            is_vcpu(comm).then(|| (comm.to_string(), t.path().join("schedstat")))
        })
        .collect();
    (!t.is_empty()).then_some(t)
}

/// The schedstat of each of `threads`, read now; None when any is gone (QEMU has exited).
pub fn read_threads(threads: &[(String, PathBuf)]) -> Option<Reading> {
    threads
        .iter()
        .map(|(name, path)| {
            let s = SchedStat::parse(&std::fs::read_to_string(path).ok()?)?;
            Some((name.clone(), s))
        })
        .collect()
}

/// Each vCPU's run and wait between two readings, in name order; threads missing from either are left out.
pub fn between(start: &Reading, end: &Reading) -> Vec<VcpuTime> {
    end.iter()
        .filter_map(|(name, e)| {
            let s = start.get(name)?;
            Some(VcpuTime {
                name: name.clone(),
                run_s: e.run_ns.checked_sub(s.run_ns)? as f64 / 1e9,
                wait_s: e.wait_ns.checked_sub(s.wait_ns)? as f64 / 1e9,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The named vCPU threads of QEMU process `pid` under `proc`, found and read now (`run` finds them once
    /// and reads them at every poll).
    fn read(proc: &Path, pid: u32) -> Option<Reading> {
        read_threads(&threads(proc, pid)?)
    }

    #[test]
    fn vcpu_thread_names() {
        assert!(is_vcpu("CPU 0/TCG"));
        assert!(is_vcpu("CPU 12/KVM"));
        assert!(!is_vcpu("CPU /TCG"));
        assert!(!is_vcpu("CPU x/TCG"));
        assert!(!is_vcpu("qemu-system-x86"));
        assert!(!is_vcpu("IO mon_iothread"));
    }

    fn write(dir: &Path, pid: u32, comm: &str, pgrp: u32, tasks: &[(u32, &str, &str)]) {
        let p = dir.join(pid.to_string());
        std::fs::create_dir_all(p.join("task")).unwrap();
        std::fs::write(p.join("comm"), format!("{comm}\n")).unwrap();
        std::fs::write(
            p.join("stat"),
            // A whole line, as the kernel writes it (PidStat reads it through procfs-core).
            format!("{pid} ({comm}) S 1 {pgrp} {pgrp} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0 0 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"),
        )
        .unwrap();
        for (tid, tcomm, sched) in tasks {
            let t = p.join("task").join(tid.to_string());
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("comm"), format!("{tcomm}\n")).unwrap();
            std::fs::write(t.join("schedstat"), format!("{sched}\n")).unwrap();
        }
    }

    #[test]
    fn reads_the_vcpus_of_the_groups_qemu_only() {
        let d = tempfile::tempdir().unwrap();
        // Another group's QEMU, and a process of ours that is not QEMU.
        write(
            d.path(),
            10,
            "qemu-system-x86",
            99,
            &[(11, "CPU 0/TCG", "1 1 1")],
        );
        write(d.path(), 20, "virtiofsd", 7, &[(21, "CPU 0/TCG", "1 1 1")]);
        write(
            d.path(),
            30,
            "qemu-system-x86",
            7,
            &[
                (30, "qemu-system-x86", "5 5 5"),
                (31, "CPU 0/TCG", "1000 200 3"),
                (32, "CPU 1/TCG", "2000 0 4"),
            ],
        );
        std::fs::write(d.path().join("self"), "").unwrap();
        assert_eq!(find_qemu(d.path(), 7), Some(30));
        let a = read(d.path(), 30).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a["CPU 0/TCG"].run_ns, 1000);
        let mut b = a.clone();
        b.get_mut("CPU 0/TCG").unwrap().run_ns = 3_000_001_000;
        b.get_mut("CPU 0/TCG").unwrap().wait_ns = 500_000_200;
        b.remove("CPU 1/TCG");
        let t = between(&a, &b);
        assert_eq!(t.len(), 1);
        assert_eq!(
            (t[0].name.as_str(), t[0].run_s, t[0].wait_s),
            ("CPU 0/TCG", 3.0, 0.5)
        );
        assert!(find_qemu(d.path(), 8).is_none());
        assert!(read(d.path(), 40).is_none());
    }
}
