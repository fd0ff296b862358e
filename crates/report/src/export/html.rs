//! HTML, where a document has a form of its own in the report page: the fleet's section. (The page of
//! result files is `html::render`, which lays out many documents at once.)

use super::Exporter;
use crate::fleet::Fleet;

/// The HTML exporter.
#[derive(Debug, Clone, Copy)]
pub struct Html;

impl Exporter<Fleet> for Html {
    fn export(&self, f: &Fleet) -> String {
        crate::fleet_table::html(f)
    }
}
