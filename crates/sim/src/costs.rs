//! Costs measured on a machine and the parameters they set. `bench lock` measures [`Costs`] once per run
//! (`lab::lock::costs`) and records them in its result; `preemptlab sim --costs-from FILE` sets the
//! parameters [`taken`] maps them to, so the model runs with the costs of the machine (or guest) the bench
//! ran on. docs/model.md ("Costs from a measurement") says what is taken and what stays a default.

use results::model::{Costs, LineCrowd, Taken, Uncontended};

use crate::matrix;
use results::model::Params;

fn ns(v: f64) -> u64 {
    if v.is_finite() && v > 0.0 {
        v.round() as u64
    } else {
        0
    }
}

/// The parameters the costs (and the result's fault cost, ns per fault, when measured) set:
///
/// - `fault_4k_ns` = the read fault that maps a fault-around group (`fault_4k_read_ns`), as the sim charges
///   per fault; in results without it, the fault cost, whose calibration writes, so each of its faults maps
///   one page (write faults on shared memory take no fault-around): an underestimate (1.2-1.5 us against
///   2.4-2.7 us for a fault-around read on the development machine).
/// - `spin_ns`, `syscall_ns` as measured; `futex_wake_ns` (the model's wake of a waiter on a busy CPU)
///   = the wake with nobody queued, as the defaults were derived.
/// - `futex_wake_idle_ns` = the remote wake less the wake with nobody queued: what waking a sleeper on an
///   idle CPU costs the waker on top.
/// - `fault_2m_map_ns` as measured.
/// - `lock_transfer_ns` = the cache-line handover's median; the lock's line costs per spinner
///   (`line_ns`, `spin_line_ns`) follow it unless set; a crowd measurement sets `line_ns` and the write
///   stall `reread_ns` ([`crowd_taken`]).
/// - `ctx_switch_ns` = the half round trip less what the model charges separately for it (`futex_wake_ns`
///   and the `futex_wait` syscall, `syscall_ns`), at least half the half round trip: the subtraction must
///   not let noise in the syscall figures erase the switch.
pub fn taken(c: &Costs, fault_ns: Option<f64>) -> Vec<Taken> {
    let mut out = Vec::new();
    if let Some(r) = c.fault_4k_read_ns {
        out.push(Taken {
            param: "fault_4k_ns",
            value: ns(r).max(1),
            from: "costs.fault_4k_read_ns",
        });
    } else if let Some(f) = fault_ns {
        out.push(Taken {
            param: "fault_4k_ns",
            value: ns(f).max(1),
            from: "fault_cost.ns_per_fault",
        });
    }
    let syscall = ns(c.syscall_ns).max(1);
    let wake = ns(c.futex_wake_nobody_ns).max(1);
    let half = ns(c.switch_half_round_trip_ns);
    out.push(Taken {
        param: "spin_ns",
        value: ns(c.spin_ns).max(1),
        from: "costs.spin_ns",
    });
    out.push(Taken {
        param: "syscall_ns",
        value: syscall,
        from: "costs.syscall_ns",
    });
    out.push(Taken {
        param: "ctx_switch_ns",
        value: half.saturating_sub(syscall + wake).max(half / 2).max(1),
        from: "costs.switch_half_round_trip_ns",
    });
    out.push(Taken {
        param: "futex_wake_ns",
        value: wake,
        from: "costs.futex_wake_nobody_ns",
    });
    if let Some(r) = c.futex_wake_remote_ns {
        out.push(Taken {
            param: "futex_wake_idle_ns",
            value: ns(r).saturating_sub(wake),
            from: "costs.futex_wake_remote_ns",
        });
    }
    if let Some(l) = c.line_transfer_ns {
        out.push(Taken {
            param: "lock_transfer_ns",
            value: ns(l).max(1),
            from: "costs.line_transfer_ns",
        });
    }
    if let Some(m) = c.fault_2m_map_ns {
        out.push(Taken {
            param: "fault_2m_map_ns",
            value: ns(m).max(1),
            from: "costs.fault_2m_map_ns",
        });
    }
    out.extend(crowd_taken(&c.line_crowd));
    out
}

/// The line's per-spinner costs from the crowd measurements (`costs.line_crowd`), as the model charges
/// them:
///
/// - `reread_ns`: the model stops a spinner's iterations for the mean spinner's wait after a write,
///   (n + 1) / 2 places in the queue of re-reads of `reread_ns` each with n spinning; the median over the
///   crowd sizes of the measured write stall over (n + 1) / 2 (at one size, the stall itself). Not
///   `spin_line_ns`: that is also what `line_fifo` serves each request of the line in, a transfer, and a
///   spinner's stall is less (its `pause` hides part of the miss).
/// - `line_ns`: a handover costs `line_ns` for every other running spinner; the slope of the measured
///   handover over the spinners (least squares), when at least two crowd sizes were measured (more than
///   two CPUs), 0 if it falls; else not set (it follows the two-CPU transfer).
pub fn crowd_taken(crowd: &[LineCrowd]) -> Vec<Taken> {
    let mut out = Vec::new();
    let pts: Vec<(f64, &LineCrowd)> = crowd
        .iter()
        .filter(|c| c.write_stall_ns.is_finite() && c.handover_ns.is_finite())
        .map(|c| (c.spinners as f64, c))
        .collect();
    if pts.is_empty() {
        return out;
    }
    let per_place: Vec<f64> = pts
        .iter()
        .map(|(n, c)| c.write_stall_ns / ((n + 1.0) / 2.0))
        .collect();
    let median = stats::median(&per_place);
    out.push(Taken {
        param: "reread_ns",
        // At least 1: 0 would mean a write that costs the spinners nothing.
        value: ns(median).max(1),
        from: "costs.line_crowd[].write_stall_ns",
    });
    if pts.len() >= 2 {
        let m = pts.len() as f64;
        let mx = pts.iter().map(|(n, _)| n).sum::<f64>() / m;
        let my = pts.iter().map(|(_, c)| c.handover_ns).sum::<f64>() / m;
        let (sxy, sxx) = pts.iter().fold((0.0, 0.0), |(sxy, sxx), (n, c)| {
            (
                sxy + (n - mx) * (c.handover_ns - my),
                sxx + (n - mx) * (n - mx),
            )
        });
        // Sizes all alike (a hand-made file) give no slope.
        if sxx > 0.0 {
            out.push(Taken {
                param: "line_ns",
                value: ns(sxy / sxx),
                from: "costs.line_crowd[].handover_ns",
            });
        }
    }
    out
}

/// The per-operation parameters an uncontended run sets:
///
/// - `cs_ns` = the hold p50 on 2 MB pages (with one worker nobody waits, so the hold is the pop);
/// - `op_ns` = the lone worker's time per operation on 2 MB pages less the work and the critical section;
/// - `access_4k_ns` = its time per operation on 4 KB pages less that on 2 MB pages and less its faults at
///   `fault_ns` each (when a fault cost was measured).
///
/// The time per operation is the lone worker's wall time (its CPU does nothing else), not its rusage,
/// which in the TCG guests of docs/results/vm missed a third of it (wall 1.45-1.51x the rusage per
/// operation) and made the model overpredict every guest cell by about that much.
pub fn op_taken(u: &Uncontended, fault_ns: Option<f64>) -> Vec<Taken> {
    let cs = ns(u.hold_2m_p50_ns).max(1);
    let mut out = vec![
        Taken {
            param: "cs_ns",
            value: cs,
            from: "cells[pg, 1 worker, hugetlb-2m].hold_ns.p50",
        },
        Taken {
            param: "op_ns",
            value: ns(u.op_2m_ns).saturating_sub(u.work_ns + cs).max(1),
            from: "cells[pg, 1 worker, hugetlb-2m].ops_per_s",
        },
    ];
    if let (Some((op_4k, faults)), Some(f)) = (u.op_4k, fault_ns) {
        out.push(Taken {
            param: "access_4k_ns",
            value: ns(op_4k - u.op_2m_ns - faults * f),
            from: "cells[pg, 1 worker, 4k].ops_per_s",
        });
    }
    out
}

/// `p` with the taken parameters set.
pub fn apply(p: &Params, taken: &[Taken]) -> Params {
    taken.iter().fold(p.clone(), |p, t| {
        matrix::set_param(&p, &format!("{}={}", t.param, t.value))
            .expect("taken names integer parameters")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs() -> Costs {
        Costs {
            spin_ns: 38.4,
            syscall_ns: 95.0,
            switch_half_round_trip_ns: 1900.0,
            futex_wake_nobody_ns: 210.0,
            futex_wake_remote_ns: Some(12_210.0),
            fault_2m_map_ns: Some(2_480.4),
            fault_4k_read_ns: None,
            line_transfer_ns: Some(61.6),
            line_transfer_p10_ns: Some(55.0),
            line_transfer_p90_ns: Some(80.2),
            line_crowd: vec![],
        }
    }

    fn crowd(n: u32, handover_ns: f64, write_stall_ns: f64) -> LineCrowd {
        LineCrowd {
            spinners: n,
            handover_ns,
            handover_p10_ns: handover_ns * 0.9,
            handover_p90_ns: handover_ns * 1.1,
            write_stall_ns,
            write_stall_p10_ns: write_stall_ns * 0.9,
            write_stall_p90_ns: write_stall_ns * 1.1,
            cores: Some(n + 1),
        }
    }

    #[test]
    fn the_crowd_sets_the_lines_per_spinner_costs() {
        // Two CPUs: one size. The stall of one spinner is one place in the queue; the handover has no
        // slope; `spin_line_ns`, which `line_fifo` serves requests in, keeps following the transfer.
        let c = Costs {
            line_crowd: vec![crowd(1, 80.0, 41.6)],
            ..costs()
        };
        let t = taken(&c, None);
        assert_eq!(value(&t, "reread_ns"), Some(42));
        assert_eq!(value(&t, "line_ns"), None);
        assert_eq!(value(&t, "spin_line_ns"), None);
        assert_eq!(value(&t, "lock_transfer_ns"), Some(62));
        let p = apply(&Params::default(), &t);
        assert_eq!(
            (p.line_ns, p.spin_line_ns, p.reread_ns),
            (None, None, Some(42))
        );
        // Many CPUs: the mean spinner waits (n + 1) / 2 places of 50 ns; a handover grows 30 ns a spinner.
        let sizes = [1u32, 2, 4, 8, 16, 32, 64];
        let c = Costs {
            line_crowd: sizes
                .iter()
                .map(|&n| crowd(n, 100.0 + 30.0 * n as f64, 50.0 * (n as f64 + 1.0) / 2.0))
                .collect(),
            ..costs()
        };
        let t = taken(&c, None);
        assert_eq!(value(&t, "reread_ns"), Some(50));
        assert_eq!(value(&t, "line_ns"), Some(30));
        let from = |name| t.iter().find(|x| x.param == name).unwrap().from;
        assert_eq!(from("line_ns"), "costs.line_crowd[].handover_ns");
        assert_eq!(from("reread_ns"), "costs.line_crowd[].write_stall_ns");
        // One size far off (the largest, a saturated line) moves the median of the sizes little.
        let mut off = c.clone();
        off.line_crowd[6].write_stall_ns *= 5.0;
        assert_eq!(value(&taken(&off, None), "reread_ns"), Some(50));
        // Noise that makes the handover fall with the crowd, or the stall negative, cannot make a cost
        // negative, nor a write free.
        let c = Costs {
            line_crowd: vec![crowd(1, 300.0, -5.0), crowd(2, 200.0, -5.0)],
            ..costs()
        };
        let t = taken(&c, None);
        assert_eq!(value(&t, "line_ns"), Some(0));
        assert_eq!(value(&t, "reread_ns"), Some(1));
        // One size twice (a hand-made file): no slope, no line_ns.
        let c = Costs {
            line_crowd: vec![crowd(4, 300.0, 60.0), crowd(4, 320.0, 70.0)],
            ..costs()
        };
        assert_eq!(value(&taken(&c, None), "line_ns"), None);
        // Results without the crowd set neither.
        let t = taken(&costs(), None);
        assert_eq!((value(&t, "line_ns"), value(&t, "reread_ns")), (None, None));
    }

    fn value(t: &[Taken], name: &str) -> Option<u64> {
        t.iter().find(|x| x.param == name).map(|x| x.value)
    }

    #[test]
    fn each_measurement_sets_its_parameter() {
        let t = taken(&costs(), Some(1351.05));
        assert_eq!(value(&t, "fault_4k_ns"), Some(1351));
        assert_eq!(value(&t, "spin_ns"), Some(38));
        assert_eq!(value(&t, "syscall_ns"), Some(95));
        assert_eq!(value(&t, "futex_wake_ns"), Some(210));
        // On top of the wake that finds nobody.
        assert_eq!(value(&t, "futex_wake_idle_ns"), Some(12_000));
        // The half round trip less the wait's syscall and the wake.
        assert_eq!(value(&t, "ctx_switch_ns"), Some(1900 - 95 - 210));
        assert_eq!(value(&t, "fault_2m_map_ns"), Some(2480));
        assert_eq!(value(&t, "lock_transfer_ns"), Some(62));
        let p = apply(&Params::default(), &t);
        assert_eq!(p.lock_transfer_ns, 62);
        assert_eq!(
            (p.line_ns, p.spin_line_ns),
            (None, None),
            "they follow the transfer"
        );
        assert_eq!(p.fault_4k_ns, 1351);
        assert_eq!(p.ctx_switch_ns, 1595);
        assert_eq!(p.futex_wake_idle_ns, 12_000);
        assert_eq!(p.fault_2m_map_ns, 2480);
        // What no measurement covers stays the default.
        assert_eq!(p.ipi_ns, Params::default().ipi_ns);
        assert_eq!(p.fault_around_pages, Params::default().fault_around_pages);
    }

    #[test]
    fn the_read_fault_wins_over_the_write_fault() {
        let c = Costs {
            fault_4k_read_ns: Some(2604.4),
            ..costs()
        };
        let t = taken(&c, Some(1351.05));
        assert_eq!(value(&t, "fault_4k_ns"), Some(2604));
        let from = t.iter().find(|x| x.param == "fault_4k_ns").unwrap().from;
        assert_eq!(from, "costs.fault_4k_read_ns");
        assert_eq!(t.iter().filter(|x| x.param == "fault_4k_ns").count(), 1);
    }

    #[test]
    fn missing_measurements_leave_their_defaults() {
        let c = Costs {
            futex_wake_remote_ns: None,
            fault_2m_map_ns: None,
            line_transfer_ns: None,
            ..costs()
        };
        let t = taken(&c, None);
        assert_eq!(value(&t, "fault_4k_ns"), None);
        assert_eq!(value(&t, "lock_transfer_ns"), None);
        assert_eq!(value(&t, "futex_wake_idle_ns"), None);
        assert_eq!(value(&t, "fault_2m_map_ns"), None);
        let p = apply(&Params::default(), &t);
        assert_eq!(p.fault_4k_ns, Params::default().fault_4k_ns);
        assert_eq!(p.futex_wake_idle_ns, 0);
        assert_eq!(p.fault_2m_map_ns, Params::default().fault_2m_map_ns);
    }

    #[test]
    fn noisy_figures_cannot_erase_the_switch_or_go_negative() {
        let c = Costs {
            switch_half_round_trip_ns: 250.0,
            futex_wake_remote_ns: Some(100.0),
            spin_ns: f64::NAN,
            ..costs()
        };
        let t = taken(&c, Some(-3.0));
        assert_eq!(value(&t, "ctx_switch_ns"), Some(125));
        assert_eq!(value(&t, "futex_wake_idle_ns"), Some(0));
        assert_eq!(value(&t, "spin_ns"), Some(1));
        assert_eq!(value(&t, "fault_4k_ns"), Some(1));
    }

    #[test]
    fn an_uncontended_run_sets_the_operation() {
        let u = Uncontended {
            work_ns: 1000,
            op_2m_ns: 2215.0,
            hold_2m_p50_ns: 393.0,
            op_4k: Some((4139.0, 0.2)),
        };
        let t = op_taken(&u, Some(3232.0));
        assert_eq!(value(&t, "cs_ns"), Some(393));
        assert_eq!(value(&t, "op_ns"), Some(2215 - 1000 - 393));
        // 4139 - 2215 - 0.2 x 3232 = 1277.6
        assert_eq!(value(&t, "access_4k_ns"), Some(1278));
        // No fault cost: no 4 KB access figure; a faster-than-work machine cannot go negative.
        let fast = Uncontended {
            op_2m_ns: 900.0,
            ..u
        };
        let t = op_taken(&fast, None);
        assert_eq!(value(&t, "op_ns"), Some(1));
        assert_eq!(value(&t, "access_4k_ns"), None);
    }

    #[test]
    fn costs_round_trip_through_json() {
        let c = costs();
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Costs>(&j).unwrap(), c);
        // Costs recorded before the 2 MB mapping, the read fault and the line handover were measured load
        // without them.
        let mut v: serde_json::Value = serde_json::from_str(&j).unwrap();
        for k in [
            "fault_4k_read_ns",
            "fault_2m_map_ns",
            "line_transfer_ns",
            "line_transfer_p10_ns",
            "line_transfer_p90_ns",
        ] {
            v.as_object_mut().unwrap().remove(k);
        }
        let old: Costs = serde_json::from_value(v).unwrap();
        assert_eq!((old.fault_2m_map_ns, old.line_transfer_ns), (None, None));
    }
}
