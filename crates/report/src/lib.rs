//! Rendering only: every command's typed document (from `results`) in one of the formats of
//! [`export::Format`], through the one path [`export::export`]. Decisions are made where their facts are
//! judged (`hostfacts`, `lab::check::judge`, `stats::judge`), not here. Table-like formats share `markup`
//! (alignment, wrapping, colour); figures are shown by `stats::fmt`.

pub mod audit_table;
pub mod check;
pub mod compare_view;
mod diagnose_html;
pub mod diagnose_prom;
pub mod diagnose_table;
mod escape;
pub mod export;
pub mod fleet_table;
pub mod html;
pub mod hugepages;
pub mod latency_table;
pub mod lock_table;
pub mod markup;
pub mod net_table;
pub mod page;
pub mod pg_table;
pub mod prometheus;
pub mod results_list;
mod sim_html;
pub mod sim_table;
pub mod svg;

pub use markup::Style;

/// Serializes any result as pretty JSON with a trailing newline.
pub fn json<T: serde::Serialize>(value: &T) -> String {
    let mut s = serde_json::to_string_pretty(value).expect("result structs serialize");
    s.push('\n');
    s
}
