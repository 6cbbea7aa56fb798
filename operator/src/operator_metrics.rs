//! The operator's own metrics (served on /metrics): reconciles, errors by kind, reconcile
//! durations, trial phase changes, and, read from the controllers' caches at each scrape,
//! experiments by phase, trials by phase and by outcome, how long the oldest trial of each
//! phase has been in it, and trials whose Prometheus cannot be read. The chart's
//! PrometheusRule and Grafana dashboard (charts/valtune) are built on these names.

use std::sync::{Mutex, RwLock};
use std::time::Instant;

use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::api::experiment::ExperimentPhase;
use crate::api::trial::{TrialOutcome, TrialPhase};
use crate::api::{Validator, ValidatorExperiment, ValidatorTrial};

const TRIAL_PHASES: [TrialPhase; 7] = [
    TrialPhase::Pending,
    TrialPhase::Scheduling,
    TrialPhase::WarmingUp,
    TrialPhase::Measuring,
    TrialPhase::Collecting,
    TrialPhase::Succeeded,
    TrialPhase::Failed,
];

const OUTCOMES: [TrialOutcome; 12] = [
    TrialOutcome::KeptUp,
    TrialOutcome::FellBehind,
    TrialOutcome::OOMKilled,
    TrialOutcome::Aborted,
    TrialOutcome::Crashed,
    TrialOutcome::Unschedulable,
    TrialOutcome::TimedOut,
    TrialOutcome::NodeLost,
    TrialOutcome::NodeNotPrepared,
    TrialOutcome::MetricsUnavailable,
    TrialOutcome::Unobserved,
    TrialOutcome::Invalid,
];

const EXPERIMENT_PHASES: [ExperimentPhase; 5] = [
    ExperimentPhase::Pending,
    ExperimentPhase::Running,
    ExperimentPhase::Suspended,
    ExperimentPhase::Succeeded,
    ExperimentPhase::Failed,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    pub controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub controller: String,
    /// The step of the pass that failed (controller/error.rs `Error::step`).
    pub step: String,
    /// What the API server answered (`Error::kind`).
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CheckLabel {
    pub check: String,
}

/// One trial, for dashboards to join its pods' series with (`trial` is the pod name
/// without its attempt suffix). `trial_namespace`, not `namespace`: Prometheus gives the
/// operator's own namespace to that label when it scrapes the operator.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TrialInfoLabels {
    pub trial_namespace: String,
    pub experiment: String,
    pub trial: String,
    pub point: String,
}

/// One Validator. `validator_namespace`, not `namespace`, for the reason of
/// [`TrialInfoLabels`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ValidatorLabels {
    pub validator_namespace: String,
    pub validator: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub outcome: String,
}

fn phase_label(phase: impl std::fmt::Debug) -> PhaseLabel {
    PhaseLabel {
        phase: format!("{phase:?}"),
    }
}

/// When a trial entered the phase it is in: what its status records for that phase
/// (creation for Pending; the window's planned end is when Collecting starts).
fn phase_start(t: &ValidatorTrial) -> Option<i64> {
    let st = t.status.as_ref();
    let recorded = st.and_then(|s| match s.phase {
        TrialPhase::Scheduling => s.scheduling_since.as_ref(),
        TrialPhase::WarmingUp => s.started_at.as_ref(),
        TrialPhase::Measuring => s.window_start.as_ref(),
        TrialPhase::Collecting => s.window_end.as_ref(),
        _ => None,
    });
    recorded
        .or(t.metadata.creation_timestamp.as_ref())
        .map(|t| t.0.as_second())
}

pub struct OperatorMetrics {
    registry: Mutex<Registry>,
    reconciles: Family<ControllerLabel, Counter>,
    errors: Family<ErrorLabels, Counter>,
    durations: Family<ControllerLabel, Histogram>,
    transitions: Family<PhaseLabel, Counter>,
    trials: Family<PhaseLabel, Gauge>,
    outcomes: Family<OutcomeLabel, Gauge>,
    trial_info: Family<TrialInfoLabels, Gauge>,
    oldest: Family<PhaseLabel, Gauge>,
    blind: Gauge,
    experiments: Family<PhaseLabel, Gauge>,
    prometheus_queries: Counter,
    checks: Family<CheckLabel, Gauge>,
    trial_store: RwLock<Option<Store<ValidatorTrial>>>,
    experiment_store: RwLock<Option<Store<ValidatorExperiment>>>,
    validator_lag: Family<ValidatorLabels, Gauge>,
    validator_behind_since: Family<ValidatorLabels, Gauge>,
    validator_pending_since: Family<ValidatorLabels, Gauge>,
    validator_store: RwLock<Option<Store<Validator>>>,
}

/// Observes a reconcile's duration when dropped.
pub struct ReconcileTimer<'a> {
    metrics: &'a OperatorMetrics,
    controller: &'static str,
    start: Instant,
}

impl Drop for ReconcileTimer<'_> {
    fn drop(&mut self) {
        self.metrics
            .durations
            .get_or_create(&ControllerLabel {
                controller: self.controller.into(),
            })
            .observe(self.start.elapsed().as_secs_f64());
    }
}

impl Default for OperatorMetrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Reconcile duration buckets, in seconds.
const RECONCILE_BUCKETS: [f64; 14] = [
    0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 60.0,
];

impl OperatorMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("valtune");
        let reconciles = Family::<ControllerLabel, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let durations = Family::<ControllerLabel, Histogram>::new_with_constructor(|| {
            // 1-2-5 steps, so a p99 can be told to be under 10, 20 or 50 ms (issue 23).
            Histogram::new(RECONCILE_BUCKETS.iter().copied())
        });
        let transitions = Family::<PhaseLabel, Counter>::default();
        let trials = Family::<PhaseLabel, Gauge>::default();
        registry.register("reconciles", "Reconciles started", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by the step that failed and what the API server answered",
            errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Reconcile durations",
            durations.clone(),
        );
        registry.register(
            "trial_phase_transitions",
            "Trials entering a phase",
            transitions.clone(),
        );
        registry.register("trials", "Trials by phase", trials.clone());
        let outcomes = Family::<OutcomeLabel, Gauge>::default();
        registry.register(
            "trials_finished",
            "Finished trials by outcome",
            outcomes.clone(),
        );
        let trial_info = Family::<TrialInfoLabels, Gauge>::default();
        registry.register(
            "trial_info",
            "1 per trial the operator knows, with its experiment and point (join on trial: a pod's name less its -<attempt>)",
            trial_info.clone(),
        );
        let oldest = Family::<PhaseLabel, Gauge>::default();
        registry.register(
            "trials_oldest_phase_start_seconds",
            "When the trial longest in each unfinished phase entered it (Unix seconds; absent when no trial is in the phase)",
            oldest.clone(),
        );
        let blind = Gauge::default();
        registry.register(
            "trials_blind",
            "Unfinished trials whose Prometheus cannot be read (status.blindSince set)",
            blind.clone(),
        );
        let experiments = Family::<PhaseLabel, Gauge>::default();
        registry.register("experiments", "Experiments by phase", experiments.clone());
        // Every phase's counter exists from the start, so "no transition in a while" reads
        // as an increase of 0, not as a missing series.
        for phase in TRIAL_PHASES {
            let _ = transitions.get_or_create(&phase_label(phase));
        }
        let prometheus_queries = Counter::default();
        registry.register(
            "prometheus_queries",
            "Queries sent to Prometheus (results, warm-up, abort rules)",
            prometheus_queries.clone(),
        );
        let checks = Family::<CheckLabel, Gauge>::default();
        registry.register(
            "check_failing",
            "The start-up checks (valtune check's Prometheus part): 1 while a check fails, 0 once it passed",
            checks.clone(),
        );
        let validator_lag = Family::<ValidatorLabels, Gauge>::default();
        registry.register(
            "validator_lag",
            "How far each Validator is behind the chain's head, in its client's unit (blocks, slots), as its status says (absent when the client does not show it)",
            validator_lag.clone(),
        );
        let validator_behind_since = Family::<ValidatorLabels, Gauge>::default();
        registry.register(
            "validator_not_caught_up_since_seconds",
            "When each Validator that is not caught up (condition CaughtUp False: the client's own health answer, or no answer) stopped being so (Unix seconds; absent while caught up)",
            validator_behind_since.clone(),
        );
        let validator_pending_since = Family::<ValidatorLabels, Gauge>::default();
        registry.register(
            "validator_restart_pending_since_seconds",
            "When each Validator's pending change (condition RestartPending True) began to wait for its restart (Unix seconds; absent when none waits)",
            validator_pending_since.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            reconciles,
            errors,
            durations,
            transitions,
            trials,
            outcomes,
            trial_info,
            oldest,
            blind,
            experiments,
            prometheus_queries,
            checks,
            trial_store: RwLock::new(None),
            experiment_store: RwLock::new(None),
            validator_lag,
            validator_behind_since,
            validator_pending_since,
            validator_store: RwLock::new(None),
        }
    }

    /// A start-up check's verdict (1: failing).
    pub fn check_result(&self, check: &str, failing: bool) {
        self.checks
            .get_or_create(&CheckLabel {
                check: check.into(),
            })
            .set(failing as i64);
    }

    pub fn reconcile_started(&self, controller: &'static str) -> ReconcileTimer<'_> {
        self.reconciles
            .get_or_create(&ControllerLabel {
                controller: controller.into(),
            })
            .inc();
        ReconcileTimer {
            metrics: self,
            controller,
            start: Instant::now(),
        }
    }

    pub fn reconcile_error(&self, controller: &str, step: &str, kind: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                controller: controller.into(),
                step: step.into(),
                kind: kind.into(),
            })
            .inc();
    }

    /// The counter every Prometheus client of the operator increments.
    pub fn prometheus_queries(&self) -> Counter {
        self.prometheus_queries.clone()
    }

    pub fn trial_transition(&self, phase: &str) {
        self.transitions
            .get_or_create(&PhaseLabel {
                phase: phase.into(),
            })
            .inc();
    }

    /// Trials are counted from this cache at each scrape.
    pub fn watch_trials(&self, store: Store<ValidatorTrial>) {
        *self.trial_store.write().expect("lock") = Some(store);
    }

    /// Experiments are counted from this cache at each scrape.
    pub fn watch_experiments(&self, store: Store<ValidatorExperiment>) {
        *self.experiment_store.write().expect("lock") = Some(store);
    }

    /// Validators are read from this cache at each scrape.
    pub fn watch_validators(&self, store: Store<Validator>) {
        *self.validator_store.write().expect("lock") = Some(store);
    }

    /// Sets the gauges read from the Validators in the cache: rebuilt at each scrape, so
    /// a deleted Validator's series go.
    pub fn count_validators(&self, all: &[std::sync::Arc<Validator>]) {
        self.validator_lag.clear();
        self.validator_behind_since.clear();
        self.validator_pending_since.clear();
        for v in all {
            let Some(st) = v.status.as_ref() else {
                continue;
            };
            let labels = ValidatorLabels {
                validator_namespace: v.metadata.namespace.clone().unwrap_or_default(),
                validator: v.metadata.name.clone().unwrap_or_default(),
            };
            if let Some(lag) = st.lag {
                self.validator_lag.get_or_create(&labels).set(lag);
            }
            let since = |type_: &str, status: &str| {
                st.conditions
                    .iter()
                    .find(|c| c.type_ == type_ && c.status == status)
                    .map(|c| c.last_transition_time.0.as_second())
            };
            if let Some(t) = since("CaughtUp", "False") {
                self.validator_behind_since.get_or_create(&labels).set(t);
            }
            if let Some(t) = since("RestartPending", "True") {
                self.validator_pending_since.get_or_create(&labels).set(t);
            }
        }
    }

    /// Sets the gauges read from the trials in the cache.
    pub fn count_trials(&self, all: &[std::sync::Arc<ValidatorTrial>]) {
        let phase = |t: &ValidatorTrial| t.status.as_ref().map(|s| s.phase).unwrap_or_default();
        for p in TRIAL_PHASES {
            let in_phase: Vec<_> = all.iter().filter(|t| phase(t) == p).collect();
            self.trials
                .get_or_create(&phase_label(p))
                .set(in_phase.len() as i64);
            if p.is_finished() {
                continue;
            }
            match in_phase.iter().filter_map(|t| phase_start(t)).min() {
                Some(oldest) => {
                    self.oldest.get_or_create(&phase_label(p)).set(oldest);
                }
                None => {
                    self.oldest.remove(&phase_label(p));
                }
            }
        }
        for o in OUTCOMES {
            let n = all
                .iter()
                .filter(|t| phase(t).is_finished())
                .filter(|t| t.status.as_ref().and_then(|s| s.outcome) == Some(o))
                .count();
            self.outcomes
                .get_or_create(&OutcomeLabel {
                    outcome: o.as_str().into(),
                })
                .set(n as i64);
        }
        // Rebuilt at each scrape, so a deleted trial's series goes.
        self.trial_info.clear();
        for t in all {
            let labels = TrialInfoLabels {
                trial_namespace: t.metadata.namespace.clone().unwrap_or_default(),
                experiment: t.spec.experiment.clone(),
                trial: t.metadata.name.clone().unwrap_or_default(),
                point: t.spec.point.describe(),
            };
            self.trial_info.get_or_create(&labels).set(1);
        }
        let blind = all
            .iter()
            .filter(|t| !phase(t).is_finished())
            .filter(|t| t.status.as_ref().is_some_and(|s| s.blind_since.is_some()))
            .count();
        self.blind.set(blind as i64);
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        if let Some(store) = self.trial_store.read().expect("lock").as_ref() {
            self.count_trials(&store.state());
        }
        if let Some(store) = self.experiment_store.read().expect("lock").as_ref() {
            let all = store.state();
            for p in EXPERIMENT_PHASES {
                let n = all
                    .iter()
                    .filter(|x| x.status.as_ref().map(|s| s.phase).unwrap_or_default() == p)
                    .count();
                self.experiments
                    .get_or_create(&phase_label(p))
                    .set(n as i64);
            }
        }
        if let Some(store) = self.validator_store.read().expect("lock").as_ref() {
            self.count_validators(&store.state());
        }
        let mut out = String::new();
        let registry = self.registry.lock().expect("lock");
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("encoding to a string");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reconciles_errors_and_durations() {
        let m = OperatorMetrics::new();
        drop(m.reconcile_started("trial"));
        m.reconcile_error("trial", "apply_rendered", "api");
        m.trial_transition("Measuring");
        let text = m.encode();
        assert!(
            text.contains("valtune_reconciles_total{controller=\"trial\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "valtune_reconcile_errors_total{controller=\"trial\",step=\"apply_rendered\",kind=\"api\"} 1"
            )
        );
        assert!(text.contains("valtune_reconcile_duration_seconds_count{controller=\"trial\"} 1"));
        assert!(text.contains("valtune_trial_phase_transitions_total{phase=\"Measuring\"} 1"));
        // Phases nobody entered yet read 0, not absent.
        assert!(text.contains("valtune_trial_phase_transitions_total{phase=\"Collecting\"} 0"));
    }

    fn trial(yaml: &str) -> std::sync::Arc<ValidatorTrial> {
        std::sync::Arc::new(serde_saphyr::from_str(yaml).unwrap())
    }

    #[test]
    fn each_trial_has_an_info_series_until_it_is_gone() {
        let t = |name: &str, memory: &str| {
            trial(&format!(
                "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorTrial\nmetadata: {{name: {name}, namespace: v}}\nspec: {{experiment: ram, point: {{memory: {memory}}}, repetition: 1, template: {{agave: {{image: a}}}}, settings: {{}}, metrics: {{}}}}\n"
            ))
        };
        let m = OperatorMetrics::new();
        m.count_trials(&[t("ram-a", "256Gi"), t("ram-b", "512Gi")]);
        let text = m.encode();
        assert!(
            text.contains(
                "valtune_trial_info{trial_namespace=\"v\",experiment=\"ram\",trial=\"ram-a\",point=\"memory=256Gi\"} 1"
            ),
            "{text}"
        );
        m.count_trials(&[t("ram-b", "512Gi")]);
        let text = m.encode();
        assert!(!text.contains("trial=\"ram-a\""), "{text}");
        assert!(text.contains("trial=\"ram-b\""), "{text}");
    }

    #[test]
    fn trials_are_counted_by_phase_outcome_age_and_blindness() {
        let head = "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorTrial\nmetadata: {name: t, creationTimestamp: '2026-01-01T00:00:00Z'}\nspec: {experiment: x, point: {}, repetition: 1, template: {agave: {image: a}}, settings: {}, metrics: {}}\n";
        let all = vec![
            trial(&format!(
                "{head}status: {{phase: Measuring, windowStart: '2026-01-01T02:00:00Z'}}"
            )),
            trial(&format!(
                "{head}status: {{phase: Measuring, windowStart: '2026-01-01T01:00:00Z', blindSince: '2026-01-01T03:00:00Z'}}"
            )),
            trial(&format!(
                "{head}status: {{phase: Failed, outcome: MetricsUnavailable}}"
            )),
            trial(&format!(
                "{head}status: {{phase: Succeeded, outcome: KeptUp}}"
            )),
        ];
        let m = OperatorMetrics::new();
        m.count_trials(&all);
        let text = m.encode();
        for line in [
            "valtune_trials{phase=\"Measuring\"} 2",
            "valtune_trials{phase=\"Pending\"} 0",
            "valtune_trials_finished{outcome=\"MetricsUnavailable\"} 1",
            "valtune_trials_finished{outcome=\"KeptUp\"} 1",
            "valtune_trials_finished{outcome=\"OOMKilled\"} 0",
            "valtune_trials_blind 1",
            // 2026-01-01T01:00:00Z, the earlier window start.
            "valtune_trials_oldest_phase_start_seconds{phase=\"Measuring\"} 1767229200",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
        assert!(!text.contains("oldest_phase_start_seconds{phase=\"Pending\"}"));
        // A phase that empties loses its series.
        m.count_trials(&all[2..]);
        assert!(
            !m.encode()
                .contains("oldest_phase_start_seconds{phase=\"Measuring\"}")
        );
    }

    #[test]
    fn validators_show_their_lag_and_since_when_they_are_behind_or_wait_to_restart() {
        let v = |name: &str, status: &str| {
            std::sync::Arc::new(
                serde_saphyr::from_str::<Validator>(&format!(
                    "apiVersion: valtune.dev/v1alpha1\nkind: Validator\nmetadata: {{name: {name}, namespace: prod}}\nspec: {{nodeName: bm-01, template: {{besu: {{image: b}}}}}}\nstatus: {status}\n"
                ))
                .unwrap(),
            )
        };
        let cond = |t: &str, s: &str| {
            format!(
                "{{type: {t}, status: '{s}', reason: r, message: m, lastTransitionTime: '2026-11-27T22:00:00Z'}}"
            )
        };
        let m = OperatorMetrics::new();
        m.count_validators(&[
            v(
                "behind",
                &format!(
                    "{{phase: CatchingUp, lag: 40, conditions: [{}, {}]}}",
                    cond("CaughtUp", "False"),
                    cond("RestartPending", "False")
                ),
            ),
            v(
                "waiting",
                &format!(
                    "{{phase: RestartPending, lag: 0, conditions: [{}, {}]}}",
                    cond("CaughtUp", "True"),
                    cond("RestartPending", "True")
                ),
            ),
        ]);
        let text = m.encode();
        let series = |name: &str, v: &str| {
            format!("{name}{{validator_namespace=\"prod\",validator=\"{v}\"}}")
        };
        assert!(
            text.contains(&format!("{} 40", series("valtune_validator_lag", "behind"))),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "{} 1795816800",
                series("valtune_validator_not_caught_up_since_seconds", "behind")
            )),
            "{text}"
        );
        assert!(
            !text.contains(&series(
                "valtune_validator_not_caught_up_since_seconds",
                "waiting"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "{} 1795816800",
                series("valtune_validator_restart_pending_since_seconds", "waiting")
            )),
            "{text}"
        );
        assert!(
            !text.contains(&series(
                "valtune_validator_restart_pending_since_seconds",
                "behind"
            )),
            "{text}"
        );
        m.count_validators(&[]);
        assert!(!m.encode().contains("validator=\"behind\""));
    }
}
