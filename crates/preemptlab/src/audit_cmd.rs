//! `preemptlab audit`.

use anyhow::{bail, Context, Result};
use hostfacts::{Host, Severity};

use crate::cli::{AuditArgs, AuditFormat, FailOn};
use crate::term;

pub fn run(args: AuditArgs) -> Result<i32> {
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
        term::write_atomic(path, &report::json(&audit))?;
    }
    let worst = audit.findings.iter().map(|f| f.severity).max();
    let fail = match args.fail_on {
        Some(FailOn::Warn) => worst >= Some(Severity::Warn),
        Some(FailOn::Critical) => worst >= Some(Severity::Critical),
        None => false,
    };
    Ok(if fail { 1 } else { 0 })
}
