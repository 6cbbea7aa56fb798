//! Hyperledger Besu: the knob table. Trials are not rendered yet; an experiment fails
//! Unsupported before anything is created.

use super::knobs::{Dim, Generic, How, Knob, KnobTable, Reach, Refusal};
use super::pod::Skeleton;
use super::profile::MetricProfile;
use super::{ClientPod, RenderError, ValidatorClient};
use crate::api::settings::QueryKey;
use crate::api::template::{ClientSpec, ValidatorTemplate};
use crate::api::trial::ValidatorTrial;

static BESU: KnobTable = KnobTable {
    client: "besu",
    display: "Besu",
    knobs: &[
        Knob {
            dim: Dim::Memory,
            reach: &[Reach::always(How::Resource("memory"))],
            source: "",
        },
        Knob {
            dim: Dim::Cpu,
            reach: &[Reach::always(How::Resource("cpu"))],
            source: "",
        },
    ],
    refusals: &[
        Refusal {
            dim: Dim::ProgramCacheEntries,
            why: "Besu has no program cache to size (sweep a client setting with sweep.knobs instead)",
        },
        Refusal {
            dim: Dim::Hugepages1Gi,
            why: "Besu does not allocate hugepages, so sweeping them measures nothing",
        },
    ],
    generic: Generic {
        env: true,
        arg: true,
        config_key: true,
        no_config_key: "",
    },
};

pub struct Besu;

impl ValidatorClient for Besu {
    fn name(&self) -> &'static str {
        "besu"
    }
    fn runs(&self, spec: &ClientSpec) -> bool {
        spec.besu.is_some()
    }
    fn image_and_version<'a>(&self, t: &'a ValidatorTemplate) -> (&'a str, Option<&'a str>) {
        t.client
            .besu
            .as_ref()
            .map(|b| (b.image.as_str(), b.version.as_deref()))
            .unwrap_or(("", None))
    }
    fn knobs(&self) -> &'static KnobTable {
        &BESU
    }
    fn runs_trials(&self) -> bool {
        false
    }
    fn render(&self, _: &ValidatorTrial, _: &Skeleton) -> Result<ClientPod, RenderError> {
        Err(RenderError::Unsupported("Besu"))
    }
    fn profile(&self, _: &ValidatorTemplate) -> MetricProfile {
        super::firedancer::unsupported_profile()
    }
    fn profile_keys(&self) -> Option<Vec<QueryKey>> {
        None
    }
}
