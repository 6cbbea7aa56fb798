//! Which Prometheus selects a PodMonitor, as prometheus-operator decides it (v0.80.1
//! pkg/prometheus/resource_selector.go `SelectPodMonitors`; the Prometheus CRD's
//! `podMonitorSelector` and `podMonitorNamespaceSelector` docs). Pure.
//!
//! - `podMonitorSelector` null selects nothing (`LabelSelectorAsSelector(nil)` is
//!   `labels.Nothing()`); `{}` selects every PodMonitor.
//! - `podMonitorNamespaceSelector` null means the Prometheus' own namespace only; `{}`
//!   every namespace; otherwise it is matched against the labels of the PodMonitor's
//!   namespace.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether a label selector matches a set of labels (matchLabels and matchExpressions,
/// all of them: apimachinery's semantics).
pub fn matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let exact = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let expressions = sel.match_expressions.iter().flatten().all(|e| {
        let value = labels.get(&e.key);
        let values = e.values.clone().unwrap_or_default();
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            // An operator the API server would have refused: matches nothing.
            _ => false,
        }
    });
    exact && expressions
}

/// What a Prometheus resource selects of PodMonitors.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PrometheusSelectors {
    pub namespace: String,
    pub name: String,
    pub pod_monitor_selector: Option<LabelSelector>,
    pub pod_monitor_namespace_selector: Option<LabelSelector>,
}

impl PrometheusSelectors {
    /// Reads the two selectors of a `monitoring.coreos.com/v1` Prometheus' spec.
    pub fn from_spec(namespace: &str, name: &str, spec: &serde_json::Value) -> Self {
        let selector = |key: &str| {
            spec.get(key)
                .filter(|v| !v.is_null())
                .and_then(|v| serde_json::from_value(v.clone()).ok())
        };
        PrometheusSelectors {
            namespace: namespace.into(),
            name: name.into(),
            pod_monitor_selector: selector("podMonitorSelector"),
            pod_monitor_namespace_selector: selector("podMonitorNamespaceSelector"),
        }
    }

    /// Whether it selects a PodMonitor labelled `labels` in namespace `ns` (labelled
    /// `ns_labels`).
    pub fn selects(
        &self,
        ns: &str,
        ns_labels: &BTreeMap<String, String>,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        let Some(sel) = &self.pod_monitor_selector else {
            return false;
        };
        let in_namespace = match &self.pod_monitor_namespace_selector {
            None => ns == self.namespace,
            Some(ns_sel) => matches(ns_sel, ns_labels),
        };
        in_namespace && matches(sel, labels)
    }

    /// What it selects, in words, for a failed check's message.
    pub fn describe(&self) -> String {
        let what = match &self.pod_monitor_selector {
            None => "no PodMonitors (podMonitorSelector is unset)".to_string(),
            Some(s) => format!("PodMonitors {}", describe_selector(s)),
        };
        let r#where = match &self.pod_monitor_namespace_selector {
            None => format!("in its own namespace ({})", self.namespace),
            Some(s) if is_empty(s) => "in every namespace".into(),
            Some(s) => format!("in namespaces {}", describe_selector(s)),
        };
        format!(
            "Prometheus {}/{} selects {what} {where}",
            self.namespace,
            self.name,
            r#where = r#where
        )
    }

    /// Labels that would make a PodMonitor match its selector, when it is plain
    /// matchLabels (kube-prometheus-stack's `release: <name>`).
    pub fn wanted_labels(&self) -> Option<&BTreeMap<String, String>> {
        let s = self.pod_monitor_selector.as_ref()?;
        if s.match_expressions.as_ref().is_some_and(|e| !e.is_empty()) {
            return None;
        }
        s.match_labels.as_ref().filter(|m| !m.is_empty())
    }
}

fn is_empty(s: &LabelSelector) -> bool {
    s.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && s.match_expressions.as_ref().is_none_or(|e| e.is_empty())
}

fn describe_selector(s: &LabelSelector) -> String {
    if is_empty(s) {
        return "of any labels".into();
    }
    let mut parts: Vec<String> = s
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in s.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default().join(",");
        parts.push(match e.operator.as_str() {
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            op => format!("{} {} ({values})", e.key, op.to_lowercase()),
        });
    }
    format!("labelled {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// kube-prometheus-stack's defaults (chart 69.5.1 values.yaml L4040-4056, template
    /// prometheus.yaml L182-197): the release label, every namespace.
    fn kube_prometheus_stack() -> PrometheusSelectors {
        PrometheusSelectors::from_spec(
            "monitoring",
            "kube-prometheus-stack",
            &json!({"podMonitorSelector": {"matchLabels": {"release": "kube-prometheus-stack"}},
                    "podMonitorNamespaceSelector": {}}),
        )
    }

    #[test]
    fn kube_prometheus_stack_selects_only_its_release_label() {
        let p = kube_prometheus_stack();
        let ns = labels(&[]);
        assert!(!p.selects("validators", &ns, &labels(&[])));
        assert!(p.selects(
            "validators",
            &ns,
            &labels(&[("release", "kube-prometheus-stack")])
        ));
        assert_eq!(
            p.wanted_labels().unwrap()["release"],
            "kube-prometheus-stack"
        );
        assert_eq!(
            p.describe(),
            "Prometheus monitoring/kube-prometheus-stack selects PodMonitors labelled release=kube-prometheus-stack in every namespace"
        );
    }

    #[test]
    fn null_selectors_select_nothing_or_only_the_own_namespace() {
        let none = PrometheusSelectors::from_spec("monitoring", "p", &json!({}));
        assert!(!none.selects("monitoring", &labels(&[]), &labels(&[])));
        let own = PrometheusSelectors::from_spec(
            "monitoring",
            "p",
            &json!({"podMonitorSelector": {}, "podMonitorNamespaceSelector": null}),
        );
        assert!(own.selects("monitoring", &labels(&[]), &labels(&[("a", "b")])));
        assert!(!own.selects("validators", &labels(&[]), &labels(&[])));
        assert!(
            own.describe()
                .ends_with("in its own namespace (monitoring)")
        );
    }

    #[test]
    fn expressions_and_namespace_labels_count() {
        // The lab's Prometheus: everything but PodMonitors labelled to be left alone.
        let lab = PrometheusSelectors::from_spec(
            "monitoring",
            "lab",
            &json!({"podMonitorSelector": {"matchExpressions": [{"key": "valtune.dev/lab-unselected", "operator": "DoesNotExist"}]},
                    "podMonitorNamespaceSelector": {"matchLabels": {"team": "chain"}}}),
        );
        let team = labels(&[("team", "chain")]);
        assert!(lab.selects("v", &team, &labels(&[])));
        assert!(!lab.selects("v", &labels(&[]), &labels(&[])));
        assert!(!lab.selects("v", &team, &labels(&[("valtune.dev/lab-unselected", "x")])));
        assert!(lab.wanted_labels().is_none());
        let sel: LabelSelector = serde_json::from_value(json!({"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]},
            {"key": "env", "operator": "NotIn", "values": ["dev"]}]}))
        .unwrap();
        assert!(matches(&sel, &labels(&[("tier", "a")])));
        assert!(!matches(&sel, &labels(&[("tier", "a"), ("env", "dev")])));
        assert!(!matches(&sel, &labels(&[("tier", "c")])));
    }
}
