//! Prometheus text exposition: the audit, for node_exporter's textfile collector (`prometheus::render`).

use super::Exporter;

/// The Prometheus exporter.
#[derive(Debug, Clone, Copy)]
pub struct Prometheus;

impl Exporter<results::host::Audit> for Prometheus {
    fn export(&self, a: &results::host::Audit) -> String {
        crate::prometheus::render(a)
    }
}
