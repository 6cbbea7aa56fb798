//! The chart's PrometheusRule and Grafana dashboard (charts/valtune) name only series that
//! exist: the operator's own metrics (operator_metrics.rs, as /metrics serves them) and
//! the series the clients' metric profiles read. A renamed metric fails here, not in a
//! user's Grafana. (The lab tests also run every dashboard query against the lab.)

use std::collections::BTreeSet;
use std::path::Path;

use valtune::clients::client_for;
use valtune::operator_metrics::OperatorMetrics;

fn chart_file(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../charts/valtune");
    std::fs::read_to_string(root.join(path)).unwrap()
}

/// Metric names in PromQL text: identifiers followed by `{`, `[` or `)`, or standing alone
/// in an aggregation.
fn metric_names(text: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\b([a-z][a-z0-9_]*(?:_total|_seconds|_bytes|_behind|_transactions|_blind|_finished|_reconciles|_trials|_experiments|_errors)?)\{").unwrap();
    re.captures_iter(text).map(|c| c[1].to_string()).collect()
}

/// The series the operator serves, by name (counters with their `_total`).
fn operator_series() -> BTreeSet<String> {
    // Families are served once they have samples: give each one.
    let m = OperatorMetrics::new();
    let trial: valtune::api::ValidatorTrial = serde_saphyr::from_str(
        "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorTrial\nmetadata: {name: t, creationTimestamp: '2026-01-01T00:00:00Z'}\nspec: {experiment: x, point: {}, repetition: 1, template: {agave: {image: a}}, settings: {}, metrics: {}}\nstatus: {phase: Measuring, windowStart: '2026-01-01T01:00:00Z'}\n",
    )
    .unwrap();
    m.count_trials(&[std::sync::Arc::new(trial)]);
    let vx: valtune::api::ValidatorExperiment = serde_saphyr::from_str(
        "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: x, namespace: ns}\nspec: {template: {agave: {image: a}}}\n",
    )
    .unwrap();
    let (store, mut writer) = kube::runtime::reflector::store();
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(vx));
    m.watch_experiments(store);
    let v: valtune::api::Validator = serde_saphyr::from_str(
        "apiVersion: valtune.dev/v1alpha1\nkind: Validator\nmetadata: {name: v, namespace: ns}\nspec: {nodeName: n, template: {besu: {image: b}}}\nstatus: {lag: 3, conditions: [{type: CaughtUp, status: 'False', reason: r, message: m, lastTransitionTime: '2026-01-01T00:00:00Z'}, {type: RestartPending, status: 'True', reason: r, message: m, lastTransitionTime: '2026-01-01T00:00:00Z'}]}\n",
    )
    .unwrap();
    m.count_validators(&[std::sync::Arc::new(v)]);
    drop(m.reconcile_started("trial"));
    m.reconcile_error("trial", "read_pod", "forbidden");
    let mut names = BTreeSet::new();
    for line in m.encode().lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split(' ');
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for s in ["bucket", "sum", "count"] {
                    names.insert(format!("{name}_{s}"));
                }
            }
            _ => {
                names.insert(name.to_string());
            }
        }
    }
    // `up` comes with every scrape.
    names.insert("up".into());
    names
}

#[test]
fn the_alerts_read_series_the_operator_serves() {
    let served = operator_series();
    let names = metric_names(&chart_file("templates/prometheusrule.yaml"));
    assert!(names.len() >= 5, "{names:?}");
    for n in &names {
        assert!(
            served.contains(n),
            "the PrometheusRule reads {n}, which the operator does not serve ({served:?})"
        );
    }
}

#[test]
fn the_dashboard_reads_the_operators_series_and_the_profiles() {
    let served = operator_series();
    let template: valtune::api::template::ValidatorTemplate =
        serde_json::from_value(serde_json::json!({"agave": {"image": "anzaxyz/agave:v2.0.5"}}))
            .unwrap();
    let profile = client_for(&template).unwrap().profile(&template);
    let queries: Vec<&String> = profile.queries.values().collect();
    let dashboard = chart_file("files/dashboards/valtune.json");
    let names = metric_names(&dashboard.replace("\\\"", "\""));
    assert!(names.len() >= 8, "{names:?}");
    for n in &names {
        let in_profile = queries.iter().any(|q| q.contains(n.as_str()));
        assert!(
            served.contains(n) || in_profile,
            "the dashboard reads {n}: neither the operator nor Agave's metric profile has it"
        );
    }
    assert!(names.iter().any(|n| n.starts_with("namedprocess_")));
    assert!(names.contains("replay_slot_stats_total_transactions"));
}
