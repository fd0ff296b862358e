//! Every result file kept in docs/results loads through the typed loader, its axes (locks, page backings,
//! counts, policies, loads, tests, settings, drivers, the model's choices) read as their types and are
//! written back with the spelling the file has, and the loader refuses what it cannot read with a typed
//! error.

use std::path::{Path, PathBuf};

use results::{Document, Kind, LoadError};
use serde_json::Value;

/// Every `*.json` under docs/results, subdirectories included (the VM campaign's sets), but the
/// `compare --format json` outputs kept beside them (`ratios-*.json`), which are no results.
fn result_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if p.is_dir() {
                walk(&p, files);
            } else if name.ends_with(".json") && !name.starts_with("ratios-") {
                files.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/results"),
        &mut files,
    );
    files.sort();
    files
}

#[test]
fn every_documented_result_file_loads() {
    let files = result_files();
    assert!(files.len() >= 150, "{} files", files.len());
    for p in files {
        let text = std::fs::read_to_string(&p).unwrap();
        let doc = Document::from_text(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        // An audit kept beside a campaign's results (the host or guest it ran on) has no envelope and
        // no cells.
        if doc.kind() == Kind::Audit {
            continue;
        }
        assert_eq!(doc.envelope().unwrap().kind, doc.kind());
        let cells = doc.cells().expect("a result");
        assert!(!cells.is_empty(), "{}", p.display());
    }
}

/// The axis fields of a result as JSON, by path: the spec's lists and choices and every cell's keys.
fn axis_fields(kind: Kind, v: &Value) -> Vec<(String, Value)> {
    let (spec, cell): (&[&str], &[&str]) = match kind {
        Kind::BenchLock => (
            &[
                "locks",
                "pages",
                "workers_given",
                "start_age",
                "reconnect_every_given",
            ],
            &["lock", "pages"],
        ),
        Kind::BenchLatency => (&["policies", "loads"], &["policy", "load"]),
        Kind::BenchNet => (&["tests"], &["test", "path"]),
        Kind::BenchPg => (
            &[
                "huge_pages",
                "clients_given",
                "driver",
                "pooler",
                "protocol",
                "pss",
            ],
            &["huge_pages"],
        ),
        Kind::Sim => (&[], &["model", "lock", "pages"]),
        _ => (&[], &[]),
    };
    let mut out = Vec::new();
    for f in spec {
        if let Some(x) = v["spec"].get(f) {
            out.push((format!("spec.{f}"), x.clone()));
        }
    }
    if kind == Kind::Sim {
        for f in ["model", "lock", "pages", "workload"] {
            if let Some(x) = v["spec"]["params"].get(f) {
                out.push((format!("spec.params.{f}"), x.clone()));
            }
        }
    }
    for (i, c) in v["cells"].as_array().into_iter().flatten().enumerate() {
        for f in cell {
            out.push((format!("cells[{i}].{f}"), c[f].clone()));
        }
    }
    out
}

/// A matrix document as JSON again; None for the documents without axes (audit, check, diagnose, ...).
fn to_json(doc: &Document) -> Option<Value> {
    let v = match doc {
        Document::Lock(r) => serde_json::to_value(r),
        Document::Pg(r) => serde_json::to_value(r),
        Document::Latency(r) => serde_json::to_value(r),
        Document::Net(r) => serde_json::to_value(r),
        Document::Sim(r) => serde_json::to_value(r),
        _ => return None,
    };
    Some(v.unwrap())
}

#[test]
fn axes_load_typed_and_keep_their_spelling() {
    let mut typed = 0;
    for p in result_files() {
        let text = std::fs::read_to_string(&p).unwrap();
        let doc = Document::from_text(&text).unwrap();
        let Some(after) = to_json(&doc) else {
            continue;
        };
        let before = serde_json::from_str::<Value>(&text).unwrap();
        let (a, b) = (
            axis_fields(doc.kind(), &before),
            axis_fields(doc.kind(), &after),
        );
        // Every axis value the file has reads back as written (fields it lacks get their defaults).
        for f in &a {
            assert!(b.contains(f), "{}: {} {}", p.display(), f.0, f.1);
        }
        typed += a.len();
        // Every cell's values are among the spec's own, as types.
        match &doc {
            Document::Lock(r) => {
                assert_eq!(r.spec.workers_given.len(), r.spec.workers.len());
                for c in &r.cells {
                    assert!(r.spec.locks.contains(&c.lock), "{}", p.display());
                    assert!(r.spec.pages.contains(&c.pages), "{}", p.display());
                }
            }
            Document::Latency(r) => {
                for c in &r.cells {
                    assert!(r.spec.policies.contains(&c.policy), "{}", p.display());
                    assert!(r.spec.loads.contains(&c.load), "{}", p.display());
                }
            }
            Document::Net(r) => {
                for c in &r.cells {
                    assert!(r.spec.tests.contains(&c.test), "{}", p.display());
                    let path = match r.spec.netns {
                        true => axes::NetPath::Netns,
                        false => axes::NetPath::Loopback,
                    };
                    assert_eq!(c.path, path, "{}", p.display());
                }
            }
            Document::Pg(r) => {
                for c in &r.cells {
                    assert!(r.spec.huge_pages.contains(&c.huge_pages), "{}", p.display());
                }
            }
            _ => {}
        }
    }
    assert!(typed > 1000, "{typed} axis values");
    // One file of each bench, read as the values a person typed.
    let load = |name: &str| {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/results")
            .join(name);
        Document::from_text(&std::fs::read_to_string(p).unwrap()).unwrap()
    };
    use axes::*;
    let Document::Lock(r) = load("bench-lock-bars-v5-run1.json") else {
        panic!("bench lock")
    };
    use LockKind::*;
    assert_eq!(r.spec.locks, [Pg, Futex, Pthread, Adaptive]);
    assert_eq!(r.spec.pages, [Backing::Page4k, Backing::Hugetlb2m]);
    assert_eq!(r.spec.workers_given[1], Count::PerCpu(4.0));
    // Written before start ages were recorded: all young, as then.
    assert_eq!(r.spec.start_age, StartAge::Young);
    let Document::Lock(r) = load("bench-lock-start-age-probe-uniform.json") else {
        panic!("bench lock")
    };
    assert_eq!(r.spec.start_age, StartAge::Uniform);
    assert_eq!(r.spec.reconnect_every_given, ReconnectGiven::Auto);
    let Document::Latency(r) = load("bench-latency-default.json") else {
        panic!("bench latency")
    };
    assert_eq!(r.spec.policies, [Policy::Other, Policy::Fifo]);
    assert_eq!(r.spec.loads, [Load::Idle, Load::Lock]);
    let Document::Net(r) = load("bench-net-netns.json") else {
        panic!("bench net")
    };
    assert!(r.cells.iter().all(|c| c.path == NetPath::Netns));
    let Document::Pg(r) = load("bench-pg-bar.json") else {
        panic!("bench pg")
    };
    assert_eq!(
        (r.spec.driver, r.spec.pooler, r.spec.protocol, r.spec.pss),
        (Driver::Pgbench, None, Protocol::Prepared, PssWhen::End)
    );
    assert_eq!(r.spec.huge_pages, [HugePages::Off, HugePages::On]);
    let Document::Sim(r) = load("sim-96cpu-txn-adaptive.json") else {
        panic!("sim")
    };
    assert_eq!(r.spec.params.workload, model::Workload::Txn);
    assert!(r.cells.iter().all(|c| c.pages == model::Pages::P4k));
    let models: Vec<model::Model> = r.cells.iter().map(|c| c.model).collect();
    assert!(models.contains(&model::Model::Lazy) && models.contains(&model::Model::None));
}

#[test]
fn newer_versions_and_unknown_kinds_are_refused() {
    let e = Document::from_text(r#"{"schema_version": 2, "kind": "bench-lock"}"#).unwrap_err();
    assert!(
        matches!(e, LoadError::FutureVersion { found: 2, .. }),
        "{e}"
    );
    let e = Document::from_text(r#"{"schema_version": 1, "kind": "bench-disk"}"#).unwrap_err();
    assert!(
        matches!(e, LoadError::UnknownKind(ref k) if k == "bench-disk"),
        "{e}"
    );
    let e = Document::from_text(r#"{"cells": []}"#).unwrap_err();
    assert!(matches!(e, LoadError::NoSchemaVersion), "{e}");
    let e = Document::from_text("nope").unwrap_err();
    assert!(matches!(e, LoadError::NotJson(_)), "{e}");
    let e = Document::from_text(r#"{"schema_version": 1, "kind": "bench-pg", "cells": []}"#)
        .unwrap_err();
    assert!(
        matches!(
            e,
            LoadError::Shape {
                kind: Kind::BenchPg,
                ..
            }
        ),
        "{e}"
    );
}
