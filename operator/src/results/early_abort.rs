//! Early abort of a doomed trial (trial.earlyAbort), pure: from the client's lag series
//! (slots or blocks behind, its metric profile's lag query), is the trial bound to end its
//! window behind the chain? Only ever FellBehind, never an early KeptUp.
//!
//! Judged at `checks` moments `interval` apart, the last one now, all from Prometheus'
//! samples (so a restarted or busy operator judges the same moments, and nothing is kept
//! in status between passes). A rule ends the trial when it holds at every moment, and at
//! every moment the trial is more than `warmup.maxLag` behind:
//! - **LagGrowing**: the least-squares slope of the lag over the last `window` has a
//!   one-sided 95% lower bound above zero, and growing at that bound would leave the
//!   trial past `warmup.maxLag` at the window's end;
//! - **PastMaxLag**: the lag is past `earlyAbort.maxLag`;
//! - **CannotCatchUp**: catching up to `warmup.maxLag` at the best rate the trial showed
//!   while warming up (from its peak lag to caught up) would take longer than the window
//!   has left.
//!
//! The slope's bound accounts for the lag series' autocorrelation (a lag stays high for a
//! while, so its samples are far from independent): the residuals' lag-1 autocorrelation
//! r shrinks the sample to an effective n(1-r)/(1+r), which widens the standard error and
//! lowers the degrees of freedom of the t quantile (Santer et al., "Statistical
//! significance of trends and trend differences in layer-average atmospheric temperature
//! time series", J. Geophys. Res. 105(D6), 2000, eq. 6).

use crate::api::trial::{EarlyAbort, EarlyAbortRule};

/// One sample: (unix seconds, value).
pub type Sample = (f64, f64);

/// trial.earlyAbort, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub checks: u32,
    /// Seconds between two checks.
    pub interval: f64,
    /// Seconds of lag series the slope is fitted over.
    pub window: f64,
    pub min_window_fraction: f64,
    /// earlyAbort.maxLag, the hard bound.
    pub max_lag: Option<f64>,
}

impl Rule {
    /// The first moment a trial measuring over [start, end] may be judged: the oldest of
    /// its checks no earlier than `min_window_fraction` of the window.
    pub fn first_judged(&self, start: f64, end: f64) -> f64 {
        start
            + self.min_window_fraction * (end - start)
            + self.interval * f64::from(self.checks.saturating_sub(1))
    }

    /// Seconds of lag series before now that the checks read.
    pub fn span(&self) -> f64 {
        self.window + self.interval * f64::from(self.checks.saturating_sub(1))
    }
}

/// The lag series a check reads, as observed: the recent stretch up to now, and the
/// warm-up's (for the rate it caught up at).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LagSeries {
    pub recent: Vec<Sample>,
    pub warmup: Vec<Sample>,
}

/// What the rule reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs<'a> {
    /// The lag series up to now, ascending by time.
    pub recent: &'a [Sample],
    /// The lag series of the warm-up, from the validator's first answer to caught up.
    pub warmup: &'a [Sample],
    /// The measurement window (unix seconds).
    pub start: f64,
    pub end: f64,
    /// Since when it has been caught up: the slope reads nothing before.
    pub caught_up: f64,
    pub now: f64,
    /// warmup.maxLag: kept up at or below it.
    pub kept_up: f64,
    /// The scrape interval (seconds).
    pub step: f64,
}

/// A least-squares slope, per second, and its one-sided 95% lower bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slope {
    pub slope: f64,
    pub lower: f64,
    /// The fitted value at the last sample's time.
    pub fitted_last: f64,
}

/// The one-sided 95% quantile of Student's t with `dof` degrees of freedom (dof >= 2):
/// the Cornish-Fisher expansion about the normal's (Abramowitz & Stegun, Handbook of
/// Mathematical Functions, 26.7.5), within 0.3% of the exact value from 2 degrees on.
pub fn t95(dof: f64) -> f64 {
    const Z: f64 = 1.644_853_626_951_472_2;
    let z2 = Z * Z;
    let g1 = (z2 + 1.0) * Z / 4.0;
    let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * Z / 96.0;
    let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * Z / 384.0;
    let g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * Z / 92160.0;
    Z + g1 / dof + g2 / dof.powi(2) + g3 / dof.powi(3) + g4 / dof.powi(4)
}

/// The least-squares slope of `samples` with its lower bound, the standard error widened
/// for lag-1 autocorrelation of the residuals. None with fewer than 4 effective samples.
pub fn slope(samples: &[Sample]) -> Option<Slope> {
    let n = samples.len() as f64;
    if samples.len() < 4 {
        return None;
    }
    let tm = samples.iter().map(|s| s.0).sum::<f64>() / n;
    let ym = samples.iter().map(|s| s.1).sum::<f64>() / n;
    let sxx: f64 = samples.iter().map(|s| (s.0 - tm).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = samples.iter().map(|s| (s.0 - tm) * (s.1 - ym)).sum();
    let b = sxy / sxx;
    let residuals: Vec<f64> = samples.iter().map(|s| s.1 - ym - b * (s.0 - tm)).collect();
    let sse: f64 = residuals.iter().map(|e| e * e).sum();
    let last = samples[samples.len() - 1].0;
    let fitted_last = ym + b * (last - tm);
    // A perfectly straight series: no spread, the slope is exact.
    if sse <= f64::EPSILON * (1.0 + ym * ym) * n {
        return Some(Slope {
            slope: b,
            lower: b,
            fitted_last,
        });
    }
    let r = residuals.windows(2).map(|w| w[0] * w[1]).sum::<f64>() / sse;
    let n_eff = if r > 0.0 {
        n * (1.0 - r) / (1.0 + r)
    } else {
        n
    };
    if n_eff < 4.0 {
        return None;
    }
    let se = (sse / (n - 2.0) / sxx).sqrt() * ((n - 2.0) / (n_eff - 2.0)).sqrt();
    Some(Slope {
        slope: b,
        lower: b - t95(n_eff - 2.0) * se,
        fitted_last,
    })
}

/// The best rate the trial caught up at while warming up (per second): from its peak lag
/// to the lag it was caught up at, over the time between. None when it never was behind
/// after its first answer (nothing to learn a rate from).
pub fn catch_up_rate(warmup: &[Sample], step: f64) -> Option<f64> {
    let (peak_at, peak) =
        warmup
            .iter()
            .copied()
            .fold(None, |best: Option<Sample>, s| match best {
                Some(b) if b.1 >= s.1 => Some(b),
                _ => Some(s),
            })?;
    let (end_at, end) = *warmup.last()?;
    let took = end_at - peak_at;
    (took >= 2.0 * step && peak > end).then(|| (peak - end) / took)
}

/// What one check sees.
#[derive(Debug, Clone, Copy)]
struct Check {
    at: f64,
    lag: f64,
    left: f64,
    slope: Option<Slope>,
}

/// The samples a check at `at` reads: its lag is the last sample at most three scrapes
/// old (an older one is not now's lag); its slope, the samples of the last `window`
/// since caught up, when the window lies wholly after catching up and most of its
/// scrapes are there (a gap is not evidence).
fn check(rule: &Rule, i: &Inputs, at: f64) -> Option<Check> {
    let (t, lag) = *i.recent.iter().rev().find(|s| s.0 <= at)?;
    if at - t > 3.0 * i.step {
        return None;
    }
    let from = at - rule.window;
    let fitted: Vec<Sample> = i
        .recent
        .iter()
        .copied()
        .filter(|s| s.0 > from && s.0 <= at)
        .collect();
    let enough = fitted.len() as f64 >= 0.8 * rule.window / i.step;
    let slope = (from >= i.caught_up && enough)
        .then(|| slope(&fitted))
        .flatten();
    Some(Check {
        at,
        lag,
        left: (i.end - at).max(0.0),
        slope,
    })
}

/// Whether `rule` of early abort holds at one check, and the projection it made.
fn holds(which: EarlyAbortRule, rule: &Rule, rate: Option<f64>, c: &Check, kept_up: f64) -> bool {
    if c.lag <= kept_up {
        return false;
    }
    match which {
        EarlyAbortRule::PastMaxLag => rule.max_lag.is_some_and(|m| c.lag > m),
        EarlyAbortRule::CannotCatchUp => rate.is_some_and(|r| (c.lag - kept_up) / r > c.left),
        EarlyAbortRule::LagGrowing => c
            .slope
            .is_some_and(|s| s.lower > 0.0 && s.fitted_last + s.lower * c.left > kept_up),
    }
}

/// The verdict now: Some(figures) when the trial is doomed. `unit` is the client's.
pub fn judge(rule: &Rule, i: &Inputs, unit: &str) -> Option<EarlyAbort> {
    if i.now >= i.end || i.now < rule.first_judged(i.start, i.end) {
        return None;
    }
    let checks: Vec<Check> = (0..rule.checks)
        .map(|k| check(rule, i, i.now - rule.interval * f64::from(k)))
        .collect::<Option<_>>()?;
    let rate = catch_up_rate(i.warmup, i.step);
    let which = [
        EarlyAbortRule::PastMaxLag,
        EarlyAbortRule::CannotCatchUp,
        EarlyAbortRule::LagGrowing,
    ]
    .into_iter()
    .find(|w| checks.iter().all(|c| holds(*w, rule, rate, c, i.kept_up)))?;
    let now = checks[0];
    let hour = |v: f64| round(v * 3600.0);
    Some(EarlyAbort {
        rule: which,
        at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_millisecond((now.at * 1000.0) as i64).unwrap_or_default(),
        ),
        checks: rule.checks as i32,
        lag: round(now.lag),
        unit: unit.into(),
        seconds_left: round(now.left),
        slope_per_hour: now.slope.map(|s| hour(s.slope)),
        slope_lower_per_hour: now.slope.map(|s| hour(s.lower)),
        projected_lag: now
            .slope
            .filter(|s| s.lower > 0.0)
            .map(|s| round(s.fitted_last + s.lower * now.left)),
        catch_up_per_hour: rate.map(hour),
        catch_up_seconds: rate.map(|r| round((now.lag - i.kept_up).max(0.0) / r)),
    })
}

fn round(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// The early abort in one sentence, for the trial's message and event.
pub fn describe(a: &EarlyAbort, kept_up: f64, interval: &str) -> String {
    let u = &a.unit;
    let checks = if a.checks > 1 {
        format!(" on {} checks {interval} apart", a.checks)
    } else {
        String::new()
    };
    let left = a.seconds_left.round();
    let why = match a.rule {
        EarlyAbortRule::LagGrowing => format!(
            "its lag grew at {} {u}/h (95% lower bound {} {u}/h){checks}: {} {u} behind with {left}s left, it would end about {} {u} behind, past warmup.maxLag {kept_up}",
            fmt(a.slope_per_hour),
            fmt(a.slope_lower_per_hour),
            a.lag,
            fmt(a.projected_lag),
        ),
        EarlyAbortRule::PastMaxLag => format!(
            "it was {} {u} behind{checks}, past earlyAbort.maxLag",
            a.lag
        ),
        EarlyAbortRule::CannotCatchUp => format!(
            "{} {u} behind{checks}, catching up at the best rate it showed warming up ({} {u}/h) would take {}s, longer than the {left}s the window had left",
            a.lag,
            fmt(a.catch_up_per_hour),
            fmt(a.catch_up_seconds).trim_end_matches(".0"),
        ),
    };
    format!("fell behind for good (earlyAbort {:?}): {why}", a.rule)
}

fn fmt(v: Option<f64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> Rule {
        Rule {
            checks: 3,
            interval: 1200.0,
            window: 3600.0,
            min_window_fraction: 0.1,
            max_lag: None,
        }
    }

    /// A lag series at 15 s scrapes from `from` to `to` (seconds into the window).
    fn series(from: f64, to: f64, f: impl Fn(f64) -> f64) -> Vec<Sample> {
        let mut out = Vec::new();
        let mut t = from;
        while t <= to {
            out.push((t, f(t)));
            t += 15.0;
        }
        out
    }

    /// Deterministic noise in [-1, 1], autocorrelated over a few samples like a lag.
    fn noise(t: f64) -> f64 {
        ((t / 15.0).sin() * 0.6 + (t / 97.0).cos() * 0.4).clamp(-1.0, 1.0)
    }

    const H: f64 = 3600.0;

    fn judge_at(now: f64, recent: &[Sample], warmup: &[Sample], r: &Rule) -> Option<EarlyAbort> {
        judge(
            r,
            &Inputs {
                recent,
                warmup,
                start: 0.0,
                end: 12.0 * H,
                caught_up: 0.0,
                now,
                kept_up: 100.0,
                step: 15.0,
            },
            "slots",
        )
    }

    #[test]
    fn the_t_quantile_matches_the_tables() {
        for (dof, t) in [(2.0, 2.920), (5.0, 2.015), (10.0, 1.812), (30.0, 1.697)] {
            assert!((t95(dof) - t).abs() < 0.01, "{dof}: {} vs {t}", t95(dof));
        }
        assert!((t95(1e9) - 1.645).abs() < 0.001);
    }

    #[test]
    fn a_straight_line_has_its_slope_for_bound() {
        let s = slope(&series(0.0, 600.0, |t| 3.0 + 0.5 * t)).unwrap();
        assert!((s.slope - 0.5).abs() < 1e-9 && (s.lower - 0.5).abs() < 1e-9);
        assert!((s.fitted_last - 303.0).abs() < 1e-6);
        assert_eq!(slope(&[(0.0, 1.0), (1.0, 2.0)]), None);
        assert_eq!(slope(&[(5.0, 1.0); 6]), None);
    }

    /// Autocorrelated residuals widen the bound: the same trend with slow wobble is less
    /// sure than with white noise of the same size.
    #[test]
    fn autocorrelation_widens_the_bound() {
        let white = series(0.0, H, |t| {
            0.01 * t
                + if (t / 15.0) as i64 % 2 == 0 {
                    20.0
                } else {
                    -20.0
                }
        });
        let slow = series(0.0, H, |t| 0.01 * t + 20.0 * (t / 30.0).sin());
        let (w, s) = (slope(&white).unwrap(), slope(&slow).unwrap());
        assert!(w.slope - w.lower < s.slope - s.lower, "{w:?} {s:?}");
    }

    #[test]
    fn the_catch_up_rate_runs_from_the_peak_to_caught_up() {
        // Climbs to 900 slots while loading, then catches up to 50 in an hour.
        let w: Vec<Sample> = vec![
            (0.0, 300.0),
            (600.0, 900.0),
            (1200.0, 600.0),
            (4200.0, 50.0),
        ];
        let r = catch_up_rate(&w, 15.0).unwrap();
        assert!((r - 850.0 / 3600.0).abs() < 1e-9, "{r}");
        assert_eq!(catch_up_rate(&[(0.0, 0.0), (60.0, 0.0)], 15.0), None);
        assert_eq!(catch_up_rate(&[], 15.0), None);
    }

    /// The table: what each series says at 4 hours into a 12-hour window, with a warm-up
    /// that caught up at 2 slots a second.
    #[test]
    fn doomed_trials_and_the_ones_that_are_not() {
        let warmup: Vec<Sample> = vec![(-2.0 * H, 7200.0), (-H, 0.0)];
        let max = Rule {
            max_lag: Some(5000.0),
            ..rule()
        };
        // (what, lag at t seconds into the window, rule, expected)
        type Case = (
            &'static str,
            Box<dyn Fn(f64) -> f64>,
            Rule,
            Option<EarlyAbortRule>,
        );
        let cases: Vec<Case> = vec![
            (
                "kept up: flat near zero",
                Box::new(|t| 20.0 + 10.0 * noise(t)),
                rule(),
                None,
            ),
            (
                "kept up, within maxLag while growing slowly",
                Box::new(|t| 10.0 + t / H * 15.0 + 5.0 * noise(t)),
                rule(),
                None,
            ),
            (
                "growing 350 slots an hour from 1h: doomed",
                Box::new(|t| {
                    if t < H {
                        0.0
                    } else {
                        (t - H) / H * 350.0 + 30.0 * noise(t)
                    }
                }),
                rule(),
                Some(EarlyAbortRule::LagGrowing),
            ),
            (
                "behind but recovering: never aborted",
                Box::new(|t| (3000.0 - t / H * 500.0 + 30.0 * noise(t)).max(0.0)),
                rule(),
                None,
            ),
            (
                "behind and flat, but catching up takes 2.5h of 8h left: not doomed",
                Box::new(|t| 18_000.0 + 40.0 * noise(t)),
                rule(),
                None,
            ),
            (
                "behind and flat past the hard bound",
                Box::new(|t| 18_000.0 + 40.0 * noise(t)),
                max.clone(),
                Some(EarlyAbortRule::PastMaxLag),
            ),
            (
                "flat, too far behind to catch up in the time left",
                Box::new(|t| 80_000.0 + 40.0 * noise(t)),
                rule(),
                Some(EarlyAbortRule::CannotCatchUp),
            ),
            (
                "a burst of lag at the last check only: not consecutive",
                Box::new(|t| if t > 4.0 * H - 900.0 { 9000.0 } else { 20.0 }),
                max,
                None,
            ),
        ];
        for (what, lag, r, want) in cases {
            let recent = series(0.0, 4.0 * H, &*lag);
            let got = judge_at(4.0 * H, &recent, &warmup, &r);
            assert_eq!(got.as_ref().map(|a| a.rule), want, "{what}: {got:?}");
        }
    }

    #[test]
    fn nothing_is_judged_too_early_or_at_the_windows_end() {
        let growing = series(0.0, 12.0 * H, |t| t / 10.0);
        let warmup = [];
        // 10% of 12h plus two intervals: 1h52m.
        assert_eq!(rule().first_judged(0.0, 12.0 * H), 1.2 * H + 2400.0);
        assert!(judge_at(1.5 * H, &growing, &warmup, &rule()).is_none());
        assert!(judge_at(3.0 * H, &growing, &warmup, &rule()).is_some());
        assert!(judge_at(12.0 * H, &growing, &warmup, &rule()).is_none());
    }

    /// The slope reads only samples since caught up, and a gap in scraping is not
    /// evidence: a check without a recent sample makes no verdict.
    #[test]
    fn gaps_and_catch_up_leave_no_verdict() {
        let r = rule();
        let growing = |t: f64| t / 10.0;
        let mut gappy = series(0.0, 3.0 * H, growing);
        gappy.extend(series(3.5 * H, 4.0 * H, growing));
        assert!(
            judge_at(4.0 * H, &gappy, &[], &r).is_none(),
            "a check in the gap"
        );
        let recent = series(0.0, 4.0 * H, growing);
        let late = Inputs {
            recent: &recent,
            warmup: &[],
            start: 0.0,
            end: 12.0 * H,
            caught_up: 3.5 * H,
            now: 4.0 * H,
            kept_up: 100.0,
            step: 15.0,
        };
        assert!(
            judge(&r, &late, "slots").is_none(),
            "caught up too recently"
        );
    }

    #[test]
    fn the_figures_say_what_decided() {
        let recent = series(0.0, 4.0 * H, |t| t / H * 360.0);
        let a = judge_at(4.0 * H, &recent, &[], &rule()).unwrap();
        assert_eq!(a.rule, EarlyAbortRule::LagGrowing);
        assert_eq!((a.lag, a.seconds_left, a.checks), (1440.0, 8.0 * H, 3));
        assert_eq!(a.slope_per_hour, Some(360.0));
        assert_eq!(a.projected_lag, Some(1440.0 + 8.0 * 360.0));
        let text = describe(&a, 100.0, "20m");
        assert!(
            text.contains(
                "grew at 360 slots/h (95% lower bound 360 slots/h) on 3 checks 20m apart"
            ),
            "{text}"
        );
        assert!(
            text.contains("it would end about 4320 slots behind, past warmup.maxLag 100"),
            "{text}"
        );
    }
}
