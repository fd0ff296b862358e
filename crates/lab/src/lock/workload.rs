//! What one `bench lock` operation does (PostgreSQL's `StrategyGetBuffer`): under the lock, pop the
//! free-list head or, when the list is empty, take one clock-sweep step; plus what a worker does before it
//! starts (ageing) and the busy waits that stand for work inside and outside the lock.

use std::time::Instant;

use shmlock::spin::XorShift;

use super::layout::{Shared, NOT_IN_LIST};

/// A hold longer than this is a stalled hold.
pub const STALL_NS: u64 = 100_000;

/// ns since `t0`.
pub(super) fn now_ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

/// Spins until `ns` have passed since `from_ns` (ns since `t0`).
pub(super) fn spin_for(t0: Instant, from_ns: u64, ns: u64) {
    if ns == 0 {
        return;
    }
    while now_ns(t0) - from_ns < ns {
        std::hint::spin_loop();
    }
}

impl<L> Shared<L> {
    /// Racy read of the free-list head outside the lock, only to map its descriptor's page in this process
    /// (`--prefetch-next`).
    pub(super) fn prefetch_head(&self) {
        // SAFETY: reading shared memory; a stale value is harmless (bounds-checked below).
        let head = unsafe { std::ptr::read_volatile(&(*self.control).free_head) };
        if head >= 0 && (head as u64) < self.n {
            // SAFETY: head < n, inside the descriptor array.
            unsafe { std::ptr::read_volatile(&(*self.descs.add(head as usize)).buf_id) };
        }
    }

    /// The critical section: pop the free-list head (reading the descriptor it names, a random one) or,
    /// when the list is empty, one clock-sweep step; then bump the counter the correctness check compares
    /// with the operations counted.
    ///
    /// # Safety
    /// The caller holds the lock.
    pub(super) unsafe fn pop_or_sweep(&self, rng: &mut XorShift) {
        let ctl = self.control;
        // SAFETY: the caller holds the lock: line 0 of the control block and the descriptors are ours
        // alone; indices are < n (the free list links only descriptors, the hand wraps at n). Plain
        // (volatile) accesses, so that broken exclusion would show up as a wrong counter.
        unsafe {
            let head = std::ptr::read_volatile(&(*ctl).free_head);
            if head >= 0 {
                let d = self.descs.add(head as usize);
                let next = std::ptr::read_volatile(&(*d).free_next);
                std::ptr::write_volatile(&mut (*ctl).free_head, next as i64);
                std::ptr::write_volatile(&mut (*d).free_next, NOT_IN_LIST);
                std::ptr::write_volatile(&mut (*d).refcount, (*d).refcount + 1);
                std::ptr::write_volatile(&mut (*ctl).popped, (*ctl).popped + 1);
            } else {
                let hand = std::ptr::read_volatile(&(*ctl).clock_hand);
                std::ptr::write_volatile(&mut (*ctl).clock_hand, (hand + 1) % self.n);
                let d = self.descs.add(hand as usize);
                let u = std::ptr::read_volatile(&(*d).usage_count);
                std::ptr::write_volatile(
                    &mut (*d).usage_count,
                    u.saturating_sub(1) + (rng.next_u64() & 1) as u32,
                );
                std::ptr::write_volatile(&mut (*ctl).sweeps, (*ctl).sweeps + 1);
            }
            std::ptr::write_volatile(&mut (*ctl).counter, (*ctl).counter + 1);
        }
    }

    /// Maps what `ops` operations would have mapped: as many reads of random descriptors (a pop reads the
    /// descriptor at the head of a randomly permuted free list). Before the worker reports ready, so
    /// neither warm-up nor measurement sees it.
    pub(super) fn age(&self, ops: u64, seed: u64) {
        let mut rng = XorShift::new(seed ^ 0x05EE_DA6E);
        for _ in 0..ops {
            let i = rng.next_u64() % self.n;
            // SAFETY: i < n, inside the descriptor array; a racy read of shared memory, only to map its
            // page.
            unsafe { std::ptr::read_volatile(&(*self.descs.add(i as usize)).buf_id) };
        }
    }
}

/// The age a first worker starts at, uniform in [0, life): when workers are replaced after `life`
/// operations, workers that all start new together are all young in the measured window whenever a life
/// outlasts warm-up plus measurement (at 32 workers on 2 CPUs a worker does ~10k operations a second
/// against a life of 81,920, and the slower locks measured up to 0.33 faults per operation instead of the
/// steady 0.20). A population whose ages are spread over a life is in its steady state from the start,
/// like backends that connected at different times
/// (docs/notes/2026-11-22-lock-bench-worker-lifetime-and-start-ages.md).
pub fn start_age(life: u64, seed: u64, rep: u32, slot: u32) -> u64 {
    let mut rng = XorShift::new(
        seed ^ 0xA6E5_0000_0000_0000
            ^ ((rep as u64) << 32)
            ^ (slot as u64).wrapping_mul(0x9E37_79B9),
    );
    rng.next_u64() % life
}

/// The worker life that reproduces a busy server's fault density: five pops per 64 KB fault-around group of
/// the descriptor array (1024 descriptors), so a worker touches ~99% of the groups in its life and
/// averages ~0.2 faults per pop: the density of the backends in the April 2026 report
/// (docs/references.md#lhp-halving) (~73k pops each over ~15.7k groups in a 5-minute run of 50k TPS x ~5
/// buffer allocations per transaction over 1,024 clients). Immortal workers map everything in about a
/// second here and the faults the regression is about disappear from the measured window.
pub fn auto_reconnect_every(descriptors: u64) -> u64 {
    (5 * descriptors.div_ceil(1024)).max(1000)
}

/// The default descriptor count for this host: 1 GiB of descriptors (16 Mi) when RAM allows, else RAM/16,
/// at least 64 Ki. Large enough that the free list outlasts a default run, so pops stay random.
pub fn default_descriptors(mem_total_kib: Option<u64>) -> u64 {
    let ram = mem_total_kib.unwrap_or(4 << 20) * 1024;
    ((ram / 16) / 64).clamp(64 << 10, 16 << 20)
}

#[cfg(test)]
mod tests {
    use super::start_age;

    #[test]
    fn start_ages_spread_over_a_life() {
        let life = 81_920;
        let ages: Vec<u64> = (0..4096).map(|slot| start_age(life, 1, 0, slot)).collect();
        assert!(ages.iter().all(|&a| a < life));
        // Uniform on [0, life): mean life/2 (sd of the mean ~0.0045 life), each quarter ~1/4 of the slots.
        let mean = ages.iter().sum::<u64>() as f64 / ages.len() as f64 / life as f64;
        assert!((mean - 0.5).abs() < 0.03, "{mean}");
        for q in 0..4 {
            let n = ages.iter().filter(|&&a| a * 4 / life == q).count();
            assert!((900..1150).contains(&n), "quarter {q}: {n}");
        }
        // Deterministic, and different per repetition.
        assert_eq!(start_age(life, 1, 0, 7), start_age(life, 1, 0, 7));
        assert_ne!(
            (0..8).map(|s| start_age(life, 1, 0, s)).collect::<Vec<_>>(),
            (0..8).map(|s| start_age(life, 1, 1, s)).collect::<Vec<_>>()
        );
    }
}
