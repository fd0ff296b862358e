//! Parsers of /proc files the benches sample (text in, typed value out; the readers live in `lab`).
//!
//! `procfs-core` would parse /proc/stat too, but its `KernelStats` wants the whole file and the boot-time
//! tick rate and returns every CPU; the benches need three sums of the first line, so the few lines here
//! stay.

/// One reading of the first line of /proc/stat (user nice system idle iowait irq softirq steal [guest
/// guest_nice], jiffies of all CPUs): the total and the two parts the benches report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuTimes {
    /// user + nice + system + idle + iowait + irq + softirq + steal (guest and guest_nice are already in
    /// user and nice).
    pub total: u64,
    /// idle + iowait.
    pub idle: u64,
    /// Time the hypervisor gave to others.
    pub steal: u64,
}

impl CpuTimes {
    /// Parses /proc/stat; None where it has fewer than eight CPU fields.
    pub fn parse(text: &str) -> Option<Self> {
        let f: Vec<u64> = text
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .map_while(|f| f.parse().ok())
            .collect();
        // guest and guest_nice are already in user and nice. Sums that overflow are no reading.
        if f.len() < 8 {
            return None;
        }
        Some(Self {
            total: f[..8].iter().try_fold(0u64, |a, x| a.checked_add(*x))?,
            idle: f[3].checked_add(f[4])?,
            steal: f[7],
        })
    }

    /// The share of `part` in the CPU time between this reading and `later`, %; None when no time passed
    /// or a counter went back.
    pub fn share(self, later: Self, part: fn(&Self) -> u64) -> Option<f64> {
        let (dt, dp) = (
            later.total.checked_sub(self.total)?,
            part(&later).checked_sub(part(&self))?,
        );
        (dt > 0).then(|| dp as f64 / dt as f64 * 100.0)
    }
}

/// The fields of `/proc/PID/stat` that `diagnose` reads (proc_pid_stat(5); clock ticks are USER_HZ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PidStat {
    /// Field 3: R, S, D, Z, ...
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Field 10: minor faults.
    pub minflt: u64,
    /// Field 11: minor faults of waited-for (reaped) children.
    pub cminflt: u64,
    /// Field 14: user time, ticks.
    pub utime: u64,
    /// Field 15: system time, ticks.
    pub stime: u64,
    /// Field 16: user time of reaped children, ticks.
    pub cutime: u64,
    /// Field 17: system time of reaped children, ticks.
    pub cstime: u64,
}

impl PidStat {
    /// Parses `/proc/PID/stat`; None when it is cut short. The command name (field 2) may hold spaces and
    /// parentheses, so the fields are counted after its last `)`.
    pub fn parse(text: &str) -> Option<Self> {
        let rest = &text[text.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // f[0] is field 3.
        let n = |i: usize| -> Option<u64> { f.get(i - 3)?.parse().ok() };
        Some(PidStat {
            state: f.first()?.chars().next()?,
            ppid: n(4)? as u32,
            minflt: n(10)?,
            cminflt: n(11)?,
            utime: n(14)?,
            stime: n(15)?,
            cutime: n(16)?,
            cstime: n(17)?,
        })
    }
}

/// `/proc/PID/schedstat`: time on the CPU and time runnable but waiting for one (run-queue wait), ns, and
/// the number of times it ran (Documentation/scheduler/sched-stats.rst). Needs CONFIG_SCHED_INFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedStat {
    /// Time spent on the CPU, ns.
    pub run_ns: u64,
    /// Time spent waiting on a run queue, ns.
    pub wait_ns: u64,
    /// Timeslices run on this CPU.
    pub slices: u64,
}

impl SchedStat {
    /// Parses the three numbers.
    pub fn parse(text: &str) -> Option<Self> {
        let mut w = text.split_whitespace().map(|x| x.parse::<u64>().ok());
        Some(SchedStat {
            run_ns: w.next()??,
            wait_ns: w.next()??,
            slices: w.next()??,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::CpuTimes;

    #[test]
    fn cpu_times_parse_overflowing_sum_is_no_reading() {
        // Found by fuzzing (fuzz/corpus/proc_stat/crash-cpu-times-sum-overflow): the sum of the fields
        // overflowed.
        let max = u64::MAX;
        assert!(CpuTimes::parse(&format!("cpu  {max} 1 0 0 0 0 0 0\n")).is_none());
        assert!(CpuTimes::parse(&format!("cpu  0 0 0 {max} 1 0 0 0\n")).is_none());
        assert!(CpuTimes::parse(&format!("cpu  0 0 0 {max} 0 0 0 0\n")).is_some());
    }

    #[test]
    fn pid_stat_and_schedstat() {
        let t = "4242 (postgres: x (y)) S 4200 4200 4200 0 -1 4194560 1234 5678 0 0 11 22 33 44 20 0 1 0 99 0 0\n";
        let s = super::PidStat::parse(t).unwrap();
        assert_eq!(
            (s.state, s.ppid, s.minflt, s.cminflt),
            ('S', 4200, 1234, 5678)
        );
        assert_eq!((s.utime, s.stime, s.cutime, s.cstime), (11, 22, 33, 44));
        assert!(super::PidStat::parse("1 (x) S 0 0").is_none());
        let q = super::SchedStat::parse("123 456 7\n").unwrap();
        assert_eq!((q.run_ns, q.wait_ns, q.slices), (123, 456, 7));
        assert!(super::SchedStat::parse("1 2").is_none());
    }

    #[test]
    fn cpu_times_parse_and_share() {
        let a = CpuTimes::parse("cpu  100 0 50 800 40 5 5 10 7 0\ncpu0 1 2 3 4 5 6 7 8\n").unwrap();
        assert_eq!((a.total, a.idle, a.steal), (1010, 840, 10));
        let b = CpuTimes::parse("cpu  200 0 90 1000 50 5 5 60 9 0\n").unwrap();
        // 400 jiffies passed: 210 idle + iowait, 50 steal.
        assert_eq!(a.share(b, |t| t.idle), Some(52.5));
        assert_eq!(a.share(b, |t| t.steal), Some(12.5));
        assert_eq!(a.share(a, |t| t.steal), None, "no time passed");
        assert_eq!(b.share(a, |t| t.steal), None, "counters went back");
        assert!(CpuTimes::parse("cpu  1 2 3 4 5 6 7\n").is_none());
        assert!(CpuTimes::parse("").is_none());
    }
}
