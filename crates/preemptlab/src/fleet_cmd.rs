//! `preemptlab fleet`: finds the audit files, reads and assesses them on every CPU, prints the answer.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{anyhow, bail, Context, Result};
use hostfacts::findings::Verdict;
use report::fleet::{self, Failed, Loaded, Options};

use crate::cli::{FailOn, FleetArgs, TableFormat};
use crate::term;

/// Adds the `*.json` files under `dir` (recursively, skipping hidden entries) to `out`.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let rd =
        std::fs::read_dir(dir).with_context(|| format!("reading directory {}", dir.display()))?;
    for e in rd {
        let e = e.with_context(|| format!("reading directory {}", dir.display()))?;
        let name = e.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = e.path();
        let ft = e
            .file_type()
            .with_context(|| format!("{}", path.display()))?;
        // Symlinked directories are not followed (no loops); symlinked files are read.
        if ft.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|x| x == "json") {
            out.push(path);
        }
    }
    Ok(())
}

/// Every file named, and the *.json files of every directory named, sorted and without repeats.
fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| {
            anyhow!(
                "{}: {} (name audit files or directories of them)",
                p.display(),
                hostfacts::host::explain_io_error(&e)
            )
        })?;
        if meta.is_dir() {
            let before = out.len();
            walk(p, &mut out)?;
            if out.len() == before {
                bail!(
                    "{}: no *.json audit files in this directory (gather them with `preemptlab audit --format json` on each host, or the Ansible role)",
                    p.display()
                );
            }
        } else {
            out.push(p.clone());
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Reads, parses and assesses every file, spreading the files over the available CPUs.
fn load_all(paths: &[PathBuf], opts: &Options) -> Vec<Loaded> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(paths.len().div_ceil(64).max(1));
    let next = AtomicUsize::new(0);
    let load_one = |p: &PathBuf| {
        let file = p.display().to_string();
        match std::fs::read_to_string(p) {
            Ok(text) => fleet::load(&file, &text, opts),
            Err(e) => Loaded::Failed(Failed {
                reason: format!("unreadable: {}", hostfacts::host::explain_io_error(&e)),
                file,
            }),
        }
    };
    let mut parts: Vec<Vec<(usize, Loaded)>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut got = Vec::new();
                    loop {
                        // Relaxed: the counter only hands out distinct indices; results are joined below.
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(p) = paths.get(i) else { break };
                        got.push((i, load_one(p)));
                    }
                    got
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a fleet worker panicked"))
            .collect()
    });
    let mut all: Vec<(usize, Loaded)> = parts.drain(..).flatten().collect();
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, l)| l).collect()
}

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
    let paths = files(&args.paths)?;
    let answer = fleet::combine(load_all(&paths, &opts), &opts);
    match args.format {
        TableFormat::Json => print!("{}", report::json(&answer)),
        TableFormat::Markdown => print!("{}", report::fleet_table::markdown(&answer)),
        TableFormat::Table => print!(
            "{}",
            report::fleet_table::render(&answer, term::style(args.color), term::width())
        ),
    }
    let fail = match args.fail_on {
        None => false,
        Some(FailOn::Warn) => answer.hosts.iter().any(|h| h.verdict != Verdict::Ok),
        Some(FailOn::Critical) => answer.hosts.iter().any(|h| h.verdict == Verdict::AtRisk),
    };
    Ok(i32::from(fail))
}
