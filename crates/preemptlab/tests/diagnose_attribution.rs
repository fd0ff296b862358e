//! Attribution against the processes' own accounting: a fake instance (this test binary copied as
//! `postgres`, so the audit finds a postmaster) whose "backends" alternate between spinning in a function
//! named `s_lock` (user time) and reading /dev/zero (system time), and report their getrusage. The share of
//! their on-CPU samples that `diagnose` puts in the spinlock slow path must match the user share their own
//! accounting reports. Root (system-wide perf events).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;

const MODE: &str = "PREEMPTLAB_TEST_FAKE";
const DIR: &str = "PREEMPTLAB_TEST_DIR";
const WORKERS: usize = 2;
const RUN: Duration = Duration::from_secs(8);

/// The function the samples must name: spins for `ms` milliseconds, with no call inside the loop (a debug
/// build calls even `Range::next`), so that the sampled leaf is this function.
#[no_mangle]
#[inline(never)]
pub extern "C" fn s_lock(ms: u64) {
    let end = Instant::now() + Duration::from_millis(ms);
    loop {
        let mut i = 0u32;
        while i < 20_000 {
            pause();
            i += 1;
        }
        if Instant::now() >= end {
            break;
        }
    }
}

#[inline(always)]
fn pause() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `pause` only hints the CPU; it touches no memory or register.
    unsafe {
        std::arch::asm!("pause", options(nomem, nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `yield` only hints the CPU; it touches no memory or register.
    unsafe {
        std::arch::asm!("yield", options(nomem, nostack, preserves_flags))
    };
}

fn kernel_work(ms: u64) {
    let end = Instant::now() + Duration::from_millis(ms);
    let mut buf = vec![0u8; 1 << 20];
    let f = std::fs::File::open("/dev/zero").unwrap();
    while Instant::now() < end {
        std::io::Read::read_exact(&mut &f, &mut buf).unwrap();
    }
}

fn rusage() -> (f64, f64) {
    let u = hostfacts::rusage::Usage::now(hostfacts::rusage::Who::Process);
    (u.user_ns as f64 / 1e9, u.sys_ns as f64 / 1e9)
}

/// In a copy named `postgres`: the fake postmaster (starts the workers and waits) or a worker.
#[test]
fn fake_instance_process() {
    let Ok(mode) = std::env::var(MODE) else {
        return;
    };
    let dir = std::path::PathBuf::from(std::env::var(DIR).unwrap());
    if mode == "postmaster" {
        let me = std::env::current_exe().unwrap();
        let mut kids: Vec<_> = (0..WORKERS)
            .map(|_| {
                Command::new(&me)
                    .args(["--exact", "fake_instance_process", "--test-threads=1"])
                    .env(MODE, "worker")
                    .env(DIR, &dir)
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for k in &mut kids {
            k.wait().unwrap();
        }
        return;
    }
    let t = Instant::now();
    while t.elapsed() < RUN {
        s_lock(3);
        kernel_work(2);
    }
    let (user, system) = rusage();
    std::fs::write(
        dir.join(format!("worker-{}", std::process::id())),
        format!("{user} {system}"),
    )
    .unwrap();
}

#[test]
fn spinning_is_attributed_at_the_share_its_own_accounting_reports() {
    if std::env::var(MODE).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("postgres");
    std::fs::copy(std::env::current_exe().unwrap(), &fake).unwrap();
    let mut pm = Command::new(&fake)
        .args(["--exact", "fake_instance_process", "--test-threads=1"])
        .env(MODE, "postmaster")
        .env(DIR, dir.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let out = Command::new(cargo_bin("preemptlab"))
        .args([
            "diagnose",
            "--pid",
            &pm.id().to_string(),
            "--duration",
            "4s",
        ])
        .args(["--format", "json", "--frequency", "997"])
        .output()
        .unwrap();
    pm.wait().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let inst = &doc["instances"][0];
    let (mut user, mut system) = (0.0, 0.0);
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().starts_with("worker-") {
            let t = std::fs::read_to_string(e.path()).unwrap();
            let v: Vec<f64> = t.split(' ').map(|x| x.parse().unwrap()).collect();
            user += v[0];
            system += v[1];
        }
    }
    assert!(user + system > 1.0, "the workers ran: {user} {system}");
    let own = user / (user + system) * 100.0;
    let spin = &inst["verdict"]["spinlock_share"];
    let sampled = spin["pct"].as_f64().unwrap();
    assert!(
        spin["of"].as_u64().unwrap() >= 200,
        "enough samples: {spin} {}",
        inst["top_functions"]
    );
    assert!(
        (sampled - own).abs() < 8.0,
        "samples put {sampled:.1}% in s_lock; the workers' getrusage says {own:.1}% user time: {}",
        inst["top_functions"]
    );
    let top = &inst["top_functions"][0];
    assert_eq!(top["function"], "s_lock", "{}", inst["top_functions"]);
    assert_eq!(top["category"], "spinlock");
}
