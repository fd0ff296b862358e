//! `compare`: statistics across result files of any bench.
//!
//! Cells are matched by their key fields (every scalar field of a cell but `status` and `reason`: `lock`,
//! `pages`, `workers` for `bench lock`). A key field that has one value in each file but different values
//! across files is the factor being compared (`pages: 4k | hugetlb-2m`): it is left out of the match and
//! shown above the table. Each metric has a direction and a centre (harmonic mean for rates, arithmetic for
//! times); the change is signed so that positive is better; the 95% interval of the ratio B/A comes from a
//! bootstrap, and a change is marked only when each side has at least two repetitions, that interval clears
//! 1 by more than the noise threshold, and Welch's t-test agrees at 5% after a Holm-Bonferroni correction
//! over the cell's metrics: percentile-bootstrap intervals are too narrow at 3-5 repetitions.

use std::collections::{BTreeMap, BTreeSet};

use results::metrics::{pools, HOST_FACTS, VM_FACTS};
use results::metrics::{Better, Metric, METRICS};
use results::Document;
use serde::Serialize;
use stats::{judge, Sample};

pub mod input;
pub mod pooled;

pub use crate::input::{CellSamples, Input};
pub use crate::pooled::{split, By};

/// A difference in host facts or spec.
#[derive(Debug, Clone, Serialize)]
pub struct FactDiff {
    /// What differs.
    pub fact: String,
    /// Its value in each input, in order.
    pub values: Vec<String>,
}

/// One metric of one matched cell, input k against the first input.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The cell's matching key, `lock=pg workers=16`.
    pub cell: String,
    /// Metric name.
    pub metric: String,
    /// Which input (1-based) is compared with input 1.
    pub against: usize,
    /// Centre of the first input.
    pub a: f64,
    /// Min and max of the first input.
    pub a_range: (f64, f64),
    /// Centre of this input.
    pub b: f64,
    /// Min and max of this input.
    pub b_range: (f64, f64),
    /// Signed change in %, positive = better.
    pub change_pct: f64,
    /// B/A with its 95% bootstrap interval.
    pub ratio: f64,
    /// Lower bound of the interval.
    pub ci_lo: f64,
    /// Upper bound of the interval.
    pub ci_hi: f64,
    /// Mann-Whitney two-sided p-value.
    pub mann_whitney_p: f64,
    /// Welch's t-test two-sided p-value (NaN with fewer than two samples a side).
    pub welch_p: f64,
    /// The interval clears 1 by more than the noise threshold, and Welch's test agrees (p < 0.05).
    pub significant: bool,
    /// Significant and worse.
    pub regression: bool,
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// Schema version of this document.
    pub schema_version: u32,
    /// The inputs, in order.
    pub inputs: Vec<String>,
    /// Noise threshold used.
    pub noise: f64,
    /// Host facts that differ.
    pub host_diffs: Vec<FactDiff>,
    /// Spec fields and cell factors that differ.
    pub spec_diffs: Vec<FactDiff>,
    /// Cells present in some inputs only.
    pub unmatched: Vec<String>,
    /// What the rows cannot tell, said before them (two diagnoses are sequential windows of a live host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
    /// The rows.
    pub rows: Vec<Row>,
}

impl Comparison {
    /// True when any row is a significant regression.
    pub fn has_regression(&self) -> bool {
        self.rows.iter().any(|r| r.regression)
    }
}

/// Why a comparison could not be made. The messages name the offending value and the fix; the caller
/// adds which option gave it.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The noise threshold is no fraction.
    #[error("{0}: a fraction from 0 to 1 (0.02 = 2%)")]
    Noise(f64),
    /// A document that is no bench or sim result.
    #[error("{label}: a {kind} document, not a bench or sim result; compare reads result files")]
    NotResult {
        /// The input.
        label: String,
        /// What it is.
        kind: String,
    },
    /// Results of different kinds have no cells in common.
    #[error("compare needs results of one kind: {a} is {a_kind}, {b} is {b_kind}")]
    Kinds {
        /// The first input.
        a: String,
        /// Its kind.
        a_kind: String,
        /// The first input of another kind.
        b: String,
        /// Its kind.
        b_kind: String,
    },
    /// One input and nothing to split it along.
    #[error("compare needs two result files, or one split along a field of its cells (lock, pages, ...)")]
    TooFew,
    /// A base value without an axis to find it on.
    #[error("a base value needs an axis to split along (a cell field such as lock, or preempt)")]
    BaseWithoutAxis,
    /// A metric name not in the catalogue.
    #[error("{name}: unknown metric (known: {known})")]
    UnknownMetric {
        /// The name given.
        name: String,
        /// The known names.
        known: String,
    },
    /// Nothing to pool.
    #[error("no result files to pool")]
    NoInputs,
    /// Pooled files of different benches.
    #[error("{a} is a {a_kind} result and {b} a {b_kind} result: only runs of one bench pool")]
    PoolKinds {
        /// The first input.
        a: String,
        /// Its kind.
        a_kind: String,
        /// The other input.
        b: String,
        /// Its kind.
        b_kind: String,
    },
    /// Pooled files from different hosts.
    #[error(
        "{a} and {b} differ in {fact} ({a_value} vs {b_value}): only runs of one host pool; \
         set such files against each other file by file"
    )]
    PoolHosts {
        /// The first input.
        a: String,
        /// The other input.
        b: String,
        /// The fact (`the host's HZ`, `VM host kernel`).
        fact: String,
        /// Its value in `a`.
        a_value: String,
        /// Its value in `b`.
        b_value: String,
    },
    /// Pooled files of different configurations.
    #[error(
        "{a} and {b} differ in spec.{field} ({a_value} vs {b_value}): only runs of one configuration \
         pool; set such files against each other file by file"
    )]
    PoolSpecs {
        /// The first input.
        a: String,
        /// The other input.
        b: String,
        /// The spec field.
        field: String,
        /// Its value in `a`.
        a_value: String,
        /// Its value in `b`.
        b_value: String,
    },
    /// A file without host facts, split by preemption model.
    #[error("{0} records no host facts, so no preemption model")]
    NoHost(String),
    /// No cell has the field split along.
    #[error("the cells have no field {field} (they have: {}; or preempt, the host's preemption model)", have.join(", "))]
    NoField {
        /// The field.
        field: String,
        /// The fields the cells have.
        have: Vec<String>,
    },
    /// The base value does not occur.
    #[error("no {} has {by}={base} (values: {})", if *preempt { "file" } else { "cell" }, values.join(", "))]
    NoBase {
        /// The axis.
        by: String,
        /// The base asked for.
        base: String,
        /// The values that occur.
        values: Vec<String>,
        /// Split by preemption model.
        preempt: bool,
    },
    /// The axis has one value.
    #[error(
        "every {} has {by}={value}: nothing to set against it ({})",
        if *preempt { "file" } else { "cell" },
        if *preempt { "add runs under other preemption models" } else { "pick a field that varies" }
    )]
    OneValue {
        /// The axis.
        by: String,
        /// Its one value.
        value: String,
        /// Split by preemption model.
        preempt: bool,
    },
}

/// What `compare` is asked: the noise threshold, an axis to split pooled files along (and its base value),
/// the metrics to show.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A change counts only when the interval of the ratio clears 1 by more than this (0.02 = 2%).
    pub noise: f64,
    /// Split the (pooled) inputs along this axis instead of setting files against files.
    pub by: Option<By>,
    /// With `by`: the value the others are set against (default: the first that appears).
    pub base: Option<String>,
    /// Only these metrics (names as in [`METRICS`]).
    pub metrics: Option<Vec<String>>,
}

/// Compares labelled documents as asked: checks the options, reduces each document to its input, splits
/// them when asked, and builds the comparison.
pub fn run(docs: &[(String, Document)], o: &Options) -> Result<Comparison, CompareError> {
    if !(0.0..1.0).contains(&o.noise) {
        return Err(CompareError::Noise(o.noise));
    }
    if let Some(names) = &o.metrics {
        if let Some(name) = names.iter().find(|n| Metric::named(n).is_none()) {
            return Err(CompareError::UnknownMetric {
                name: name.clone(),
                known: METRICS.map(|m| m.name).join(", "),
            });
        }
    }
    // Results of different kinds have no cells in common: refuse rather than report "no cells matched".
    if let Some((first, d0)) = docs.first() {
        if let Some((other, d)) = docs.iter().find(|(_, d)| d.kind() != d0.kind()) {
            return Err(CompareError::Kinds {
                a: first.clone(),
                a_kind: d0.kind().to_string(),
                b: other.clone(),
                b_kind: d.kind().to_string(),
            });
        }
    }
    let inputs: Vec<Input> = docs
        .iter()
        .map(|(name, doc)| Input::new(name.clone(), doc))
        .collect::<Result<_, _>>()?;
    let inputs = match (&o.by, &o.base) {
        (Some(by), base) => split(&inputs, by, base.as_deref())?,
        (None, Some(_)) => return Err(CompareError::BaseWithoutAxis),
        (None, None) if inputs.len() < 2 => return Err(CompareError::TooFew),
        (None, None) => inputs,
    };
    compare(&inputs, o.noise, o.metrics.as_deref())
}

/// Diagnoses set against each other are windows of a live host one after the other: whatever changed
/// between them (the load, its caches, the host's other users) shows as the difference as much as a fix
/// does. On an operator's shared host every pgbench run after a fix was 16-25% slower than its twin 10-15
/// minutes earlier, while short windows interleaved on/off/on/off showed huge pages 2.6-8.9% faster (issue
/// 46 item 5, 2026-11-29): `compare` marked the later diagnosis better with no word of it. Said once per
/// later input, with how long after the first it started.
fn sequential_windows(inputs: &[Input]) -> Vec<String> {
    let Some(first) = inputs.first().filter(|i| i.kind == results::Kind::Diagnose) else {
        return Vec::new();
    };
    inputs
        .iter()
        .enumerate()
        .skip(1)
        .map(|(k, i)| {
            let when = match (first.started_unix_s, i.started_unix_s) {
                (Some(a), Some(b)) if b >= a => {
                    format!("{} after A", stats::fmt::age((b - a) as i64))
                }
                (Some(a), Some(b)) => format!("{} before A", stats::fmt::age((a - b) as i64)),
                _ => "at another time than A".into(),
            };
            format!(
                "{} is a window of the live host {when}: sequential windows on a shared host mislead, since the load, its caches and the host's other users change between them as a fix does; alternate short windows of each state and compare a state with itself first (GUIDE.md, diagnose: before and after a fix)",
                (b'A' + k as u8) as char
            )
        })
        .collect()
}

/// `fact` with each input's value, when they are not all the same.
fn differing(fact: impl Into<String>, values: impl Iterator<Item = String>) -> Option<FactDiff> {
    let values: Vec<String> = values.collect();
    (values.iter().collect::<BTreeSet<_>>().len() > 1).then(|| FactDiff {
        fact: fact.into(),
        values,
    })
}

/// Builds the comparison. Errors name the input that is not a result file.
pub fn compare(
    inputs: &[Input],
    noise: f64,
    metrics_filter: Option<&[String]>,
) -> Result<Comparison, CompareError> {
    if inputs.len() < 2 {
        return Err(CompareError::TooFew);
    }
    let host_diffs = host_diffs(inputs);
    let (spec_diffs, factors) = spec_diffs(inputs);
    let key_of = |c: &CellSamples| -> String {
        c.key
            .iter()
            .filter(|(k, _)| !factors.contains(*k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let first: Vec<(String, &CellSamples)> =
        inputs[0].cells.iter().map(|c| (key_of(c), c)).collect();
    let mut rows = Vec::new();
    let mut unmatched = BTreeSet::new();
    for (bi, input) in inputs.iter().enumerate().skip(1) {
        let others: BTreeMap<String, &CellSamples> =
            input.cells.iter().map(|c| (key_of(c), c)).collect();
        for key in others.keys() {
            if !first.iter().any(|(k, _)| k == key) {
                unmatched.insert(format!("{key} (only in {})", input.label));
            }
        }
        for (key, ca) in &first {
            let Some(cb) = others.get(key) else {
                unmatched.insert(format!("{key} (only in {})", inputs[0].label));
                continue;
            };
            rows.extend(judged_rows(key, (ca, cb), bi, noise, metrics_filter));
        }
    }
    // A run with the preemption model as an axis keys its cells by model; a file run under one model
    // does not: they pair only through --by preempt.
    let has_model = |i: &Input| i.cells.iter().any(|c| c.key.contains_key("preempt"));
    if !unmatched.is_empty() && inputs.iter().any(has_model) && !inputs.iter().all(has_model) {
        unmatched.insert(
            "(cells that ran under a preemption model of their own pair with a file's cells only through --by preempt)"
                .into(),
        );
    }
    Ok(Comparison {
        schema_version: 1,
        inputs: inputs.iter().map(|i| i.label.clone()).collect(),
        noise,
        host_diffs,
        spec_diffs,
        unmatched: unmatched.into_iter().collect(),
        caveats: sequential_windows(inputs),
        rows,
    })
}

/// Host facts (and a guest's machine, emulator and clock: as much a part of its figures as the guest's own
/// facts) whose values differ across the inputs.
fn host_diffs(inputs: &[Input]) -> Vec<FactDiff> {
    let mut host_diffs: Vec<FactDiff> = HOST_FACTS
        .iter()
        .filter_map(|f| {
            differing(
                f.label,
                inputs
                    .iter()
                    .map(|i| i.host_fact(f.get).unwrap_or_else(|| "-".into())),
            )
        })
        .collect();
    host_diffs.extend(differing(
        "hugetlb pools",
        inputs
            .iter()
            .map(|i| i.host_fact(pools).unwrap_or_else(|| "-".into())),
    ));
    host_diffs.extend(
        VM_FACTS
            .iter()
            .filter_map(|f| differing(f.label, inputs.iter().map(|i| i.vm_fact(f.get)))),
    );
    host_diffs
}

/// Spec fields whose values differ across the inputs, and the compared factors: key fields with one value
/// per file, different across files (said as `cell FIELD` among the spec differences).
fn spec_diffs(inputs: &[Input]) -> (Vec<FactDiff>, BTreeSet<String>) {
    let mut spec_diffs: Vec<FactDiff> =
        differing("kind", inputs.iter().map(|i| i.kind.to_string()))
            .into_iter()
            .collect();
    let spec_keys: BTreeSet<&str> = inputs
        .iter()
        .flat_map(|i| i.spec.iter().map(|f| f.name.as_str()))
        .collect();
    spec_diffs.extend(spec_keys.into_iter().filter_map(|k| {
        differing(
            format!("spec.{k}"),
            inputs
                .iter()
                .map(|i| i.spec_json(k).unwrap_or("-").to_string()),
        )
    }));
    // Key fields that are the compared factor: one value per file, different across files.
    let all_fields: BTreeSet<&String> = inputs
        .iter()
        .flat_map(|i| i.cells.iter().flat_map(|c| c.key.keys()))
        .collect();
    let mut factors = BTreeSet::new();
    for f in all_fields {
        let per_file: Vec<BTreeSet<&String>> = inputs
            .iter()
            .map(|i| i.cells.iter().filter_map(|c| c.key.get(f)).collect())
            .collect();
        if per_file.iter().all(|s| s.len() == 1)
            && per_file.iter().collect::<BTreeSet<_>>().len() > 1
        {
            factors.insert(f.clone());
            spec_diffs.push(FactDiff {
                fact: format!("cell {f}"),
                values: per_file
                    .iter()
                    .map(|s| s.iter().next().map(|v| v.to_string()).unwrap_or_default())
                    .collect(),
            });
        }
    }
    (spec_diffs, factors)
}

/// One matched cell's rows against input `bi`: each chosen metric judged, the cell's metrics one family
/// (stats::judge: interval, noise, Welch with Holm).
fn judged_rows(
    key: &str,
    (ca, cb): (&CellSamples, &CellSamples),
    bi: usize,
    noise: f64,
    metrics_filter: Option<&[String]>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    let chosen: Vec<(usize, &Metric)> = METRICS
        .iter()
        .enumerate()
        .filter(|(_, m)| match metrics_filter {
            Some(f) => f.iter().any(|x| x == m.name),
            None => !m.on_request,
        })
        .filter(|(mi, _)| !ca.samples[*mi].is_empty() && !cb.samples[*mi].is_empty())
        .collect();
    // The metrics of one cell are one family (stats::judge: interval, noise, Welch with Holm).
    let family: Vec<Sample> = chosen
        .iter()
        .map(|(mi, m)| Sample {
            a: &ca.samples[*mi],
            b: &cb.samples[*mi],
            centre: m.centre,
        })
        .collect();
    for (((_, m), s), j) in chosen.iter().zip(&family).zip(judge(&family, noise)) {
        let ci = j.ci;
        let change_pct = match m.better {
            Better::Higher => (ci.ratio - 1.0) * 100.0,
            Better::Lower => (1.0 - ci.ratio) * 100.0,
        };
        let range = |xs: &[f64]| {
            (
                xs.iter().copied().fold(f64::INFINITY, f64::min),
                xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            )
        };
        rows.push(Row {
            cell: key.to_string(),
            metric: m.name.to_string(),
            against: bi + 1,
            a: m.centre.of(s.a),
            a_range: range(s.a),
            b: m.centre.of(s.b),
            b_range: range(s.b),
            change_pct,
            ratio: ci.ratio,
            ci_lo: ci.lo,
            ci_hi: ci.hi,
            mann_whitney_p: j.mann_whitney_p,
            welch_p: j.welch_p,
            significant: j.significant,
            regression: j.significant && change_pct < 0.0,
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::document::SpecField;
    use results::Kind;

    fn cell(key: &[(&str, String)], metric: &str, xs: &[f64]) -> CellSamples {
        let mut samples = vec![Vec::new(); METRICS.len()];
        samples[METRICS.iter().position(|m| m.name == metric).unwrap()] = xs.to_vec();
        CellSamples {
            key: key
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            samples,
        }
    }

    fn spec(fields: &[(&str, &str, bool)]) -> Vec<SpecField> {
        fields
            .iter()
            .map(|(name, json, list)| SpecField {
                name: name.to_string(),
                json: json.to_string(),
                list: *list,
            })
            .collect()
    }

    fn input(label: &str, tps: &[f64]) -> Input {
        Input {
            label: label.into(),
            kind: Kind::BenchPg,
            host: None,
            vm: None,
            spec: Vec::new(),
            cells: vec![cell(&[("clients", "4".into())], "tps", tps)],
            started_unix_s: None,
        }
    }

    fn lock_run(label: &str, seed: u64, cells: &[(&str, u32, &[f64])]) -> Input {
        let cells = cells
            .iter()
            .map(|(lock, workers, ops)| {
                let key = [
                    ("lock", lock.to_string()),
                    ("pages", "4k".into()),
                    ("workers", workers.to_string()),
                ];
                cell(&key, "ops/s", ops)
            })
            .collect();
        Input {
            label: label.into(),
            kind: Kind::BenchLock,
            host: None,
            vm: None,
            spec: spec(&[
                ("duration_s", "3.0", false),
                ("locks", r#"["pg","adaptive"]"#, true),
                ("repeat", "3", false),
                ("seed", &seed.to_string(), false),
            ]),
            cells,
            started_unix_s: None,
        }
    }

    /// The ops/s row of the cell whose key contains `key`, inputs compared as given.
    fn row_at(inputs: &[Input], key: &str) -> Row {
        let c = compare(inputs, 0.02, None).unwrap();
        c.rows.into_iter().find(|r| r.cell.contains(key)).unwrap()
    }

    #[test]
    fn by_field_sets_values_against_the_base_and_pools_files() {
        let run1 = lock_run(
            "run1",
            1,
            &[
                ("pg", 8, &[100.0, 102.0, 98.0]),
                ("adaptive", 8, &[150.0, 152.0, 148.0]),
                ("pg", 16, &[100.0, 101.0, 99.0]),
                ("adaptive", 16, &[100.0, 99.0, 101.0]),
            ],
        );
        let split = super::split(std::slice::from_ref(&run1), &By::parse("lock"), None).unwrap();
        assert_eq!(
            split.iter().map(|i| i.label.as_str()).collect::<Vec<_>>(),
            ["lock=pg", "lock=adaptive"]
        );
        let c = compare(&split, 0.02, None).unwrap();
        assert_eq!(c.rows.len(), 2, "{:?}", c.rows);
        let at = |w: &str| c.rows.iter().find(|r| r.cell.contains(w)).unwrap();
        assert!(at("workers=8").significant);
        assert!((at("workers=8").ratio - 1.5).abs() < 0.01);
        assert!(!at("workers=16").significant);
        assert!(c.spec_diffs.iter().any(|d| d.fact == "cell lock"));
        // --base puts that value first: adaptive is the baseline, pg 1/1.5 of it.
        let split = super::split(
            std::slice::from_ref(&run1),
            &By::parse("lock"),
            Some("adaptive"),
        )
        .unwrap();
        assert_eq!(split[0].label, "lock=adaptive");
        let r = row_at(&split, "workers=8");
        assert!(r.regression && (r.ratio - 1.0 / 1.5).abs() < 0.01, "{r:?}");
        // Two runs of one configuration pool their repetitions (repeat may differ).
        let mut run2 = lock_run("run2", 1, &[("pg", 8, &[97.0]), ("adaptive", 8, &[151.0])]);
        run2.spec[2].json = "1".into();
        let split = super::split(&[run1.clone(), run2], &By::parse("lock"), None).unwrap();
        assert!(split[0].label.contains("2 files pooled"));
        let r = row_at(&split, "workers=8");
        assert_eq!((r.a_range.0, r.b_range.1), (97.0, 152.0));
    }

    #[test]
    fn a_metric_of_the_whole_machine_is_shown_only_when_asked_for() {
        let with_ipis = |label: &str, ipis: &[f64]| {
            let mut i = input(label, &[100.0, 101.0, 99.0]);
            let at = METRICS
                .iter()
                .position(|m| m.name == "resched IPIs/op")
                .unwrap();
            i.cells[0].samples[at] = ipis.to_vec();
            i
        };
        let (a, b) = (
            with_ipis("a", &[0.01, 0.011, 0.009]),
            with_ipis("b", &[0.0001, 0.00011, 0.00009]),
        );
        let c = compare(&[a.clone(), b.clone()], 0.02, None).unwrap();
        assert_eq!(
            c.rows.iter().map(|r| r.metric.as_str()).collect::<Vec<_>>(),
            ["tps"]
        );
        assert!(!c.has_regression());
        let asked = ["resched IPIs/op".to_string()];
        let c = compare(&[a, b], 0.02, Some(&asked[..])).unwrap();
        assert_eq!(c.rows.len(), 1);
        assert!((c.rows[0].ratio - 0.01).abs() < 0.001, "{:?}", c.rows[0]);
    }

    #[test]
    fn by_field_refuses_what_it_cannot_pool_or_find() {
        let run1 = lock_run("run1", 1, &[("pg", 8, &[1.0]), ("adaptive", 8, &[2.0])]);
        let other_seed = lock_run("run2", 2, &[("pg", 8, &[1.0]), ("adaptive", 8, &[2.0])]);
        let e = split(&[run1.clone(), other_seed], &By::parse("lock"), None).unwrap_err();
        assert!(e.to_string().contains("spec.seed (1 vs 2)"), "{e}");
        let e = split(std::slice::from_ref(&run1), &By::parse("clients"), None).unwrap_err();
        assert!(
            e.to_string().contains("they have: lock, pages, workers"),
            "{e}"
        );
        let e = split(std::slice::from_ref(&run1), &By::parse("lock"), Some("mcs")).unwrap_err();
        assert!(e.to_string().contains("values: pg, adaptive"), "{e}");
        let e = split(std::slice::from_ref(&run1), &By::parse("pages"), None).unwrap_err();
        assert!(e.to_string().contains("every cell has pages=4k"), "{e}");
        let mut pg = run1.clone();
        pg.kind = Kind::BenchPg;
        let e = split(&[run1, pg], &By::parse("lock"), None).unwrap_err();
        assert!(e.to_string().contains("runs of one bench pool"), "{e}");
    }

    #[test]
    fn a_run_with_models_of_its_own_against_a_plain_file_points_to_by_preempt() {
        let plain = input("plain.json", &[10.0, 11.0]);
        let mut axis = input("axis.json", &[10.0, 11.0]);
        axis.cells = ["none", "lazy"]
            .iter()
            .map(|m| {
                cell(
                    &[("clients", "4".into()), ("preempt", m.to_string())],
                    "tps",
                    &[10.0, 11.0],
                )
            })
            .collect();
        let c = compare(&[plain, axis], 0.02, None).unwrap();
        assert!(c.rows.is_empty());
        assert!(
            c.unmatched
                .iter()
                .any(|u| u.contains("only through --by preempt")),
            "{:?}",
            c.unmatched
        );
        // Two plain files say nothing of it.
        let c = compare(&[input("a", &[1.0]), input("b", &[1.0, 2.0])], 0.02, None).unwrap();
        assert!(c.unmatched.is_empty());
    }

    #[test]
    fn one_repetition_on_a_side_is_never_significant() {
        let c = compare(
            &[input("a", &[100.0, 101.0, 99.0]), input("b", &[200.0])],
            0.02,
            None,
        )
        .unwrap();
        assert_eq!(c.rows.len(), 1);
        assert!(!c.rows[0].significant, "{:?}", c.rows[0]);
        let c = compare(
            &[
                input("a", &[100.0, 101.0, 99.0]),
                input("b", &[200.0, 201.0, 199.0]),
            ],
            0.02,
            None,
        )
        .unwrap();
        assert!(c.rows[0].significant && !c.rows[0].regression);
    }
}
