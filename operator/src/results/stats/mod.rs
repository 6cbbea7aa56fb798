//! Statistics of results, pure: a figure's n, mean, standard deviation and 95% interval;
//! the effect of a point against a baseline with its interval; "kept up k of n" with a
//! Wilson interval; Holm's correction when many points face one baseline; and the rule
//! that calls a difference only when it is real and large enough to matter.
//!
//! Methods, and why (docs/concepts.md, "Numbers you can trust"):
//! - Intervals of a mean are percentile bootstraps over the level where the variance is
//!   (repetitions, or pairs of concurrent trials), as Kalibera & Jones (ISMM 2013)
//!   recommend; within one long window, a moving-block bootstrap over its time series,
//!   which keeps the series' autocorrelation but cannot see day-to-day variance.
//! - Effects are ratios of means minus one, bootstrapped by resampling pairs together
//!   (paired designs: duet benchmarking, Bulej et al., ICPE 2020) or each side apart.
//! - Resampling is seeded: the same trials give the same interval on every pass, so the
//!   status does not change while nothing else does.

/// The confidence level of every interval.
pub const LEVEL: f64 = 0.95;
/// The standard normal's 97.5% quantile: [`LEVEL`]'s two-sided z.
const Z: f64 = 1.959_963_984_540_054;
/// Bootstrap resamples per interval: enough for the 2.5% and 97.5% percentiles to be
/// stable to about 1% of the interval's width.
pub const RESAMPLES: usize = 4000;
/// The fixed seed of every resampling.
const SEED: u64 = 0x7661_6c74_756e_6521;

/// SplitMix64 (Steele, Lea & Flood, OOPSLA 2014): small, fast, and good enough to pick
/// resampling indices.
struct Rng(u64);

impl Rng {
    fn new() -> Self {
        Rng(SEED)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// An index below `n` (n > 0); the modulo bias is below 2^-50 for any n here.
    fn index(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// How an interval was computed, which says what variance it includes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Over repetitions run at different times: includes the variance between windows.
    Repetitions,
    /// Over pairs of trials run at the same time on matched nodes.
    Pairs,
    /// Over blocks of one window's time series: excludes day-to-day variance.
    WithinWindow,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Repetitions => "repetitions",
            Method::Pairs => "pairs",
            Method::WithinWindow => "within one window",
        }
    }
}

/// A 95% interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }
}

/// A figure over a point's trials.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub n: usize,
    pub mean: f64,
    /// The sample standard deviation (n - 1); None below two values.
    pub sd: Option<f64>,
    /// None below two values: one trial says nothing of the spread.
    pub interval: Option<Interval>,
    pub method: Method,
}

/// The estimate of the mean of `values`, resampled as `method` says.
pub fn estimate(values: &[f64], method: Method) -> Option<Estimate> {
    let m = mean(values)?;
    let interval = match method {
        Method::WithinWindow => block_bootstrap_mean(values, block_length(values.len())),
        _ => bootstrap_mean(values),
    };
    Some(Estimate {
        n: values.len(),
        mean: m,
        sd: sd(values),
        interval,
        method,
    })
}

pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// The sample standard deviation (Bessel's n - 1).
pub fn sd(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let m = mean(values)?;
    let ss: f64 = values.iter().map(|v| (v - m).powi(2)).sum();
    Some((ss / (values.len() - 1) as f64).sqrt())
}

/// The q-quantile of sorted values, interpolated linearly between order statistics
/// (Hyndman & Fan's type 7, R's and numpy's default).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}

/// The central `LEVEL` interval of bootstrap replicates.
fn percentile_interval(mut replicates: Vec<f64>) -> Interval {
    replicates.sort_by(f64::total_cmp);
    let tail = (1.0 - LEVEL) / 2.0;
    Interval {
        lo: quantile(&replicates, tail),
        hi: quantile(&replicates, 1.0 - tail),
    }
}

/// The percentile bootstrap interval of the mean (Efron & Tibshirani 1993, ch. 13).
pub fn bootstrap_mean(values: &[f64]) -> Option<Interval> {
    if values.len() < 2 {
        return None;
    }
    let mut rng = Rng::new();
    let n = values.len();
    let replicates = (0..RESAMPLES)
        .map(|_| (0..n).map(|_| values[rng.index(n)]).sum::<f64>() / n as f64)
        .collect();
    Some(percentile_interval(replicates))
}

/// A block length for a series of `n` samples: n^(1/3), the order that minimises the
/// moving-block bootstrap's error for a mean (Hall, Horowitz & Jing 1995), at least 2.
pub fn block_length(n: usize) -> usize {
    ((n as f64).cbrt().round() as usize).max(2)
}

/// The moving-block bootstrap interval of a time series' mean (Künsch 1989): blocks of
/// `block` consecutive samples drawn with replacement keep the series' autocorrelation,
/// which an i.i.d. bootstrap would ignore (and so give too narrow an interval).
pub fn block_bootstrap_mean(series: &[f64], block: usize) -> Option<Interval> {
    let n = series.len();
    let block = block.clamp(1, n.max(1));
    if n < 2 || n < 2 * block {
        return None;
    }
    let starts = n - block + 1;
    let mut rng = Rng::new();
    let replicates = (0..RESAMPLES)
        .map(|_| {
            let mut sum = 0.0;
            let mut taken = 0;
            while taken < n {
                let s = rng.index(starts);
                for v in &series[s..(s + block).min(s + n - taken)] {
                    sum += v;
                    taken += 1;
                }
            }
            sum / n as f64
        })
        .collect();
    Some(percentile_interval(replicates))
}

/// The Wilson score interval of a proportion k/n (Wilson 1927), good at small n and at
/// 0 or n successes where the normal approximation is not.
pub fn wilson(k: usize, n: usize) -> Option<Interval> {
    if n == 0 {
        return None;
    }
    let z = Z;
    let (n, p) = (n as f64, k as f64 / n as f64);
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Some(Interval {
        lo: (center - half).max(0.0),
        hi: (center + half).min(1.0),
    })
}

/// A point's effect against the baseline: the ratio of its mean to the baseline's, minus
/// one ("-12%" is 12% lower), with its interval and a bootstrap p-value.
#[derive(Clone, Debug, PartialEq)]
pub struct Effect {
    pub relative: f64,
    pub interval: Interval,
    /// Two-sided: twice the share of replicates on the far side of zero.
    pub p: f64,
    /// Pairs, or the smaller of the two sides' counts.
    pub n: usize,
    pub method: Method,
}

fn ratio_minus_one(baseline: f64, candidate: f64) -> Option<f64> {
    (baseline != 0.0).then(|| candidate / baseline - 1.0)
}

fn effect_of(relative: f64, replicates: Vec<f64>, n: usize, method: Method) -> Option<Effect> {
    if replicates.is_empty() {
        return None;
    }
    let below = replicates.iter().filter(|r| **r <= 0.0).count();
    let above = replicates.iter().filter(|r| **r >= 0.0).count();
    let p = (2.0 * below.min(above) as f64 / replicates.len() as f64).min(1.0);
    Some(Effect {
        relative,
        interval: percentile_interval(replicates),
        p,
        n,
        method,
    })
}

/// The effect from pairs (baseline, candidate) run side by side: pairs are resampled
/// whole, so what both saw (the chain's load at that moment) cancels.
pub fn paired_effect(pairs: &[(f64, f64)]) -> Option<Effect> {
    if pairs.len() < 2 {
        return None;
    }
    let ratio = |ps: &mut dyn Iterator<Item = (f64, f64)>| {
        let (b, c) = ps.fold((0.0, 0.0), |(b, c), (x, y)| (b + x, c + y));
        ratio_minus_one(b, c)
    };
    let relative = ratio(&mut pairs.iter().copied())?;
    let mut rng = Rng::new();
    let n = pairs.len();
    let replicates = (0..RESAMPLES)
        .filter_map(|_| ratio(&mut (0..n).map(|_| pairs[rng.index(n)])))
        .collect();
    effect_of(relative, replicates, n, Method::Pairs)
}

/// The effect from trials not run side by side: each side resampled on its own.
pub fn unpaired_effect(baseline: &[f64], candidate: &[f64]) -> Option<Effect> {
    if baseline.len() < 2 || candidate.len() < 2 {
        return None;
    }
    let relative = ratio_minus_one(mean(baseline)?, mean(candidate)?)?;
    let mut rng = Rng::new();
    let mut resampled_mean = |v: &[f64]| {
        let n = v.len();
        (0..n).map(|_| v[rng.index(n)]).sum::<f64>() / n as f64
    };
    let replicates = (0..RESAMPLES)
        .filter_map(|_| {
            let b = resampled_mean(baseline);
            let c = resampled_mean(candidate);
            ratio_minus_one(b, c)
        })
        .collect();
    effect_of(
        relative,
        replicates,
        baseline.len().min(candidate.len()),
        Method::Repetitions,
    )
}

/// Holm's step-down correction (Holm 1979): which of `p` values stay significant at
/// family-wise level `alpha`, in their given order.
pub fn holm(p: &[f64], alpha: f64) -> Vec<bool> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|a, b| p[*a].total_cmp(&p[*b]));
    let mut significant = vec![false; m];
    for (rank, i) in order.into_iter().enumerate() {
        if p[i] > alpha / (m - rank) as f64 {
            break;
        }
        significant[i] = true;
    }
    significant
}

/// What the numbers allow one to say of an effect.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// The interval excludes zero (after Holm, when many points face one baseline) and
    /// the effect is at least the practical difference.
    Different,
    /// Real but smaller than the practical difference: not worth acting on.
    Negligible,
    /// No difference larger than this (the interval's farther end, as a fraction).
    NoneLargerThan(f64),
}

/// Calls an effect, given whether it survived the correction and the smallest relative
/// difference that matters (`practicalDifference`).
pub fn call(effect: &Effect, significant: bool, practical: f64) -> Call {
    let excludes_zero = !effect.interval.contains(0.0);
    if significant && excludes_zero {
        if effect.relative.abs() >= practical {
            Call::Different
        } else {
            Call::Negligible
        }
    } else {
        Call::NoneLargerThan(effect.interval.lo.abs().max(effect.interval.hi.abs()))
    }
}

/// "-12% [-17%, -6%], 3 pairs": an effect as reports write it.
pub fn describe_effect(e: &Effect) -> String {
    let pct = |x: f64| format!("{:+.0}%", x * 100.0);
    let unit = match (e.method, e.n) {
        (Method::Pairs, 1) => "pair",
        (Method::Pairs, _) => "pairs",
        (_, 1) => "repetition",
        _ => "repetitions",
    };
    format!(
        "{} [{}, {}], {} {unit}",
        pct(e.relative),
        pct(e.interval.lo),
        pct(e.interval.hi),
        e.n
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn mean_and_sd_from_their_formulas() {
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&v), Some(5.0));
        // Sum of squares 32 over n - 1 = 7.
        assert!(close(sd(&v).unwrap(), (32.0f64 / 7.0).sqrt(), 1e-12));
        assert_eq!(sd(&[3.0]), None);
        assert_eq!(mean(&[]), None);
    }

    #[test]
    fn quantiles_interpolate_as_numpy_does() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 1.0), 4.0);
        // numpy.quantile([1,2,3,4], 0.25) == 1.75
        assert_eq!(quantile(&v, 0.25), 1.75);
        assert_eq!(quantile(&v, 0.5), 2.5);
    }

    /// Wilson's interval from its formula, at the counts reports show most.
    #[test]
    fn wilson_intervals_match_their_formula() {
        let cases = [
            // (k, n, lo, hi): e.g. R's prop.test(k, n, correct = FALSE)$conf.int
            (3, 3, 0.4385, 1.0),
            (0, 3, 0.0, 0.5615),
            (1, 2, 0.0945, 0.9055),
            (8, 10, 0.4902, 0.9433),
        ];
        for (k, n, lo, hi) in cases {
            let i = wilson(k, n).unwrap();
            assert!(close(i.lo, lo, 5e-4), "{k}/{n}: lo {}", i.lo);
            assert!(close(i.hi, hi, 5e-4), "{k}/{n}: hi {}", i.hi);
        }
        assert_eq!(wilson(0, 0), None);
    }

    /// For a large sample the bootstrap interval of the mean is the normal one:
    /// mean +- 1.96 sd / sqrt(n).
    #[test]
    fn the_bootstrap_agrees_with_the_normal_interval_on_a_large_sample() {
        let v: Vec<f64> = (0..400).map(|i| ((i * 37) % 101) as f64).collect();
        let m = mean(&v).unwrap();
        let half = 1.959_964 * sd(&v).unwrap() / (v.len() as f64).sqrt();
        let i = bootstrap_mean(&v).unwrap();
        assert!(close(i.lo, m - half, half * 0.08), "{i:?} vs {}", m - half);
        assert!(close(i.hi, m + half, half * 0.08), "{i:?} vs {}", m + half);
        // Seeded: the same data give the same interval.
        assert_eq!(bootstrap_mean(&v), Some(i));
    }

    #[test]
    fn no_interval_from_one_value_and_none_wider_than_nothing_for_constants() {
        assert_eq!(bootstrap_mean(&[5.0]), None);
        assert_eq!(
            bootstrap_mean(&[5.0, 5.0, 5.0]),
            Some(Interval { lo: 5.0, hi: 5.0 })
        );
        let e = estimate(&[1.0, 2.0, 3.0], Method::Repetitions).unwrap();
        assert_eq!((e.n, e.mean, e.sd), (3, 2.0, Some(1.0)));
        let i = e.interval.unwrap();
        assert!(i.lo >= 1.0 && i.hi <= 3.0 && i.contains(2.0), "{i:?}");
    }

    /// A slowly drifting series: an i.i.d. bootstrap treats its samples as independent and
    /// is too narrow; blocks keep the drift and widen the interval.
    #[test]
    fn the_block_bootstrap_widens_for_autocorrelated_series() {
        let series: Vec<f64> = (0..600)
            .map(|i| 100.0 + 20.0 * (i as f64 / 60.0).sin() + ((i * 7919) % 13) as f64)
            .collect();
        let iid = bootstrap_mean(&series).unwrap();
        let blocks = block_bootstrap_mean(&series, 60).unwrap();
        assert!(
            blocks.hi - blocks.lo > 2.0 * (iid.hi - iid.lo),
            "blocks {blocks:?}, iid {iid:?}"
        );
        assert_eq!(block_length(1000), 10);
        assert_eq!(block_bootstrap_mean(&series[..3], 2), None);
        let e = estimate(&series, Method::WithinWindow).unwrap();
        assert_eq!(e.method.as_str(), "within one window");
    }

    /// Pairs that share the chain's load: the candidate is 10% slower in each, while the
    /// load moves both by far more. Paired, the effect is clear; unpaired, it drowns.
    #[test]
    fn pairing_cancels_what_both_sides_saw() {
        let load = [1.0, 1.6, 0.7];
        let pairs: Vec<(f64, f64)> = load
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let jitter = 1.0 + 0.005 * i as f64;
                (100.0 * l, 90.0 * l * jitter)
            })
            .collect();
        let paired = paired_effect(&pairs).unwrap();
        // Sums 330 and 298.35: a ratio of 0.904.
        assert!(close(paired.relative, -0.0959, 1e-3), "{paired:?}");
        assert!(!paired.interval.contains(0.0), "{paired:?}");
        assert!(paired.interval.hi < -0.08 && paired.interval.lo > -0.11);
        let (b, c): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
        let unpaired = unpaired_effect(&b, &c).unwrap();
        assert!(unpaired.interval.contains(0.0), "{unpaired:?}");
        assert_eq!(paired_effect(&pairs[..1]), None);
        let text = describe_effect(&paired);
        assert!(
            text.starts_with("-10% [-1") && text.ends_with("%], 3 pairs"),
            "{text}"
        );
    }

    #[test]
    fn holm_steps_down_and_stops_at_the_first_survivor_that_fails() {
        // m = 4: sorted 0.005 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2: stop.
        assert_eq!(
            holm(&[0.01, 0.04, 0.03, 0.005], 0.05),
            [true, false, false, true]
        );
        assert_eq!(holm(&[0.04], 0.05), [true]);
        assert_eq!(holm(&[0.04, 0.04], 0.05), [false, false]);
        assert!(holm(&[], 0.05).is_empty());
    }

    #[test]
    fn a_difference_is_called_only_when_real_and_large_enough() {
        let effect = |relative, lo, hi| Effect {
            relative,
            interval: Interval { lo, hi },
            p: 0.01,
            n: 3,
            method: Method::Pairs,
        };
        let cases = [
            (
                "clear and large",
                effect(-0.12, -0.17, -0.06),
                true,
                Call::Different,
            ),
            (
                "clear but small",
                effect(0.01, 0.005, 0.015),
                true,
                Call::Negligible,
            ),
            (
                "interval includes zero",
                effect(0.04, -0.02, 0.10),
                true,
                Call::NoneLargerThan(0.10),
            ),
            (
                "lost to Holm",
                effect(-0.12, -0.17, -0.06),
                false,
                Call::NoneLargerThan(0.17),
            ),
        ];
        for (case, e, significant, want) in cases {
            assert_eq!(call(&e, significant, 0.05), want, "{case}");
        }
    }
}
