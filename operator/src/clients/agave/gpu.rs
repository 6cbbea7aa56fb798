//! GPU signature verification (`--cuda`): the GPU the container requests, the RuntimeClass
//! that gives it the driver, and where agave-validator finds its CUDA libraries.
//!
//! anza-xyz/agave v2.1.14 perf/src/perf_libs.rs: `init_cuda` looks for `perf-libs` next to
//! the agave-validator executable, takes `perf-libs/<basename of CUDA_HOME>/libcuda-crypt.so`,
//! and exits with `Unable to load "libcuda-crypt.so"` when it cannot; with the library
//! but no GPU, `ed25519_init()` fails and the validator panics (perf/src/sigverify.rs).
//! The GPU then verifies TPU packets, replayed entries' signatures and shreds.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, HostPathVolumeSource, ResourceRequirements, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::agave::AgaveGpu;
use crate::api::sweep::Sigverify;
use crate::api::template::{AgaveSpec, Tuning};
use crate::clients::pod::Tweaks;

/// Where the official image keeps agave-validator (sdk/docker-solana/Dockerfile at
/// v2.1.14: `COPY usr/bin /usr/bin/`), so its perf-libs directory.
pub const PERF_LIBS_DIR: &str = "/usr/bin/perf-libs";
const PERF_LIBS_VOLUME: &str = "perf-libs";

/// Where signatures are verified: the tuned value, else the Agave spec's.
pub fn sigverify(tuning: &Tuning, agave: &AgaveSpec) -> Sigverify {
    tuning.sigverify.unwrap_or(agave.sigverify)
}

/// The GPU request (requests = limits, as extended resources must be), `CUDA_HOME`, the
/// perf-libs mount when the host provides them, and the RuntimeClass.
pub fn apply(
    gpu: &AgaveGpu,
    validator: &mut Container,
    volumes: &mut Vec<Volume>,
    tweaks: &mut Tweaks,
) {
    let r = validator
        .resources
        .get_or_insert_with(ResourceRequirements::default);
    let count = Quantity(gpu.count.to_string());
    r.limits
        .get_or_insert_with(Default::default)
        .insert(gpu.resource.clone(), count.clone());
    r.requests
        .get_or_insert_with(Default::default)
        .insert(gpu.resource.clone(), count);
    validator.env.get_or_insert_with(Vec::new).push(EnvVar {
        name: "CUDA_HOME".into(),
        value: Some(gpu.cuda_home.clone()),
        ..Default::default()
    });
    if let Some(path) = &gpu.perf_libs_host_path {
        volumes.push(Volume {
            name: PERF_LIBS_VOLUME.into(),
            host_path: Some(HostPathVolumeSource {
                path: path.clone(),
                type_: Some("Directory".into()),
            }),
            ..Default::default()
        });
        validator
            .volume_mounts
            .get_or_insert_with(Vec::new)
            .push(VolumeMount {
                name: PERF_LIBS_VOLUME.into(),
                mount_path: PERF_LIBS_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            });
    }
    if !gpu.runtime_class_name.is_empty() {
        tweaks.runtime_class_name = Some(gpu.runtime_class_name.clone());
    }
    // GPU nodes are commonly tainted with the resource's name, so that only pods asking
    // for a GPU land there (what the ExtendedResourceToleration admission plugin adds
    // where it is enabled).
    tweaks.tolerations.push(Toleration {
        key: Some(gpu.resource.clone()),
        operator: Some("Exists".into()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    });
}
