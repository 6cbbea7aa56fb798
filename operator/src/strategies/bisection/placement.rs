//! Where a bisection round puts its points among the values still open: the placement
//! with the least expected cost among those that never take more rounds, at worst, than
//! a k-section of `parallelism` points (so it is never slower in the worst case).
//!
//! Why not the k-section itself: its points cost very differently. A value that keeps up
//! runs its whole window; one too small ends at its early abort or its OOM kill, a share
//! of that. And a round is as long as its longest trial. Of a round whose points all keep
//! up, only the least taught anything, yet each ran a whole window; a round that only
//! fails is short. The k-section spends those windows wherever the boundary lies; this
//! placement weighs them.
//!
//! The model: the boundary is equally likely at each place among the open values (before
//! each, or beyond the last); a trial that keeps up costs 1 (its window), one that does
//! not costs `fail` (a share of a window: `of_spec`); a round costs its node-hours plus
//! its wall-clock (1 if any point keeps up, else `fail`), both in windows, weighed the
//! same. Every round is planned afresh from what is open (nothing kept between passes,
//! as the bisection keeps nothing), by dynamic programming over the sizes of the gaps
//! the points leave: the cost of a placement is, for each gap, the share of places the
//! boundary may take in it times what the round costs if it is there plus what that gap
//! costs to search, and that sum separates by gap.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::api::experiment::ValidatorExperimentSpec;
use crate::api::settings::parse_duration;

/// Above this many open values, or this parallelism, a round is the plain k-section: the
/// programme's work grows as parallelism squared times open values cubed.
pub const MAX_OPEN: usize = 64;
pub const MAX_PARALLELISM: usize = 8;

/// Rounds a k-section of `parallelism` points needs, at worst, to close `open` values:
/// a round's picks leave the largest gap between them, ceil((open - k) / (k + 1)).
pub fn rounds(open: usize, parallelism: usize) -> usize {
    let k = parallelism.max(1);
    match open {
        0 => 0,
        n if n <= k => 1,
        n => 1 + rounds((n - k).div_ceil(k + 1), k),
    }
}

/// What a trial that does not keep up costs, as a share of one that does: the earliest
/// moment its early abort may end it (`minWindowFraction` of the window, then its checks),
/// or the whole window when early abort is off. Optimistic on purpose for sizes that fail
/// by far (an OOM kill ends sooner); a size that fails near the boundary ends later.
pub fn of_spec(spec: &ValidatorExperimentSpec) -> f64 {
    let e = &spec.trial.early_abort;
    let secs = |v: &str| parse_duration(v).map(|d| d.as_secs_f64()).ok();
    let (Some(window), Some(interval)) =
        (secs(&spec.trial.measurement.duration), secs(&e.interval))
    else {
        return 1.0;
    };
    if !e.enabled || window <= 0.0 {
        return 1.0;
    }
    let earliest = e.min_window_fraction * window + interval * f64::from(e.checks.max(1) - 1);
    (earliest / window).clamp(0.0, 1.0)
}

/// Positions (ascending, 0-based among the `open` values) a round tests; None where the
/// placement is not computed (above [`MAX_OPEN`] or [`MAX_PARALLELISM`]).
pub fn placement(open: usize, parallelism: usize, fail: f64) -> Option<Vec<usize>> {
    let p = parallelism.max(1);
    if open == 0 || open > MAX_OPEN || p > MAX_PARALLELISM {
        return None;
    }
    static TABLES: OnceLock<Mutex<Tables>> = OnceLock::new();
    let mut tables = TABLES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let table = tables.entry((p, fail.to_bits())).or_default();
    while table.len() <= open {
        let next = plan(table, table.len(), p, fail);
        table.push(next);
    }
    Some(table[open].positions.clone())
}

/// Plans by open count, per (parallelism, failure share): computed once per process, as
/// they depend on nothing else (the bisection keeps no state; this is only a cache).
type Tables = HashMap<(usize, u64), Vec<Plan>>;

/// The best placement over `n` open values and its expected cost.
#[derive(Clone, Debug, Default)]
struct Plan {
    cost: f64,
    positions: Vec<usize>,
}

/// `known[g]` holds the plan of every smaller gap g < n.
fn plan(known: &[Plan], n: usize, p: usize, fail: f64) -> Plan {
    if n == 0 {
        return Plan::default();
    }
    let within = rounds(n, p) - 1;
    let mut best = Plan {
        cost: f64::INFINITY,
        positions: Vec::new(),
    };
    for k in 1..=p.min(n) {
        // The round's cost when its j-th point (0-based) is the least that keeps up (j = k:
        // none does): k - j keep up, j do not, and it lasts a window unless none keeps up.
        let round = |j: usize| {
            if j < k {
                (k - j) as f64 + j as f64 * fail + 1.0
            } else {
                k as f64 * fail + fail
            }
        };
        let gap = |j: usize, g: usize| {
            if rounds(g, p) > within {
                f64::INFINITY
            } else {
                (g + 1) as f64 * (round(j) + known[g].cost)
            }
        };
        let free = n - k;
        // best[m]: the least cost of gaps j..=k over m values, and gap j's size.
        let mut after: Vec<f64> = (0..=free).map(|m| gap(k, m)).collect();
        let mut choice = vec![vec![0usize; free + 1]; k];
        for j in (0..k).rev() {
            let mut here = vec![f64::INFINITY; free + 1];
            for m in 0..=free {
                for g in 0..=m {
                    let c = gap(j, g) + after[m - g];
                    if c < here[m] - 1e-12 {
                        here[m] = c;
                        choice[j][m] = g;
                    }
                }
            }
            after = here;
        }
        let cost = after[free] / (n + 1) as f64;
        // Fewer points win a tie: a point that saves nothing is a window spent.
        if cost < best.cost - 1e-9 {
            let mut positions = Vec::with_capacity(k);
            let (mut m, mut at) = (free, 0usize);
            for row in &choice {
                let g = row[m];
                at += g;
                positions.push(at);
                at += 1;
                m -= g;
            }
            best = Plan { cost, positions };
        }
    }
    best
}

/// A round's picks among `open` (sorted indices, between `lo` and `hi`) for `parallelism`
/// points: the placement of least expected cost ([`placement`]), or the k-section's even
/// spread where that is not computed.
pub fn picks(
    open: &[usize],
    lo: Option<usize>,
    hi: usize,
    parallelism: usize,
    fail: f64,
) -> Vec<usize> {
    if parallelism == 0 {
        return Vec::new();
    }
    match placement(open.len(), parallelism, fail) {
        Some(positions) => positions.into_iter().map(|i| open[i]).collect(),
        None => spread(open, lo, hi, parallelism),
    }
}

/// Up to `k` of `open` (sorted), spread evenly over (lo, hi): the k-section's picks.
pub fn spread(open: &[usize], lo: Option<usize>, hi: usize, k: usize) -> Vec<usize> {
    let k = k.min(open.len());
    let lo = lo.map_or(-1.0, |l| l as f64);
    let mut picked: Vec<usize> = Vec::with_capacity(k);
    for j in 1..=k {
        let target = lo + (hi as f64 - lo) * j as f64 / (k + 1) as f64;
        if let Some(best) = open.iter().filter(|i| !picked.contains(i)).min_by(|a, b| {
            (**a as f64 - target)
                .abs()
                .total_cmp(&(**b as f64 - target).abs())
                .then(a.cmp(b))
        }) {
            picked.push(*best);
        }
    }
    picked.sort_unstable();
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_spreads_its_points_evenly() {
        let all: Vec<usize> = (0..23).collect();
        assert_eq!(spread(&all, None, 23, 3), [5, 11, 17]);
        assert_eq!(spread(&all, None, 23, 1), [11]);
        assert_eq!(spread(&[6, 7, 8, 9, 10], Some(5), 11, 3), [6, 8, 9]);
        assert_eq!(spread(&[6], Some(5), 7, 3), [6]);
        assert_eq!(spread(&[6, 7], Some(5), 8, 0), Vec::<usize>::new());
    }

    /// The rounds a search over `n` values takes at worst when every round is placed.
    fn worst(n: usize, p: usize, fail: f64) -> usize {
        if n == 0 {
            return 0;
        }
        let picks = placement(n, p, fail).unwrap();
        let mut gaps = Vec::new();
        let mut prev = 0;
        for x in &picks {
            gaps.push(x - prev);
            prev = x + 1;
        }
        gaps.push(n - prev);
        1 + gaps.iter().map(|g| worst(*g, p, fail)).max().unwrap()
    }

    #[test]
    fn a_k_section_needs_these_rounds() {
        assert_eq!(rounds(0, 3), 0);
        assert_eq!(rounds(3, 3), 1);
        assert_eq!(rounds(4, 3), 2);
        assert_eq!(rounds(23, 3), 3);
        assert_eq!(rounds(23, 1), 5);
        assert_eq!(rounds(15, 3), 2);
        assert_eq!(rounds(16, 3), 3);
    }

    #[test]
    fn never_more_rounds_than_the_k_section() {
        for p in 1..=4 {
            for fail in [0.05, 0.156, 0.3, 1.0] {
                for n in 0..=40 {
                    assert!(worst(n, p, fail) <= rounds(n, p), "n={n} p={p} fail={fail}");
                }
            }
        }
    }

    #[test]
    fn points_stay_in_range_ascending_and_within_parallelism() {
        for p in 1..=MAX_PARALLELISM {
            for n in 1..=MAX_OPEN {
                let picks = placement(n, p, 0.2).unwrap();
                assert!(!picks.is_empty() && picks.len() <= p.min(n), "{n} {p}");
                assert!(picks.windows(2).all(|w| w[0] < w[1]) && picks[picks.len() - 1] < n);
            }
        }
        assert_eq!(placement(MAX_OPEN + 1, 3, 0.2), None);
        assert_eq!(placement(10, MAX_PARALLELISM + 1, 0.2), None);
    }

    /// With failures as dear as passes, it is the plain k-section (bisection with one).
    #[test]
    fn a_single_node_halves() {
        assert_eq!(placement(7, 1, 1.0).unwrap(), [3]);
        assert_eq!(placement(1, 1, 0.2).unwrap(), [0]);
    }

    /// The quickstart's 23 sizes on 3 nodes (the sweep's first round): cheap failures pull
    /// the points down, so fewer rounds spend whole windows on sizes that keep up; a
    /// failure as dear as a pass puts them back near the k-section's even thirds.
    #[test]
    fn cheap_failures_pull_the_points_down() {
        assert_eq!(placement(23, 3, 0.156).unwrap(), [1, 6, 12]);
        assert_eq!(placement(23, 3, 1.0).unwrap(), [5, 14]);
        let even = [5, 11, 17];
        assert!(placement(23, 3, 0.156).unwrap().iter().sum::<usize>() < even.iter().sum());
    }

    #[test]
    fn the_share_a_failure_costs_follows_early_abort() {
        let spec = |extra: &str| -> ValidatorExperimentSpec {
            serde_saphyr::from_str(&format!(
                "template: {{agave: {{image: agave}}}}\nsweep: {{memory: [128Gi]}}\n{extra}"
            ))
            .unwrap()
        };
        // 12h window: 10% of it, then two intervals of 20m (1h52m).
        let f = of_spec(&spec("trial: {measurement: {duration: 12h}}"));
        assert!((f - (1.2 + 40.0 / 60.0) / 12.0).abs() < 1e-9, "{f}");
        assert_eq!(
            of_spec(&spec(
                "trial: {measurement: {duration: 12h}, earlyAbort: {enabled: false}}"
            )),
            1.0
        );
    }
}
