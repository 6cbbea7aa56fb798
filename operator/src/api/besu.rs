//! Hyperledger Besu: the settings of a trial.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::version::VERSION_PATTERN;

/// Hyperledger Besu (execution client).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BesuSpec {
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// The client version, for flags and knobs that exist only in some versions; read
    /// from the image tag (`:vX.Y.Z`) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), regex(pattern = VERSION_PATTERN))]
    pub version: Option<String>,
    /// `--network`.
    #[serde(default = "default_besu_network")]
    #[schemars(length(min = 1, max = 64))]
    pub network: String,
    /// `--data-storage-format`.
    #[serde(default)]
    pub data_storage_format: BesuStorageFormat,
    /// `BESU_OPTS`, e.g. `-Xmx8g`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub jvm_options: Option<String>,
    /// Config file keys (besu.toml) to TOML values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub config: BTreeMap<String, String>,
    /// `--metrics-port` (served on 0.0.0.0; Besu's default host is loopback-only).
    #[serde(default = "default_besu_metrics_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub metrics_port: i32,
}

fn default_besu_network() -> String {
    "mainnet".into()
}
fn default_besu_metrics_port() -> i32 {
    9545
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BesuStorageFormat {
    #[default]
    Bonsai,
    Forest,
}
