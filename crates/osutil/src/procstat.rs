//! CPU time of the whole machine from /proc/stat: [`CpuTimes::parse`] (text in, typed value out) and
//! [`now`], its reader; the hypervisor's steal and the idle share over a measured window. (Why not
//! `procfs-core`: see the crate doc.)

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

    /// The share of the CPU time between this reading and `later` that was busy (neither idle, I/O wait
    /// nor the hypervisor's steal) other than `own_ticks` (this process's CPU time over the same window),
    /// %; None when no time passed or a counter went back.
    pub fn others_busy_pct(self, later: Self, own_ticks: u64) -> Option<f64> {
        let dt = later.total.checked_sub(self.total)?;
        let idle = later.idle.checked_sub(self.idle)?;
        let steal = later.steal.checked_sub(self.steal)?;
        let busy = dt.checked_sub(idle)?.checked_sub(steal)?;
        (dt > 0).then(|| busy.saturating_sub(own_ticks) as f64 / dt as f64 * 100.0)
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

/// Reads /proc/stat; None where it cannot be read or has fewer than eight CPU fields.
pub fn now() -> Option<CpuTimes> {
    CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The hypervisor's CPU steal since `start` (a reading taken earlier), % of all CPU time.
pub fn steal_pct_since(start: Option<CpuTimes>) -> Option<f64> {
    start?.share(now()?, |t| t.steal)
}

/// The share of all CPU time left idle (idle + iowait) since `start`, %.
pub fn idle_pct_since(start: Option<CpuTimes>) -> Option<f64> {
    start?.share(now()?, |t| t.idle)
}

#[cfg(test)]
mod tests {
    use super::CpuTimes;

    #[test]
    fn proc_stat_is_read() {
        let now = super::now();
        assert!(now.is_some(), "/proc/stat readable");
        assert!(super::idle_pct_since(now).is_none_or(|p| (0.0..=100.0).contains(&p)));
    }

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
    fn cpu_times_parse_and_share() {
        let a = CpuTimes::parse("cpu  100 0 50 800 40 5 5 10 7 0\ncpu0 1 2 3 4 5 6 7 8\n").unwrap();
        assert_eq!((a.total, a.idle, a.steal), (1010, 840, 10));
        let b = CpuTimes::parse("cpu  200 0 90 1000 50 5 5 60 9 0\n").unwrap();
        // 400 jiffies passed: 210 idle + iowait, 50 steal.
        assert_eq!(a.share(b, |t| t.idle), Some(52.5));
        assert_eq!(a.share(b, |t| t.steal), Some(12.5));
        assert_eq!(a.share(a, |t| t.steal), None, "no time passed");
        assert_eq!(b.share(a, |t| t.steal), None, "counters went back");
        // 400 jiffies: 210 idle, 50 steal, 140 busy; 40 of them this process's.
        assert_eq!(a.others_busy_pct(b, 40), Some(25.0));
        assert_eq!(a.others_busy_pct(b, 1000), Some(0.0), "never below zero");
        assert_eq!(b.others_busy_pct(a, 0), None, "counters went back");
        assert!(CpuTimes::parse("cpu  1 2 3 4 5 6 7\n").is_none());
        assert!(CpuTimes::parse("").is_none());
    }
}
