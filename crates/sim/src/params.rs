//! What the model takes: the four choices a matrix varies (preemption model, lock, page size, workload) and
//! [`Params`], every cost and knob with its default.
//!
//! `Params` is flat because it is the result schema's `spec.params` (its field order is the files' key order)
//! and `--set` addresses its fields by name; the fields come in groups by concern (the run, the operation,
//! memory and faults, lock costs, kernel costs, the fault-path hypothesis, lock tuning, the scheduler, the
//! `txn` workload), each read by the module that owns the concern. The `adaptive` defaults are shmlock's own
//! constants, so the model runs the real lock's tuning unless told otherwise.

use results::model::Params;

/// A parameter outside the range the model works with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} {value}: {range}")]
pub struct Invalid {
    /// The parameter (as in [`Params`]).
    pub name: &'static str,
    /// Its value.
    pub value: String,
    /// What it may be.
    pub range: &'static str,
}

/// Checks the parameters a run cannot work with.
pub fn validate(p: &Params) -> Result<(), Invalid> {
    let bad = |name, value: &dyn ToString, range| {
        Err(Invalid {
            name,
            value: value.to_string(),
            range,
        })
    };
    if p.cpus == 0 || p.cpus > 4096 {
        return bad("cpus", &p.cpus, "1..4096");
    }
    if p.workers == 0 || p.workers > 100_000 {
        return bad("workers", &p.workers, "1..100000");
    }
    if p.hz == 0 || p.hz > 10_000 {
        return bad("hz", &p.hz, "1..10000");
    }
    if p.duration_ns == 0 {
        return bad("duration_ns", &p.duration_ns, "more than 0");
    }
    if !(0.0..=1.0).contains(&p.fault_block_p) {
        return bad("fault_block_p", &p.fault_block_p, "0..1");
    }
    if p.adaptive_park_min_ns == 0 || p.adaptive_park_max_ns < p.adaptive_park_min_ns {
        return bad(
            "adaptive_park_min_ns/adaptive_park_max_ns",
            &format!("{}/{}", p.adaptive_park_min_ns, p.adaptive_park_max_ns),
            "min more than 0, max at least min",
        );
    }
    if p.descriptors < 1024 {
        return bad("descriptors", &p.descriptors, "at least 1024");
    }
    if p.quiet_line_off_cpu {
        return bad(
            "quiet_line_off_cpu",
            &p.quiet_line_off_cpu,
            "false (since 2026-11-26 spinners pay the lock's line only when it is written; drop the setting)",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use lockparams::adaptive::{PARK_TIMEOUT_MAX, PARK_TIMEOUT_MIN, SLOTS, SPIN_BUDGET};

    /// The model's `adaptive` runs with the real lock's constants unless told otherwise.
    #[test]
    fn model_adaptive_uses_the_real_locks_constants() {
        let p = super::Params::default();
        assert_eq!(p.adaptive_spin_ns, SPIN_BUDGET.as_nanos() as u64);
        assert_eq!(p.adaptive_park_min_ns, PARK_TIMEOUT_MIN.as_nanos() as u64);
        assert_eq!(p.adaptive_park_max_ns, PARK_TIMEOUT_MAX.as_nanos() as u64);
        assert_eq!(SLOTS as u32, crate::ADAPTIVE_SLOTS);
    }
}
