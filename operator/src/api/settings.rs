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
    /// End a trial early as FellBehind when, after it caught up, its lag grows at a rate
    /// it cannot recover from before its window ends (docs/concepts.md, "Early abort").
    /// A trial is never accepted early.
    #[serde(default)]
    pub early_abort: EarlyAbortSettings,
    /// Keep a finished trial's stopped pod this long (for its logs), then delete it; its
    /// volumes stay bound until then. Unset or 0: pod and volumes are deleted at once. The
    /// results stay in the trial either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 2_592_000))]
    pub ttl_seconds_after_finished: Option<i32>,
    /// How long a trial waits for an unreachable (or failing) Prometheus before it ends
    /// without results. Generous: a Prometheus restart, upgrade or OOM kill must not throw
    /// away hours of measurement whose samples are still in its storage.
    #[serde(default = "default_collection_deadline")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = duration_rule())]
    pub collection_deadline: String,
}

fn default_collection_deadline() -> String {
    "24h".into()
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

/// A duration as people write it (and `parse_duration` reads it): "12h", "1h30m", "10m",
/// "45s", to the second.
pub fn human(d: std::time::Duration) -> String {
    let s = d.as_secs();
    let (h, m, sec) = (s / 3600, s % 3600 / 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if sec > 0 || out.is_empty() {
        out.push_str(&format!("{sec}s"));
    }
    out
}

impl Default for TrialSettings {
    fn default() -> Self {
        Self {
            repetitions: 1,
            warmup: WarmupSettings::default(),
            measurement: MeasurementSettings::default(),
            scheduling_timeout: default_scheduling_timeout(),
            retries: default_retries(),
            abort_when: Vec::new(),
            early_abort: EarlyAbortSettings::default(),
            ttl_seconds_after_finished: None,
            collection_deadline: default_collection_deadline(),
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
    /// The validator has caught up (and, at the window's end, kept up) while it is at
    /// most this far behind the chain, in the client's unit: slots for Agave and
    /// Firedancer, blocks for Besu and nodeos. Unset: the client's default
    /// (docs/clients.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1_000_000))]
    pub max_lag: Option<i64>,
}

fn default_warmup_timeout() -> String {
    "4h".into()
}

impl Default for WarmupSettings {
    fn default() -> Self {
        Self {
            timeout: default_warmup_timeout(),
            max_lag: None,
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
    /// Where the window starts: `caughtUp` (once the validator is within
    /// `warmup.maxLag` of the chain: steady-state figures), or `firstExecution` (at the first
    /// transaction it processes, catch-up included and snapshot download excluded: how the
    /// paper measured).
    #[serde(default)]
    pub from: WindowStart,
}

/// Where a measurement window starts.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum WindowStart {
    #[default]
    CaughtUp,
    FirstExecution,
}

fn default_measurement() -> String {
    "12h".into()
}

impl Default for MeasurementSettings {
    fn default() -> Self {
        Self {
            duration: default_measurement(),
            from: WindowStart::default(),
        }
    }
}

/// Early abort of a doomed trial: judged while measuring, once it has caught up, at
/// `checks` moments `interval` apart (the last one now), each from Prometheus' lag series
/// of the client (its profile's slot or block lag). At each moment the trial must be
/// more than `warmup.maxLag` behind and doomed by the same rule: the least-squares slope
/// of its lag over the last `window` has a 95% lower confidence bound above zero that
/// would leave it past `warmup.maxLag` at the window's end; or its lag is past `maxLag`;
/// or catching up at the best rate it showed while warming up would take longer than
/// the window has left. The defaults suit 12-hour windows.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct EarlyAbortSettings {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Consecutive moments the trial must be doomed at.
    #[serde(default = "default_checks")]
    #[schemars(range(min = 1, max = 20))]
    pub checks: i32,
    /// Between two of those moments.
    #[serde(default = "default_early_interval")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = duration_rule())]
    pub interval: String,
    /// The recent stretch of the lag series the slope is fitted over.
    #[serde(default = "default_early_window")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = duration_rule())]
    pub window: String,
    /// No moment is judged before this share of the measurement window has passed.
    #[serde(default = "default_min_window_fraction")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_window_fraction: f64,
    /// A hard bound in the client's unit (slots or blocks): this far behind at every
    /// moment ends the trial whatever the slope. Unset: no hard bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100_000_000))]
    pub max_lag: Option<i64>,
}

fn default_checks() -> i32 {
    3
}
fn default_early_interval() -> String {
    "20m".into()
}
fn default_early_window() -> String {
    "1h".into()
}
fn default_min_window_fraction() -> f64 {
    0.1
}

impl Default for EarlyAbortSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            checks: default_checks(),
            interval: default_early_interval(),
            window: default_early_window(),
            min_window_fraction: default_min_window_fraction(),
            max_lag: None,
        }
    }
}

/// A bound on a metric that ends the trial when crossed for long enough.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.above) != has(self.below)")
    .message("set exactly one of above or below"))]
pub struct AbortRule {
    pub metric: QueryKey,
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

/// A series a client's metric profile defines (docs/metrics.md). Abort rules watch one,
/// and `metrics.queries` may replace any the client's profile has.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum QueryKey {
    /// Transactions per second.
    Tps,
    /// Slots behind the cluster (Solana clients).
    SlotLag,
    /// Blocks behind the chain's head (Besu, nodeos).
    BlockLag,
    RssBytes,
    VszBytes,
    MajorFaultsPerSecond,
    MinorFaultsPerSecond,
}

impl QueryKey {
    pub const ALL: [QueryKey; 7] = [
        QueryKey::Tps,
        QueryKey::SlotLag,
        QueryKey::BlockLag,
        QueryKey::RssBytes,
        QueryKey::VszBytes,
        QueryKey::MajorFaultsPerSecond,
        QueryKey::MinorFaultsPerSecond,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            QueryKey::Tps => "tps",
            QueryKey::SlotLag => "slotLag",
            QueryKey::BlockLag => "blockLag",
            QueryKey::RssBytes => "rssBytes",
            QueryKey::VszBytes => "vszBytes",
            QueryKey::MajorFaultsPerSecond => "majorFaultsPerSecond",
            QueryKey::MinorFaultsPerSecond => "minorFaultsPerSecond",
        }
    }
}

impl std::fmt::Display for QueryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

static QUERY_KEYS_RULE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let keys: Vec<String> = QueryKey::ALL.iter().map(|k| format!("'{k}'")).collect();
    format!("self.all(k, k in [{}])", keys.join(", "))
});

/// Where results come from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsSettings {
    /// Prometheus base URL; defaults to the operator's `--prometheus-url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    #[x_kube(validation = super::shapes::http_url("http://prometheus-operated.monitoring:9090"))]
    pub prometheus_url: Option<String>,
    /// Where clients that push their datapoints (Agave, through its vmagent sidecar)
    /// remote-write them; defaults to `<prometheusUrl>/api/v1/write`. Prometheus must run
    /// with its remote-write receiver on (`--web.enable-remote-write-receiver`;
    /// kube-prometheus-stack: `prometheus.prometheusSpec.enableRemoteWriteReceiver`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    #[x_kube(validation = super::shapes::http_url("http://prometheus-operated.monitoring:9090/api/v1/write"))]
    pub remote_write_url: Option<String>,
    /// The interval Prometheus scrapes trial pods at; rates use windows of a few intervals,
    /// and results are read once Prometheus has scraped past the window's end.
    #[serde(default = "default_scrape_interval")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = duration_rule())]
    pub scrape_interval: String,
    /// The least share of the window Prometheus must have scraped for a trial's figures to
    /// count as complete; below it the trial says so (condition Complete=False, and
    /// `valtune report`), so a gap is never taken for a quiet validator.
    #[serde(default = "default_min_coverage")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_coverage: f64,
    /// Create a PodMonitor (prometheus-operator) that selects the experiment's pods.
    #[serde(default = "yes")]
    pub pod_monitor: bool,
    /// Labels of the PodMonitor, so the cluster's Prometheus selects it: a
    /// kube-prometheus-stack Prometheus selects only PodMonitors labelled
    /// `release: <its release name>` by default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub pod_monitor_labels: BTreeMap<String, String>,
    /// PromQL per series of the client's profile, replacing the profile's query.
    /// `$selector` stands for the trial pod's label matchers and `$rate` for the rate
    /// window; keys are the profile's (tps, slotLag, rssBytes, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    #[x_kube(
        validation = Rule::new(QUERY_KEYS_RULE.as_str())
            .message("unknown query name: use one of tps, slotLag, blockLag, rssBytes, vszBytes, majorFaultsPerSecond, minorFaultsPerSecond (the client's profile says which it has)"),
        validation = Rule::new("self.all(k, self[k].contains('$selector'))")
            .message("every query must select the trial's pod with $selector, e.g. sum(my_metric{$selector})"),
    )]
    pub queries: BTreeMap<QueryKey, String>,
}

fn default_min_coverage() -> f64 {
    0.9
}

fn default_scrape_interval() -> String {
    "15s".into()
}
fn yes() -> bool {
    true
}

impl MetricsSettings {
    /// Where pushed datapoints are remote-written: `remoteWriteUrl`, else the receiver of
    /// `prometheusUrl`, else of the operator's default Prometheus; None without either.
    pub fn remote_write(&self, default_prometheus: Option<&str>) -> Option<String> {
        self.remote_write_url.clone().or_else(|| {
            self.prometheus_url
                .as_deref()
                .or(default_prometheus)
                .map(|u| format!("{}/api/v1/write", u.trim_end_matches('/')))
        })
    }
}

impl Default for MetricsSettings {
    fn default() -> Self {
        Self {
            prometheus_url: None,
            remote_write_url: None,
            scrape_interval: default_scrape_interval(),
            min_coverage: default_min_coverage(),
            pod_monitor: true,
            pod_monitor_labels: BTreeMap::new(),
            queries: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        use std::time::Duration;
        assert_eq!(human(Duration::from_secs(90 * 60)), "1h30m");
        assert_eq!(human(Duration::from_secs(36 * 3600)), "36h");
        assert_eq!(human(Duration::from_secs(45)), "45s");
        assert_eq!(human(Duration::ZERO), "0s");
        assert_eq!(
            parse_duration(&human(Duration::from_secs(5405))),
            Ok(Duration::from_secs(5405))
        );
    }

    #[test]
    fn remote_write_is_the_url_given_else_the_receiver_of_a_prometheus() {
        let mut m = MetricsSettings::default();
        assert_eq!(m.remote_write(None), None);
        assert_eq!(
            m.remote_write(Some("http://prom:9090/")).as_deref(),
            Some("http://prom:9090/api/v1/write")
        );
        m.prometheus_url = Some("http://mine:9090".into());
        assert_eq!(
            m.remote_write(Some("http://prom:9090")).as_deref(),
            Some("http://mine:9090/api/v1/write")
        );
        m.remote_write_url = Some("http://vm:8428/api/v1/write".into());
        assert_eq!(
            m.remote_write(Some("http://prom:9090")).as_deref(),
            Some("http://vm:8428/api/v1/write")
        );
    }
}
