//! What a `bench lock` result gives the model (pure): the costs it measured as `sim` parameters
//! (`sim --costs-from`) and its matrix as `sim`'s axes (`sim --like`), so that a prediction covers exactly
//! the measured cells at the measured costs.

use axes::model::{LockKind, Pages};
use axes::Backing;
use results::model::Params;
use results::model::Taken;

use results::lock::LockResult;

/// Why a lock result gives the model nothing.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FromLockError {
    /// Written before bench lock recorded its costs.
    #[error("this bench-lock result has no measured costs (written before bench lock recorded them); re-run bench lock with this version")]
    NoCosts,
    /// None of its locks or page sizes is one the model runs.
    #[error("its locks ({locks}) and pages ({pages}) include none the model runs (locks pg, futex, rseq, adaptive; pages 4k, hugetlb-2m)")]
    NothingModelled {
        /// The result's locks.
        locks: String,
        /// The result's page backings.
        pages: String,
    },
}

/// The costs `r` measured, as the parameters they set (and, when it has one-worker `pg` cells, the
/// operation's own costs); refused when it has none.
pub fn costs_taken(r: &LockResult) -> Result<Vec<Taken>, FromLockError> {
    let Some(c) = &r.costs else {
        return Err(FromLockError::NoCosts);
    };
    let fault = r.fault_cost.as_ref().map(|f| f.ns_per_fault);
    let mut t = sim::costs::taken(c, fault);
    if let Some(u) = uncontended(r) {
        // The faults the 4 KB cell took are read faults that map a fault-around group, when measured.
        t.extend(sim::costs::op_taken(&u, c.fault_4k_read_ns.or(fault)));
    }
    Ok(t)
}

/// The `pg` cells with one worker, when `r` has them (`bench lock --locks pg --workers 1`): the operation's
/// own costs on this machine. With the model as an axis, the first model's (one worker has nobody to be
/// preempted for).
fn uncontended(r: &LockResult) -> Option<results::model::Uncontended> {
    let median = |mut v: Vec<f64>| -> Option<f64> {
        v.retain(|x| x.is_finite());
        (!v.is_empty()).then(|| stats::median(&v))
    };
    let cell = |pages: Backing| {
        r.cells.iter().find(|c| {
            c.lock == axes::LockKind::Pg && c.pages == pages && c.workers == 1 && !c.reps.is_empty()
        })
    };
    // A lone worker's time per operation is its wall time: its CPU does nothing else.
    let per_op =
        |c: &results::lock::Cell| median(c.reps.iter().map(|x| 1e9 / x.ops_per_s).collect());
    let c2 = cell(Backing::Hugetlb2m)?;
    let op_4k = cell(Backing::Page4k).and_then(|c| {
        Some((
            per_op(c)?,
            median(c.reps.iter().map(|x| x.minflt_per_op).collect())?,
        ))
    });
    Some(results::model::Uncontended {
        work_ns: r.spec.work_ns,
        op_2m_ns: per_op(c2)?,
        hold_2m_p50_ns: median(c2.reps.iter().map(|x| x.hold_ns.p50 as f64).collect())?,
        op_4k,
    })
}

/// What `--like`'s result gives: (axis, value as the flag takes it, field) for the axes, (param, value,
/// field) for the parameters, and notes on what the model cannot run.
#[derive(Debug, Default, PartialEq)]
pub struct Like {
    /// `cpus`, `workers`, `locks`, `pages`, `hz`, and `models` when the cells ran under models of their
    /// own.
    pub axes: Vec<(&'static str, String, &'static str)>,
    /// Parameters set through `--set`'s path.
    pub params: Vec<(&'static str, String, &'static str)>,
    /// What was left out, one line each.
    pub notes: Vec<String>,
}

/// The matrix of a `bench lock` result as sim flags.
pub fn like(r: &LockResult) -> Result<Like, FromLockError> {
    let mut l = Like::default();
    let host = &r.envelope.host.kernel;
    if let Some(c) = host.cpus.value {
        l.axes.push(("cpus", c.to_string(), "host.kernel.cpus"));
    }
    l.axes.push((
        "workers",
        r.spec
            .workers
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
        "spec.workers",
    ));
    // What the model runs of one axis; the rest named in a note. 4k and hugetlb-2m are the model's page
    // sizes; 4k-populate, thp and hugetlb-1g are not.
    fn modelled<T: Copy + std::fmt::Display, M>(
        notes: &mut Vec<String>,
        axis: &str,
        given: &[T],
        model: fn(T) -> Option<M>,
    ) -> Vec<M> {
        let (keep, other): (Vec<T>, Vec<T>) = given.iter().partition(|&&x| model(x).is_some());
        if !other.is_empty() {
            notes.push(format!(
                "the model has no {axis} {}: left out",
                axes::join(&other, ", ")
            ));
        }
        keep.into_iter().filter_map(model).collect()
    }
    let locks = modelled(&mut l.notes, "lock", &r.spec.locks, LockKind::of_lock);
    let pages = modelled(&mut l.notes, "pages", &r.spec.pages, Pages::of_backing);
    if locks.is_empty() || pages.is_empty() {
        return Err(FromLockError::NothingModelled {
            locks: axes::join(&r.spec.locks, ","),
            pages: axes::join(&r.spec.pages, ","),
        });
    }
    l.axes
        .push(("locks", axes::join(&locks, ","), "spec.locks"));
    l.axes
        .push(("pages", axes::join(&pages, ","), "spec.pages"));
    if let Some(hz) = host.hz.value {
        l.axes.push(("hz", hz.to_string(), "host.kernel.hz"));
    }
    // A run with the preemption model as an axis (`--switch-preempt none,lazy`): its models, in order.
    let mut models: Vec<axes::model::Model> = Vec::new();
    for m in r.cells.iter().filter_map(|c| c.preempt) {
        if !models.contains(&m) {
            models.push(m);
        }
    }
    if !models.is_empty() {
        l.axes
            .push(("models", axes::join(&models, ","), "cells[].preempt"));
    }
    l.params
        .push(("work_ns", r.spec.work_ns.to_string(), "spec.work_ns"));
    // The model's critical section is the pop itself; the bench's cs_ns is busy work on top of it.
    l.params.push((
        "cs_ns",
        (Params::default().cs_ns + r.spec.cs_ns).to_string(),
        "spec.cs_ns",
    ));
    l.params.push((
        "descriptors",
        r.spec.descriptors.to_string(),
        "spec.descriptors",
    ));
    l.params.push((
        "reconnect_every",
        r.spec.reconnect_every.unwrap_or(0).to_string(),
        "spec.reconnect_every",
    ));
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock_result() -> LockResult {
        let text = include_str!("../../../../docs/results/bench-lock-ceiling-immortal.json");
        match results::Document::from_text(text).unwrap() {
            results::Document::Lock(r) => r,
            d => panic!("a {} result", d.kind()),
        }
    }

    fn axis<'a>(l: &'a Like, name: &str) -> Option<&'a str> {
        l.axes.iter().find(|a| a.0 == name).map(|a| a.1.as_str())
    }

    fn param<'a>(l: &'a Like, name: &str) -> Option<&'a str> {
        l.params.iter().find(|a| a.0 == name).map(|a| a.1.as_str())
    }

    #[test]
    fn like_takes_the_measured_matrix() {
        let mut r = lock_result();
        r.spec.locks = vec![
            axes::LockKind::Pg,
            axes::LockKind::Tas,
            axes::LockKind::Adaptive,
        ];
        r.spec.pages = vec![Backing::Page4k, Backing::Page4kPopulate, Backing::Hugetlb2m];
        r.spec.workers = vec![2, 16];
        r.spec.cs_ns = 300;
        r.spec.work_ns = 2000;
        r.spec.reconnect_every = None;
        let l = like(&r).unwrap();
        assert_eq!(axis(&l, "cpus"), Some("2"));
        assert_eq!(axis(&l, "hz"), Some("250"));
        assert_eq!(axis(&l, "workers"), Some("2,16"));
        assert_eq!(axis(&l, "locks"), Some("pg,adaptive"));
        assert_eq!(axis(&l, "pages"), Some("4k,2m"));
        assert_eq!(param(&l, "work_ns"), Some("2000"));
        // The model's pop (200 ns) plus the bench's extra busy work.
        assert_eq!(param(&l, "cs_ns"), Some("500"));
        assert_eq!(param(&l, "reconnect_every"), Some("0"));
        assert_eq!(param(&l, "descriptors"), Some("16777216"));
        assert_eq!(l.notes.len(), 2, "{:?}", l.notes);
        assert!(l.notes[0].contains("tas") && l.notes[1].contains("4k-populate"));
        assert_eq!(axis(&l, "models"), None, "a file of one model leaves sim's");
        // A run with the model as an axis gives its models, in the order they ran.
        let one = r.cells.clone();
        r.cells.clear();
        for m in [axes::model::Model::Lazy, axes::model::Model::Full] {
            r.cells.extend(one.iter().cloned().map(|mut c| {
                c.preempt = Some(m);
                c
            }));
        }
        assert_eq!(axis(&like(&r).unwrap(), "models"), Some("lazy,full"));
    }

    #[test]
    fn like_refuses_a_matrix_the_model_cannot_run() {
        let mut r = lock_result();
        r.spec.pages = vec![Backing::Thp];
        assert!(like(&r).unwrap_err().to_string().contains("thp"));
    }

    #[test]
    fn a_result_without_costs_is_refused_with_the_fix() {
        let r = lock_result();
        let e = costs_taken(&r).unwrap_err();
        assert!(e.to_string().contains("re-run bench lock"), "{e}");
    }
}
