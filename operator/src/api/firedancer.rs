//! Firedancer and Frankendancer (firedancer-io/firedancer): the settings of a trial.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::version::VERSION_PATTERN;

use super::agave::SolanaCluster;

/// Firedancer or Frankendancer, run by `fdctl run --config` (or `firedancer run`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FiredancerSpec {
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// The client version, for flags and knobs that exist only in some versions; read
    /// from the image tag (`:vX.Y.Z`) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), regex(pattern = VERSION_PATTERN))]
    pub version: Option<String>,
    /// Frankendancer executes inside an Agave child process; full Firedancer does not.
    #[serde(default)]
    pub flavor: FiredancerFlavor,
    /// Which Solana cluster to join.
    #[serde(default)]
    pub cluster: SolanaCluster,
    /// `[net] provider`: `xdp` needs hostNetwork and CAP_NET_RAW; `socket` runs in a pod network.
    #[serde(default)]
    pub net_provider: FiredancerNetProvider,
    /// Config keys (dotted TOML paths such as `layout.verify_tile_count`) to TOML values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub config: BTreeMap<String, String>,
    /// `[tiles.metric] prometheus_listen_port`.
    #[serde(default = "default_firedancer_metrics_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub metrics_port: i32,
}

fn default_firedancer_metrics_port() -> i32 {
    7999
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum FiredancerFlavor {
    #[default]
    Frankendancer,
    Firedancer,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum FiredancerNetProvider {
    Xdp,
    #[default]
    Socket,
}
