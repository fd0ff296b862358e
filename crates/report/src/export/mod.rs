//! Exporters, in the manner of hyperfine's `src/export/`: one [`Exporter`] trait, one module per format
//! (text table, Markdown, CSV, JSON, Prometheus, HTML), each implementing it for the documents that format
//! applies to, and one [`Format`] enum that every command's `--format` names. [`export`] is the one path
//! from a command's typed document to its text: the document says which formats it has ([`Export`], one
//! `exports!` line per document type below), the format's exporter renders it. The table-like formats
//! share `markup` (alignment, numbers) and the comparison's parts below (its header, the cells of a row).

use results::check::CheckDoc;
use results::diagnose::DiagnoseResult;
use results::hugepages::HugepagesDoc;
use results::latency::LatencyResult;
use results::lock::LockResult;
use results::net::NetResult;
use results::pg::PgResult;
use results::sim::SimResult;

use crate::markup::Style;
use compare::{Comparison, Row};
use results::host::fleet::Fleet;
use results::metrics::{Metric, Unit};
use stats::fmt::sig3;

mod csv;
mod html;
mod json;
mod markdown;
mod prometheus;
mod table;

pub use self::csv::Csv;
pub use self::html::{Html, Page, Skipped};
pub use self::json::Json;
pub use self::markdown::Markdown;
pub use self::prometheus::Prometheus;
pub use self::table::Table;

/// Renders a typed document `T` in one format.
pub trait Exporter<T: ?Sized> {
    /// The document as this format's text.
    fn export(&self, doc: &T) -> String;
}

/// Every output format of every command; a command offers those that apply to its document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Aligned text (coloured on a terminal where the document has colour).
    Table,
    /// Markdown tables.
    Markdown,
    /// CSV, one row per record (where it applies).
    Csv,
    /// Pretty JSON (the document itself: the result files' schema).
    Json,
    /// Prometheus text exposition (the audit, for node_exporter's textfile collector).
    Prometheus,
    /// One self-contained HTML page.
    Html,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 6] = [
        Format::Table,
        Format::Markdown,
        Format::Csv,
        Format::Json,
        Format::Prometheus,
        Format::Html,
    ];

    /// The name a command line gives it (`--format markdown`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Markdown => "markdown",
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Prometheus => "prometheus",
            Format::Html => "html",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Format, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
                format!("{s}: one of {}", names.join(", "))
            })
    }
}

/// How the text formats lay a document out: colour and the width to wrap in (the table format; the others
/// ignore it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Colour or not.
    pub style: Style,
    /// Columns to lay text out in.
    pub width: usize,
}

impl Default for Layout {
    /// No colour, 80 columns.
    fn default() -> Layout {
        Layout {
            style: Style { color: false },
            width: 80,
        }
    }
}

/// A document some formats apply to: its text in `format`, or None where the format does not apply.
pub trait Export {
    /// The formats this document has.
    const FORMATS: &'static [Format];

    /// The document in `format`, laid out by `layout`; None when the format is not in [`Export::FORMATS`].
    fn export(&self, format: Format, layout: &Layout) -> Option<String>;
}

/// `doc` in `format`; None when the format does not apply to it (CSV of a bench result). The one path
/// from a command's result to its output.
pub fn export<T: Export>(format: Format, layout: &Layout, doc: &T) -> Option<String> {
    doc.export(format, layout)
}

/// The exporter of a format, laid out by `layout` where the format has a layout.
macro_rules! exporter {
    (Table, $l:expr) => {
        Table(*$l)
    };
    ($f:ident, $l:expr) => {{
        let _ = $l;
        $f
    }};
}

/// Implements [`Export`] for a document type over the formats listed, each rendered by its exporter.
macro_rules! exports {
    ($t:ty: $($f:ident),+) => {
        impl Export for $t {
            const FORMATS: &'static [Format] = &[$(Format::$f),+];

            fn export(&self, format: Format, layout: &Layout) -> Option<String> {
                $(if format == Format::$f {
                    return Some(exporter!($f, layout).export(self));
                })+
                None
            }
        }
    };
}

exports!(Comparison: Table, Markdown, Csv, Json);
exports!(LockResult: Table, Markdown, Json);
exports!(PgResult: Table, Markdown, Json);
exports!(LatencyResult: Table, Markdown, Json);
exports!(NetResult: Table, Markdown, Json);
exports!(SimResult: Table, Markdown, Json);
exports!(results::host::Audit: Table, Json, Prometheus);
exports!(CheckDoc: Table, Json);
exports!(HugepagesDoc: Table, Json);
exports!(Fleet: Table, Markdown, Json, Html);
exports!(Page: Html);
exports!(DiagnoseResult: Table, Markdown, Json, Prometheus);

pub(crate) fn show(v: f64, metric: &str) -> String {
    match Metric::named(metric).map(|m| m.unit) {
        Some(Unit::Rate) => stats::fmt::rate(v),
        Some(Unit::Ns) => stats::fmt::ns(v),
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
    for caveat in &c.caveats {
        o.push_str(&match md {
            true => format!("\n> **Caution:** {caveat}\n"),
            false => format!("\ncaution: {}\n", crate::markup::wrap(caveat, 110, 9, 2)),
        });
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
    use compare::{run, Options};
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
        let l = Layout::default();
        for (name, format) in [
            ("table", Format::Table),
            ("markdown", Format::Markdown),
            ("csv", Format::Csv),
        ] {
            insta::assert_snapshot!(format!("compare-{name}"), export(format, &l, &c).unwrap());
        }
        assert!(export(Format::Json, &l, &c)
            .unwrap()
            .contains("\"welch_p\""));
        assert_eq!(export(Format::Prometheus, &l, &c), None);
        // A bench result has no CSV form.
        let Document::Lock(r) = &docs[0].1 else {
            panic!("a lock result")
        };
        assert_eq!(export(Format::Csv, &l, r), None);
        assert_eq!(
            export(Format::Table, &l, r).unwrap(),
            crate::lock_table::render(r)
        );
    }
}
