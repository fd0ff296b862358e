//! The audit on real Linux 7.x hosts (tests/fixtures/linux-7.2-*: Debian's 7.2.13 booted `preempt=none`,
//! captured in a guest): the offered modes as the kernel decides them, the ignored `preempt=none` flagged with
//! the mode that runs, an empty or ambiguous debugfs file reported as such, the boot log read from where a
//! capture keeps it, and no fix that advises `preempt=none` (issue 29); the model of a lazy kernel without
//! PREEMPT_DYNAMIC and a sysroot's inconsistent pool counters (issue 46).

use std::path::{Path, PathBuf};

use hostfacts::Host;
use results::host::audit::Audit;
use results::host::findings::Severity;
use results::host::kernel::PreemptModel::{Full, Lazy};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn audit_of(dir: &Path) -> Audit {
    hostfacts::audit(&Host::at(dir), &[])
}

/// No fix line asks for `preempt=none` (or `voluntary`): the only lines naming it say to remove it.
fn assert_no_fix_advises_none(a: &Audit, context: &str) {
    for f in &a.findings {
        for line in &f.fix {
            let advises = ["preempt=none", "preempt=voluntary", "--switch-preempt none"]
                .iter()
                .any(|m| line.contains(m));
            assert!(
                !advises || line.starts_with("# remove preempt="),
                "{context}: {} advises {line:?}",
                f.id
            );
        }
    }
}

fn ignored(a: &Audit) -> &results::host::findings::Finding {
    a.findings
        .iter()
        .find(|f| f.id == "preempt-mode-ignored")
        .unwrap_or_else(|| panic!("no preempt-mode-ignored in {:?}", a.findings))
}

#[test]
fn a_7_2_host_booted_preempt_none_runs_lazy_and_says_so() {
    let a = audit_of(&fixture("linux-7.2-preempt-none"));
    let p = &a.kernel.preemption;
    assert_eq!(p.model, Lazy);
    assert_eq!(
        p.decided_by.as_deref(),
        Some("/sys/kernel/debug/sched/preempt")
    );
    assert_eq!(p.offered, vec![Full, Lazy]);
    let ig = p.ignored_cmdline.as_ref().unwrap();
    assert_eq!((ig.asked.as_str(), ig.runs), ("none", Lazy));
    assert!(ig.refused_in_boot_log && ig.none_unavailable);
    let f = ignored(&a);
    assert_eq!(f.severity, Severity::Warn);
    assert!(f.title.ends_with("it runs 'lazy'"), "{}", f.title);
    assert!(f
        .evidence
        .iter()
        .any(|e| e.starts_with("no boot parameter gives 'none'")));
    assert_no_fix_advises_none(&a, "linux-7.2-preempt-none");
    // The instance on 4 KB pages is exposed under lazy.
    assert!(a.findings.iter().any(|f| f.id == "preempt-4k-shm"));
}

#[test]
fn without_debugfs_or_config_the_kern_log_and_the_architecture_decide() {
    let a = audit_of(&fixture("linux-7.2-kern-log-no-debugfs"));
    let p = &a.kernel.preemption;
    assert_eq!(p.model, Lazy);
    assert_eq!(
        p.decided_by.as_deref(),
        Some("boot log (/var/log/kern.log) \"Dynamic Preempt:\"")
    );
    // Regression (issue 29): inferred as `none voluntary full lazy` for a 7.x kernel.
    assert_eq!(p.offered, vec![Full, Lazy]);
    assert!(
        p.offered_source
            .contains("architecture x86_64 has lazy preemption"),
        "{}",
        p.offered_source
    );
    assert_eq!(
        ignored(&a).title,
        "the kernel command line asks for preempt=none, which this kernel ignores: it runs 'lazy'"
    );
    assert_no_fix_advises_none(&a, "linux-7.2-kern-log-no-debugfs");
}

/// A copy of the real 7.2 capture whose debugfs file says nothing usable: empty (a linux-next series of
/// autumn 2026 printed an empty file) or with two modes in parentheses.
#[test]
fn an_empty_or_ambiguous_debugfs_file_is_noted_and_the_boot_log_decides() {
    for (text, note) in [("", "empty"), ("(full) (lazy) \n", "ambiguous")] {
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&fixture("linux-7.2-preempt-none"), dir.path());
        std::fs::write(dir.path().join("sys/kernel/debug/sched/preempt"), text).unwrap();
        let a = audit_of(dir.path());
        let p = &a.kernel.preemption;
        let e = &p.evidence[0];
        assert!(e.note.as_deref().unwrap().starts_with(note), "{e:?}");
        assert_eq!(e.implies, None);
        assert_eq!(p.model, Lazy);
        assert!(p
            .decided_by
            .as_deref()
            .unwrap()
            .starts_with("boot log (/dev/kmsg)"));
        assert_eq!(
            p.offered,
            vec![Full, Lazy],
            "inferred, not read from the file"
        );
        assert_no_fix_advises_none(&a, note);
    }
}

#[test]
fn no_fixture_gets_a_fix_that_advises_preempt_none() {
    for entry in std::fs::read_dir(fixture("")).unwrap() {
        let path = entry.unwrap().path();
        if path.join("proc").is_dir() {
            assert_no_fix_advises_none(&audit_of(&path), &path.display().to_string());
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if kind.is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// Issue 46 item 10 (tests/fixtures/linux-6.18-lazy-warn-header): a lazy kernel without PREEMPT_DYNAMIC,
/// whose `uname -v` says plain PREEMPT and whose config and debugfs are unreadable, is told lazy by the WARN
/// header in its kernel log; without the header it is "full or lazy", and was read as full.
#[test]
fn a_lazy_kernel_not_dynamic_told_by_its_warn_header() {
    let dir = fixture("linux-6.18-lazy-warn-header");
    let a = audit_of(&dir);
    let p = &a.kernel.preemption;
    assert_eq!(p.model, Lazy, "{:?}", p.evidence);
    assert_eq!(
        p.decided_by.as_deref(),
        Some("kernel log (/dev/kmsg) WARN/oops header")
    );
    let copy = tempfile::tempdir().unwrap();
    copy_tree(&dir, copy.path());
    std::fs::write(copy.path().join("dev/kmsg"), "").unwrap();
    let a = audit_of(copy.path());
    let p = &a.kernel.preemption;
    assert_eq!(
        (p.model, p.candidates.clone()),
        (
            results::host::kernel::PreemptModel::Unknown,
            vec![Full, Lazy]
        )
    );
    let unknown = a
        .findings
        .iter()
        .find(|f| f.id == "preempt-unknown")
        .unwrap();
    assert!(
        unknown.title.ends_with("full or lazy (cannot tell which)"),
        "{}",
        unknown.title
    );
}

/// Regression (issue 46 item 10): pool counters that cannot be one moment's (HugePages_Rsvd above
/// HugePages_Free, as copies made at different moments in a sysroot can be) gave an instance with
/// `huge_pages = on` the CRITICAL "the pool leaves it N of the M pages it needs: it will not start after a
/// restart". The audit says the counters are inconsistent instead, and judges no sizing from them.
#[test]
fn inconsistent_pool_counters_from_a_sysroot_made_a_critical_regression() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("linux-7.0-debugfs-refused"), dir.path());
    let pool = dir.path().join("sys/kernel/mm/hugepages/hugepages-2048kB");
    // The fixture's pool: 100 pages, 100 free; a copy that caught a mapping's reservation but not the
    // pages it took.
    std::fs::write(pool.join("resv_hugepages"), "130\n").unwrap();
    let a = audit_of(dir.path());
    let ids: Vec<&str> = a.findings.iter().map(|f| f.id.as_str()).collect();
    assert!(!ids.contains(&"hugetlb-pool-too-small"), "{ids:?}");
    let f = a
        .findings
        .iter()
        .find(|f| f.id == "hugetlb-counters-inconsistent")
        .unwrap_or_else(|| panic!("{ids:?}"));
    assert!(
        f.evidence[0].contains("resv_hugepages 130 is more than free_hugepages 100"),
        "{:?}",
        f.evidence
    );
    assert!(f.evidence[0].ends_with("the sysroot's copies were read at different moments"));
    // As captured (consistent), the same instance still gets the critical finding.
    let a = audit_of(&fixture("linux-7.0-debugfs-refused"));
    assert!(a.findings.iter().any(|f| f.id == "hugetlb-pool-too-small"));
}

/// Regression (issue 46 item 10): a PostgreSQL 19 instance on 4 KB pages got 15-18's story ("the
/// lock-holder-preemption regression", which was found in the free list's spinlock); 19 removed the free list
/// (commit 2c789405275), and the finding says what changed and what remains.
#[test]
fn postgresql_19_told_the_free_list_story_of_15_to_18_regression() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture("linux-7.0-lazy-debugfs"), dir.path());
    let title = |a: &Audit| {
        a.findings
            .iter()
            .find(|f| f.id == "preempt-4k-shm")
            .unwrap()
            .title
            .clone()
    };
    let fifteen = title(&audit_of(dir.path()));
    assert!(
        fifteen.ends_with("the lock-holder-preemption regression"),
        "{fifteen}"
    );
    std::fs::write(dir.path().join("tmp/plab-manual/data/PG_VERSION"), "19\n").unwrap();
    let nineteen = title(&audit_of(dir.path()));
    for want in [
        "(PostgreSQL 19)",
        "removed the buffer free list (commit 2c789405275)",
        "buffer-header spinlocks",
        "page tables remain",
    ] {
        assert!(nineteen.contains(want), "{nineteen}");
    }
}
