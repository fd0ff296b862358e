//! Every result file kept in docs/results loads through the typed loader, and the loader refuses what it
//! cannot read with a typed error.

use std::path::{Path, PathBuf};

use results::{Document, Kind, LoadError};

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
        let cells = doc.cells().expect("a result");
        assert!(!cells.is_empty(), "{}", p.display());
        assert_eq!(doc.envelope().unwrap().kind, doc.kind().name());
    }
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
