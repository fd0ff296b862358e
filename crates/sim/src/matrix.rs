//! The model over a matrix: CPUs x workers x pages x locks (x one swept parameter) x models, each cell run
//! `repeat` times with seeds `seed`, `seed + 1`, ... Parameters are set by name through their JSON form, so
//! any field of [`Params`] can be overridden or swept without a flag of its own.

use crate::{simulate, Invalid};
use axes::model::{LockKind, Model, Pages, UnknownName};
use results::model::{Outcome, Params};

/// A parameter that cannot be set.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    /// Not `name=value`.
    #[error("expected name=value, e.g. fault_4k_ns=2500")]
    NotNameValue,
    /// No such parameter.
    #[error("no parameter {name:?} (known: {known})")]
    Unknown {
        /// The name given.
        name: String,
        /// The parameters there are, comma-separated.
        known: String,
    },
    /// A dimension of the matrix, which every cell sets from its own list: set as a parameter it would be
    /// overridden without a word.
    #[error("{name} is a dimension of the matrix (each cell sets it): give its values as the matrix's {name} list, not as a parameter")]
    Dimension {
        /// The name given.
        name: String,
    },
    /// The value does not fit the parameter.
    #[error("{0}")]
    Value(String),
}

/// The parameters every cell sets from the matrix's own lists.
pub const DIMENSIONS: [&str; 5] = ["cpus", "workers", "model", "lock", "pages"];

/// A matrix that cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MatrixError {
    /// A dimension has no entry.
    #[error("CPUs, models, locks and pages need at least one entry each")]
    Empty,
    /// The swept parameter is not `name=v1,v2,...` with at least one value.
    #[error("expected name=v1,v2,...")]
    SweepSyntax,
    /// A swept value does not fit.
    #[error("{name}={value}: {source}")]
    Sweep {
        /// The swept parameter.
        name: String,
        /// The value.
        value: String,
        /// Why.
        source: ParamError,
    },
    /// A cell's parameters are out of range.
    #[error(transparent)]
    Invalid(#[from] Invalid),
}

/// Applies `name=value` to the parameters through their JSON form (the value as JSON, else as a string).
pub fn set_param(p: &Params, kv: &str) -> Result<Params, ParamError> {
    let Some((k, v)) = kv.split_once('=') else {
        return Err(ParamError::NotNameValue);
    };
    if DIMENSIONS.contains(&k) {
        return Err(ParamError::Dimension {
            name: k.to_string(),
        });
    }
    assign(p, k, v)
}

/// Sets `k` to `v` (any field, dimensions included: a sweep over one overrides the matrix's value).
fn assign(p: &Params, k: &str, v: &str) -> Result<Params, ParamError> {
    let mut j = p.to_json_all();
    let obj = j.as_object_mut().expect("an object");
    if !obj.contains_key(k) {
        return Err(ParamError::Unknown {
            name: k.to_string(),
            known: obj
                .keys()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let value: serde_json::Value =
        serde_json::from_str(v).unwrap_or_else(|_| serde_json::Value::String(v.to_string()));
    obj.insert(k.to_string(), value);
    serde_json::from_value(j).map_err(|e| ParamError::Value(e.to_string()))
}

/// A swept parameter and its values, parsed from `name=v1,v2,...` and checked against `base`.
pub fn parse_sweep(base: &Params, s: &str) -> Result<(String, Vec<String>), MatrixError> {
    let (k, vs) = s.split_once('=').ok_or(MatrixError::SweepSyntax)?;
    let vals: Vec<String> = vs
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(String::from)
        .collect();
    if vals.is_empty() {
        return Err(MatrixError::SweepSyntax);
    }
    for v in &vals {
        assign(base, k, v).map_err(|source| MatrixError::Sweep {
            name: k.to_string(),
            value: v.clone(),
            source,
        })?;
    }
    Ok((k.to_string(), vals))
}

/// The experiment: every combination of the dimensions, from `base`.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// The parameters every cell starts from.
    pub base: Params,
    /// CPU counts, each with its worker counts (they may be relative to the CPUs).
    pub cpus: Vec<(u32, Vec<u32>)>,
    /// Page sizes.
    pub pages: Vec<Pages>,
    /// Locks.
    pub locks: Vec<LockKind>,
    /// Preemption models.
    pub models: Vec<Model>,
    /// The swept parameter and its values.
    pub sweep: Option<(String, Vec<String>)>,
}

/// One cell: its parameters and the swept value.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The parameters (the seed is the first run's).
    pub params: Params,
    /// The swept parameter's value, when sweeping.
    pub sweep: Option<String>,
}

impl Matrix {
    /// The cells in run order (CPUs, workers, pages, locks, swept value, model), each validated.
    pub fn cells(&self) -> Result<Vec<Cell>, MatrixError> {
        if self.models.is_empty()
            || self.locks.is_empty()
            || self.pages.is_empty()
            || self.cpus.is_empty()
        {
            return Err(MatrixError::Empty);
        }
        let sweep_vals: Vec<Option<String>> = match &self.sweep {
            None => vec![None],
            Some((_, vs)) => vs.iter().cloned().map(Some).collect(),
        };
        let mut cells = Vec::new();
        for (c, workers) in &self.cpus {
            for &w in workers {
                for &pg in &self.pages {
                    for &l in &self.locks {
                        for sv in &sweep_vals {
                            for &m in &self.models {
                                let mut p = Params {
                                    cpus: *c,
                                    workers: w,
                                    model: m,
                                    lock: l,
                                    pages: pg,
                                    ..self.base.clone()
                                };
                                if let (Some((k, _)), Some(v)) = (&self.sweep, sv) {
                                    p = assign(&p, k, v).map_err(|source| MatrixError::Sweep {
                                        name: k.clone(),
                                        value: v.clone(),
                                        source,
                                    })?;
                                }
                                crate::validate(&p).map_err(MatrixError::Invalid)?;
                                cells.push(Cell {
                                    params: p,
                                    sweep: sv.clone(),
                                });
                            }
                        }
                    }
                }
            }
        }
        Ok(cells)
    }
}

impl Cell {
    /// Runs the cell `repeat` times, the r-th run with seed `seed + r`.
    pub fn run(&self, repeat: u32) -> Result<Vec<Outcome>, MatrixError> {
        (0..repeat)
            .map(|r| {
                simulate(&Params {
                    seed: self.params.seed + r as u64,
                    ..self.params.clone()
                })
                .map_err(MatrixError::Invalid)
            })
            .collect()
    }
}

/// The axis of the matrix a name was given for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Preemption models.
    Models,
    /// Locks.
    Locks,
    /// Page sizes.
    Pages,
}

/// A sim run as asked, its choices still by name: the base parameters, `name=value` overrides applied in
/// order, the axes, one swept parameter, the runs per cell.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// Parameters before the overrides.
    pub base: Params,
    /// `name=value` overrides, applied in order.
    pub set: &'a [String],
    /// CPU counts, each with its worker counts.
    pub cpus: Vec<(u32, Vec<u32>)>,
    /// Preemption models by name; the first is the baseline of the ratios.
    pub models: &'a [String],
    /// Locks by name.
    pub locks: &'a [String],
    /// Page sizes by name.
    pub pages: &'a [String],
    /// `name=v1,v2,...`.
    pub sweep: Option<&'a str>,
    /// Runs per cell, each with its own seed.
    pub repeat: u32,
}

/// The most runs per cell.
pub const MAX_REPEAT: u32 = 1000;

/// A request that makes no matrix. The messages name the value; the caller adds which option gave it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// Runs per cell out of range.
    #[error("{0}: 1..1000 runs a cell")]
    Repeat(u32),
    /// An override that does not apply.
    #[error("{kv}: {source}")]
    Set {
        /// The override.
        kv: String,
        /// Why.
        source: ParamError,
    },
    /// A sweep that does not apply.
    #[error("{sweep}: {source}")]
    Sweep {
        /// The sweep as given.
        sweep: String,
        /// Why.
        source: MatrixError,
    },
    /// A name no value of the axis has.
    #[error("{source}")]
    Axis {
        /// The axis.
        axis: Axis,
        /// Why.
        source: UnknownName,
    },
    /// The matrix cannot run.
    #[error(transparent)]
    Matrix(#[from] MatrixError),
}

impl Request<'_> {
    /// The matrix asked for, and its cells in run order.
    pub fn matrix(&self) -> Result<(Matrix, Vec<Cell>), RequestError> {
        if self.repeat == 0 || self.repeat > MAX_REPEAT {
            return Err(RequestError::Repeat(self.repeat));
        }
        let mut base = self.base.clone();
        for kv in self.set {
            base = set_param(&base, kv).map_err(|source| RequestError::Set {
                kv: kv.clone(),
                source,
            })?;
        }
        let sweep = match self.sweep {
            None => None,
            Some(s) => Some(parse_sweep(&base, s).map_err(|source| RequestError::Sweep {
                sweep: s.to_string(),
                source,
            })?),
        };
        fn each<T>(
            axis: Axis,
            names: &[String],
            parse: fn(&str) -> Result<T, UnknownName>,
        ) -> Result<Vec<T>, RequestError> {
            names
                .iter()
                .map(|n| parse(n).map_err(|source| RequestError::Axis { axis, source }))
                .collect()
        }
        let m = Matrix {
            base,
            cpus: self.cpus.clone(),
            pages: each(Axis::Pages, self.pages, Pages::parse)?,
            locks: each(Axis::Locks, self.locks, LockKind::parse)?,
            models: each(Axis::Models, self.models, Model::parse)?,
            sweep,
        };
        let cells = m.cells()?;
        Ok((m, cells))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_param_sets_by_name_and_names_the_known_ones() {
        let p = set_param(&Params::default(), "hz=100").unwrap();
        assert_eq!(p.hz, 100);
        assert_eq!(set_param(&p, "hz").unwrap_err(), ParamError::NotNameValue);
        assert!(matches!(
            set_param(&p, "nope=1"),
            Err(ParamError::Unknown { .. })
        ));
    }

    #[test]
    fn switches_left_out_of_a_result_when_off_can_still_be_set() {
        let off = serde_json::to_value(Params::default()).unwrap();
        assert!(off.get("line_fifo").is_none() && off.get("ticks_aligned").is_none());
        let p = set_param(&Params::default(), "line_fifo=true").unwrap();
        let p = set_param(&p, "ticks_aligned=true").unwrap();
        assert!(p.line_fifo && p.ticks_aligned);
        let on = serde_json::to_value(&p).unwrap();
        assert_eq!(on["line_fifo"], true);
        assert_eq!(on["ticks_aligned"], true);
        // A result file written before them reads as off.
        let back: Params = serde_json::from_value(off).unwrap();
        assert!(!back.line_fifo && !back.ticks_aligned);
    }

    #[test]
    fn cells_come_in_run_order_with_the_sweep_inside_the_lock() {
        let base = Params::default();
        let m = Matrix {
            sweep: Some(parse_sweep(&base, "hz=100,1000").unwrap()),
            base,
            cpus: vec![(4, vec![8])],
            pages: vec![Pages::P4k],
            locks: vec![LockKind::Pg],
            models: vec![Model::None, Model::Full],
        };
        let cells = m.cells().unwrap();
        let got: Vec<(u32, Model)> = cells
            .iter()
            .map(|c| (c.params.hz, c.params.model))
            .collect();
        assert_eq!(
            got,
            vec![
                (100, Model::None),
                (100, Model::Full),
                (1000, Model::None),
                (1000, Model::Full)
            ]
        );
    }

    #[test]
    fn a_request_applies_set_then_sweep_and_names_what_is_wrong() {
        let names = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let (set, models, locks, pages) = (
            names(&["hz=100"]),
            names(&["none", "lazy"]),
            names(&["pg"]),
            names(&["4k"]),
        );
        let req = Request {
            base: Params::default(),
            set: &set,
            cpus: vec![(4, vec![8, 16])],
            models: &models,
            locks: &locks,
            pages: &pages,
            sweep: Some("spin_ns=10,20"),
            repeat: 1,
        };
        let (m, cells) = req.matrix().unwrap();
        assert_eq!(m.base.hz, 100);
        assert_eq!(cells.len(), 2 * 2 * 2);
        let bad_model = names(&["sometimes"]);
        let e = Request {
            models: &bad_model,
            ..req.clone()
        }
        .matrix()
        .unwrap_err();
        assert!(
            matches!(
                e,
                RequestError::Axis {
                    axis: Axis::Models,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "sometimes: expected none, voluntary, full or lazy"
        );
        let e = Request {
            repeat: 0,
            ..req.clone()
        }
        .matrix()
        .unwrap_err();
        assert_eq!(e, RequestError::Repeat(0));
        let zero = Request {
            cpus: vec![(0, vec![8])],
            ..req
        };
        assert_eq!(zero.matrix().unwrap_err().to_string(), "cpus 0: 1..4096");
    }
}
