//! HTML: the report page of many result files ([`Page`], laid out by `html::render`) and the fleet's
//! section.

use super::Exporter;
use crate::html::Doc;
use results::host::fleet::Fleet;

/// The HTML exporter.
#[derive(Debug, Clone, Copy)]
pub struct Html;

/// The report page: documents with their labels, the fleet's answer over their audits (when there are
/// several), and when the page was made.
pub struct Page {
    /// The documents, in the page's order.
    pub docs: Vec<Doc>,
    /// The fleet's answer over the documents' audits (`hostfacts::fleet::of_audits`), when there are two or
    /// more.
    pub fleet: Option<Fleet>,
    /// When the page was made (UTC, as the envelope spells it).
    pub generated_utc: String,
}

impl Exporter<Page> for Html {
    fn export(&self, p: &Page) -> String {
        crate::html::render(&p.docs, p.fleet.as_ref(), &p.generated_utc)
    }
}

impl Exporter<Fleet> for Html {
    fn export(&self, f: &Fleet) -> String {
        crate::fleet_table::html(f)
    }
}
