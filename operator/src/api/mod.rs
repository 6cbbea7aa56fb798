//! The `valtune.dev/v1alpha1` API: CRD types, their schema rules and defaults.

pub mod agave;
pub mod besu;
pub mod comparison;
pub mod experiment;
pub mod firedancer;
pub mod images;
pub mod nodeos;
pub mod quantity;
pub mod resolve;
pub mod settings;
pub mod shapes;
pub mod strategy;
pub mod sweep;
pub mod template;
pub mod trial;
pub mod tuning;
pub mod validator;
pub mod validator_rules;
pub mod version;

pub use experiment::{ValidatorExperiment, ValidatorExperimentSpec, ValidatorExperimentStatus};
pub use trial::{ValidatorTrial, ValidatorTrialSpec, ValidatorTrialStatus};
pub use validator::{Validator, ValidatorSpec, ValidatorStatus};

pub const GROUP: &str = "valtune.dev";

/// Labels valtune puts on what it creates.
pub mod labels {
    /// On trials, pods and volumes: the experiment they belong to.
    pub const EXPERIMENT: &str = "valtune.dev/experiment";
    /// On pods and volumes: the trial they belong to.
    pub const TRIAL: &str = "valtune.dev/trial";
    /// On pods: the client they run (agave, firedancer, besu, nodeos).
    pub const CLIENT: &str = "valtune.dev/client";
    /// On volumes: the role (ledger, accounts, ...).
    pub const VOLUME_ROLE: &str = "valtune.dev/volume-role";
    pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    /// On a trial: collect its results again when this annotation's value changes
    /// (`valtune collect` sets it).
    pub const COLLECT: &str = "valtune.dev/collect";
    pub const MANAGER: &str = "valtune";
}

/// The field manager of everything valtune applies (server-side apply).
pub const FIELD_MANAGER: &str = "valtune";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategies::plan::plan;

    fn quickstart() -> ValidatorExperiment {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../manifests/examples/quickstart-agave-ram-sweep.yaml"
        );
        serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_quickstart_round_trips_and_gets_rust_defaults() {
        let vx = quickstart();
        let json = serde_json::to_value(&vx).unwrap();
        let back: ValidatorExperiment = serde_json::from_value(json).unwrap();
        assert_eq!(back.spec, vx.spec);
        assert_eq!(vx.spec.max_trials, 256);
        assert_eq!(vx.spec.parallelism, 3);
        assert_eq!(vx.spec.trial.repetitions, 1);
        assert_eq!(vx.spec.trial.measurement.duration, "12h");
        assert_eq!(vx.spec.trial.scheduling_timeout, "10m");
        assert!(vx.spec.template.placement.exclusive);
        let agave = vx.spec.template.client.agave.as_ref().unwrap();
        assert_eq!(agave.rpc_port, 8899);
        assert!(vx.spec.template.client.agave.is_some());
    }

    #[test]
    fn the_quickstart_sweep_is_five_trials() {
        let vx = quickstart();
        assert_eq!(vx.spec.sweep.points(), 5);
        let planned = plan(&vx.spec.sweep, vx.spec.trial.repetitions);
        assert_eq!(planned.len(), 5);
        assert_eq!(planned[4].point.describe(), "memory=1400Gi");
    }
}
