//! Text layout shared by every table-like format: aligned columns, wrapping to a width, optional colour.

/// ANSI styling that is a no-op when colour is off (not a TTY, `NO_COLOR`, or `--color never`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// True to emit ANSI escape codes.
    pub color: bool,
}

impl Style {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    /// Bold.
    pub fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    /// Red (critical).
    pub fn red(&self, s: &str) -> String {
        self.wrap("1;31", s)
    }
    /// Yellow (warn).
    pub fn yellow(&self, s: &str) -> String {
        self.wrap("33", s)
    }
    /// Green (ok).
    pub fn green(&self, s: &str) -> String {
        self.wrap("32", s)
    }
    /// Dim (sources, notes).
    pub fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }
}

/// `s` with every control character (C0, DEL, C1: a newline, an escape sequence's ESC) and every
/// bidirectional formatting character (which reorders what a terminal shows) written out as an escape
/// (`\n`, `\u{1b}`, `\u{202e}`): shown, never sent. Text from files another host wrote (an audit's host
/// name, a file name) reaches a terminal only through this: a host name holding an escape sequence would
/// otherwise drive the terminal (terminal injection), one holding a newline would split a table row.
pub fn shown(s: &str) -> String {
    if !s.chars().any(needs_showing) {
        return s.to_string();
    }
    s.chars()
        .map(|c| match needs_showing(c) {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

fn needs_showing(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `doc` with every string in it [`shown`]: for a document read from a file (an audit, the fleet answer)
/// before it is laid out as a table or Markdown. Keys and numbers are unchanged; a document that does not
/// come back from its own JSON (never the case for the schema's types) is returned as it was.
pub fn shown_all<T: serde::Serialize + serde::de::DeserializeOwned + Clone>(doc: &T) -> T {
    fn walk(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::String(s) => *s = shown(s),
            serde_json::Value::Array(a) => a.iter_mut().for_each(walk),
            serde_json::Value::Object(o) => o.values_mut().for_each(walk),
            _ => {}
        }
    }
    let Ok(mut v) = serde_json::to_value(doc) else {
        return doc.clone();
    };
    walk(&mut v);
    serde_json::from_value(v).unwrap_or_else(|_| doc.clone())
}

/// Wraps `text` to `width` columns; the first line starts after `first` columns already used, the
/// following ones are indented by `indent` spaces.
pub fn wrap(text: &str, width: usize, first: usize, indent: usize) -> String {
    let mut out = String::new();
    let mut col = first;
    let mut line_has_word = false;
    for word in text.split_whitespace() {
        let w = word.chars().count();
        if line_has_word && col + 1 + w > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
            line_has_word = false;
        }
        if line_has_word {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += w;
        line_has_word = true;
    }
    out
}

/// A fix line's command and its comment: the text before the first ` # ` (all of it when there is none;
/// nothing when the line is a comment), and the comment's words.
pub fn split_command(text: &str) -> (&str, Option<&str>) {
    let t = text.trim();
    if let Some(c) = t.strip_prefix('#') {
        return ("", Some(c.trim()));
    }
    match t.find(" # ") {
        Some(i) => (t[..i].trim_end(), Some(t[i + 3..].trim())),
        None => (t, None),
    }
}

/// A fix line laid out to paste: its command kept whole on one line however long (a command broken across
/// lines fails when pasted), and its comment (` # ...`) wrapped around it to `width`, each continued line a
/// comment of its own (`# `) indented by `indent`. `first` columns are already used on the first line.
pub fn command(text: &str, width: usize, first: usize, indent: usize) -> String {
    let (cmd, comment) = split_command(text);
    let mut out = cmd.to_string();
    let mut col = first + cmd.chars().count();
    let Some(comment) = comment else {
        return out;
    };
    // The comment marker goes with the word after it; a line broken in the comment starts a new comment.
    let mut line_empty = cmd.is_empty();
    let mut marked = false;
    for word in comment.split_whitespace() {
        let w = word.chars().count();
        let mut sep = match (marked, line_empty) {
            (true, _) => " ",
            (false, true) => "# ",
            (false, false) => " # ",
        };
        if !line_empty && col + sep.len() + w > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
            sep = "# ";
        }
        out.push_str(sep);
        out.push_str(word);
        col += sep.len() + w;
        line_empty = false;
        marked = true;
    }
    out
}

/// A label and a value wrapped under it: `  label      value...`.
pub fn field(label: &str, value: &str, width: usize) -> String {
    const LABEL: usize = 14;
    let head = format!("  {label:<w$}", w = LABEL - 2);
    let col = head.chars().count();
    format!("{head}{}\n", wrap(value, width, col, LABEL))
}

/// A label and a command under it (kept whole, its comment wrapped: [`command`]).
pub fn command_field(label: &str, value: &str, width: usize) -> String {
    const LABEL: usize = 14;
    let head = format!("  {label:<w$}", w = LABEL - 2);
    let col = head.chars().count();
    format!("{head}{}\n", command(value, width, col, LABEL))
}

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Left.
    Left,
    /// Right (numbers).
    Right,
}

/// Renders rows as aligned columns; the last column may be truncated to fit `width`.
pub fn columns(
    header: &[&str],
    align: &[Align],
    rows: &[Vec<String>],
    indent: usize,
    width: usize,
) -> String {
    let n = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(n) {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let fixed: usize = indent + widths[..n - 1].iter().map(|w| w + 2).sum::<usize>();
    let last = width.saturating_sub(fixed).max(8);
    let fmt_row = |cells: Vec<String>| -> String {
        let mut line = " ".repeat(indent);
        for (i, c) in cells.iter().enumerate() {
            let is_last = i == n - 1;
            let c = if is_last && c.chars().count() > last {
                let mut t: String = c.chars().take(last.saturating_sub(1)).collect();
                t.push('…');
                t
            } else {
                c.clone()
            };
            let pad = if is_last { 0 } else { widths[i] };
            match align[i] {
                Align::Left => line.push_str(&format!("{c:<pad$}")),
                Align::Right => line.push_str(&format!("{c:>pad$}", pad = widths[i])),
            }
            if !is_last {
                line.push_str("  ");
            }
        }
        line.trim_end().to_string() + "\n"
    };
    let mut out = fmt_row(header.iter().map(|s| s.to_string()).collect());
    for r in rows {
        out.push_str(&fmt_row(r.clone()));
    }
    out
}

/// Rows as a Markdown table: the first `left` columns left-aligned, the rest right-aligned.
pub fn markdown_table<S: AsRef<str>>(header: &[S], rows: &[Vec<String>], left: usize) -> String {
    let cells = |r: &[String]| r.join(" | ");
    let mut o = format!(
        "| {} |\n|{}|\n",
        header
            .iter()
            .map(|h| h.as_ref())
            .collect::<Vec<_>>()
            .join(" | "),
        (0..header.len())
            .map(|i| if i < left { "---" } else { "---:" })
            .collect::<Vec<_>>()
            .join("|")
    );
    for r in rows {
        o.push_str(&format!("| {} |\n", cells(r)));
    }
    o
}

/// A table row for a cell that did not run: its key columns, its status, `blanks` empty figure columns and
/// the reason.
pub fn not_run_row(
    mut keys: Vec<String>,
    status: &impl std::fmt::Debug,
    blanks: usize,
    reason: Option<&str>,
) -> Vec<String> {
    keys.push(format!("{status:?}").to_lowercase());
    keys.extend(std::iter::repeat_n(String::new(), blanks));
    keys.push(reason.unwrap_or_default().to_string());
    keys
}

/// The preemption model a result's header names: the host's, or, when its cells ran under models of their
/// own (`--switch-preempt none,lazy`), those, with the host's own after them.
pub fn preemption(
    host: impl std::fmt::Display,
    cells: impl Iterator<Item = Option<axes::model::Model>>,
) -> String {
    let models = models_in_order(cells);
    if models.is_empty() {
        return host.to_string();
    }
    let names: Vec<&str> = models.iter().map(|m| m.name()).collect();
    format!("{} per cell, the host's own {host}", names.join(" and "))
}

/// The cells' own preemption models, each once, in the order they first appear.
pub fn models_in_order(
    cells: impl Iterator<Item = Option<axes::model::Model>>,
) -> Vec<axes::model::Model> {
    let mut models = Vec::new();
    for m in cells.flatten() {
        if !models.contains(&m) {
            models.push(m);
        }
    }
    models
}

/// The heading of the column [`model_column`] gives.
pub fn model_header(models: bool) -> &'static [&'static str] {
    if models {
        &["preempt"]
    } else {
        &[]
    }
}

/// The `preempt` column a table leads with when its cells ran under models of their own (`models`):
/// the cell's model; else no column.
pub fn model_column(models: bool, m: Option<axes::model::Model>) -> Vec<String> {
    match (models, m) {
        (false, _) => Vec::new(),
        (true, m) => vec![m.map_or("-".into(), |m| m.to_string())],
    }
}

/// A cell's model before its label, when it has one of its own.
pub fn model_prefix(m: Option<axes::model::Model>) -> String {
    m.map(|m| format!("{m} ")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_with_hanging_indent() {
        let w = wrap("aaa bbb ccc ddd", 10, 2, 4);
        assert_eq!(w, "aaa bbb\n    ccc\n    ddd");
        for line in w.lines() {
            assert!(line.len() <= 10);
        }
    }

    #[test]
    fn columns_align_and_truncate() {
        let t = columns(
            &["pid", "name"],
            &[Align::Right, Align::Left],
            &[vec!["1".into(), "x".repeat(100)]],
            2,
            20,
        );
        for line in t.lines() {
            assert!(line.chars().count() <= 20, "{line}");
        }
        assert!(t.contains("  pid  name"));
    }

    /// Regression (issue 25): fix commands were wrapped at 80 columns and broke when pasted from a log.
    #[test]
    fn fix_commands_stay_whole_and_their_comments_wrap_as_comments() {
        let long = "echo 'vm.nr_hugepages = 1098' > /etc/sysctl.d/60-preemptlab-hugepages.conf";
        assert_eq!(
            command(long, 40, 11, 8),
            long,
            "longer than the width, kept whole"
        );
        let line = format!("sysctl -w vm.nr_hugepages=1098   # {}", "word ".repeat(20));
        let c = command(&line, 60, 11, 8);
        let lines: Vec<&str> = c.lines().collect();
        assert!(
            lines[0].starts_with("sysctl -w vm.nr_hugepages=1098 # word"),
            "{c}"
        );
        for l in &lines[1..] {
            assert!(l.starts_with("        # word"), "{c}");
            assert!(l.chars().count() <= 60, "{c}");
        }
        assert_eq!(c.matches("word").count(), 20);
        // A comment that does not fit after the command starts on the next line.
        assert_eq!(
            command(&format!("{long} # why"), 40, 0, 2),
            format!("{long}\n  # why")
        );
        // A comment alone wraps as comments; a line without one is all command.
        assert_eq!(command("# a b c", 6, 0, 0), "# a b\n# c");
        assert_eq!(split_command("a # b # c"), ("a", Some("b # c")));
        assert_eq!(split_command("plain text"), ("plain text", None));
    }
}

#[cfg(test)]
mod shown_tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_shown_as_escapes() {
        assert_eq!(shown("db-1.example"), "db-1.example");
        assert_eq!(shown("a\nb\t\u{1b}[2J"), r"a\nb\t\u{1b}[2J");
        assert_eq!(
            shown("\u{202e}txt.exe\u{7f}\u{9b}"),
            r"\u{202e}txt.exe\u{7f}\u{9b}"
        );
        assert_eq!(shown("é ü 数"), "é ü 数");
        #[derive(Clone, serde::Serialize, serde::Deserialize)]
        struct Doc {
            host: String,
            list: Vec<String>,
            n: u32,
        }
        let d = shown_all(&Doc {
            host: "x\u{1b}y".into(),
            list: vec!["\n".into()],
            n: 3,
        });
        assert_eq!(
            (d.host.as_str(), d.list[0].as_str(), d.n),
            (r"x\u{1b}y", r"\n", 3)
        );
    }
}
