//! Result files (JSON of every kind) through the loader `compare`, `report` and `results` use
//! (`results::Document::from_text`: UTF-8 text, then the typed document of its kind), then `compare`,
//! `compare --by` and `report`'s HTML page.
#![no_main]
use compare::{By, Input};
use libfuzzer_sys::fuzz_target;
use report::export::{export, Format, Layout};
use results::Document;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(doc) = Document::from_text(text) else {
        return;
    };
    let (Ok(a), Ok(b)) = (Input::new("a.json", &doc), Input::new("b.json", &doc)) else {
        return;
    };
    if let Ok(c) = compare::compare(&[a.clone(), b], 0.02, None) {
        // A file set against itself differs in nothing.
        assert!(!c.has_regression());
        for f in [Format::Table, Format::Markdown, Format::Csv, Format::Json] {
            let _ = export(f, &Layout::default(), &c);
        }
    }
    // A file against a copy of itself: the preemption split pools the two and finds one model.
    for by in ["lock", "pages", "huge_pages", "preempt"] {
        if let Ok(split) = compare::split(&[a.clone(), a.clone()], &By::parse(by), None) {
            if let Ok(c) = compare::compare(&split, 0.02, None) {
                let _ = export(Format::Table, &Layout::default(), &c);
            }
        }
    }
    let _ = report::html::render(
        &[report::html::Doc {
            label: "a.json".into(),
            doc,
        }],
        None,
        "2026-11-22 00:00:00",
    );
});
