//! Result files (JSON of every kind) through the loader `compare` and `report` use: the binary's
//! `compare_cmd::load` (UTF-8 text, then JSON), then `compare`, `compare --by` and `report`'s HTML.
//! `load` below is the one line to repoint when the loader moves.
#![no_main]
use libfuzzer_sys::fuzz_target;
use report::compare::{self, Input};
use serde_json::Value;

fn load(data: &[u8]) -> Option<Value> {
    serde_json::from_str(std::str::from_utf8(data).ok()?).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some(doc) = load(data) else { return };
    let a = Input {
        label: "a.json".into(),
        doc: doc.clone(),
    };
    let b = Input {
        label: "b.json".into(),
        doc: doc.clone(),
    };
    if let Ok(c) = compare::compare(&[a.clone(), b], 0.02, None) {
        // A file set against itself differs in nothing.
        assert!(!c.has_regression());
        let _ = (compare::table(&c), compare::markdown(&c), compare::csv(&c));
        let _ = report::json(&c);
    }
    for field in ["lock", "pages", "huge_pages"] {
        if let Ok(split) = compare::split_by(std::slice::from_ref(&a), field, None) {
            if let Ok(c) = compare::compare(&split, 0.02, None) {
                let _ = compare::table(&c);
            }
        }
    }
    let _ = report::html::render(
        &[report::html::Doc {
            label: "a.json".into(),
            value: doc,
        }],
        "2026-11-22 00:00:00",
    );
});
