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
use crate::api::trial::TrialResults;

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

/// A profile query with its placeholders filled in.
pub fn expand(template: &str, selector: &str, step: Duration) -> String {
    // Rates span three scrapes so two samples are always inside, whatever the jitter.
    template
        .replace("$selector", selector)
        .replace("$rate", &promql_duration(step * 3))
}

#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub start: Timestamp,
    pub end: Timestamp,
    /// The scrape interval: one TPS sample per step.
    pub step: Duration,
}

impl Window {
    pub fn length(&self) -> Duration {
        let span = self.end.duration_since(self.start);
        Duration::try_from(span).unwrap_or_default()
    }

    fn range(&self) -> String {
        format!(
            "[{}:{}]",
            promql_duration(self.length()),
            promql_duration(self.step)
        )
    }
}

/// The series a client's profile defines, expanded for one pod.
#[derive(Debug, Clone)]
pub struct Series {
    pub tps: String,
    pub slot_lag: String,
    pub rss: String,
    pub vsz: String,
    pub major_faults: String,
    pub minor_faults: String,
}

impl Series {
    pub fn from_profile(
        queries: &BTreeMap<String, String>,
        selector: &str,
        step: Duration,
    ) -> Result<Series, String> {
        let get = |name: &str| {
            queries
                .get(name)
                .map(|q| expand(q, selector, step))
                .ok_or_else(|| format!("the metric profile has no {name} query"))
        };
        Ok(Series {
            tps: get("tps")?,
            slot_lag: get("slotLag")?,
            rss: get("rssBytes")?,
            vsz: get("vszBytes")?,
            major_faults: get("majorFaultsPerSecond")?,
            minor_faults: get("minorFaultsPerSecond")?,
        })
    }
}

/// The instant queries for a window, by figure. `avgTps` needs the plain average first
/// (see [`avg_without_outliers`]).
pub fn result_queries(s: &Series, w: &Window) -> BTreeMap<&'static str, String> {
    let r = w.range();
    BTreeMap::from([
        ("samples", format!("count_over_time(({}){r})", s.tps)),
        ("avgTpsAll", format!("avg_over_time(({}){r})", s.tps)),
        ("maxTps", format!("max_over_time(({}){r})", s.tps)),
        (
            "zeroTpsSamples",
            format!("count_over_time((({}) == 0){r})", s.tps),
        ),
        ("maxRss", format!("max_over_time(({}){r})", s.rss)),
        ("meanRss", format!("avg_over_time(({}){r})", s.rss)),
        ("maxVsz", format!("max_over_time(({}){r})", s.vsz)),
        (
            "majorFaults",
            format!("avg_over_time(({}){r})", s.major_faults),
        ),
        (
            "minorFaults",
            format!("avg_over_time(({}){r})", s.minor_faults),
        ),
        ("maxSlotLag", format!("max_over_time(({}){r})", s.slot_lag)),
        (
            "finalSlotLag",
            format!("last_over_time(({}){r})", s.slot_lag),
        ),
    ])
}

/// Mean TPS without the samples above 3x the plain mean (the paper's outliers).
pub fn avg_without_outliers(s: &Series, w: &Window, plain_mean: f64) -> String {
    format!(
        "avg_over_time((({}) <= {}){})",
        s.tps,
        3.0 * plain_mean,
        w.range()
    )
}

/// Figures in status are rounded to two decimals (printer columns stay readable).
pub fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Reads the results of a window. None when Prometheus has no TPS samples in it (not
/// scraped yet, or the pod never served metrics).
pub async fn collect(
    prom: &Prometheus,
    s: &Series,
    w: &Window,
    max_slot_lag: i64,
) -> Result<Option<TrialResults>, PromError> {
    let q = result_queries(s, w);
    let at = Some(w.end);
    let samples = prom.value(&q["samples"], at).await?.unwrap_or(0.0);
    if samples < 1.0 {
        return Ok(None);
    }
    let mut v = BTreeMap::new();
    for (name, query) in &q {
        v.insert(*name, prom.value(query, at).await?);
    }
    let plain_mean = v["avgTpsAll"].unwrap_or(0.0);
    let avg = prom
        .value(&avg_without_outliers(s, w, plain_mean), at)
        .await?;
    let step = w.step.as_secs_f64();
    let final_lag = v["finalSlotLag"];
    Ok(Some(TrialResults {
        avg_tps: avg.map(round2),
        max_tps: v["maxTps"].map(round2),
        // No zero samples is an empty result, not missing data.
        zero_tps_seconds: Some(round2(v["zeroTpsSamples"].unwrap_or(0.0) * step)),
        max_rss_gib: v["maxRss"].map(gib2),
        mean_rss_gib: v["meanRss"].map(gib2),
        max_vsz_gib: v["maxVsz"].map(gib2),
        major_faults_per_second: v["majorFaults"].map(round2),
        minor_faults_per_second: v["minorFaults"].map(round2),
        max_slot_lag: v["maxSlotLag"].map(round2),
        final_slot_lag: final_lag.map(round2),
        catch_up_seconds: None,
        measured_seconds: Some(round2(w.length().as_secs_f64())),
        kept_up: final_lag.map(|lag| lag <= max_slot_lag as f64),
    }))
}

fn gib2(bytes: f64) -> f64 {
    round2(bytes / (1u64 << 30) as f64)
}

/// Whether Prometheus has scraped the pod at or after `t` (its `up` series, which every
/// scrape writes, whatever the client).
pub async fn scraped_since(
    prom: &Prometheus,
    selector: &str,
    t: Timestamp,
) -> Result<bool, PromError> {
    let last = prom
        .value(&format!("max(timestamp(up{{{selector}}}))"), None)
        .await?;
    Ok(last.is_some_and(|ts| ts >= t.as_second() as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::agave;

    fn window() -> Window {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        Window {
            start,
            end: start + jiff::SignedDuration::from_secs(60),
            step: Duration::from_secs(1),
        }
    }

    fn series() -> Series {
        Series::from_profile(
            &agave::profile().queries,
            &selector("ns", "t-1"),
            Duration::from_secs(1),
        )
        .unwrap()
    }

    #[test]
    fn profile_queries_get_the_pod_selector_and_a_three_scrape_rate() {
        let s = series();
        assert_eq!(
            s.tps,
            "sum(irate(solana_node_transactions_total{namespace=\"ns\",pod=\"t-1\"}[3s]))"
        );
        assert!(s.rss.contains("memtype=\"resident\""));
        assert!(s.rss.contains("groupname=\"agave-validator\""));
    }

    #[test]
    fn window_queries_aggregate_over_a_subquery_of_the_window() {
        let q = result_queries(&series(), &window());
        assert!(q["maxTps"].starts_with("max_over_time((sum(irate("));
        assert!(q["maxTps"].ends_with(")[60s:1s])"));
        assert!(q["zeroTpsSamples"].contains(") == 0)[60s:1s]"));
        assert!(q["finalSlotLag"].starts_with("last_over_time("));
        let avg = avg_without_outliers(&series(), &window(), 1500.5);
        assert!(avg.contains("<= 4501.5)[60s:1s]"), "{avg}");
    }

    #[test]
    fn durations_stay_exact() {
        assert_eq!(promql_duration(Duration::from_secs(43200)), "43200s");
        assert_eq!(promql_duration(Duration::from_millis(59_250)), "59250ms");
    }

    #[test]
    fn rounding_keeps_two_decimals() {
        assert_eq!(round2(4598.1234), 4598.12);
        assert_eq!(gib2((512u64 << 30) as f64), 512.0);
    }
}
