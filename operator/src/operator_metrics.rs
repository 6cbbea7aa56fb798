//! The operator's own metrics (served on /metrics): reconciles, errors by kind, reconcile
//! durations, trial phase changes, and trials by phase read from the controller's cache.

use std::sync::{Mutex, RwLock};
use std::time::Instant;

use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::api::ValidatorTrial;
use crate::api::trial::TrialPhase;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabel {
    pub controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub controller: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabel {
    pub phase: String,
}

pub struct OperatorMetrics {
    registry: Mutex<Registry>,
    reconciles: Family<ControllerLabel, Counter>,
    errors: Family<ErrorLabels, Counter>,
    durations: Family<ControllerLabel, Histogram>,
    transitions: Family<PhaseLabel, Counter>,
    trials: Family<PhaseLabel, Gauge>,
    prometheus_queries: Counter,
    trial_store: RwLock<Option<Store<ValidatorTrial>>>,
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

impl OperatorMetrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("valtune");
        let reconciles = Family::<ControllerLabel, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let durations = Family::<ControllerLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 12))
        });
        let transitions = Family::<PhaseLabel, Counter>::default();
        let trials = Family::<PhaseLabel, Gauge>::default();
        registry.register("reconciles", "Reconciles started", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by error kind",
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
        let prometheus_queries = Counter::default();
        registry.register(
            "prometheus_queries",
            "Queries sent to Prometheus (results, warm-up, abort rules)",
            prometheus_queries.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            reconciles,
            errors,
            durations,
            transitions,
            trials,
            prometheus_queries,
            trial_store: RwLock::new(None),
        }
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

    pub fn reconcile_error(&self, controller: &str, kind: &str) {
        self.errors
            .get_or_create(&ErrorLabels {
                controller: controller.into(),
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

    /// Trials by phase are counted from this cache at each scrape.
    pub fn watch_trials(&self, store: Store<ValidatorTrial>) {
        *self.trial_store.write().expect("lock") = Some(store);
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        if let Some(store) = self.trial_store.read().expect("lock").as_ref() {
            let phases = [
                TrialPhase::Pending,
                TrialPhase::Scheduling,
                TrialPhase::WarmingUp,
                TrialPhase::Measuring,
                TrialPhase::Collecting,
                TrialPhase::Succeeded,
                TrialPhase::Failed,
            ];
            let all = store.state();
            for phase in phases {
                let n = all
                    .iter()
                    .filter(|t| t.status.as_ref().map(|s| s.phase).unwrap_or_default() == phase)
                    .count();
                self.trials
                    .get_or_create(&PhaseLabel {
                        phase: format!("{phase:?}"),
                    })
                    .set(n as i64);
            }
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
        m.reconcile_error("trial", "api");
        m.trial_transition("Measuring");
        let text = m.encode();
        assert!(
            text.contains("valtune_reconciles_total{controller=\"trial\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("valtune_reconcile_errors_total{controller=\"trial\",kind=\"api\"} 1")
        );
        assert!(text.contains("valtune_reconcile_duration_seconds_count{controller=\"trial\"} 1"));
        assert!(text.contains("valtune_trial_phase_transitions_total{phase=\"Measuring\"} 1"));
    }
}
