//! The fault event's period, raised while faults come faster than the samples a second asked for.
//!
//! A sample costs the faulting task the record's write and this process its decoding: under a
//! connection-per-transaction `pgbench -S` on this project's 2-CPU VM (~350,000 minor faults a second),
//! one sample in 16 faults cost 4.1% of the TPS and one in 64 about 1-2%
//! (docs/notes/2026-11-26-diagnose-overhead.md). A fixed period makes that cost grow with the server's
//! fault rate; perf's own frequency mode bounds it but came out short of the kernel's fault counts in
//! some runs, so the period is set from user space instead ([`crate::perf::Ring::set_period`]), in
//! powers of two above `--fault-period`, once a second from the rate of the second before. Each sample
//! carries the period it was taken at, so the counts stay the sums of what the samples stand for.

/// The period for the next second: the lowest `min x 2^k` (k >= 0) at which `faults_per_s` gives at most
/// `max_samples` samples a second. Lowered only when the lower period would give at most three quarters
/// of that, so a rate near a boundary does not switch back and forth. `max_samples` 0: always `min`.
pub fn next_period(current: u64, min: u64, faults_per_s: f64, max_samples: u64) -> u64 {
    let min = min.max(1);
    if max_samples == 0 {
        return min;
    }
    let cap = max_samples as f64;
    let mut p = min;
    while faults_per_s / p as f64 > cap && p < (1 << 40) {
        p *= 2;
    }
    if p >= current || faults_per_s / p as f64 <= 0.75 * cap {
        p
    } else {
        current
    }
}

#[cfg(test)]
mod tests {
    use super::next_period;

    #[test]
    fn a_slow_server_keeps_the_floor() {
        assert_eq!(next_period(64, 64, 1_000.0, 1_000), 64);
        assert_eq!(next_period(64, 64, 64_000.0, 1_000), 64);
        assert_eq!(next_period(64, 64, 0.0, 1_000), 64);
    }

    #[test]
    fn a_fast_one_raises_it_in_powers_of_two() {
        // 350,000 faults a second: 1 in 512 gives 684 samples.
        assert_eq!(next_period(64, 64, 350_000.0, 1_000), 512);
        assert_eq!(next_period(64, 64, 64_001.0, 1_000), 128);
        assert_eq!(next_period(64, 16, 350_000.0, 0), 16);
    }

    #[test]
    fn it_comes_down_only_with_room() {
        // At 512, 200,000 a second would give 781 samples at 256: above three quarters, stay.
        assert_eq!(next_period(512, 64, 200_000.0, 1_000), 512);
        // 150,000 gives 586 at 256: come down.
        assert_eq!(next_period(512, 64, 150_000.0, 1_000), 256);
        // Quiet again: all the way down.
        assert_eq!(next_period(512, 64, 100.0, 1_000), 64);
    }
}
