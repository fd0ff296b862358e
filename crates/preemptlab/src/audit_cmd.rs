//! `preemptlab audit`.
//!
//! `--out FILE` is written for readers that may look at any moment (node_exporter's textfile collector
//! scrapes on its own schedule): the text goes to a temp file in FILE's directory, is flushed to disk, and
//! is renamed over FILE. rename(2) replaces the name atomically within one file system, so a reader opens
//! either the old file or the new one, never a half-written one. The temp name starts with a dot and ends
//! in `.tmp`, so the textfile collector (which reads only `*.prom`) never picks it up.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use hostfacts::{Host, Severity};

use crate::cli::{AuditArgs, AuditFormat, FailOn};
use crate::term;

pub fn run(args: AuditArgs) -> Result<i32> {
    match audit(&args) {
        Ok(code) => Ok(code),
        Err(e) => {
            // A timer writes the textfile unattended: leave a file that says the audit failed, so an alert
            // fires instead of the last good numbers being served for ever.
            // Only where --out itself is usable: a bad --out is the error being reported already.
            if let (AuditFormat::Prometheus, Some(path)) = (args.format, &args.out) {
                if check_out_dir(path).is_err() {
                    return Err(e);
                }
                let text =
                    report::prometheus::render_failure(env!("CARGO_PKG_VERSION"), now_unix_s());
                if let Err(w) = write_atomic(path, &text) {
                    eprintln!("preemptlab: {w:#}");
                }
            }
            Err(e)
        }
    }
}

fn now_unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn audit(args: &AuditArgs) -> Result<i32> {
    let host = match &args.sysroot {
        Some(dir) => {
            if !dir.is_dir() {
                bail!(
                    "--sysroot {}: not a directory (give a tree holding proc/ and sys/)",
                    dir.display()
                );
            }
            if !dir.join("proc").is_dir() && !dir.join("sys").is_dir() {
                bail!("--sysroot {}: holds neither proc/ nor sys/ (give the root of a captured host tree)", dir.display());
            }
            Host::at(dir)
        }
        None => Host::live(),
    };
    if let Some(path) = &args.out {
        check_out_dir(path)?;
    }
    // Connect first and keep the sessions open, so their backends are in /proc while we look.
    let sessions = hostfacts::pgquery::query_all(&args.pg)
        .map_err(anyhow::Error::from)
        .context("--pg")?;
    let servers = &sessions.servers;
    let audit = hostfacts::audit(&host, servers);
    drop(sessions);

    let text = match args.format {
        AuditFormat::Table => {
            report::audit_table::render(&audit, term::style(args.color), term::width())
        }
        AuditFormat::Json => report::json(&audit),
        AuditFormat::Prometheus => report::prometheus::render(&audit),
    };
    print!("{text}");
    if let Some(path) = &args.out {
        // The file holds the format asked for; a table is for eyes, so --format table writes the JSON.
        let file_text = match args.format {
            AuditFormat::Table => report::json(&audit),
            AuditFormat::Json | AuditFormat::Prometheus => text,
        };
        write_atomic(path, &file_text)?;
    }
    let worst = audit.findings.iter().map(|f| f.severity).max();
    let fail = match args.fail_on {
        Some(FailOn::Warn) => worst >= Some(Severity::Warn),
        Some(FailOn::Critical) => worst >= Some(Severity::Critical),
        None => false,
    };
    Ok(if fail { 1 } else { 0 })
}

/// Refuses an `--out` whose directory does not exist, before any work (the textfile directory is the
/// operator's to create; a typo should not silently make a new one).
fn check_out_dir(path: &Path) -> Result<()> {
    let dir = parent_dir(path);
    if !dir.is_dir() {
        bail!(
            "--out {}: directory {} does not exist (create it, or give a path in an existing directory)",
            path.display(),
            dir.display()
        );
    }
    if path.is_dir() {
        bail!(
            "--out {}: is a directory (give a file name, e.g. {}/preemptlab.prom)",
            path.display(),
            path.display()
        );
    }
    Ok(())
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes `text` to `path` so that no reader ever sees a partial file: a temp file in the same directory
/// (same file system, so the rename is atomic), named after this process and the time so that two
/// concurrent runs never share one, written, fsynced, made world-readable (0644, as the collector may run as
/// another user), then renamed over `path`. The temp file is removed on any failure.
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .with_context(|| format!("--out {}: give a file name", path.display()))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(
        ".{}.{}-{nanos}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)
            .with_context(|| {
                format!(
                    "creating {} (is {} writable?)",
                    tmp.display(),
                    dir.display()
                )
            })?;
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
