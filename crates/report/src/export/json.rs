//! JSON: any document as it serializes (the result files' own schema), pretty, with a trailing newline.

use serde::Serialize;

use super::Exporter;

/// The JSON exporter.
#[derive(Debug, Clone, Copy)]
pub struct Json;

impl<T: Serialize> Exporter<T> for Json {
    fn export(&self, doc: &T) -> String {
        crate::json(doc)
    }
}
