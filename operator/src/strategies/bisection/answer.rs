//! A bisection's answer: the boundary value its trials show, with the value beyond it.

use super::boundary::{Evidence, boundary, of, ordered};
use crate::api::experiment::{Recommendation, ValidatorExperimentSpec};
use crate::api::strategy::Seek;
use crate::results::dataset::Dataset;

/// The recommendation once a value kept up above the highest failure; `provisional` ends
/// its reason while trials are still to come.
pub fn answer(
    spec: &ValidatorExperimentSpec,
    data: &Dataset,
    provisional: &str,
) -> Option<Recommendation> {
    let (settings, seek) = of(spec, data)?;
    let points = ordered(data, seek);
    let evidence: Vec<Evidence> = points.iter().map(|p| Evidence::of(p)).collect();
    let b = boundary(&evidence, settings.retries);
    let best = points[b.hi?];
    let end = match seek {
        Seek::Least => "least",
        Seek::Most => "most",
    };
    let mut reason = format!("the {end} value that kept up with the chain");
    if let Some(lo) = b.lo {
        reason.push_str(&format!("; {} did not", points[lo].point.describe()));
    }
    if !b.non_monotone.is_empty() {
        let values: Vec<String> = b
            .non_monotone
            .iter()
            .map(|i| points[*i].point.describe())
            .collect();
        reason.push_str(&format!(
            "; non-monotone: {} kept up too",
            values.join(", ")
        ));
    }
    reason.push_str(provisional);
    let support = [Some(best), b.lo.map(|l| points[l])]
        .into_iter()
        .flatten()
        .filter_map(|p| Some(format!("{}: {}", p.point.describe(), p.kept_up_support()?)))
        .collect::<Vec<_>>()
        .join("; ");
    Some(Recommendation {
        summary: best.point.describe(),
        reason,
        trial: best.finished().next()?.name.clone(),
        support: (!support.is_empty()).then_some(support),
        point: Some(best.point.clone()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::trial::TrialOutcome;
    use crate::api::trial::TrialPhase::Succeeded;
    use crate::strategies::bisection::tests::{measured, spec, trial};

    #[test]
    fn the_answer_is_the_boundary_with_the_value_below_it() {
        let s = spec("");
        let data = |trials: Vec<_>| Dataset::new(&s.sweep, trials);
        // Nothing kept up above the highest failure yet: no answer.
        assert_eq!(answer(&s, &data(vec![measured(&s, 5, 1)]), ""), None);
        let trials = vec![
            measured(&s, 5, 1),
            measured(&s, 6, 1),
            measured(&s, 5, 2),
            measured(&s, 6, 2),
        ];
        let r = answer(&s, &data(trials.clone()), " (provisional: 2 trials to go)").unwrap();
        assert_eq!(r.summary, "memory=512Gi");
        assert_eq!(
            r.reason,
            "the least value that kept up with the chain; memory=448Gi did not (provisional: 2 trials to go)"
        );
        assert_eq!(r.trial, trials[1].name);
        let support = r.support.unwrap();
        assert!(
            support.starts_with("memory=512Gi: kept up 2/2 ")
                && support.contains("; memory=448Gi: kept up 0/2 "),
            "{support}"
        );
        // A pass below the failure is named, not hidden.
        let mut odd = trials;
        odd.push(trial(&s, 2, 1, Succeeded, Some(TrialOutcome::KeptUp)));
        let r = answer(&s, &data(odd), "").unwrap();
        assert_eq!(
            r.reason,
            "the least value that kept up with the chain; memory=448Gi did not; non-monotone: memory=256Gi kept up too"
        );
    }

    #[test]
    fn seeking_the_most_reads_the_values_from_the_top() {
        let s: ValidatorExperimentSpec = serde_saphyr::from_str(
            "template: {nodeos: {image: nodeos}}\nsweep: {memoryPressure: ['0', 2Gi, 4Gi, 6Gi]}\nstrategy: {bisection: {}}\n",
        )
        .unwrap();
        let point = |i: usize, outcome| {
            let p = crate::strategies::plan::PlannedTrial {
                point: s.sweep.expand()[i].clone(),
                repetition: 1,
                pair: None,
            };
            crate::results::dataset::TrialRecord {
                name: p.name("p"),
                point: p.point,
                repetition: 1,
                phase: Succeeded,
                outcome: Some(outcome),
                ..Default::default()
            }
        };
        let data = Dataset::new(
            &s.sweep,
            [
                point(1, TrialOutcome::KeptUp),
                point(2, TrialOutcome::OOMKilled),
            ],
        );
        let r = answer(&s, &data, "").unwrap();
        assert_eq!(r.summary, "memoryPressure=2Gi");
        assert_eq!(
            r.reason,
            "the most value that kept up with the chain; memoryPressure=4Gi did not"
        );
    }
}
