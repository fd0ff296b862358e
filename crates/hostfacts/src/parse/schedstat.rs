//! /proc/PID/schedstat (`Documentation/scheduler/sched-stats.rst`).

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
    use super::*;

    #[test]
    fn schedstat() {
        let q = SchedStat::parse("123 456 7\n").unwrap();
        assert_eq!((q.run_ns, q.wait_ns, q.slices), (123, 456, 7));
        assert!(SchedStat::parse("1 2").is_none());
    }
}
