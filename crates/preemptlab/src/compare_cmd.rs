//! `preemptlab compare` and `preemptlab results`.

use anyhow::{anyhow, bail, Result};
use lab::files::{self, load_document as load, FilesError};
use report::compare::{self, Input};
use results::Document;

use crate::cli::{CompareArgs, CompareFormat, ReportArgs, ResultsArgs};

pub fn run(a: CompareArgs) -> Result<i32> {
    if !(0.0..1.0).contains(&a.noise) {
        bail!("--noise {}: a fraction from 0 to 1 (0.02 = 2%)", a.noise);
    }
    let docs: Vec<(String, Document)> = a
        .files
        .iter()
        .map(|p| Ok((p.display().to_string(), load(p)?)))
        .collect::<Result<_>>()?;
    // Results of different kinds have no cells in common: refuse rather than report "no cells matched".
    if let Some((first, d0)) = docs.first() {
        if let Some((other, d)) = docs.iter().find(|(_, d)| d.kind() != d0.kind()) {
            bail!(
                "compare needs results of one kind: {first} is {}, {other} is {}",
                d0.kind(),
                d.kind()
            );
        }
    }
    let inputs: Vec<Input> = docs
        .iter()
        .map(|(name, doc)| Input::new(name.clone(), doc).map_err(|e| anyhow!(e)))
        .collect::<Result<_>>()?;
    if a.base.is_some() && a.by.is_none() {
        bail!("--base needs --by FIELD: the value of that field the others are set against (--by lock --base pg)");
    }
    let inputs = match &a.by {
        Some(field) => {
            compare::split_by(&inputs, field, a.base.as_deref()).map_err(|e| anyhow!(e))?
        }
        None if inputs.len() < 2 => bail!(
            "compare needs two result files, or one with --by FIELD (e.g. --by lock) to set its cells against each other"
        ),
        None => inputs,
    };
    let filter: Option<Vec<String>> = a
        .metrics
        .as_ref()
        .map(|m| m.split(',').map(|s| s.trim().to_string()).collect());
    if let Some(f) = &filter {
        for name in f {
            if !compare::METRICS.iter().any(|m| m.name == name) {
                bail!(
                    "--metrics {name}: unknown (known: {})",
                    compare::METRICS.map(|m| m.name).join(", ")
                );
            }
        }
    }
    let c = compare::compare(&inputs, a.noise, filter.as_deref()).map_err(|e| anyhow!(e))?;
    match a.format {
        CompareFormat::Table => print!("{}", compare::table(&c)),
        CompareFormat::Markdown => print!("{}", compare::markdown(&c)),
        CompareFormat::Json => print!("{}", report::json(&c)),
        CompareFormat::Csv => print!("{}", compare::csv(&c)),
    }
    if c.rows.is_empty() {
        eprintln!("preemptlab: no cells matched between the inputs (different benches or different matrices?)");
    }
    Ok(if a.fail_on_regression && c.has_regression() {
        1
    } else {
        0
    })
}

pub fn list(a: ResultsArgs) -> Result<i32> {
    let paths = files::json_in_dir(&a.dir).map_err(|e| match e {
        FilesError::ListDir { dir, err } => anyhow!(
            "listing {} (results are written there by the benches): {err}",
            dir.display()
        ),
        e => anyhow!(e),
    })?;
    let docs: Vec<_> = paths
        .iter()
        .filter_map(|p| Some((p.display().to_string(), load(p).ok()?)))
        .collect();
    print!("{}", report::results_list::render(&docs));
    Ok(0)
}

pub fn report(a: ReportArgs) -> Result<i32> {
    let files = files::json_files_flat(&a.inputs)?;
    if files.is_empty() {
        bail!(
            "no result files found in {} (give .json result files or a directory of them)",
            a.inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    crate::term::claim_output(&a.out)?;
    let docs: Vec<report::html::Doc> = files
        .iter()
        .map(|p| {
            Ok(report::html::Doc {
                label: p.display().to_string(),
                doc: load(p)?,
            })
        })
        .collect::<Result<_>>()?;
    let html = report::html::render(&docs, &lab::result::utc(lab::result::unix_now()));
    crate::term::write_atomic(&a.out, &html)?;
    eprintln!(
        "preemptlab: wrote {} ({} inputs, {} KiB)",
        a.out.display(),
        docs.len(),
        html.len() / 1024
    );
    Ok(0)
}
