//! Memory facts: RAM, page-table memory, every hugetlb pool, transparent huge pages, overcommit.
//!
//! Pools: `/sys/kernel/mm/hugepages/hugepages-<size>kB/` (`Documentation/admin-guide/mm/hugetlbpage.rst`).
//! THP: `/sys/kernel/mm/transparent_hugepage/{enabled,defrag,shmem_enabled}` (`transhuge.rst`); shared
//! memory obeys `shmem_enabled`, not `enabled`.

use results::host::memory::{HugePool, MemoryFacts};

use results::host::memory::EndedRuns;

use crate::host::Host;
use crate::parse;
use results::host::fact::Fact;

/// The file that says whether shared memory (PostgreSQL's segment, `bench lock`'s region) gets
/// transparent huge pages.
pub const SHMEM_THP: &str = "/sys/kernel/mm/transparent_hugepage/shmem_enabled";

/// `shmem_enabled`'s setting (`transhuge.rst`, "Hugepages in tmpfs/shmem"), the one home of what it
/// means for this tool: whether a region that asks (`MADV_HUGEPAGE`) gets THP, and whether a segment that
/// does not ask gets it anyway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShmemThp {
    /// `always`: every shmem mapping tries huge pages.
    Always,
    /// `within_size`: huge pages where they fit inside the size.
    WithinSize,
    /// `advise`: only mappings that ask with madvise.
    Advise,
    /// `never`: no huge pages (madvise is ignored).
    Never,
    /// `deny`: never, even for internal mounts (emergency off).
    Deny,
    /// `force`: every shmem mapping, internal mounts included (testing).
    Force,
}

impl ShmemThp {
    /// The setting named `s` (the bracketed word of the file); None for a word this tool does not know.
    pub fn parse(s: &str) -> Option<ShmemThp> {
        Some(match s {
            "always" => ShmemThp::Always,
            "within_size" => ShmemThp::WithinSize,
            "advise" => ShmemThp::Advise,
            "never" => ShmemThp::Never,
            "deny" => ShmemThp::Deny,
            "force" => ShmemThp::Force,
            _ => return None,
        })
    }

    /// Whether a shared region that asks with `MADV_HUGEPAGE` gets THP (`bench lock --pages thp`,
    /// `check`'s huge-page side when the hugetlb pool cannot give it).
    pub fn madvised_gets_thp(self) -> bool {
        !matches!(self, ShmemThp::Never | ShmemThp::Deny)
    }

    /// Whether a segment that does not ask gets THP anyway (by chance: the audit's `thp-always-shmem`).
    pub fn unasked_gets_thp(self) -> bool {
        matches!(
            self,
            ShmemThp::Always | ShmemThp::WithinSize | ShmemThp::Force
        )
    }
}

/// Reads `shmem_enabled`'s bracketed word under `host`.
pub fn shmem_thp(host: &Host) -> Fact<String> {
    thp(host, "shmem_enabled")
}

/// Why a shared region that asks for THP would not get it on the host `setting` (`shmem_enabled` as read)
/// describes; None when it would.
pub fn shmem_thp_unusable(setting: &Fact<String>) -> Option<String> {
    let p = SHMEM_THP;
    match setting.get().map(|s| (s, ShmemThp::parse(s))) {
        Some((_, Some(t))) if t.madvised_gets_thp() => None,
        Some((s, Some(_))) => Some(format!(
            "shared-memory THP is off ({p} = {s}; echo advise > {p} to allow it)"
        )),
        Some((s, None)) => Some(format!(
            "{p} = {s}: not a setting this tool knows (always, within_size, advise, never, deny, force)"
        )),
        None => Some(format!(
            "{p}: {} (kernel without THP?)",
            setting.unavailable.as_deref().unwrap_or("unreadable")
        )),
    }
}

/// A THP file's bracketed word (`always [madvise] never`).
fn thp(host: &Host, f: &str) -> Fact<String> {
    let p = format!("/sys/kernel/mm/transparent_hugepage/{f}");
    host.fact(&p)
        .and_then(|t| parse::bracketed(&t).ok_or_else(|| format!("no [selected] value in {t:?}")))
}

fn meminfo_fact(
    map: &Result<std::collections::BTreeMap<String, u64>, crate::host::ReadError>,
    key: &str,
) -> Fact<u64> {
    let src = format!("/proc/meminfo {key}");
    match map {
        Ok(m) => match m.get(key) {
            Some(v) => Fact::known(*v, src),
            None => Fact::unavailable(src, "field absent"),
        },
        Err(e) => Fact::unavailable(src, e.reason.clone()),
    }
}

/// What live preemptlab runs hold of one pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Held {
    /// Pages they added (the record's shares).
    added: u64,
    /// Pages their processes map now.
    mapped: u64,
    /// Why some run's mappings could not be read.
    unknown: Option<String>,
    /// The shares of runs that ended without giving them back (pid, pages), and the pool size the whole
    /// record calls for with them: their pages are still in the pool when it is that size.
    ended: Vec<(u32, u64)>,
    /// The record's pool size with the ended runs' shares (its base and every share).
    target_with_ended: u64,
}

/// Pages of `kib` the mappings in `smaps` text commit: every hugetlb mapping of that page size, whole (a
/// hugetlb mapping reserves all of its pages when it is made, and faulting them in does not change the sum).
pub fn hugetlb_pages_mapped(smaps: &str, kib: u64) -> u64 {
    crate::parse::smaps(smaps)
        .iter()
        .filter(|m| kib > 0 && m.kib("KernelPageSize") == kib)
        .fold(0u64, |a, m| {
            a.saturating_add((m.end.saturating_sub(m.start) / 1024).div_ceil(kib))
        })
}

/// What the live preemptlab runs of the `kib` pool's record hold; nothing when there is no record.
fn held_by_preemptlab(host: &Host, kib: u64) -> Held {
    let Ok(text) = host.read(&format!("/run/preemptlab/pool-{kib}kB.json")) else {
        return Held::default();
    };
    let Some(mut reg) = crate::hugepages::record::Registry::parse(&text) else {
        return Held::default();
    };
    let target_with_ended = reg.target();
    let ended = reg.prune(|s| {
        let stat = host.read(&format!("/proc/{}/stat", s.pid)).ok();
        crate::hugepages::record::share_alive(s, stat.as_deref())
    });
    let mut held = Held {
        added: reg.target().saturating_sub(reg.base),
        ended: ended
            .iter()
            .filter(|s| s.pages > 0)
            .map(|s| (s.pid, s.pages))
            .collect(),
        target_with_ended,
        ..Held::default()
    };
    let mut unread = Vec::new();
    let mut pids: Vec<u32> = reg.shares.iter().map(|s| s.pid).collect();
    pids.sort_unstable();
    pids.dedup(); // a process may hold several shares; its mappings count once
    for pid in pids {
        // A bench maps its region in the run's own process and forks its workers from it (bench lock);
        // bench pg's server is a throwaway cluster, counted by the pool target as such.
        match host.read(&format!("/proc/{pid}/smaps")) {
            Ok(t) => held.mapped = held.mapped.saturating_add(hugetlb_pages_mapped(&t, kib)),
            Err(e) => unread.push(format!("run {pid}: {}", e.reason)),
        }
    }
    if !unread.is_empty() {
        held.unknown = Some(unread.join("; "));
    }
    held
}

/// The pages of runs that ended without giving them back, when the pool still holds them: its persistent
/// size is what the record calls for with their shares (a pool resized by hand since is the operator's, and
/// the next run leaves it so: then they are not named).
fn ended_runs(held: &Held, kib: u64, persistent: u64) -> Option<EndedRuns> {
    let pages: u64 = held.ended.iter().map(|(_, p)| p).sum();
    (pages > 0 && persistent == held.target_with_ended).then(|| EndedRuns {
        pages,
        pids: held.ended.iter().map(|(pid, _)| *pid).collect(),
        record: format!("/run/preemptlab/pool-{kib}kB.json"),
    })
}

/// A pool's four counters as read: `nr_hugepages`, `free_hugepages`, `resv_hugepages`,
/// `surplus_hugepages`.
type Counters = (
    Result<u64, String>,
    Result<u64, String>,
    Result<u64, String>,
    Result<u64, String>,
);

/// How many times [`read_pools`] reads a pool's counters and the runs' mappings again when either moved.
const STABLE_READ_TRIES: usize = 5;

/// Two reads taken as one by [`read_settled`]: what the runs map and the pool's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Settled<M, C> {
    /// The runs' mappings, as last read.
    mappings: M,
    /// The pool's counters, as last read.
    counters: C,
    /// Whether each read agreed with the one before it on both sides of the other read; false when they
    /// kept moving for every try.
    settled: bool,
}

/// Reads `mappings` and `counters` alternately (mappings, counters, mappings, counters, ...) until two
/// consecutive reads of each are equal, at most `tries` times after the first pair. Then the counters were
/// read between two equal mapping reads and the last mappings between two equal counter reads: a run that
/// mapped or unmapped between one read and the next, on either side, changed one of the pairs and is read
/// again. Checking only the counters around one mapping read let a run that mapped after the first counter
/// read and unmapped before the second (equal counters) be counted as a user of pages the counters never
/// held, and the pool's target come out too small. Only a run that maps and unmaps twice between two of
/// the reads goes unseen.
fn read_settled<M: PartialEq, C: PartialEq>(
    mut mappings: impl FnMut() -> M,
    mut counters: impl FnMut() -> C,
    tries: usize,
) -> Settled<M, C> {
    let mut last = Settled {
        mappings: mappings(),
        counters: counters(),
        settled: false,
    };
    for _ in 0..tries {
        let m = mappings();
        let c = counters();
        let settled = m == last.mappings && c == last.counters;
        last = Settled {
            mappings: m,
            counters: c,
            settled,
        };
        if settled {
            break;
        }
    }
    last
}

/// Reads the hugetlb pools.
pub fn read_pools(host: &Host) -> Fact<Vec<HugePool>> {
    let dir = "/sys/kernel/mm/hugepages";
    let names = match host.list_dir(dir) {
        Ok(n) => n,
        Err(e) => return Fact::unavailable(dir, e.reason),
    };
    let mut pools = Vec::new();
    for name in names {
        let Some(kib) = name
            .strip_prefix("hugepages-")
            .and_then(|s| s.strip_suffix("kB"))
            .and_then(|s| s.parse().ok())
        else {
            continue;
        };
        // The reason becomes the pools fact's `unavailable` text (the audit goes on without the pools).
        let num = |f: &str| -> Result<u64, String> {
            let p = format!("{dir}/{name}/{f}");
            let t = host.read(&p).map_err(|e| e.to_string())?;
            t.trim()
                .parse()
                .map_err(|_| format!("{p}: not a number: {:?}", t.trim()))
        };
        let counters = || {
            (
                num("nr_hugepages"),
                num("free_hugepages"),
                num("resv_hugepages"),
                num("surplus_hugepages"),
            )
        };
        // The counters and the runs' mappings are separate reads: a run that maps or unmaps between them is
        // seen by one and not the other. Each is read on both sides of the other until both pairs agree
        // (`read_settled`). A pool that keeps moving is taken as last read with none of the runs' mappings
        // known: their pages then count as other users', which errs toward a larger target, never a smaller.
        let Settled {
            mappings: mut held,
            counters: mut read,
            settled,
        } = read_settled(
            || held_by_preemptlab(host, kib),
            counters,
            STABLE_READ_TRIES,
        );
        // Counters that cannot be one moment's (more reserved than free pages): a live host's were read
        // between changes, and are read again; a sysroot's copies stay so, and say it (issue 46 item 10).
        let conflict = |r: &Counters| match r {
            (Ok(t), Ok(f), Ok(v), _) => HugePool::counters_conflict(*t, *f, *v),
            _ => None,
        };
        let mut tries = 0;
        while host.is_live() && conflict(&read).is_some() && tries < STABLE_READ_TRIES {
            read = counters();
            tries += 1;
        }
        let inconsistent = conflict(&read).map(|why| match host.is_live() {
            true => format!("{why} in each of {} reads", tries + 1),
            false => format!("{why}: the sysroot's copies were read at different moments"),
        });
        if !settled {
            held.mapped = 0;
            held.unknown = Some(format!(
                "the pool's counters or the runs' mappings moved in each of {STABLE_READ_TRIES} reads \
                 around each other"
            ));
        }
        match read {
            (Ok(total), Ok(free), Ok(reserved), Ok(surplus)) => pools.push(HugePool {
                page_size_kib: kib,
                total,
                free,
                reserved,
                surplus,
                overcommit: num("nr_overcommit_hugepages").unwrap_or(0),
                held_by_preemptlab: held.added,
                mapped_by_preemptlab: held.mapped,
                left_by_ended_runs: ended_runs(&held, kib, total.saturating_sub(surplus)),
                inconsistent,
                mapped_by_preemptlab_unknown: held.unknown,
            }),
            (a, b, c, d) => {
                let why: Vec<String> = [a, b, c, d].into_iter().filter_map(|r| r.err()).collect();
                return Fact::unavailable(dir, why.join("; "));
            }
        }
    }
    pools.sort_by_key(|p| p.page_size_kib);
    Fact::known(pools, dir)
}

/// Reads the memory facts of `host`.
pub fn read(host: &Host) -> MemoryFacts {
    let meminfo = host.read("/proc/meminfo").map(|t| parse::kv_kib(&t));
    MemoryFacts {
        total_kib: meminfo_fact(&meminfo, "MemTotal"),
        available_kib: meminfo_fact(&meminfo, "MemAvailable"),
        page_tables_kib: meminfo_fact(&meminfo, "PageTables"),
        // A page size of 0 (odd host text) is no page size: every sizing divides by it.
        default_huge_page_kib: meminfo_fact(&meminfo, "Hugepagesize").and_then(|k| match k {
            0 => Err("0 kB is no huge page size"),
            k => Ok(k),
        }),
        pools: read_pools(host),
        thp_enabled: thp(host, "enabled"),
        thp_defrag: thp(host, "defrag"),
        thp_shmem_enabled: shmem_thp(host),
        overcommit_memory: host
            .fact("/proc/sys/vm/overcommit_memory")
            .and_then(|t| t.parse::<u32>()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One rule for shared-memory THP (issue 26): a region that asks gets it unless `never` or `deny`;
    /// a segment that does not ask gets it under `always`, `within_size` and `force`.
    #[test]
    fn shmem_thp_one_rule() {
        let usable = |s: &str| shmem_thp_unusable(&Fact::known(s.to_string(), SHMEM_THP)).is_none();
        for s in ["always", "within_size", "advise", "force"] {
            assert!(usable(s), "{s}");
        }
        for s in ["never", "deny", "sometimes", ""] {
            assert!(!usable(s), "{s}");
        }
        let unasked = |s| ShmemThp::parse(s).is_some_and(ShmemThp::unasked_gets_thp);
        assert!(unasked("always") && unasked("within_size") && unasked("force"));
        assert!(!unasked("advise") && !unasked("never") && !unasked("deny"));
        let off = shmem_thp_unusable(&Fact::known("never".to_string(), SHMEM_THP)).unwrap();
        assert!(off.starts_with("shared-memory THP is off ("), "{off}");
        let gone = shmem_thp_unusable(&Fact::unavailable(SHMEM_THP, "not found")).unwrap();
        assert!(gone.ends_with("not found (kernel without THP?)"), "{gone}");
    }

    #[test]
    fn pool_arithmetic_saturates_on_absurd_counts_regression() {
        // Found by fuzzing (fuzz/corpus/hugepages_sysfs/crash-pinned-kib-overflow): pinned_kib multiplied a
        // huge nr_hugepages by the page size and overflowed.
        let p = HugePool {
            page_size_kib: 1 << 30,
            total: u64::MAX / 2,
            free: 0,
            reserved: u64::MAX,
            surplus: 0,
            overcommit: 0,
            held_by_preemptlab: 0,
            mapped_by_preemptlab: 0,
            mapped_by_preemptlab_unknown: None,
            left_by_ended_runs: None,
            inconsistent: None,
        };
        assert_eq!(p.pinned_kib(), u64::MAX);
        assert_eq!(p.committed(), u64::MAX);
        assert_eq!(p.available(), 0);
    }

    /// Regression: the counters were read on both sides of one mapping read and taken when they agreed,
    /// so a run that mapped after the first counter read and unmapped before the second (the counters
    /// equal, never holding its pages) was counted as holding 16 of them: the target came out 16 pages too
    /// small. The mappings must agree on both sides of the counters too.
    #[test]
    fn a_run_mapped_only_between_two_equal_counter_reads_is_not_counted_regression() {
        use std::cell::Cell;
        const OTHERS: u64 = 100;
        // The pool's counters never hold the run's pages; the mapping read right after the first counter
        // read sees its 16 (it mapped after that read and unmaps before the next).
        let counter_reads = Cell::new(0u32);
        let seen = Cell::new(false);
        let mappings = || {
            if counter_reads.get() == 1 && !seen.replace(true) {
                16
            } else {
                0
            }
        };
        let counters = || {
            counter_reads.set(counter_reads.get() + 1);
            OTHERS
        };
        let r = read_settled(mappings, counters, STABLE_READ_TRIES);
        assert_eq!(
            r,
            Settled {
                mappings: 0,
                counters: OTHERS,
                settled: true
            }
        );
        assert!(seen.get(), "the run was seen by one read");
    }

    /// Reads that agree at once are read twice each; reads that never agree are read `tries` + 1 times
    /// and say so (the caller then counts none of the runs' mappings: the larger target).
    #[test]
    fn settled_reads_stop_when_both_pairs_agree_and_say_when_they_never_did() {
        use std::cell::Cell;
        let reads = Cell::new(0u32);
        let still = read_settled(|| 3u64, || reads.set(reads.get() + 1), 5);
        assert!(still.settled && still.mappings == 3);
        assert_eq!(reads.get(), 2);
        // The counters keep moving (another user growing the pool).
        let n = Cell::new(0u64);
        let moving = read_settled(
            || 3u64,
            || {
                n.set(n.get() + 1);
                n.get()
            },
            5,
        );
        assert_eq!(
            moving,
            Settled {
                mappings: 3,
                counters: 6,
                settled: false
            }
        );
        // The mappings keep moving, the counters do not.
        let m = Cell::new(0u64);
        let moving = read_settled(
            || {
                m.set(m.get() + 1);
                m.get()
            },
            || 7u64,
            5,
        );
        assert!(!moving.settled && moving.mappings == 6 && moving.counters == 7);
    }

    /// What a live run holds is read from its record and its smaps: the pages it added, and those its
    /// process maps now (a run that has grown the pool but not mapped its region maps none); a dead run's
    /// share is not counted, and a run whose smaps cannot be read is named.
    #[test]
    fn preemptlab_runs_pages_from_the_record_and_their_smaps() {
        let root = tempfile::tempdir().unwrap();
        let put = |rel: &str, text: &str| {
            let p = root.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        let stat = |pid: u32, ticks: u64| {
            format!(
                "{pid} (preemptlab) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {ticks} 0 0 {} 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
                u64::MAX
            )
        };
        put(
            "run/preemptlab/pool-2048kB.json",
            r#"{"page_kib":2048,"base":10,"shares":[
                {"pid":41,"start_ticks":5,"pages":256,"need":256},
                {"pid":42,"start_ticks":7,"pages":20,"need":50},
                {"pid":43,"start_ticks":9,"pages":30,"need":30},
                {"pid":41,"start_ticks":5,"pages":4,"need":4}]}"#,
        );
        put("proc/41/stat", &stat(41, 5));
        put(
            "proc/41/smaps",
            "7f0000000000-7f0020000000 rw-s 00000000 00:10 5 /anon_hugepage (deleted)\n\
             Size: 524288 kB\nKernelPageSize: 2048 kB\n\
             7f1000000000-7f1000001000 rw-p 00000000 00:00 0\nKernelPageSize: 4 kB\n",
        );
        put("proc/42/stat", &stat(42, 7)); // alive, smaps unreadable (absent here)
        put("proc/43/stat", &stat(43, 99)); // pid reused: the run is dead
        let held = held_by_preemptlab(&Host::at(root.path()), 2048);
        assert_eq!(held.added, 256 + 20 + 4);
        assert_eq!(
            held.mapped, 256,
            "run 41's two shares, one process: its mapping once"
        );
        assert!(held.unknown.clone().unwrap().starts_with("run 42: "));
        // Run 43 ended without giving its 30 pages back: named while the pool is the record's size with
        // them (10 + 256 + 20 + 30 + 4), not once the pool was resized by hand.
        assert_eq!(held.ended, vec![(43, 30)]);
        let ended = ended_runs(&held, 2048, 320).unwrap();
        assert_eq!((ended.pages, ended.pids), (30, vec![43]));
        assert_eq!(ended.record, "/run/preemptlab/pool-2048kB.json");
        assert_eq!(ended_runs(&held, 2048, 100), None);
        assert_eq!(hugetlb_pages_mapped("garbage", 2048), 0);
        assert_eq!(
            held_by_preemptlab(&Host::at(root.path()), 1 << 20),
            Held::default()
        );
    }
}
