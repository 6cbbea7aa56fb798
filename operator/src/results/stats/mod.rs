//! Statistics of results, pure: a figure's n, mean, standard deviation and 95% interval;
//! "kept up k of n" with its exact interval; Holm's correction; the comparison of points
//! with a baseline ([`compare`]); the interval of one window's mean ([`window`]).
//!
//! Methods, and why (docs/concepts.md, "Numbers you can trust"):
//! - The interval of a mean over repetitions (or pairs) is Student's t: it covers at its
//!   level from two values on when the values are about normal, where a percentile
//!   bootstrap of three values is the range of the three and covers about 75% (Kalibera
//!   & Jones, "Rigorous Benchmarking in Reasonable Time", ISMM 2013, repeat at the level
//!   where the variance is; the calibration tests measure the coverage).
//! - k of n is Clopper-Pearson's exact interval (Clopper & Pearson, Biometrika 26(4),
//!   1934), which covers at least 95% at every n and every true rate; Wilson's covers
//!   about 83% near 0 and 1, exactly where "3/3" and "0/3" are.
//! - Distributions (t, beta, F) are statrs's, not approximations of our own.

pub mod compare;
pub mod window;

#[cfg(test)]
pub(crate) mod calibration;

use statrs::distribution::{Beta, ContinuousCDF, Normal, StudentsT};

/// The confidence level of every interval.
pub const LEVEL: f64 = 0.95;
/// The error rate every call keeps: 1 - [`LEVEL`].
pub const ALPHA: f64 = 0.05;

/// The `p` quantile of Student's t with `df` degrees of freedom (df > 0). The few
/// quantiles a design needs are asked for again and again (the calibration's hundreds of
/// thousands of experiments): the last ones are kept.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    thread_local! {
        static KEPT: std::cell::RefCell<Vec<((u64, u64), f64)>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let key = (p.to_bits(), df.to_bits());
    if let Some(q) = KEPT.with(|k| k.borrow().iter().find(|(k, _)| *k == key).map(|(_, q)| *q)) {
        return q;
    }
    let q = match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(p),
        Err(_) => f64::NAN,
    };
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        if k.len() >= 64 {
            k.remove(0);
        }
        k.push((key, q));
    });
    q
}

/// The `p` quantile of the standard normal.
pub fn z_quantile(p: f64) -> f64 {
    Normal::standard().inverse_cdf(p)
}

/// P(T > x) for Student's t with `df` degrees of freedom.
pub fn t_upper(x: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.sf(x),
        Err(_) => f64::NAN,
    }
}

/// How an interval was computed, which says what variance it includes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Over repetitions run at different times: includes the variance between windows.
    Repetitions,
    /// Over pairs of trials run at the same time on matched nodes.
    Pairs,
    /// Over stretches of one window's time series: excludes day-to-day variance.
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

    /// "3 pairs", "1 repetition".
    pub fn count(self, n: usize) -> String {
        let unit = match (self, n) {
            (Method::Pairs, 1) => "pair",
            (Method::Pairs, _) => "pairs",
            (Method::WithinWindow, 1) => "sample",
            (Method::WithinWindow, _) => "samples",
            (_, 1) => "repetition",
            _ => "repetitions",
        };
        format!("{n} {unit}")
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
    /// None below two values (one trial says nothing of the spread), and within one
    /// window when it holds too few independent stretches ([`window::interval`]).
    pub interval: Option<Interval>,
    pub method: Method,
}

/// The estimate of the mean of `values`: Student's t over repetitions or pairs, the
/// window's own stretches within one window.
pub fn estimate(values: &[f64], method: Method) -> Option<Estimate> {
    let m = mean(values)?;
    let interval = match method {
        Method::WithinWindow => window::interval(values).ok().map(|w| w.interval),
        _ => t_interval(values),
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

/// The 95% interval of the mean from Student's t: mean +- t(0.975, n - 1) sd / sqrt(n).
/// None below two values.
pub fn t_interval(values: &[f64]) -> Option<Interval> {
    let n = values.len();
    let (m, s) = (mean(values)?, sd(values)?);
    let half = t_quantile(1.0 - ALPHA / 2.0, (n - 1) as f64) * s / (n as f64).sqrt();
    Some(Interval {
        lo: m - half,
        hi: m + half,
    })
}

/// The Clopper-Pearson interval of a proportion k/n: the beta quantiles
/// B(0.025; k, n - k + 1) and B(0.975; k + 1, n - k), 0 and 1 at the ends. It covers at
/// least 95% whatever the true rate ("1/1" is [2.5%, 100%], not Wilson's [21%, 100%]).
pub fn binomial(k: usize, n: usize) -> Option<Interval> {
    if n == 0 || k > n {
        return None;
    }
    let beta = |p: f64, a: f64, b: f64| Beta::new(a, b).map_or(f64::NAN, |d| d.inverse_cdf(p));
    let (k, n) = (k as f64, n as f64);
    let lo = if k == 0.0 {
        0.0
    } else {
        beta(ALPHA / 2.0, k, n - k + 1.0)
    };
    let hi = if k == n {
        1.0
    } else {
        beta(1.0 - ALPHA / 2.0, k + 1.0, n - k)
    };
    Some(Interval { lo, hi })
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

/// A relative difference as reports write it: "+12%", "-3%", "+0.4%" below one percent.
pub fn pct(x: f64) -> String {
    if x != 0.0 && x.abs() < 0.01 {
        format!("{:+.1}%", x * 100.0)
    } else {
        format!("{:+.0}%", x * 100.0)
    }
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

    /// Quantiles as R's qt() gives them.
    #[test]
    fn t_quantiles_are_the_tables() {
        for (df, q) in [
            (1.0, 12.706_204_736),
            (2.0, 4.302_652_730),
            (4.0, 2.776_445_105),
            (8.0, 2.306_004_135),
            (30.0, 2.042_272_456),
        ] {
            assert!(close(t_quantile(0.975, df), q, 1e-6), "df {df}");
        }
        assert!(close(t_upper(2.776_445_105, 4.0), 0.025, 1e-8));
    }

    /// The t interval from its formula: R's t.test(c(1, 2, 3))$conf.int.
    #[test]
    fn t_intervals_match_their_formula() {
        let i = t_interval(&[1.0, 2.0, 3.0]).unwrap();
        assert!(
            close(i.lo, -0.484_138_6, 1e-6) && close(i.hi, 4.484_138_6, 1e-6),
            "{i:?}"
        );
        assert_eq!(t_interval(&[5.0]), None);
        assert_eq!(
            t_interval(&[5.0, 5.0, 5.0]),
            Some(Interval { lo: 5.0, hi: 5.0 })
        );
        let e = estimate(&[1.0, 2.0, 3.0], Method::Repetitions).unwrap();
        assert_eq!((e.n, e.mean, e.sd), (3, 2.0, Some(1.0)));
    }

    /// Clopper-Pearson's interval as R's binom.test(k, n)$conf.int gives it.
    #[test]
    fn binomial_intervals_are_clopper_pearsons() {
        let cases = [
            (1, 1, 0.025, 1.0),
            (3, 3, 0.292_401_8, 1.0),
            (0, 3, 0.0, 0.707_598_2),
            (1, 2, 0.012_579_4, 0.987_420_6),
            (8, 10, 0.443_904_1, 0.974_789_0),
        ];
        for (k, n, lo, hi) in cases {
            let i = binomial(k, n).unwrap();
            assert!(close(i.lo, lo, 1e-6), "{k}/{n}: lo {}", i.lo);
            assert!(close(i.hi, hi, 1e-6), "{k}/{n}: hi {}", i.hi);
        }
        assert_eq!(binomial(0, 0), None);
        assert_eq!(binomial(4, 3), None);
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
    fn percentages_keep_a_decimal_below_one_percent() {
        assert_eq!(pct(0.123), "+12%");
        assert_eq!(pct(-0.004), "-0.4%");
        assert_eq!(pct(0.0), "+0%");
        assert_eq!(Method::Pairs.count(1), "1 pair");
        assert_eq!(Method::Repetitions.count(3), "3 repetitions");
    }
}
