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
//!
//! The samples are not all of it: while the fault event is open, every minor fault on the machine pays
//! the event's counter, 151-176 ns on that VM (`scripts/diagnose-event-cost`), which no period reaches:
//! 1.3-1.5% of its two CPUs under that load. So on a server faulting faster than `--fault-counts` a
//! second per CPU the event is also on for only part of each second ([`crate::duty`]: 5, 2 or 1 of its
//! ten slots, chosen once a second like the period), and each sample counts `10 / slots` times as much.
//! The counts stay estimates of every fault; the time the event was really on is measured beside them.

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

/// The shares of a second's ten slots the fault event may be on in: all, half, a fifth, a tenth, so that a
/// sample's weight stays a whole multiple of its period.
pub const SLOT_STEPS: [u32; 4] = [10, 5, 2, 1];

/// The slots (of [`crate::duty::SLOTS`]) the fault event is on in for the next second: the most of
/// [`SLOT_STEPS`] at which `faults_per_s` (the rate while the event was on) leaves at most `max_counts`
/// counted a second. Raised only when the higher share would count at most three quarters of that, so a
/// rate near a boundary does not switch back and forth. `max_counts` 0: always all ten.
pub fn next_slots(current: u32, faults_per_s: f64, max_counts: f64) -> u32 {
    if max_counts <= 0.0 {
        return 10;
    }
    let counted = |slots: u32| faults_per_s * slots as f64 / 10.0;
    let s = SLOT_STEPS
        .into_iter()
        .find(|&s| counted(s) <= max_counts)
        .unwrap_or(1);
    if s <= current || counted(s) <= 0.75 * max_counts {
        s
    } else {
        current
    }
}

/// What the once-a-second choice of the fault event's period and slots keeps between seconds.
#[derive(Debug, Clone)]
pub struct Adapt {
    /// The faults the samples stood for since the last choice, at their periods (not scaled by slots).
    pub faults_seen: u64,
    /// The event's time on at the last choice, ns.
    pub on_at_check: u64,
    /// The highest period set.
    pub period_max: u64,
    /// The fewest slots set.
    pub slots_min: u32,
}

/// The period and slots for the next second, from the faults seen while the event was on since the last
/// choice (`on_ns`: its time on so far); None when it has not been on for 100 ms since.
pub fn choose(
    a: &mut Adapt,
    on_ns: u64,
    (period, slots): (u64, u32),
    (min_period, max_samples, max_counts): (u64, u64, f64),
) -> Option<(u64, u32)> {
    if on_ns < a.on_at_check + 100_000_000 {
        return None;
    }
    let rate = a.faults_seen as f64 * 1e9 / (on_ns - a.on_at_check) as f64;
    let s = next_slots(slots, rate, max_counts);
    let next = (
        next_period(period, min_period, rate * s as f64 / 10.0, max_samples),
        s,
    );
    (a.faults_seen, a.on_at_check) = (0, on_ns);
    a.period_max = a.period_max.max(next.0);
    a.slots_min = a.slots_min.min(next.1);
    Some(next)
}

#[cfg(test)]
mod tests {
    use super::{next_period, next_slots};

    #[test]
    fn slots_follow_the_rate_in_whole_steps() {
        // 20,000 a second per CPU on two CPUs: 40,000.
        assert_eq!(next_slots(10, 30_000.0, 40_000.0), 10);
        assert_eq!(next_slots(10, 79_000.0, 40_000.0), 5);
        // A connection per transaction on this VM, ~350,000 a second: a tenth.
        assert_eq!(next_slots(10, 350_000.0, 40_000.0), 1);
        assert_eq!(next_slots(10, 150_000.0, 40_000.0), 2);
        // Up again only with room: 150,000 at 5 slots counts 75,000; at 2, 30,000 <= 0.75 x 40,000.
        assert_eq!(next_slots(1, 150_000.0, 40_000.0), 2);
        assert_eq!(next_slots(1, 190_000.0, 40_000.0), 1);
        assert_eq!(next_slots(2, 1_000.0, 40_000.0), 10);
        assert_eq!(next_slots(1, 1e9, 0.0), 10);
    }

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
