//! Agave as the only leader of a private cluster, with `solana-bench-tps` sending it
//! transactions: what the `bench` workload measures. Calibrated on the Solana TPU seed
//! (001, "These benchmarks are run on our testnet": 4 bank threads 1,454 mean / 3,372 max
//! TPS, 32 threads 3,244 / 11,961), which ran with GPU signature verification; on the CPU,
//! verification caps the pipeline once banking outgrows it, which is where `--cuda`
//! raises the ceiling. The cap's level is the model's assumption (docs/lab.md).
//!
//! Deterministic for a seed: each stretch's noise comes from the seed and its index.

use super::super::{normal, uniform};

/// Mean TPS with 4 banking workers, and how it grows with more (4 -> 32: x2.23).
const MEAN_AT_4: f64 = 1454.0;
const BANKING_EXPONENT: f64 = 0.386;
/// Bursts: the seed's max over mean, 2.32 at 4 workers and 3.69 at 32.
const BURST_AT_4: f64 = 2.32;
const BURST_EXPONENT: f64 = 0.223;
const BURST_PROBABILITY: f64 = 0.03;
/// What the CPU verifies, in transactions a second, and the GPU (not binding here).
const CPU_SIGVERIFY_TPS: f64 = 2_500.0;
const GPU_SIGVERIFY_TPS: f64 = 50_000.0;
/// How sharply the slower stage takes over (a smooth minimum).
const SHARPNESS: f64 = 4.0;
/// A bench-tps sending thread offers about this many transactions a second.
const OFFER_PER_THREAD: f64 = 5_000.0;

const LEVEL: u64 = 21;
const BURST: u64 = 22;

#[derive(Debug, Clone)]
pub struct LeaderModel {
    seed: u64,
    workers: f64,
    gpu: bool,
    /// bench-tps sending threads (0: no load generator in the pod).
    senders: f64,
    /// Simulated seconds a value holds (the lab passes one scrape interval, so a burst
    /// is one sample).
    stretch_s: f64,
}

fn smooth_min(values: &[f64]) -> f64 {
    values
        .iter()
        .map(|v| v.max(1e-9).powf(-SHARPNESS))
        .sum::<f64>()
        .powf(-1.0 / SHARPNESS)
}

impl LeaderModel {
    pub fn new(seed: u64, workers: u32, gpu: bool, senders: u32, stretch_s: f64) -> Self {
        LeaderModel {
            seed,
            workers: workers.max(1) as f64,
            gpu,
            senders: senders as f64,
            stretch_s: stretch_s.max(1.0),
        }
    }

    /// The mean the pipeline sustains: banking, verification and the offered load.
    pub fn capacity(&self) -> f64 {
        if self.senders == 0.0 {
            return 0.0;
        }
        let banking = MEAN_AT_4 * (self.workers / 4.0).powf(BANKING_EXPONENT);
        let verify = if self.gpu {
            GPU_SIGVERIFY_TPS
        } else {
            CPU_SIGVERIFY_TPS
        };
        smooth_min(&[banking, verify, self.senders * OFFER_PER_THREAD])
    }

    fn burst(&self) -> f64 {
        BURST_AT_4 * (self.workers / 4.0).powf(BURST_EXPONENT)
    }

    /// Transactions a second in the stretch holding `t` (seconds since the load began).
    pub fn tps(&self, t: f64) -> f64 {
        let c = self.capacity();
        if c == 0.0 || t < 0.0 {
            return 0.0;
        }
        let i = (t / self.stretch_s).floor() as u64;
        // The level is the seed's mean and bursts reach its max: the paper's average
        // (valtune's) leaves out samples above 3x the plain mean, as the seed's 32-thread
        // bursts are.
        let noise = (0.12 * normal(self.seed, LEVEL, i)).exp();
        if uniform(self.seed, BURST, i) < BURST_PROBABILITY {
            c * self.burst() * noise.min(1.0)
        } else {
            c * noise
        }
    }

    /// Transactions from 0 to `t`.
    pub fn transactions(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        let whole = (t / self.stretch_s).floor() as u64;
        let done: f64 = (0..whole)
            .map(|i| self.tps(i as f64 * self.stretch_s) * self.stretch_s)
            .sum();
        done + self.tps(t) * (t - whole as f64 * self.stretch_s)
    }

    pub fn workers(&self) -> u32 {
        self.workers as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's average (without samples above 3x the plain mean) and the max.
    fn stats(m: &LeaderModel) -> (f64, f64) {
        let samples: Vec<f64> = (0..4000).map(|i| m.tps(i as f64 * m.stretch_s)).collect();
        let plain = samples.iter().sum::<f64>() / samples.len() as f64;
        let kept: Vec<f64> = samples
            .iter()
            .copied()
            .filter(|v| *v <= 3.0 * plain)
            .collect();
        let mean = kept.iter().sum::<f64>() / kept.len() as f64;
        (mean, samples.iter().copied().fold(0.0, f64::max))
    }

    #[test]
    fn the_seed_table_with_a_gpu() {
        let (mean, max) = stats(&LeaderModel::new(1, 4, true, 4, 60.0));
        assert!((1350.0..1650.0).contains(&mean), "4 workers: {mean}");
        assert!((2800.0..4000.0).contains(&max), "4 workers max: {max}");
        let (mean, max) = stats(&LeaderModel::new(1, 32, true, 4, 60.0));
        assert!((2900.0..3500.0).contains(&mean), "32 workers: {mean}");
        assert!((9500.0..13_500.0).contains(&max), "32 workers max: {max}");
    }

    #[test]
    fn the_cpu_caps_what_more_banking_threads_could_do() {
        let gain = |gpu| {
            LeaderModel::new(1, 32, gpu, 4, 60.0).capacity()
                / LeaderModel::new(1, 4, gpu, 4, 60.0).capacity()
        };
        assert!(
            gain(true) > 2.0 && gain(false) < 1.8,
            "{} {}",
            gain(true),
            gain(false)
        );
        for w in [4, 8, 16, 32] {
            let cpu = LeaderModel::new(1, w, false, 4, 60.0).capacity();
            let gpu = LeaderModel::new(1, w, true, 4, 60.0).capacity();
            assert!(gpu >= cpu, "{w}");
        }
        // More threads never hurt.
        let caps: Vec<f64> = [4, 8, 16, 32]
            .iter()
            .map(|w| LeaderModel::new(1, *w, false, 4, 60.0).capacity())
            .collect();
        assert!(caps.windows(2).all(|p| p[1] > p[0]), "{caps:?}");
    }

    #[test]
    fn without_a_load_generator_nothing_is_produced() {
        assert_eq!(LeaderModel::new(1, 32, true, 0, 60.0).tps(500.0), 0.0);
    }
}
