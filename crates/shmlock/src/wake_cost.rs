//! What a `futex_wake` that wakes somebody costs the waker: the figure behind the sim's
//! `futex_wake_idle_ns` (docs/notes/2026-11-22-sim-calibration-2cpu.md, "The wake's cost to the
//! releaser"). The waker runs on one CPU, the waiter sleeps in `futex_wait` on another, which is idle while
//! it sleeps (or, with `busy`, runs a spinning thread as well). Each round the waker lets the waiter fall
//! asleep (50 us), then times its own `futex_wake` syscall. Then it times `futex_wake` with nobody queued.
//!
//! Used by `examples/wake_cost.rs` and by `bench lock`'s cost measurement (`lab::lockbench::costs`). Every
//! thread it pins is its own: the caller's affinity is left as it was.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::futex;

/// The timed `futex_wake` calls, ns each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WakeCost {
    /// The CPUs the waker and the waiter ran on.
    pub cpus: (usize, usize),
    /// `futex_wake` calls that woke the waiter (rounds where it had not been queued yet are left out).
    pub woke: Vec<u64>,
    /// `futex_wake` calls with nobody queued.
    pub nobody: Vec<u64>,
}

/// The calling thread could not be pinned to a CPU.
#[derive(Debug, thiserror::Error)]
#[error("sched_setaffinity(CPU {cpu}): {err}")]
pub struct PinError {
    /// The CPU asked for.
    pub cpu: usize,
    /// What sched_setaffinity said.
    pub err: std::io::Error,
}

/// Why the wake cost could not be measured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WakeCostError {
    /// The caller may run on one CPU only.
    #[error("the wake cost needs two CPUs")]
    OneCpu,
    /// A thread could not be pinned to its CPU.
    #[error("could not pin the wake-cost threads to CPUs {waker} and {waiter}")]
    Unpinned {
        /// The waker's CPU.
        waker: usize,
        /// The waiter's CPU.
        waiter: usize,
    },
}

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: usize) -> Result<(), PinError> {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET and sched_setaffinity get valid pointers.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        let err = std::io::Error::last_os_error();
        return Err(PinError { cpu, err });
    }
    Ok(())
}

/// The CPUs the calling thread may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Times `rounds` wakes of a waiter sleeping on another CPU, then `rounds` wakes with nobody queued. The
/// waker runs on the first CPU the caller may use, the waiter on the second; an error when there is only
/// one. Takes about `rounds` x 60-120 us.
pub fn measure(rounds: usize, busy: bool) -> Result<WakeCost, WakeCostError> {
    let allowed = allowed_cpus();
    let (&waker_cpu, &waiter_cpu) = match allowed.as_slice() {
        [a, b, ..] => (a, b),
        _ => return Err(WakeCostError::OneCpu),
    };
    let word = AtomicU32::new(0);
    let asleep = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let failed = AtomicBool::new(false);
    let mut out = WakeCost {
        cpus: (waker_cpu, waiter_cpu),
        woke: Vec::with_capacity(rounds),
        nobody: Vec::with_capacity(rounds),
    };
    std::thread::scope(|s| {
        if busy {
            s.spawn(|| {
                if pin(waiter_cpu).is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        s.spawn(|| {
            if pin(waiter_cpu).is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            for _ in 0..rounds {
                while word.load(Ordering::Acquire) == 0 {
                    asleep.store(true, Ordering::Release);
                    futex::wait(&word, 0, None);
                }
                word.store(0, Ordering::Release);
            }
        });
        let waker = s.spawn(|| {
            let mut woke = Vec::with_capacity(rounds);
            let mut nobody = Vec::with_capacity(rounds);
            if pin(waker_cpu).is_err() {
                failed.store(true, Ordering::Relaxed);
            }
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
                nobody.push(t.elapsed().as_nanos() as u64);
            }
            stop.store(true, Ordering::Relaxed);
            (woke, nobody)
        });
        let (woke, nobody) = waker.join().unwrap_or_default();
        stop.store(true, Ordering::Relaxed);
        out.woke = woke;
        out.nobody = nobody;
    });
    if failed.load(Ordering::Relaxed) {
        return Err(WakeCostError::Unpinned {
            waker: waker_cpu,
            waiter: waiter_cpu,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_rounds_time_both_kinds_of_wake() {
        match measure(20, false) {
            Ok(w) => {
                assert_eq!(w.nobody.len(), 20);
                assert!(w.woke.len() <= 20);
                assert_ne!(w.cpus.0, w.cpus.1);
            }
            Err(e) => assert!(allowed_cpus().len() < 2, "{e}"),
        }
    }
}
