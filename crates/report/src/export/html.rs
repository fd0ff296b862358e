//! HTML: the report page of many result files ([`Page`], laid out by `html::render`) and the fleet's
//! section.

use super::Exporter;
use crate::html::Doc;
use results::host::fleet::Fleet;

/// The HTML exporter.
#[derive(Debug, Clone, Copy)]
pub struct Html;

/// A file the page does not show, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The file as found.
    pub file: String,
    /// Why it is not shown (not a result file, unreadable, a newer schema).
    pub reason: String,
}

/// The report page: documents with their labels, the fleet's answer over their audits (when there are
/// several), when the page was made, and the files it skipped.
pub struct Page {
    /// The documents, in the page's order.
    pub docs: Vec<Doc>,
    /// The fleet's answer over the documents' audits (`hostfacts::fleet::of_audits`), when there are two or
    /// more.
    pub fleet: Option<Fleet>,
    /// When the page was made (UTC, as the envelope spells it).
    pub generated_utc: String,
    /// Files found but not shown, each with the reason.
    pub skipped: Vec<Skipped>,
}

impl Exporter<Page> for Html {
    fn export(&self, p: &Page) -> String {
        crate::page::render(p)
    }
}

impl Exporter<Fleet> for Html {
    fn export(&self, f: &Fleet) -> String {
        crate::fleet_table::html(f)
    }
}
