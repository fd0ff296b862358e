//! Aligned text: the comparison, every bench and sim result, the audit, the check, the hugepages plans and
//! the fleet (their tables in `*_table`, `check`, `hugepages`).

use results::check::CheckDoc;
use results::diagnose::DiagnoseResult;
use results::hugepages::HugepagesDoc;
use results::latency::LatencyResult;
use results::lock::LockResult;
use results::net::NetResult;
use results::pg::PgResult;
use results::sim::SimResult;

use super::{cells_of, header, Exporter, Layout};
use crate::markup::{columns, shown_all, Align};
use compare::Comparison;
use results::host::fleet::Fleet;

/// The text table exporter, laid out in its [`Layout`] (colour and width, where a document has them).
#[derive(Debug, Clone, Copy)]
pub struct Table(pub Layout);

impl Exporter<results::host::Audit> for Table {
    fn export(&self, a: &results::host::Audit) -> String {
        // A captured host's (--sysroot) strings are shown, never sent to the terminal.
        crate::audit_table::render(&shown_all(a), self.0.style, self.0.width)
    }
}

impl Exporter<CheckDoc> for Table {
    fn export(&self, d: &CheckDoc) -> String {
        crate::check::render(d, self.0.style, self.0.width)
    }
}

impl Exporter<HugepagesDoc> for Table {
    fn export(&self, d: &HugepagesDoc) -> String {
        d.plans
            .iter()
            .map(|s| crate::hugepages::render_sized(s, self.0.style, self.0.width))
            .collect()
    }
}

impl Exporter<Fleet> for Table {
    fn export(&self, f: &Fleet) -> String {
        // Every string came from an audit file another host wrote.
        crate::fleet_table::render(&shown_all(f), self.0.style, self.0.width)
    }
}

impl Exporter<Comparison> for Table {
    fn export(&self, c: &Comparison) -> String {
        table(c)
    }
}

impl Exporter<LockResult> for Table {
    fn export(&self, r: &LockResult) -> String {
        crate::lock_table::render(r)
    }
}

impl Exporter<PgResult> for Table {
    fn export(&self, r: &PgResult) -> String {
        crate::pg_table::render(r)
    }
}

impl Exporter<LatencyResult> for Table {
    fn export(&self, r: &LatencyResult) -> String {
        crate::latency_table::render(r, false)
    }
}

impl Exporter<NetResult> for Table {
    fn export(&self, r: &NetResult) -> String {
        crate::net_table::render(r, false)
    }
}

impl Exporter<SimResult> for Table {
    fn export(&self, r: &SimResult) -> String {
        crate::sim_table::render(r, false)
    }
}

impl Exporter<DiagnoseResult> for Table {
    fn export(&self, r: &DiagnoseResult) -> String {
        crate::diagnose_table::render(r, self.0.style, self.0.width)
    }
}

/// The comparison as text: one table per input set against the first.
fn table(c: &Comparison) -> String {
    let c = &crate::compare_view::shown(c);
    let mut o = header(c, false);
    o.push_str(&format!(
        "change: + is better; CI: 95% bootstrap interval of the ratio B/A; marked when it clears 1 by more than {:.0}%\n\n",
        c.noise * 100.0
    ));
    for k in 2..=c.inputs.len() {
        if c.inputs.len() > 2 {
            o.push_str(&format!("{} against A\n", (b'A' + (k - 1) as u8) as char));
        }
        let rows: Vec<Vec<String>> = c
            .rows
            .iter()
            .filter(|r| r.against == k)
            .map(cells_of)
            .collect();
        o.push_str(&columns(
            &[
                "cell",
                "metric",
                "A (min..max)",
                "B (min..max)",
                "change",
                "CI of B/A",
                "",
            ],
            &[
                Align::Left,
                Align::Left,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Right,
                Align::Left,
            ],
            &rows,
            0,
            200,
        ));
    }
    o
}
