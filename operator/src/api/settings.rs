//! How each trial runs (warm-up, measurement, abort rules, retries) and where its metrics
//! come from. Experiments hold these; each trial keeps a copy so it is self-contained.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Go-style durations, as CEL's `duration()` reads them.
pub const DURATION_PATTERN: &str = r"^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+$";

fn duration_rule() -> kube::core::Rule {
    kube::core::Rule::new(format!(
        "self.matches('{DURATION_PATTERN}') && duration(self) > duration('0s')"
    ))
    .message("must be a positive duration such as 90s, 30m or 12h")
}

/// How each trial runs.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrialSettings {
    /// How many times each point of the sweep runs.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 16))]
    pub repetitions: i32,
    /// Bootstrapping and catching up to the chain, before measurement starts.
    #[serde(default)]
    pub warmup: WarmupSettings,
    /// The measurement window that follows warm-up.
    #[serde(default)]
    pub measurement: MeasurementSettings,
    /// How long a trial's pod may stay unschedulable before the trial ends Unschedulable.
    #[serde(default = "default_scheduling_timeout")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = duration_rule())]
    pub scheduling_timeout: String,
    /// How many times a trial that lost its node or could not be scheduled starts again.
    #[serde(default = "default_retries")]
    #[schemars(range(min = 0, max = 10))]
    pub retries: i32,
    /// End a trial as Aborted when a metric stays beyond a bound (checked while measuring).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub abort_when: Vec<AbortRule>,
    /// Keep a finished trial's stopped pod this long (for its logs), then delete it; its
    /// volumes stay bound until then. Unset or 0: pod and volumes are deleted at once. The
    /// results stay in the trial either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2_592_000))]
    pub ttl_seconds_after_finished: Option<i32>,
}

fn one() -> i32 {
    1
}
fn default_retries() -> i32 {
    2
}
fn default_scheduling_timeout() -> String {
    "10m".into()
}

/// Reads a Go-style duration ("90s", "1h30m"). The schema admits only valid ones, so an
/// error here means the object bypassed validation.
pub fn parse_duration(value: &str) -> Result<std::time::Duration, DurationError> {
    let parsed: kube::core::Duration = value.parse().map_err(|_| DurationError(value.into()))?;
    if parsed.is_negative() {
        return Err(DurationError(value.into()));
    }
    Ok(parsed.into())
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a duration such as 90s, 30m or 12h")]
pub struct DurationError(pub String);

impl Default for TrialSettings {
    fn default() -> Self {
        Self {
            repetitions: 1,
            warmup: WarmupSettings::default(),
            measurement: MeasurementSettings::default(),
            scheduling_timeout: default_scheduling_timeout(),
            retries: default_retries(),
            abort_when: Vec::new(),
            ttl_seconds_after_finished: None,
        }
    }
}

/// Warm-up: from pod start until the validator has caught up with the chain.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct WarmupSettings {
    /// The longest warm-up allowed; a trial that has not caught up by then ends TimedOut.
    #[serde(default = "default_warmup_timeout")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = duration_rule())]
    pub timeout: String,
    /// The validator has caught up once its slot lag is at most this many slots.
    #[serde(default = "default_max_slot_lag")]
    #[schemars(range(min = 0, max = 1_000_000))]
    pub max_slot_lag: i64,
}

fn default_warmup_timeout() -> String {
    "4h".into()
}
fn default_max_slot_lag() -> i64 {
    100
}

impl Default for WarmupSettings {
    fn default() -> Self {
        Self {
            timeout: default_warmup_timeout(),
            max_slot_lag: default_max_slot_lag(),
        }
    }
}

/// The measurement window.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MeasurementSettings {
    /// Length of the window (the paper ran 12 hours).
    #[serde(default = "default_measurement")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = duration_rule())]
    pub duration: String,
}

fn default_measurement() -> String {
    "12h".into()
}

impl Default for MeasurementSettings {
    fn default() -> Self {
        Self {
            duration: default_measurement(),
        }
    }
}

/// A bound on a metric that ends the trial when crossed for long enough.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.above) != has(self.below)")
    .message("set exactly one of above or below"))]
pub struct AbortRule {
    pub metric: AbortMetric,
    /// Abort when the metric stays above this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above: Option<f64>,
    /// Abort when the metric stays below this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub below: Option<f64>,
    /// How long the bound must be crossed without a break.
    #[serde(rename = "for")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = duration_rule())]
    pub for_: String,
}

/// Metrics an abort rule can watch, read through the client's metric profile.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AbortMetric {
    SlotLag,
    Tps,
    RssBytes,
    MajorFaultsPerSecond,
}

/// Where results come from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsSettings {
    /// Prometheus base URL; defaults to the operator's `--prometheus-url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    #[x_kube(validation = Rule::new("isURL(self) && (url(self).getScheme() == 'http' || url(self).getScheme() == 'https')")
        .message("must be an http(s) URL such as http://prometheus-operated.monitoring:9090"))]
    pub prometheus_url: Option<String>,
    /// The interval Prometheus scrapes trial pods at; rates use windows of a few intervals,
    /// and results are read once Prometheus has scraped past the window's end.
    #[serde(default = "default_scrape_interval")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = duration_rule())]
    pub scrape_interval: String,
    /// Create a PodMonitor (prometheus-operator) that selects the experiment's pods.
    #[serde(default = "yes")]
    pub pod_monitor: bool,
    /// PromQL per result name, replacing the client profile's query. `$selector` stands
    /// for the trial pod's label matchers and `$rate` for the rate window.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub queries: BTreeMap<String, String>,
}

fn default_scrape_interval() -> String {
    "15s".into()
}
fn yes() -> bool {
    true
}

impl Default for MetricsSettings {
    fn default() -> Self {
        Self {
            prometheus_url: None,
            scrape_interval: default_scrape_interval(),
            pod_monitor: true,
            queries: BTreeMap::new(),
        }
    }
}
