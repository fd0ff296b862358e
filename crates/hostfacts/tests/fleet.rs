//! The fleet answer over the fixture hosts' audits: order, fixes (the same as `hugepages`), wasted page
//! tables, stale, corrupt and superseded files; the table and the JSON.

use std::path::PathBuf;

use hostfacts::fleet::{self, Loaded, Options};
use hostfacts::Host;
use report::Style;
use results::host::audit::Audit;
use results::host::findings::Verdict;
use results::host::fleet::Fleet;

const NOW: u64 = 1_800_000_000;
const DAY: u64 = 86_400;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

/// The audit of a fixture host, run `age_s` before NOW.
fn audit(name: &str, age_s: u64) -> Audit {
    let mut a = hostfacts::audit(&Host::at(fixture(name)), &[]);
    a.generated_unix_s = NOW - age_s;
    a.sysroot = Some(format!("tests/fixtures/{name}"));
    a
}

fn opts() -> Options {
    Options {
        now_unix_s: NOW,
        stale_after_s: fleet::DEFAULT_STALE_AFTER_S,
    }
}

fn load(files: &[(&str, String)]) -> Fleet {
    let loaded: Vec<Loaded> = files
        .iter()
        .map(|(f, text)| fleet::load(f, text, &opts()))
        .collect();
    fleet::combine(loaded, &opts())
}

fn json(a: &Audit) -> String {
    serde_json::to_string(a).unwrap()
}

/// Five fixture hosts (one stale), one corrupt file, one file that is JSON but no audit.
fn mixed() -> Fleet {
    load(&[
        ("a/debian.json", json(&audit("debian-6.1-voluntary", 3600))),
        ("a/rt.json", json(&audit("preempt-rt", 10 * DAY))),
        ("a/thp.json", json(&audit("hugepages-1g-thp-always", 60))),
        ("a/lazy.json", json(&audit("linux-7.0-lazy-debugfs", 60))),
        ("a/vm.json", json(&audit("this-machine-pg15-4k", 60))),
        ("a/corrupt.json", "{\"schema_version\": 1, \"hostn".into()),
        ("a/other.json", "{\"results\": []}".into()),
    ])
}

#[test]
fn at_risk_host_first_with_the_hugepages_fix() {
    let f = mixed();
    assert_eq!(f.totals.files, 7);
    assert_eq!(f.totals.hosts, 5);
    assert_eq!(
        (f.totals.at_risk, f.totals.warn, f.totals.ok),
        (1, 2, 2),
        "{:?}",
        f.hosts
    );
    assert_eq!(f.hosts[0].host, "linux-7.0-lazy-debugfs");
    assert_eq!(f.hosts[0].verdict, Verdict::AtRisk);
    let ranks: Vec<u8> = f
        .hosts
        .iter()
        .map(|h| fleet::verdict_rank(h.verdict))
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{ranks:?}");

    // The fix is the audit's own host target, the one `audit`, `hugepages` and `check` print.
    let a = audit("linux-7.0-lazy-debugfs", 0);
    let first = &f.not_on_huge_pages[0];
    assert_eq!(first.host, "linux-7.0-lazy-debugfs");
    assert_eq!(
        a.pool_targets[0].commands[0],
        "sysctl -w vm.nr_hugepages=549"
    );
    assert!(
        first.fix[0].starts_with("sysctl -w vm.nr_hugepages=549   # 549 pages of 2.00 MiB for this host: this instance needs 549"),
        "{}",
        first.fix[0]
    );
    let s = first.sizing.as_ref().unwrap();
    assert_eq!(
        (s.page_size_kib, s.pool_target, s.basis.as_str()),
        (2048, 549, "segment")
    );
}

#[test]
fn wasted_page_tables_sum_the_4k_instances() {
    let f = mixed();
    let want: u64 = ["linux-7.0-lazy-debugfs", "this-machine-pg15-4k"]
        .iter()
        .map(|n| audit(n, 0).instances[0].page_tables_kib)
        .sum();
    assert_eq!(f.totals.instances_4k, 2);
    assert_eq!(f.totals.page_tables_4k_kib, want);
    assert!(f.totals.page_tables_4k_full_touch_kib > want);
    assert_eq!(f.not_on_huge_pages.len(), 2);
}

#[test]
fn groups_by_kernel_and_model_at_risk_first() {
    let f = mixed();
    assert_eq!(f.groups.len(), 5);
    assert_eq!(f.groups[0].kernel, "7.0.2");
    assert_eq!(f.groups[0].preempt_model.as_str(), "lazy");
    assert_eq!(f.groups.iter().map(|g| g.hosts).sum::<usize>(), 5);
}

#[test]
fn stale_and_bad_files_are_listed_not_fatal() {
    let f = mixed();
    assert_eq!(f.stale.len(), 1);
    assert_eq!(f.stale[0].host, "preempt-rt");
    assert_eq!(f.stale[0].age_s, (10 * DAY) as i64);
    assert!(f.hosts.iter().any(|h| h.host == "preempt-rt" && h.stale));
    assert_eq!(f.failed.len(), 2);
    assert_eq!(f.failed[0].file, "a/corrupt.json");
    assert!(
        f.failed[0].reason.starts_with("not JSON"),
        "{}",
        f.failed[0].reason
    );
    assert!(
        f.failed[1].reason.contains("not a preemptlab audit"),
        "{}",
        f.failed[1].reason
    );
}

#[test]
fn a_newer_audit_of_the_same_host_supersedes_the_older() {
    let f = load(&[
        ("old.json", json(&audit("linux-7.0-lazy-debugfs", 5 * DAY))),
        ("new.json", json(&audit("linux-7.0-lazy-debugfs", 60))),
    ]);
    assert_eq!(f.totals.hosts, 1);
    assert_eq!(f.hosts[0].file, "new.json");
    assert!(f.stale.is_empty());
    assert_eq!(f.superseded.len(), 1);
    assert_eq!(f.superseded[0].file, "old.json");
    assert_eq!(f.superseded[0].newer_file, "new.json");
}

#[test]
fn two_instances_on_one_host_share_one_pool() {
    let mut a = audit("linux-7.0-debugfs-refused", 60);
    let mut second = a.instances[0].clone();
    second.postmaster_pid += 1;
    a.instances.push(second);
    a.pool_targets = hostfacts::hugepages::target::for_host(&a.memory, &a.instances);
    // The same host audited by a version that did not record its pool targets: fleet computes them.
    let mut old = a.clone();
    old.pool_targets.clear();
    old.hostname.value = Some("old".into());
    for f in [
        load(&[("two.json", json(&a))]),
        load(&[("old.json", json(&old))]),
    ] {
        assert_eq!(f.not_on_huge_pages.len(), 2);
        // Each needs 549 pages (538 + 11 margin); the host 2 x 549, plus nothing committed (100 free of 100).
        for i in &f.not_on_huge_pages {
            let s = i.sizing.as_ref().unwrap();
            assert_eq!((s.pages_needed, s.pool_target), (549, 1098));
            assert!(
                i.fix[0].starts_with("sysctl -w vm.nr_hugepages=1098   # 1098 pages of 2.00 MiB for this host: this instance needs 549 "),
                "{}",
                i.fix[0]
            );
            assert!(
                i.fix[0].ends_with(", the other instance 549"),
                "{}",
                i.fix[0]
            );
        }
        // The host's row carries the target too (instances already on huge pages have no fix to show it).
        assert_eq!(
            f.hosts[0].pools,
            vec![results::host::fleet::HostPool {
                page_size_kib: 2048,
                target: 1098,
                pool_now: Some(100),
                shortfall: 998
            }]
        );
    }
}

#[test]
fn no_files_no_hosts() {
    let f = load(&[]);
    assert_eq!(f.totals.files, 0);
    assert!(f.hosts.is_empty() && f.not_on_huge_pages.is_empty());
    let t = report::fleet_table::render(&f, Style { color: false }, 80);
    assert!(t.contains("0 hosts from 0 files"), "{t}");
}

#[test]
fn table_names_the_at_risk_host_first_and_its_fix() {
    let f = mixed();
    let t = report::fleet_table::render(&f, Style { color: false }, 80);
    let hosts: Vec<&str> = t
        .lines()
        .skip_while(|l| !l.starts_with("Hosts, at risk first"))
        .skip(2)
        .take(10)
        .collect();
    assert_eq!(hosts[0], "  at-risk  kernel 7.0.2  lazy", "{t}");
    assert!(hosts[1].starts_with("    linux-7.0-lazy-debugfs  "), "{t}");
    assert!(hosts[1].contains("1 crit, 1 warn  preempt-4k-shm"), "{t}");
    assert!(hosts[2].starts_with("  warn  kernel "), "{t}");
    assert!(hosts[6].starts_with("  ok  kernel "), "{t}");
    assert!(t.contains("preempt-rt (stale 10.0d)"), "{t}");
    let fix_line = t
        .lines()
        .find(|l| l.contains("linux-7.0-lazy-debugfs") && l.contains("sysctl"))
        .unwrap_or_else(|| panic!("no fix line: {t}"));
    assert!(
        fix_line.ends_with("sysctl -w vm.nr_hugepages=549"),
        "{fix_line}"
    );
    assert!(t.contains("a/corrupt.json: not JSON"), "{t}");
    assert!(
        t.contains("5 hosts from 7 files: 1 at risk, 2 warn, 2 ok; 1 stale (older than 2.0d)"),
        "{t}"
    );
    // Every line but the fix table fits 80 columns.
    for l in t
        .lines()
        .filter(|l| !l.contains("sysctl") && !l.contains("page tables  "))
    {
        assert!(l.chars().count() <= 80, "{l:?}");
    }
    assert!(!t.contains('\x1b'));
}

#[test]
fn markdown_has_every_section() {
    let m = report::fleet_table::markdown(&mixed());
    for h in [
        "### Hosts, at risk first",
        "### By kernel and preemption model",
        "### PostgreSQL not on huge pages, and the fix",
        "### Stale audits (older than 2.0d)",
        "### Files that are not a readable audit",
    ] {
        assert!(m.contains(h), "{h}: {m}");
    }
    assert!(
        m.contains("| at-risk | 7.0.2 | lazy | linux-7.0-lazy-debugfs |"),
        "{m}"
    );
    assert!(m.contains("`sysctl -w vm.nr_hugepages=549`"), "{m}");
}

#[test]
fn json_is_the_schema_and_reads_back() {
    let f = mixed();
    let text = report::json(&f);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["hosts"][0]["host"], "linux-7.0-lazy-debugfs");
    assert_eq!(v["hosts"][0]["verdict"], "at-risk");
    assert_eq!(v["hosts"][0]["preempt_model"], "lazy");
    assert!(v["not_on_huge_pages"][0]["fix"][0]
        .as_str()
        .unwrap()
        .starts_with("sysctl -w vm.nr_hugepages=549   # "));
    assert_eq!(v["not_on_huge_pages"][0]["sizing"]["pool_target"], 549);
    assert_eq!(v["hosts"][0]["pools"][0]["target"], 549);
    assert_eq!(v["totals"]["failed"], 2);
    assert_eq!(v["stale"][0]["host"], "preempt-rt");
    let back: Fleet = serde_json::from_str(&text).unwrap();
    assert_eq!(back, f);
}

#[test]
fn table_and_markdown_snapshots() {
    let f = mixed();
    insta::assert_snapshot!(
        "fleet-table",
        report::fleet_table::render(&f, Style { color: false }, 80)
    );
    insta::assert_snapshot!("fleet-markdown", report::fleet_table::markdown(&f));
}

/// `report` over several hosts' audits has a fleet section: the at-risk host first, each instance's fix.
#[test]
fn report_page_has_a_fleet_section_for_several_audits() {
    use results::Document;
    let docs: Vec<report::html::Doc> = [
        "debian-6.1-voluntary",
        "linux-7.0-lazy-debugfs",
        "this-machine-pg15-4k",
    ]
    .iter()
    .map(|n| report::html::Doc {
        label: format!("{n}.json"),
        doc: Document::from_text(&json(&audit(n, 0))).unwrap(),
    })
    .collect();
    let page_of = |docs: &[report::html::Doc]| {
        let audits: Vec<(&str, &Audit)> = docs
            .iter()
            .filter_map(|d| match &d.doc {
                Document::Audit(a) => Some((d.label.as_str(), &**a)),
                _ => None,
            })
            .collect();
        let f = fleet::of_several(&audits);
        report::html::render(docs, f.as_ref(), "2026-11-22 00:00:00")
    };
    let page = page_of(&docs);
    let fleet = &page[page.find("<h2>Fleet</h2>").expect("a fleet section")..];
    let first_row = &fleet[fleet.find("<td>").unwrap()..];
    assert!(
        first_row.starts_with("<td>linux-7.0-lazy-debugfs</td><td>at-risk</td>"),
        "{first_row:.200}"
    );
    let target = audit("linux-7.0-lazy-debugfs", 0).pool_targets[0].target;
    assert!(fleet.contains(&format!("sysctl -w vm.nr_hugepages={target}")));
    // One audit alone is no fleet.
    let page = page_of(&docs[..1]);
    assert!(!page.contains("<h2>Fleet</h2>"));
}

/// The fleet's Markdown, HTML and table exporters are its section renderers, on a fixture host's audit.
#[test]
fn fleet_in_markdown_and_html() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/linux-7.0-lazy-debugfs");
    let audit = hostfacts::audit(&hostfacts::Host::at(root), &[]);
    let f = fleet::of_audits(&[("a.json", &audit)]);
    let l = report::export::Layout::default();
    let html = report::export::export(report::export::Format::Html, &l, &f).unwrap();
    assert_eq!(html, report::fleet_table::html(&f));
    assert!(html.contains('<'), "{html}");
    assert_eq!(
        report::export::export(report::export::Format::Markdown, &l, &f).unwrap(),
        report::fleet_table::markdown(&f)
    );
    assert_eq!(
        report::export::export(report::export::Format::Table, &l, &f).unwrap(),
        report::fleet_table::render(&f, l.style, l.width)
    );
}

/// A diagnosis among the audits (docs/results' real one) is a row of its own, not a failed audit; of two
/// from one host the newer counts.
#[test]
fn diagnoses_are_shown_for_hosts_that_sent_one() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/results/diagnose-pg15-4k-reconnect.json"),
    )
    .unwrap();
    // The same diagnosis, started later (a 1 put before its start time).
    let later = text.replacen("\"started_unix_s\": ", "\"started_unix_s\": 1", 1);
    let f = load(&[
        ("a/lazy.json", json(&audit("linux-7.0-lazy-debugfs", 60))),
        ("a/diag.json", text),
        ("a/diag-later.json", later),
    ]);
    assert!(f.failed.is_empty(), "{:?}", f.failed);
    assert_eq!(f.diagnoses.len(), 1, "{:?}", f.diagnoses);
    let d = &f.diagnoses[0];
    assert_eq!(d.file, "a/diag-later.json", "the later start wins");
    assert_eq!(d.segment_page_kib, Some(4));
    assert_eq!(d.symptom, results::diagnose::Symptom::NotPresent);
    assert!(d.client_samples > 200, "{d:?}");
}

/// Regression: diagnoses were grouped by the kernel's host name, so of two hosts named alike (`localhost`,
/// cloned images) only the newer diagnosis was shown. They are told apart by the host ID the diagnosis
/// carries, each shown with the start of it; one without an ID (an older file) still goes by its name.
#[test]
fn two_diagnosed_hosts_sharing_a_name_stay_two_regression() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/results/diagnose-pg15-4k-reconnect.json"),
    )
    .unwrap();
    let as_host = |id: Option<&str>, started_unix_s: u64| {
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["host"]["hostname"]["value"] = "localhost".into();
        match id {
            Some(id) => {
                v["host"]["host_id"] = serde_json::json!({"value": id, "source": "/etc/machine-id"})
            }
            None => assert!(v["host"]
                .as_object_mut()
                .unwrap()
                .remove("host_id")
                .is_none()),
        }
        v["started_unix_s"] = started_unix_s.into();
        serde_json::to_string(&v).unwrap()
    };
    let (a, b) = (
        "0123456789abcdef0123456789abcdef",
        "fedcba9876543210fedcba9876543210",
    );
    let f = load(&[
        ("d/a.json", as_host(Some(a), 1_000)),
        ("d/b.json", as_host(Some(b), 2_000)),
        ("d/a-again.json", as_host(Some(a), 1_500)),
    ]);
    assert!(f.failed.is_empty(), "{:?}", f.failed);
    let mut rows: Vec<(&str, Option<&str>, &str)> = f
        .diagnoses
        .iter()
        .map(|d| (d.host.as_str(), d.host_id.as_deref(), d.file.as_str()))
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            ("localhost (host ID 01234567)", Some(a), "d/a-again.json"),
            ("localhost (host ID fedcba98)", Some(b), "d/b.json"),
        ]
    );
    let table = report::fleet_table::render(&f, Style { color: false }, 120);
    assert!(table.contains("localhost (host ID fedcba98)"), "{table}");

    // An ID that is not hex digits (a hand-made or damaged file) is shown by its characters, no panic.
    let f = load(&[
        ("d/a.json", as_host(Some("ééééééééé"), 1_000)),
        ("d/b.json", as_host(Some(b), 2_000)),
    ]);
    assert!(
        f.diagnoses
            .iter()
            .any(|d| d.host == "localhost (host ID éééééééé)"),
        "{:?}",
        f.diagnoses
    );

    // Diagnoses without a host ID (written before it was kept) still load, one host per name.
    let f = load(&[
        ("d/old.json", as_host(None, 1_000)),
        ("d/old-later.json", as_host(None, 2_000)),
    ]);
    assert!(f.failed.is_empty(), "{:?}", f.failed);
    assert_eq!(f.diagnoses.len(), 1, "{:?}", f.diagnoses);
    assert_eq!(f.diagnoses[0].host, "localhost");
    assert_eq!(f.diagnoses[0].host_id, None);
    assert_eq!(f.diagnoses[0].file, "d/old-later.json");
}
