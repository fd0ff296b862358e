//! Real runs with the preemption model as an axis (docs/results/vm/2026-11-27-axis/: `--switch-preempt
//! none,lazy` and `none,full` in 6.18 guests) through each bench's table, Markdown and the HTML page: a
//! `preempt` column names each row's model, and the header names the models with the host's own.

use results::Document;

fn load(name: &str) -> Document {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/results/vm/2026-11-27-axis")
        .join(name);
    Document::from_text(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The first word of every table row under the header line that starts with `first`.
fn models_of(text: &str, first: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(first));
    assert!(lines.next().is_some(), "no header {first:?}: {text}");
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

#[test]
fn every_bench_table_has_a_preempt_column() {
    let Document::Lock(r) = load("lock-b2-lazy.json") else {
        panic!()
    };
    let t = report::lock_table::render(&r);
    assert!(
        t.contains("preemption none and lazy per cell, the host's own lazy"),
        "{t}"
    );
    assert_eq!(models_of(&t, "preempt"), ["none", "none", "lazy", "lazy"]);
    assert!(report::lock_table::markdown(&r).starts_with("| preempt | lock |"));

    let Document::Pg(r) = load("pg-b1-none.json") else {
        panic!()
    };
    let t = report::pg_table::render(&r);
    assert_eq!(models_of(&t, "preempt"), ["none", "none", "lazy", "lazy"]);
    // `vs first`: each configuration's first model is its base.
    assert_eq!(t.matches(" base ").count(), 2, "{t}");

    let Document::Latency(r) = load("lat-axis.json") else {
        panic!()
    };
    let t = report::latency_table::render(&r, false);
    assert!(t.contains("none and full per cell"), "{t}");
    let m = models_of(&t, "preempt");
    assert_eq!(
        (m.len(), &m[0], &m[m.len() - 1]),
        (8, &"none".to_string(), &"full".to_string())
    );

    let Document::Net(r) = load("net-axis.json") else {
        panic!()
    };
    let t = report::net_table::render(&r, false);
    assert_eq!(models_of(&t, "preempt"), ["none", "none", "lazy", "lazy"]);
    assert!(report::net_table::render(&r, true).starts_with("| preempt | test |"));
}
