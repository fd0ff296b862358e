//! Markdown: the comparison, the fleet, and every bench and sim result.

use results::diagnose::DiagnoseResult;
use results::latency::LatencyResult;
use results::lock::LockResult;
use results::net::NetResult;
use results::pg::PgResult;
use results::sim::SimResult;

use super::{cells_of, header, Exporter};
use compare::Comparison;
use results::host::fleet::Fleet;

/// The Markdown exporter.
#[derive(Debug, Clone, Copy)]
pub struct Markdown;

impl Exporter<Comparison> for Markdown {
    fn export(&self, c: &Comparison) -> String {
        markdown(c)
    }
}

impl Exporter<Fleet> for Markdown {
    fn export(&self, f: &Fleet) -> String {
        crate::fleet_table::markdown(&crate::markup::shown_all(f))
    }
}

impl Exporter<DiagnoseResult> for Markdown {
    fn export(&self, r: &DiagnoseResult) -> String {
        format!(
            "```\n{}```\n",
            crate::diagnose_table::render(r, crate::Style { color: false }, 100)
        )
    }
}

impl Exporter<LockResult> for Markdown {
    fn export(&self, r: &LockResult) -> String {
        crate::lock_table::markdown(r)
    }
}

impl Exporter<PgResult> for Markdown {
    fn export(&self, r: &PgResult) -> String {
        crate::pg_table::markdown(r)
    }
}

impl Exporter<LatencyResult> for Markdown {
    fn export(&self, r: &LatencyResult) -> String {
        crate::latency_table::render(r, true)
    }
}

impl Exporter<NetResult> for Markdown {
    fn export(&self, r: &NetResult) -> String {
        crate::net_table::render(r, true)
    }
}

impl Exporter<SimResult> for Markdown {
    fn export(&self, r: &SimResult) -> String {
        crate::sim_table::render(r, true)
    }
}

/// The comparison as Markdown: one table, a column naming the input set against the first.
fn markdown(c: &Comparison) -> String {
    let c = &crate::compare_view::shown(c);
    let mut o = header(c, true);
    o.push_str("| input | cell | metric | A (min..max) | B (min..max) | change (+ better) | 95% CI of B/A | |\n|---|---|---|---:|---:|---:|---:|---|\n");
    for r in &c.rows {
        // A `|` in a cell's key would end its column.
        let cs: Vec<String> = cells_of(r).iter().map(|s| s.replace('|', "\\|")).collect();
        o.push_str(&format!(
            "| {} | {} |\n",
            (b'A' + (r.against - 1) as u8) as char,
            cs.join(" | ")
        ));
    }
    o
}
