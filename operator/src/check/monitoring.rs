//! `valtune check`'s Prometheus and PodMonitor checks: the Prometheus the operator reads
//! and writes to answers (and receives remote writes where the profile pushes), and a
//! Prometheus selects the experiments' PodMonitors. Pure judgments, async reads.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, ResourceExt};

use super::Finding;
use super::cluster::{Needs, Options, namespace_labels};
use super::prometheus::Reach;
use super::selection::PrometheusSelectors;

pub(super) async fn prometheus_checks(client: &Client, all: &[Needs]) -> Vec<Finding> {
    let mut urls: BTreeMap<String, (Option<String>, bool)> = BTreeMap::new();
    for n in all {
        let Some(url) = &n.prometheus_url else {
            continue;
        };
        let e = urls
            .entry(url.clone())
            .or_insert((n.remote_write_url.clone(), false));
        e.1 |= n.remote_write;
    }
    if urls.is_empty() {
        return vec![Finding::fail(
            "prometheus",
            "no Prometheus to check: valtune reads every result from one",
            "pass --prometheus-url (the operator's operator.prometheusUrl), e.g. http://prometheus-operated.monitoring:9090",
        )];
    }
    let http = reqwest::Client::new();
    let mut out = Vec::new();
    for (url, (write_url, needs_receiver)) in urls {
        let reach = reach(client, &http, &url).await;
        let write = match write_url {
            Some(w) => {
                let r = reach_for_write(client, &http, &w).await;
                (r, String::new())
            }
            None => (reach.clone(), "/api/v1/write".to_string()),
        };
        let write = needs_receiver.then_some((&write.0, write.1.as_str()));
        out.extend(super::prometheus_findings(&reach, write).await);
    }
    out
}

/// Direct when it answers, else through the API server's service proxy when the URL names
/// a cluster Service.
pub(super) async fn reach(client: &Client, http: &reqwest::Client, url: &str) -> Reach {
    let direct = Reach::direct(http.clone(), url);
    if super::prometheus::build_info(&direct).await.is_ok() {
        return direct;
    }
    Reach::proxy(client.clone(), url).unwrap_or(direct)
}

pub(super) async fn reach_for_write(client: &Client, http: &reqwest::Client, url: &str) -> Reach {
    let direct = Reach::direct(http.clone(), url);
    match super::prometheus::receiver(&direct, "").await {
        super::prometheus::Receiver::Unknown(_) => {
            Reach::proxy(client.clone(), url).unwrap_or(direct)
        }
        _ => direct,
    }
}

pub(super) async fn pod_monitor_checks(
    client: &Client,
    opts: &Options,
    all: &[Needs],
) -> Vec<Finding> {
    let ar = ApiResource {
        group: "monitoring.coreos.com".into(),
        version: "v1".into(),
        api_version: "monitoring.coreos.com/v1".into(),
        kind: "Prometheus".into(),
        plural: "prometheuses".into(),
    };
    let list = match Api::<DynamicObject>::all_with(client.clone(), &ar)
        .list(&ListParams::default())
        .await
    {
        Ok(l) => l.items,
        Err(kube::Error::Api(s)) if s.code == 404 => {
            return vec![Finding::fail(
                "podmonitor",
                "prometheus-operator's Prometheus kind is not served: valtune creates a PodMonitor per experiment for it",
                "install prometheus-operator, e.g. helm install kube-prometheus-stack prometheus-community/kube-prometheus-stack -n monitoring -f docs/prepare-cluster.md's values",
            )];
        }
        Err(e) => {
            return vec![Finding::warn(
                "podmonitor",
                format!("cannot list Prometheus resources: {e}"),
                "valtune check needs list on prometheuses.monitoring.coreos.com",
            )];
        }
    };
    let proms: Vec<PrometheusSelectors> = list
        .iter()
        .map(|p| {
            PrometheusSelectors::from_spec(
                &p.namespace().unwrap_or_default(),
                &p.name_any(),
                &p.data["spec"],
            )
        })
        .collect();
    let ns_labels = namespace_labels(client, &opts.namespace)
        .await
        .unwrap_or_default();
    let mut seen = BTreeSet::new();
    all.iter()
        .filter(|n| seen.insert(n.pod_monitor_labels.clone()))
        .map(|n| pod_monitor_finding(&proms, &opts.namespace, &ns_labels, &n.pod_monitor_labels))
        .collect()
}

/// Whether some Prometheus selects a PodMonitor of these labels in `ns`. Pure.
pub fn pod_monitor_finding(
    proms: &[PrometheusSelectors],
    ns: &str,
    ns_labels: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> Finding {
    let shown = if labels.is_empty() {
        "no labels".to_string()
    } else {
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    if let Some(p) = proms.iter().find(|p| p.selects(ns, ns_labels, labels)) {
        return Finding::pass(
            "podmonitor",
            format!(
                "a PodMonitor with {shown} in namespace {ns} is selected by Prometheus {}/{}",
                p.namespace, p.name
            ),
        );
    }
    if proms.is_empty() {
        return Finding::fail(
            "podmonitor",
            "no Prometheus resource in the cluster: nothing scrapes valtune's PodMonitors",
            "create one (kube-prometheus-stack does; docs/prepare-cluster.md)",
        );
    }
    let said: Vec<String> = proms.iter().map(|p| p.describe()).collect();
    let fix = match proms.iter().find_map(|p| p.wanted_labels()) {
        Some(wanted) => {
            let l: Vec<String> = wanted.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            format!(
                "set spec.metrics.podMonitorLabels: {{{}}} in your experiments (and the chart's metrics.serviceMonitor.labels), or let Prometheus select every PodMonitor (kube-prometheus-stack: --set prometheus.prometheusSpec.podMonitorSelectorNilUsesHelmValues=false)",
                l.join(", ")
            )
        }
        None => "give valtune's PodMonitors labels a Prometheus selects (spec.metrics.podMonitorLabels), or widen its podMonitorSelector / podMonitorNamespaceSelector".into(),
    };
    Finding::fail(
        "podmonitor",
        format!(
            "no Prometheus selects a PodMonitor with {shown} in namespace {ns}, so trial pods are never scraped: {}",
            said.join("; ")
        ),
        fix,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;
    use serde_json::json;

    #[test]
    fn a_podmonitor_nobody_selects_names_the_label_kube_prometheus_stack_wants() {
        let kps = PrometheusSelectors::from_spec(
            "monitoring",
            "kps",
            &json!({"podMonitorSelector": {"matchLabels": {"release": "kps"}}, "podMonitorNamespaceSelector": {}}),
        );
        let f = pod_monitor_finding(
            std::slice::from_ref(&kps),
            "validators",
            &BTreeMap::new(),
            &BTreeMap::new(),
        );
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.fix
                .unwrap()
                .starts_with("set spec.metrics.podMonitorLabels: {release: kps}")
        );
        let labelled = BTreeMap::from([("release".to_string(), "kps".to_string())]);
        let f = pod_monitor_finding(&[kps], "validators", &BTreeMap::new(), &labelled);
        assert_eq!(f.status, Status::Pass, "{f:?}");
    }
}
