//! What a run measures and how it reports: the counters, the latency histograms, the CPU-time accounts,
//! and the [`Outcome`] they become at the end.

use hdrhistogram::Histogram;
use results::model::{CpuSplit, Outcome};

use axes::model::Workload;
use results::model::Params;

// Percentiles of a distribution, ns: `stats`' one percentile record (the model records no mean).
use stats::Percentiles as Pcts;

fn pcts(h: &Histogram<u64>) -> Pcts {
    Pcts {
        mean: None,
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    }
}

/// Where a segment's CPU time goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Acct {
    Useful,
    Spin,
    Fault,
    Kernel,
    Sched,
}

/// A counter of events in the measured window (bumped through [`Metrics::count`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Count {
    /// A `txn` transaction ended.
    Txn,
    /// A `clocksweep` operation (the lock's operations count at their release, [`Metrics::released`]).
    Op,
    /// A first-touch page fault.
    Fault,
    /// A pg_usleep or futex sleep.
    Sleep,
    /// A context switch in.
    Switch,
    /// A lock-holder preemption (the holder descheduled or asleep while holding).
    Lhp,
}

/// The counters of a run. Everything counts only inside the measured window, from `from_ns` (the end of
/// the warm-up) on, through [`Metrics::counts`], the one place that rule lives; `events` alone counts the
/// whole run (the engine's work, not the model's).
pub(crate) struct Metrics {
    /// Where the measured window starts (the end of the warm-up), ns.
    from_ns: u64,
    pub(crate) txns: u64,
    pub(crate) ops: u64,
    pub(crate) faults: u64,
    pub(crate) sleeps: u64,
    pub(crate) switches: u64,
    /// Lock-holder preemptions (the holder descheduled or asleep while holding).
    pub(crate) lhp: u64,
    /// Holds longer than 100 us.
    pub(crate) stalled: u64,
    acct: [u64; 5],
    acquire: Histogram<u64>,
    hold: Histogram<u64>,
    pub(crate) events: u64,
}

impl Metrics {
    /// Nothing counted yet; the measured window starts at `from_ns`.
    pub(crate) fn new(from_ns: u64) -> Metrics {
        let hist = || Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds");
        Metrics {
            from_ns,
            txns: 0,
            ops: 0,
            faults: 0,
            sleeps: 0,
            switches: 0,
            lhp: 0,
            stalled: 0,
            acct: [0; 5],
            acquire: hist(),
            hold: hist(),
            events: 0,
        }
    }

    /// Whether an event at `now` (ns) counts: it is inside the measured window.
    #[inline]
    pub(crate) fn counts(&self, now: u64) -> bool {
        now >= self.from_ns
    }

    /// Counts one `what` that happened at `now` (ns), if that is inside the measured window.
    pub(crate) fn count(&mut self, what: Count, now: u64) {
        if !self.counts(now) {
            return;
        }
        let n = match what {
            Count::Txn => &mut self.txns,
            Count::Op => &mut self.ops,
            Count::Fault => &mut self.faults,
            Count::Sleep => &mut self.sleeps,
            Count::Switch => &mut self.switches,
            Count::Lhp => &mut self.lhp,
        };
        *n += 1;
    }

    /// Accounts CPU time from `from` to `to` (ns) to `acct`, the part inside the measured window.
    pub(crate) fn account(&mut self, acct: Acct, from: u64, to: u64) {
        let start = from.max(self.from_ns);
        if to > start {
            self.acct[acct as usize] += to - start;
        }
    }

    /// One acquisition at `now` (ns) that waited `ns`, if `now` is inside the measured window.
    pub(crate) fn acquired(&mut self, now: u64, ns: u64) {
        if self.counts(now) {
            let _ = self.acquire.record(ns.max(1));
        }
    }

    /// One operation released at `now` (ns) whose hold lasted `held` ns, if `now` is inside the measured
    /// window.
    pub(crate) fn released(&mut self, now: u64, held: u64) {
        if !self.counts(now) {
            return;
        }
        self.ops += 1;
        let _ = self.hold.record(held.max(1));
        if held > 100_000 {
            self.stalled += 1;
        }
    }

    /// The outcome of a run of `p` whose workers did `per_task` operations each.
    pub(crate) fn outcome(&self, p: &Params, per_task: &[f64]) -> Outcome {
        let total = p.duration_ns as f64 * p.cpus as f64;
        let busy: u64 = self.acct.iter().sum();
        let f = |x: u64| x as f64 / total;
        let secs = p.duration_ns as f64 / 1e9;
        let ops = self.ops.max(1) as f64;
        Outcome {
            ops_per_s: self.ops as f64 / secs,
            ops: self.ops,
            txn_per_s: (p.workload == Workload::Txn).then(|| self.txns as f64 / secs),
            acquire_ns: pcts(&self.acquire),
            hold_ns: pcts(&self.hold),
            stalled_per_mop: self.stalled as f64 / ops * 1e6,
            lhp_per_s: self.lhp as f64 / secs,
            minflt_per_op: self.faults as f64 / ops,
            cpu_ns_per_op: busy as f64 / ops,
            sleeps_per_op: self.sleeps as f64 / ops,
            switches_per_op: self.switches as f64 / ops,
            jain: stats::jain(per_task),
            cpu: CpuSplit {
                useful: f(self.acct[Acct::Useful as usize]),
                spinning: f(self.acct[Acct::Spin as usize]),
                faults: f(self.acct[Acct::Fault as usize]),
                kernel: f(self.acct[Acct::Kernel as usize]),
                scheduler: f(self.acct[Acct::Sched as usize]),
                idle: (1.0 - busy as f64 / total).max(0.0),
            },
            events: self.events,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::simulate;
    use crate::test_support::quick;
    use axes::model::{Model, Pages};
    use results::model::{Outcome, Params};

    /// A contended 4 KB cell under `lazy` (holders preempted, pg sleeps, faults) after `warmup_ms` of
    /// warm-up, `ms` measured. The warm-up changes only what is counted, never what happens: the same
    /// seed runs the same events.
    fn cell(warmup_ms: u64, ms: u64) -> Outcome {
        simulate(&Params {
            model: Model::Lazy,
            pages: Pages::P4k,
            cpus: 4,
            workers: 32,
            duration_ns: ms * 1_000_000,
            warmup_ns: warmup_ms * 1_000_000,
            ..Params::default()
        })
        .unwrap()
    }

    /// The run's totals: operations, faults, sleeps, switches, lock-holder preemptions.
    fn totals(o: &Outcome, ms: u64) -> [f64; 5] {
        let ops = o.ops as f64;
        [
            ops,
            o.minflt_per_op * ops,
            o.sleeps_per_op * ops,
            o.switches_per_op * ops,
            o.lhp_per_s * ms as f64 / 1e3,
        ]
    }

    /// Regression (docs/model.md, found 2026-11-26): faults, sleeps, switches and lock-holder
    /// preemptions counted from time 0 while operations counted after the warm-up, so a longer warm-up
    /// inflated every per-operation and per-second figure of them. Now each counts what the window holds:
    /// 200 ms after 100 ms of warm-up count what 300 ms from the start count less the first 100 ms.
    #[test]
    fn counters_count_the_measured_window_only_not_the_warm_up() {
        let window = totals(&cell(100, 200), 200);
        let all = totals(&cell(0, 300), 300);
        let first = totals(&cell(0, 100), 100);
        let names = ["ops", "faults", "sleeps", "switches", "LHP"];
        for i in 0..5 {
            assert!(first[i] > 0.0, "{}: none in the warm-up", names[i]);
            let want = all[i] - first[i];
            // An event at exactly 100 ms ends the short run and opens the window: a few at most.
            assert!(
                (window[i] - want).abs() <= 3.0,
                "{}: {} in the window, {} from the start less {} in the warm-up",
                names[i],
                window[i],
                all[i],
                first[i]
            );
        }
    }

    #[test]
    fn cpu_time_adds_up_and_one_worker_never_waits() {
        let o = quick(Model::None, Pages::P2m, 2, 1);
        let s = &o.cpu;
        let sum = s.useful + s.spinning + s.faults + s.kernel + s.scheduler + s.idle;
        assert!((sum - 1.0).abs() < 1e-6, "{s:?}");
        assert!(s.idle > 0.45, "one worker on two CPUs: {s:?}");
        assert_eq!(o.acquire_ns.p99, 1, "no contention with one worker");
        assert_eq!(o.lhp_per_s, 0.0);
        // One worker: ops/s = 1e9 / per-op time.
        let per_op = 1000.0 + 460.0 + 200.0;
        assert!(
            (o.ops_per_s - 1e9 / per_op).abs() / (1e9 / per_op) < 0.05,
            "{}",
            o.ops_per_s
        );
    }
}
