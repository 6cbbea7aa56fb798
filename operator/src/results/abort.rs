//! Abort rules, judged one by one: a rule that cannot be judged (its series is not in the
//! profile, its duration is malformed, Prometheus refuses the query) says so on its own
//! and never stops the rules after it from being judged.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::analysis::{expand, promql_duration};
use super::prometheus::Prometheus;
use crate::api::settings::{AbortRule, parse_duration};
use crate::clients::profile::MetricProfile;

/// What one rule says now.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The bound was crossed for the whole duration: abort, for this reason.
    Fired(String),
    /// Not crossed (or not for long enough, or too few samples to say).
    Holds,
    /// The window is younger than the rule's duration.
    TooEarly,
    /// The rule cannot be judged, and why.
    Unknown(String),
    /// Prometheus could not be read (unreachable, failing): no verdict now.
    Blind(String),
}

fn failed(e: super::prometheus::PromError) -> Verdict {
    if e.is_transient() {
        Verdict::Blind(e.to_string())
    } else {
        Verdict::Unknown(e.to_string())
    }
}

/// The PromQL of one rule: the extreme of its series over the last `for`, and how many
/// samples that saw.
pub fn queries(
    rule: &AbortRule,
    profile: &MetricProfile,
    selector: &str,
    step: Duration,
    hold: Duration,
) -> Result<(String, String, f64, &'static str), String> {
    let template = profile
        .query(rule.metric)
        .ok_or_else(|| format!("the client's metric profile has no {} series", rule.metric))?;
    let series = expand(template, selector, step);
    let range = format!("[{}:{}]", promql_duration(hold), promql_duration(step));
    let (extreme, bound, word) = match (rule.above, rule.below) {
        (Some(b), _) => (format!("min_over_time(({series}){range})"), b, "above"),
        (_, Some(b)) => (format!("max_over_time(({series}){range})"), b, "below"),
        _ => return Err("it sets neither above nor below".into()),
    };
    Ok((
        extreme,
        format!("count_over_time(({series}){range})"),
        bound,
        word,
    ))
}

/// Judges every rule at `now`, for a window that started at `window_start`.
pub async fn judge(
    prom: &Prometheus,
    profile: &MetricProfile,
    selector: &str,
    step: Duration,
    window_start: Timestamp,
    now: Timestamp,
    rules: &[AbortRule],
) -> Vec<Verdict> {
    let mut verdicts = Vec::with_capacity(rules.len());
    for rule in rules {
        verdicts.push(judge_one(prom, profile, selector, step, window_start, now, rule).await);
    }
    verdicts
}

async fn judge_one(
    prom: &Prometheus,
    profile: &MetricProfile,
    selector: &str,
    step: Duration,
    window_start: Timestamp,
    now: Timestamp,
    rule: &AbortRule,
) -> Verdict {
    let hold = match parse_duration(&rule.for_) {
        Ok(d) => d,
        Err(e) => return Verdict::Unknown(format!("for: {e}")),
    };
    // The bound must have held for the whole duration, inside the window.
    if now.duration_since(window_start) < SignedDuration::try_from(hold).unwrap_or_default() {
        return Verdict::TooEarly;
    }
    let (extreme, count, bound, word) = match queries(rule, profile, selector, step, hold) {
        Ok(q) => q,
        Err(e) => return Verdict::Unknown(e),
    };
    let value = match prom.value(&extreme, None).await {
        Ok(Some(v)) => v,
        Ok(None) => return Verdict::Holds,
        Err(e) => return failed(e),
    };
    let samples = match prom.value(&count, None).await {
        Ok(n) => n.unwrap_or(0.0),
        Err(e) => return failed(e),
    };
    // Require most of the samples: a gap in scraping is not evidence.
    let want = (hold.as_secs_f64() / step.as_secs_f64()).floor() * 0.8;
    let crossed = if word == "above" {
        value > bound
    } else {
        value < bound
    };
    if crossed && samples >= want {
        Verdict::Fired(format!(
            "aborted: {} stayed {word} {bound} for {} (abortWhen)",
            rule.metric, rule.for_
        ))
    } else {
        Verdict::Holds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::settings::QueryKey;

    fn rule(metric: QueryKey, above: Option<f64>, below: Option<f64>) -> AbortRule {
        AbortRule {
            metric,
            above,
            below,
            for_: "5m".into(),
        }
    }

    fn profile() -> MetricProfile {
        let mut p = crate::clients::CLIENTS[0]
            .profile(&serde_saphyr::from_str("agave: {image: a}").unwrap());
        p.queries.remove(&QueryKey::VszBytes);
        p
    }

    #[test]
    fn a_rule_reads_the_extreme_over_its_duration() {
        let (extreme, count, bound, word) = queries(
            &rule(QueryKey::SlotLag, Some(1000.0), None),
            &profile(),
            "pod=\"p\"",
            Duration::from_secs(15),
            Duration::from_secs(300),
        )
        .unwrap();
        assert!(
            extreme.starts_with("min_over_time((max(solana_node_num_slots_behind{pod=\"p\"})"),
            "{extreme}"
        );
        assert!(extreme.ends_with(")[300s:15s])"), "{extreme}");
        assert!(count.starts_with("count_over_time("));
        assert_eq!((bound, word), (1000.0, "above"));
    }

    /// The defect this module fixes: one rule that cannot be judged used to stop every
    /// rule after it from being judged (a `?` inside the loop).
    #[tokio::test]
    async fn a_rule_that_cannot_be_judged_does_not_silence_the_others() {
        // No Prometheus answers here; the malformed and unknown rules fail before asking.
        let prom = Prometheus::new("http://127.0.0.1:9");
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let now = start + SignedDuration::from_hours(1);
        let mut bad_duration = rule(QueryKey::Tps, None, Some(1.0));
        bad_duration.for_ = "soon".into();
        let rules = vec![
            bad_duration,
            rule(QueryKey::VszBytes, Some(1.0), None),
            rule(QueryKey::SlotLag, Some(1000.0), None),
        ];
        let v = judge(
            &prom,
            &profile(),
            "pod=\"p\"",
            Duration::from_secs(15),
            start,
            now,
            &rules,
        )
        .await;
        assert_eq!(v.len(), 3, "every rule gets a verdict");
        assert!(
            matches!(&v[0], Verdict::Unknown(e) if e.contains("for:")),
            "{v:?}"
        );
        assert!(
            matches!(&v[1], Verdict::Unknown(e) if e.contains("no vszBytes series")),
            "{v:?}"
        );
        // The third was judged: it asked Prometheus, unreachable here (no verdict now).
        assert!(
            matches!(&v[2], Verdict::Blind(e) if e.contains("unreachable")),
            "{v:?}"
        );
    }
}
