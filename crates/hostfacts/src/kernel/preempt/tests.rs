//! The preemption decision on hand-written inputs; the fixtures under tests/fixtures drive it end to end.

use super::*;
use PreemptModel::{Full, Lazy, None as NoneModel, Voluntary};

fn cfg(lines: &str) -> BTreeMap<String, String> {
    parse::kernel_config(lines)
}

fn inputs<'a>(cfg: Option<&'a BTreeMap<String, String>>) -> Inputs<'a> {
    Inputs {
        release: Some("6.18.44"),
        version: Some("#1 SMP PREEMPT_DYNAMIC"),
        arch: Some("x86_64"),
        config: cfg,
        config_source: Some("/proc/config.gz"),
        debugfs: Err("not mounted".into()),
        boot_log: Err("no log".into()),
        cmdline: Some("quiet"),
    }
}

fn log(text: &str) -> Result<(String, String), String> {
    Ok((text.into(), "/dev/kmsg".into()))
}

#[test]
fn debugfs_wins() {
    let c = cfg("CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_NONE=y\n");
    let mut i = inputs(Some(&c));
    i.debugfs = Ok("none voluntary full (lazy)\n".into());
    i.boot_log = log("Dynamic Preempt: none");
    let p = decide_preemption(&i);
    assert_eq!(p.model, Lazy);
    assert_eq!(
        p.decided_by.as_deref(),
        Some("/sys/kernel/debug/sched/preempt")
    );
    assert_eq!(p.offered.len(), 4);
}

#[test]
fn boot_log_then_config() {
    let c =
        cfg("CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_NONE=y\nCONFIG_ARCH_HAS_PREEMPT_LAZY=y\n");
    let mut i = inputs(Some(&c));
    i.boot_log = log("6,88,243510,-;Dynamic Preempt: none\n");
    let p = decide_preemption(&i);
    assert_eq!(p.model, NoneModel);
    assert!(p.decided_by.unwrap().starts_with("boot log"));
    assert_eq!(p.offered, vec![NoneModel, Voluntary, Full, Lazy]);
    let p = decide_preemption(&inputs(Some(&c)));
    assert_eq!(p.model, NoneModel);
    assert!(p.decided_by.unwrap().starts_with("kernel config"));
}

#[test]
fn not_dynamic_and_rt() {
    let c = cfg("# CONFIG_PREEMPT_DYNAMIC is not set\nCONFIG_PREEMPT_VOLUNTARY=y\n");
    let mut i = inputs(Some(&c));
    i.version = Some("#1 SMP Debian 6.1.0");
    i.cmdline = Some("preempt=full");
    let p = decide_preemption(&i);
    assert_eq!(p.model, Voluntary);
    assert_eq!(p.offered, vec![Voluntary]);
    // preempt= does nothing on a kernel without PREEMPT_DYNAMIC.
    let ig = p.ignored_cmdline.unwrap();
    assert_eq!((ig.asked.as_str(), ig.runs), ("full", Voluntary));
    assert!(ig.why.contains("not PREEMPT_DYNAMIC"), "{}", ig.why);
    assert!(!ig.none_unavailable);
    let c = cfg("CONFIG_PREEMPT_RT=y\n");
    let mut i = inputs(Some(&c));
    i.version = Some("#1 SMP PREEMPT_RT");
    assert_eq!(decide_preemption(&i).model, PreemptModel::Rt);
}

#[test]
fn nothing_readable_is_unknown() {
    let mut i = inputs(None);
    i.version = None;
    i.cmdline = None;
    let p = decide_preemption(&i);
    assert_eq!(p.model, PreemptModel::Unknown);
    assert!(p.decided_by.is_none());
    assert_eq!(p.evidence.len(), 5);
}

/// Regression (issue 29): with debugfs unreadable, a 7.x kernel was said to offer `none voluntary full
/// lazy`. Linux 7.0+ offers `none` and `voluntary` only on architectures without lazy preemption.
#[test]
fn seven_x_offers_what_its_architecture_allows() {
    let mut i = inputs(None);
    i.release = Some("7.2.13+deb14-arm64");
    for arch in [
        "aarch64",
        "x86_64",
        "ppc64le",
        "riscv64",
        "s390x",
        "loongarch64",
    ] {
        i.arch = Some(arch);
        let p = decide_preemption(&i);
        assert_eq!(p.offered, vec![Full, Lazy], "{arch}");
        assert!(
            p.offered_source
                .contains(&format!("architecture {arch} has lazy preemption")),
            "{}",
            p.offered_source
        );
    }
    i.arch = Some("mips64");
    assert_eq!(
        decide_preemption(&i).offered,
        vec![NoneModel, Voluntary, Full]
    );
    // The config, when readable, is what decides: CONFIG_ARCH_HAS_PREEMPT_LAZY.
    let c =
        cfg("CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_LAZY=y\nCONFIG_ARCH_HAS_PREEMPT_LAZY=y\n");
    let mut i = inputs(Some(&c));
    i.release = Some("7.0.2");
    i.arch = Some("mystery");
    let p = decide_preemption(&i);
    assert_eq!((p.model, p.offered.clone()), (Lazy, vec![Full, Lazy]));
    assert!(p.offered_source.contains("CONFIG_ARCH_HAS_PREEMPT_LAZY=y"));
    // PREEMPT_RT: never none or voluntary.
    assert_eq!(accepted_modes(Some((7, 2)), true, true), vec![Full, Lazy]);
    assert_eq!(accepted_modes(Some((7, 2)), true, false), vec![Full]);
    assert_eq!(
        accepted_modes(Some((6, 18)), false, true),
        vec![NoneModel, Voluntary, Full, Lazy]
    );
    assert_eq!(
        accepted_modes(Some((6, 6)), false, true),
        vec![NoneModel, Voluntary, Full]
    );
}

/// Regression (issue 29): `preempt=none` on a 7.x kernel, refused at boot, went without a word. As booted
/// in a 7.2 guest: debugfs unreadable, the boot log refuses `none` and runs `lazy`.
#[test]
fn seven_x_ignores_preempt_none_and_says_which_mode_runs() {
    let c =
        cfg("CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_LAZY=y\nCONFIG_ARCH_HAS_PREEMPT_LAZY=y\n");
    let mut i = inputs(Some(&c));
    i.release = Some("7.2.13+deb14-amd64");
    i.cmdline = Some("console=ttyS0 preempt=none");
    i.boot_log = log("[    0.000000] Linux version 7.2.13+deb14-amd64\n\
         [    0.010000] Dynamic Preempt: unsupported mode: none\n\
         [    0.130000] Dynamic Preempt: lazy\n");
    let p = decide_preemption(&i);
    assert_eq!(p.model, Lazy);
    assert!(p.decided_by.as_deref().unwrap().starts_with("boot log"));
    let ig = p.ignored_cmdline.clone().unwrap();
    assert_eq!((ig.asked.as_str(), ig.runs), ("none", Lazy));
    assert!(ig.refused_in_boot_log && ig.none_unavailable);
    assert!(ig.why.contains("offers full lazy"), "{}", ig.why);
    let cmd = p
        .evidence
        .iter()
        .find(|e| e.source == "/proc/cmdline preempt=")
        .unwrap();
    assert_eq!(cmd.implies, None);
    assert!(cmd.note.as_deref().unwrap().starts_with("ignored: "));
    // Without the boot log the config's default decides, and the refusal is inferred all the same.
    i.boot_log = Err("no log".into());
    let p = decide_preemption(&i);
    assert_eq!(p.model, Lazy);
    assert!(p.decided_by.unwrap().starts_with("kernel config"));
    assert!(!p.ignored_cmdline.unwrap().refused_in_boot_log);
    // On 6.18 the same parameter is followed.
    i.release = Some("6.18.15+deb13-amd64");
    let p = decide_preemption(&i);
    assert_eq!(p.model, NoneModel);
    assert!(p.ignored_cmdline.is_none());
}

/// Regression (issue 29): an empty debugfs file (a linux-next series) and one with two modes in parentheses
/// were taken at their word; both are reported as such, and the next source decides.
#[test]
fn empty_or_ambiguous_debugfs_defers_to_the_next_source() {
    let c =
        cfg("CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_LAZY=y\nCONFIG_ARCH_HAS_PREEMPT_LAZY=y\n");
    for (text, says) in [("\n", "empty"), ("(full) (lazy)\n", "ambiguous")] {
        let mut i = inputs(Some(&c));
        i.release = Some("7.4.0-rc1-next-20260915");
        i.debugfs = Ok(text.into());
        i.boot_log = log("Dynamic Preempt: full\n");
        let p = decide_preemption(&i);
        let e = &p.evidence[0];
        assert_eq!(e.implies, None);
        assert!(e.note.as_deref().unwrap().starts_with(says), "{e:?}");
        assert!(e
            .note
            .as_deref()
            .unwrap()
            .ends_with("the next source decides"));
        assert_eq!(p.model, Full);
        assert!(p.decided_by.unwrap().starts_with("boot log"));
        assert_eq!(
            p.offered,
            vec![Full, Lazy],
            "inferred, not read from the file"
        );
    }
}

/// Regression (issue 46 item 10): a lazy kernel without PREEMPT_DYNAMIC prints plain `PREEMPT` in `uname -v`
/// (init/Makefile has no flag for lazy) and was read as `full` when nothing else was readable. It is full or
/// lazy, and the audit says it cannot tell; where lazy cannot be (before 6.12, or an architecture without
/// it) plain PREEMPT is full. The preemptive findings still hold: both models preempt in the kernel.
#[test]
fn a_lazy_kernel_not_dynamic_read_as_full_from_uname_regression() {
    let mut i = inputs(None);
    i.version = Some("#1 SMP PREEMPT Thu Nov 26 10:00:00 UTC 2026");
    let p = decide_preemption(&i);
    assert_eq!(p.model, PreemptModel::Unknown);
    assert_eq!(p.candidates, vec![Full, Lazy]);
    assert_eq!(p.words(), "full or lazy (cannot tell which)");
    assert_eq!(p.preempts_in_kernel(), Some(true));
    let uname = p.evidence.last().unwrap();
    assert!(uname
        .note
        .as_deref()
        .unwrap()
        .starts_with("full or lazy: cannot tell"));
    i.release = Some("6.6.60");
    let p = decide_preemption(&i);
    assert_eq!((p.model, p.candidates.len()), (Full, 0));
    i.release = Some("6.18.44");
    i.arch = Some("mips64");
    assert_eq!(decide_preemption(&i).model, Full);
}

/// Issue 46 item 10: since 6.15 a WARN/oops header names the model; it decides where debugfs and the boot
/// log's "Dynamic Preempt:" do not, and tells the lazy kernel above from a full one.
#[test]
fn a_warn_header_names_the_model() {
    let mut i = inputs(None);
    i.version = Some("#1 SMP PREEMPT Thu Nov 26 10:00:00 UTC 2026");
    i.boot_log = log("Linux version 6.18.44\nCPU: 3 UID: 0 PID: 812 Comm: kworker/3:1 Not tainted 6.18.44 #1 PREEMPTLAZY \n");
    let p = decide_preemption(&i);
    assert_eq!(p.model, Lazy);
    assert!(p
        .decided_by
        .as_deref()
        .unwrap()
        .ends_with("WARN/oops header"));
    assert!(p.candidates.is_empty());
    // A dynamic kernel's boot-log line comes first; PREEMPT(undef) decides nothing.
    i.boot_log = log("Dynamic Preempt: full\nCPU: 0 UID: 0 PID: 1 Comm: sh Not tainted 6.15.2 #1 PREEMPT(undef)\n");
    let p = decide_preemption(&i);
    assert_eq!(p.model, Full);
    let header = p
        .evidence
        .iter()
        .find(|e| e.source.ends_with("WARN/oops header"))
        .unwrap();
    assert_eq!(header.implies, None);
    assert!(header.note.as_deref().unwrap().contains("for none"));
}
