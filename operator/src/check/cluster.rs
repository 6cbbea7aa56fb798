//! `valtune check`: reads the cluster and Prometheus, then judges each need of the
//! experiments given (or, with none, of the examples: docs/prepare-cluster.md's
//! conventions). This file gathers each experiment's needs and runs the checks; the
//! judging is in small pure functions beside it, by what each checks (monitoring.rs,
//! node_fit.rs, storage.rs, pod_security.rs, and the client's own node findings), whose
//! async parts only read.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Toleration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::nodes;
use super::{Finding, Status, monitoring, node_fit, pod_security, storage};
use crate::api::ValidatorExperiment;
use crate::api::template::ValidatorTemplate;
use crate::strategies::build::first_attempts;

/// The label and taint docs/prepare-cluster.md puts on every validator machine, which the
/// examples select.
pub const NODE_LABEL: (&str, &str) = ("valtune.dev/bare-metal", "true");
pub const NODE_TAINT: &str = "valtune.dev/validator";
pub const STORAGE_CLASS: &str = "local-nvme";
/// Points rendered per experiment at most (each is checked against the nodes).
const MAX_POINTS: usize = 64;

/// What to check.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Where the experiments run.
    pub namespace: String,
    /// The Prometheus the operator reads (and, unless `remote_write_url`, writes to).
    pub prometheus_url: Option<String>,
    pub remote_write_url: Option<String>,
    /// The PodMonitor labels (else each experiment's spec.metrics.podMonitorLabels).
    pub pod_monitor_labels: Option<BTreeMap<String, String>>,
    /// Experiments to check against; none: what every example needs.
    pub experiments: Vec<ValidatorExperiment>,
}

/// One experiment's needs (or the examples' conventions), as the checks read them.
pub(super) struct Needs {
    /// `experiment NAME` or `the examples`.
    pub(super) what: String,
    pub(super) selector: BTreeMap<String, String>,
    pub(super) tolerations: Vec<Toleration>,
    /// The pods of its points (empty: not rendered).
    pub(super) pods: Vec<(String, Pod)>,
    /// The resolved template of each of those points, in the same order.
    pub(super) templates: Vec<ValidatorTemplate>,
    pub(super) storage_classes: BTreeMap<String, usize>,
    pub(super) remote_write: bool,
    /// The experiment's template (None: the examples' conventions).
    pub(super) template: Option<ValidatorTemplate>,
    pub(super) pod_monitor_labels: BTreeMap<String, String>,
    pub(super) prometheus_url: Option<String>,
    pub(super) remote_write_url: Option<String>,
}

fn conventions(opts: &Options) -> Needs {
    Needs {
        what: "the examples".into(),
        selector: BTreeMap::from([(NODE_LABEL.0.into(), NODE_LABEL.1.into())]),
        tolerations: vec![Toleration {
            key: Some(NODE_TAINT.into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        }],
        pods: Vec::new(),
        templates: Vec::new(),
        storage_classes: BTreeMap::from([(STORAGE_CLASS.into(), 1)]),
        remote_write: true,
        template: None,
        pod_monitor_labels: opts.pod_monitor_labels.clone().unwrap_or_default(),
        prometheus_url: opts.prometheus_url.clone(),
        remote_write_url: opts.remote_write_url.clone(),
    }
}

fn needs_of(vx: &ValidatorExperiment, opts: &Options) -> Result<Needs, String> {
    let name = vx.name_any();
    let t = &vx.spec.template;
    let client = crate::clients::client_for(t).map_err(|e| e.to_string())?;
    let profile = client.profile(t);
    let prometheus_url = opts
        .prometheus_url
        .clone()
        .or(vx.spec.metrics.prometheus_url.clone());
    let mut vx = vx.clone();
    vx.metadata.namespace = Some(opts.namespace.clone());
    vx.metadata.uid.get_or_insert_with(|| "check".into());
    let mut pods = Vec::new();
    let mut templates = Vec::new();
    for attempt in first_attempts(&vx, prometheus_url.as_deref(), MAX_POINTS) {
        let (trial, pod) = attempt?;
        pods.push((trial.spec.point.describe(), pod));
        templates.push(trial.spec.template.clone());
    }
    let mut storage_classes = BTreeMap::new();
    for v in &t.storage {
        *storage_classes
            .entry(v.storage_class_name.clone())
            .or_default() += 1;
    }
    // Where its pods may go: the template's placement and what the client adds to it
    // (e.g. a node label), as the first point's pod has them.
    let first = pods.first().and_then(|(_, p)| p.spec.clone());
    Ok(Needs {
        what: format!("experiment {name}"),
        selector: first
            .as_ref()
            .and_then(|s| s.node_selector.clone())
            .unwrap_or(t.placement.node_selector.clone()),
        tolerations: first
            .and_then(|s| s.tolerations)
            .unwrap_or(t.placement.tolerations.clone()),
        pods,
        templates,
        storage_classes,
        remote_write: profile.needs_remote_write(),
        template: Some(t.clone()),
        pod_monitor_labels: opts
            .pod_monitor_labels
            .clone()
            .unwrap_or(vx.spec.metrics.pod_monitor_labels.clone()),
        prometheus_url,
        remote_write_url: opts.remote_write_url.clone().or(vx
            .spec
            .metrics
            .remote_write_url
            .clone()),
    })
}

/// Runs every check.
pub async fn run(client: &Client, opts: &Options) -> Vec<Finding> {
    let mut out = vec![crds(client).await];
    let mut all_needs = Vec::new();
    if opts.experiments.is_empty() {
        all_needs.push(conventions(opts));
    }
    for vx in &opts.experiments {
        match needs_of(vx, opts) {
            Ok(n) => all_needs.push(n),
            Err(e) => out.push(Finding::fail(
                "experiment",
                format!("experiment {}: its pod cannot be rendered: {e}", vx.name_any()),
                "fix the field named (kubectl apply --dry-run=server -f FILE shows what admission says)",
            )),
        }
    }
    out.extend(monitoring::prometheus_checks(client, &all_needs).await);
    out.extend(monitoring::pod_monitor_checks(client, opts, &all_needs).await);
    let node_list = match Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => l.items,
        Err(e) => {
            out.push(Finding::fail(
                "nodes",
                format!("cannot list nodes: {e}"),
                "valtune check needs list on nodes (cluster-scoped): run it as a cluster admin",
            ));
            return out;
        }
    };
    let ns_labels = namespace_labels(client, &opts.namespace).await;
    for n in &all_needs {
        let eligible: Vec<&Node> = node_list
            .iter()
            .filter(|node| nodes::eligible(node, &n.selector, &n.tolerations))
            .collect();
        out.push(node_fit::node_finding(n, &eligible));
        if eligible.is_empty() {
            continue;
        }
        let every: Vec<&Node> = node_list.iter().collect();
        out.extend(node_fit::fit_findings(n, &eligible, &every));
        out.push(node_fit::cpu_manager_finding(
            n,
            &eligible,
            &node_fit::configz(client, eligible[0]).await,
        ));
        out.extend(client_findings(n, &eligible));
        out.extend(node_fit::netns_buffers_finding(n, &eligible));
        out.extend(storage::storage_checks(client, n, &eligible).await);
        out.extend(pod_security::pod_security_finding(
            n,
            &opts.namespace,
            ns_labels.as_ref(),
        ));
    }
    out
}

async fn crds(client: &Client) -> Finding {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut stale = Vec::new();
    for (_, ours) in crate::crd::crds() {
        let name = ours.name_any();
        let theirs = match api.get_opt(&name).await {
            Ok(Some(c)) => c,
            Ok(None) => {
                return Finding::fail(
                    "crds",
                    format!("CRD {name} is not installed"),
                    "helm install valtune charts/valtune (or kubectl apply --server-side -f crds/)",
                );
            }
            Err(e) => {
                return Finding::warn(
                    "crds",
                    format!("cannot read CRD {name}: {e}"),
                    "valtune check needs get on customresourcedefinitions",
                );
            }
        };
        let served = |c: &CustomResourceDefinition| {
            c.spec
                .versions
                .iter()
                .filter(|v| v.served)
                .map(|v| v.name.clone())
                .collect::<BTreeSet<_>>()
        };
        let want = served(&ours);
        if !want.is_subset(&served(&theirs)) {
            return Finding::fail(
                "crds",
                format!(
                    "CRD {name} does not serve {:?} (it serves {:?})",
                    want,
                    served(&theirs)
                ),
                "helm upgrade valtune charts/valtune (or kubectl apply --server-side -f crds/)",
            );
        }
        let missing = missing_fields(&ours, &theirs);
        if !missing.is_empty() {
            stale.push(format!("{name} lacks {}", missing.join(", ")));
        }
    }
    if stale.is_empty() {
        Finding::pass(
            "crds",
            format!(
                "valtune.dev/v1alpha1 served, with every field of this valtune ({})",
                env!("CARGO_PKG_VERSION")
            ),
        )
    } else {
        Finding::fail(
            "crds",
            format!(
                "the installed CRDs are older than this valtune: {} (the API server drops such fields)",
                stale.join("; ")
            ),
            "helm upgrade valtune charts/valtune (or kubectl apply --server-side -f crds/)",
        )
    }
}

/// Schema properties of `ours` absent from `theirs`, as dotted paths (at most five). Pure.
pub fn missing_fields(
    ours: &CustomResourceDefinition,
    theirs: &CustomResourceDefinition,
) -> Vec<String> {
    fn paths(v: &serde_json::Value, prefix: &str, out: &mut BTreeSet<String>) {
        if let Some(props) = v.get("properties").and_then(|p| p.as_object()) {
            for (k, child) in props {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                paths(child, &p, out);
            }
        }
        for key in ["items", "additionalProperties"] {
            if let Some(child) = v.get(key).filter(|c| c.is_object()) {
                paths(child, prefix, out);
            }
        }
    }
    let schema = |c: &CustomResourceDefinition| {
        let mut out = BTreeSet::new();
        for v in &c.spec.versions {
            if let Some(s) = v
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
            {
                paths(&serde_json::to_value(s).unwrap_or_default(), "", &mut out);
            }
        }
        out
    };
    schema(ours)
        .difference(&schema(theirs))
        .take(5)
        .cloned()
        .collect()
}

pub(super) async fn namespace_labels(
    client: &Client,
    ns: &str,
) -> Option<BTreeMap<String, String>> {
    Api::<Namespace>::all(client.clone())
        .get_opt(ns)
        .await
        .ok()
        .flatten()
        .map(|n| n.metadata.labels.unwrap_or_default())
}

/// What the experiment's client says of the nodes it may use (e.g. nodeos' swap nodes).
/// Pure.
fn client_findings(n: &Needs, eligible: &[&Node]) -> Vec<Finding> {
    let Some(t) = &n.template else {
        return Vec::new();
    };
    let Ok(client) = crate::clients::client_for(t) else {
        return Vec::new();
    };
    client.node_findings(&crate::clients::NodeCheck {
        what: &n.what,
        template: t,
        points: &n.pods,
        templates: &n.templates,
        eligible,
    })
}

/// Whether any finding failed.
pub fn failed(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.status == Status::Fail)
}

/// The examples' needs, for the checks' tests.
#[cfg(test)]
pub(super) fn example_needs() -> Needs {
    conventions(&Options {
        namespace: "validators".into(),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_crds_are_named_by_their_missing_fields() {
        let (_, ours) = crate::crd::crds().remove(0);
        let mut theirs = ours.clone();
        let schema = theirs.spec.versions[0]
            .schema
            .as_mut()
            .unwrap()
            .open_api_v3_schema
            .as_mut()
            .unwrap();
        schema.properties.as_mut().unwrap().remove("status");
        let missing = missing_fields(&ours, &theirs);
        assert!(missing.iter().any(|m| m == "status"), "{missing:?}");
        assert!(missing_fields(&ours, &ours).is_empty());
    }
}
