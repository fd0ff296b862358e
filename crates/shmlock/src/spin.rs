//! Spin-wait policies, each a named type with its schedule documented.

/// One CPU-specific spin delay: `pause` on x86 (PostgreSQL's `SPIN_DELAY`: `rep; nop`), `isb` on aarch64
/// (PostgreSQL's choice there), a compiler hint elsewhere.
#[inline(always)]
pub fn cpu_relax() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: isb is a barrier with no memory or register effects visible to Rust.
    unsafe {
        std::arch::asm!("isb", options(nomem, nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "aarch64"))]
    std::hint::spin_loop();
}

/// Bounded exponential backoff: after the k-th failed attempt, spin `min(2^k, 1024)` relax iterations.
/// The schedule is 1, 2, 4, ... 1024, 1024, ...: it never sleeps.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExpBackoff {
    step: u32,
}

impl ExpBackoff {
    /// The largest number of relax iterations per step.
    pub const CAP: u32 = 1024;

    /// Spins for the current step and doubles the next one.
    #[inline]
    pub fn spin(&mut self) {
        let n = (1u32 << self.step.min(10)).min(Self::CAP);
        for _ in 0..n {
            cpu_relax();
        }
        self.step += 1;
    }

    /// The number of relax iterations the next `spin` will do.
    pub fn next_iterations(&self) -> u32 {
        (1u32 << self.step.min(10)).min(Self::CAP)
    }
}

/// A small xorshift generator for per-waiter randomness (PostgreSQL's sleep jitter), seeded per waiter.
#[derive(Debug, Clone, Copy)]
pub struct XorShift(u64);

impl XorShift {
    /// Seeds the generator (0 is remapped).
    pub fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// A uniform double in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_schedule_doubles_to_the_cap() {
        let mut b = ExpBackoff::default();
        let mut seen = Vec::new();
        for _ in 0..13 {
            seen.push(b.next_iterations());
            b.spin();
        }
        assert_eq!(
            seen,
            vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1024, 1024]
        );
    }

    #[test]
    fn xorshift_is_uniform_enough() {
        let mut r = XorShift::new(42);
        let mean = (0..100_000).map(|_| r.next_f64()).sum::<f64>() / 100_000.0;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
    }
}
