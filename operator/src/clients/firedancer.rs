//! Firedancer and Frankendancer (firedancer-io/firedancer): the knob table. Trials are
//! not rendered yet; an experiment fails Unsupported before anything is created.

use kube::core::Rule;

use super::knobs::{Dim, Generic, How, Knob, KnobTable, Reach, Refusal};
use super::pod::Skeleton;
use super::profile::MetricProfile;
use super::{ClientPod, RenderError, ValidatorClient};
use crate::api::settings::QueryKey;
use crate::api::sweep::ThreadKnob;
use crate::api::template::{ClientSpec, ValidatorTemplate};
use crate::api::trial::ValidatorTrial;

macro_rules! tile {
    ($t:ident, $key:literal) => {
        Knob {
            dim: Dim::Thread(ThreadKnob::$t),
            reach: &[Reach::always(How::ConfigKey($key))],
            source: "src/app/fdctl/config/default.toml",
        }
    };
}

static FIREDANCER: KnobTable = KnobTable {
    client: "firedancer",
    display: "Firedancer",
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
        tile!(NetTiles, "layout.net_tile_count"),
        tile!(QuicTiles, "layout.quic_tile_count"),
        tile!(VerifyTiles, "layout.verify_tile_count"),
        tile!(BankTiles, "layout.bank_tile_count"),
        tile!(ShredTiles, "layout.shred_tile_count"),
        tile!(ResolvTiles, "layout.resolv_tile_count"),
        tile!(ExecTiles, "layout.exec_tile_count"),
        tile!(
            UnifiedSchedulerHandlerThreads,
            "layout.agave_unified_scheduler_handler_threads"
        ),
    ],
    refusals: &[Refusal {
        dim: Dim::ProgramCacheEntries,
        why: "Firedancer cannot sweep programCacheEntries: full Firedancer sizes its cache in MiB (sweep.knobs with configKey runtime.program_cache.heap_size_mib) and Frankendancer uses Agave's compile-time constant",
    }],
    generic: Generic {
        env: true,
        arg: true,
        config_key: true,
        no_config_key: "",
    },
};

pub struct Firedancer;

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
        &FIREDANCER
    }
    fn rules(&self) -> Vec<Rule> {
        vec![Rule::new("!has(self.template.firedancer) || has(self.template.resources.hugepages1Gi) || has(self.sweep.hugepages1Gi)")
            .message("Firedancer places its workspaces in hugepages: set template.resources.hugepages1Gi (fdctl mem prints how many the layout needs) or sweep.hugepages1Gi")
            .field_path(".template.resources.hugepages1Gi")]
    }
    fn runs_trials(&self) -> bool {
        false
    }
    fn render(&self, _: &ValidatorTrial, _: &Skeleton) -> Result<ClientPod, RenderError> {
        Err(RenderError::Unsupported("Firedancer"))
    }
    fn profile(&self, _: &ValidatorTemplate) -> MetricProfile {
        unsupported_profile()
    }
    fn profile_keys(&self) -> Option<Vec<QueryKey>> {
        None
    }
}

/// A client this version cannot run has no profile; nothing reads it.
pub(super) fn unsupported_profile() -> MetricProfile {
    MetricProfile {
        queries: Default::default(),
        lag: QueryKey::SlotLag,
        lag_unit: super::profile::LagUnit::Slots,
        default_max_lag: 0,
        endpoints: Vec::new(),
        validator_container: "validator",
        figures: Vec::new(),
    }
}
