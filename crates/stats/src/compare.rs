//! Comparing two sets of repeated measurements: the ratio of their centres with a bootstrap confidence
//! interval, and the classical tests (Mann-Whitney U, Welch's t) for readers who want a p-value.
//!
//! A difference is called real only when the 95% interval of the ratio clears 1 by more than a noise
//! threshold (docs/references.md#summary-statistics), as criterion does with its noise threshold.

use serde::{Deserialize, Serialize};

use crate::{hmean, mean};

/// How to take the centre of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Centre {
    /// Harmonic mean: rates (ops/s, TPS).
    Harmonic,
    /// Arithmetic mean: times and counts per operation.
    Arithmetic,
}

impl Centre {
    /// The centre of `xs`.
    pub fn of(self, xs: &[f64]) -> f64 {
        match self {
            Centre::Harmonic => hmean(xs),
            Centre::Arithmetic => mean(xs),
        }
    }
}

/// A small deterministic generator (SplitMix64) so bootstrap intervals are reproducible.
#[derive(Debug, Clone)]
pub struct SplitMix(u64);

impl SplitMix {
    /// Seeds the generator.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A uniform index below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// The ratio centre(b) / centre(a) with a percentile-bootstrap confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RatioCi {
    /// centre(b) / centre(a).
    pub ratio: f64,
    /// Lower bound.
    pub lo: f64,
    /// Upper bound.
    pub hi: f64,
    /// Confidence level (0.95).
    pub level: f64,
}

/// Bootstraps the ratio of centres: resample each side with replacement `iters` times, take the ratio of
/// the resampled centres, and report the (1-level)/2 and (1+level)/2 percentiles. Deterministic for a seed.
/// NaN bounds when either side is empty or a centre is 0.
pub fn bootstrap_ratio(
    a: &[f64],
    b: &[f64],
    centre: Centre,
    iters: usize,
    level: f64,
    seed: u64,
) -> RatioCi {
    let ca = centre.of(a);
    let cb = centre.of(b);
    if a.is_empty() || b.is_empty() || ca == 0.0 || !ca.is_finite() || !cb.is_finite() {
        return RatioCi {
            ratio: f64::NAN,
            lo: f64::NAN,
            hi: f64::NAN,
            level,
        };
    }
    let ratio = cb / ca;
    // Each side's resampling stream is seeded from its own data, so swapping the arguments resamples the
    // same indices for the same data and inverts the interval exactly.
    let mut rng_a = SplitMix::new(seed ^ data_hash(a));
    let mut rng_b = SplitMix::new(seed ^ data_hash(b));
    let mut ratios = Vec::with_capacity(iters);
    let mut ra = vec![0.0; a.len()];
    let mut rb = vec![0.0; b.len()];
    for _ in 0..iters {
        for x in ra.iter_mut() {
            *x = a[rng_a.below(a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[rng_b.below(b.len())];
        }
        let da = centre.of(&ra);
        if da > 0.0 {
            ratios.push(centre.of(&rb) / da);
        }
    }
    ratios.sort_by(|x, y| x.total_cmp(y));
    // The interval is widened to include the point estimate when a skewed resampling distribution would
    // leave it outside (percentile bootstrap of a ratio of centres).
    let q = |p: f64| -> f64 {
        if ratios.is_empty() {
            return f64::NAN;
        }
        let idx = ((ratios.len() - 1) as f64 * p).round() as usize;
        ratios[idx]
    };
    let lo = q((1.0 - level) / 2.0).min(ratio);
    let hi = q((1.0 + level) / 2.0).max(ratio);
    RatioCi {
        ratio,
        lo,
        hi,
        level,
    }
}

fn data_hash(xs: &[f64]) -> u64 {
    // FNV-1a over the values' bits.
    xs.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| {
        x.to_bits()
            .to_le_bytes()
            .iter()
            .fold(h, |h, b| (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3))
    })
}

/// Whether an interval of a ratio shows a real difference: it lies wholly above `1 + noise` or wholly below
/// `1 / (1 + noise)` (0.02: above 1.02 or below 0.980). The two thresholds are reciprocal so that the verdict
/// does not depend on which side is the base (with `1 - noise` below, an interval [1.0203, ..] was a change
/// one way and the same data swapped, [.., 0.9801], was not).
pub fn significant(ci: &RatioCi, noise: f64) -> bool {
    ci.lo > 1.0 + noise || ci.hi < 1.0 / (1.0 + noise)
}

/// Holm-Bonferroni step-down over a family of tests: which null hypotheses are rejected at family-wise
/// error rate `alpha`. A NaN p-value (both samples constant) counts as 0: the samples differ or they do not,
/// and the interval decides.
pub fn holm(ps: &[f64], alpha: f64) -> Vec<bool> {
    let p = |i: usize| if ps[i].is_nan() { 0.0 } else { ps[i] };
    let mut order: Vec<usize> = (0..ps.len()).collect();
    order.sort_by(|&a, &b| p(a).total_cmp(&p(b)));
    let m = ps.len();
    let mut out = vec![false; m];
    for (k, &i) in order.iter().enumerate() {
        if p(i) < alpha / (m - k) as f64 {
            out[i] = true;
        } else {
            break;
        }
    }
    out
}

/// Mann-Whitney U test (two-sided).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// U of the first sample.
    pub u: f64,
    /// Two-sided p-value: exact for small samples without ties, normal approximation with tie and
    /// continuity correction otherwise.
    pub p: f64,
    /// Whether `p` is exact.
    pub exact: bool,
}

fn ranks(all: &[(f64, usize)]) -> (Vec<f64>, f64) {
    // Average ranks for ties; also returns the tie-correction term sum(t^3 - t).
    let mut idx: Vec<usize> = (0..all.len()).collect();
    idx.sort_by(|&i, &j| all[i].0.total_cmp(&all[j].0));
    let mut r = vec![0.0; all.len()];
    let mut ties = 0.0;
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && all[idx[j + 1]].0 == all[idx[i]].0 {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = avg;
        }
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    (r, ties)
}

/// Mann-Whitney U test of `a` against `b`.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> MannWhitney {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return MannWhitney {
            u: f64::NAN,
            p: f64::NAN,
            exact: false,
        };
    }
    let all: Vec<(f64, usize)> = a
        .iter()
        .map(|&x| (x, 0))
        .chain(b.iter().map(|&x| (x, 1)))
        .collect();
    let (r, ties) = ranks(&all);
    let r1: f64 = r
        .iter()
        .zip(&all)
        .filter(|(_, (_, g))| *g == 0)
        .map(|(x, _)| *x)
        .sum();
    let u1 = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    if ties == 0.0 && n1 * n2 <= 400 {
        // Exact distribution of U by dynamic programming over (n1, n2): count arrangements with U = u.
        let max_u = n1 * n2;
        let counts = u_counts(n1, n2);
        let total: f64 = counts.iter().sum();
        let u_small = u1.min(n1f * n2f - u1).round() as usize;
        let tail: f64 = counts[..=u_small.min(max_u)].iter().sum::<f64>() / total;
        return MannWhitney {
            u: u1,
            p: (2.0 * tail).min(1.0),
            exact: true,
        };
    }
    let n = n1f + n2f;
    let mu = n1f * n2f / 2.0;
    let sigma = (n1f * n2f / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)))).sqrt();
    if sigma == 0.0 {
        return MannWhitney {
            u: u1,
            p: 1.0,
            exact: false,
        };
    }
    let z = ((u1 - mu).abs() - 0.5).max(0.0) / sigma;
    MannWhitney {
        u: u1,
        p: (2.0 * (1.0 - normal_cdf(z))).min(1.0),
        exact: false,
    }
}

/// Number of arrangements of n1 and n2 items giving each U (index = U).
fn u_counts(n1: usize, n2: usize) -> Vec<f64> {
    // f(i, j, u): arrangements of i items of the first group and j of the second with U = u.
    // f(i, j, u) = f(i - 1, j, u - j) + f(i, j - 1, u).
    let max_u = n1 * n2;
    let mut table = vec![vec![vec![0.0f64; max_u + 1]; n2 + 1]; n1 + 1];
    // One arrangement with U = 0 when either group is empty.
    for row in table.iter_mut() {
        row[0][0] = 1.0;
    }
    for cell in table[0].iter_mut() {
        cell[0] = 1.0;
    }
    for i in 1..=n1 {
        for j in 1..=n2 {
            for u in 0..=max_u {
                let from_first = if u >= j { table[i - 1][j][u - j] } else { 0.0 };
                table[i][j][u] = from_first + table[i][j - 1][u];
            }
        }
    }
    table[n1][n2].clone()
}

/// Welch's unequal-variance t test (two-sided).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Welch {
    /// t statistic (mean(a) - mean(b)) / standard error.
    pub t: f64,
    /// Welch-Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// Welch's t test of `a` against `b`. NaN when a side has fewer than two samples.
pub fn welch(a: &[f64], b: &[f64]) -> Welch {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.len() < 2 || b.len() < 2 {
        return Welch {
            t: f64::NAN,
            df: f64::NAN,
            p: f64::NAN,
        };
    }
    let (m1, m2) = (mean(a), mean(b));
    let v1 = a.iter().map(|x| (x - m1).powi(2)).sum::<f64>() / (n1 - 1.0);
    let v2 = b.iter().map(|x| (x - m2).powi(2)).sum::<f64>() / (n2 - 1.0);
    let se2 = v1 / n1 + v2 / n2;
    if se2 == 0.0 {
        return Welch {
            t: if m1 == m2 { 0.0 } else { f64::INFINITY },
            df: n1 + n2 - 2.0,
            p: if m1 == m2 { 1.0 } else { 0.0 },
        };
    }
    let t = (m1 - m2) / se2.sqrt();
    let df = se2 * se2 / ((v1 / n1).powi(2) / (n1 - 1.0) + (v2 / n2).powi(2) / (n2 - 1.0));
    let p = student_t_two_sided_p(t, df);
    Welch { t, df, p }
}

/// Two-sided p-value of Student's t with `df` degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2).
pub fn student_t_two_sided_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
}

/// The standard normal CDF (Abramowitz-Stegun 7.1.26 erf approximation, |error| < 1.5e-7).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let y = 1.0
        - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736) * t
            + 0.254_829_592)
            * t
            * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + y)
    } else {
        0.5 * (1.0 - y)
    }
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos approximation (g = 7, n = 9).
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b) (continued fraction, Lentz's method).
pub fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - incomplete_beta(b, a, 1.0 - x);
    }
    // Lentz's method: each half-step folds one continued-fraction coefficient into (c, d); f is the product.
    let tiny = 1e-300;
    let clamp = |v: f64| if v.abs() < tiny { tiny } else { v };
    let step = |num: f64, c: &mut f64, d: &mut f64| -> f64 {
        *d = 1.0 / clamp(1.0 + num * *d);
        *c = clamp(1.0 + num / *c);
        *d * *c
    };
    let mut c = 1.0;
    let mut d = 1.0 / clamp(1.0 - (a + b) * x / (a + 1.0));
    let mut f = d;
    for m in 1..300 {
        let m = m as f64;
        f *= step(
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            &mut c,
            &mut d,
        );
        let delta = step(
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
            &mut c,
            &mut d,
        );
        f *= delta;
        if (delta - 1.0).abs() < 1e-14 {
            break;
        }
    }
    ln_front.exp() * f / a
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // Published worked examples: Wikipedia, "Welch's t-test", examples 1 and 2 (t = -2.46, df = 25.0,
    // p = 0.021; t = -1.57, df = 9.9, p = 0.149); the digits beyond those agree with SciPy's
    // ttest_ind(equal_var=False).
    const A1: [f64; 15] = [
        27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4,
    ];
    const A2: [f64; 15] = [
        27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4,
    ];

    #[test]
    fn welch_worked_examples() {
        let w = welch(&A1, &A2);
        assert!((w.t - -2.455356).abs() < 1e-5, "{w:?}");
        assert!((w.df - 24.98853).abs() < 1e-4, "{w:?}");
        assert!((w.p - 0.021378).abs() < 1e-5, "{w:?}");
        let b1 = [17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8];
        let b2 = [
            21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8, 20.7, 21.7, 21.5, 22.5,
            23.6, 21.5, 22.5, 23.5, 21.5, 21.8,
        ];
        let w = welch(&b1, &b2);
        assert!((w.t - -1.565434).abs() < 1e-5, "{w:?}");
        assert!((w.df - 9.904741).abs() < 1e-4, "{w:?}");
        assert!((w.p - 0.148842).abs() < 1e-5, "{w:?}");
    }

    #[test]
    fn mann_whitney_exact_and_asymptotic() {
        // Exact two-sided p-values, as SciPy's mannwhitneyu(method='exact') gives them.
        let m = mann_whitney(&[1.1, 2.3, 3.5], &[4.2, 5.0, 6.1]);
        assert!(m.exact && m.u == 0.0 && (m.p - 0.1).abs() < 1e-12, "{m:?}");
        let m = mann_whitney(&[19.0, 22.0, 16.0, 29.0, 24.0], &[20.0, 11.0, 17.0, 12.0]);
        assert!(
            m.exact && m.u == 17.0 && (m.p - 1.0 / 9.0).abs() < 1e-12,
            "{m:?}"
        );
        // With ties: normal approximation with tie and continuity correction (SciPy: U = 44, p = 0.06753).
        let x = [1.0, 2.0, 2.0, 3.0, 4.0, 5.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0];
        let y = [
            3.0, 4.0, 4.0, 5.0, 6.0, 7.0, 8.0, 8.0, 9.0, 11.0, 12.0, 13.0, 14.0,
        ];
        let m = mann_whitney(&x, &y);
        assert!(
            !m.exact && m.u == 44.0 && (m.p - 0.067528).abs() < 1e-4,
            "{m:?}"
        );
    }

    #[test]
    fn special_functions() {
        assert!((normal_cdf(1.959964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-9);
        // I_0.5(a, a) = 0.5 by symmetry; t = 0 gives p = 1.
        assert!((incomplete_beta(3.0, 3.0, 0.5) - 0.5).abs() < 1e-12);
        assert!((student_t_two_sided_p(0.0, 7.0) - 1.0).abs() < 1e-12);
        // Two-sided 5% critical value of t with 10 df is 2.228139.
        assert!((student_t_two_sided_p(2.228139, 10.0) - 0.05).abs() < 1e-6);
    }

    #[test]
    fn bootstrap_sees_a_clear_difference_and_not_a_non_difference() {
        let a = [100.0, 101.0, 99.0, 100.5, 99.5];
        let b = [120.0, 121.0, 119.0, 120.5, 119.5];
        let ci = bootstrap_ratio(&a, &b, Centre::Harmonic, 10_000, 0.95, 1);
        assert!((ci.ratio - 1.2).abs() < 0.01);
        assert!(significant(&ci, 0.02), "{ci:?}");
        let c = [100.2, 100.8, 99.1, 100.4, 99.6];
        assert!(!significant(
            &bootstrap_ratio(&a, &c, Centre::Harmonic, 10_000, 0.95, 1),
            0.02
        ));
    }

    #[test]
    fn significance_bounds_are_reciprocal() {
        let ci = |lo: f64, hi: f64| RatioCi {
            ratio: (lo * hi).sqrt(),
            lo,
            hi,
            level: 0.95,
        };
        // Just past 1.02 one way is just past 1/1.02 the other way: the same verdict.
        assert!(significant(&ci(1.0203, 1.2), 0.02));
        assert!(significant(&ci(1.0 / 1.2, 1.0 / 1.0203), 0.02));
        assert!(!significant(&ci(1.0197, 1.2), 0.02));
        assert!(!significant(&ci(1.0 / 1.2, 1.0 / 1.0197), 0.02));
        assert!(!significant(&ci(0.99, 1.01), 0.0));
    }

    fn samples() -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(1.0f64..1e6, 2..8)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn interval_contains_the_estimate(a in samples(), b in samples()) {
            for centre in [Centre::Harmonic, Centre::Arithmetic] {
                let ci = bootstrap_ratio(&a, &b, centre, 2_000, 0.95, 7);
                prop_assert!(ci.lo <= ci.ratio && ci.ratio <= ci.hi, "{ci:?}");
            }
        }

        #[test]
        fn swapping_inverts_the_ratio(a in samples(), b in samples()) {
            let ab = bootstrap_ratio(&a, &b, Centre::Harmonic, 2_000, 0.95, 7);
            let ba = bootstrap_ratio(&b, &a, Centre::Harmonic, 2_000, 0.95, 7);
            prop_assert!((ab.ratio * ba.ratio - 1.0).abs() < 1e-9);
            prop_assert!((ab.lo * ba.hi - 1.0).abs() < 1e-9, "{ab:?} {ba:?}");
            prop_assert!((ab.hi * ba.lo - 1.0).abs() < 1e-9, "{ab:?} {ba:?}");
            prop_assert_eq!(significant(&ab, 0.02), significant(&ba, 0.02));
        }

        #[test]
        fn identical_inputs_are_never_significant(a in samples()) {
            let ci = bootstrap_ratio(&a, &a, Centre::Arithmetic, 2_000, 0.95, 3);
            prop_assert!((ci.ratio - 1.0).abs() < 1e-12);
            prop_assert!(!significant(&ci, 0.02), "{ci:?}");
            prop_assert!(!significant(&ci, 0.0) || ci.lo > 1.0 || ci.hi < 1.0);
            let m = mann_whitney(&a, &a);
            prop_assert!(m.p > 0.05, "{m:?}");
        }
    }

    #[test]
    fn holm_steps_down_and_stops_at_the_first_failure() {
        // m = 4: thresholds 0.0125, 0.0167, 0.025, 0.05 for the sorted p-values.
        assert_eq!(
            holm(&[0.01, 0.04, 0.012, 0.03], 0.05),
            vec![true, false, true, false]
        );
        assert_eq!(holm(&[0.03, 0.04], 0.05), vec![false, false]);
        assert_eq!(holm(&[0.02, 0.04], 0.05), vec![true, true]);
        assert_eq!(holm(&[f64::NAN, 0.5], 0.05), vec![true, false]);
        assert_eq!(holm(&[0.04], 0.05), vec![true]);
        assert!(holm(&[], 0.05).is_empty());
    }
}
