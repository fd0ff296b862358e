//! The record preemptlab keeps of hugetlb pages it added to a pool for its own runs
//! (`/run/preemptlab/pool-<kib>kB.json`): the pool's size before any run grew it and each live run's share.
//! The lock bench and bench pg write it (crate `lab`, module `pool`); the audit reads it so that a bench's
//! temporary pages are not taken for another user's demand.

use serde::{Deserialize, Serialize};

/// One run's part of a grown pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// The run's pid.
    pub pid: u32,
    /// The run's start time in clock ticks since boot (`/proc/PID/stat` field 22); 0 when unknown.
    #[serde(default)]
    pub start_ticks: u64,
    /// Pages this run added to the pool.
    pub pages: u64,
    /// Pages this run will map: its share and the free pages it found and counts on (0 in records
    /// written before it was kept: then `pages`). Another run must not count those free pages as its own.
    #[serde(default)]
    pub need: u64,
}

/// The shared record of one pool: its size before any run grew it, and each live run's share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registry {
    /// Huge page size, kB.
    pub page_kib: u64,
    /// The operator's part of the pool (persistent pages, no run's share): its size before the first of the
    /// current runs grew it, or what it was resized to by hand since.
    pub base: u64,
    /// Shares of the runs holding pages.
    pub shares: Vec<Share>,
}

#[derive(Deserialize)]
struct LegacyRecord {
    page_kib: u64,
    restore_to: u64,
    pid: u32,
}

impl Registry {
    /// Parses a record: the current format, or the single-run format of earlier versions.
    pub fn parse(text: &str) -> Option<Registry> {
        if let Ok(r) = serde_json::from_str::<Registry>(text) {
            return Some(r);
        }
        let old: LegacyRecord = serde_json::from_str(text).ok()?;
        Some(Registry {
            page_kib: old.page_kib,
            base: old.restore_to,
            shares: vec![Share {
                pid: old.pid,
                start_ticks: 0,
                pages: 0,
                need: 0,
            }],
        })
    }

    /// The pool size the live shares call for.
    pub fn target(&self) -> u64 {
        self.base + self.shares.iter().map(|s| s.pages).sum::<u64>()
    }

    /// Pages runs other than `pid` count on: each one's need (at least its share), mapped yet or not.
    pub fn held_by_others(&self, pid: u32) -> u64 {
        self.shares
            .iter()
            .filter(|s| s.pid != pid)
            .map(|s| s.need.max(s.pages))
            .sum()
    }

    /// Drops the shares for which `alive` is false; returns the dropped ones.
    pub fn prune(&mut self, alive: impl Fn(&Share) -> bool) -> Vec<Share> {
        let (keep, dead): (Vec<Share>, Vec<Share>) = self.shares.drain(..).partition(alive);
        self.shares = keep;
        dead
    }
}

/// The start time (clock ticks since boot, field 22) in the text of `/proc/PID/stat`.
pub fn stat_start_ticks(stat: &str) -> Option<u64> {
    crate::parse::PidStat::parse(stat).map(|s| s.starttime)
}

/// Is the run that took `share` the process whose `/proc/PID/stat` text is `stat` (None: no such process)?
pub fn share_alive(share: &Share, stat: Option<&str>) -> bool {
    match stat.and_then(stat_start_ticks) {
        None => false,
        Some(t) => share.start_ticks == 0 || t == share.start_ticks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that counted on free pages already in the pool holds them as much as the pages it added: a
    /// second run must not count them again (two overlapping runs on a pool with 65 pages free left the
    /// second 65 short).
    #[test]
    fn others_hold_their_whole_need() {
        let reg = Registry {
            page_kib: 2048,
            base: 65,
            shares: vec![
                Share {
                    pid: 1,
                    start_ticks: 0,
                    pages: 448,
                    need: 513,
                },
                // A record written before `need`: its share is what it holds.
                Share {
                    pid: 2,
                    start_ticks: 0,
                    pages: 10,
                    need: 0,
                },
            ],
        };
        assert_eq!(reg.held_by_others(3), 523);
        assert_eq!(reg.held_by_others(1), 10);
        assert_eq!(reg.target(), 65 + 448 + 10);
    }

    #[test]
    fn start_time_of_a_command_with_spaces_and_parens() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0";
        assert_eq!(stat_start_ticks(stat), Some(987654));
        assert_eq!(stat_start_ticks("garbage"), None);
        let s = Share {
            pid: 4242,
            start_ticks: 987654,
            pages: 3,
            need: 0,
        };
        assert!(share_alive(&s, Some(stat)));
        assert!(!share_alive(
            &Share {
                start_ticks: 1,
                ..s.clone()
            },
            Some(stat)
        ));
        assert!(!share_alive(&s, None));
    }
}
