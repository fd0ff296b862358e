//! The house rules that hold for the whole workspace, checked on its source (issue 47): a type is imported
//! from the crate that defines it (no `pub use` of another workspace crate's items), no function over 150
//! lines and no file over 800 (split, not trimmed), `lab` holds one folder per bench and no result-file
//! code, `compare` is computed outside `report`; GUIDE.md is a manual under 45 KB and CHANGELOG.md has released
//! versions, the latest the workspace's. Each failure lists every offender with its place.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use syn::spanned::Spanned;
use syn::visit::Visit;

const MAX_FN_LINES: usize = 150;
const MAX_FILE_LINES: usize = 800;
/// GUIDE.md says what each command answers, shows a short example and how to read it; measurements, dated
/// findings and long references live in docs/ and docs/notes, linked from it (issue 47: it had grown to 77 KB).
const MAX_GUIDE_BYTES: u64 = 45_000;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every workspace crate: its folder under crates/ and its package name.
fn crates() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(workspace().join("crates")).unwrap() {
        let dir = e.unwrap().path();
        let Ok(toml) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        let name = toml
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{}: no package name", dir.display()))
            .to_string();
        out.push((dir, name));
    }
    out.sort();
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "target") {
                rust_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every Rust file of the workspace's crates (sources, tests, examples, benches), sorted.
fn all_rust_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (dir, _) in crates() {
        rust_files(&dir, &mut out);
    }
    out.sort();
    out
}

fn shown(p: &Path) -> String {
    p.strip_prefix(workspace())
        .unwrap_or(p)
        .display()
        .to_string()
}

fn parse(p: &Path) -> syn::File {
    let text = std::fs::read_to_string(p).unwrap();
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", shown(p)))
}

/// The first path segment of each leaf of a `use` tree.
fn use_roots(tree: &syn::UseTree, out: &mut Vec<String>) {
    match tree {
        syn::UseTree::Path(p) => out.push(p.ident.to_string()),
        syn::UseTree::Name(n) => out.push(n.ident.to_string()),
        syn::UseTree::Rename(r) => out.push(r.ident.to_string()),
        syn::UseTree::Glob(_) => {}
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_roots(t, out)),
    }
}

struct PubUses<'a> {
    others: &'a BTreeSet<String>,
    found: Vec<(usize, String)>,
}

impl<'ast> Visit<'ast> for PubUses<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // `pub(crate)` and `pub(super)` stay inside the crate: no second path for other crates.
        if !matches!(u.vis, syn::Visibility::Public(_)) {
            return;
        }
        let mut roots = Vec::new();
        use_roots(&u.tree, &mut roots);
        for r in roots {
            if self.others.contains(&r) {
                self.found.push((u.span().start().line, r));
            }
        }
    }
}

#[test]
fn no_pub_use_of_another_workspace_crates_items() {
    let crates = crates();
    let mut offenders = Vec::new();
    for (dir, name) in &crates {
        let others: BTreeSet<String> = crates
            .iter()
            .filter(|(_, n)| n != name)
            .map(|(_, n)| n.clone())
            .collect();
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for f in files {
            let mut v = PubUses {
                others: &others,
                found: Vec::new(),
            };
            v.visit_file(&parse(&f));
            for (line, from) in v.found {
                offenders.push(format!("{}:{line}: re-exports from `{from}`", shown(&f)));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "a type is imported from the crate that defines it: drop these re-exports and import from the \
         defining crate:\n{}",
        offenders.join("\n")
    );
}

struct LongFns {
    found: Vec<(usize, usize, String)>,
}

impl LongFns {
    fn check(&mut self, name: &syn::Ident, sig: &syn::Signature, block: &syn::Block) {
        let start = sig.fn_token.span().start().line;
        let end = block.span().end().line;
        let lines = end + 1 - start;
        if lines > MAX_FN_LINES {
            self.found.push((start, lines, name.to_string()));
        }
    }
}

impl<'ast> Visit<'ast> for LongFns {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.check(&f.sig.ident, &f.sig, &f.block);
        syn::visit::visit_item_fn(self, f);
    }
    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.check(&f.sig.ident, &f.sig, &f.block);
        syn::visit::visit_impl_item_fn(self, f);
    }
    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(b) = &f.default {
            self.check(&f.sig.ident, &f.sig, b);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

#[test]
fn no_function_over_150_lines() {
    let mut offenders = Vec::new();
    for f in all_rust_files() {
        let mut v = LongFns { found: Vec::new() };
        v.visit_file(&parse(&f));
        for (line, lines, name) in v.found {
            offenders.push(format!("{}:{line}: fn {name} is {lines} lines", shown(&f)));
        }
    }
    assert!(
        offenders.is_empty(),
        "functions over {MAX_FN_LINES} lines: split each into named steps (not trimmed):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn no_file_over_800_lines() {
    let mut offenders = Vec::new();
    for f in all_rust_files() {
        let lines = std::fs::read_to_string(&f).unwrap().lines().count();
        if lines > MAX_FILE_LINES {
            offenders.push(format!("{}: {lines} lines", shown(&f)));
        }
    }
    assert!(
        offenders.is_empty(),
        "files over {MAX_FILE_LINES} lines: split each by concept (not trimmed):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn lab_has_one_folder_per_bench_and_no_result_file_code() {
    let src = workspace().join("crates/lab/src");
    let mut missing = Vec::new();
    for bench in ["lock", "pg", "latency", "net"] {
        for file in ["mod.rs", "options.rs", "run.rs"] {
            if !src.join(bench).join(file).is_file() {
                missing.push(format!("crates/lab/src/{bench}/{file}"));
            }
        }
    }
    for file in [
        "pg/huge.rs",
        "pg/builds.rs",
        "check/mod.rs",
        "simrun/mod.rs",
    ] {
        if !src.join(file).is_file() {
            missing.push(format!("crates/lab/src/{file}"));
        }
    }
    assert!(
        missing.is_empty(),
        "lab's folders: missing {}",
        missing.join(", ")
    );

    // The top level holds only the folders and what every bench shares.
    let mut top: Vec<String> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    let allowed = [
        "check",
        "latency",
        "lib.rs",
        "lock",
        "matrix",
        "net",
        "options.rs",
        "pg",
        "simrun",
    ];
    let extra: Vec<&String> = top
        .iter()
        .filter(|n| !allowed.contains(&n.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "crates/lab/src holds one folder per bench (and check/, simrun/, matrix/, options.rs); move {extra:?} \
         into its bench's folder, or into osutil/hostfacts when it is result-file code"
    );

    // Finding and reading result files (osutil::input::files), filling the envelope from the host
    // (hostfacts::envelope), naming and writing the file (hostfacts::envelope, osutil::output) are not
    // lab's: lab calls them. (A bench still reads what it is given through them: sim --like.)
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut offenders = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            for word in [
                "fn json_files",
                "fn load_document",
                "fn read_all",
                "fn default_path",
                "fn unix_now",
                "fn write_json",
                "host_facts(",
                "read_regular(",
                "write_atomic(",
            ] {
                if line.contains(word) {
                    offenders.push(format!("{}:{}: {word}", shown(&f), n + 1));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "result-file code in lab:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn compare_is_computed_outside_report() {
    let src = workspace().join("crates/report/src");
    for gone in ["compare.rs", "pooled.rs", "compare_input.rs"] {
        assert!(
            !src.join(gone).exists(),
            "crates/report/src/{gone}: comparing is the compare crate's, report renders its Comparison"
        );
    }
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut offenders = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // Up to the tests: a snapshot test may build its comparison through the compare crate.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            // The statistics a comparison is made of: report shows figures, it does not judge them.
            for word in [
                "stats::judge",
                "stats::compare",
                "compare::run(",
                "compare::compare(",
            ] {
                if line.contains(word) && !line.trim_start().starts_with("//") {
                    offenders.push(format!("{}:{}: {word}", shown(&f), n + 1));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "compare computed in report:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn guide_is_a_manual_under_45_kb() {
    let len_bytes = std::fs::metadata(workspace().join("GUIDE.md"))
        .unwrap()
        .len();
    assert!(
        len_bytes < MAX_GUIDE_BYTES,
        "GUIDE.md is {len_bytes} bytes, {MAX_GUIDE_BYTES} at most: move measurements and dated findings to \
         docs/notes (one dated file per topic, listed in docs/notes/README.md) and long references to docs/, \
         each linked from the GUIDE"
    );
}

/// A released section's heading, `## X.Y.Z - YYYY-MM-DD`: its version, or None.
fn released_version(heading: &str) -> Option<&str> {
    let (version, date) = heading.strip_prefix("## ")?.split_once(" - ")?;
    let numbers: Vec<&str> = version.split('.').collect();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let date_parts: Vec<&str> = date.split('-').collect();
    let dated =
        date_parts.iter().all(|p| digits(p)) && date_parts.iter().map(|p| p.len()).eq([4, 2, 2]);
    (numbers.len() == 3 && numbers.iter().all(|n| digits(n)) && dated).then_some(version)
}

#[test]
fn changelog_has_released_versions_the_latest_the_workspaces() {
    let text = std::fs::read_to_string(workspace().join("CHANGELOG.md")).unwrap();
    let headings: Vec<&str> = text.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(
        headings.first(),
        Some(&"## Unreleased"),
        "CHANGELOG.md opens with a `## Unreleased` section for what is not released yet"
    );
    let malformed: Vec<&&str> = headings[1..]
        .iter()
        .filter(|h| released_version(h).is_none())
        .collect();
    assert!(
        malformed.is_empty(),
        "CHANGELOG.md: after `## Unreleased`, each section is a release, `## X.Y.Z - YYYY-MM-DD`: {malformed:?}"
    );
    let latest = headings.get(1).and_then(|h| released_version(h));
    assert_eq!(
        latest,
        Some(env!("CARGO_PKG_VERSION")),
        "CHANGELOG.md's latest release is the workspace's version (Cargo.toml [workspace.package]): a release \
         moves Unreleased's entries under `## X.Y.Z - DATE` and sets that version, which the package carries"
    );
}
