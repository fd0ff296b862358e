//! Text from result files made safe for an HTML page: escaped for text and attribute values, control and
//! bidirectional formatting characters shown (a page made of other hosts' files shows what they hold and
//! stays valid HTML), and values spelt as the result file spells them. A leaf: every HTML file of this
//! crate uses it, it uses none of them.

use results::host::fact::Fact;
use serde::Serialize;

/// `s` with its control and bidirectional formatting characters shown as escapes
/// ([`crate::markup::shown`]), except the whitespace HTML lays out itself (newline, tab, carriage return):
/// a page made of other hosts' files shows what they hold, and stays valid HTML.
pub(crate) fn shown_in_markup(s: &str) -> String {
    s.split_inclusive(['\n', '\t', '\r'])
        .map(|part| {
            let (body, ws) = match part.char_indices().last() {
                Some((i, '\n' | '\t' | '\r')) => part.split_at(i),
                _ => (part, ""),
            };
            crate::markup::shown(body) + ws
        })
        .collect()
}

/// `s` escaped for HTML text and attribute values, its control characters shown ([`shown_in_markup`]).
pub(crate) fn esc(s: &str) -> String {
    shown_in_markup(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A number or name as the result file spells it (`3.0`, `lazy`, `at-risk`).
pub(crate) fn js<T: Serialize>(v: &T) -> String {
    let t = serde_json::to_string(v).unwrap_or_default();
    t.trim_matches('"').to_string()
}

/// A fact's value, `-` when it could not be read.
pub(crate) fn fact<T: Serialize>(f: &Fact<T>) -> String {
    f.value.as_ref().map(js).unwrap_or_else(|| "-".into())
}
