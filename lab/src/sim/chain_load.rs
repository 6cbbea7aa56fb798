//! A chain whose load varies (issue 19): a daily curve plus noise, a function of the
//! simulated time of day alone, so every validator following the chain at one moment sees
//! the same load. Sequential runs of one configuration then differ by the hour they ran
//! at, as the paper's did, while runs side by side do not. Opt-in per machine
//! (`chainLoad` in lab/topology*.yaml): the seeds' shapes assume a steady chain.

use jiff::Timestamp;

use super::clients::normal;
use crate::topology::ChainLoad;

const DAY_S: f64 = 86_400.0;
/// The noise holds a value per 20 simulated minutes, interpolated between them.
const NOISE_STEP_S: f64 = 1_200.0;
const STREAM: u64 = 19;

/// The chain's load at simulated time `t` (seconds since the Unix epoch, simulated), as
/// a factor on each block's work: 1 on average.
pub fn factor(c: &ChainLoad, t: f64) -> f64 {
    let day = (2.0 * std::f64::consts::PI * t / DAY_S).sin();
    let i = (t / NOISE_STEP_S).floor();
    let w = t / NOISE_STEP_S - i;
    let at = |k: f64| normal(c.seed, STREAM, k.rem_euclid(1e12) as u64);
    let noise = at(i) * (1.0 - w) + at(i + 1.0) * w;
    (1.0 + c.amplitude * day + c.noise * noise).max(0.2)
}

/// Simulated seconds since the epoch of the wall-clock moment `at`: lab time runs
/// `scale` times faster, from one origin for every validator.
pub fn simulated(at: Timestamp, scale: f64) -> f64 {
    at.as_millisecond() as f64 / 1000.0 * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOAD: ChainLoad = ChainLoad {
        amplitude: 0.3,
        noise: 0.05,
        seed: 7,
    };

    #[test]
    fn the_load_follows_the_day_and_is_one_moment_for_all() {
        // A quarter day apart: the curve's peak and its trough.
        let peak = factor(&LOAD, DAY_S / 4.0);
        let trough = factor(&LOAD, 3.0 * DAY_S / 4.0);
        assert!(peak > 1.15 && trough < 0.85, "{peak} {trough}");
        // The same moment, the same load; close moments, close loads (no jumps).
        assert_eq!(factor(&LOAD, 5000.0), factor(&LOAD, 5000.0));
        assert!((factor(&LOAD, 5000.0) - factor(&LOAD, 5010.0)).abs() < 0.01);
        // A steady chain without amplitude or noise.
        let steady = ChainLoad {
            amplitude: 0.0,
            noise: 0.0,
            seed: 1,
        };
        assert_eq!(factor(&steady, 12345.0), 1.0);
    }
}
