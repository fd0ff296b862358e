//! CPU time of the whole machine from /proc/stat: the hypervisor's steal and the idle share over a
//! measured window.

/// One reading of the first line of /proc/stat (user nice system idle iowait irq softirq steal [guest
/// guest_nice], jiffies of all CPUs): the total and the two parts the benches report.
#[derive(Debug, Clone, Copy)]
pub struct CpuTimes {
    total: u64,
    idle: u64,
    steal: u64,
}

impl CpuTimes {
    /// Reads /proc/stat; None where it cannot be read or has fewer than eight CPU fields.
    pub fn now() -> Option<Self> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    fn parse(text: &str) -> Option<Self> {
        let f: Vec<u64> = text
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .map_while(|f| f.parse().ok())
            .collect();
        // guest and guest_nice are already in user and nice.
        (f.len() >= 8).then(|| Self {
            total: f[..8].iter().sum(),
            idle: f[3] + f[4],
            steal: f[7],
        })
    }

    /// The hypervisor's CPU steal since `start` (a reading taken earlier), % of all CPU time.
    pub fn steal_pct_since(start: Option<Self>) -> Option<f64> {
        start?.share(Self::now()?, |t| t.steal)
    }

    /// The share of all CPU time left idle (idle + iowait) since `start`, %.
    pub fn idle_pct_since(start: Option<Self>) -> Option<f64> {
        start?.share(Self::now()?, |t| t.idle)
    }

    /// The share of `part` in the CPU time between two readings, %; None when no time passed or a counter
    /// went back.
    fn share(self, later: Self, part: fn(&Self) -> u64) -> Option<f64> {
        let (dt, dp) = (
            later.total.checked_sub(self.total)?,
            part(&later).checked_sub(part(&self))?,
        );
        (dt > 0).then(|| dp as f64 / dt as f64 * 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::CpuTimes;

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
        let now = CpuTimes::now();
        assert!(now.is_some(), "/proc/stat readable");
        assert!(CpuTimes::idle_pct_since(now).is_none_or(|p| (0.0..=100.0).contains(&p)));
    }
}
