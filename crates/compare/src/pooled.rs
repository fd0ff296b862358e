//! Pooling runs and splitting them along one axis, so that `compare` sets values against each other
//! instead of files against files: along a key field of the cells (`lock`, `pages`, `huge_pages`, ...) or
//! along the host's effective preemption model (runs of one bench made in guests booted `preempt=none`,
//! `voluntary`, `full`, `lazy`: host fact `kernel.preemption.model`).
//!
//! Pooling takes a cell's repetitions from every file together, which is sound only for runs of one
//! configuration on one host: same kind, the same scalar spec fields but `repeat` (the matrix lists may
//! differ), the same host facts, and for runs in guests the same `vm` block facts (the machine, emulator and
//! guest clock beneath: [`VM_FACTS`]). Split by preemption model, the model and the source that decided it are
//! exempt from that check: they are the axis. A guest's RAM varies by a few KiB from boot to boot, and
//! bench lock's descriptors are sized from it: those agree when within [`NEAR`].

use std::collections::{BTreeMap, BTreeSet};

use results::metrics::{HOST_FACTS, METRICS, VM_FACTS};

use crate::input::{CellSamples, Input};
use crate::CompareError;

/// What to split pooled runs along.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum By {
    /// A key field of the cells (`lock`, `pages`, `workers`, `huge_pages`, ...).
    Field(String),
    /// The preemption model: a cell's own (`preempt`, from `--switch-preempt` with several models), else
    /// the host's effective model (host fact `kernel.preemption.model`), file by file.
    Preempt,
}

impl By {
    /// `preempt` is the preemption model; any other name is a cell key field.
    pub fn parse(s: &str) -> By {
        match s {
            "preempt" => By::Preempt,
            f => By::Field(f.to_string()),
        }
    }

    /// The name the labels use (`lock`, `preempt`).
    pub fn name(&self) -> &str {
        match self {
            By::Field(f) => f,
            By::Preempt => "preempt",
        }
    }
}

/// Relative difference under which two values of a fact sized from the RAM are one value (0.1%).
pub const NEAR: f64 = 0.001;

/// Host facts and spec fields that vary slightly from boot to boot of one guest (RAM, and what bench lock
/// sizes from it when not given).
const NEAR_FACTS: [&str; 3] = ["RAM kB", "spec.descriptors", "spec.reconnect_every"];

/// The host facts exempt from the one-host check when splitting by preemption model.
const PREEMPT_FACTS: [&str; 2] = ["preemption", "preemption source"];

fn same(name: &str, a: Option<&str>, b: Option<&str>) -> bool {
    if a == b {
        return true;
    }
    let (Some(a), Some(b)) = (a, b) else {
        return false;
    };
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) if NEAR_FACTS.contains(&name) => {
            (x - y).abs() <= NEAR * x.abs().max(y.abs())
        }
        _ => false,
    }
}

/// Refuses inputs that are not runs of one bench and configuration on one host (but the facts in `exempt`).
fn check_poolable(inputs: &[Input], exempt: &[&str]) -> Result<(), CompareError> {
    let Some(first) = inputs.first() else {
        return Err(CompareError::NoInputs);
    };
    let scalar_spec = |i: &Input| -> BTreeMap<String, String> {
        i.spec
            .iter()
            .filter(|f| f.name != "repeat" && !f.list)
            .map(|f| (f.name.clone(), f.json.clone()))
            .collect()
    };
    let spec0 = scalar_spec(first);
    for i in &inputs[1..] {
        if i.kind != first.kind {
            return Err(CompareError::PoolKinds {
                a: first.label.clone(),
                a_kind: first.kind.to_string(),
                b: i.label.clone(),
                b_kind: i.kind.to_string(),
            });
        }
        // Runs on different hosts (or kernels, preemption models, ...) are not one sample either.
        for f in HOST_FACTS.iter().filter(|f| !exempt.contains(&f.label)) {
            let (va, vb) = (first.host_fact(f.get), i.host_fact(f.get));
            if !same(f.label, va.as_deref(), vb.as_deref()) {
                return Err(CompareError::PoolHosts {
                    a: first.label.clone(),
                    b: i.label.clone(),
                    fact: format!("the host's {}", f.label),
                    a_value: va.unwrap_or_else(|| "-".into()),
                    b_value: vb.unwrap_or_else(|| "-".into()),
                });
            }
        }
        // Nor are runs in guests on different hosts, emulators or guest clocks, or a guest's run with one
        // outside a VM.
        for f in VM_FACTS {
            let (va, vb) = (first.vm_fact(f.get), i.vm_fact(f.get));
            if va != vb {
                return Err(CompareError::PoolHosts {
                    a: first.label.clone(),
                    b: i.label.clone(),
                    fact: f.label.to_string(),
                    a_value: va,
                    b_value: vb,
                });
            }
        }
        let spec = scalar_spec(i);
        let keys: BTreeSet<&String> = spec0.keys().chain(spec.keys()).collect();
        let differs = keys.into_iter().find(|k| {
            !same(
                &format!("spec.{k}"),
                spec0.get(*k).map(String::as_str),
                spec.get(*k).map(String::as_str),
            )
        });
        if let Some(k) = differs {
            return Err(CompareError::PoolSpecs {
                a: first.label.clone(),
                b: i.label.clone(),
                field: k.clone(),
                a_value: spec0.get(k).cloned().unwrap_or_else(|| "-".into()),
                b_value: spec.get(k).cloned().unwrap_or_else(|| "-".into()),
            });
        }
    }
    Ok(())
}

/// One value of the axis: the pooled cells (by their matching key) and the files that gave them.
#[derive(Default)]
struct Group<'a> {
    cells: BTreeMap<String, CellSamples>,
    files: BTreeSet<usize>,
    first: Option<&'a Input>,
}

impl Group<'_> {
    fn add(&mut self, key: String, c: &CellSamples) {
        let cell = self.cells.entry(key).or_insert_with(|| CellSamples {
            key: c.key.clone(),
            samples: vec![Vec::new(); METRICS.len()],
        });
        for (pooled, more) in cell.samples.iter_mut().zip(&c.samples) {
            pooled.extend_from_slice(more);
        }
    }
}

fn join_key<'a>(fields: impl Iterator<Item = (&'a String, &'a String)>) -> String {
    fields
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Splits result files along `by`: one input per value, holding that value's cells, the values in the
/// order they first appear, `base` (when given) first. Several files are pooled (see the module doc).
/// Split by a field, a label reads `lock=pg (3 files pooled)` (every file pooled); by preemption model,
/// `preempt=lazy (5 files pooled)` (the files under that model), and each input keeps the host facts (and
/// `vm` block) of its first file, so `compare` shows the models as the host fact that differs.
pub fn split(inputs: &[Input], by: &By, base: Option<&str>) -> Result<Vec<Input>, CompareError> {
    let exempt: &[&str] = match by {
        By::Field(_) => &[],
        By::Preempt => &PREEMPT_FACTS,
    };
    check_poolable(inputs, exempt)?;
    let name = by.name();
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut seen_fields = BTreeSet::new();
    for (fi, i) in inputs.iter().enumerate() {
        // The host's model: only for cells without one of their own.
        let host_model = || {
            i.host
                .as_ref()
                .map(|h| h.kernel.preemption.model.to_string())
                .ok_or_else(|| CompareError::NoHost(i.label.clone()))
        };
        let model = match by {
            By::Preempt if i.cells.iter().any(|c| !c.key.contains_key("preempt")) => {
                Some(host_model()?)
            }
            _ => None,
        };
        for c in &i.cells {
            seen_fields.extend(c.key.keys().cloned());
            let (v, key) = match (&model, by) {
                (_, By::Preempt) if c.key.contains_key("preempt") => (
                    &c.key["preempt"],
                    join_key(c.key.iter().filter(|(k, _)| *k != "preempt")),
                ),
                (Some(m), _) => (m, join_key(c.key.iter())),
                (None, By::Field(field)) => {
                    let Some(v) = c.key.get(field) else { continue };
                    (v, join_key(c.key.iter().filter(|(k, _)| *k != field)))
                }
                (None, By::Preempt) => unreachable!("a cell without a model has the host's"),
            };
            if !order.contains(v) {
                order.push(v.clone());
            }
            let g = groups.entry(v.clone()).or_default();
            g.files.insert(fi);
            g.first.get_or_insert(i);
            match by {
                // The model is the split: a cell's own is not a key (it would not pair with a file's
                // cells that ran under the host's).
                By::Preempt if c.key.contains_key("preempt") => {
                    let mut own = c.clone();
                    own.key.remove("preempt");
                    g.add(key, &own);
                }
                _ => g.add(key, c),
            }
        }
    }
    if order.is_empty() {
        return Err(CompareError::NoField {
            field: name.to_string(),
            have: seen_fields.into_iter().collect(),
        });
    }
    if let Some(b) = base {
        let Some(pos) = order.iter().position(|v| v == b) else {
            return Err(CompareError::NoBase {
                by: name.to_string(),
                base: b.to_string(),
                values: order,
                preempt: *by == By::Preempt,
            });
        };
        let b = order.remove(pos);
        order.insert(0, b);
    }
    if order.len() < 2 {
        return Err(CompareError::OneValue {
            by: name.to_string(),
            value: order.remove(0),
            preempt: *by == By::Preempt,
        });
    }
    let pooled = |n: usize| {
        if n > 1 {
            format!(" ({n} files pooled)")
        } else {
            String::new()
        }
    };
    let first = &inputs[0];
    Ok(order
        .into_iter()
        .map(|v| {
            let g = groups.remove(&v).unwrap_or_default();
            let (n, from) = match by {
                By::Field(_) => (inputs.len(), first),
                By::Preempt => (g.files.len(), g.first.unwrap_or(first)),
            };
            Input {
                label: format!("{name}={v}{}", pooled(n)),
                kind: first.kind,
                host: from.host.clone(),
                vm: from.vm.clone(),
                spec: first.spec.clone(),
                cells: g.cells.into_values().collect(),
                started_unix_s: None,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare;
    use results::Document;

    fn load(rel: &str) -> Document {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/results")
            .join(rel);
        Document::from_text(&std::fs::read_to_string(&p).unwrap()).unwrap()
    }

    fn input(label: &str, doc: &Document) -> Input {
        Input::new(label, doc).unwrap()
    }

    /// A copy of a real result, as if measured under `model` (and decided by the debugfs file).
    fn under(doc: &Document, model: results::host::kernel::PreemptModel) -> Document {
        let mut d = doc.clone();
        let Document::Lock(r) = &mut d else {
            panic!("a bench lock result")
        };
        r.envelope.host.kernel.preemption.model = model;
        r.envelope.host.kernel.preemption.decided_by =
            Some("/sys/kernel/debug/sched/preempt".into());
        d
    }

    #[test]
    fn by_preempt_pools_files_per_model_and_sets_each_against_the_base() {
        use results::host::kernel::PreemptModel::{Full, Lazy};
        let run1 = load("bench-lock-bars-v5-run1.json");
        let run2 = load("bench-lock-bars-v5-run2.json");
        let inputs = [
            input("lazy1", &under(&run1, Lazy)),
            input("none1", &run1),
            input("lazy2", &under(&run2, Lazy)),
            input("none2", &run2),
            input("full1", &under(&run1, Full)),
        ];
        let split = super::split(&inputs, &By::parse("preempt"), Some("none")).unwrap();
        assert_eq!(
            split.iter().map(|i| i.label.as_str()).collect::<Vec<_>>(),
            [
                "preempt=none (2 files pooled)",
                "preempt=lazy (2 files pooled)",
                "preempt=full"
            ]
        );
        // Every cell of the file is one cell of its model, with the repetitions of both files.
        let cells = |d: &Document| d.cells().unwrap().len();
        assert_eq!(split[0].cells.len(), cells(&run1));
        let reps = |i: &Input| i.cells[0].samples.iter().map(Vec::len).max().unwrap();
        assert_eq!(reps(&split[0]), 6, "3 repetitions a file");
        // Each input keeps its model's host facts: the model is the host fact that differs.
        let c = compare(&split, 0.02, Some(&["ops/s".to_string()])).unwrap();
        let model = c
            .host_diffs
            .iter()
            .find(|d| d.fact == "preemption")
            .unwrap();
        assert_eq!(model.values, ["none", "lazy", "full"]);
        // Cell by cell, every model against none: the same cells, with intervals.
        assert_eq!(
            c.rows.iter().filter(|r| r.against == 2).count(),
            cells(&run1)
        );
        assert!(c
            .rows
            .iter()
            .all(|r| r.ci_lo.is_finite() && r.ci_lo <= r.ci_hi));
        assert!(c.unmatched.is_empty(), "{:?}", c.unmatched);
    }

    #[test]
    fn by_preempt_reads_the_cells_own_model_in_a_run_that_switched_between_models() {
        // One run with the model as an axis (`--switch-preempt none,lazy`): every cell twice, each with
        // its model; the host's (here none) is not the split. A file without the axis, under lazy, pools
        // with the lazy cells.
        use axes::model::Model;
        let run1 = load("bench-lock-bars-v5-run1.json");
        let mut axis = run1.clone();
        let Document::Lock(r) = &mut axis else {
            unreachable!()
        };
        let one = r.cells.clone();
        r.cells.clear();
        for m in [Model::None, Model::Lazy] {
            r.cells.extend(one.iter().cloned().map(|mut c| {
                c.preempt = Some(m);
                c
            }));
        }
        let lazy_file = under(&run1, results::host::kernel::PreemptModel::Lazy);
        let split = super::split(
            &[input("axis", &axis), input("lazy", &lazy_file)],
            &By::Preempt,
            None,
        )
        .unwrap();
        assert_eq!(split[0].label, "preempt=none");
        assert_eq!(split[1].label, "preempt=lazy (2 files pooled)");
        assert_eq!(split[0].cells.len(), one.len());
        assert!(
            split[0]
                .cells
                .iter()
                .all(|c| !c.key.contains_key("preempt")),
            "the model is the split, not a key"
        );
        let reps = |i: &Input| i.cells[0].samples.iter().map(Vec::len).max().unwrap();
        assert_eq!(
            reps(&split[1]),
            2 * reps(&split[0]),
            "the lazy cells of both files"
        );
        let c = compare(&split, 0.02, Some(&["ops/s".to_string()])).unwrap();
        assert_eq!(c.rows.len(), one.len());
        assert!(c.unmatched.is_empty(), "{:?}", c.unmatched);
    }

    #[test]
    fn by_preempt_reads_the_vm_campaign_whose_ram_varies_by_kib() {
        // Real guests booted preempt=none and lazy: RAM kB (and the descriptors sized from it) differ by a
        // few KiB between boots, which does not keep them from pooling.
        let names = ["none-r1", "none-r2", "lazy-r1", "lazy-r2"];
        let inputs: Vec<Input> = names
            .iter()
            .map(|n| input(n, &load(&format!("vm/lock-6.18/{n}.json"))))
            .collect();
        let split = super::split(&inputs, &By::Preempt, None).unwrap();
        assert_eq!(split[0].label, "preempt=none (2 files pooled)");
        assert_eq!(split[1].label, "preempt=lazy (2 files pooled)");
        assert!(!compare(&split, 0.02, None).unwrap().rows.is_empty());
    }

    #[test]
    fn by_preempt_still_requires_one_host_otherwise() {
        let run1 = load("bench-lock-bars-v5-run1.json");
        let mut other = under(&run1, results::host::kernel::PreemptModel::Lazy);
        let Document::Lock(r) = &mut other else {
            unreachable!()
        };
        r.envelope.host.kernel.hz.value = Some(1000);
        let inputs = [input("a", &run1), input("b", &other)];
        let e = split(&inputs, &By::Preempt, None).unwrap_err().to_string();
        assert!(e.contains("differ in the host's HZ"), "{e}");
        // RAM beyond the boot-to-boot wobble is another host.
        let mut big = under(&run1, results::host::kernel::PreemptModel::Lazy);
        let Document::Lock(r) = &mut big else {
            unreachable!()
        };
        r.envelope.host.memory.total_kib.value =
            r.envelope.host.memory.total_kib.value.map(|k| k * 2);
        let e = split(&[input("a", &run1), input("b", &big)], &By::Preempt, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("RAM kB"), "{e}");
        // One model only: nothing to set against it.
        let e = split(&[input("a", &run1)], &By::Preempt, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("every file has preempt=none"), "{e}");
        let lazy = under(&run1, results::host::kernel::PreemptModel::Lazy);
        let e = split(
            &[input("a", &run1), input("b", &lazy)],
            &By::Preempt,
            Some("full"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("no file has preempt=full (values: none, lazy)"),
            "{e}"
        );
    }

    #[test]
    fn guests_on_another_host_emulator_or_clock_do_not_pool_and_are_shown() {
        // Real guests of one campaign (7.2, full and lazy, the TSC throughout) pool.
        let full = load("vm/2026-11-27-tsc/costs-7.2/full-r1.json");
        let lazy = load("vm/2026-11-27-tsc/costs-7.2/lazy-r1.json");
        let same = [input("full", &full), input("lazy", &lazy)];
        assert_eq!(split(&same, &By::Preempt, None).unwrap().len(), 2);
        // The same lazy run on another build of the host's kernel, or with its clock switched to the HPET
        // during the command, or outside any VM: each is refused with the fact that differs.
        let with_vm = |f: fn(&mut results::vm::VmBlock)| {
            let mut d = lazy.clone();
            let Document::Lock(r) = &mut d else {
                unreachable!()
            };
            f(r.envelope.vm.as_mut().unwrap());
            d
        };
        let other_host = with_vm(|v| v.host_kernel = "6.18.44-fc-v769".into());
        let hpet = with_vm(|v| v.guest_clocksource_after = Some("hpet".into()));
        let mut bare = lazy.clone();
        let Document::Lock(r) = &mut bare else {
            unreachable!()
        };
        r.envelope.vm = None;
        for (doc, fact, values) in [
            (
                &other_host,
                "VM host kernel",
                "6.18.44-fc-v669 vs 6.18.44-fc-v769",
            ),
            (&hpet, "VM guest clocksource", "tsc vs tsc->hpet"),
            (&bare, "VM accelerator", "tcg vs -"),
        ] {
            let inputs = [input("full", &full), input("lazy", doc)];
            let e = split(&inputs, &By::Preempt, None).unwrap_err().to_string();
            assert!(e.contains(&format!("differ in {fact} ({values})")), "{e}");
            // File against file, compare shows the fact beside the host's own.
            let c = compare(&inputs, 0.02, None).unwrap();
            let d = c.host_diffs.iter().find(|d| d.fact == fact);
            assert!(d.is_some(), "{fact}: {:?}", c.host_diffs);
        }
        // Two files of one campaign show none of them.
        let c = compare(&same, 0.02, None).unwrap();
        assert!(
            c.host_diffs.iter().all(|d| !d.fact.starts_with("VM ")),
            "{:?}",
            c.host_diffs
        );
    }
}
