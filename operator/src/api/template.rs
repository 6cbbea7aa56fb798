//! The validator template: which client runs, with what resources, on which volumes and
//! nodes. Experiments hold one as the base of every trial; a trial holds a resolved copy.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, Toleration};
use kube::KubeSchema;
use kube::core::Rule;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::agave::AgaveSpec;
pub use super::besu::BesuSpec;
pub use super::firedancer::FiredancerSpec;
pub use super::nodeos::NodeosSpec;
pub use super::tuning::Tuning;

/// A client, a Kubernetes-style image reference and its settings. Exactly one client is set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = ClientSpec::one_of())]
pub struct ValidatorTemplate {
    /// The validator client and its client-specific settings.
    #[serde(flatten)]
    pub client: ClientSpec,
    /// CPU, memory and hugepages for the validator container.
    #[serde(default)]
    pub resources: Resources,
    /// Thread counts, the program cache, the allocator, the heap, ...: how the client is
    /// tuned. A trial's resolved template holds its point's values here.
    #[serde(default, skip_serializing_if = "Tuning::is_empty")]
    pub tuning: Tuning,
    /// Volumes by role. Each becomes a PersistentVolumeClaim on local NVMe.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[x_kube(validation = Rule::new("self.all(v, self.exists_one(w, w.role == v.role))")
        .message("each volume role may appear once; merge the duplicate entries"))]
    pub storage: Vec<VolumeSpec>,
    /// Which nodes may run the validator.
    #[serde(default)]
    pub placement: Placement,
    /// Extra environment variables of the validator container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub env: Vec<EnvVar>,
    /// Extra arguments of the validator, appended after the rendered ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), inner(length(max = 1024)))]
    pub extra_args: Vec<String>,
}

/// What every client's spec offers the generic template.
pub trait ClientSettings {
    /// The client's config-file keys (`configKey` knobs land here), if it has a file.
    fn config_mut(&mut self) -> Option<&mut BTreeMap<String, String>> {
        None
    }
}

/// The tagged union of clients, one line each (the API's registry of clients; the
/// operator's is `clients::CLIENTS`, in the same order), flattened into the template so a
/// manifest reads `template: {agave: {...}}`.
macro_rules! client_spec {
    ($($(#[$attr:meta])* $name:ident: $spec:ty,)*) => {
        #[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
        #[serde(rename_all = "camelCase")]
        pub struct ClientSpec {
            $(
                $(#[$attr])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<$spec>,
            )*
        }

        impl ClientSpec {
            /// The template keys of the clients, in order.
            pub const NAMES: &[&str] = &[$($(#[$attr])* stringify!($name),)*];

            /// The set client's settings (the schema lets one be set).
            fn set_mut(&mut self) -> Option<&mut dyn ClientSettings> {
                $(
                    $(#[$attr])*
                    if let Some(s) = self.$name.as_mut() {
                        return Some(s);
                    }
                )*
                None
            }
        }
    };
}

client_spec! {
    agave: AgaveSpec,
    firedancer: FiredancerSpec,
    besu: BesuSpec,
    nodeos: NodeosSpec,
    #[cfg(test)]
    toy: crate::clients::toy::ToySpec,
}

impl ClientSpec {
    /// The client's config-file keys (`configKey` knobs land here), if it has a file.
    pub fn config_mut(&mut self) -> Option<&mut BTreeMap<String, String>> {
        self.set_mut()?.config_mut()
    }

    /// Exactly one client is set, named from [`ClientSpec::NAMES`].
    fn one_of() -> Rule {
        let has: Vec<String> = Self::NAMES
            .iter()
            .map(|n| format!("has(self.{n})"))
            .collect();
        Rule::new(format!("[{}].filter(x, x).size() == 1", has.join(", "))).message(
            format!(
                "set exactly one client: {}",
                super::validator_rules::or_list(Self::NAMES.iter())
            )
            .as_str(),
        )
    }
}

/// Validator container resources. CPU is whole cores and requests equal limits, so the pod
/// is Guaranteed QoS and the kubelet's static CPU manager pins its cores.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new(
    "!has(self.memoryLimit) || !has(self.memory) || !isQuantity(self.memory) || !isQuantity(self.memoryLimit) || quantity(self.memoryLimit).compareTo(quantity(self.memory)) >= 0"
).message("memoryLimit is below memory (the request): raise memoryLimit or remove it to use memory as the limit")
 .field_path(".memoryLimit"))]
pub struct Resources {
    /// Whole CPU cores (request = limit).
    #[serde(default = "default_cpu")]
    #[schemars(range(min = 1, max = 1024))]
    pub cpu: i32,
    /// Memory request, and limit unless memoryLimit is set. Swept memory overrides both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = super::shapes::positive_quantity("512Gi or 1Ti"))]
    pub memory: Option<String>,
    /// Memory limit when it should differ from the request (the pod is then Burstable and
    /// loses CPU pinning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = super::shapes::positive_quantity("512Gi or 1Ti"))]
    pub memory_limit: Option<String>,
    /// 1 GiB hugepages (`hugepages-1Gi`), mounted as hugetlbfs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 4096))]
    pub hugepages1_gi: Option<i32>,
    /// 2 MiB hugepages (`hugepages-2Mi`), mounted as hugetlbfs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1048576))]
    pub hugepages2_mi: Option<i32>,
}

fn default_cpu() -> i32 {
    32
}

impl Default for Resources {
    fn default() -> Self {
        Self {
            cpu: default_cpu(),
            memory: None,
            memory_limit: None,
            hugepages1_gi: None,
            hugepages2_mi: None,
        }
    }
}

/// A volume for one role of the client's data, claimed on local NVMe.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSpec {
    pub role: VolumeRole,
    /// Requested size.
    #[schemars(length(max = 32))]
    #[x_kube(validation = Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))")
        .message("must be a positive quantity such as 2Ti"))]
    pub size: String,
    /// StorageClass of the claim; local PVs with `WaitForFirstConsumer` binding.
    #[serde(default = "default_storage_class")]
    #[schemars(length(min = 1, max = 253))]
    pub storage_class_name: String,
}

fn default_storage_class() -> String {
    "local-nvme".into()
}

/// What a volume holds. Each client mounts the roles it uses (docs/clients.md).
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum VolumeRole {
    Ledger,
    Accounts,
    Snapshots,
    AccountsIndex,
    Data,
    State,
}

impl VolumeRole {
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeRole::Ledger => "ledger",
            VolumeRole::Accounts => "accounts",
            VolumeRole::Snapshots => "snapshots",
            VolumeRole::AccountsIndex => "accounts-index",
            VolumeRole::Data => "data",
            VolumeRole::State => "state",
        }
    }
}

/// Where validators run: bare-metal nodes chosen by labels and taints.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Node labels a node must have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub node_selector: BTreeMap<String, String>,
    /// Taints to tolerate (bare-metal validator nodes are usually tainted NoSchedule).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new("self.all(t, !has(t.operator) || t.operator in ['Exists', 'Equal'])")
            .message("a toleration's operator is Exists or Equal"),
        validation = Rule::new("self.all(t, !has(t.effect) || t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])")
            .message("a toleration's effect is NoSchedule, PreferNoSchedule or NoExecute (or unset for all)"),
        validation = Rule::new("self.all(t, !has(t.operator) || t.operator != 'Exists' || !has(t.value) || t.value == '')")
            .message("a toleration with operator Exists has no value: remove the value"),
    )]
    pub tolerations: Vec<Toleration>,
    /// At most one valtune pod per node at a time (no noisy neighbours).
    #[serde(default = "default_true")]
    pub exclusive: bool,
}

fn default_true() -> bool {
    true
}

impl Default for Placement {
    fn default() -> Self {
        Self {
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            exclusive: true,
        }
    }
}
