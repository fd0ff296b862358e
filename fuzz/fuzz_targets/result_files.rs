//! Result files (JSON of every kind) through the loader `compare`, `report` and `results` use
//! (`results::Document::from_text`: UTF-8 text, then the typed document of its kind), then `compare`,
//! `compare --by` and `report`'s HTML page.
#![no_main]
use libfuzzer_sys::fuzz_target;
use report::compare::{self, Input};
use results::Document;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(doc) = Document::from_text(text) else { return };
    let (Ok(a), Ok(b)) = (Input::new("a.json", &doc), Input::new("b.json", &doc)) else {
        return;
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
            doc,
        }],
        "2026-11-22 00:00:00",
    );
});
