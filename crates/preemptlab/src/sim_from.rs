//! `sim --costs-from` and `sim --like`: what a `bench lock` result gives a sim run. `--costs-from` sets the
//! parameters its measured costs map to (`sim::costs`); `--like` takes its matrix (the host's CPUs and HZ,
//! the workers, locks and pages, the work and critical section), so the prediction covers the measured
//! cells. Explicit flags and `--set` win over both; the sim result's `spec.from_files` records what each
//! file gave.

use std::path::Path;

use anyhow::{anyhow, bail, Result};
use results::from_lock;
use results::lock::LockResult;
use results::sim::FromFile;
use results::Document;
use sim::{matrix, Params};

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

/// The names `--set` overrides.
fn set_names(set: &[String]) -> Vec<&str> {
    set.iter()
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
        .collect()
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
        let l = from_lock::like(&r).map_err(|e| anyhow!("--like {}: {e}", path.display()))?;
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
        let taken = from_lock::costs_taken(&r)
            .map_err(|e| anyhow!("--costs-from {}: {e}", path.display()))?;
        for x in taken {
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
