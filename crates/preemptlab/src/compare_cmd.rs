//! `preemptlab compare` and `preemptlab results`.

use anyhow::{anyhow, bail, Result};
use compare::CompareError;
use osutil::input::files::{self, FilesError};
use results::Document;

use crate::cli::{CompareArgs, ReportArgs, ResultsArgs};
use crate::term;

pub fn run(a: CompareArgs) -> Result<i32> {
    let docs: Vec<(String, Document)> = a
        .files
        .iter()
        .map(|p| {
            Ok((
                p.display().to_string(),
                files::load(p, results::Document::from_text)?,
            ))
        })
        .collect::<Result<_>>()?;
    let opts = compare::Options {
        noise: a.noise,
        by: a.by.as_deref().map(compare::By::parse),
        base: a.base.clone(),
        metrics: a
            .metrics
            .as_deref()
            .map(|m| m.split(',').map(|s| s.trim().to_string()).collect()),
    };
    let c = compare::run(&docs, &opts).map_err(|e| flag_context(e, &a))?;
    term::stdout(term::render(a.format, None, &c)?)?;
    if c.rows.is_empty() {
        osutil::msg!("preemptlab: no cells matched between the inputs (different benches or different matrices?)");
    }
    Ok(if a.fail_on_regression && c.has_regression() {
        1
    } else {
        0
    })
}

/// The library's error with the flag that gave the value, and the flag that fixes it.
fn flag_context(e: CompareError, a: &CompareArgs) -> anyhow::Error {
    let by = a.by.as_deref().unwrap_or_default();
    let base = a.base.as_deref().unwrap_or_default();
    match e {
        CompareError::Noise(_) => anyhow!("--noise {e}"),
        CompareError::UnknownMetric { .. } => anyhow!("--metrics {e}"),
        CompareError::TooFew => anyhow!("{e}: give another file, or --by FIELD (e.g. --by lock)"),
        CompareError::BaseWithoutAxis => {
            anyhow!("--base {base}: {e}: add --by (--by lock --base pg)")
        }
        CompareError::NoBase { .. } => anyhow!("--base {base}: {e}"),
        CompareError::PoolHosts { .. } | CompareError::PoolSpecs { .. } => {
            anyhow!("--by {by}: {e} (without --by)")
        }
        CompareError::PoolKinds { .. }
        | CompareError::NoHost(_)
        | CompareError::NoField { .. }
        | CompareError::OneValue { .. }
        | CompareError::NoInputs => anyhow!("--by {by}: {e}"),
        CompareError::NotResult { .. } | CompareError::Kinds { .. } => anyhow!(e),
    }
}

pub fn list(a: ResultsArgs) -> Result<i32> {
    let paths = files::json_in_dir(&a.dir).map_err(|e| match e {
        FilesError::ListDir { dir, err } => anyhow!(
            "listing {} (results are written there by the benches): {err}",
            dir.display()
        ),
        e => anyhow!(e),
    })?;
    // A file that cannot be read or parsed is listed with why, never left out (issue 29).
    let mut docs = Vec::new();
    let mut unread = Vec::new();
    for p in &paths {
        match files::load(p, results::Document::from_text) {
            Ok(d) => docs.push((p.display().to_string(), d)),
            Err(e) => unread.push((p.display().to_string(), unread_reason(e))),
        }
    }
    term::stdout(report::results_list::render(&docs, &unread))?;
    Ok(0)
}

/// Why a result file was not listed, without its path (the listing names it).
fn unread_reason(e: FilesError) -> String {
    match e {
        FilesError::Read { err, .. } => osutil::explain_io_error(&err),
        FilesError::NotText { .. } => "not a text file".into(),
        FilesError::Parse { why, .. } => why,
        e => e.to_string(),
    }
}

pub fn report(a: ReportArgs) -> Result<i32> {
    let found = files::json_files_deep(&a.inputs).map_err(|e| match e {
        FilesError::NoJson { dir } => anyhow!(
            "no result files found in {} (give .json result files or a directory of them)",
            dir.display()
        ),
        e => anyhow!(e),
    })?;
    let (files, others) = (found.files, found.others);
    // The page is never one of its inputs (`report --out X X` overwrote X with HTML).
    osutil::output::check_not_input(&a.out, &files).map_err(|e| anyhow!("--out {e}"))?;
    crate::term::claim_output(&a.out)?;
    // Every file is read; one that is not a result this version reads is skipped with its reason, as
    // are the files under the directories that are not JSON (notes, logs).
    let mut docs = Vec::new();
    let mut skipped = Vec::new();
    for p in &files {
        match files::load(p, results::Document::from_text) {
            Ok(doc) => docs.push(report::html::Doc {
                label: p.display().to_string(),
                doc,
            }),
            Err(e) => skipped.push(report::export::Skipped {
                file: p.display().to_string(),
                reason: unread_reason(e),
            }),
        }
    }
    for (p, why) in found.unreadable {
        skipped.push(report::export::Skipped {
            file: p.display().to_string(),
            reason: why,
        });
    }
    if !others.is_empty() {
        const SHOWN: usize = 10;
        let mut names: Vec<String> = others
            .iter()
            .take(SHOWN)
            .map(|p| p.display().to_string())
            .collect();
        if others.len() > SHOWN {
            names.push(format!("and {} more", others.len() - SHOWN));
        }
        skipped.push(report::export::Skipped {
            file: format!("{} other files", others.len()),
            reason: format!("not .json, so not result files: {}", names.join(", ")),
        });
    }
    if docs.is_empty() {
        bail!(
            "no result files among {} (the .json files found: {})",
            a.inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            skipped
                .iter()
                .map(|s| format!("{}: {}", s.file, s.reason))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    // Several hosts' audits: the page opens with the fleet's answer over them.
    let audits: Vec<(&str, &results::host::audit::Audit)> = docs
        .iter()
        .filter_map(|d| match &d.doc {
            results::Document::Audit(a) => Some((d.label.as_str(), &**a)),
            _ => None,
        })
        .collect();
    let fleet = hostfacts::fleet::of_several(&audits);
    let page = report::export::Page {
        docs,
        fleet,
        generated_utc: results::utc(osutil::unix_now()),
        skipped,
    };
    let html = term::render(report::export::Format::Html, None, &page)?;
    crate::term::write_atomic(&a.out, &html)?;
    osutil::msg!(
        "preemptlab: wrote {} ({} documents, {} skipped, {} KiB)",
        a.out.display(),
        page.docs.len(),
        page.skipped.len(),
        html.len() / 1024
    );
    for s in &page.skipped {
        osutil::msg!("preemptlab: skipped {}: {}", s.file, s.reason);
    }
    Ok(0)
}
