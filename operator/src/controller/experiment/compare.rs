//! Each point against the comparison's baseline, pure: the trials as the comparison
//! reads them (results/comparison.rs: whole windows only, pairs whose sides measured one
//! window), judged by results/stats/compare.rs (per-pair log ratios, Student's t with the
//! variance pooled over the design's pairs and the A/A pairs, the calls Holm-corrected
//! over the points), into the status.

use crate::api::experiment::{ComparisonStatus, EffectRow, MAX_SUMMARY_ROWS, ValidatorExperiment};
use crate::results::comparison::{self, Comparison, Design};
use crate::results::dataset::Dataset;
use crate::results::stats::compare::{Effect, More};
use crate::results::stats::pct;

/// The comparison's status, once some point has an effect or the noise floor is known.
pub fn status(vx: &ValidatorExperiment, data: &Dataset) -> Option<ComparisonStatus> {
    let cmp = vx.spec.comparison.as_ref()?;
    let base = data.find_point(&cmp.baseline_values())?;
    let objective = crate::clients::client_for(&vx.spec.template)
        .ok()?
        .objective(&vx.spec.sweep);
    let design = Design {
        baseline: base.point.describe(),
        paired: cmp.paired(),
        practical: cmp.practical(),
    };
    let order: Vec<String> = data
        .points()
        .iter()
        .filter(|p| p.in_sweep)
        .map(|p| p.point.describe())
        .collect();
    let observations = comparison::observations(data, objective.value);
    let c = comparison::judge(&observations, &design, &order);
    if c.rows.is_empty() && c.noise.is_none() {
        return None;
    }
    Some(ComparisonStatus {
        baseline: design.baseline,
        figure: objective.name.to_string(),
        summary: summary_line(&c),
        noise_floor: c.noise_text(),
        variance: c.variance.clone(),
        set_apart: c
            .set_apart_lines()
            .into_iter()
            .take(MAX_SUMMARY_ROWS)
            .collect(),
        effects: c
            .rows
            .iter()
            .take(MAX_SUMMARY_ROWS)
            .map(|(point, e)| row(&c, point, e))
            .collect(),
    })
}

/// The line `kubectl get vx` shows: "jemalloc: +10% [+8%, +12%] n=3 Different; A/A:
/// +0% [-2%, +3%] n=3".
pub fn summary_line(c: &Comparison) -> String {
    let short_effect = |e: &Effect| match e.interval {
        Some(i) => format!(
            "{} [{}, {}] n={}",
            pct(e.relative),
            pct(i.lo),
            pct(i.hi),
            e.n
        ),
        None => format!("{} n={}", pct(e.relative), e.n),
    };
    let mut line: Vec<String> = c
        .rows
        .iter()
        .map(|(p, e)| format!("{}: {} {}", short(p), short_effect(e), e.call.as_str()))
        .collect();
    if let Some(n) = &c.noise {
        line.push(format!("A/A: {}", short_effect(n)));
    }
    line.join("; ")
}

/// "allocator=jemalloc" reads "jemalloc" in a one-parameter sweep's line.
fn short(point: &str) -> &str {
    match point.split_once('=') {
        Some((_, v)) if !v.contains(' ') => v,
        _ => point,
    }
}

fn row(c: &Comparison, point: &str, e: &Effect) -> EffectRow {
    let interval = e.interval.unwrap_or(crate::results::stats::Interval {
        lo: e.relative,
        hi: e.relative,
    });
    EffectRow {
        point: point.to_string(),
        effect: round4(e.relative),
        interval: [round4(interval.lo), round4(interval.hi)],
        n: e.n as i32,
        call: e.call.as_str().into(),
        more: match e.more(c.practical) {
            Some(More::About(k)) => Some(k as i32),
            _ => None,
        },
        text: c.text(e),
    }
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::trial::{TrialOutcome, TrialPair, TrialPhase, TrialResults};
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
        for (i, (p, (b, c))) in ab.iter().zip(values).chain(aas.iter().zip(aa)).enumerate() {
            // Each pair one window, both sides the same.
            let start = jiff::Timestamp::from_second(1_700_000_000 + 1000 * i as i64).unwrap();
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
                    window_start: Some(start),
                    window_end: Some(start + jiff::SignedDuration::from_secs(100)),
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
        assert_eq!(r.call, "Inconclusive", "{r:?}");
        assert!(r.text.contains("3 repetitions: inconclusive"), "{r:?}");
    }

    #[test]
    fn an_effect_wholly_under_the_practical_difference_is_equivalent_within_it() {
        let vx = experiment("{baseline: {allocator: glibc}, practicalDifference: 12}");
        let data = paired(&vx, &[(200.0, 220.0), (260.0, 286.5), (230.0, 252.0)], &[]);
        let r = &status(&vx, &data).unwrap().effects[0];
        assert_eq!(r.call, "Equivalent", "{r:?}");
        assert!(r.text.ends_with("equivalent within 12%"), "{r:?}");
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
        assert!(st.summary.contains("; A/A: +0"), "{}", st.summary);
        assert!(st.summary.ends_with("n=3"), "{}", st.summary);
        // The A/A pairs are not the candidate's, but their variance is pooled with its.
        assert_eq!(st.effects[0].n, 3);
        assert!(
            st.variance.unwrap().contains("4 degrees of freedom"),
            "pooled over both groups"
        );
    }
}
