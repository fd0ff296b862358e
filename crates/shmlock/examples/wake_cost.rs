//! What a `futex_wake` that wakes somebody costs the waker, the figure behind the sim's
//! `futex_wake_idle_ns` (docs/notes/2026-11-22-sim-calibration-2cpu.md, "The wake's cost to the releaser"). The waker runs on CPU 0; the waiter sleeps in `futex_wait` on
//! CPU 1, which is idle while it sleeps (or, with `busy`, runs a spinning thread as well). Each round the
//! waker lets the waiter fall asleep (50 us), then times its own `futex_wake` syscall.
//!
//!     cargo run --release -p shmlock --example wake_cost [ROUNDS] [busy]

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use shmlock::futex;

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET and sched_setaffinity get valid pointers.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn pct(v: &mut [u64], q: f64) -> u64 {
    v.sort_unstable();
    v[((v.len() - 1) as f64 * q) as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5000);
    let busy = args.iter().any(|a| a == "busy");
    // SAFETY: sysconf has no preconditions.
    if unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } < 2 {
        eprintln!("wake_cost: needs two CPUs");
        std::process::exit(2);
    }
    let word = AtomicU32::new(0);
    let asleep = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let mut woke = Vec::with_capacity(rounds);
    let mut idle = Vec::with_capacity(rounds);
    std::thread::scope(|s| {
        if busy {
            s.spawn(|| {
                pin(1);
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        s.spawn(|| {
            pin(1);
            for _ in 0..rounds {
                while word.load(Ordering::Acquire) == 0 {
                    asleep.store(true, Ordering::Release);
                    futex::wait(&word, 0, None);
                }
                word.store(0, Ordering::Release);
            }
        });
        pin(0);
        for _ in 0..rounds {
            while !asleep.swap(false, Ordering::AcqRel) {
                std::hint::spin_loop();
            }
            std::thread::sleep(Duration::from_micros(50));
            word.store(1, Ordering::Release);
            let t = Instant::now();
            let n = futex::wake(&word, 1);
            let ns = t.elapsed().as_nanos() as u64;
            if n == 1 {
                woke.push(ns);
            }
            while word.load(Ordering::Acquire) == 1 {
                std::hint::spin_loop();
            }
        }
        // Nobody queued: the syscall alone.
        for _ in 0..rounds {
            let t = Instant::now();
            futex::wake(&word, 1);
            idle.push(t.elapsed().as_nanos() as u64);
        }
        stop.store(true, Ordering::Relaxed);
    });
    let target = if busy { "busy" } else { "idle" };
    println!(
        "futex_wake waking a waiter on a CPU that is {target}: {} of {rounds} rounds, p10 {} ns, p50 {} ns, p90 {} ns",
        woke.len(),
        pct(&mut woke, 0.1),
        pct(&mut woke, 0.5),
        pct(&mut woke, 0.9)
    );
    println!(
        "futex_wake with nobody queued: p50 {} ns",
        pct(&mut idle, 0.5)
    );
}
