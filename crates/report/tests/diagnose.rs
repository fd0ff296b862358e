//! A real diagnosis (docs/results/diagnose-pg15-4k-reconnect.json, the GUIDE's example) through every
//! exporter: the table (snapshot, 80 columns), Prometheus (snapshot, parsed by an exposition-format
//! parser), and the HTML section.

use results::diagnose::DiagnoseResult;
use results::Document;

fn doc() -> DiagnoseResult {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/results/diagnose-pg15-4k-reconnect.json");
    match Document::from_text(&std::fs::read_to_string(p).unwrap()).unwrap() {
        Document::Diagnose(d) => *d,
        other => panic!("a diagnosis, not {:?}", other.kind()),
    }
}

#[test]
fn table_names_the_instance_the_backing_and_the_verdict() {
    let text = report::diagnose_table::render(&doc(), report::Style { color: false }, 80);
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "over 80 columns: {line:?}");
    }
    assert!(text.contains("on 4 KB pages"), "{text}");
    assert!(text.contains("Verdict: the lock-holder-preemption symptom is not present"));
    assert!(text.contains("ok: 0 in-kernel preemptions under 'none'"));
    insta::assert_snapshot!("diagnose-table", text);
}

#[test]
fn prometheus_parses_and_has_every_gauge() {
    let text = report::diagnose_prom::render(&doc());
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid exposition format");
    let names: Vec<&str> = scrape.samples.iter().map(|s| s.metric.as_str()).collect();
    for want in [
        "preemptlab_diagnose_success",
        "preemptlab_diagnose_symptom",
        "preemptlab_diagnose_spinlock_share_ratio",
        "preemptlab_diagnose_segment_faults_per_second",
        "preemptlab_diagnose_involuntary_switches_per_second",
        "preemptlab_diagnose_runqueue_wait_seconds_per_second",
        "preemptlab_diagnose_segment_page_size_bytes",
    ] {
        assert!(names.contains(&want), "{want} missing: {text}");
    }
    insta::assert_snapshot!("diagnose-prometheus", text);
    let failed = report::diagnose_prom::render_failure("0.1.0", 0);
    assert!(failed.contains("preemptlab_diagnose_success 0"), "{failed}");
}
