//! `preemptlab vm --arch arm64`: Debian's arm64 kernels (scripts/kernels fetch --arch arm64) booted under
//! `qemu-system-aarch64 -M virt -cpu max` (TCG) on the arm64 root of scripts/arm64-root, running the
//! binary of scripts/cross-arm64. `scripts/test-vm` makes all three (cached) and runs these one at a time.
//! An arm64 guest under TCG on two host CPUs boots in about 70 s: the commands are TCG-sized, and check that
//! results come back right, not speeds.
//!
//! Debian's arm64 6.18 and 7.2 are built PREEMPT_LAZY without PREEMPT_DYNAMIC: both run lazy and nothing
//! else, so no test here switches models (docs/notes/2026-11-29-arm64.md).

mod common;

use std::time::{Duration, Instant};

use common::vm::{
    assert_vm_block_common, json, offered, one_at_a_time, preemptlab, stop_after, vm, vm_mounts,
    vm_processes, vm_temp_dirs,
};

/// The full name of the arm64 kernel whose release starts with `prefix` (from `vm --arch arm64 --list`).
fn arm64_kernel(prefix: &str) -> String {
    let o = preemptlab()
        .args(["vm", "--arch", "arm64", "--list"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    out.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.split_whitespace().next())
        .map(String::from)
        .unwrap_or_else(|| {
            panic!("no arm64 {prefix} kernel (run scripts/kernels fetch --arch arm64):\n{out}")
        })
}

/// The `vm` block of an arm64 guest: the common checks, TCG with the reason, the architected timer.
fn assert_arm64_vm_block(v: &serde_json::Value) {
    assert_vm_block_common(v);
    let b = &v["vm"];
    assert_eq!(b["accelerator"], "tcg", "{b}");
    assert!(
        b["accelerator_why"]
            .as_str()
            .unwrap()
            .contains("arm64 guest"),
        "{b}"
    );
    assert!(b["kernel_image"].as_str().unwrap().contains("arm64"), "{b}");
    assert!(
        !b["kernel_cmdline"].as_str().unwrap().contains("tsc="),
        "{b}"
    );
    assert_eq!(b["guest_clocksource_before"], "arch_sys_counter", "{b}");
    assert_eq!(b["guest_clocksource_after"], "arch_sys_counter", "{b}");
}

/// The result file a bench wrote on the host from an arm64 guest (after `o`, its `vm` run, succeeded):
/// its host facts are the guest's, aarch64 and lazy.
fn arm64_result(o: &std::process::Output, out: &std::path::Path) -> serde_json::Value {
    ok(o);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    assert_eq!(v["host"]["kernel"]["arch"]["value"], "aarch64");
    assert_eq!(v["host"]["kernel"]["preemption"]["model"], "lazy");
    v
}

fn ok(o: &std::process::Output) {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn arm64_list_shows_debians_kernels_offering_lazy_alone() {
    let o = preemptlab()
        .args(["vm", "--arch", "arm64", "--list"])
        .output()
        .unwrap();
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    for prefix in ["6.18.", "7.2."] {
        let line = out
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no arm64 {prefix} kernel listed:\n{out}"));
        assert!(
            line.contains("  arm64  lazy*  rseq-slice-ext: no"),
            "{line}"
        );
    }
    assert!(
        out.lines().all(|l| l.contains("  arm64  ")),
        "only arm64 kernels: {out}"
    );
}

#[test]
fn arm64_bad_input_is_refused_before_booting() {
    let refused = |args: &[&str], context: &str, want: &str| {
        let t = Instant::now();
        let o = preemptlab().args(args).output().unwrap();
        common::assert_refused(&o, context, want);
        assert!(t.elapsed() < Duration::from_secs(10), "{context}: booted?");
    };
    refused(
        &["vm", "--arch", "sparc", "--", "audit"],
        "--arch sparc",
        "--arch sparc: not an architecture a guest can have; use x86_64 or arm64",
    );
    let k72 = arm64_kernel("7.2.");
    refused(
        &["vm", "--arch", "x86_64", "--kernel", &k72, "--", "audit"],
        "an arm64 kernel for an x86_64 guest",
        &format!("--kernel {k72} is an arm64 kernel, not x86_64; give --arch arm64"),
    );
    refused(
        &[
            "vm",
            "--arch",
            "arm64",
            "--root",
            "/nonexistent/arm64-root",
            "--",
            "audit",
        ],
        "a missing arm64 root",
        "no arm64 root filesystem at /nonexistent/arm64-root; run scripts/arm64-root",
    );
    let x86 = assert_cmd::cargo::cargo_bin("preemptlab");
    refused(
        &[
            "vm",
            "--arch",
            "arm64",
            "--guest-exe",
            x86.to_str().unwrap(),
            "--",
            "audit",
        ],
        "an x86_64 binary for an arm64 guest",
        "not an arm64 executable",
    );
    refused(
        &["vm", "--arch", "arm64", "--accel", "kvm", "--", "audit"],
        "kvm for an arm64 guest",
        "cannot run an arm64 guest under KVM; use --accel tcg",
    );
    refused(
        &[
            "vm",
            "--arch",
            "arm64",
            "--kernel",
            "7.2",
            "--preempt",
            "none",
            "--",
            "audit",
        ],
        "--preempt none on arm64 7.2",
        "offers only lazy",
    );
    refused(
        &[
            "vm",
            "--arch",
            "arm64",
            "--kernel",
            "6.18",
            "--",
            "bench",
            "lock",
            "--switch-preempt",
            "none,lazy",
        ],
        "--switch-preempt none,lazy on arm64 6.18",
        "offers only lazy",
    );
}

/// PostgreSQL 18 (arm64, Debian's) on 4 KB pages and on 2 MB hugetlb pages under pgbench with reconnects,
/// diagnosed in the guest: the segment's page size read from the instance, on-CPU samples symbolized on
/// arm64 (kernel and postgres), a page-fault share from arm64's own fault path, switches inside faults
/// classified by arm64's preemption frames (lazy: the tick upgrades the request, and the return from the
/// timer interrupt taken in the fault handler preempts).
#[test]
fn arm64_bench_pg_4k_and_hugetlb_diagnosed_on_72() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pg.json");
    let o = vm(&[
        "--arch",
        "arm64",
        "--kernel",
        "7.2",
        "--",
        "bench",
        "pg",
        "--huge-pages",
        "off,on",
        "--reserve-hugepages",
        "--shared-buffers",
        "64MB",
        "--scale",
        "1",
        "--clients",
        "8",
        "--reconnect",
        "--duration",
        "8s",
        "--warmup",
        "0s",
        "--repeat",
        "1",
        "--diagnose",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let v = arm64_result(&o, &out);
    assert_arm64_vm_block(&v);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{}", v["cells"]);
    for (cell, page_kib) in cells.iter().zip([4, 2048]) {
        let rep = &cell["reps"][0];
        assert!(rep["tps"].as_f64().unwrap() > 0.0, "{rep}");
        assert_eq!(rep["segment"]["kernel_page_size_kib"], page_kib, "{rep}");
        let unmeasured = rep["diagnosis_unmeasured"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            unmeasured.is_empty(),
            "perf events in the guest: {unmeasured:?}"
        );
        let d = &rep["diagnosis"];
        assert_eq!(d["version"], "18", "{}", d["version"]);
        assert_eq!(d["segment"]["page_size_kib"], page_kib, "{}", d["segment"]);
        let share = &d["verdict"]["page_fault_share"];
        assert!(share["of"].as_u64().unwrap() > 100, "samples: {share}");
        assert!(share["samples"].as_u64().unwrap() > 0, "faults: {share}");
        let top = d["top_functions"].as_array().unwrap();
        let named = |pred: &dyn Fn(&str) -> bool| {
            top.iter()
                .any(|f| pred(f["function"].as_str().unwrap_or_default()))
        };
        assert!(named(&|f| f.starts_with("[k] ")), "kernel names: {top:?}");
        // User functions by name (Debian's arm64 PostgreSQL and libc export theirs: measured
        // 2026-11-29, hash_search_with_hash_value, AllocSetAlloc, _IO_fread among the top), read through
        // the postmaster's mapped file: not only `postgres:?` and `libc.so.6:?`.
        assert!(
            named(&|f| !f.starts_with("[k] ") && !f.ends_with('?')),
            "a user function named among the top: {top:?}"
        );
        let b = &d["binary"];
        assert!(
            b["read_through"]
                .as_str()
                .is_some_and(|r| r.contains("/map_files/")),
            "{b}"
        );
        assert!(
            d["totals"]["user_samples_named"].as_u64().unwrap_or(0) > 0,
            "{}",
            d["totals"]
        );
        let sw = &d["totals"]["switches"];
        assert!(sw["runnable"].as_u64().unwrap() > 0, "{sw}");
        assert!(
            sw["in_fault_kernel_preemption"].as_u64().unwrap()
                <= sw["runnable_in_fault"].as_u64().unwrap(),
            "{sw}"
        );
    }
    // 4 KB pages: faults land in the segment; the diagnosis says so and names the fix.
    let d4 = &cells[0]["reps"][0]["diagnosis"];
    assert!(
        d4["totals"]["segment_faults"].as_u64().unwrap() > 0,
        "{}",
        d4["totals"]
    );
    assert!(
        d4["verdict"]["fix"].to_string().contains("huge_pages = on"),
        "{}",
        d4["verdict"]
    );
}

/// bench lock with the pg spinlock (arm64's TAS and isb), the futex mutex and the adaptive lock, on 4 KB
/// and 2 MB pages, in an arm64 6.18 guest.
#[test]
fn arm64_bench_lock_on_618() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("lock.json");
    let o = vm(&[
        "--arch",
        "arm64",
        "--kernel",
        "6.18",
        "--",
        "bench",
        "lock",
        "--locks",
        "pg,futex,adaptive",
        "--pages",
        "4k,hugetlb-2m",
        "--reserve-hugepages",
        "--workers",
        "2x",
        "--descriptors",
        "200000",
        "--duration",
        "300ms",
        "--warmup",
        "0s",
        "--repeat",
        "1",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let v = arm64_result(&o, &out);
    assert!(v["host"]["kernel"]["release"]["value"]
        .as_str()
        .unwrap()
        .starts_with("6.18."));
    assert_arm64_vm_block(&v);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 6, "{}", v["cells"]);
    for c in cells {
        assert_eq!(c["status"], "ok", "{c}");
        let rep = &c["reps"][0];
        assert!(rep["ops_per_s"].as_f64().unwrap() > 0.0, "{rep}");
        assert_eq!(rep["check"]["ok"], true, "exclusion held: {rep}");
    }
}

/// The seed's platform: Linux 7.x on arm64 runs lazy. `check` end to end in a 7.2 guest booted with a
/// `preempt=none` on its command line (a Graviton host's boot line from before 7.0): its audit says aarch64,
/// lazy, the one model offered, and the parameter ignored with the reason; the reproduction runs and a
/// verdict comes back with the result file.
#[test]
fn arm64_check_on_72_reports_preempt_none_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("check.json");
    let o = vm(&[
        "--arch",
        "arm64",
        "--kernel",
        "7.2",
        "--preempt",
        "none",
        "--allow-ignored-preempt",
        "--",
        "check",
        "--quick",
        "--reserve-hugepages",
        "--format",
        "json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    let a = &v["audit"];
    assert_eq!(a["kernel"]["arch"]["value"], "aarch64", "{}", a["kernel"]);
    assert!(a["kernel"]["release"]["value"]
        .as_str()
        .unwrap()
        .starts_with("7.2."));
    let p = &a["kernel"]["preemption"];
    assert_eq!(p["model"], "lazy", "{p}");
    assert_eq!(p["dynamic"]["value"], false, "{p}");
    assert_eq!(offered(a), ["lazy"]);
    let ig = &p["ignored_cmdline"];
    assert_eq!(ig["asked"], "none", "{p}");
    assert!(
        ig.to_string().contains("not PREEMPT_DYNAMIC"),
        "the reason: {ig}"
    );
    assert!(v["vm"]["kernel_cmdline"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .any(|w| w == "preempt=none"));
    assert!(!v["verdict"].as_str().unwrap_or_default().is_empty(), "{v}");
    assert!(out.is_file(), "the reproduction's result file on the host");
    assert_arm64_vm_block(&v);
}

/// Every stop signal while an arm64 guest boots or runs: the guest stops, no virtme-ng or QEMU process,
/// no mount and no temp dir are left, and the exit code is 128 + the signal.
#[test]
fn arm64_stop_signals_leave_nothing_behind() {
    let _one = one_at_a_time();
    let before = (vm_temp_dirs(), vm_mounts());
    let cases = [
        (libc::SIGINT, 500u64),
        (libc::SIGTERM, 8_000),
        (libc::SIGHUP, 30_000),
    ];
    for (sig, delay_ms) in cases {
        let child = preemptlab()
            .args(["vm", "--arch", "arm64", "--kernel", "7.2", "--"])
            .args(["bench", "lock", "--duration", "60s", "--quiet"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        stop_after(child, sig, delay_ms);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            vm_processes(),
            Vec::<String>::new(),
            "signal {sig} at {delay_ms} ms"
        );
        assert_eq!(
            (vm_temp_dirs(), vm_mounts()),
            before,
            "left after signal {sig} at {delay_ms} ms"
        );
    }
}
