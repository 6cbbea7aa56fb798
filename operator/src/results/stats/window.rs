//! The interval of one window's mean from its own time series, pure. A validator's
//! samples are far from independent (a busy stretch lasts minutes to hours), so the
//! interval is built from stretches long enough to be nearly independent of each other,
//! their length chosen from the series itself; a window holding too few such stretches
//! gets no interval, and says so.
//!
//! - The length: Politis & White's automatic block length ("Automatic Block-Length
//!   Selection for the Dependent Bootstrap", Econometric Reviews 23(1), 2004), with the
//!   correction of Patton, Politis & White (Econometric Reviews 28(4), 2009): the
//!   autocovariances up to a bandwidth M chosen where they stop being significant,
//!   weighted by the flat-top lag window of Politis & Romano (1995), give the circular
//!   block bootstrap's optimal block b = (2 G^2 / D)^(1/3) n^(1/3), D = 4/3 g(0)^2.
//! - The interval: non-overlapping batch means (Schmeiser, "Batch size effects in the
//!   analysis of simulation output", Operations Research 30(3), 1982), each batch
//!   [`BATCH_BLOCKS`] blocks long and at least the bandwidth, Student's t with one fewer
//!   degrees of freedom than batches. b is the length that estimates the mean's variance
//!   best, which is shorter than batches need to be nearly independent: batches of one or
//!   two blocks covered 85-89% at 20-minute correlation (calibration.rs).
//! - Refused when the autocorrelations are still significant at the last lag Politis &
//!   White search (sqrt(n) + K_N: the series varies more slowly than one window can
//!   show), or below [`MIN_BATCHES`] batches.
//!
//! It describes that window only: the variance between windows (another hour of the
//! chain, another node) is what repetitions and pairs measure.

use super::{ALPHA, Interval, mean, t_quantile};

/// A batch is this many of the chosen blocks long (and at least the bandwidth).
pub const BATCH_BLOCKS: f64 = 3.0;
/// Fewer batches than this give no interval.
pub const MIN_BATCHES: usize = 8;

/// The interval of a window's mean, and what it was built from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowInterval {
    pub interval: Interval,
    /// The block length chosen from the series, in samples.
    pub block: f64,
    /// The batches the interval is over.
    pub batches: usize,
}

/// Why a window's mean has no interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Refusal {
    /// Too few samples to estimate anything.
    TooShort(usize),
    /// The samples are still correlated at the last lag searched: the window is one
    /// slow stretch, or a few.
    SlowerThanTheWindow { lags: usize },
    /// The batches long enough to be nearly independent are fewer than [`MIN_BATCHES`].
    TooFewStretches { batch: usize, batches: usize },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::TooShort(n) => write!(f, "no interval: {n} samples are too few"),
            Refusal::SlowerThanTheWindow { lags } => write!(
                f,
                "no interval: the samples are still correlated {lags} samples apart, so the window holds too few independent stretches"
            ),
            Refusal::TooFewStretches { batch, batches } => write!(
                f,
                "no interval: stretches of {batch} samples are needed to be nearly independent, and the window holds {batches}, fewer than {MIN_BATCHES}"
            ),
        }
    }
}

/// The flat-top lag window (Politis & Romano 1995): 1 up to half the bandwidth, then a
/// straight line to 0 at the bandwidth.
fn flat_top(t: f64) -> f64 {
    let t = t.abs();
    if t <= 0.5 {
        1.0
    } else if t <= 1.0 {
        2.0 * (1.0 - t)
    } else {
        0.0
    }
}

/// What the flat-top lag window makes of a series' autocovariances.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Spectrum {
    /// The long-run variance (2 pi times the spectral density at 0), and the sum of
    /// |k| R(k), both under the window.
    g: f64,
    big_g: f64,
    /// The bandwidth M chosen, and the last lag searched.
    bandwidth: usize,
    searched: usize,
    /// The autocorrelations were still significant at the last lag searched.
    saturated: bool,
}

/// The flat-top estimates of a series (Politis & White 2004, section 3.2): M = 2 m, m the
/// first lag after which K_N = max(5, sqrt(log10 n)) autocorrelations in a row are
/// insignificant (|rho| < 2 sqrt(log10(n) / n)), searched up to sqrt(n) + K_N lags. None
/// below 16 samples or for a constant series.
fn spectrum(series: &[f64]) -> Option<Spectrum> {
    let n = series.len();
    if n < 16 {
        return None;
    }
    let nf = n as f64;
    let m = mean(series)?;
    let d: Vec<f64> = series.iter().map(|v| v - m).collect();
    let acov = |k: usize| {
        d[..n - k]
            .iter()
            .zip(&d[k..])
            .map(|(a, b)| a * b)
            .sum::<f64>()
            / nf
    };
    let r0 = acov(0);
    if r0 <= 0.0 {
        return None;
    }
    let k_n = (nf.log10().sqrt().ceil() as usize).max(5);
    let searched = (nf.sqrt().ceil() as usize + k_n).min(n - 1);
    let r: Vec<f64> = (0..=searched).map(acov).collect();
    let bound = 2.0 * (nf.log10() / nf).sqrt() * r0;
    let first_quiet =
        (1..=searched.saturating_sub(k_n - 1)).find(|&k| (k..k + k_n).all(|j| r[j].abs() < bound));
    let m_hat = first_quiet.map_or(searched, |k| k - 1);
    let bandwidth = (2 * m_hat.max(1)).min(searched);
    let (mut g, mut big_g) = (r0, 0.0);
    for (k, rk) in r.iter().enumerate().take(bandwidth + 1).skip(1) {
        let w = flat_top(k as f64 / bandwidth as f64) * rk;
        g += 2.0 * w;
        big_g += 2.0 * k as f64 * w;
    }
    Some(Spectrum {
        g,
        big_g,
        bandwidth,
        searched,
        saturated: first_quiet.is_none(),
    })
}

/// b from a series' spectrum: at least 1, at most min(3 sqrt(n), n / 3).
fn block_of(s: &Spectrum, n: usize) -> f64 {
    let nf = n as f64;
    let d_cb = 4.0 / 3.0 * s.g * s.g;
    let b = if d_cb > 0.0 {
        (2.0 * s.big_g * s.big_g / d_cb).cbrt() * nf.cbrt()
    } else {
        1.0
    };
    b.clamp(1.0, (3.0 * nf.sqrt()).min(nf / 3.0).ceil())
}

/// The circular block bootstrap's optimal block length of a series, in samples (Patton,
/// Politis & White 2009). None below 16 samples or for a constant series.
pub fn block_length(series: &[f64]) -> Option<f64> {
    Some(block_of(&spectrum(series)?, series.len()))
}

/// The 95% interval of a window's mean from batch means, or why there is none.
pub fn interval(series: &[f64]) -> Result<WindowInterval, Refusal> {
    let n = series.len();
    let Some(m) = mean(series).filter(|_| n >= 16) else {
        return Err(Refusal::TooShort(n));
    };
    let Some(s) = spectrum(series) else {
        // Constant: the mean is what it is.
        return Ok(WindowInterval {
            interval: Interval { lo: m, hi: m },
            block: 1.0,
            batches: n,
        });
    };
    if s.saturated {
        return Err(Refusal::SlowerThanTheWindow { lags: s.searched });
    }
    let block = block_of(&s, n);
    let batch = (BATCH_BLOCKS * block).max(s.bandwidth as f64).ceil() as usize;
    let batches = n / batch.max(1);
    if batches < MIN_BATCHES {
        return Err(Refusal::TooFewStretches { batch, batches });
    }
    // The batches cover the series evenly: the remainder spread one sample at a time.
    let means: Vec<f64> = (0..batches)
        .map(|i| {
            let (a, b) = (i * n / batches, (i + 1) * n / batches);
            series[a..b].iter().sum::<f64>() / (b - a) as f64
        })
        .collect();
    let sd = super::sd(&means).unwrap_or(0.0);
    let half = t_quantile(1.0 - ALPHA / 2.0, (batches - 1) as f64) * sd / (batches as f64).sqrt();
    Ok(WindowInterval {
        interval: Interval {
            lo: m - half,
            hi: m + half,
        },
        block,
        batches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An AR(1) series with the given lag-1 correlation, seeded.
    pub(crate) fn ar1(n: usize, phi: f64, seed: u64) -> Vec<f64> {
        let mut rng = super::super::calibration::Rng::new(seed);
        let mut x = rng.normal();
        (0..n)
            .map(|_| {
                x = phi * x + (1.0 - phi * phi).sqrt() * rng.normal();
                x
            })
            .collect()
    }

    /// Independent samples get blocks of about 1; slowly varying ones long blocks.
    #[test]
    fn the_block_follows_the_correlation() {
        let white = block_length(&ar1(720, 0.0, 1)).unwrap();
        let slow = block_length(&ar1(720, 0.95, 1)).unwrap();
        assert!(white < 3.0, "{white}");
        assert!(slow > 10.0 * white, "{slow} vs {white}");
        // Capped at min(3 sqrt(n), n / 3).
        let trend: Vec<f64> = (0..720).map(|i| i as f64).collect();
        assert!(block_length(&trend).unwrap() <= (3.0 * 720f64.sqrt()).ceil());
        assert_eq!(block_length(&[1.0; 10]), None);
        assert_eq!(block_length(&[1.0; 100]), None);
    }

    #[test]
    fn a_window_of_few_independent_stretches_gets_no_interval() {
        let trend: Vec<f64> = (0..720).map(|i| (i as f64 / 200.0).sin()).collect();
        let refused = interval(&trend).unwrap_err();
        assert!(
            matches!(refused, Refusal::SlowerThanTheWindow { .. }),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("independent stretches"));
        let ok = interval(&ar1(720, 0.3, 2)).unwrap();
        assert!(
            ok.interval.contains(0.0) && ok.batches >= MIN_BATCHES,
            "{ok:?}"
        );
        assert_eq!(interval(&[1.0; 5]), Err(Refusal::TooShort(5)));
        assert_eq!(
            interval(&[2.0; 100]).unwrap().interval,
            Interval { lo: 2.0, hi: 2.0 }
        );
    }
}
