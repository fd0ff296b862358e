//! `preemptlab vm`: boots Debian's 6.18 and 7.2 kernels (scripts/kernels fetch) under virtme-ng and runs
//! commands inside. Needs qemu-system-x86, busybox-static and virtme-ng: `scripts/test-vm` installs them,
//! fetches the kernels and runs these tests one at a time (`--test-threads=1`; a lock keeps them serial anyway).
//! The bench inside is tiny: these check that results come back right, not speeds.

mod common;

use std::time::Duration;

const TINY_BENCH: [&str; 14] = [
    "bench",
    "lock",
    "--duration",
    "200ms",
    "--warmup",
    "0s",
    "--repeat",
    "1",
    "--workers",
    "1x",
    "--locks",
    "pg",
    "--pages",
    "4k",
];

use common::vm::{
    assert_vm_block_common, json, offered, one_at_a_time, preemptlab, stop_after, vm, vm_processes,
    vm_temp_dirs,
};

/// The `vm` block of an x86_64 guest: the common checks, and its TSC kept under TCG.
fn assert_vm_block(v: &serde_json::Value) {
    assert_vm_block_common(v);
    let b = &v["vm"];
    // Under TCG the guest stays on its TSC from before the command to after it: a switch to the HPET (its
    // watchdog finding the emulated TSC unstable) slows every clock read and everything timed with it.
    if b["accelerator"] == "tcg" {
        assert!(
            b["kernel_cmdline"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .any(|w| w == "tsc=reliable"),
            "{b}"
        );
        assert_eq!(b["guest_clocksource_before"], "tsc", "{b}");
        assert_eq!(b["guest_clocksource_after"], "tsc", "{b}");
    }
}

#[test]
fn list_shows_both_kernels() {
    let o = preemptlab()
        .args(["vm", "--arch", "x86_64", "--list"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let l618 = out
        .lines()
        .find(|l| l.starts_with("6.18."))
        .unwrap_or_else(|| panic!("no 6.18 kernel listed (run scripts/kernels fetch):\n{out}"));
    assert!(l618.contains("none voluntary full lazy"), "{l618}");
    let l72 = out
        .lines()
        .find(|l| l.starts_with("7.2."))
        .unwrap_or_else(|| panic!("no 7.2 kernel listed (run scripts/kernels fetch):\n{out}"));
    assert!(
        l72.contains("full lazy*") && l72.contains("rseq-slice-ext: no"),
        "{l72}"
    );
}

#[test]
fn bad_input_is_refused_before_booting() {
    let o = preemptlab()
        .args(["vm", "--cpus", "100000", "--", "audit"])
        .output()
        .unwrap();
    common::assert_refused(&o, "--cpus too many", "CPUs");
    let o = preemptlab()
        .args(["vm", "--kernel", "0.1", "--", "audit"])
        .output()
        .unwrap();
    common::assert_refused(&o, "--kernel unknown", "scripts/kernels fetch");
    let o = preemptlab()
        .args(["vm", "--kernel", "7.2", "--preempt", "none", "--", "audit"])
        .output()
        .unwrap();
    common::assert_refused(&o, "--preempt none on 7.2", "full, lazy");
    let o = preemptlab()
        .args(["vm", "--kernel", "7.2", "--preempt", "fast", "--", "audit"])
        .output()
        .unwrap();
    common::assert_refused(&o, "--preempt fast", "--preempt fast");
    let o = preemptlab()
        .args(["vm", "--kernel", "7.2", "--memory", "lots", "--", "audit"])
        .output()
        .unwrap();
    common::assert_refused(&o, "--memory lots", "--memory");
    let o = preemptlab()
        .args(["vm", "--kernel", "7.2"])
        .output()
        .unwrap();
    common::assert_refused(&o, "no command", "after --");
    // Every mode of a --switch-preempt axis is checked against the kernel before the boot.
    let mut args = vec!["vm", "--kernel", "7.2", "--"];
    args.extend(TINY_BENCH);
    let o = preemptlab()
        .args(&args)
        .args(["--switch-preempt", "lazy,none"])
        .output()
        .unwrap();
    common::assert_refused(&o, "--switch-preempt lazy,none on 7.2", "offers");
    let o = preemptlab()
        .args(&args)
        .args(["--switch-preempt", "full,full"])
        .output()
        .unwrap();
    common::assert_refused(&o, "--switch-preempt full,full", "given twice");
}

#[test]
fn audit_on_618_booted_none_offers_all_four() {
    let o = vm(&[
        "--kernel",
        "6.18",
        "--preempt",
        "none",
        "--",
        "audit",
        "--format",
        "json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    assert_eq!(
        v["kernel"]["preemption"]["model"], "none",
        "{}",
        v["kernel"]["preemption"]
    );
    assert_eq!(offered(&v), ["none", "voluntary", "full", "lazy"]);
    assert!(v["kernel"]["release"]["value"]
        .as_str()
        .unwrap()
        .starts_with("6.18."));
    assert_vm_block(&v);
    // The guest's own ID (given on its kernel command line), not the host's machine ID it also sees.
    let id = &v["host_id"];
    let host = hostfacts::hostid::read(&hostfacts::Host::live());
    if host.value.is_some() {
        let guest = id["value"]
            .as_str()
            .unwrap_or_else(|| panic!("no ID: {id}"));
        assert!(hostfacts::hostid::is_guest_id(guest), "{id}");
        assert_ne!(Some(guest), host.value.as_deref(), "the host's ID");
        assert!(
            id["source"]
                .as_str()
                .unwrap()
                .contains("preemptlab vm guest"),
            "{id}"
        );
    }
}

#[test]
fn audit_on_72_is_lazy_and_offers_full_and_lazy() {
    let o = vm(&[
        "--kernel", "7.2", "--cpus", "1", "--", "audit", "--format", "json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v = json(&o);
    assert_eq!(
        v["kernel"]["preemption"]["model"], "lazy",
        "{}",
        v["kernel"]["preemption"]
    );
    assert_eq!(offered(&v), ["full", "lazy"]);
    assert_eq!(v["vm"]["vcpus"], 1);
    assert_vm_block(&v);
    // The guest reads the booted kernel's own config (handed in by vm), so the rseq finding says why the
    // slice extension is missing, not only that the prctl failed.
    let rseq = v["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["id"] == "rseq-slice-unavailable"))
        .unwrap_or_else(|| panic!("no rseq finding: {}", v["findings"]));
    assert!(
        rseq["evidence"]
            .to_string()
            .contains("CONFIG_RSEQ_SLICE_EXTENSION is not set in /boot/config-7.2"),
        "{}",
        rseq["evidence"]
    );
}

#[test]
fn bench_on_72_refuses_switch_to_none_in_one_line() {
    let mut args = vec!["--kernel", "7.2", "--"];
    args.extend(TINY_BENCH);
    args.extend(["--switch-preempt", "none"]);
    let o = vm(&args);
    common::assert_refused(&o, "--switch-preempt none on 7.2", "none");
}

#[test]
fn bench_on_72_switches_to_full_and_back_to_lazy() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let out_s = out.display().to_string();
    let mut args = vec!["--kernel", "7.2", "--"];
    args.extend(TINY_BENCH);
    args.extend(["--switch-preempt", "full", "--out", &out_s]);
    let o = vm(&args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        v["host"]["kernel"]["preemption"]["model"], "full",
        "{}",
        v["host"]["kernel"]["preemption"]
    );
    let b = &v["vm"];
    assert!(
        b["guest_preempt_before"]
            .as_str()
            .unwrap()
            .contains("(lazy)"),
        "{b}"
    );
    assert!(
        b["guest_preempt_after"]
            .as_str()
            .unwrap()
            .contains("(lazy)"),
        "back on lazy after: {b}"
    );
    assert_eq!(b["command"][0], "bench");
}

#[test]
fn bench_on_618_runs_none_and_lazy_as_an_axis_and_ends_on_the_boot_model() {
    // Booted voluntary; every cell under none and under lazy, two rounds (none, lazy; lazy, none).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let out_s = out.display().to_string();
    let mut args = vec!["--kernel", "6.18", "--preempt", "voluntary", "--"];
    args.extend(&TINY_BENCH[..6]);
    args.extend([
        "--repeat",
        "2",
        "--workers",
        "1x",
        "--locks",
        "pg",
        "--pages",
        "4k",
    ]);
    args.extend(["--switch-preempt", "none,lazy", "--out", &out_s]);
    let o = vm(&args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("every cell under none and lazy"), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    // The host facts are the guest's own model, taken before any switch; each cell has its model.
    assert_eq!(v["host"]["kernel"]["preemption"]["model"], "voluntary");
    let cells = v["cells"].as_array().unwrap();
    let models: Vec<&str> = cells
        .iter()
        .map(|c| c["preempt"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["none", "lazy"]);
    for c in cells {
        assert_eq!(c["status"], "ok", "{c}");
        assert_eq!(c["reps"].as_array().unwrap().len(), 2, "{c}");
        assert!(c["reps"][0]["ops_per_s"].as_f64().unwrap() > 0.0);
    }
    let b = &v["vm"];
    assert!(
        b["guest_preempt_after"]
            .as_str()
            .unwrap()
            .contains("(voluntary)"),
        "back on voluntary after: {b}"
    );
    // compare splits the run by the cells' models.
    let o = preemptlab()
        .args(["compare", &out_s, "--by", "preempt", "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        c["inputs"],
        serde_json::json!(["preempt=none", "preempt=lazy"])
    );
    assert!(!c["rows"].as_array().unwrap().is_empty());
}

#[test]
fn bench_without_out_writes_its_default_result_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let _one = one_at_a_time();
    let o = preemptlab()
        .current_dir(dir.path())
        .args(["vm", "--kernel", "6.18", "--preempt", "full", "--"])
        .args(TINY_BENCH)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let files: Vec<_> = std::fs::read_dir(dir.path().join("results"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(files.len(), 1, "one result file under results/");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(files[0].path()).unwrap()).unwrap();
    assert_eq!(v["host"]["kernel"]["preemption"]["model"], "full");
    assert_eq!(
        v["vm"]["vcpus"].as_u64(),
        Some(v["host"]["kernel"]["cpus"]["value"].as_u64().unwrap())
    );
}

/// Processes whose command line mentions a preemptlab vm temp dir (vng, virtme-run, QEMU, virtiofsd).
/// Every stop signal, early (vng starting), mid-boot, and with the command running: the guest stops,
/// nothing is left, and the exit code is 128 + the signal (issue 29: SIGQUIT left virtme-ng and QEMU
/// running and the temp dir behind; the others exited 2).
#[test]
fn sigint_during_a_vm_run_leaves_nothing_behind() {
    let _one = one_at_a_time();
    let before = vm_temp_dirs();
    let signals = [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP];
    for (i, delay_ms) in [300u64, 4_000, 12_000, 25_000].into_iter().enumerate() {
        let sig = signals[i % signals.len()];
        let child = preemptlab()
            .args(["vm", "--kernel", "6.18", "--"])
            .args(TINY_BENCH.map(|a| if a == "200ms" { "30s" } else { a }))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        stop_after(child, sig, delay_ms);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            vm_processes(),
            Vec::<String>::new(),
            "left behind after signal {sig} at {delay_ms} ms"
        );
        assert_eq!(
            vm_temp_dirs(),
            before,
            "temp dir left after signal {sig} at {delay_ms} ms"
        );
    }
}

/// On the kernel built with the rseq time-slice extension (scripts/kernel-build-rseq, booted as `7.2-rseq`),
/// under lazy: the audit says the extension is available, and `bench lock --locks pg,rseq` measures the rseq
/// row (not skipped) with grants > 0 and its exclusion checks passing.
#[test]
fn rseq_lock_gets_grants_on_the_slice_extension_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let out_s = out.display().to_string();
    let o = vm(&["--kernel", "7.2-rseq", "--", "audit", "--format", "json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let a = json(&o);
    assert_eq!(
        a["kernel"]["rseq_slice_extension"]["value"], true,
        "{}",
        a["kernel"]
    );
    let o = vm(&[
        "--kernel",
        "7.2-rseq",
        "--",
        "bench",
        "lock",
        "--locks",
        "pg,rseq",
        "--pages",
        "4k",
        "--workers",
        "8x",
        "--switch-preempt",
        "lazy",
        "--repeat",
        "3",
        "--duration",
        "2s",
        "--warmup",
        "500ms",
        "--out",
        &out_s,
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["host"]["kernel"]["preemption"]["model"], "lazy");
    let cell = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["lock"] == "rseq")
        .expect("an rseq cell");
    assert_eq!(
        cell["status"], "ok",
        "measured, not skipped: {}",
        cell["reason"]
    );
    // A grant needs the scheduler to want the holder off its CPU inside its few-hundred-ns critical
    // section: under TCG that came 39-52 times a second in the VM campaign, but once 0 times in a 2 s
    // repetition without warm-up. Three repetitions after a warm-up; every one keeps exclusion and makes
    // requests, and the kernel grants in at least one.
    let reps = cell["reps"].as_array().unwrap();
    assert_eq!(reps.len(), 3);
    let mut grants = 0;
    for rep in reps {
        assert_eq!(rep["check"]["ok"], true, "exclusion: {}", rep["check"]);
        let s = &rep["rseq_slice"];
        assert!(s["requests"].as_u64().unwrap() > 0, "{s}");
        grants += s["grants"].as_u64().unwrap();
    }
    let slices: Vec<&serde_json::Value> = reps.iter().map(|r| &r["rseq_slice"]).collect();
    assert!(grants > 0, "the kernel granted extensions: {slices:?}");
    eprintln!("rseq slice extension, 3 x 2 s: {slices:?}");
}

/// `bench pg --diagnose` in a 6.18 guest under `model`: the run's diagnosis, failing loudly when the guest
/// could not measure (perf events or tracefs missing there).
fn diagnosed_pg_run(model: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join(format!("{model}.json"));
    let out_s = out.to_str().unwrap();
    let o = vm(&[
        "--kernel",
        "6.18",
        "--preempt",
        model,
        "--",
        "bench",
        "pg",
        "--huge-pages",
        "off",
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
        out_s,
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["host"]["kernel"]["preemption"]["model"], model);
    assert_vm_block(&v);
    let rep = &v["cells"][0]["reps"][0];
    let unmeasured = rep["diagnosis_unmeasured"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        unmeasured.is_empty(),
        "the guest must offer perf events and tracefs: {unmeasured:?}"
    );
    let d = rep["diagnosis"].clone();
    assert!(
        d["verdict"]["spinlock_share"]["of"].as_u64().unwrap() > 50,
        "on-CPU samples in the guest: {}",
        d["totals"]
    );
    assert!(
        d["totals"]["switches"]["runnable"].as_u64().unwrap() > 0,
        "sched_switch records in the guest: {}",
        d["totals"]
    );
    d
}

/// Issue 24: the report's mechanism counted directly. In a `full` guest under a reconnecting pgbench,
/// backends are preempted inside page faults (> 0); in a `none` guest never (0, by construction: the
/// kernel does not preempt inside itself there).
#[test]
fn preemptions_inside_faults_under_full_and_none() {
    let full = diagnosed_pg_run("full");
    let sw = &full["totals"]["switches"];
    assert!(
        sw["in_fault_kernel_preemption"].as_u64().unwrap() > 0,
        "preempted inside faults under full: {sw}"
    );
    let none = diagnosed_pg_run("none");
    let sw = &none["totals"]["switches"];
    assert_eq!(
        sw["kernel_preemption"], 0,
        "none preempts nothing inside the kernel: {sw}"
    );
    assert_eq!(sw["in_fault_kernel_preemption"], 0, "{sw}");
    assert!(
        none["verdict"]["checks"][0]
            .as_str()
            .unwrap()
            .starts_with("ok: 0 in-kernel preemptions"),
        "{}",
        none["verdict"]
    );
}
