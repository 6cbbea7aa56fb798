//! Each point against the comparison's baseline, pure: the effect on the client's
//! objective with its 95% interval (from pairs, resampled whole, or from the two sides'
//! repetitions), Holm's correction over the points, the call against
//! `practicalDifference`, and the A/A pairs' noise floor (docs/concepts.md).

use crate::api::experiment::{ComparisonStatus, EffectRow, MAX_SUMMARY_ROWS, ValidatorExperiment};
use crate::api::trial::TrialResults;
use crate::results::dataset::{Dataset, Point};
use crate::results::stats::{self, Call, Effect};

/// The family-wise error rate Holm's correction keeps.
const ALPHA: f64 = 0.05;

/// The comparison's status, once some point has an effect or the noise floor is known.
pub fn status(vx: &ValidatorExperiment, data: &Dataset) -> Option<ComparisonStatus> {
    let cmp = vx.spec.comparison.as_ref()?;
    let base = data.find_point(&cmp.baseline_values())?;
    let objective = crate::clients::client_for(&vx.spec.template)
        .ok()?
        .objective(&vx.spec.sweep);
    let figure = objective.value;
    let effect = |p: &Point| -> Option<Effect> {
        if cmp.paired() {
            stats::paired_effect(&data.pairs(p, figure))
        } else {
            stats::unpaired_effect(&base.figure_values(figure), &p.figure_values(figure))
        }
    };
    let effects: Vec<(&Point, Effect)> = data
        .points()
        .iter()
        .filter(|p| p.in_sweep && p.key != base.key)
        .filter_map(|p| Some((p, effect(p)?)))
        .collect();
    let noise = cmp
        .paired()
        .then(|| stats::paired_effect(&aa_pairs(data, base, figure)))
        .flatten();
    if effects.is_empty() && noise.is_none() {
        return None;
    }
    let p: Vec<f64> = effects.iter().map(|(_, e)| e.p).collect();
    let significant = stats::holm(&p, ALPHA);
    let rows: Vec<EffectRow> = effects
        .iter()
        .zip(significant)
        .map(|((point, e), sig)| {
            row(
                &point.point.describe(),
                e,
                stats::call(e, sig, cmp.practical()),
            )
        })
        .collect();
    let noise_floor = noise.as_ref().map(stats::describe_effect);
    let mut line: Vec<String> = rows
        .iter()
        .map(|r| format!("{}: {}", short(&r.point), r.text))
        .collect();
    if let Some(n) = &noise_floor {
        line.push(format!("A/A: {n}"));
    }
    Some(ComparisonStatus {
        baseline: base.point.describe(),
        figure: objective.name.to_string(),
        summary: line.join("; "),
        noise_floor,
        effects: rows.into_iter().take(MAX_SUMMARY_ROWS).collect(),
    })
}

/// The baseline's A/A pairs: its trials on the candidate side of a pair are A/A ones
/// (a candidate at the baseline's point is the baseline against itself).
fn aa_pairs(
    data: &Dataset,
    base: &Point,
    figure: fn(&TrialResults) -> Option<f64>,
) -> Vec<(f64, f64)> {
    data.pairs(base, figure)
}

/// "allocator=jemalloc" reads "jemalloc" in a one-parameter sweep's line.
fn short(point: &str) -> &str {
    match point.split_once('=') {
        Some((_, v)) if !v.contains(' ') => v,
        _ => point,
    }
}

fn row(point: &str, e: &Effect, call: Call) -> EffectRow {
    let (name, verdict) = match call {
        Call::Different => ("Different", "different".to_string()),
        Call::Negligible => (
            "Negligible",
            "real but under the practical difference".into(),
        ),
        Call::NoneLargerThan(x) => (
            "NoDifference",
            format!("no difference larger than {:.0}%", (x * 100.0).ceil()),
        ),
    };
    EffectRow {
        point: point.to_string(),
        effect: round4(e.relative),
        interval: [round4(e.interval.lo), round4(e.interval.hi)],
        n: e.n as i32,
        call: name.into(),
        text: format!("{}: {verdict}", stats::describe_effect(e)),
    }
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::trial::{TrialOutcome, TrialPair, TrialPhase};
    use crate::results::dataset::TrialRecord;
    use crate::strategies::paired::plan_pairs;

    fn experiment(comparison: &str) -> ValidatorExperiment {
        serde_saphyr::from_str(&format!(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {{name: alloc}}\n\
             spec:\n  template: {{besu: {{image: besu}}, resources: {{memory: 32Gi}}}}\n  \
             sweep: {{allocator: [glibc, jemalloc]}}\n  trial: {{repetitions: 3}}\n  comparison: {comparison}\n"
        ))
        .unwrap()
    }

    /// Finished pairs with these (baseline, candidate) p95s, A/A pairs after them.
    fn paired(vx: &ValidatorExperiment, values: &[(f64, f64)], aa: &[(f64, f64)]) -> Dataset {
        let spec = &vx.spec;
        let base = crate::api::sweep::TrialPoint {
            settings: [("allocator".to_string(), "glibc".to_string())].into(),
            ..Default::default()
        };
        let pairs = plan_pairs(spec, &base);
        let (ab, aas): (Vec<_>, Vec<_>) = pairs
            .iter()
            .partition(|p| p.candidate.point != p.baseline.point);
        let mut trials = Vec::new();
        for (p, (b, c)) in ab.iter().zip(values).chain(aas.iter().zip(aa)) {
            for (t, v) in [(&p.baseline, b), (&p.candidate, c)] {
                let mut results = TrialResults::default();
                results
                    .figures
                    .insert(crate::clients::besu::profile::P95.into(), *v);
                trials.push(TrialRecord {
                    name: t.name("alloc"),
                    point: t.point.clone(),
                    repetition: t.repetition,
                    phase: TrialPhase::Succeeded,
                    outcome: Some(TrialOutcome::KeptUp),
                    results: Some(results),
                    pair: Some(TrialPair {
                        role: t.pair.as_ref().unwrap().role,
                        partner: t.partner().unwrap().name("alloc"),
                    }),
                    ..Default::default()
                });
            }
        }
        Dataset::new(&spec.sweep, trials)
    }

    #[test]
    fn a_ten_percent_slower_point_is_called_different_from_three_pairs() {
        let vx = experiment("{baseline: {allocator: glibc}}");
        // The chain's load moves both sides of a pair alike; the candidate is 10% slower.
        let data = paired(&vx, &[(200.0, 220.0), (260.0, 286.5), (230.0, 252.0)], &[]);
        let st = status(&vx, &data).unwrap();
        assert_eq!(st.baseline, "allocator=glibc");
        let r = &st.effects[0];
        assert_eq!((r.call.as_str(), r.n), ("Different", 3), "{r:?}");
        assert!(r.interval[0] > 0.09 && r.interval[1] < 0.11, "{r:?}");
        assert!(
            st.summary.starts_with("jemalloc: +10% [+"),
            "{}",
            st.summary
        );
    }

    #[test]
    fn the_same_trials_unpaired_see_the_load_and_call_nothing() {
        let vx = experiment("{baseline: {allocator: glibc}, mode: unpaired}");
        let data = paired(&vx, &[(200.0, 220.0), (260.0, 286.5), (230.0, 252.0)], &[]);
        let r = &status(&vx, &data).unwrap().effects[0];
        assert_eq!(r.call, "NoDifference", "{r:?}");
        assert!(
            r.text.contains("3 repetitions: no difference larger than"),
            "{r:?}"
        );
    }

    #[test]
    fn a_smaller_effect_than_the_practical_difference_is_negligible() {
        let vx = experiment("{baseline: {allocator: glibc}, practicalDifference: 12}");
        let data = paired(&vx, &[(200.0, 220.0), (260.0, 286.5), (230.0, 252.0)], &[]);
        assert_eq!(status(&vx, &data).unwrap().effects[0].call, "Negligible");
    }

    #[test]
    fn aa_pairs_give_the_noise_floor() {
        let vx = experiment("{baseline: {allocator: glibc}, aaCalibration: true}");
        let data = paired(
            &vx,
            &[(200.0, 220.0), (260.0, 286.5), (230.0, 252.0)],
            &[(210.0, 212.0), (250.0, 247.0), (240.0, 241.0)],
        );
        let st = status(&vx, &data).unwrap();
        let noise = st.noise_floor.unwrap();
        assert!(noise.ends_with("3 pairs"), "{noise}");
        assert!(st.summary.contains("A/A: +0% ["), "{}", st.summary);
        // The A/A pairs are not the candidate's.
        assert_eq!(st.effects[0].n, 3);
    }
}
