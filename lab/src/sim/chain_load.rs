//! A chain whose load varies (issue 19): a daily curve plus noise, a function of the
//! simulated time of day alone, so every validator following the chain at one moment sees
//! the same load. Sequential runs of one configuration then differ by the hour they ran
//! at, as the paper's did, while runs side by side do not. Opt-in per machine
//! (`chainLoad` in lab/topology*.yaml): the seeds' shapes assume a steady chain.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::clients::normal;
use super::pod_view::PodView;
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

/// When the container started (its running state's time, as the kubelet reports it).
pub fn started_at(pod: &Pod, container: &str) -> Timestamp {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.name == container)
        .and_then(|c| c.state.as_ref()?.running.as_ref()?.started_at.clone())
        .map(|t| t.0)
        .or_else(|| {
            pod.status
                .as_ref()
                .and_then(|s| s.start_time.clone())
                .map(|t| t.0)
        })
        .unwrap_or_else(Timestamp::now)
}

/// The varying load of the chain a container's machine follows, and the simulated time
/// since the epoch at which the container started; None on a steady chain.
pub fn of(pod: &PodView, container: &str, scale: f64) -> Option<(ChainLoad, f64)> {
    pod.machine
        .chain_load
        .map(|c| (c, simulated(started_at(&pod.pod, container), scale)))
}

/// A Solana chain (Agave, Frankendancer): 400 ms slots, some without a block; its load
/// is the transactions in each block, and a busy chain skips more (leaders that cannot
/// finish their blocks in time).
pub mod solana {
    use super::*;

    pub const SLOTS_PER_SECOND: f64 = 2.5;
    /// The chain's transactions per second on average (votes included).
    pub const TPS: f64 = 4800.0;
    /// Slots without a block on average (mainnet-beta: a few percent).
    pub const SKIP_RATE: f64 = 0.05;
    /// Transactions in a block on average: the chain's rate over its blocks.
    pub const TX_PER_BLOCK: f64 = TPS / (SLOTS_PER_SECOND * (1.0 - SKIP_RATE));
    /// The grid the chain's blocks are summed on, in simulated seconds: fixed in time, so
    /// every node counts the same blocks of a moment.
    const STEP_S: f64 = 60.0;

    /// The load at simulated time `t` (1 on a steady chain).
    pub fn load(c: Option<&ChainLoad>, t: f64) -> f64 {
        c.map_or(1.0, |c| factor(c, t))
    }

    /// The share of slots without a block at load `load`.
    pub fn skip_rate(load: f64) -> f64 {
        (SKIP_RATE * (1.0 + 2.0 * (load - 1.0))).clamp(0.01, 0.3)
    }

    /// Blocks and transactions the chain made between simulated times `a` and `b` (on
    /// the chain's clock: when it made the slots).
    pub fn made(c: Option<&ChainLoad>, a: f64, b: f64) -> (f64, f64) {
        let (mut blocks, mut txs) = (0.0, 0.0);
        if b <= a {
            return (blocks, txs);
        }
        let mut k = (a / STEP_S).floor();
        while k * STEP_S < b {
            let (lo, hi) = ((k * STEP_S).max(a), ((k + 1.0) * STEP_S).min(b));
            let load = load(c, (k + 0.5) * STEP_S);
            let n = (hi - lo) * SLOTS_PER_SECOND * (1.0 - skip_rate(load));
            blocks += n;
            txs += n * TX_PER_BLOCK * load;
            k += 1.0;
        }
        (blocks, txs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks and transactions over a window are the chain's, whoever counts them, and
    /// the transactions per block and the skip rate follow the load.
    #[test]
    fn a_solana_chain_makes_more_transactions_per_block_when_busy() {
        let c = Some(&LOAD);
        let window = |from: f64| {
            let (blocks, txs) = solana::made(c, from, from + 7200.0);
            (
                txs / blocks,
                1.0 - blocks / (7200.0 * solana::SLOTS_PER_SECOND),
            )
        };
        let (busy, busy_skip) = window(DAY_S / 4.0 - 3600.0);
        let (quiet, quiet_skip) = window(3.0 * DAY_S / 4.0 - 3600.0);
        assert!(busy > 1.3 * quiet, "{busy} {quiet}");
        assert!(
            busy_skip > quiet_skip && quiet_skip > 0.0,
            "{busy_skip} {quiet_skip}"
        );
        // Summed in pieces or at once: the same count.
        let (b1, t1) = solana::made(c, 1000.0, 1990.5);
        let (b2, t2) = solana::made(c, 1990.5, 5000.0);
        let (b, t) = solana::made(c, 1000.0, 5000.0);
        assert!((b1 + b2 - b).abs() < 1e-6 && (t1 + t2 - t).abs() < 1e-3);
        // A steady chain: the mean block and skip rate.
        let (blocks, txs) = solana::made(None, 0.0, 4000.0);
        assert!((txs / blocks - solana::TX_PER_BLOCK).abs() < 1e-6);
        assert!((blocks / (4000.0 * solana::SLOTS_PER_SECOND) - 0.95).abs() < 1e-9);
    }

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
