//! Terminal facts (colour, width) and writing results out.

use std::io::IsTerminal;

use std::path::PathBuf;

use indicatif::{ProgressBar, ProgressStyle};

use report::export::{Export, Format, Layout};

use osutil::output::ResultFile;

use crate::cli::{Color, ColorArgs, ResultArgs};

/// `doc` in `format`, laid out for this terminal (colour as `color` says, its width): the one path from a
/// command's document to its output ([`report::export::export`]). A format the document lacks is an error
/// (a command offers only its document's formats, so this is a bug).
pub fn render<T: Export>(
    format: Format,
    color: Option<&ColorArgs>,
    doc: &T,
) -> anyhow::Result<String> {
    let layout = Layout {
        style: color.map_or(report::Style { color: false }, style),
        width: width(),
    };
    report::export::export(format, &layout, doc)
        .ok_or_else(|| anyhow::anyhow!("--format {} does not apply to this output", format.name()))
}

/// Puts the result file in place ([`ResultFile::finish`]: a stream gets the last version once), prints the
/// result on stdout in `format` and, unless quiet, says on stderr where its file is.
pub fn print_result<T: Export>(
    format: Format,
    res: &T,
    out: &ResultFile,
    quiet: bool,
) -> anyhow::Result<()> {
    out.finish()?;
    let printed = render(format, None, res).and_then(stdout);
    if !quiet {
        osutil::msg!("preemptlab: result written to {}", out.dest().display());
    }
    printed
}

/// Writes `text` to stdout. A reader that has gone away (`| head -1`) is not an error: the output is
/// dropped and the command goes on to its own exit code (1 for a finding at `--fail-on`, 130 when
/// interrupted, ...), as it would have with the reader still there.
pub fn stdout(text: impl AsRef<[u8]>) -> anyhow::Result<()> {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_ref()).and_then(|()| o.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// Whether to colour stdout.
pub fn style(color: &ColorArgs) -> report::Style {
    let on = match color.color {
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
    osutil::output::write_atomic(path, text).map_err(anyhow::Error::from)
}

/// Checks before any work that the result can be written to `path` (one line naming the path and the fix).
pub fn claim_output(path: &std::path::Path) -> anyhow::Result<()> {
    osutil::output::check_writable(path).map_err(out_flag)
}

/// Checks before any work that `--out` can be published to `path` ([`osutil::output::check_publishable`]:
/// its directory exists and takes a file): one line naming `--out` and the fix.
pub fn check_published_out(path: &std::path::Path) -> anyhow::Result<()> {
    osutil::output::check_publishable(path).map_err(|e| anyhow::anyhow!("--out {}", out_flag(e)))
}

/// A result file's error, with how to choose another path where one would do.
pub fn out_flag(e: osutil::output::OutputError) -> anyhow::Error {
    match e.wants_another_path() {
        true => anyhow::anyhow!("{e} (choose another path with --out)"),
        false => anyhow::anyhow!(e),
    }
}

/// The result file of a command that writes one (`--out`, else results/<kind>-<time>.json), claimed before
/// any work: checked to be writable and to be none of `inputs` (the files the run reads).
pub fn result_file(
    r: &ResultArgs,
    kind: results::Kind,
    inputs: &[PathBuf],
) -> anyhow::Result<ResultFile> {
    let out = r
        .out
        .clone()
        .unwrap_or_else(|| hostfacts::envelope::default_path(kind, osutil::unix_now()));
    claim(&out, inputs)
}

/// Claims `out` for a result file rewritten as the run goes: writable, and none of `inputs`.
pub fn claim(out: &std::path::Path, inputs: &[PathBuf]) -> anyhow::Result<ResultFile> {
    osutil::output::check_not_input(out, inputs).map_err(|e| anyhow::anyhow!("--out {e}"))?;
    ResultFile::claim(out).map_err(out_flag)
}

/// A progress bar on stderr in this layout, only on a TTY and when not quiet.
pub fn bar(quiet: bool, template: &str) -> Option<ProgressBar> {
    (std::io::stderr().is_terminal() && !quiet).then(|| {
        let pb = ProgressBar::new(1000);
        let style = ProgressStyle::with_template(template).expect("valid template");
        pb.set_style(style.progress_chars("=> "));
        pb
    })
}

/// Prints a per-cell line on stderr: above the bar when there is one, else plainly unless quiet.
pub fn cell_printer(bar: Option<ProgressBar>, quiet: bool) -> impl Fn(String) {
    move |line| match &bar {
        Some(pb) => pb.println(line),
        None if !quiet => osutil::msg!("{line}"),
        None => {}
    }
}

/// The exit of a bench: interrupted (the stop signal's code, after `said`), cells failed (an error listing
/// them), or 0.
pub fn bench_exit(interrupted: bool, said: String, failures: Vec<String>) -> anyhow::Result<i32> {
    if interrupted {
        osutil::msg!("preemptlab: interrupted; {said}");
        return Ok(osutil::stop::interrupted_exit_code());
    }
    if !failures.is_empty() {
        anyhow::bail!("{} cells failed: {}", failures.len(), failures.join("; "));
    }
    Ok(0)
}

/// An option's flag: `reconnect_every` is `--reconnect-every`.
pub fn flag(option: &str) -> String {
    format!("--{}", option.replace('_', "-"))
}

/// The long flag of the argument `id` (a field of the command's `Args`) as clap spells it:
/// `--fault-period`. An id the command does not have is shown as given, so a message never loses it.
pub fn long_flag(cmd: clap::Command, id: &str) -> String {
    cmd.get_arguments()
        .find(|a| a.get_id() == id)
        .and_then(|a| a.get_long())
        .map_or_else(|| id.to_string(), |l| format!("--{l}"))
}

/// A library's option error as one line naming the flags.
pub fn flags(e: lab::options::OptionError) -> anyhow::Error {
    anyhow::anyhow!(e.render(flag))
}

/// The exit code of a command that wrote its result: the stop signal's when interrupted, else 0.
pub fn exit_code(interrupted: bool) -> i32 {
    match interrupted {
        true => osutil::stop::interrupted_exit_code(),
        false => 0,
    }
}
