//! Terminal facts (colour, width) and writing results out.

use std::io::IsTerminal;

use crate::cli::Color;

/// Prints a result on stdout in `format` (`table(markdown)` renders the two text forms) and, unless quiet,
/// says on stderr where its file is.
pub fn print_result<T: serde::Serialize>(
    format: crate::cli::TableFormat,
    res: &T,
    table: impl Fn(bool) -> String,
    out: &std::path::Path,
    quiet: bool,
) {
    use crate::cli::TableFormat;
    match format {
        TableFormat::Json => print!("{}", report::json(res)),
        TableFormat::Table => print!("{}", table(false)),
        TableFormat::Markdown => print!("{}", table(true)),
    }
    if !quiet {
        eprintln!("preemptlab: result written to {}", out.display());
    }
}

/// Whether to colour stdout.
pub fn style(color: Color) -> report::Style {
    let on = match color {
        Color::Always => true,
        Color::Never => false,
        Color::Auto => std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
    };
    report::Style { color: on }
}

/// Columns to lay text out in: the terminal's width on a TTY (at most 120), else 80.
pub fn width() -> usize {
    if let Some(c) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
    {
        return c.clamp(60, 200);
    }
    if std::io::stdout().is_terminal() {
        let mut ws = libc::winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCGWINSZ writes a winsize into the pointer we pass, which is valid for the call.
        let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
        if r == 0 && ws.ws_col >= 60 {
            return (ws.ws_col as usize).min(120);
        }
    }
    80
}

/// Writes `text` to `path` atomically (temp file + rename).
pub fn write_atomic(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    lab::result::write_text(path, text).map_err(anyhow::Error::msg)
}

/// Checks before any work that the result can be written to `path` (one line naming the path and the fix).
pub fn claim_output(path: &std::path::Path) -> anyhow::Result<()> {
    lab::output::check_writable(path).map_err(anyhow::Error::msg)
}
