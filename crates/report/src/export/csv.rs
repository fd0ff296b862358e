//! CSV: the comparison, one row per (cell, metric, input).

use super::Exporter;
use compare::Comparison;

/// The CSV exporter.
#[derive(Debug, Clone, Copy)]
pub struct Csv;

impl Exporter<Comparison> for Csv {
    fn export(&self, c: &Comparison) -> String {
        csv(c)
    }
}

/// CSV, one row per (cell, metric, input).
fn csv(c: &Comparison) -> String {
    // A newline in a cell's key would split its record.
    let c = &crate::compare_view::shown(c);
    let mut o = String::from("against,cell,metric,a,a_min,a_max,b,b_min,b_max,change_pct,ratio,ci_lo,ci_hi,mann_whitney_p,significant,regression\n");
    let q = |s: &str| {
        if s.contains([',', '"']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    for r in &c.rows {
        o.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{:.4},{:.6},{:.6},{:.6},{:.6},{},{}\n",
            r.against,
            q(&r.cell),
            q(&r.metric),
            r.a,
            r.a_range.0,
            r.a_range.1,
            r.b,
            r.b_range.0,
            r.b_range.1,
            r.change_pct,
            r.ratio,
            r.ci_lo,
            r.ci_hi,
            r.mann_whitney_p,
            r.significant,
            r.regression
        ));
    }
    o
}
