//! Prometheus text exposition: the audit and the diagnosis, for node_exporter's textfile collector
//! (`prometheus::render`, `diagnose_prom::render`).

use super::Exporter;

/// The Prometheus exporter.
#[derive(Debug, Clone, Copy)]
pub struct Prometheus;

impl Exporter<results::host::Audit> for Prometheus {
    fn export(&self, a: &results::host::Audit) -> String {
        crate::prometheus::render(a)
    }
}

impl Exporter<results::diagnose::DiagnoseResult> for Prometheus {
    fn export(&self, d: &results::diagnose::DiagnoseResult) -> String {
        crate::diagnose_prom::render(d)
    }
}
