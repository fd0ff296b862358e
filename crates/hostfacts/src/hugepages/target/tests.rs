//! `hugepages::target`'s unit tests: the host's one pool figure over instances and pool counters written by hand, in
//! the phases of a concurrent `--reserve-hugepages` run.

use std::collections::BTreeMap;

use super::*;
use results::host::fact::Fact;
use results::host::hugepages::Basis;
use results::host::memory::HugePool;
use results::host::postgres::Segment;

const MIB: u64 = 1024;

/// A pool of `kib` pages with the kernel's counts; `added` and `mapped`: what preemptlab's live runs added
/// to it and map now.
fn pool(kib: u64, total: u64, free: u64, reserved: u64, surplus: u64) -> HugePool {
    HugePool {
        page_size_kib: kib,
        total,
        free,
        reserved,
        surplus,
        overcommit: 0,
        held_by_preemptlab: 0,
        mapped_by_preemptlab: 0,
        mapped_by_preemptlab_unknown: None,
        left_by_ended_runs: None,
        inconsistent: None,
    }
}

fn with_runs(mut p: HugePool, added: u64, mapped: u64) -> HugePool {
    p.held_by_preemptlab = added;
    p.mapped_by_preemptlab = mapped;
    p
}

fn mem(pools: Vec<HugePool>) -> MemoryFacts {
    let na = || Fact::unavailable("test", "not set");
    MemoryFacts {
        total_kib: Fact::known(8 << 20, "test"),
        available_kib: na(),
        page_tables_kib: na(),
        default_huge_page_kib: Fact::known(2048, "test"),
        pools: Fact::known(pools, "test"),
        thp_enabled: Fact::unavailable("test", "not set"),
        thp_defrag: Fact::unavailable("test", "not set"),
        thp_shmem_enabled: Fact::unavailable("test", "not set"),
        overcommit_memory: Fact::unavailable("test", "not set"),
    }
}

/// A running instance whose main segment is `seg_kib` on pages of `seg_page_kib` (4: not on huge pages),
/// with `huge_pages` and, when given, `huge_page_size`.
fn instance(
    pid: u32,
    dir: &str,
    seg_kib: u64,
    seg_page_kib: u64,
    hp: &str,
    huge_page_size: Option<&str>,
) -> PgInstance {
    let mut settings = BTreeMap::new();
    settings.insert(
        "huge_pages".to_string(),
        Fact::known(hp.to_string(), "test"),
    );
    if let Some(s) = huge_page_size {
        settings.insert(
            "huge_page_size".to_string(),
            Fact::known(s.to_string(), "test"),
        );
    }
    let huge = seg_page_kib >= 2048;
    PgInstance {
        postmaster_pid: pid,
        exe: Fact::known("/usr/lib/postgresql/15/bin/postgres".into(), "test"),
        data_dir: Fact::known(dir.into(), "test"),
        version: Fact::known("15".into(), "test"),
        port: Fact::unavailable("test", "not set"),
        socket_dir: Fact::unavailable("test", "not set"),
        segment: Fact::known(
            Segment {
                mapping: if huge {
                    "/anon_hugepage (deleted)".into()
                } else {
                    "/dev/zero (deleted)".into()
                },
                size_kib: seg_kib,
                kernel_page_size_kib: seg_page_kib,
                thp_pmd_mapped_kib: 0,
                hugetlb_kib: if huge { seg_kib } else { 0 },
            },
            format!("/proc/{pid}/smaps"),
        ),
        on_huge_pages: Fact::known(huge, "test"),
        postmaster_vm_peak_kib: Fact::unavailable("test", "not set"),
        processes: Vec::new(),
        backend_pids: Vec::new(),
        page_tables_kib: 0,
        page_tables_projected_kib: Fact::unavailable("test", "not set"),
        page_tables_full_touch_kib: Fact::unavailable("test", "not set"),
        settings,
        server: None,
        container: None,
        preemptlab_throwaway: false,
    }
}

/// The two instances of the bar: 256 MB and 512 MB of shared buffers, whose segments (buffers and
/// the rest of shared memory) are 130 and 260 pages of 2 MB; needs with the 2% margin: 133 and 266.
fn two_on_huge_pages() -> Vec<PgInstance> {
    vec![
        instance(100, "/srv/a", 130 * 2 * MIB, 2048, "on", None),
        instance(200, "/srv/b", 260 * 2 * MIB, 2048, "on", None),
    ]
}

fn only(targets: Vec<PoolTarget>) -> PoolTarget {
    assert_eq!(targets.len(), 1, "{targets:?}");
    targets.into_iter().next().unwrap()
}

#[test]
fn two_instances_get_one_target_and_each_its_own_need() {
    // Regression (issue 25): two instances on 4 KB pages got 282 and 76, each with the same sysctl.d line.
    let instances = vec![
        instance(100, "/srv/a", 264 * MIB, 4, "try", None),
        instance(200, "/srv/b", 520 * MIB, 4, "try", None),
    ];
    let t = only(for_host(&mem(vec![pool(2048, 0, 0, 0, 0)]), &instances));
    assert_eq!(t.need_of(100).unwrap().pages_needed, 132 + 3);
    assert_eq!(t.need_of(200).unwrap().pages_needed, 260 + 6);
    assert_eq!(t.target, 135 + 266);
    assert_eq!(t.committed_by_others, 0);
    assert_eq!(
        t.commands,
        vec![
            "sysctl -w vm.nr_hugepages=401".to_string(),
            "echo 'vm.nr_hugepages = 401' > /etc/sysctl.d/60-preemptlab-hugepages.conf".into()
        ]
    );
    let d = t.describe_for(Some(100));
    assert!(
        d.starts_with("401 pages of 2.00 MiB for this host: this instance needs 135 ("),
        "{d}"
    );
    assert!(d.ends_with(", the other instance 266"), "{d}");
}

#[test]
fn a_reserving_run_is_excluded_exactly_once_at_each_phase() {
    // Two huge_pages = on instances hold their segments (390 pages: 300 faulted in, 90 reserved); another
    // user holds 10 pages. Idle, the host needs 133 + 266 + 10 = 409 pages.
    let instances = two_on_huge_pages();
    let idle = pool(2048, 410, 100, 90, 0);
    let target = |p: HugePool| only(for_host(&mem(vec![p]), &instances));
    let t = target(idle.clone());
    assert_eq!(
        (t.committed, t.committed_by_others, t.target),
        (400, 10, 409)
    );

    // A `bench lock --reserve-hugepages` run grew the pool by 256 pages and has not mapped its region yet:
    // its pages are free, not committed. Regression: they were subtracted from the committed pages all the
    // same, and the target came out 256 too low (the reported 299 instead of 422).
    let grown = with_runs(pool(2048, 666, 356, 90, 0), 256, 0);
    let t = target(grown);
    assert_eq!((t.committed_by_preemptlab, t.target), (0, 409));
    assert_eq!(
        t.operators_pool(),
        410,
        "the run's pages are not the operator's"
    );

    // It mapped its region: reserved, not yet faulted in.
    let t = target(with_runs(pool(2048, 666, 356, 346, 0), 256, 256));
    assert_eq!(
        (t.committed, t.committed_by_preemptlab, t.target),
        (656, 256, 409)
    );

    // It faulted its pages in.
    let t = target(with_runs(pool(2048, 666, 100, 90, 0), 256, 256));
    assert_eq!(
        (t.committed, t.committed_by_preemptlab, t.target),
        (656, 256, 409)
    );

    // It ended and gave them back.
    assert_eq!(target(idle).target, 409);
}

#[test]
fn a_run_that_counted_on_free_pages_is_excluded_by_what_it_maps() {
    // A run found 300 free pages, added none, and mapped 300: the record's share is 0 pages, its mapping is
    // what counts.
    let instances = two_on_huge_pages();
    let t = only(for_host(
        &mem(vec![with_runs(pool(2048, 700, 10, 0, 0), 0, 300)]),
        &instances,
    ));
    assert_eq!((t.committed_by_preemptlab, t.committed_by_others), (300, 0));
    assert_eq!(t.target, 399);
}

#[test]
fn a_run_whose_mappings_are_unreadable_errs_high_and_says_so() {
    let instances = two_on_huge_pages();
    let mut p = with_runs(pool(2048, 666, 100, 90, 0), 256, 0);
    p.mapped_by_preemptlab_unknown = Some("run 42: permission denied (needs root)".into());
    let t = only(for_host(&mem(vec![p]), &instances));
    assert_eq!(t.target, 409 + 256, "its pages count as another user's");
    assert!(
        t.arithmetic.iter().any(|l| l.contains("run 42")),
        "{:?}",
        t.arithmetic
    );
}

#[test]
fn committed_pages_are_never_fewer_than_the_instances_map() {
    // The counters read a moment apart: fewer committed (less preemptlab's) than the instances map.
    let instances = two_on_huge_pages();
    let t = only(for_host(
        &mem(vec![with_runs(pool(2048, 400, 100, 0, 0), 0, 100)]),
        &instances,
    ));
    assert_eq!((t.committed_by_instances, t.committed_by_others), (390, 0));
    assert_eq!(t.target, 399);
}

#[test]
fn surplus_pages_are_committed_but_not_the_persistent_pool() {
    // The pool was shrunk to 380 under 390 pages in use and 10 free: 20 pages are surplus.
    let instances = two_on_huge_pages();
    let t = only(for_host(&mem(vec![pool(2048, 400, 10, 0, 20)]), &instances));
    assert_eq!(t.persistent, Some(380));
    assert_eq!((t.committed_by_others, t.target), (0, 399));
    assert_eq!(t.shortfall(), 19);
    assert!(t.arithmetic.iter().any(|l| l.contains("20 surplus")));
}

#[test]
fn one_gigabyte_pages_have_their_own_target_and_sysfs_lines() {
    let instances = vec![
        instance(100, "/srv/a", 4 << 20, 4, "on", Some("1GB")),
        instance(200, "/srv/b", 260 * 2 * MIB, 2048, "on", None),
    ];
    let m = mem(vec![
        pool(2048, 300, 40, 0, 0),
        pool(1 << 20, 2, 1, 0, 0), // another user holds one 1 GB page
    ]);
    let targets = for_host(&m, &instances);
    assert_eq!(targets.len(), 2);
    let (small, big) = (&targets[0], &targets[1]);
    assert_eq!((small.page_size_kib, small.target), (2048, 266));
    assert_eq!(big.page_size_kib, 1 << 20);
    assert_eq!(big.need_of(100).unwrap().pages_needed, 4 + 1);
    assert_eq!((big.committed_by_others, big.target), (1, 6));
    assert_eq!(
        big.commands[0],
        "echo 6 > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
    );
    assert!(big.commands[1].contains("hugepagesz=1G hugepages=6"));
}

#[test]
fn a_bench_pg_throwaway_cluster_is_preemptlab_s() {
    let mut instances = two_on_huge_pages();
    let mut throwaway = instance(
        300,
        "/tmp/preemptlab-pg-4242-0/data",
        70 * 2 * MIB,
        2048,
        "on",
        None,
    );
    throwaway.preemptlab_throwaway = true;
    instances.push(throwaway);
    let t = only(for_host(&mem(vec![pool(2048, 500, 40, 0, 0)]), &instances));
    assert!(t.need_of(300).is_none());
    assert_eq!((t.committed_by_preemptlab, t.committed_by_others), (70, 0));
    assert_eq!(t.target, 399);
    assert!(!is_preemptlab_cluster(&instance(
        1,
        "/srv/preemptlab-pg-x-0",
        1,
        4,
        "on",
        None
    )));
}

#[test]
fn a_size_asked_about_adds_to_the_running_instances() {
    let instances = two_on_huge_pages();
    let need = Need {
        label: "1GB of shared memory".into(),
        postmaster_pid: None,
        basis: Basis::Given { size_kib: 1 << 20 },
        pages_exact: 512,
        pages_needed: 523,
        own_pages: 0,
    };
    let m = mem(vec![pool(2048, 400, 10, 0, 0)]);
    let t = for_page_size(&m, &instances, 2048, &|i| page_of(i, &m), vec![need]);
    assert_eq!(t.target, 399 + 523);
    assert_eq!(
        t.describe_for(None),
        "922 pages of 2.00 MiB for this host: 1GB of shared memory needs 523, the 2 instances 399"
    );
}

#[test]
fn a_zero_huge_page_size_divides_nothing() {
    // Hugepagesize: 0 kB (odd host text) is no page size: the default becomes 2 MB, and sizing at 0 kB
    // does not divide by zero.
    let mut m = mem(vec![]);
    m.default_huge_page_kib = Fact::known(0, "test");
    assert_eq!(default_page_kib(&m), 2048);
    let own = sizing::own_sizing(&Basis::Given { size_kib: 1 << 20 }, 0);
    assert!(own.pages_needed > 0);
    let i = instance(1, "/srv/a", 1 << 20, 0, "on", None);
    assert!(sizing::instance_basis(&i, 0).is_ok());
}

#[test]
fn a_restart_needs_room_beside_every_other_user_and_not_a_runs_pages() {
    // Regression (issue 25): the shortfall metric compared one instance's need with the whole pool,
    // ignoring the pages the other instance holds.
    let instances = two_on_huge_pages();
    let t = only(for_host(&mem(vec![pool(2048, 390, 90, 0, 0)]), &instances));
    assert_eq!(t.restart_room(100), Some((130, 130)));
    assert_eq!(t.restart_shortfall(200), Some(0));
    // Shrunk under its users: 10 of the 390 in use are surplus; b's restart finds 380 - 130 = 250 < 260.
    let t = only(for_host(&mem(vec![pool(2048, 390, 0, 0, 10)]), &instances));
    assert_eq!(t.restart_shortfall(200), Some(10));
    // A run's 256 added pages are no room: they go when it ends.
    let t = only(for_host(
        &mem(vec![with_runs(pool(2048, 636, 246, 0, 10), 256, 0)]),
        &instances,
    ));
    assert_eq!(t.operators_pool(), 370);
    assert_eq!(t.restart_shortfall(200), Some(20));
    assert_eq!(t.restart_shortfall(999), None);
}
