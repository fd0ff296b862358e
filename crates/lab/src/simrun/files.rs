//! What `bench lock` result files give a sim run: `costs_from` sets the parameters the measured costs map to
//! (`sim::costs`; several runs of one machine give each parameter's median), `like` takes the result's
//! matrix (its host's CPUs and HZ, the workers, locks and pages, the work and critical section), so the
//! prediction covers the measured cells. Explicit options and `set` win over both; the sim result's
//! `spec.from_files` records what each file gave. Reading the files is here; the mapping is
//! `results::from_lock` (pure).

use std::path::Path;

use crate::simrun::from_lock::{self, FromLockError};
use results::lock::LockResult;
use results::model::Params;
use results::sim::FromFile;
use results::Document;
use sim::matrix::{self, ParamError};

use crate::simrun::options::{SimError, SimOptions};
use osutil::input::files::{self, FilesError};

/// Why a file gives a sim run nothing.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It could not be read or parsed.
    #[error("{0}; give a result file bench lock wrote")]
    Unreadable(String),
    /// It is another kind of result.
    #[error("a {0} result, not a bench-lock one; give a result file bench lock wrote")]
    NotLock(String),
    /// It has nothing the model takes.
    #[error(transparent)]
    FromLock(#[from] FromLockError),
}

/// The matrix axes and parameters a sim run starts from, after `like` and `costs_from`.
#[derive(Debug)]
pub struct Resolved {
    /// CPU counts, as `cpus` takes them.
    pub cpus: String,
    /// Worker counts, as `workers` takes them.
    pub workers: String,
    /// Locks, as `locks` takes them.
    pub locks: String,
    /// Page sizes, as `pages` takes them.
    pub pages: String,
    /// Preemption models, as `models` takes them.
    pub models: String,
    /// Timer ticks per second.
    pub hz: u32,
    /// Parameters to set before `set`: (name, value as `set` takes it).
    params: Vec<(String, String)>,
    /// What each file gave.
    pub from: Vec<FromFile>,
    /// What `like`'s matrix has that the model does not run, one line each.
    pub like_notes: Vec<String>,
}

/// Reads the `bench lock` result `option` names; anything else is refused with the fix.
pub fn load_lock(option: &'static str, path: &Path) -> Result<LockResult, SimError> {
    let file = |err| SimError::File {
        option,
        path: path.to_path_buf(),
        err,
    };
    match files::load(path, Document::from_text) {
        Ok(Document::Lock(r)) => Ok(r),
        Ok(d) => Err(file(FileError::NotLock(d.kind().to_string()))),
        Err(FilesError::Read { err, .. }) => Err(file(FileError::Unreadable(err.to_string()))),
        Err(FilesError::Parse { why, .. }) => Err(file(FileError::Unreadable(why))),
        Err(_) => Err(file(FileError::Unreadable("not a text file".into()))),
    }
}

/// The names `set` overrides.
fn set_names(set: &[String]) -> Vec<&str> {
    set.iter()
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
        .collect()
}

/// Resolves the axes and parameters of `o` from its own options, `like` and `costs_from`.
pub fn resolve(o: &SimOptions) -> Result<Resolved, SimError> {
    let overridden = set_names(&o.set);
    let mut out = Resolved {
        cpus: o.cpus.clone().unwrap_or_else(|| "96".into()),
        workers: o.workers.clone().unwrap_or_else(|| "1024".into()),
        locks: o.locks.clone().unwrap_or_else(|| "pg".into()),
        pages: o.pages.clone().unwrap_or_else(|| "4k,2m".into()),
        models: o.models.clone().unwrap_or_else(|| "none,lazy".into()),
        hz: o.hz.unwrap_or(250),
        params: Vec::new(),
        from: Vec::new(),
        like_notes: Vec::new(),
    };
    if let Some(path) = &o.like {
        let from = |err: FromLockError| SimError::File {
            option: "like",
            path: path.clone(),
            err: err.into(),
        };
        let l = from_lock::like(&load_lock("like", path)?).map_err(from)?;
        out.like_notes = l.notes;
        let mut taken = Vec::new();
        for (axis, v, field) in l.axes {
            let explicit = match axis {
                "cpus" => o.cpus.is_some(),
                "workers" => o.workers.is_some(),
                "locks" => o.locks.is_some(),
                "pages" => o.pages.is_some(),
                "models" => o.models.is_some(),
                _ => o.hz.is_some(),
            };
            if explicit {
                continue;
            }
            match axis {
                "cpus" => out.cpus = v,
                "workers" => out.workers = v,
                "locks" => out.locks = v,
                "pages" => out.pages = v,
                "models" => out.models = v,
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
    costs(o, &overridden, &mut out)?;
    Ok(out)
}

/// Adds what `costs_from`'s files give to `out`. Several runs of one machine: each parameter is the median
/// of what the runs give (TCG guests scatter by a factor of several between runs; one run's figures would
/// be luck).
fn costs(o: &SimOptions, overridden: &[&str], out: &mut Resolved) -> Result<(), SimError> {
    let mut values: Vec<(&'static str, &'static str, Vec<u64>)> = Vec::new();
    for path in &o.costs_from {
        let r = load_lock("costs_from", path)?;
        let taken = from_lock::costs_taken(&r).map_err(|err| SimError::File {
            option: "costs_from",
            path: path.clone(),
            err: err.into(),
        })?;
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
            let from = match o.costs_from.len() {
                1 => from.to_string(),
                n => format!("{from} (median of {} of {n} files)", v.len()),
            };
            taken.push((param.to_string(), from));
        }
    }
    if !o.costs_from.is_empty() {
        let files: Vec<String> = o
            .costs_from
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        out.from.push(FromFile {
            flag: "--costs-from".into(),
            file: files.join(","),
            taken,
        });
    }
    Ok(())
}

impl Resolved {
    /// `p` with the parameters the files give (then `set` applies on top).
    pub fn apply(&self, p: &Params) -> Result<Params, SimError> {
        self.params.iter().try_fold(p.clone(), |p, (k, v)| {
            matrix::set_param(&p, &format!("{k}={v}")).map_err(|err: ParamError| {
                SimError::FileParam {
                    name: k.clone(),
                    value: v.clone(),
                    err,
                }
            })
        })
    }
}
