//! `sim --costs-from` and `sim --like`: what a `bench lock` result gives a sim run. `--costs-from` sets the
//! parameters its measured costs map to (`sim::costs`); `--like` takes its matrix (the host's CPUs and HZ,
//! the workers, locks and pages, the work and critical section), so the prediction covers the measured
//! cells. Explicit flags and `--set` win over both; the sim result's `spec.from_files` records what each
//! file gave.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use results::lock::LockResult;
use results::sim::FromFile;
use results::Document;
use sim::costs::Taken;
use sim::{matrix, LockKind, Pages, Params};

use crate::cli::SimArgs;

/// The matrix axes and parameters a sim run starts from, after `--like` and `--costs-from`.
#[derive(Debug)]
pub struct Resolved {
    /// `--cpus`.
    pub cpus: String,
    /// `--workers`.
    pub workers: String,
    /// `--locks`.
    pub locks: String,
    /// `--pages`.
    pub pages: String,
    /// `--hz`.
    pub hz: u32,
    /// Parameters to set before `--set`: (name, value as `--set` takes it).
    params: Vec<(String, String)>,
    /// What each file gave.
    from: Vec<FromFile>,
}

/// Reads a `bench lock` result for `flag`; anything else is refused with the fix.
pub fn load_lock(flag: &str, path: &Path) -> Result<LockResult> {
    let p = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("{flag} {p}: {e}; give a result file bench lock wrote"))?;
    match Document::from_text(&text) {
        Ok(Document::Lock(r)) => Ok(r),
        Ok(d) => bail!(
            "{flag} {p}: a {} result, not a bench-lock one; give a result file bench lock wrote",
            d.kind()
        ),
        Err(e) => bail!("{flag} {p}: {e}; give a result file bench lock wrote"),
    }
}

/// The costs `r` measured, as the parameters they set; refused when it has none.
pub fn costs_taken(flag: &str, path: &Path, r: &LockResult) -> Result<Vec<Taken>> {
    let Some(c) = &r.costs else {
        bail!(
            "{flag} {}: this bench-lock result has no measured costs (written before bench lock recorded them); re-run bench lock with this version",
            path.display()
        );
    };
    let fault = r.fault_cost.as_ref().map(|f| f.ns_per_fault);
    let mut t = sim::costs::taken(c, fault);
    if let Some(u) = uncontended(r) {
        t.extend(sim::costs::op_taken(&u, fault));
    }
    Ok(t)
}

/// The `pg` cells with one worker, when `r` has them (`bench lock --locks pg --workers 1`): the operation's
/// own costs on this machine.
fn uncontended(r: &LockResult) -> Option<sim::costs::Uncontended> {
    let median = |mut v: Vec<f64>| -> Option<f64> {
        v.retain(|x| x.is_finite());
        v.sort_by(f64::total_cmp);
        (!v.is_empty()).then(|| v[v.len() / 2])
    };
    let cell = |pages: &str| {
        r.cells
            .iter()
            .find(|c| c.lock == "pg" && c.pages == pages && c.workers == 1 && !c.reps.is_empty())
    };
    let c2 = cell("hugetlb-2m")?;
    let cpu_4k = cell("4k").and_then(|c| {
        Some((
            median(c.reps.iter().map(|x| x.cpu_ns_per_op).collect())?,
            median(c.reps.iter().map(|x| x.minflt_per_op).collect())?,
        ))
    });
    Some(sim::costs::Uncontended {
        work_ns: r.spec.work_ns,
        cpu_2m_ns: median(c2.reps.iter().map(|x| x.cpu_ns_per_op).collect())?,
        hold_2m_p50_ns: median(c2.reps.iter().map(|x| x.hold_ns.p50 as f64).collect())?,
        cpu_4k,
    })
}

/// The names `--set` overrides.
fn set_names(set: &[String]) -> Vec<&str> {
    set.iter()
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
        .collect()
}

/// What `--like`'s result gives: (axis, value as the flag takes it, field) for the axes, (param, value,
/// field) for the parameters, and notes on what the model cannot run.
#[derive(Debug, Default, PartialEq)]
pub struct Like {
    /// `cpus`, `workers`, `locks`, `pages`, `hz`.
    pub axes: Vec<(&'static str, String, &'static str)>,
    /// Parameters set through `--set`'s path.
    pub params: Vec<(&'static str, String, &'static str)>,
    /// What was left out, one line each.
    pub notes: Vec<String>,
}

/// The matrix of a `bench lock` result as sim flags.
pub fn like(r: &LockResult) -> Result<Like, String> {
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
    let (locks, other): (Vec<&String>, Vec<&String>) = r
        .spec
        .locks
        .iter()
        .partition(|x| LockKind::parse(x).is_ok());
    if !other.is_empty() {
        l.notes.push(format!(
            "the model has no lock {}: left out",
            other
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    // 4k and hugetlb-2m are the model's page sizes; 4k-populate, thp and hugetlb-1g are not.
    let (pages, other): (Vec<&String>, Vec<&String>) = r
        .spec
        .pages
        .iter()
        .partition(|x| matches!(x.as_str(), "4k" | "hugetlb-2m"));
    if !other.is_empty() {
        l.notes.push(format!(
            "the model has no pages {}: left out",
            other
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if locks.is_empty() || pages.is_empty() {
        return Err(format!(
            "its locks ({}) and pages ({}) include none the model runs (locks pg, futex, rseq, adaptive; pages 4k, hugetlb-2m)",
            r.spec.locks.join(","),
            r.spec.pages.join(",")
        ));
    }
    let names = |v: Vec<&String>, f: fn(&str) -> String| {
        v.iter().map(|s| f(s)).collect::<Vec<_>>().join(",")
    };
    l.axes
        .push(("locks", names(locks, |s| s.to_string()), "spec.locks"));
    l.axes.push((
        "pages",
        names(pages, |s| {
            Pages::parse(s)
                .map(|p| p.name().to_string())
                .unwrap_or_default()
        }),
        "spec.pages",
    ));
    if let Some(hz) = host.hz.value {
        l.axes.push(("hz", hz.to_string(), "host.kernel.hz"));
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

/// Resolves the axes and parameters of `a` from its flags, `--like` and `--costs-from`; `quiet` silences
/// the notes on what `--like` left out.
pub fn resolve(a: &SimArgs) -> Result<Resolved> {
    let overridden = set_names(&a.set);
    let mut out = Resolved {
        cpus: a.cpus.clone().unwrap_or_else(|| "96".into()),
        workers: a.workers.clone().unwrap_or_else(|| "1024".into()),
        locks: a.locks.clone().unwrap_or_else(|| "pg".into()),
        pages: a.pages.clone().unwrap_or_else(|| "4k,2m".into()),
        hz: a.hz.unwrap_or(250),
        params: Vec::new(),
        from: Vec::new(),
    };
    if let Some(path) = &a.like {
        let r = load_lock("--like", path)?;
        let l = like(&r).map_err(|e| anyhow!("--like {}: {e}", path.display()))?;
        if !a.result.quiet {
            for n in &l.notes {
                eprintln!("preemptlab: --like {}: {n}", path.display());
            }
        }
        let mut taken = Vec::new();
        for (axis, v, field) in l.axes {
            let explicit = match axis {
                "cpus" => a.cpus.is_some(),
                "workers" => a.workers.is_some(),
                "locks" => a.locks.is_some(),
                "pages" => a.pages.is_some(),
                _ => a.hz.is_some(),
            };
            if explicit {
                continue;
            }
            match axis {
                "cpus" => out.cpus = v,
                "workers" => out.workers = v,
                "locks" => out.locks = v,
                "pages" => out.pages = v,
                _ => out.hz = v.parse().expect("hz is a number"),
            }
            taken.push((axis.to_string(), field.to_string()));
        }
        for (param, v, field) in l.params {
            out.params.push((param.to_string(), v));
            if !overridden.contains(&param) {
                taken.push((param.to_string(), field.to_string()));
            }
        }
        out.from.push(FromFile {
            flag: "--like".into(),
            file: path.display().to_string(),
            taken,
        });
    }
    // Several runs of one machine: each parameter is the median of what the runs give (TCG guests
    // scatter by a factor of several between runs; one run's figures would be luck).
    let mut values: Vec<(&'static str, &'static str, Vec<u64>)> = Vec::new();
    for path in &a.costs_from {
        let r = load_lock("--costs-from", path)?;
        for x in costs_taken("--costs-from", path, &r)? {
            match values.iter_mut().find(|(p, _, _)| *p == x.param) {
                Some((_, _, v)) => v.push(x.value),
                None => values.push((x.param, x.from, vec![x.value])),
            }
        }
    }
    let mut taken = Vec::new();
    for (param, from, mut v) in values {
        v.sort_unstable();
        out.params
            .push((param.to_string(), v[v.len() / 2].to_string()));
        if !overridden.contains(&param) {
            let from = match a.costs_from.len() {
                1 => from.to_string(),
                n => format!("{from} (median of {} of {n} files)", v.len()),
            };
            taken.push((param.to_string(), from));
        }
    }
    if !a.costs_from.is_empty() {
        out.from.push(FromFile {
            flag: "--costs-from".into(),
            file: a
                .costs_from
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(","),
            taken,
        });
    }
    Ok(out)
}

impl Resolved {
    /// `p` with the parameters the files give (then `--set` applies on top).
    pub fn apply(&self, p: &Params) -> Result<Params> {
        self.params.iter().try_fold(p.clone(), |p, (k, v)| {
            matrix::set_param(&p, &format!("{k}={v}")).map_err(|e| anyhow!("{k}={v}: {e}"))
        })
    }

    /// What each file gave, for the result's `spec.from_files`.
    pub fn files(&self) -> Vec<FromFile> {
        self.from.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock_result() -> LockResult {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/results/bench-lock-ceiling-immortal.json"
        );
        load_lock("--like", Path::new(p)).unwrap()
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
        r.spec.locks = vec!["pg".into(), "tas".into(), "adaptive".into()];
        r.spec.pages = vec!["4k".into(), "4k-populate".into(), "hugetlb-2m".into()];
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
    }

    #[test]
    fn like_refuses_a_matrix_the_model_cannot_run() {
        let mut r = lock_result();
        r.spec.pages = vec!["thp".into()];
        assert!(like(&r).unwrap_err().contains("thp"));
    }

    #[test]
    fn a_result_without_costs_is_refused_with_the_fix() {
        let r = lock_result();
        let e = costs_taken("--costs-from", Path::new("old.json"), &r).unwrap_err();
        assert!(e.to_string().contains("re-run bench lock"), "{e}");
    }
}
