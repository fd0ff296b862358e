//! The one significance rule of preemptlab: `compare` and `check` both call [`judge`].
//!
//! A metric changed when the 95% percentile-bootstrap interval of the ratio of centres clears 1 by more than
//! the noise threshold ([`significant`]) and Welch's t-test agrees at 5% after a Holm-Bonferroni correction
//! over the family (the metrics of one cell). Percentile-bootstrap intervals are too narrow with the 3-5
//! repetitions a bench makes; with several metrics per cell that flags drift as change, so Welch must agree,
//! and tested at 5% each a false "change" somewhere in the family is far likelier than 5% (a CI run flagged
//! acquire p99 and hold p99, Welch p 0.043 and 0.036, between the odd and even rounds of one run): Holm
//! keeps the family-wise rate at 5%. One repetition on a side says nothing about its spread: never
//! significant.

use serde::{Deserialize, Serialize};

use crate::compare::{bootstrap_ratio, holm, mann_whitney, significant, welch, Centre, RatioCi};

/// Bootstrap resamples per interval.
pub const BOOTSTRAP_ITERS: usize = 10_000;
/// Confidence level of the interval.
pub const LEVEL: f64 = 0.95;
/// Seed of the bootstrap, so a verdict is reproducible.
pub const SEED: u64 = 0x5EED;
/// Family-wise error rate of the Holm correction.
pub const ALPHA: f64 = 0.05;

/// One metric of a family: the repetitions of each side and how to take their centre.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    /// The baseline's repetitions.
    pub a: &'a [f64],
    /// The other side's repetitions.
    pub b: &'a [f64],
    /// How to take a centre.
    pub centre: Centre,
}

/// The judgement of one metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// centre(b) / centre(a) with its bootstrap interval.
    pub ci: RatioCi,
    /// Welch's two-sided p-value (NaN with fewer than two samples a side).
    pub welch_p: f64,
    /// Mann-Whitney's two-sided p-value, for readers who want it.
    pub mann_whitney_p: f64,
    /// The interval clears 1 by more than the noise and Welch agrees after Holm over the family.
    pub significant: bool,
}

/// Judges every metric of one family against the noise threshold (0.02: 2%).
pub fn judge(family: &[Sample<'_>], noise: f64) -> Vec<Judgement> {
    let mut out: Vec<Judgement> = family
        .iter()
        .map(|s| {
            let ci = bootstrap_ratio(s.a, s.b, s.centre, BOOTSTRAP_ITERS, LEVEL, SEED);
            Judgement {
                ci,
                welch_p: welch(s.a, s.b).p,
                mann_whitney_p: mann_whitney(s.a, s.b).p,
                significant: ci.ratio.is_finite()
                    && s.a.len() >= 2
                    && s.b.len() >= 2
                    && significant(&ci, noise),
            }
        })
        .collect();
    let ps: Vec<f64> = out.iter().map(|j| j.welch_p).collect();
    for (j, keep) in out.iter_mut().zip(holm(&ps, ALPHA)) {
        j.significant &= keep;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clear_gain_is_significant_and_one_repetition_never_is() {
        let a = [100.0, 101.0, 99.0, 100.5];
        let b = [150.0, 151.0, 149.0, 150.5];
        let s = |a, b| Sample {
            a,
            b,
            centre: Centre::Harmonic,
        };
        assert!(judge(&[s(&a, &b)], 0.02)[0].significant);
        assert!(!judge(&[s(&a[..1], &b[..1])], 0.02)[0].significant);
        assert!(!judge(&[s(&a, &a)], 0.02)[0].significant);
    }
}
