//! The audit on real Linux 7.x hosts (tests/fixtures/linux-7.2-*: Debian's 7.2.13 booted `preempt=none`,
//! captured in a guest): the offered modes as the kernel decides them, the ignored `preempt=none` flagged with
//! the mode that runs, an empty or ambiguous debugfs file reported as such, the boot log read from where a
//! capture keeps it, and no fix that advises `preempt=none` (issue 29).

use std::path::{Path, PathBuf};

use hostfacts::kernel::PreemptModel::{Full, Lazy};
use hostfacts::{Audit, Host, Severity};

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

fn ignored(a: &Audit) -> &hostfacts::Finding {
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
