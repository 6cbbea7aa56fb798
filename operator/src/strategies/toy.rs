//! A toy strategy, for tests only: proof that a strategy is one module and the registry
//! lines (its line in [`super::STRATEGIES`], its `mod` line, its field in
//! `StrategySpec`), admitted, decided, answered and priced through [`Strategy`] alone.
//!
//! `strategy: {toy: {window: 1h}}` tries the sweep's points one at a time, in order,
//! until one keeps up: that point is its answer. Each trial measures over `window`
//! (unset: the experiment's).

use std::time::Duration;

use kube::core::Rule;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::plan::PlannedTrial;
use super::schedule::{Bounds, Schedule, Stage};
use super::{Answer, Decision, Done, Setting, Strategy, TrialGroup, room};
use crate::api::experiment::{Recommendation, ValidatorExperimentSpec};
use crate::api::settings::{TrialSettings, parse_duration};
use crate::results::dataset::{Dataset, Point};

pub struct Toy;

/// The toy's settings, at `spec.strategy.toy`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToySpec {
    /// Each trial's measurement window (unset: trial.measurement.duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
}

fn settings(spec: &ValidatorExperimentSpec) -> ToySpec {
    spec.strategy.toy.clone().unwrap_or_default()
}

/// A point's one trial.
fn planned(p: &Point) -> PlannedTrial {
    PlannedTrial {
        point: p.point.clone(),
        repetition: 1,
        pair: None,
    }
}

/// The first point that kept up, in the sweep's order.
fn first_kept_up(data: &Dataset) -> Option<&Point> {
    data.points()
        .iter()
        .filter(|p| p.in_sweep)
        .find(|p| p.kept_up())
}

impl Strategy for Toy {
    fn name(&self) -> &'static str {
        "toy"
    }

    fn runs(&self, spec: &ValidatorExperimentSpec) -> bool {
        spec.strategy.toy.is_some()
    }

    fn setting(&self) -> Option<Setting> {
        Some(Setting {
            field: "toy",
            does: "tries points in order until one keeps up",
        })
    }

    fn rules(&self) -> Vec<Rule> {
        vec![
            Rule::new("!has(self.strategy) || !has(self.strategy.toy) || self.parallelism == 1")
                .message("strategy.toy runs one trial at a time: set parallelism to 1")
                .field_path(".parallelism"),
        ]
    }

    fn decide(
        &self,
        experiment: &str,
        spec: &ValidatorExperimentSpec,
        trials: &Dataset,
    ) -> Decision {
        let points: Vec<&Point> = trials.points().iter().filter(|p| p.in_sweep).collect();
        let mut names = Vec::new();
        let mut start = Vec::new();
        let mut done = None;
        for p in &points {
            let name = planned(p).name(experiment);
            names.push(name.clone());
            match trials.trial(&name) {
                None => {
                    let tally = trials.tally(&names);
                    if room(spec, &tally) > 0 {
                        start.push(TrialGroup(vec![planned(p)]));
                    }
                    break;
                }
                Some(t) if !t.phase.is_finished() => break,
                Some(_) if p.kept_up() => {
                    done = Some(Done {
                        reason: "Found",
                        message: format!("{} kept up", p.point.describe()),
                    });
                    break;
                }
                Some(_) => {}
            }
        }
        if done.is_none() && start.is_empty() && names.len() == points.len() {
            let finished = trials.tally(&names).finished == names.len();
            if finished {
                done = Some(Done {
                    reason: "NoValuePasses",
                    message: format!("none of {} points kept up", points.len()),
                });
            }
        }
        Decision {
            expected: if done.is_some() {
                names.len()
            } else {
                points.len()
            },
            trials: names,
            start,
            stop: Vec::new(),
            done,
        }
    }

    fn trial_settings(
        &self,
        spec: &ValidatorExperimentSpec,
        _trial: &PlannedTrial,
    ) -> TrialSettings {
        let mut s = spec.trial.clone();
        if let Some(window) = settings(spec).window {
            s.measurement.duration = window;
        }
        s
    }

    /// Half the points on average, all of them at most, one at a time.
    fn schedule(
        &self,
        spec: &ValidatorExperimentSpec,
        _parallelism: u32,
        window: Duration,
    ) -> Schedule {
        let n = spec.sweep.points() as u32;
        let own = settings(spec).window.and_then(|w| parse_duration(&w).ok());
        let trials = Bounds {
            expected: n.div_ceil(2),
            worst: n,
        };
        Schedule {
            stages: vec![Stage {
                trials,
                waves: trials,
                window: own.unwrap_or(window),
            }],
            stage: own.map(|_| "step"),
            searches: true,
        }
    }

    fn describe(
        &self,
        spec: &ValidatorExperimentSpec,
        schedule: &Schedule,
        _parallelism: u32,
    ) -> String {
        let t = schedule.trials();
        format!(
            "tries {} points one at a time until one keeps up: about {} trials ({} at most)\n",
            spec.sweep.points(),
            t.expected,
            t.worst
        )
    }

    fn answer(
        &self,
        _spec: &ValidatorExperimentSpec,
        trials: &Dataset,
        provisional: &str,
    ) -> Answer {
        Answer::Own(first_kept_up(trials).and_then(|p| {
            Some(Recommendation {
                summary: p.point.describe(),
                reason: format!("the first point that kept up (toy){provisional}"),
                trial: p.finished().next()?.name.clone(),
                support: p.kept_up_support(),
                point: Some(p.point.clone()),
            })
        }))
    }
}

/// End to end, through the registry and the generic code that names no strategy: the
/// CRD, the trial objects, the experiment's status and `valtune plan`'s cost.
#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;
    use crate::api::ValidatorExperiment;
    use crate::api::experiment::{ExperimentPhase, ValidatorExperimentStatus};
    use crate::api::trial::{TrialOutcome, TrialPhase};
    use crate::controller::experiment::compute_status;
    use crate::results::dataset::TrialRecord;
    use crate::strategies::build::build_trial;
    use crate::strategies::strategy_for;

    fn experiment() -> ValidatorExperiment {
        serde_saphyr::from_str(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: toy, namespace: ns, generation: 1}\nspec:\n  template: {agave: {image: agave}}\n  sweep: {memory: [256Gi, 512Gi, 1Ti]}\n  strategy: {toy: {window: 1h}}\n  trial: {warmup: {timeout: 4h}, measurement: {duration: 12h}}\n",
        )
        .unwrap()
    }

    #[test]
    fn its_rules_are_in_the_experiments_crd() {
        let crd = serde_json::to_value(&crate::crd::crds()[0].1).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert!(
            spec["properties"]["strategy"]["properties"]["toy"]["properties"]["window"].is_object(),
            "{}",
            spec["properties"]["strategy"]
        );
        let rules: Vec<String> = spec["x-kubernetes-validations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["rule"].as_str().unwrap().to_string())
            .collect();
        assert!(rules.contains(
            &"!has(self.strategy) || !has(self.strategy.toy) || self.parallelism == 1".to_string()
        ));
        assert!(
            rules
                .iter()
                .any(|r| r.contains("has(self.strategy.toy)].filter(x, x).size() <= 1")),
            "one strategy at most, the toy among them"
        );
    }

    /// A trial of `point` (0: 256Gi) as the toy planned it, finished with `outcome`.
    fn finished(vx: &ValidatorExperiment, point: usize, outcome: TrialOutcome) -> TrialRecord {
        let p = PlannedTrial {
            point: vx.spec.sweep.expand()[point].clone(),
            repetition: 1,
            pair: None,
        };
        TrialRecord {
            name: p.name("toy"),
            point: p.point,
            repetition: 1,
            phase: TrialPhase::Succeeded,
            outcome: Some(outcome),
            ..Default::default()
        }
    }

    #[test]
    fn it_is_decided_answered_and_priced_through_the_registry() {
        let vx = experiment();
        let strategy = strategy_for(&vx.spec);
        assert_eq!(strategy.name(), "toy");
        let data = |trials: Vec<TrialRecord>| Dataset::new(&vx.spec.sweep, trials);
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let old = ValidatorExperimentStatus::default();

        // The first pass starts 256Gi, its trial measuring over the toy's window.
        let d = strategy.decide("toy", &vx.spec, &data(vec![]));
        assert_eq!(d.start.len(), 1);
        let trial = build_trial(&vx, &d.start[0].0[0]).unwrap();
        assert_eq!(trial.spec.point.describe(), "memory=256Gi");
        assert_eq!(trial.spec.settings.measurement.duration, "1h");

        // 256Gi fell behind: 512Gi next, no answer yet.
        let trials = vec![finished(&vx, 0, TrialOutcome::FellBehind)];
        let d = strategy.decide("toy", &vx.spec, &data(trials.clone()));
        assert_eq!(d.start[0].0[0].point.describe(), "memory=512Gi");
        let st = compute_status(&vx, &d, &data(trials.clone()), None, &old, now);
        assert_eq!(st.phase, ExperimentPhase::Running);
        assert_eq!(st.recommendation, None);

        // 512Gi kept up: done, and the status carries the toy's answer.
        let mut trials = trials;
        trials.push(finished(&vx, 1, TrialOutcome::KeptUp));
        let d = strategy.decide("toy", &vx.spec, &data(trials.clone()));
        assert!(d.start.is_empty());
        assert_eq!(d.expected, 2);
        let st = compute_status(&vx, &d, &data(trials.clone()), None, &old, now);
        assert_eq!(st.phase, ExperimentPhase::Succeeded);
        let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(
            (ready.reason.as_str(), ready.message.as_str()),
            ("Found", "memory=512Gi kept up")
        );
        let r = st.recommendation.unwrap();
        assert_eq!(r.summary, "memory=512Gi");
        assert_eq!(r.reason, "the first point that kept up (toy)");
        assert_eq!(r.trial, trials[1].name);

        // Nothing kept up: it ends saying so.
        let none: Vec<TrialRecord> = (0..3)
            .map(|i| finished(&vx, i, TrialOutcome::OOMKilled))
            .collect();
        let d = strategy.decide("toy", &vx.spec, &data(none));
        assert_eq!(d.done.unwrap().reason, "NoValuePasses");

        // Its cost: 2 trials expected, 3 at most, each 2h of warm-up and its 1h window.
        let c = crate::cost::plan_cost(&vx.spec, None).unwrap();
        assert_eq!((c.trials.expected, c.trials.worst), (2, 3));
        assert_eq!((c.node_hours.expected, c.node_hours.worst), (6.0, 15.0));
        assert_eq!(c.wall_clock.expected, Duration::from_secs(6 * 3600));
        assert_eq!(c.grid.as_ref().unwrap().trials, 3);
        assert!(
            c.summary().starts_with(
                "about 2 trials (3 at most) x (about 2h warm-up + a 1h window in steps of 2 trials)"
            ),
            "{}",
            c.summary()
        );
        assert_eq!(
            strategy.describe(&vx.spec, &c.schedule, c.parallelism),
            "tries 3 points one at a time until one keeps up: about 2 trials (3 at most)\n"
        );
    }
}
