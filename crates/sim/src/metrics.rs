//! What a run measures and how it reports: the counters, the latency histograms, the CPU-time accounts,
//! and the [`Outcome`] they become at the end.

use hdrhistogram::Histogram;
pub use results::model::{CpuSplit, Outcome};

use crate::{Params, Workload};

/// Percentiles of a distribution, ns: `stats`' one percentile record (the model records no mean).
pub use stats::Percentiles as Pcts;

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

/// The counters of a run. Events count from the start; the rest only inside the measured window.
pub(crate) struct Metrics {
    /// The event loop runs (always, once `run` starts).
    pub(crate) measuring: bool,
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
    /// Nothing counted yet.
    pub(crate) fn new() -> Metrics {
        let hist = || Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds");
        Metrics {
            measuring: false,
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

    /// Accounts CPU time from `from` to `to` (ns) to `acct`, the part after the warm-up.
    pub(crate) fn account(&mut self, acct: Acct, from: u64, to: u64, warmup_ns: u64) {
        if !self.measuring || to <= from {
            return;
        }
        let start = from.max(warmup_ns);
        if to > start {
            self.acct[acct as usize] += to - start;
        }
    }

    /// One acquisition that waited `ns`.
    pub(crate) fn acquired(&mut self, ns: u64) {
        let _ = self.acquire.record(ns.max(1));
    }

    /// One operation whose hold lasted `held` ns.
    pub(crate) fn released(&mut self, held: u64) {
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
    use crate::test_support::quick;
    use crate::{Model, Pages};

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
