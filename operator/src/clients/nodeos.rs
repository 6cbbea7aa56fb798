//! Antelope nodeos: the knob table. Trials are not rendered yet; an experiment fails
//! Unsupported before anything is created.

use super::knobs::{Dim, Generic, How, Knob, KnobTable, Reach, Refusal};
use super::pod::Skeleton;
use super::profile::MetricProfile;
use super::{ClientPod, RenderError, ValidatorClient};
use crate::api::settings::QueryKey;
use crate::api::sweep::ThreadKnob;
use crate::api::template::{ClientSpec, ValidatorTemplate};
use crate::api::trial::ValidatorTrial;

static NODEOS: KnobTable = KnobTable {
    client: "nodeos",
    display: "nodeos",
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
        Knob {
            dim: Dim::Hugepages1Gi,
            reach: &[Reach::always(How::Resource("hugepages-1Gi"))],
            source: "",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::ChainThreads),
            reach: &[Reach::always(How::Arg("--chain-threads"))],
            source: "",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::HttpThreads),
            reach: &[Reach::always(How::Arg("--http-threads"))],
            source: "",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::NetThreads),
            reach: &[Reach::always(How::Arg("--net-threads"))],
            source: "",
        },
        Knob {
            dim: Dim::Thread(ThreadKnob::EosVmOcCompileThreads),
            reach: &[Reach::always(How::Arg("--eos-vm-oc-compile-threads"))],
            source: "",
        },
    ],
    refusals: &[Refusal {
        dim: Dim::ProgramCacheEntries,
        why: "nodeos has no program cache to size (sweep a client setting with sweep.knobs instead)",
    }],
    generic: Generic {
        env: true,
        arg: true,
        config_key: true,
        no_config_key: "",
    },
};

pub struct Nodeos;

impl ValidatorClient for Nodeos {
    fn name(&self) -> &'static str {
        "nodeos"
    }
    fn runs(&self, spec: &ClientSpec) -> bool {
        spec.nodeos.is_some()
    }
    fn image_and_version<'a>(&self, t: &'a ValidatorTemplate) -> (&'a str, Option<&'a str>) {
        t.client
            .nodeos
            .as_ref()
            .map(|n| (n.image.as_str(), n.version.as_deref()))
            .unwrap_or(("", None))
    }
    fn knobs(&self) -> &'static KnobTable {
        &NODEOS
    }
    fn runs_trials(&self) -> bool {
        false
    }
    fn render(&self, _: &ValidatorTrial, _: &Skeleton) -> Result<ClientPod, RenderError> {
        Err(RenderError::Unsupported("nodeos"))
    }
    fn profile(&self, _: &ValidatorTemplate) -> MetricProfile {
        super::firedancer::unsupported_profile()
    }
    fn profile_keys(&self) -> Option<Vec<QueryKey>> {
        None
    }
}
