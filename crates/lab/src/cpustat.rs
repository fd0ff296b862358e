//! CPU time of the whole machine from /proc/stat (parsed by [`hostfacts::procfs::CpuTimes`]): the
//! hypervisor's steal and the idle share over a measured window.

pub use hostfacts::procfs::CpuTimes;

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
    #[test]
    fn proc_stat_is_read() {
        let now = super::now();
        assert!(now.is_some(), "/proc/stat readable");
        assert!(super::idle_pct_since(now).is_none_or(|p| (0.0..=100.0).contains(&p)));
    }
}
