//! Every exporter, on every fixture host: snapshots of the table, JSON and Prometheus output, and the
//! Prometheus text checked by a real exposition-format parser.

use std::path::PathBuf;

use hostfacts::Host;
use report::Style;
use results::host::audit::Audit;

const FIXTURES: [&str; 9] = [
    "this-machine-pg15-4k",
    "linux-7.2-preempt-none",
    "linux-7.2-kern-log-no-debugfs",
    "linux-7.0-lazy-debugfs",
    "linux-7.0-debugfs-refused",
    "debian-6.1-voluntary",
    "preempt-rt",
    "hugepages-1g-thp-always",
    "linux-6.18-lazy-warn-header",
];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn audit(name: &str) -> Audit {
    let mut a = hostfacts::audit(&Host::at(fixture(name)), &[]);
    a.generated_unix_s = 0;
    a.sysroot = Some(format!("tests/fixtures/{name}"));
    a
}

#[test]
fn table_snapshots_fit_80_columns() {
    for name in FIXTURES {
        let a = audit(name);
        let text = report::audit_table::render(&a, Style { color: false }, 80);
        // Every fix command appears whole on one line, ready to paste (regression, issue 25: they were
        // wrapped at 80 columns); only such a line may be longer than 80 columns.
        let commands: Vec<&str> = a
            .findings
            .iter()
            .flat_map(|f| &f.fix)
            .map(|x| report::markup::split_command(x).0)
            .filter(|c| !c.is_empty())
            .collect();
        for c in &commands {
            assert!(
                text.lines().any(|l| l.contains(c)),
                "{name}: {c:?} is not whole on a line"
            );
        }
        for line in text.lines() {
            assert!(
                line.chars().count() <= 80 || commands.iter().any(|c| line.ends_with(c)),
                "{name}: line over 80 columns: {line:?}"
            );
        }
        insta::assert_snapshot!(format!("table-{name}"), text);
    }
}

#[test]
fn colour_only_when_asked() {
    let a = audit("linux-7.0-lazy-debugfs");
    assert!(!report::audit_table::render(&a, Style { color: false }, 80).contains('\x1b'));
    assert!(report::audit_table::render(&a, Style { color: true }, 80).contains("\x1b[1;31m"));
}

#[test]
fn json_snapshots_and_round_trip() {
    for name in FIXTURES {
        let a = audit(name);
        let text = report::json(&a);
        let back: Audit = serde_json::from_str(&text).expect("the JSON reads back into the schema");
        assert_eq!(back, a);
        insta::assert_snapshot!(format!("json-{name}"), text);
    }
}

fn value(scrape: &prometheus_parse::Scrape, metric: &str, label: (&str, &str)) -> Option<f64> {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && s.labels.get(label.0) == Some(label.1))
        .map(|s| match s.value {
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v)
            | prometheus_parse::Value::Counter(v) => v,
            _ => f64::NAN,
        })
}

#[test]
fn prometheus_parses_and_says_the_right_things() {
    for name in FIXTURES {
        let a = audit(name);
        let text = report::prometheus::render(&a);
        insta::assert_snapshot!(format!("prom-{name}"), text);
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines)
            .unwrap_or_else(|e| panic!("{name}: unparseable exposition: {e}"));
        // Every sample is named preemptlab_*, every family has HELP, no label clashes with the labels the
        // scrape adds, and nothing repeats node_exporter's meminfo collector.
        for s in &scrape.samples {
            assert!(s.metric.starts_with("preemptlab_"), "{}", s.metric);
            assert!(
                scrape.docs.contains_key(&s.metric),
                "{name}: no HELP for {}",
                s.metric
            );
            for clash in ["instance", "job"] {
                assert!(
                    s.labels.get(clash).is_none(),
                    "{name}: {} has {clash}",
                    s.metric
                );
            }
            for dup in ["memory_total", "page_tables_bytes", "hugepages_"] {
                assert!(
                    !s.metric.starts_with(&format!("preemptlab_{dup}")),
                    "{name}: {} repeats node_memory_*",
                    s.metric
                );
            }
        }
        let scalar = |m: &str| {
            scrape
                .samples
                .iter()
                .find(|s| s.metric == m)
                .map(|s| match s.value {
                    prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
                    _ => f64::NAN,
                })
        };
        assert_eq!(scalar("preemptlab_audit_success"), Some(1.0), "{name}");
        assert_eq!(
            scalar("preemptlab_audit_timestamp_seconds"),
            Some(0.0),
            "{name}"
        );
        assert_eq!(
            scalar("preemptlab_at_risk"),
            Some(if a.verdict.as_str() == "at-risk" {
                1.0
            } else {
                0.0
            }),
            "{name}"
        );
        assert_eq!(
            value(
                &scrape,
                "preemptlab_preempt_model_info",
                ("model", a.kernel.preemption.model.as_str())
            ),
            Some(1.0)
        );
        assert_eq!(
            value(
                &scrape,
                "preemptlab_audit_verdict",
                ("verdict", a.verdict.as_str())
            ),
            Some(1.0)
        );
        let findings = scrape
            .samples
            .iter()
            .filter(|s| s.metric == "preemptlab_finding_info")
            .count();
        assert_eq!(findings, a.findings.len(), "one series per finding");
    }
    let a = audit("linux-7.0-lazy-debugfs");
    let text = report::prometheus::render(&a);
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    assert_eq!(
        value(
            &scrape,
            "preemptlab_pg_on_huge_pages",
            ("postmaster_pid", "7345")
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &scrape,
            "preemptlab_pg_instance_info",
            ("huge_pages", "try")
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&scrape, "preemptlab_finding_info", ("id", "preempt-4k-shm")),
        Some(1.0)
    );
    // The pool-too-small finding and the shortfall gauge agree.
    let a = audit("linux-7.0-debugfs-refused");
    let short = a
        .findings
        .iter()
        .find(|f| f.id == "hugetlb-pool-too-small")
        .and_then(|f| f.instance)
        .expect("the fixture has a pool too small");
    let scrape = prometheus_parse::Scrape::parse(
        report::prometheus::render(&a)
            .lines()
            .map(|l| Ok(l.to_string())),
    )
    .unwrap();
    let shortfall = value(
        &scrape,
        "preemptlab_pg_huge_pages_shortfall",
        ("postmaster_pid", &short.to_string()),
    )
    .expect("a shortfall series for the instance");
    assert!(shortfall > 0.0, "{shortfall}");
    // The default-size pool is node_memory_HugePages_*; only the other sizes are here.
    let a = audit("hugepages-1g-thp-always");
    assert_eq!(a.memory.default_huge_page_kib.get(), Some(&(1024 * 1024)));
    let scrape = prometheus_parse::Scrape::parse(
        report::prometheus::render(&a)
            .lines()
            .map(|l| Ok(l.to_string())),
    )
    .unwrap();
    assert_eq!(
        value(
            &scrape,
            "preemptlab_hugetlb_pool_pages",
            ("page_size_bytes", "2097152")
        ),
        Some(0.0)
    );
    assert_eq!(
        value(
            &scrape,
            "preemptlab_hugetlb_pool_pages",
            ("page_size_bytes", "1073741824")
        ),
        None
    );
}

#[test]
fn prometheus_failure_file_parses() {
    let text = report::prometheus::render_failure("0.1.0", 1_700_000_000);
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    let names: Vec<&str> = scrape.samples.iter().map(|s| s.metric.as_str()).collect();
    assert_eq!(
        names,
        [
            "preemptlab_audit_success",
            "preemptlab_audit_timestamp_seconds",
            "preemptlab_audit_info"
        ]
    );
    assert!(text.contains("preemptlab_audit_success 0\n"), "{text}");
    assert!(
        text.contains("preemptlab_audit_timestamp_seconds 1700000000\n"),
        "{text}"
    );
}

#[test]
fn fixture_verdicts() {
    use results::host::kernel::PreemptModel::*;
    let expect = [
        (
            "this-machine-pg15-4k",
            None,
            "warn",
            &["huge-pages-try-fallback", "preempt-upgrade-4k"][..],
        ),
        (
            "linux-7.0-lazy-debugfs",
            Lazy,
            "at-risk",
            &["preempt-4k-shm", "huge-pages-try-fallback"][..],
        ),
        (
            "linux-7.0-debugfs-refused",
            Lazy,
            "at-risk",
            &[
                "hugetlb-pool-too-small",
                "preempt-4k-shm",
                "hugetlb-pool-unused",
            ][..],
        ),
        (
            "debian-6.1-voluntary",
            Voluntary,
            "ok",
            &["thp-always-anon", "no-instance"][..],
        ),
        ("preempt-rt", Rt, "ok", &["no-instance"][..]),
        (
            "hugepages-1g-thp-always",
            Full,
            "warn",
            &["hugetlb-pool-unused", "thp-always-anon", "thp-always-shmem"][..],
        ),
    ];
    for (name, model, verdict, ids) in expect {
        let a = audit(name);
        assert_eq!(a.kernel.preemption.model, model, "{name}");
        assert_eq!(a.verdict.as_str(), verdict, "{name}");
        for id in ids {
            assert!(
                a.findings.iter().any(|f| f.id == *id),
                "{name}: expected finding {id}, got {:?}",
                a.findings.iter().map(|f| &f.id).collect::<Vec<_>>()
            );
        }
    }
    // The pool-too-small finding is critical because huge_pages = on comes from postgresql.auto.conf.
    let a = audit("linux-7.0-debugfs-refused");
    let f = a
        .findings
        .iter()
        .find(|f| f.id == "hugetlb-pool-too-small")
        .unwrap();
    assert_eq!(f.severity, results::host::findings::Severity::Critical);
    assert_eq!(
        a.instances[0].settings["huge_pages"].source,
        "/tmp/plab-manual/data/postgresql.auto.conf"
    );
}
