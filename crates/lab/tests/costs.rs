//! `bench lock`'s cost measurement (`lab::lock::costs`) on this machine. A test binary of its own: the
//! measurement pins processes and keeps both CPUs busy for a fraction of a second, which makes the library's
//! timing tests (`latency::tests`) miss their periods when it runs beside them.

use std::time::{Duration, Instant};

use lab::lock::costs::{line, measure};

#[test]
fn the_costs_are_measured_and_plausible() {
    let t = Instant::now();
    let c = measure(None).unwrap();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    for (name, v) in [
        ("spin", c.spin_ns),
        ("syscall", c.syscall_ns),
        ("switch", c.switch_half_round_trip_ns),
        ("wake", c.futex_wake_nobody_ns),
    ] {
        assert!(v > 0.0 && v < 1e7, "{name} {v}");
    }
    assert_eq!(c.fault_2m_map_ns, None);
    assert!(line(&c, Some(1200.0)).contains("fault (4 KB) 1.20 us"));
    // The read fault that maps a fault-around group: measured everywhere, plausible.
    let r = c.fault_4k_read_ns.expect("the 4 KB read fault is measured");
    assert!(r > 0.0 && r < 1e7, "{r}");
    assert!(line(&c, None).contains("a read fault mapping 64 KB"));
    // The cache-line handover, on two CPUs: ordered percentiles, a plausible median.
    let two = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    match (
        c.line_transfer_ns,
        c.line_transfer_p10_ns,
        c.line_transfer_p90_ns,
    ) {
        (Some(m), Some(lo), Some(hi)) => {
            assert!(two);
            assert!(lo <= m && m <= hi, "{lo} {m} {hi}");
            assert!(m > 1.0 && m < 1e6, "{m}");
            assert!(line(&c, None).contains("cache-line handover"));
        }
        other => assert!(!two, "two CPUs, no handover measured: {other:?}"),
    }
    assert!(!line(&c, None).contains("2 MB"));
    // The line under a crowd: every size the CPUs allow (one spinner on two CPUs), plausible figures with
    // ordered percentiles, and a write of the line that costs a spinner something in some pairs of windows
    // (the median of a 2-10% effect is not asserted: a busy machine can hide it).
    let cpus = shmlock::wake_cost::allowed_cpus().len();
    let sizes: Vec<usize> = c.line_crowd.iter().map(|x| x.spinners as usize).collect();
    assert_eq!(sizes, lab::lock::crowd::sizes(cpus));
    for x in &c.line_crowd {
        assert!(
            x.handover_p10_ns <= x.handover_ns && x.handover_ns <= x.handover_p90_ns,
            "{x:?}"
        );
        assert!(x.handover_ns > 1.0 && x.handover_ns < 1e6, "{x:?}");
        assert!(
            x.write_stall_p10_ns <= x.write_stall_ns && x.write_stall_ns <= x.write_stall_p90_ns,
            "{x:?}"
        );
        assert!(x.write_stall_ns.abs() < 1e6, "{x:?}");
        assert!(x.write_stall_p90_ns > 0.0, "{x:?}");
        // One CPU per core first: as many cores as CPUs used unless the cores ran out.
        let cores = x.cores.expect("the CPU topology is readable here");
        assert!(cores >= 1 && cores <= x.spinners + 1, "{x:?}");
    }
    if cpus >= 2 {
        assert!(
            line(&c, None).contains("spinning: a handover"),
            "{}",
            line(&c, None)
        );
    }

    // The 2 MB mapping, where a pool has free pages (none is grown for a test): measured and plausible;
    // null without a pool.
    let free: u64 =
        std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
    let c = measure(Some(free.clamp(1, 2))).unwrap();
    match c.fault_2m_map_ns {
        Some(ns) => {
            assert!(free > 0);
            assert!(ns > 0.0 && ns < 1e7, "{ns}");
            assert!(line(&c, None).contains("mapping a 2 MB page"));
        }
        None => eprintln!("2 MB mapping not measured here ({free} free 2 MB pages)"),
    }
    if free == 0 {
        assert_eq!(c.fault_2m_map_ns, None);
    }
}
