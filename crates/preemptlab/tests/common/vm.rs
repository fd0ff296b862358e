//! What the VM tests share (tests/vm.rs for x86_64 guests, tests/vm_arm64.rs for arm64 guests): the binary
//! with virtme-ng found, one VM at a time, the result as JSON, the `vm` block's common checks.

use std::process::{Child, Command, Output};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;

static ONE_VM_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The binary, with virtme-ng where scripts/test-vm installs it unless PREEMPTLAB_VNG says otherwise.
pub fn preemptlab() -> Command {
    let mut c = Command::cargo_bin("preemptlab").unwrap();
    if std::env::var_os("PREEMPTLAB_VNG").is_none() {
        c.env("PREEMPTLAB_VNG", "/var/cache/preemptlab/virtme-ng/bin/vng");
    }
    c
}

/// Holds the one-VM-at-a-time lock (for a test that starts `vm` itself).
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_VM_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `preemptlab vm ARGS`, one VM at a time. (A boot that panics in early boot, about 3 in 100 under
/// TCG, is booted again by `vm` itself since issue 29.)
pub fn vm(args: &[&str]) -> Output {
    let _one = one_at_a_time();
    preemptlab().arg("vm").args(args).output().unwrap()
}

/// The command's stdout as JSON, or a panic showing both streams.
pub fn json(o: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// The models an audit says its kernel offers.
pub fn offered(v: &serde_json::Value) -> Vec<String> {
    v["kernel"]["preemption"]["offered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect()
}

/// What every `vm` block says whatever the architecture: the accelerator and why, QEMU and virtme-ng, the
/// guest's size, boot and command times, the guest's command line, every vCPU thread's time on the host.
pub fn assert_vm_block_common(v: &serde_json::Value) {
    let b = &v["vm"];
    assert!(
        ["kvm", "tcg"].contains(&b["accelerator"].as_str().unwrap()),
        "{b}"
    );
    assert!(!b["accelerator_why"].as_str().unwrap().is_empty());
    assert!(b["qemu_version"].as_str().unwrap().contains("QEMU"), "{b}");
    assert!(
        b["virtme_ng_version"]
            .as_str()
            .unwrap()
            .contains("virtme-ng"),
        "{b}"
    );
    assert!(b["vcpus"].as_u64().unwrap() >= 1);
    assert!(b["boot_s"].as_f64().unwrap() > 0.0);
    assert!(
        b["kernel_cmdline"].as_str().unwrap().contains("console="),
        "{b}"
    );
    assert!(b["command_s"].as_f64().unwrap() > 0.0, "{b}");
    let times = b["host_vcpu_times"].as_array().unwrap();
    assert_eq!(times.len() as u64, b["vcpus"].as_u64().unwrap(), "{b}");
    assert!(
        times.iter().any(|t| t["run_s"].as_f64().unwrap() > 0.0),
        "{b}"
    );
}

/// Processes of a `vm` run (virtme-ng and QEMU name the run's temp dir on their command lines).
pub fn vm_processes() -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(raw) = std::fs::read(e.path().join("cmdline")) {
            let cl = String::from_utf8_lossy(&raw).replace('\0', " ");
            if cl.contains("preemptlab-vm-") && !cl.contains("vm_processes") {
                found.push(format!("{}: {cl}", e.file_name().to_string_lossy()));
            }
        }
    }
    found
}

/// The temp dirs of `vm` runs.
pub fn vm_temp_dirs() -> Vec<String> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("preemptlab-vm-"))
        .collect()
}

/// The mount table's mount points that name a `vm` run's temp dir.
pub fn vm_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains("preemptlab-vm-"))
        .map(String::from)
        .collect()
}

/// Sends `sig` to a `vm` run (`child`, its stderr piped) after `delay_ms`, waits for it to end (at most
/// 15 s) and checks it ended as a stop signal should: exit code 128 + the signal, no Rust panic (a guest
/// kernel panicking on a boot, retried by `vm`, is not one). Returns its stderr.
pub fn stop_after(mut child: Child, sig: i32, delay_ms: u64) -> String {
    std::thread::sleep(Duration::from_millis(delay_ms));
    // SAFETY: signalling the child we spawned and have not reaped.
    unsafe { libc::kill(child.id() as i32, sig) };
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "no exit 15 s after signal {sig} ({delay_ms} ms)"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(128 + sig), "{delay_ms} ms: {err}");
    assert!(!super::rust_panic(&err), "{err}");
    err
}
