//! `preemptlab fleet`: finds the audit files, reads and assesses them on every CPU, prints the answer.

use anyhow::{anyhow, Context, Result};
use hostfacts::fleet::{self, Loaded, Options};
use osutil::input::files::{self, FilesError};
use results::host::fleet::Failed;

use crate::cli::FleetArgs;
use crate::term;

pub fn run(args: FleetArgs) -> Result<i32> {
    let stale_after_s =
        fleet::parse_age(&args.stale_after).map_err(|e| anyhow!("--stale-after {e}"))?;
    let now_unix_s = match args.now {
        Some(n) => n,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .context("the system clock is before 1970")?
            .as_secs(),
    };
    let opts = Options {
        now_unix_s,
        stale_after_s,
    };
    let found = files::json_files_deep(&args.paths).map_err(|e| match e {
        FilesError::Missing { .. } => anyhow!("{e} (name audit files or directories of them)"),
        FilesError::NoJson { dir } => anyhow!("{}: no *.json audit files in this directory (gather them with `preemptlab audit --format json` on each host, or the Ansible role)", dir.display()),
        e => anyhow!(e),
    })?;
    let mut loaded = files::read_all(&found.files, |file, text| match text {
        Ok(text) => fleet::load(&file, &text, &opts),
        Err(why) => Loaded::Failed(Failed {
            reason: format!("unreadable: {why}"),
            file,
        }),
    });
    // What the walk could not look at (a subdirectory without permission, a FIFO named x.json) is listed
    // with the failed files, never fatal.
    loaded.extend(found.unreadable.into_iter().map(|(path, why)| {
        Loaded::Failed(Failed {
            reason: format!("unreadable: {why}"),
            file: path.display().to_string(),
        })
    }));
    let answer = fleet::combine(loaded, &opts);
    term::stdout(term::render(args.format, Some(&args.color), &answer)?)?;
    match args.fail_on.and_then(|f| f.fleet_failure(&answer)) {
        Some(why) => {
            osutil::msg!("preemptlab fleet: {why}");
            Ok(1)
        }
        None => Ok(0),
    }
}
