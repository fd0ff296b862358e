//! Sampled events on for part of each second: the `sched_switch` tracepoint (`--switch-duty`), the
//! on-CPU samples (`--cpu-duty`) and, on a server faulting fast, the fault event ([`crate::faultrate`]).
//!
//! The tracepoint's perf handler runs at every context switch on the machine, PostgreSQL's or not, before
//! its filter can reject the switch: on a switch-heavy server it is the dearest part of a diagnosis (a
//! system-wide profile of `pgbench -S -c 8` on 2 CPUs had 1.3 points more of the CPUs in the switch path
//! with it on; docs/notes/2026-11-26-diagnose-overhead.md). The on-CPU samples can be cut the same way
//! (`--cpu-duty`, default all the time: on this project's VM fewer samples did not cost measurably less). Each second is
//! cut into ten 100 ms slots and an event is on in `pct / 10` of them, a different pseudo-random choice
//! every second (a fixed phase could beat against a periodic load), so every second has the same share on
//! and the counts of any second, or of the window, scale by the same factor. The time an event was really
//! on is measured, not assumed.

/// Slots per second.
pub const SLOTS: u32 = 10;
/// One slot, ns.
pub const SLOT_NS: u64 = 1_000_000_000 / SLOTS as u64;

/// Which slots of the current second are on, and how long the tracepoint has been on.
#[derive(Debug, Clone)]
pub struct Duty {
    on_slots: u32,
    rng: u64,
    second: Option<u64>,
    pattern: [bool; SLOTS as usize],
    on_since_ns: Option<u64>,
    on_total_ns: u64,
}

impl Duty {
    /// `pct`: a multiple of 10 in 10..=100; `seed`: any value (0 is replaced).
    pub fn new(pct: u32, seed: u64) -> Self {
        Duty {
            on_slots: (pct / 10).clamp(1, SLOTS),
            rng: seed | 1,
            second: None,
            pattern: [false; SLOTS as usize],
            on_since_ns: None,
            on_total_ns: 0,
        }
    }

    /// The slots of a second it is on in.
    pub fn slots(&self) -> u32 {
        self.on_slots
    }

    /// From now on, on in `slots` of each second (1..=[`SLOTS`]); the current second is drawn again.
    pub fn set_slots(&mut self, slots: u32) {
        self.on_slots = slots.clamp(1, SLOTS);
        self.second = None;
    }

    /// True when the tracepoint is on all the time.
    pub fn always(&self) -> bool {
        self.on_slots == SLOTS
    }

    fn next(&mut self) -> u64 {
        // xorshift64: a cheap, well-spread sequence; nothing here needs more.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Whether the tracepoint should be on at `elapsed_ns` into the window.
    pub fn want(&mut self, elapsed_ns: u64) -> bool {
        if self.always() {
            return true;
        }
        let second = elapsed_ns / 1_000_000_000;
        if self.second != Some(second) {
            self.second = Some(second);
            // A partial Fisher-Yates shuffle: the first on_slots of a random permutation of the slots.
            let mut order: [usize; SLOTS as usize] = std::array::from_fn(|i| i);
            for i in 0..self.on_slots as usize {
                let j = i + (self.next() % (SLOTS as u64 - i as u64)) as usize;
                order.swap(i, j);
            }
            self.pattern = [false; SLOTS as usize];
            for &slot in &order[..self.on_slots as usize] {
                self.pattern[slot] = true;
            }
        }
        self.pattern[((elapsed_ns % 1_000_000_000) / SLOT_NS) as usize]
    }

    /// ns from `elapsed_ns` to the start of the next slot.
    pub fn to_next_slot_ns(elapsed_ns: u64) -> u64 {
        SLOT_NS - elapsed_ns % SLOT_NS
    }

    /// Records that the tracepoint was turned on (true) or off (false) at `now_ns`.
    pub fn turned(&mut self, on: bool, now_ns: u64) {
        match (on, self.on_since_ns) {
            (true, None) => self.on_since_ns = Some(now_ns),
            (false, Some(since)) => {
                self.on_total_ns += now_ns.saturating_sub(since);
                self.on_since_ns = None;
            }
            _ => {}
        }
    }

    /// True while on.
    pub fn is_on(&self) -> bool {
        self.on_since_ns.is_some()
    }

    /// Seconds the tracepoint was on (call after the last [`Duty::turned`]`(false, ..)`).
    pub fn on_s(&self) -> f64 {
        self.on_total_ns as f64 / 1e9
    }

    /// ns the event has been on up to `now_ns`, the span still running included.
    pub fn on_ns(&self, now_ns: u64) -> u64 {
        self.on_total_ns + self.on_since_ns.map_or(0, |s| now_ns.saturating_sub(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_second_has_its_share_of_slots_in_a_new_order() {
        let mut d = Duty::new(20, 12345);
        let mut patterns = std::collections::HashSet::new();
        for second in 0..50u64 {
            let on: Vec<bool> = (0..SLOTS as u64)
                .map(|s| d.want(second * 1_000_000_000 + s * SLOT_NS + 1))
                .collect();
            assert_eq!(
                on.iter().filter(|&&b| b).count(),
                2,
                "second {second}: {on:?}"
            );
            patterns.insert(on);
        }
        // 45 possible pairs of slots: 50 seconds must show many of them, not one fixed phase.
        assert!(patterns.len() > 15, "{}", patterns.len());
    }

    #[test]
    fn fewer_slots_take_effect_in_the_current_second() {
        let mut d = Duty::new(100, 7);
        assert!(d.want(3 * SLOT_NS));
        d.set_slots(1);
        assert!(!d.always());
        assert_eq!(d.slots(), 1);
        let on = (0..SLOTS as u64)
            .filter(|s| d.want(s * SLOT_NS + 1))
            .count();
        assert_eq!(on, 1);
        d.set_slots(0);
        assert_eq!(d.slots(), 1, "at least one slot");
    }

    #[test]
    fn full_duty_is_always_on_and_on_time_adds_up() {
        let mut d = Duty::new(100, 1);
        assert!(d.always());
        assert!((0..30).all(|k| d.want(k * 37_000_000)));
        let mut d = Duty::new(50, 7);
        d.turned(true, 1_000);
        d.turned(true, 2_000); // already on: no double count
        d.turned(false, 101_000);
        d.turned(false, 200_000); // already off
        d.turned(true, 300_000);
        d.turned(false, 350_000);
        assert!(!d.is_on());
        assert_eq!(d.on_s(), 150_000.0 / 1e9);
        d.turned(true, 400_000);
        assert_eq!(d.on_ns(450_000), 200_000);
        assert_eq!(Duty::to_next_slot_ns(SLOT_NS + 5), SLOT_NS - 5);
    }
}
