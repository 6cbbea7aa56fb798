//! Candidates against a baseline, pure: the effect of each, its 95% interval and the call
//! the numbers allow (docs/concepts.md, "Numbers you can trust"). The operator's status
//! and the recommendation's effect against the runner-up both judge through here.
//!
//! Paired designs (each candidate's trial run beside a baseline trial): per pair the log
//! ratio ln(candidate / baseline), so what both sides saw cancels and a 10% slower side
//! is +0.095 whatever the chain's load. The effect is the mean log ratio (reported as a
//! ratio of geometric means, minus one), its interval Student's t with the residual
//! variance of a one-way model over pairs: pooled over every candidate's pairs and the
//! A/A pairs (each group about its own mean), so three pairs of one candidate borrow the
//! degrees of freedom of the others (Kalibera & Jones, ISMM 2013; Georges, Buytaert &
//! Eeckhout, OOPSLA 2007). A candidate whose spread is clearly not the others' (an F test
//! of its variance against the rest's, at [`VARIANCE_CHECK`]) uses its own variance and
//! degrees of freedom instead.
//!
//! Unpaired designs: Welch's t on the log values of each side (Welch 1947), no pooling.
//!
//! Each call tests a stated null, at 5% after Holm's correction over the candidates:
//! - **Different** (by at least δ, `practicalDifference`): the whole interval beyond δ
//!   (above ln(1 + δ) or below ln(1 - δ)); null: the true effect is exactly δ.
//! - **Equivalent** (within δ): the whole interval inside (-δ, +δ), Schuirmann's two
//!   one-sided tests (1987) at 2.5% each, so the interval shown is the one judged; null:
//!   the true effect is exactly δ.
//! - **Real**: the interval excludes zero (a difference exists) but neither of the above;
//!   null: no difference.
//! - **Inconclusive** otherwise, with how many more pairs would likely settle it if the
//!   effect is what was measured (80% power at the pooled sd). No call from fewer than
//!   [`MIN_N`] pairs (or repetitions per side).
//!
//! What it assumes: log ratios about normal and independent between pairs (a node's own
//! speed cancels over repetitions that swap the nodes); the A/A pairs differ by nothing
//! on average (their interval says whether they do). The calibration tests
//! (calibration.rs) measure each call's error at its null, with skewed noise and unequal
//! spreads too.

use super::{ALPHA, Interval, Method, holm, pct, t_quantile, t_upper};
use statrs::distribution::{ContinuousCDF, FisherSnedecor};

/// No call from fewer pairs (or repetitions per side) than this.
pub const MIN_N: usize = 3;
/// The level of the F test that keeps a candidate's variance out of the pool when it is
/// larger than the rest's: liberal, so a candidate noisier than the others is rarely
/// judged with their smaller variance (calibration.rs measures the cost).
pub const VARIANCE_CHECK: f64 = 0.25;
/// Inconclusive effects say how many more pairs would settle them up to this many.
const MAX_MORE: usize = 100;
/// The power "would likely settle it" means.
const POWER: f64 = 0.8;

/// What the numbers allow one to say of an effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// Different by at least the practical difference: the interval lies beyond it.
    Different,
    /// Equivalent within the practical difference: the interval lies inside it.
    Equivalent,
    /// A difference exists (the interval excludes zero); whether it reaches the practical
    /// difference is unsettled.
    Real,
    /// Nothing of the above.
    Inconclusive,
}

impl Call {
    pub fn as_str(self) -> &'static str {
        match self {
            Call::Different => "Different",
            Call::Equivalent => "Equivalent",
            Call::Real => "Real",
            Call::Inconclusive => "Inconclusive",
        }
    }
}

/// How many more pairs (or repetitions per side) would likely settle an unsettled effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum More {
    /// About this many more.
    About(usize),
    /// More than [`MAX_MORE`]: the effect is about the practical difference itself.
    Many,
    /// Below [`MIN_N`]: no call yet.
    TooFew,
}

/// One candidate's (or the A/A pairs') effect against the baseline.
#[derive(Clone, Debug, PartialEq)]
pub struct Effect {
    /// The ratio of geometric means minus one ("-0.12" is 12% lower).
    pub relative: f64,
    /// The effect's 95% interval on the same scale; None below two pairs.
    pub interval: Option<Interval>,
    /// Pairs, or the smaller side's repetitions.
    pub n: usize,
    pub method: Method,
    /// The degrees of freedom of its interval (pooled, own, or Welch's).
    pub df: f64,
    /// The standard deviation of one pair's log ratio it was judged with (paired), or
    /// the larger side's (unpaired).
    pub sd: Option<f64>,
    /// Judged with the pooled variance.
    pub pooled: bool,
    pub call: Call,
    /// The interval alone would have called more, but Holm's correction over the
    /// candidates held it back.
    pub held_back: bool,
    /// Two-sided p of "no difference".
    pub p: f64,
    p_different: f64,
    p_equivalent: f64,
    /// Mean and standard error on the log scale.
    log_mean: f64,
    log_se: f64,
}

impl Effect {
    /// "-12% [-17%, -6%], 3 pairs".
    pub fn describe(&self) -> String {
        match self.interval {
            Some(i) => format!(
                "{} [{}, {}], {}",
                pct(self.relative),
                pct(i.lo),
                pct(i.hi),
                self.method.count(self.n)
            ),
            None => format!("{}, {}", pct(self.relative), self.method.count(self.n)),
        }
    }

    /// For an unsettled effect, how many more pairs (repetitions per side) would likely
    /// settle it.
    pub fn more(&self, practical: f64) -> Option<More> {
        match self.call {
            Call::Different | Call::Equivalent => None,
            _ if self.n < MIN_N => Some(More::TooFew),
            _ => Some(more_needed(self, practical)),
        }
    }

    /// What the call means, at practical difference `practical` (a fraction).
    pub fn verdict(&self, practical: f64) -> String {
        let d = format!("{:.0}%", practical * 100.0);
        let unit = match self.method {
            Method::Pairs => "pairs",
            _ => "repetitions per side",
        };
        let more = match self.more(practical) {
            Some(More::About(k)) => format!("about {k} more {unit} would likely settle it"),
            Some(More::Many) => format!(
                "more than {MAX_MORE} more {unit} would be needed: the effect is about {d} itself"
            ),
            Some(More::TooFew) => format!("no call from fewer than {MIN_N} {unit}"),
            None => String::new(),
        };
        let held = if self.held_back {
            " (its interval alone would say more; Holm's correction over the candidates holds it back)"
        } else {
            ""
        };
        match self.call {
            Call::Different => format!("different by more than {d}"),
            Call::Equivalent => format!("equivalent within {d}"),
            Call::Real => {
                format!("a difference exists, its size against {d} unsettled{held}: {more}")
            }
            Call::Inconclusive => format!("inconclusive{held}: {more}"),
        }
    }
}

/// The variance the effects were judged with.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Variance {
    /// The pooled standard deviation of one pair's log ratio, and its degrees of freedom.
    pub pooled: Option<(f64, f64)>,
    /// Groups of pairs in the pool (candidates and the A/A pairs).
    pub groups: usize,
    /// Candidates (by index) judged with their own variance: larger than the rest's.
    pub own: Vec<usize>,
    /// The A/A pairs' spread was clearly smaller than the candidates': left out of the
    /// pool.
    pub aa_apart: bool,
}

/// Every candidate's effect, in the given order, and the A/A pairs'.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Judgement {
    /// One per candidate; None for a candidate without two usable pairs.
    pub effects: Vec<Option<Effect>>,
    /// The A/A pairs' effect (the noise floor), judged like a candidate's; its call says
    /// whether identical configurations differed side by side, which the design assumes
    /// they do not.
    pub noise: Option<Effect>,
    pub variance: Variance,
}

impl Judgement {
    /// "pooled over 4 groups of pairs: sd 4.8% per pair, 8 degrees of freedom".
    pub fn describe_variance(&self) -> Option<String> {
        let (sd, df) = self.variance.pooled?;
        let mut s = format!(
            "variance pooled over {} groups of pairs: sd {:.1}% per pair, {df:.0} degrees of freedom",
            self.variance.groups,
            sd * 100.0
        );
        if self.variance.aa_apart {
            s.push_str("; the A/A pairs left out of the pool (their spread is clearly smaller than the candidates')");
        }
        if !self.variance.own.is_empty() {
            s.push_str(&format!(
                "; {} candidate(s) with a larger spread judged on their own",
                self.variance.own.len()
            ));
        }
        Some(s)
    }
}

/// A group's n, mean and sum of squared deviations.
#[derive(Clone, Copy, Debug, Default)]
struct Group {
    n: usize,
    mean: f64,
    ss: f64,
}

impl Group {
    fn of(values: &[f64]) -> Group {
        let n = values.len();
        if n == 0 {
            return Group::default();
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let ss = values.iter().map(|v| (v - mean).powi(2)).sum();
        Group { n, mean, ss }
    }

    fn df(&self) -> f64 {
        self.n.saturating_sub(1) as f64
    }
}

/// The log ratios of pairs (baseline, candidate) whose two values are positive.
pub fn log_ratios(pairs: &[(f64, f64)]) -> Vec<f64> {
    pairs
        .iter()
        .filter(|(b, c)| *b > 0.0 && *c > 0.0)
        .map(|(b, c)| (c / b).ln())
        .collect()
}

/// A paired design: each candidate's pairs (baseline, candidate), and the A/A pairs.
/// `practical` is the practical difference as a fraction (0.05).
pub fn paired(candidates: &[Vec<(f64, f64)>], aa: &[(f64, f64)], practical: f64) -> Judgement {
    let logs: Vec<Vec<f64>> = candidates.iter().map(|p| log_ratios(p)).collect();
    paired_logs(&logs, &log_ratios(aa), practical)
}

/// [`paired`] from the log ratios themselves.
pub fn paired_logs(candidates: &[Vec<f64>], aa: &[f64], practical: f64) -> Judgement {
    let groups: Vec<Group> = candidates
        .iter()
        .map(|v| Group::of(v))
        .chain([Group::of(aa)])
        .collect();
    let aa_group = groups[candidates.len()];
    let (cs, cdf) = groups[..candidates.len()]
        .iter()
        .fold((0.0, 0.0), |(s, d), g| (s + g.ss, d + g.df()));
    // The A/A pairs join the pool unless their spread is clearly smaller than the
    // candidates': a candidate noisier than its baseline would otherwise borrow a
    // variance too small for it (calibration.rs, unequal spreads).
    let aa_joins = aa_group.n >= 2
        && (cdf <= 0.0
            || cs <= 0.0
            || FisherSnedecor::new(aa_group.df(), cdf)
                .map_or(1.0, |f| f.cdf((aa_group.ss / aa_group.df()) / (cs / cdf)))
                >= VARIANCE_CHECK);
    let (ss, df) = if aa_joins {
        (cs + aa_group.ss, cdf + aa_group.df())
    } else {
        (cs, cdf)
    };
    let pooled = (df > 0.0).then(|| (ss / df).sqrt());
    let mut variance = Variance {
        pooled: pooled.map(|s| (s, df)),
        groups: groups[..candidates.len()]
            .iter()
            .filter(|g| g.n >= 2)
            .count()
            + usize::from(aa_joins),
        own: Vec::new(),
        aa_apart: aa_group.n >= 2 && !aa_joins,
    };
    // The variance a group is judged with: the pool's, unless its own is clearly larger
    // than the rest's.
    let judged = |g: &Group, in_pool: bool| -> Option<(f64, f64, bool)> {
        if g.n < 2 {
            return None;
        }
        if !in_pool {
            return Some((g.ss / g.df(), g.df(), false));
        }
        let (rest_ss, rest_df) = (ss - g.ss, df - g.df());
        let own = (g.ss / g.df(), g.df(), false);
        if rest_df <= 0.0 {
            return Some(own);
        }
        let (v, rest) = (g.ss / g.df(), rest_ss / rest_df);
        let larger = if rest > 0.0 {
            FisherSnedecor::new(g.df(), rest_df).map_or(1.0, |f| f.sf(v / rest)) < VARIANCE_CHECK
        } else {
            v > 0.0
        };
        Some(if larger { own } else { (ss / df, df, true) })
    };
    let mut effects: Vec<Option<Effect>> = Vec::new();
    for (i, g) in groups[..candidates.len()].iter().enumerate() {
        let e = judged(g, true).map(|(var, df, pooled)| {
            if !pooled {
                variance.own.push(i);
            }
            effect(
                g.n,
                g.mean,
                var.sqrt(),
                (var / g.n as f64).sqrt(),
                df,
                pooled,
                Method::Pairs,
                practical,
            )
        });
        effects.push(e);
    }
    let noise = judged(&aa_group, aa_joins).map(|(var, df, pooled)| {
        let mut e = effect(
            aa_group.n,
            aa_group.mean,
            var.sqrt(),
            (var / aa_group.n as f64).sqrt(),
            df,
            pooled,
            Method::Pairs,
            practical,
        );
        e.call = call_alone(&e);
        e
    });
    settle_calls(&mut effects);
    Judgement {
        effects,
        noise,
        variance,
    }
}

/// An unpaired design: the baseline's repetitions and each candidate's (positive
/// values), by Welch's t on their logs.
pub fn unpaired(baseline: &[f64], candidates: &[Vec<f64>], practical: f64) -> Judgement {
    let logs = |v: &[f64]| -> Vec<f64> { v.iter().filter(|x| **x > 0.0).map(|x| x.ln()).collect() };
    let b = Group::of(&logs(baseline));
    let mut effects: Vec<Option<Effect>> = candidates
        .iter()
        .map(|c| {
            let c = Group::of(&logs(c));
            if b.n < 2 || c.n < 2 {
                return None;
            }
            let (vb, vc) = (b.ss / b.df() / b.n as f64, c.ss / c.df() / c.n as f64);
            let se = (vb + vc).sqrt();
            // Welch-Satterthwaite; both sides constant gives 0/0: their own df.
            let df = if vb + vc > 0.0 {
                (vb + vc).powi(2) / (vb * vb / b.df() + vc * vc / c.df())
            } else {
                b.df() + c.df()
            };
            let sd = (b.ss / b.df()).max(c.ss / c.df()).sqrt();
            Some(effect(
                b.n.min(c.n),
                c.mean - b.mean,
                sd,
                se,
                df,
                false,
                Method::Repetitions,
                practical,
            ))
        })
        .collect();
    settle_calls(&mut effects);
    Judgement {
        effects,
        noise: None,
        variance: Variance::default(),
    }
}

/// The margins on the log scale: ln(1 - δ) and ln(1 + δ).
fn margins(practical: f64) -> (f64, f64) {
    ((1.0 - practical).max(1e-9).ln(), (1.0 + practical).ln())
}

/// An effect from its log-scale mean and standard error, with the p-values of each call
/// (the call itself waits for Holm's correction over the candidates).
#[allow(clippy::too_many_arguments)]
fn effect(
    n: usize,
    mean: f64,
    sd: f64,
    se: f64,
    df: f64,
    pooled: bool,
    method: Method,
    practical: f64,
) -> Effect {
    let t = t_quantile(1.0 - ALPHA / 2.0, df);
    let (lo, hi) = if se > 0.0 {
        (mean - t * se, mean + t * se)
    } else {
        (mean, mean)
    };
    // One-sided p of "the effect is at most x" (below: of "at least x").
    let above = |x: f64| one_sided(mean - x, se, df);
    let below = |x: f64| one_sided(x - mean, se, df);
    let (m_lo, m_hi) = margins(practical);
    // Each doubled, so that p < 5% is exactly "the 95% interval lies beyond (inside)";
    // of two tails only the one on the estimate's side can be the smaller.
    let p = (2.0 * one_sided(mean.abs(), se, df)).min(1.0);
    let p_different = if mean >= (m_lo + m_hi) / 2.0 {
        2.0 * above(m_hi)
    } else {
        2.0 * below(m_lo)
    }
    .min(1.0);
    let p_equivalent = (2.0 * above(m_lo).max(below(m_hi))).min(1.0);
    Effect {
        relative: mean.exp() - 1.0,
        interval: Some(Interval {
            lo: lo.exp() - 1.0,
            hi: hi.exp() - 1.0,
        }),
        n,
        method,
        df,
        sd: Some(sd),
        pooled,
        call: Call::Inconclusive,
        held_back: false,
        p,
        p_different,
        p_equivalent,
        log_mean: mean,
        log_se: se,
    }
}

/// P(estimate at least `diff` above its null), Student's t; exact for a zero error.
fn one_sided(diff: f64, se: f64, df: f64) -> f64 {
    if se > 0.0 {
        t_upper(diff / se, df)
    } else if diff > 0.0 {
        0.0
    } else {
        1.0
    }
}

/// The call of one effect judged alone (the A/A pairs').
fn call_alone(e: &Effect) -> Call {
    if e.p_different < ALPHA {
        Call::Different
    } else if e.p_equivalent < ALPHA {
        Call::Equivalent
    } else if e.p < ALPHA {
        Call::Real
    } else {
        Call::Inconclusive
    }
}

/// Each candidate's call, Holm-corrected over the candidates with at least [`MIN_N`],
/// call by call; and what would settle the unsettled ones.
fn settle_calls(effects: &mut [Option<Effect>]) {
    let judged: Vec<usize> = (0..effects.len())
        .filter(|i| effects[*i].as_ref().is_some_and(|e| e.n >= MIN_N))
        .collect();
    let holm_of = |p: fn(&Effect) -> f64| -> Vec<bool> {
        let ps: Vec<f64> = judged
            .iter()
            .map(|i| effects[*i].as_ref().map_or(1.0, p))
            .collect();
        holm(&ps, ALPHA)
    };
    let different = holm_of(|e| e.p_different);
    let equivalent = holm_of(|e| e.p_equivalent);
    let real = holm_of(|e| e.p);
    for (k, i) in judged.iter().enumerate() {
        let e = effects[*i].as_mut().expect("judged");
        e.call = if different[k] {
            Call::Different
        } else if equivalent[k] {
            Call::Equivalent
        } else if real[k] {
            Call::Real
        } else {
            Call::Inconclusive
        };
        e.held_back = call_alone(e) != e.call;
    }
}

/// The fewest pairs in all with which the effect, if it is what was measured, would be
/// called Different (beyond the margin) or Equivalent (inside it) with 80% power.
fn more_needed(e: &Effect, practical: f64) -> More {
    let (m_lo, m_hi) = margins(practical);
    let m = e.log_mean;
    let distance = if m >= m_hi {
        m - m_hi
    } else if m <= m_lo {
        m_lo - m
    } else {
        (m - m_lo).min(m_hi - m)
    };
    let sd = e.log_se * (e.n as f64).sqrt();
    if distance <= 0.0 || !sd.is_finite() {
        return More::Many;
    }
    if sd == 0.0 {
        return More::About(1);
    }
    // The normal approximation first, then Student's t from there (its quantiles only
    // shrink as pairs add degrees of freedom).
    let z = super::z_quantile(1.0 - ALPHA / 2.0) + super::z_quantile(POWER);
    let guess = ((z * sd / distance).powi(2).ceil() as usize).max(e.n + 1);
    for total in guess..=e.n + MAX_MORE {
        // More pairs add their degrees of freedom to the pool (or to the candidate's own).
        let df = e.df + (total - e.n) as f64;
        let z = t_quantile(1.0 - ALPHA / 2.0, df) + t_quantile(POWER, df);
        if distance >= z * sd / (total as f64).sqrt() {
            return More::About(total - e.n);
        }
    }
    More::Many
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// Three pairs of one candidate, alone: the interval is the one-sample t interval of
    /// the log ratios (R: t.test(log(c / b))).
    #[test]
    fn one_candidate_alone_is_a_one_sample_t_test_of_log_ratios() {
        let pairs = [(200.0, 220.0), (260.0, 286.5), (230.0, 252.0)];
        let j = paired(&[pairs.to_vec()], &[], 0.05);
        let e = j.effects[0].clone().unwrap();
        let d = log_ratios(&pairs);
        let m = d.iter().sum::<f64>() / 3.0;
        let s = super::super::sd(&d).unwrap();
        let half = 4.302_652_73 * s / 3f64.sqrt();
        let i = e.interval.unwrap();
        assert!(close(i.lo, (m - half).exp() - 1.0, 1e-9), "{e:?}");
        assert!(close(i.hi, (m + half).exp() - 1.0, 1e-9), "{e:?}");
        // Nothing to pool with: its own variance.
        assert_eq!((e.n, e.df, e.pooled), (3, 2.0, false));
        // +9.8% [+9.1%, +10.5%]: wholly beyond 5%.
        assert_eq!(e.call, Call::Different, "{e:?}");
        assert!(e.describe().ends_with(", 3 pairs"), "{}", e.describe());
    }

    /// A/A pairs and other candidates lend their degrees of freedom: the same three pairs
    /// get a narrower interval (t with 6 df, not 2) when the spread is alike.
    #[test]
    fn pooling_over_the_design_narrows_the_interval() {
        let c = vec![(100.0, 108.0), (100.0, 113.0), (100.0, 111.0)];
        let alone = paired(std::slice::from_ref(&c), &[], 0.05).effects[0]
            .clone()
            .unwrap();
        let aa = [(100.0, 102.0), (100.0, 97.5), (100.0, 100.5)];
        let other = vec![(100.0, 101.0), (100.0, 104.0), (100.0, 99.0)];
        let j = paired(&[c, other], &aa, 0.05);
        let pooled = j.effects[0].clone().unwrap();
        assert_eq!(pooled.df, 6.0);
        let width = |e: &Effect| e.interval.unwrap().hi - e.interval.unwrap().lo;
        assert!(width(&pooled) < 0.6 * width(&alone), "{pooled:?} {alone:?}");
        assert_eq!(j.variance.groups, 3);
        assert!(
            j.describe_variance()
                .unwrap()
                .contains("6 degrees of freedom")
        );
        // The noise floor is the A/A pairs' own effect, judged with the pool.
        let noise = j.noise.unwrap();
        assert_eq!((noise.n, noise.df), (3, 6.0));
        assert!(noise.interval.unwrap().contains(0.0));
    }

    /// A candidate far noisier than the rest is judged with its own variance.
    #[test]
    fn a_candidate_with_a_larger_spread_keeps_its_own_variance() {
        let calm = vec![(100.0, 100.5), (100.0, 99.5), (100.0, 100.2), (100.0, 99.9)];
        let wild = vec![(100.0, 130.0), (100.0, 80.0), (100.0, 115.0), (100.0, 90.0)];
        let j = paired(&[calm.clone(), wild], &calm, 0.05);
        let wild = j.effects[1].clone().unwrap();
        assert_eq!((wild.pooled, wild.df), (false, 3.0), "{wild:?}");
        assert_eq!(j.variance.own, [1]);
        assert!(j.effects[0].as_ref().unwrap().pooled);
    }

    #[test]
    fn calls_follow_where_the_interval_lies() {
        // (pairs' log-ratio offsets, call) at δ = 5%, each candidate judged alone.
        let spread = [-0.004, 0.0, 0.004];
        let cases = [
            (0.20, Call::Different),
            (-0.20, Call::Different),
            (0.0, Call::Equivalent),
            (0.01, Call::Equivalent),
            // +4.9% with a tight interval straddling +5%: real, size unsettled.
            (0.048, Call::Real),
        ];
        for (shift, want) in cases {
            let d: Vec<f64> = spread.iter().map(|s| shift + s).collect();
            let e = paired_logs(&[d], &[], 0.05).effects[0].clone().unwrap();
            assert_eq!(e.call, want, "shift {shift}: {e:?}");
        }
        let wide: Vec<f64> = [0.05, 0.2, 0.35].to_vec();
        let e = paired_logs(&[wide], &[], 0.05).effects[0].clone().unwrap();
        assert_eq!(e.call, Call::Inconclusive);
        let Some(More::About(k)) = e.more(0.05) else {
            panic!("{e:?}")
        };
        assert!(k > 0 && k < MAX_MORE, "{k}");
        assert!(
            e.verdict(0.05)
                .contains("more pairs would likely settle it")
        );
    }

    #[test]
    fn no_call_from_fewer_than_three_pairs() {
        let e = paired_logs(&[vec![0.3, 0.31]], &[], 0.05).effects[0]
            .clone()
            .unwrap();
        assert_eq!(
            (e.call, e.more(0.05)),
            (Call::Inconclusive, Some(More::TooFew))
        );
        assert!(e.verdict(0.05).contains("no call from fewer than 3 pairs"));
        assert_eq!(paired_logs(&[vec![0.3]], &[], 0.05).effects[0], None);
        // Non-positive figures have no log ratio: left out.
        assert_eq!(log_ratios(&[(0.0, 1.0), (2.0, 1.0)]).len(), 1);
    }

    /// Holm over the candidates: two at the edge of "different" alone are held back
    /// together when the family is larger.
    #[test]
    fn holm_holds_back_what_one_interval_alone_would_call() {
        // The interval alone just clears +5% (p 0.03); with three candidates it does not
        // (Holm asks the smallest p to be under 0.05 / 3), though a difference exists.
        let edge: Vec<f64> = [0.0704, 0.08, 0.0896].to_vec();
        let alone = paired_logs(std::slice::from_ref(&edge), &[], 0.05).effects[0]
            .clone()
            .unwrap();
        assert_eq!(alone.call, Call::Different, "{alone:?}");
        let none = vec![0.0, 0.002, -0.002];
        let j = paired_logs(&[edge, none.clone(), none], &[], 0.05);
        let e = j.effects[0].clone().unwrap();
        assert_ne!(e.call, Call::Different, "{e:?}");
        assert!(e.held_back, "{e:?}");
        assert!(e.verdict(0.05).contains("Holm"), "{}", e.verdict(0.05));
    }

    /// Welch's t, as R's t.test(log(c), log(b)) gives it.
    #[test]
    fn unpaired_is_welchs_t_on_logs() {
        let b = [100.0, 110.0, 95.0, 105.0];
        let c = [130.0, 118.0, 125.0];
        let e = unpaired(&b, &[c.to_vec()], 0.05).effects[0]
            .clone()
            .unwrap();
        let lb: Vec<f64> = b.iter().map(|x: &f64| x.ln()).collect();
        let lc: Vec<f64> = c.iter().map(|x: &f64| x.ln()).collect();
        let (vb, vc) = (
            super::super::sd(&lb).unwrap().powi(2) / 4.0,
            super::super::sd(&lc).unwrap().powi(2) / 3.0,
        );
        let df = (vb + vc).powi(2) / (vb * vb / 3.0 + vc * vc / 2.0);
        assert!(close(e.df, df, 1e-9), "{e:?}");
        assert_eq!((e.n, e.method), (3, Method::Repetitions));
        assert!(e.interval.unwrap().lo > 0.05, "{e:?}");
        assert_eq!(e.call, Call::Different);
        assert!(e.describe().ends_with("3 repetitions"));
    }
}
