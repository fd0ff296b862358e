//! /proc/PID/stat (proc_pid_stat(5)), through procfs-core's `Stat`: the one reading of the file that
//! `diagnose`, the pool record, `bench pg`'s sampler, `check`'s load and `vm`'s vCPU threads share.

use procfs_core::FromRead;

/// The fields of `/proc/PID/stat` preemptlab reads (clock ticks are USER_HZ).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PidStat {
    /// Field 3: R, S, D, Z, ...
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Field 5: process group.
    pub pgrp: u32,
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
    /// Field 22: when the process started, ticks since boot (with the pid, who a process is).
    pub starttime: u64,
}

impl PidStat {
    /// Parses `/proc/PID/stat`; None when it is cut short or malformed. The command name (field 2) may
    /// hold spaces and parentheses; procfs-core counts the fields after its last `)`.
    pub fn parse(text: &str) -> Option<Self> {
        // procfs-core slices one byte before the first `(` and two after the last `)` without checking
        // that they exist: a line that is not `PID (NAME) STATE ...` would panic there (the parsers never
        // panic on bad input: fuzz/), so it is refused first.
        let line = text.trim().as_bytes();
        let open = line.iter().position(|&b| b == b'(')?;
        let close = line.iter().rposition(|&b| b == b')')?;
        // A `)` only before the first `(` would have procfs-core slice backwards.
        if open < 2
            || close < open
            || line[open - 1] != b' '
            || line.get(close + 1) != Some(&b' ')
            || close + 2 >= line.len()
        {
            return None;
        }
        let s = procfs_core::process::Stat::from_read(text.as_bytes()).ok()?;
        Some(PidStat {
            state: s.state,
            ppid: u32::try_from(s.ppid).ok()?,
            pgrp: u32::try_from(s.pgrp).ok()?,
            minflt: s.minflt,
            cminflt: s.cminflt,
            utime: s.utime,
            stime: s.stime,
            cutime: u64::try_from(s.cutime).ok()?,
            cstime: u64::try_from(s.cstime).ok()?,
            starttime: s.starttime,
        })
    }

    /// User + system time, ticks (the clock ticks /proc/stat counts in); None on overflow.
    pub fn ticks(&self) -> Option<u64> {
        self.utime.checked_add(self.stime)
    }
}

#[cfg(test)]
mod tests {
    /// Regression (the fuzz smoke of 2026-11-29): a `)` before every `(` made procfs-core slice
    /// backwards and panic.
    #[test]
    fn a_close_paren_before_the_open_one_is_refused_regression() {
        let text = "13759329577 4567040 793 18443372sh) S 13751 13751 16587 0 -1 4194304 21518 \
                    03685477580139494 1 (bash 139494 1 12 1 12 17  9";
        assert!(super::PidStat::parse(text).is_none());
    }

    use super::*;

    /// A whole line as a 6.18 kernel writes it (52 fields), for a command whose name holds spaces and
    /// parentheses: `postgres: x (y)`.
    pub(crate) const LINE: &str = "4242 (postgres: x (y)) S 4200 4200 4200 0 -1 4194560 1234 5678 0 0 11 22 33 44 20 0 1 0 987654 3133440 412 18446744073709551615 94801297395712 94801297415593 140731112546560 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94801297431600 94801297433216 94801444601856 140731112548885 140731112548905 140731112548905 140731112550379 0\n";

    #[test]
    fn pid_stat() {
        let s = PidStat::parse(LINE).unwrap();
        assert_eq!(
            (s.state, s.ppid, s.pgrp, s.minflt, s.cminflt),
            ('S', 4200, 4200, 1234, 5678)
        );
        assert_eq!((s.utime, s.stime, s.cutime, s.cstime), (11, 22, 33, 44));
        assert_eq!((s.starttime, s.ticks()), (987654, Some(33)));
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert_eq!(
            PidStat::parse(&own).unwrap().ppid,
            std::os::unix::process::parent_id()
        );
    }

    /// Cut short, or not shaped as `PID (NAME) STATE ...`: no reading, and no panic (procfs-core slices
    /// around the name unchecked).
    #[test]
    fn malformed_stat_is_none_not_a_panic() {
        for bad in [
            "1 (x) S 0 0",
            "garbage",
            "(x) S 1 2",
            "1 (x)",
            "1 (x) ",
            "1(x) S",
            "é(x) S",
            "1 (x)é",
        ] {
            assert_eq!(PidStat::parse(bad), None, "{bad:?}");
        }
    }
}
