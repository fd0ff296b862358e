//! Exporters, in the manner of hyperfine's `src/export/`: one [`Exporter`] trait, one module per format
//! (text table, Markdown, CSV, JSON, HTML), each implementing it for the documents that format applies to. The
//! table-like formats share `markup` (alignment, numbers) and the comparison's parts below (its header,
//! the cells of a row). [`export`] picks the format's exporter.

use crate::compare::{Comparison, Metric, Row, Unit};
use crate::markup::sig3;

mod csv;
mod html;
mod json;
mod markdown;
mod table;

pub use self::csv::Csv;
pub use self::html::Html;
pub use self::json::Json;
pub use self::markdown::Markdown;
pub use self::table::Table;

/// Renders a typed document `T` in one format.
pub trait Exporter<T: ?Sized> {
    /// The document as this format's text.
    fn export(&self, doc: &T) -> String;
}

/// The output formats of the results and the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned text.
    Table,
    /// A Markdown table.
    Markdown,
    /// CSV, one row per record (where it applies).
    Csv,
    /// Pretty JSON (the document itself).
    Json,
}

/// A document in `format`; `None` when the format does not apply to it (CSV of a bench result).
pub fn export<T>(format: Format, doc: &T) -> Option<String>
where
    Table: Exporter<T>,
    Markdown: Exporter<T>,
    Json: Exporter<T>,
    T: MaybeCsv,
{
    Some(match format {
        Format::Table => Table.export(doc),
        Format::Markdown => Markdown.export(doc),
        Format::Json => Json.export(doc),
        Format::Csv => return doc.csv(),
    })
}

/// Documents with a CSV form say so; the others have none.
pub trait MaybeCsv {
    /// The CSV form, if the document has one.
    fn csv(&self) -> Option<String> {
        None
    }
}

impl MaybeCsv for Comparison {
    fn csv(&self) -> Option<String> {
        Some(Csv.export(self))
    }
}
impl MaybeCsv for results::lock::LockResult {}
impl MaybeCsv for results::pg::PgResult {}
impl MaybeCsv for results::latency::LatencyResult {}
impl MaybeCsv for results::net::NetResult {}
impl MaybeCsv for results::sim::SimResult {}
impl MaybeCsv for results::diagnose::DiagnoseResult {}

pub(crate) fn show(v: f64, metric: &str) -> String {
    match Metric::named(metric).map(|m| m.unit) {
        Some(Unit::Rate) => crate::lock_table::rate(v),
        Some(Unit::Ns) => crate::lock_table::ns(v),
        _ => sig3(v),
    }
}

pub(crate) fn marker(r: &Row) -> &'static str {
    match (r.significant, r.regression) {
        (true, true) => "worse",
        (true, false) => "better",
        _ => "",
    }
}

pub(crate) fn header(c: &Comparison, md: bool) -> String {
    let mut o = String::new();
    let b = |s: &str| {
        if md {
            format!("**{s}**")
        } else {
            s.to_string()
        }
    };
    for (i, l) in c.inputs.iter().enumerate() {
        o.push_str(&format!(
            "{} {}: {l}\n",
            if md { "-" } else { " " },
            (b'A' + i as u8) as char
        ));
    }
    o.push('\n');
    o.push_str(&b("Host facts that differ"));
    o.push('\n');
    if c.host_diffs.is_empty() {
        o.push_str("  none\n");
    }
    for d in &c.host_diffs {
        o.push_str(&format!(
            "{} {}: {}\n",
            if md { "-" } else { " " },
            d.fact,
            d.values.join(" | ")
        ));
    }
    o.push('\n');
    o.push_str(&b("Spec and cells that differ"));
    o.push('\n');
    if c.spec_diffs.is_empty() {
        o.push_str("  none\n");
    }
    for d in &c.spec_diffs {
        o.push_str(&format!(
            "{} {}: {}\n",
            if md { "-" } else { " " },
            d.fact,
            d.values.join(" | ")
        ));
    }
    for u in &c.unmatched {
        o.push_str(&format!("{} unmatched: {u}\n", if md { "-" } else { " " }));
    }
    o.push('\n');
    o
}

pub(crate) fn cells_of(r: &Row) -> Vec<String> {
    vec![
        r.cell.clone(),
        r.metric.clone(),
        format!(
            "{} ({}..{})",
            show(r.a, &r.metric),
            show(r.a_range.0, &r.metric),
            show(r.a_range.1, &r.metric)
        ),
        format!(
            "{} ({}..{})",
            show(r.b, &r.metric),
            show(r.b_range.0, &r.metric),
            show(r.b_range.1, &r.metric)
        ),
        if r.change_pct.is_finite() {
            format!("{:+.1}%", r.change_pct)
        } else {
            "-".into()
        },
        if r.ci_lo.is_finite() {
            format!("[{:.3}, {:.3}]", r.ci_lo, r.ci_hi)
        } else {
            "-".into()
        },
        marker(r).to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{run, Options};
    use results::Document;

    fn load(rel: &str) -> (String, Document) {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(rel);
        let doc = Document::from_text(&std::fs::read_to_string(&p).unwrap()).unwrap();
        (rel.to_string(), doc)
    }

    /// Every format of a comparison of two real runs (GUIDE's compare example), snapshot-tested.
    #[test]
    fn comparison_in_every_format() {
        let docs = [
            load("docs/results/bench-lock-start-age-probe-young.json"),
            load("docs/results/bench-lock-start-age-probe-uniform.json"),
        ];
        let opts = Options {
            noise: 0.02,
            metrics: Some(vec![
                "ops/s".into(),
                "faults/op".into(),
                "acquire p99".into(),
            ]),
            ..Options::default()
        };
        let c = run(&docs, &opts).unwrap();
        for (name, format) in [
            ("table", Format::Table),
            ("markdown", Format::Markdown),
            ("csv", Format::Csv),
        ] {
            insta::assert_snapshot!(format!("compare-{name}"), export(format, &c).unwrap());
        }
        assert!(export(Format::Json, &c).unwrap().contains("\"welch_p\""));
        // A bench result has no CSV form.
        let Document::Lock(r) = &docs[0].1 else {
            panic!("a lock result")
        };
        assert_eq!(export(Format::Csv, r), None);
        assert_eq!(
            export(Format::Table, r).unwrap(),
            crate::lock_table::render(r)
        );
    }

    /// The fleet's Markdown and HTML exporters are its section renderers, on a fixture host's audit.
    #[test]
    fn fleet_in_markdown_and_html() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/linux-7.0-lazy-debugfs");
        let audit = hostfacts::audit(&hostfacts::Host::at(root), &[]);
        let f = crate::fleet::of_audits(&[("a.json", &audit)]);
        let html = Html.export(&f);
        assert_eq!(html, crate::fleet_table::html(&f));
        assert!(html.contains('<'), "{html}");
        assert_eq!(Markdown.export(&f), crate::fleet_table::markdown(&f));
    }
}
