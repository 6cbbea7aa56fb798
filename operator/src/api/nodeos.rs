//! Antelope nodeos (AntelopeIO/spring): the settings of a trial.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::version::VERSION_PATTERN;

/// Antelope nodeos (e.g. a WAX node).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeosSpec {
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// The client version, for flags and knobs that exist only in some versions; read
    /// from the image tag (`:vX.Y.Z`) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), regex(pattern = VERSION_PATTERN))]
    pub version: Option<String>,
    /// `--chain-state-db-size-mb`.
    #[serde(default = "default_nodeos_state_size")]
    #[schemars(range(min = 256))]
    pub chain_state_db_size_mb: i64,
    /// `--database-map-mode`; `heap` and `locked` use hugepages when the pod has them.
    #[serde(default)]
    pub database_map_mode: NodeosMapMode,
    /// config.ini keys to values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub config: BTreeMap<String, String>,
    /// HTTP port; the prometheus_plugin serves `/v1/prometheus/metrics` on it.
    #[serde(default = "default_nodeos_http_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub http_port: i32,
}

fn default_nodeos_state_size() -> i64 {
    1024
}
fn default_nodeos_http_port() -> i32 {
    8888
}

#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum NodeosMapMode {
    #[default]
    Mapped,
    MappedPrivate,
    Heap,
    Locked,
}
