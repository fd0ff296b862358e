//! The instances' processes, followed through the window: who belongs to which instance, what kind of
//! process it is, and its /proc counters second by second.
//!
//! A process belongs to an instance when it is the postmaster or the postmaster's child (PostgreSQL forks
//! every backend and auxiliary process from the postmaster and never execs on Linux). Membership comes from
//! fork records and a /proc scan each second; the kind from the title in `/proc/PID/cmdline`.
//!
//! The kernel's counters of a process that exits are gone with it, except what its parent collects when it
//! reaps it: `cminflt`, `cutime` and `cstime` of the postmaster. So minor faults and CPU time over the window
//! are exact for every process (the live ones' deltas, plus the postmaster's children counters, less what
//! was already counted of the children that exited); voluntary and involuntary switches and run-queue wait
//! have no such counters and cover the live processes' time only.

use std::collections::HashMap;

use hostfacts::parse::{PidStat, SchedStat};
use results::diagnose::{Categories, Switches};

/// The title a child has before it sets its own: its parent's command line, which a short-lived
/// connection may never get past before exiting.
pub const UNCLASSIFIED: &str = "short-lived (title unread)";

/// One reading of a process's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Minor faults.
    pub minflt: u64,
    /// utime + stime, ticks.
    pub ticks: u64,
    /// Voluntary switches.
    pub nvcsw: u64,
    /// Involuntary switches.
    pub nivcsw: u64,
    /// Run-queue wait, ns.
    pub wait_ns: u64,
}

/// Reads a process's counters and its stat line; None once it is gone.
pub fn read(pid: u32) -> Option<(Counters, PidStat)> {
    let stat = PidStat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kv = hostfacts::parse::kv_kib(&status);
    let wait_ns = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|t| SchedStat::parse(&t))
        .map(|s| s.wait_ns)
        .unwrap_or(0);
    Some((
        Counters {
            minflt: stat.minflt,
            ticks: stat.utime + stat.stime,
            nvcsw: kv.get("voluntary_ctxt_switches").copied().unwrap_or(0),
            nivcsw: kv.get("nonvoluntary_ctxt_switches").copied().unwrap_or(0),
            wait_ns,
        },
        stat,
    ))
}

/// A process's title (its command line joined), if it is still there.
pub fn title(pid: u32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(hostfacts::parse::cmdline_args(&raw).join(" "))
}

/// The kind of a postmaster child from its title; None while it still shows the postmaster's.
pub fn kind_of(title: &str, postmaster_title: &str) -> Option<String> {
    if title.is_empty() || title == postmaster_title {
        return None;
    }
    Some(
        hostfacts::postgres::auxiliary_type(title)
            .unwrap_or("client backend")
            .to_string(),
    )
}

/// What is known of one process of an instance.
#[derive(Debug, Clone)]
pub struct Proc {
    /// The instance's index.
    pub inst: usize,
    /// Its kind once known.
    pub kind: Option<String>,
    /// The last reading (zero for a process born in the window and not read yet).
    pub last: Counters,
    /// True when it was there when the window opened (its counters count from the first reading).
    pub at_start: bool,
    /// On-CPU samples by category.
    pub cpu: Categories,
    /// Segment faults (scaled).
    pub segment_faults: u64,
    /// sched_switch counts.
    pub switches: Switches,
    /// True once its title could not be read (it exited): no more tries.
    pub title_gone: bool,
    /// True when its kind came from a sampled call stack, not its title.
    pub by_stack: bool,
}

impl Proc {
    /// A process found at `inst`.
    pub fn new(inst: usize, kind: Option<String>, at_start: bool) -> Self {
        Proc {
            inst,
            kind,
            last: Counters::default(),
            at_start,
            cpu: Categories::default(),
            segment_faults: 0,
            switches: Switches::default(),
            title_gone: false,
            by_stack: false,
        }
    }
}

/// Adds `b` into `a`.
pub fn add_categories(a: &mut Categories, b: &Categories) {
    a.samples += b.samples;
    a.spinlock += b.spinlock;
    a.lwlock += b.lwlock;
    a.page_fault += b.page_fault;
    a.scheduler += b.scheduler;
    a.kernel_other += b.kernel_other;
    a.user_other += b.user_other;
}

/// Adds `b` into `a`.
pub fn add_switches(a: &mut Switches, b: &Switches) {
    a.runnable += b.runnable;
    a.runnable_in_fault += b.runnable_in_fault;
    a.in_fault_kernel_preemption += b.in_fault_kernel_preemption;
    a.in_fault_voluntary += b.in_fault_voluntary;
    a.after_fault_return_to_user += b.after_fault_return_to_user;
    a.in_fault_other += b.in_fault_other;
    a.kernel_preemption += b.kernel_preemption;
}

/// The per-second deltas of one instance's counters (see the module doc for what they cover).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Delta {
    /// Minor faults.
    pub minflt: u64,
    /// CPU ticks.
    pub ticks: u64,
    /// Voluntary switches.
    pub nvcsw: u64,
    /// Involuntary switches.
    pub nivcsw: u64,
    /// Run-queue wait, ns.
    pub wait_ns: u64,
}

/// The postmaster's children counters at the last scan.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reaped {
    /// cminflt.
    pub minflt: u64,
    /// cutime + cstime.
    pub ticks: u64,
}

/// Folds one scan into per-instance deltas: `live` are (pid, new reading) of processes found now,
/// `gone` the processes not found any more. Updates each live process's `last`.
pub fn scan_delta(
    procs: &mut HashMap<u32, Proc>,
    live: &[(u32, Counters)],
    gone_last: &[Counters],
    reaped_before: Reaped,
    reaped_now: Reaped,
) -> Delta {
    let mut d = Delta::default();
    for (pid, now) in live {
        let Some(p) = procs.get_mut(pid) else {
            continue;
        };
        let last = p.last;
        d.minflt += now.minflt.saturating_sub(last.minflt);
        d.ticks += now.ticks.saturating_sub(last.ticks);
        d.nvcsw += now.nvcsw.saturating_sub(last.nvcsw);
        d.nivcsw += now.nivcsw.saturating_sub(last.nivcsw);
        d.wait_ns += now.wait_ns.saturating_sub(last.wait_ns);
        p.last = *now;
    }
    // The reaped children's whole counts arrive in the postmaster's c* fields; what of them was counted
    // already (up to their last reading) comes off.
    let counted_minflt: u64 = gone_last.iter().map(|c| c.minflt).sum();
    let counted_ticks: u64 = gone_last.iter().map(|c| c.ticks).sum();
    d.minflt += reaped_now
        .minflt
        .saturating_sub(reaped_before.minflt)
        .saturating_sub(counted_minflt);
    d.ticks += reaped_now
        .ticks
        .saturating_sub(reaped_before.ticks)
        .saturating_sub(counted_ticks);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let pm = "/usr/lib/postgresql/15/bin/postgres -D /x";
        assert_eq!(kind_of(pm, pm), None);
        assert_eq!(kind_of("", pm), None);
        assert_eq!(
            kind_of("postgres: checkpointer ", pm).as_deref(),
            Some("checkpointer")
        );
        assert_eq!(
            kind_of("postgres: bench bench [local] SELECT", pm).as_deref(),
            Some("client backend")
        );
    }

    #[test]
    fn deltas_count_exited_children_once() {
        let mut procs = HashMap::new();
        // A backend there at the start, read at minflt 100 (its baseline).
        let mut p = Proc::new(0, Some("client backend".into()), true);
        p.last = Counters {
            minflt: 100,
            ticks: 5,
            ..Counters::default()
        };
        procs.insert(7, p);
        let now = Counters {
            minflt: 130,
            ticks: 6,
            nivcsw: 2,
            ..Counters::default()
        };
        let d = scan_delta(
            &mut procs,
            &[(7, now)],
            &[],
            Reaped::default(),
            Reaped::default(),
        );
        assert_eq!((d.minflt, d.ticks, d.nivcsw), (30, 1, 2));
        // It exits with 150 faults in all; the postmaster reaps it (cminflt += 150), and a child born and
        // gone between scans adds 40 more. Counted before: 130 of the first. This second: 20 + 40.
        let gone = procs.remove(&7).unwrap().last;
        let d = scan_delta(
            &mut procs,
            &[],
            &[gone],
            Reaped {
                minflt: 1000,
                ticks: 0,
            },
            Reaped {
                minflt: 1190,
                ticks: 0,
            },
        );
        assert_eq!(d.minflt, 60);
    }
}
