//! A real `bench pg` over two PostgreSQL builds (docs/results/pg-builds/vm-7.2-rseq-lazy.json: 18 and
//! 18+rseq-spinlock in the slice-extension guest under `lazy`, docs/pg-builds.md) through the table, the
//! Markdown and the HTML: every row names its build, the builds are listed with their patches, and the
//! rseq-spinlock build's counters are summed.

use results::pg::PgResult;
use results::Document;

fn doc() -> PgResult {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/results/pg-builds/vm-7.2-rseq-lazy.json");
    match Document::from_text(&std::fs::read_to_string(p).unwrap()).unwrap() {
        Document::Pg(d) => d,
        other => panic!("a bench pg result, not {:?}", other.kind()),
    }
}

#[test]
fn table_names_each_rows_build_and_sums_the_rseq_counters() {
    let r = doc();
    let text = report::pg_table::render(&r);
    assert!(
        text.contains("\nbuilds:\n  18: PostgreSQL 18.6; no patches;"),
        "{text}"
    );
    assert!(
        text.contains("  18+rseq-spinlock: PostgreSQL 18.6; patches rseq-spinlock (sha256 "),
        "{text}"
    );
    let rows: Vec<&str> = text.lines().filter(|l| l.contains(" 16MB ")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    assert!(rows[0].starts_with("18 "), "{text}");
    assert!(rows[1].starts_with("18+rseq-spinlock "), "{text}");
    let grants: u64 = r
        .cells
        .iter()
        .flat_map(|c| &c.reps)
        .filter_map(|x| x.rseq_slice.as_ref())
        .map(|s| s.grants)
        .sum();
    assert!(grants > 0, "the guest's kernel granted extensions");
    assert!(
        text.contains("18+rseq-spinlock: 2 runs: ") && text.contains(&format!(" {grants} grants ")),
        "{text}"
    );
    insta::assert_snapshot!("pg-builds-table", text);
    insta::assert_snapshot!("pg-builds-markdown", report::pg_table::markdown(&r));
}

#[test]
fn html_lists_the_builds_and_labels_cells_by_build() {
    let html = report::html::render(
        &[report::html::Doc {
            label: "vm-7.2-rseq-lazy.json".into(),
            doc: Document::Pg(doc()),
        }],
        None,
        "2026-11-26 06:00 UTC",
    );
    assert!(html.contains("<li>18+rseq-spinlock: PostgreSQL 18.6; patches rseq-spinlock"));
    assert!(html.contains("<th>build</th>"));
    assert!(html.contains("<td>18+rseq-spinlock</td>"));
    assert!(html.contains("rseq time-slice extension"));
}

/// With several builds and `--diagnose`, every diagnosis line names the build its run belongs to (the lines
/// of 18+rseq-spinlock were indistinguishable from stock 18's before).
#[test]
fn diagnosis_lines_name_their_build() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/results/pg-builds/vm-7.2-rseq-lazy-3builds.json");
    let Document::Pg(r) = Document::from_text(&std::fs::read_to_string(p).unwrap()).unwrap() else {
        panic!("a bench pg result")
    };
    let text = report::pg_table::render(&r);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" round ") && l.contains("spinlock "))
        .collect();
    // 3 builds x 2 huge_pages settings x 5 rounds.
    assert_eq!(lines.len(), 30, "{text}");
    for b in ["18+futex-waitlist", "18+rseq-spinlock"] {
        let n = lines
            .iter()
            .filter(|l| l.trim_start().starts_with(&format!("{b} ")))
            .count();
        assert_eq!(n, 10, "{b}: {text}");
    }
    let stock = lines
        .iter()
        .filter(|l| l.trim_start().starts_with("18 sb "))
        .count();
    assert_eq!(stock, 10, "{text}");
}
