//! Frankendancer (firedancer-io/firedancer, `fdctl` and `fddev`): a follower of a
//! cluster measured like Agave, or seed 003's leader benchmark (`fddev bench`), from a
//! TOML config per trial whose tile counts are swept ([`knobs`]), with every tile on a
//! core of its own ([`layout`], [`start`]), hugepages as the kubelet grants them and
//! privileges only as the spec names them ([`rules`]). How results are read is in
//! [`profile`]; why each choice, with the upstream sources, in docs/clients/firedancer.md.

mod config;
mod knobs;
mod layout;
mod profile;
mod render;
mod rules;
mod start;
mod versions;

use kube::core::Rule;

use super::knobs::KnobTable;
use super::pod::Skeleton;
use super::profile::{Column, MetricProfile, Objective, TextColumn};
use super::{ClientPod, RenderError, ValidatorClient};
use crate::api::firedancer::FiredancerSpec;
use crate::api::settings::QueryKey;
use crate::api::template::{ClientSpec, ValidatorTemplate};
use crate::api::trial::{TrialResults, ValidatorTrial};
use crate::api::version::Version;

pub const VALIDATOR_CONTAINER: &str = "validator";

pub struct Firedancer;

fn spec(t: &ValidatorTemplate) -> Result<&FiredancerSpec, RenderError> {
    t.client
        .firedancer
        .as_ref()
        .ok_or_else(|| RenderError::Invalid("the template has no firedancer settings".into()))
}

impl ValidatorClient for Firedancer {
    fn name(&self) -> &'static str {
        "firedancer"
    }

    fn runs(&self, spec: &ClientSpec) -> bool {
        spec.firedancer.is_some()
    }

    fn image_and_version<'a>(&self, t: &'a ValidatorTemplate) -> (&'a str, Option<&'a str>) {
        t.client
            .firedancer
            .as_ref()
            .map(|f| (f.image.as_str(), f.version.as_deref()))
            .unwrap_or(("", None))
    }

    fn knobs(&self) -> &'static KnobTable {
        &knobs::FIREDANCER
    }

    fn rules(&self) -> Vec<Rule> {
        rules::rules()
    }

    /// fdctl's `[hugetlbfs] mount_path`: the kubelet's hugepages volumes go where fdctl
    /// expects its `.gigantic` and `.huge` mounts (the start script remounts them).
    fn hugetlbfs_path(&self) -> &'static str {
        config::HUGETLBFS
    }

    fn render(
        &self,
        trial: &ValidatorTrial,
        skeleton: &Skeleton,
    ) -> Result<ClientPod, RenderError> {
        let t = &trial.spec.template;
        let spec = spec(t)?;
        let version = self.version(t).ok_or_else(|| {
            RenderError::Invalid(
                "Firedancer's version is not known: set template.firedancer.version or use an image tagged :vX.Y.Z".into(),
            )
        })?;
        render::pod(self, trial, spec, version, skeleton)
    }

    fn profile(&self, t: &ValidatorTemplate) -> MetricProfile {
        // Admission insists on a known version; the newest names otherwise.
        let v = self.version(t).unwrap_or(Version::new(0, 1106, 40201));
        match t.client.firedancer.as_ref() {
            Some(spec) => profile::profile(spec, v),
            None => unsupported_profile(),
        }
    }

    fn profile_keys(&self) -> Option<Vec<QueryKey>> {
        Some(vec![QueryKey::Tps, QueryKey::SlotLag])
    }

    fn report_columns(&self) -> Vec<Column> {
        profile::COLUMNS.to_vec()
    }

    fn report_text_columns(&self) -> Vec<TextColumn> {
        profile::TEXT_COLUMNS.to_vec()
    }

    fn objective(&self) -> Objective {
        profile::OBJECTIVE
    }

    fn summary(&self) -> fn(&TrialResults) -> String {
        profile::summary
    }
}

/// The profile of a client whose trials are not rendered (nothing reads it); the clients
/// still without a module of their own use it too.
pub(super) fn unsupported_profile() -> MetricProfile {
    MetricProfile {
        queries: Default::default(),
        lag: QueryKey::SlotLag,
        lag_unit: super::profile::LagUnit::Slots,
        default_max_lag: 0,
        endpoints: Vec::new(),
        validator_container: VALIDATOR_CONTAINER,
        figures: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use crate::clients::golden;

    #[test]
    fn golden_seed_bench_pod() {
        // verify 30, bank 6, no blockstore: the guide's last step.
        let t = golden::trial(&golden::example("frankendancer-bench-tiles.yaml"), 7);
        let pod = golden::rendered(&t);
        golden::check("firedancer", "bench-verify30-bank6-no-blockstore", &pod);
    }
}
