//! `compare`'s [`Comparison`] as the text formats show it.

use compare::{Comparison, FactDiff, Row};

use crate::markup::shown as shown_str;

/// The comparison with every string from its inputs (file names, host facts such as a host name or a
/// data directory, spec values, cell keys) [`crate::markup::shown`]: what the text formats lay out, as
/// `fleet`, `audit` and `results` do, so that a result file from another host cannot drive the
/// terminal or split a row (issue 46 item 2).
pub fn shown(c: &Comparison) -> Comparison {
    let diffs = |ds: &[FactDiff]| -> Vec<FactDiff> {
        ds.iter()
            .map(|d| FactDiff {
                fact: shown_str(&d.fact),
                values: d.values.iter().map(|v| shown_str(v)).collect(),
            })
            .collect()
    };
    Comparison {
        inputs: c.inputs.iter().map(|i| shown_str(i)).collect(),
        host_diffs: diffs(&c.host_diffs),
        spec_diffs: diffs(&c.spec_diffs),
        unmatched: c.unmatched.iter().map(|u| shown_str(u)).collect(),
        rows: c
            .rows
            .iter()
            .map(|r| Row {
                cell: shown_str(&r.cell),
                metric: shown_str(&r.metric),
                ..r.clone()
            })
            .collect(),
        ..c.clone()
    }
}
