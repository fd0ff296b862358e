//! Memory facts: RAM, page-table memory, every hugetlb pool, transparent huge pages, overcommit.
//!
//! Pools: `/sys/kernel/mm/hugepages/hugepages-<size>kB/` (`Documentation/admin-guide/mm/hugetlbpage.rst`).
//! THP: `/sys/kernel/mm/transparent_hugepage/{enabled,defrag,shmem_enabled}` (`transhuge.rst`); shared
//! memory obeys `shmem_enabled`, not `enabled`.

pub use results::host::memory::{HugePool, MemoryFacts};

use crate::fact::Fact;
use crate::host::Host;
use crate::parse;

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

/// Pages of the `kib` pool that live preemptlab runs hold, from their record; 0 when there is none.
fn held_by_preemptlab(host: &Host, kib: u64) -> u64 {
    let Ok(text) = host.read(&format!("/run/preemptlab/pool-{kib}kB.json")) else {
        return 0;
    };
    let Some(mut reg) = crate::pool_record::Registry::parse(&text) else {
        return 0;
    };
    reg.prune(|s| {
        let stat = host.read(&format!("/proc/{}/stat", s.pid)).ok();
        crate::pool_record::share_alive(s, stat.as_deref())
    });
    reg.target().saturating_sub(reg.base)
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
        match (
            num("nr_hugepages"),
            num("free_hugepages"),
            num("resv_hugepages"),
            num("surplus_hugepages"),
        ) {
            (Ok(total), Ok(free), Ok(reserved), Ok(surplus)) => pools.push(HugePool {
                page_size_kib: kib,
                total,
                free,
                reserved,
                surplus,
                overcommit: num("nr_overcommit_hugepages").unwrap_or(0),
                held_by_preemptlab: held_by_preemptlab(host, kib),
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
    let thp = |f: &str| {
        let p = format!("/sys/kernel/mm/transparent_hugepage/{f}");
        host.fact(&p).and_then(|t| {
            parse::bracketed(&t).ok_or_else(|| format!("no [selected] value in {t:?}"))
        })
    };
    MemoryFacts {
        total_kib: meminfo_fact(&meminfo, "MemTotal"),
        available_kib: meminfo_fact(&meminfo, "MemAvailable"),
        page_tables_kib: meminfo_fact(&meminfo, "PageTables"),
        default_huge_page_kib: meminfo_fact(&meminfo, "Hugepagesize"),
        pools: read_pools(host),
        thp_enabled: thp("enabled"),
        thp_defrag: thp("defrag"),
        thp_shmem_enabled: thp("shmem_enabled"),
        overcommit_memory: host
            .fact("/proc/sys/vm/overcommit_memory")
            .and_then(|t| t.parse::<u32>()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        };
        assert_eq!(p.pinned_kib(), u64::MAX);
        assert_eq!(p.committed(), u64::MAX);
        assert_eq!(p.available(), 0);
    }
}
