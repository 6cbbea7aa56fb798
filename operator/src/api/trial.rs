//! `ValidatorTrial`: one point of an experiment's sweep, self-contained (it holds the
//! resolved template), owning its pod and volumes. Its status holds the results.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::settings::{MetricsSettings, TrialSettings};
use super::sweep::TrialPoint;
use super::template::ValidatorTemplate;

/// One run of a validator at one point of a sweep. Created by the operator; the spec is
/// written once, at creation.
// clippy reads the repeated `type_ = ...` of printcolumn(...) as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "valtune.dev",
    version = "v1alpha1",
    kind = "ValidatorTrial",
    namespaced,
    shortname = "vtrial",
    category = "valtune",
    status = "ValidatorTrialStatus",
    doc = "One run of a validator at one point of an experiment's sweep",
    // Counts are `integer` (the API server truncates the figure: apiextensions-apiserver
    // v0.34.2 pkg/registry/customresource/tableconvertor/tableconvertor.go,
    // cellForJSONValue) so kubectl prints them whole; kubectl prints a `number` with Go's
    // %v, which turns a million into 1e+06 (cli-runtime v0.34.2 pkg/printers/tableprinter.go).
    // TPS counts transactions: whole here, to two decimals in `valtune report`.
    printcolumn(name = "Point", type_ = "string", json_path = ".status.point"),
    printcolumn(name = "Rep", type_ = "integer", json_path = ".spec.repetition"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Outcome", type_ = "string", json_path = ".status.outcome"),
    printcolumn(
        name = "Avg TPS",
        type_ = "integer",
        json_path = ".status.results.avgTps"
    ),
    printcolumn(
        name = "0 TPS s",
        type_ = "integer",
        json_path = ".status.results.zeroTpsSeconds"
    ),
    printcolumn(
        name = "Max TPS",
        type_ = "integer",
        json_path = ".status.results.maxTps"
    ),
    printcolumn(
        name = "Max RSS GiB",
        type_ = "number",
        json_path = ".status.results.maxRssGiB"
    ),
    // Slots or blocks behind (the client's unit): what decides KeptUp or FellBehind.
    printcolumn(
        name = "Max Lag",
        type_ = "integer",
        json_path = ".status.results.maxLag"
    ),
    // `-o wide`: the share of the window Prometheus scraped (0 to 1).
    printcolumn(
        name = "Coverage",
        type_ = "number",
        json_path = ".status.results.coverage",
        priority = 1
    ),
    // `-o wide`: the paper's Figure 12 for an Agave trial (docs/clients/agave.md).
    printcolumn(
        name = "Misses/Batch",
        type_ = "number",
        json_path = ".status.results.figures.programCacheMissesPerBatch",
        priority = 1
    ),
    printcolumn(
        name = "Evictions/Batch",
        type_ = "number",
        json_path = ".status.results.figures.programCacheEvictionsPerBatch",
        priority = 1
    ),
    // kubectl upper-cases names (cli-runtime v0.34.2 pkg/printers/tableprinter.go), and
    // µ would become the Greek capital Μ, read as "MS": usec.
    printcolumn(
        name = "PC usec/Batch",
        type_ = "integer",
        json_path = ".status.results.figures.programCacheTimeUsPerBatch",
        priority = 1
    ),
    printcolumn(
        name = "P50 ms",
        type_ = "number",
        json_path = ".status.results.figures.blockProcessingP50Ms",
        priority = 1
    ),
    printcolumn(
        name = "P95 ms",
        type_ = "number",
        json_path = ".status.results.figures.blockProcessingP95Ms",
        priority = 1
    ),
    printcolumn(
        name = "P99 ms",
        type_ = "number",
        json_path = ".status.results.figures.blockProcessingP99Ms",
        priority = 1
    ),
    // `-o wide`: the chain's load in the window (Besu), to compare windows.
    printcolumn(
        name = "Tx/Block",
        type_ = "integer",
        json_path = ".status.results.figures.txPerBlock",
        priority = 1
    ),
    printcolumn(
        name = "Node",
        type_ = "string",
        json_path = ".status.nodeName",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    // Why the trial is where it is; for a finished one, why it ended. Last, as
    // `kubectl get events` puts its message: it is the long one.
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".status.message"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ValidatorTrialSpec {
    /// The experiment this trial belongs to.
    pub experiment: String,
    /// The swept values of this trial.
    pub point: TrialPoint,
    /// Which repetition of the point this is (1-based).
    pub repetition: i32,
    /// The experiment's template with the point applied.
    pub template: ValidatorTemplate,
    /// How the trial runs (copied from the experiment at creation).
    pub settings: TrialSettings,
    /// Where results come from (copied from the experiment at creation).
    pub metrics: MetricsSettings,
    /// The pair it runs in, side by side with its partner (a paired comparison).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<TrialPair>,
}

/// A trial of a pair: started in the same pass as its partner, on a matched node.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrialPair {
    /// Which side it is.
    pub role: PairRole,
    /// The partner trial's name.
    pub partner: String,
}

/// The side of a pair a trial is on. In an A/A pair both run the baseline point.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PairRole {
    Baseline,
    Candidate,
}

impl PairRole {
    pub fn other(self) -> PairRole {
        match self {
            PairRole::Baseline => PairRole::Candidate,
            PairRole::Candidate => PairRole::Baseline,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PairRole::Baseline => "baseline",
            PairRole::Candidate => "candidate",
        }
    }
}

/// Where a trial is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum TrialPhase {
    /// Created; the pod is not applied yet.
    #[default]
    Pending,
    /// The pod exists and waits for a node.
    Scheduling,
    /// Bootstrapping and catching up to the chain.
    WarmingUp,
    /// Inside the measurement window.
    Measuring,
    /// The window ended; waiting for Prometheus to scrape past it, then reading results.
    Collecting,
    /// Finished with a measured outcome.
    Succeeded,
    /// Finished without a measurement.
    Failed,
}

impl TrialPhase {
    pub fn is_finished(self) -> bool {
        matches!(self, TrialPhase::Succeeded | TrialPhase::Failed)
    }
}

/// How a trial ended. KeptUp, FellBehind, OOMKilled and Aborted are measurements (phase
/// Succeeded); the rest mean the trial measured nothing usable (phase Failed).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TrialOutcome {
    KeptUp,
    FellBehind,
    OOMKilled,
    Aborted,
    Crashed,
    Unschedulable,
    TimedOut,
    NodeLost,
    /// The node lacks what the client needs (open files, kernel settings): the client's
    /// preflight check says what.
    NodeNotPrepared,
    MetricsUnavailable,
    /// Prometheus could not be read for longer than trial.collectionDeadline while the
    /// trial warmed up or measured: nothing could be judged.
    Unobserved,
    /// The trial cannot run as written: its pod cannot be rendered, or the API server
    /// refused one of its objects (the message quotes why).
    Invalid,
}

impl TrialOutcome {
    /// Whether the outcome carries a measurement (and counts as a result, not a failure).
    pub fn is_result(self) -> bool {
        matches!(
            self,
            TrialOutcome::KeptUp
                | TrialOutcome::FellBehind
                | TrialOutcome::OOMKilled
                | TrialOutcome::Aborted
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TrialOutcome::KeptUp => "KeptUp",
            TrialOutcome::FellBehind => "FellBehind",
            TrialOutcome::OOMKilled => "OOMKilled",
            TrialOutcome::Aborted => "Aborted",
            TrialOutcome::Crashed => "Crashed",
            TrialOutcome::Unschedulable => "Unschedulable",
            TrialOutcome::TimedOut => "TimedOut",
            TrialOutcome::NodeLost => "NodeLost",
            TrialOutcome::NodeNotPrepared => "NodeNotPrepared",
            TrialOutcome::MetricsUnavailable => "MetricsUnavailable",
            TrialOutcome::Unobserved => "Unobserved",
            TrialOutcome::Invalid => "Invalid",
        }
    }
}

/// Observed state of a trial. Every deadline is a timestamp here, so a restarted operator
/// resumes each trial exactly where it was.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidatorTrialStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub phase: TrialPhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<TrialOutcome>,
    /// The point, readable (for `kubectl get`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<String>,
    /// Why the trial is where it is, for humans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The node the current attempt's pod runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Attempts started so far (retries after NodeLost or Unschedulable add one).
    #[serde(default)]
    pub attempts: i32,
    /// Nodes lost by earlier attempts (a retry avoids them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_nodes: Vec<String>,
    /// Earlier attempts and how they ended (at most 1 + trial.retries entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous_attempts: Vec<AttemptRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_since: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When the validator first said how far behind it is (its RPC answered: the snapshot
    /// was downloaded and loaded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answering_at: Option<Time>,
    /// When it processed its first transaction (for windows from its first execution).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_execution_at: Option<Time>,
    /// When the validator caught up with the chain (warm-up ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caught_up_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_end: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// How far behind the chain the validator was when last looked at while warming up
    /// (refreshed every few minutes, not every scrape).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<LagReading>,
    /// Prometheus' first sample of the pod (its first scrape). The warm-up limit counts
    /// from here: the time before Prometheus could see the pod is not held against the
    /// validator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_scraped_at: Option<Time>,
    /// Since when Prometheus has been unreachable or failing for this trial (while it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blind_since: Option<Time>,
    /// Seconds Prometheus could not be read while the trial warmed up or measured: the
    /// warm-up deadline and the window's end were moved by as much.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub blind_seconds: f64,
    /// The `valtune.dev/collect` annotation value last acted on (collect again when it
    /// changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collected_for: Option<String>,
    /// Collection attempts that found no data yet.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub collect_attempts: i32,
    /// While collection waits, past its first half-minute, for Prometheus to receive the
    /// window's samples (a metrics agent re-sending its backlog after an outage): the
    /// newest sample seen and when it last advanced. It waits while they keep arriving,
    /// up to trial.collectionDeadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<Arrivals>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<TrialResults>,
    /// Why the trial ended early as FellBehind (trial.earlyAbort): the rule and the
    /// figures that decided it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early_abort: Option<EarlyAbort>,
}

/// What collection has seen of the window's samples arriving.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Arrivals {
    /// The newest sample of the pod Prometheus has (pushed ones when the client pushes),
    /// if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<Time>,
    /// When `newest` last moved forward.
    pub advanced_at: Time,
}

/// The rule of trial.earlyAbort that ended a trial.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum EarlyAbortRule {
    /// The lag's slope had a 95% lower bound above zero that would end the window behind.
    LagGrowing,
    /// The lag was past earlyAbort.maxLag.
    PastMaxLag,
    /// Catching up at the rate shown while warming up would outlast the window.
    CannotCatchUp,
}

/// The figures an early abort was decided on, at the last of its checks. Rates are per
/// hour, in the client's unit.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EarlyAbort {
    pub rule: EarlyAbortRule,
    /// The moment of the last check (the window ends here).
    pub at: Time,
    /// Consecutive checks the rule held at.
    pub checks: i32,
    /// How far behind the validator was (slots or blocks).
    pub lag: f64,
    pub unit: String,
    /// Seconds the window had left.
    pub seconds_left: f64,
    /// The least-squares slope of the lag over earlyAbort.window, and its one-sided 95%
    /// lower confidence bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slope_per_hour: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slope_lower_per_hour: Option<f64>,
    /// The lag at the window's end if it grew at the lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projected_lag: Option<f64>,
    /// The best rate it caught up at while warming up, and the seconds catching up from
    /// here would take at it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up_per_hour: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up_seconds: Option<f64>,
}

/// A reading of how far behind the chain the validator is.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LagReading {
    pub value: f64,
    /// slots or blocks.
    pub unit: String,
    pub at: Time,
}

/// An attempt that ended without finishing the trial (it was retried).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptRecord {
    pub attempt: i32,
    pub outcome: TrialOutcome,
    /// When its validator started (unset if it never did): the node-hours it held count
    /// from here to `endedAt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub message: String,
    pub ended_at: Time,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

fn is_zero_f64(n: &f64) -> bool {
    *n == 0.0
}

/// What the trial measured over its window, computed by Prometheus (server-side
/// aggregation) with the paper's definitions (docs/metrics.md).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrialResults {
    /// Mean TPS over the window, excluding samples above 3x the mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_tps: Option<f64>,
    /// Highest TPS sample, outliers included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tps: Option<f64>,
    /// Seconds of the window at zero TPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_tps_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "maxRssGiB")]
    pub max_rss_gib: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "meanRssGiB"
    )]
    pub mean_rss_gib: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "maxVszGiB")]
    pub max_vsz_gib: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_faults_per_second: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor_faults_per_second: Option<f64>,
    /// The most the validator was behind the chain in the window (slots or blocks: the
    /// client's unit, docs/clients.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lag: Option<f64>,
    /// How far behind it was at the window's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_lag: Option<f64>,
    /// Seconds from the validator's first answer to caught up (replaying to the tip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up_seconds: Option<f64>,
    /// Seconds from the pod's start to the validator's first answer (downloading and
    /// loading a snapshot, or opening its state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_seconds: Option<f64>,
    /// The share of the window Prometheus scraped the pod (0 to 1): the figures describe
    /// that part only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<f64>,
    /// Seconds actually measured (shorter than the window when the pod died in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_seconds: Option<f64>,
    /// Whether the validator kept up with the chain through the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_up: Option<bool>,
    /// Figures only the trial's client has, by name (docs/clients.md lists them).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub figures: BTreeMap<String, f64>,
    /// Series of the client's profile with no datapoint in the window: the figures they
    /// back are missing (unset), never zero (condition Complete says why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub missing: Vec<String>,
    /// Where the validator's snapshot came from, as it reported its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotStart>,
}

/// How the validator got the snapshot it started from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotStart {
    pub source: SnapshotSource,
    /// Seconds the validator reported spending on fetching its start (Agave's and
    /// Frankendancer's `bootstrap-snapshot-download` datapoint,
    /// `snapshot_download_time_secs`), or full Firedancer's seconds reading the full
    /// snapshot over HTTP (its snapct tile's state, as scraped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_seconds: Option<f64>,
    /// Started from a local snapshot: the download seconds of the experiment's trials
    /// that downloaded theirs (their mean), less its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_seconds: Option<f64>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SnapshotSource {
    /// A snapshot a trial before it left on the node.
    Local,
    /// Downloaded from the cluster.
    Downloaded,
}

impl SnapshotStart {
    /// Below this many seconds nothing was downloaded: with a local snapshot Agave's
    /// bootstrap fetches only the genesis (kilobytes to a few MB) and asks one RPC node
    /// for its slot; a mainnet snapshot (tens of GB) takes many minutes at any link
    /// speed a validator has.
    pub const LOCAL_MAX_S: f64 = 60.0;

    /// Judged from the seconds the validator reported, and what the downloads of the
    /// experiment cost (`reference`): local at most `local_max_s` (the client's: what a
    /// start from a local snapshot still reports: [`Self::LOCAL_MAX_S`] for Agave's
    /// genesis fetch).
    pub fn judge(download_seconds: f64, reference: Option<f64>, local_max_s: f64) -> SnapshotStart {
        Self::of(download_seconds <= local_max_s, download_seconds, reference)
    }

    /// From where the client says its snapshot came from (`local`), the seconds it
    /// reported, and what the downloads of the experiment cost (`reference`).
    pub fn of(local: bool, download_seconds: f64, reference: Option<f64>) -> SnapshotStart {
        SnapshotStart {
            source: if local {
                SnapshotSource::Local
            } else {
                SnapshotSource::Downloaded
            },
            download_seconds: Some(download_seconds),
            saved_seconds: reference
                .filter(|_| local)
                .map(|r| ((r - download_seconds).max(0.0) * 100.0).round() / 100.0),
        }
    }
}

impl TrialResults {
    /// A client-specific figure.
    pub fn figure(&self, name: &str) -> Option<f64> {
        self.figures.get(name).copied()
    }
}
