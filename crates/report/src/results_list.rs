//! `preemptlab results`: one line per result file (start time, kind, cells that ran, interrupted), oldest
//! first.

use results::Document;

use crate::markup::{columns, Align};

/// The listing of `docs` (each with its file name), then one line per file in `unread` (name, why) that
/// could not be read or parsed. Documents without an envelope or cells (audits, fleet answers) are left
/// out.
pub fn render(docs: &[(String, Document)], unread: &[(String, String)]) -> String {
    let mut rows: Vec<Vec<String>> = docs
        .iter()
        .filter_map(|(file, doc)| {
            let (env, cells) = (doc.envelope()?, doc.cells()?);
            let ok = cells
                .iter()
                .filter(|c| c.status == results::Status::Ok)
                .count();
            Some(vec![
                crate::markup::shown(&env.started_utc),
                crate::markup::shown(env.kind.name()),
                format!("{ok}/{}", cells.len()),
                if env.interrupted {
                    "interrupted".into()
                } else {
                    String::new()
                },
                crate::markup::shown(file),
            ])
        })
        .collect();
    rows.sort();
    let mut out = columns(
        &["started (UTC)", "kind", "cells ok", "", "file"],
        &[Align::Left; 5],
        &rows,
        0,
        160,
    );
    for (file, why) in unread {
        let (file, why) = (crate::markup::shown(file), crate::markup::shown(why));
        out.push_str(&format!("not read: {file}: {why}\n"));
    }
    out
}
