//! The model's one source of randomness: splitmix64 from the run's seed. Every draw is part of the
//! result, so the order of the calls is too: code that moves a draw changes every figure after it.

use stats::compare::SplitMix;

/// A seeded splitmix64 generator: `stats`' one implementation (the bootstrap's), seeded from the run's seed.
pub(crate) struct Rng(SplitMix);

impl Rng {
    /// The generator of a run with `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(SplitMix::new(seed ^ 0x005E_ED0F_5EED))
    }

    /// The next 64 random bits.
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in [0, 1), 53 bits.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n) (modulo; [0, 1) for n = 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_depend_only_on_the_seed() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let xs: Vec<u64> = (0..8).map(|_| a.below(1000)).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.below(1000)).collect();
        assert_eq!(xs, ys);
        let u = Rng::new(7).unit();
        assert!((0.0..1.0).contains(&u));
        let mut c = Rng::new(8);
        assert_ne!(xs, (0..8).map(|_| c.below(1000)).collect::<Vec<_>>());
    }
}
