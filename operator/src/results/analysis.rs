//! Trial results, computed by Prometheus over the measurement window with the paper's
//! definitions (seed 000, section 3.2.1; docs/metrics.md):
//! - a TPS sample is the client's per-second transaction rate at one scrape step;
//! - average TPS excludes samples above 3x the plain average ("outliers"), max TPS
//!   includes them;
//! - seconds at zero TPS are the zero samples times the step;
//! - memory and fault figures are the max or mean of their series over the window.
//!
//! Every figure is one instant query evaluated at the window's end over a subquery
//! `[W:S]` (W the window, S the scrape interval), so Prometheus does the aggregation.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;

use super::prometheus::{PromError, Prometheus};
use crate::api::settings::QueryKey;
use crate::api::trial::TrialResults;
use crate::clients::profile::{MetricProfile, series_of};

/// The label matchers of one pod's series (namespace and pod are the labels
/// prometheus-operator's PodMonitor relabelling puts on every target).
pub fn selector(namespace: &str, pod: &str) -> String {
    format!("namespace=\"{namespace}\",pod=\"{pod}\"")
}

/// PromQL durations are whole units; milliseconds keep any window exact.
pub fn promql_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// A profile query with its placeholders filled in: `$selector` (the pod's matchers),
/// `$rate` (three scrapes: two samples are always inside, whatever the jitter), `$step`
/// and `$stepSeconds` (one scrape interval).
pub fn expand(template: &str, selector: &str, step: Duration) -> String {
    template
        .replace("$selector", selector)
        .replace("$rate", &promql_duration(step * 3))
        .replace("$stepSeconds", &format!("{}", step.as_secs_f64()))
        .replace("$step", &promql_duration(step))
}

#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub start: Timestamp,
    pub end: Timestamp,
    /// The scrape interval: one TPS sample per step.
    pub step: Duration,
    /// When the pod started, for figures of its whole life (`$life`: what the client
    /// reported while starting, before the window), if known.
    pub life_start: Option<Timestamp>,
}

impl Window {
    pub fn length(&self) -> Duration {
        let span = self.end.duration_since(self.start);
        Duration::try_from(span).unwrap_or_default()
    }

    /// From the pod's start (else the window's) to the window's end, as a PromQL range.
    fn life(&self) -> String {
        let from = self.life_start.unwrap_or(self.start).min(self.start);
        let span = Duration::try_from(self.end.duration_since(from)).unwrap_or_default();
        promql_duration(span.max(self.step))
    }

    fn range(&self) -> String {
        // A window shorter than a step (a validator that died within its first second)
        // still reads one step: PromQL refuses an empty range.
        format!(
            "[{}:{}]",
            promql_duration(self.length().max(self.step)),
            promql_duration(self.step)
        )
    }
}

/// The instant queries for a window, by figure, for the series the profile has. `avgTps`
/// needs the plain average first (see [`avg_without_outliers`]).
pub fn result_queries(
    profile: &MetricProfile,
    selector: &str,
    w: &Window,
) -> BTreeMap<&'static str, String> {
    let r = w.range();
    let series = |k: QueryKey| profile.query(k).map(|q| expand(q, selector, w.step));
    let mut q = BTreeMap::new();
    if let Some(tps) = series(QueryKey::Tps) {
        q.insert("samples", format!("count_over_time(({tps}){r})"));
        q.insert("avgTpsAll", format!("avg_over_time(({tps}){r})"));
        q.insert("maxTps", format!("max_over_time(({tps}){r})"));
        q.insert(
            "zeroTpsSamples",
            format!("count_over_time((({tps}) == 0){r})"),
        );
    }
    if let Some(rss) = series(QueryKey::RssBytes) {
        q.insert("maxRss", format!("max_over_time(({rss}){r})"));
        q.insert("meanRss", format!("avg_over_time(({rss}){r})"));
    }
    if let Some(vsz) = series(QueryKey::VszBytes) {
        q.insert("maxVsz", format!("max_over_time(({vsz}){r})"));
    }
    if let Some(f) = series(QueryKey::MajorFaultsPerSecond) {
        q.insert("majorFaults", format!("avg_over_time(({f}){r})"));
    }
    if let Some(f) = series(QueryKey::MinorFaultsPerSecond) {
        q.insert("minorFaults", format!("avg_over_time(({f}){r})"));
    }
    if let Some(lag) = series(profile.lag) {
        q.entry("samples")
            .or_insert_with(|| format!("count_over_time(({lag}){r})"));
        q.insert("maxLag", format!("max_over_time(({lag}){r})"));
        q.insert("finalLag", format!("last_over_time(({lag}){r})"));
    }
    q
}

/// Mean TPS without the samples above 3x the mean (the paper's outliers).
pub fn avg_without_outliers(tps: &str, w: &Window, plain_mean: f64) -> String {
    format!(
        "avg_over_time((({tps}) <= {}){})",
        3.0 * plain_mean,
        w.range()
    )
}

/// Figures in status are rounded to two decimals (printer columns stay readable).
pub fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Reads the results of a window. None when Prometheus has no samples in it (not
/// scraped yet, or the pod never served metrics). `max_lag`: kept up at or below it.
pub async fn collect(
    prom: &Prometheus,
    profile: &MetricProfile,
    selector: &str,
    w: &Window,
    max_lag: f64,
) -> Result<Option<TrialResults>, PromError> {
    let q = result_queries(profile, selector, w);
    let at = Some(w.end);
    let Some(samples) = q.get("samples") else {
        return Ok(None);
    };
    if prom.value(samples, at).await?.unwrap_or(0.0) < 1.0 {
        return Ok(None);
    }
    let mut v = BTreeMap::new();
    for (name, query) in &q {
        v.insert(*name, prom.value(query, at).await?);
    }
    // A figure with no datapoint behind it is missing, never 0: Agave's TPS reads zero at
    // a step without datapoints while the pod is scraped (`or vector(0)`), which without
    // any datapoint at all (no remote-write receiver) would be a silent 0 for the window.
    let missing = missing_series(prom, profile, selector, w).await?;
    let absent = |key: QueryKey| {
        profile
            .query(key)
            .is_some_and(|q| series_of(q).iter().any(|s| missing.contains(s)))
    };
    for (key, figures) in KEY_FIGURES {
        if absent(key) {
            for f in figures {
                v.remove(f);
            }
        }
    }
    let lag_missing = absent(profile.lag);
    if lag_missing {
        for f in ["maxLag", "finalLag"] {
            v.remove(f);
        }
    }
    let get = |k: &str| v.get(k).copied().flatten();
    let avg = match profile
        .query(QueryKey::Tps)
        .filter(|_| !absent(QueryKey::Tps))
    {
        Some(t) => {
            let tps = expand(t, selector, w.step);
            let plain_mean = get("avgTpsAll").unwrap_or(0.0);
            prom.value(&avg_without_outliers(&tps, w, plain_mean), at)
                .await?
        }
        None => None,
    };
    let step = w.step.as_secs_f64();
    let final_lag = get("finalLag");
    Ok(Some(TrialResults {
        avg_tps: avg.map(round2),
        max_tps: get("maxTps").map(round2),
        // No zero samples is an empty result, not missing data (unless TPS itself is).
        zero_tps_seconds: (q.contains_key("zeroTpsSamples") && !absent(QueryKey::Tps))
            .then(|| round2(get("zeroTpsSamples").unwrap_or(0.0) * step)),
        max_rss_gib: get("maxRss").map(gib2),
        mean_rss_gib: get("meanRss").map(gib2),
        max_vsz_gib: get("maxVsz").map(gib2),
        major_faults_per_second: get("majorFaults").map(round2),
        minor_faults_per_second: get("minorFaults").map(round2),
        max_lag: get("maxLag").map(round2),
        final_lag: final_lag.map(round2),
        catch_up_seconds: None,
        startup_seconds: None,
        coverage: coverage(prom, selector, w).await?,
        measured_seconds: Some(round2(w.length().as_secs_f64())),
        kept_up: final_lag.map(|lag| lag <= max_lag),
        figures: figures(prom, profile, selector, w).await?,
        missing: missing.into_iter().collect(),
        snapshot: None,
    }))
}

/// The window's results each query key's series back (see [`result_queries`]).
const KEY_FIGURES: [(QueryKey, &[&str]); 5] = [
    (QueryKey::Tps, &["avgTpsAll", "maxTps", "zeroTpsSamples"]),
    (QueryKey::RssBytes, &["maxRss", "meanRss"]),
    (QueryKey::VszBytes, &["maxVsz"]),
    (QueryKey::MajorFaultsPerSecond, &["majorFaults"]),
    (QueryKey::MinorFaultsPerSecond, &["minorFaults"]),
];

/// The series the profile's queries read, and its remote-written ones, that have no
/// datapoint of the pod in the window.
async fn missing_series(
    prom: &Prometheus,
    profile: &MetricProfile,
    selector: &str,
    w: &Window,
) -> Result<std::collections::BTreeSet<String>, PromError> {
    let mut names: std::collections::BTreeSet<String> = profile
        .queries
        .values()
        .flat_map(|q| series_of(q))
        .collect();
    // Remote-written figures (Besu's block times) as well: they are what the trial is for.
    names.extend(profile.remote_written_figure_series());
    let range = promql_duration(w.length().max(w.step));
    let mut missing = std::collections::BTreeSet::new();
    for name in names {
        let q = format!("sum(count_over_time({name}{{{selector}}}[{range}]))");
        if prom.value(&q, Some(w.end)).await?.unwrap_or(0.0) < 1.0 {
            missing.insert(name);
        }
    }
    Ok(missing)
}

/// The share of the window Prometheus scraped the pod: the samples of `up` per target
/// over the ones a scrape every step would give. Raw samples, not instant lookups, so a
/// Prometheus outage (no samples at all) counts as missing.
async fn coverage(prom: &Prometheus, selector: &str, w: &Window) -> Result<Option<f64>, PromError> {
    let range = promql_duration(w.length());
    let q = format!(
        "sum(count_over_time(up{{{selector}}}[{range}])) / count(count_over_time(up{{{selector}}}[{range}]))"
    );
    let expected = (w.length().as_secs_f64() / w.step.as_secs_f64())
        .floor()
        .max(1.0);
    Ok(prom
        .value(&q, Some(w.end))
        .await?
        .map(|per_target| round2((per_target / expected).min(1.0))))
}

/// The client's own figures over the window.
async fn figures(
    prom: &Prometheus,
    profile: &MetricProfile,
    selector: &str,
    w: &Window,
) -> Result<BTreeMap<String, f64>, PromError> {
    let mut out = BTreeMap::new();
    for f in &profile.figures {
        let q = expand(
            &f.query
                .replace("$range", &w.range())
                .replace("$life", &w.life())
                .replace("$window", &promql_duration(w.length().max(w.step))),
            selector,
            w.step,
        );
        if let Some(v) = prom.value(&q, Some(w.end)).await?
            && v.is_finite()
        {
            out.insert(f.name.to_string(), round2(v * f.scale));
        }
    }
    Ok(out)
}

fn gib2(bytes: f64) -> f64 {
    round2(bytes / (1u64 << 30) as f64)
}

/// The pod's scrapes in the three steps before `end`, and between `end` and `now`: whether
/// the end of a window was observed, and whether the pod has been seen since.
pub async fn scrapes_around(
    prom: &Prometheus,
    selector: &str,
    end: Timestamp,
    now: Timestamp,
    step: Duration,
) -> Result<(f64, f64), PromError> {
    let before = format!(
        "sum(count_over_time(up{{{selector}}}[{}]))",
        promql_duration(step * 3)
    );
    let since = Duration::try_from(now.duration_since(end))
        .unwrap_or_default()
        .max(Duration::from_secs(1));
    let after = format!(
        "sum(count_over_time(up{{{selector}}}[{}]))",
        promql_duration(Duration::from_secs(since.as_secs().max(1)))
    );
    Ok((
        prom.value(&before, Some(end)).await?.unwrap_or(0.0),
        prom.value(&after, Some(now)).await?.unwrap_or(0.0),
    ))
}

/// PromQL for the first moment in `[since, now]` at which `condition` (an expression that
/// keeps only the samples meeting it, e.g. `(lag) <= 120`) held, one evaluation per `step`:
/// the earliest timestamp among the steps where it held.
pub fn first_time_query(
    condition: &str,
    since: Timestamp,
    now: Timestamp,
    step: Duration,
) -> String {
    let span = Duration::try_from(now.duration_since(since)).unwrap_or_default();
    format!(
        "min_over_time(timestamp({condition})[{}:{}])",
        promql_duration(span.max(step)),
        promql_duration(step)
    )
}

/// When `condition` first held in `[since, now]`, read from Prometheus' samples (so the
/// answer does not depend on when the operator looked), to the second.
pub async fn first_time(
    prom: &Prometheus,
    condition: &str,
    since: Timestamp,
    now: Timestamp,
    step: Duration,
) -> Result<Option<Timestamp>, PromError> {
    let q = first_time_query(condition, since, now, step);
    Ok(prom
        .value(&q, Some(now))
        .await?
        .and_then(|t| Timestamp::from_second(t.floor() as i64).ok()))
}

/// The newest remote-written sample of `series` Prometheus has. Samples are pushed
/// roughly in order (Agave flushes every 10 s; vmagent's queues, twice the node's cores
/// by default, may overtake one another by about a flush interval, and it re-sends a
/// backlog oldest first), so once one past the window's end is in, the window's are in
/// or about to be.
pub async fn newest_pushed(
    prom: &Prometheus,
    series: &[String],
    selector: &str,
) -> Result<Option<Timestamp>, PromError> {
    newest(prom, &pushed_since_query(series, selector)).await
}

/// `timestamp()` drops the metric name, and two series that differ only in it are then
/// one labelset, which Prometheus refuses ("vector cannot contain metrics with the same
/// labelset", prometheus/prometheus#11397): the name is copied to a label first.
fn pushed_since_query(series: &[String], selector: &str) -> String {
    let names = series.join("|");
    format!(
        "max(timestamp(label_replace({{__name__=~\"{names}\",{selector}}}, \"valtune_series\", \"$1\", \"__name__\", \"(.+)\")))"
    )
}

/// Prometheus' newest scrape of the pod.
pub async fn newest_scrape(
    prom: &Prometheus,
    selector: &str,
) -> Result<Option<Timestamp>, PromError> {
    newest(prom, &format!("max(timestamp(up{{{selector}}}))")).await
}

async fn newest(prom: &Prometheus, query: &str) -> Result<Option<Timestamp>, PromError> {
    Ok(prom
        .value(query, None)
        .await?
        .and_then(|t| Timestamp::from_second(t.floor() as i64).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window() -> Window {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        Window {
            start,
            end: start + jiff::SignedDuration::from_secs(60),
            step: Duration::from_secs(1),
            life_start: None,
        }
    }

    fn profile() -> MetricProfile {
        let t = serde_saphyr::from_str("agave: {image: a}").unwrap();
        crate::clients::CLIENTS[0].profile(&t)
    }

    #[test]
    fn placeholders_get_the_pod_selector_the_step_and_a_three_scrape_rate() {
        assert_eq!(
            expand(
                "sum(sum_over_time(x{$selector}[$step])) / $stepSeconds and rate(y[$rate])",
                &selector("ns", "t-1"),
                Duration::from_secs(15)
            ),
            "sum(sum_over_time(x{namespace=\"ns\",pod=\"t-1\"}[15s])) / 15 and rate(y[45s])"
        );
    }

    #[test]
    fn window_queries_aggregate_over_a_subquery_of_the_window() {
        let q = result_queries(&profile(), &selector("ns", "t-1"), &window());
        assert!(q["maxTps"].starts_with(
            "max_over_time(((sum(sum_over_time(replay_slot_stats_total_transactions{"
        ));
        assert!(q["maxTps"].ends_with(")[60s:1s])"));
        assert!(q["zeroTpsSamples"].contains(") == 0)[60s:1s]"));
        assert!(q["finalLag"].starts_with("last_over_time("));
        assert!(q["maxRss"].contains("memtype=\"resident\""));
        let avg = avg_without_outliers("tps", &window(), 1500.5);
        assert_eq!(avg, "avg_over_time(((tps) <= 4501.5)[60s:1s])");
    }

    #[test]
    fn figures_follow_the_series_the_profile_has() {
        let mut p = profile();
        p.queries.remove(&QueryKey::Tps);
        p.queries.remove(&QueryKey::VszBytes);
        let q = result_queries(&p, "pod=\"x\"", &window());
        assert!(!q.contains_key("maxTps") && !q.contains_key("maxVsz"));
        // Without a TPS series, the lag series says whether there are samples.
        assert!(q["samples"].contains("solana_node_num_slots_behind"));
    }

    #[test]
    fn an_empty_window_still_reads_one_step() {
        let mut w = window();
        w.end = w.start;
        let q = result_queries(&profile(), "pod=\"x\"", &w);
        assert!(q["maxTps"].ends_with(")[1s:1s])"), "{}", q["maxTps"]);
    }

    #[test]
    fn durations_stay_exact() {
        assert_eq!(promql_duration(Duration::from_secs(43200)), "43200s");
        assert_eq!(promql_duration(Duration::from_millis(59_250)), "59250ms");
    }

    #[test]
    fn the_first_time_a_condition_held_is_the_least_timestamp_over_the_span() {
        let since: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let now: Timestamp = "2026-01-01T01:30:00Z".parse().unwrap();
        let q = first_time_query("(lag) <= 120", since, now, Duration::from_secs(15));
        assert_eq!(q, "min_over_time(timestamp((lag) <= 120)[5400s:15s])");
        // A span shorter than a step still reads one step.
        let q = first_time_query("x > 0", now, now, Duration::from_secs(15));
        assert_eq!(q, "min_over_time(timestamp(x > 0)[15s:15s])");
    }

    #[test]
    fn rounding_keeps_two_decimals() {
        assert_eq!(round2(4598.1234), 4598.12);
        assert_eq!(gib2((512u64 << 30) as f64), 512.0);
    }
}
