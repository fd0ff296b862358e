//! `preemptlab audit`.
//!
//! `--out FILE` is published for readers that may look at any moment (`osutil::output::publish`: temp file,
//! fsync, rename), and refused before any work when its directory does not exist.

use anyhow::{anyhow, Context, Result};
use hostfacts::Host;

use report::export::Format;

use crate::cli::AuditArgs;
use crate::term;

pub fn run(args: AuditArgs) -> Result<i32> {
    match audit(&args) {
        Ok(code) => Ok(code),
        Err(e) => {
            // A timer writes the textfile unattended: leave a file that says the audit failed, so an alert
            // fires instead of the last good numbers being served for ever.
            // Only where --out itself is usable: a bad --out is the error being reported already.
            if let (Format::Prometheus, Some(path)) = (args.format, &args.out) {
                if osutil::output::check_publishable(path).is_ok() {
                    let text = report::prometheus::render_failure(
                        env!("CARGO_PKG_VERSION"),
                        osutil::unix_now(),
                    );
                    if let Err(w) = osutil::output::publish(path, &text) {
                        osutil::msg!("preemptlab: {w}");
                    }
                }
            }
            Err(e)
        }
    }
}

fn audit(args: &AuditArgs) -> Result<i32> {
    let host = match &args.sysroot.sysroot {
        Some(dir) => Host::at_checked(dir).map_err(|e| anyhow!("--sysroot {e}"))?,
        None => Host::live(),
    };
    if let Some(path) = &args.out {
        term::check_published_out(path)?;
    }
    // Connect first and keep the sessions open, so their backends are in /proc while we look. A server
    // that cannot be asked is a finding (and a metric); the rest of the audit stands.
    let (sessions, pg_failures) = hostfacts::pgquery::query_each(&args.pg)
        .map_err(anyhow::Error::from)
        .context("--pg")?;
    let mut audit = hostfacts::audit_of(&host, &sessions.servers, &pg_failures);
    drop(sessions);
    audit.inventory_name = args.inventory_name.clone();
    for f in &pg_failures {
        osutil::msg!(
            "preemptlab: --pg {}: {} (finding pg-query-failed; the rest of the audit stands)",
            f.dsn,
            f.error
        );
    }

    let text = term::render(args.format, Some(&args.color), &audit)?;
    term::stdout(&text)?;
    if let Some(path) = &args.out {
        // The file holds the format asked for; a table is for eyes, so --format table writes the JSON.
        let file_text = match args.format {
            Format::Table => term::render(Format::Json, None, &audit)?,
            _ => text,
        };
        osutil::output::publish(path, &file_text)
            .map_err(|e| anyhow!("--out {}", term::out_flag(e)))?;
    }
    let fail = args
        .fail_on
        .is_some_and(|f| f.fails_findings(&audit.findings));
    Ok(if fail { 1 } else { 0 })
}
