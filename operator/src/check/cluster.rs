//! `valtune check`: reads the cluster and Prometheus, then judges each need of the
//! experiments given (or, with none, of the examples: docs/prepare-cluster.md's
//! conventions). The judging is in small pure functions below; this file's async part
//! only reads.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, Pod, Toleration};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, ResourceExt};

use super::nodes::{self, Amounts};
use super::prometheus::Reach;
use super::selection::PrometheusSelectors;
use super::{Finding, Status};
use crate::api::ValidatorExperiment;
use crate::api::template::ValidatorTemplate;
use crate::clients::RenderInput;
use crate::controller::experiment::build_trial;
use crate::strategies::plan::plan;

/// The label and taint docs/prepare-cluster.md puts on every validator machine, which the
/// examples select.
pub const NODE_LABEL: (&str, &str) = ("valtune.dev/bare-metal", "true");
pub const NODE_TAINT: &str = "valtune.dev/validator";
pub const STORAGE_CLASS: &str = "local-nvme";
/// Pod Security Admission's namespace label (kubernetes/pod-security-admission).
const PSA_ENFORCE: &str = "pod-security.kubernetes.io/enforce";
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
struct Needs {
    /// `experiment NAME` or `the examples`.
    what: String,
    selector: BTreeMap<String, String>,
    tolerations: Vec<Toleration>,
    /// The pods of its points (empty: not rendered).
    pods: Vec<(String, Pod)>,
    /// The resolved template of each of those points, in the same order.
    templates: Vec<ValidatorTemplate>,
    storage_classes: BTreeMap<String, usize>,
    remote_write: bool,
    /// The experiment's template (None: the examples' conventions).
    template: Option<ValidatorTemplate>,
    pod_monitor_labels: BTreeMap<String, String>,
    prometheus_url: Option<String>,
    remote_write_url: Option<String>,
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
    let mut seen = BTreeSet::new();
    for p in plan(&vx.spec.sweep, 1) {
        if pods.len() >= MAX_POINTS || !seen.insert(p.point.canonical()) {
            continue;
        }
        let point = p.point.describe();
        let trial = build_trial(&vx, &p).map_err(|e| format!("{point}: {e}"))?;
        let rendered = RenderInput::for_trial(&trial, 1, &[], prometheus_url.as_deref())
            .and_then(|input| crate::clients::render(&input))
            .map_err(|e| format!("{point}: {e}"))?;
        pods.push((point, rendered.pod));
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
    out.extend(prometheus_checks(client, &all_needs).await);
    out.extend(pod_monitor_checks(client, opts, &all_needs).await);
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
        out.push(node_finding(n, &eligible));
        if eligible.is_empty() {
            continue;
        }
        let every: Vec<&Node> = node_list.iter().collect();
        out.extend(fit_findings(n, &eligible, &every));
        out.push(cpu_manager_finding(
            n,
            &eligible,
            &configz(client, eligible[0]).await,
        ));
        out.extend(client_findings(n, &eligible));
        out.extend(netns_buffers_finding(n, &eligible));
        out.extend(storage_checks(client, n, &eligible).await);
        out.extend(pod_security_finding(n, &opts.namespace, ns_labels.as_ref()));
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

async fn prometheus_checks(client: &Client, all: &[Needs]) -> Vec<Finding> {
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
async fn reach(client: &Client, http: &reqwest::Client, url: &str) -> Reach {
    let direct = Reach::direct(http.clone(), url);
    if super::prometheus::build_info(&direct).await.is_ok() {
        return direct;
    }
    Reach::proxy(client.clone(), url).unwrap_or(direct)
}

async fn reach_for_write(client: &Client, http: &reqwest::Client, url: &str) -> Reach {
    let direct = Reach::direct(http.clone(), url);
    match super::prometheus::receiver(&direct, "").await {
        super::prometheus::Receiver::Unknown(_) => {
            Reach::proxy(client.clone(), url).unwrap_or(direct)
        }
        _ => direct,
    }
}

async fn pod_monitor_checks(client: &Client, opts: &Options, all: &[Needs]) -> Vec<Finding> {
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

async fn namespace_labels(client: &Client, ns: &str) -> Option<BTreeMap<String, String>> {
    Api::<Namespace>::all(client.clone())
        .get_opt(ns)
        .await
        .ok()
        .flatten()
        .map(|n| n.metadata.labels.unwrap_or_default())
}

/// Enough prepared nodes for the needs' placement. Pure.
fn node_finding(n: &Needs, eligible: &[&Node]) -> Finding {
    let selector: Vec<String> = n.selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if eligible.is_empty() {
        return Finding::fail(
            "nodes",
            format!(
                "{}: no node has the labels {} and taints its tolerations allow",
                n.what,
                selector.join(",")
            ),
            format!(
                "prepare the validator machines (docs/prepare-cluster.md): kubectl label node NODE {}=true; kubectl taint node NODE {}=true:NoSchedule",
                NODE_LABEL.0, NODE_TAINT
            ),
        );
    }
    let ready = eligible.iter().filter(|n| nodes::ready(n)).count();
    let names: Vec<String> = eligible.iter().take(6).map(|n| n.name_any()).collect();
    Finding::pass(
        "nodes",
        format!(
            "{}: {} nodes it may use ({} Ready): {}{}",
            n.what,
            eligible.len(),
            ready,
            names.join(", "),
            if eligible.len() > 6 { ", ..." } else { "" }
        ),
    )
}

/// Every point's pod fits the allocatable (cpu, memory, hugepages, GPUs) of some node its
/// own selector and tolerations allow, among `all`.
fn fit_findings(n: &Needs, eligible: &[&Node], all: &[&Node]) -> Vec<Finding> {
    if n.pods.is_empty() {
        let pages: Vec<String> = eligible
            .iter()
            .take(3)
            .map(|node| {
                let a = nodes::node_amounts(node, true);
                let get = |r: &str| nodes::show(r, a.get(r).copied().unwrap_or(0));
                format!(
                    "{} offers cpu {}, memory {}, hugepages-1Gi {}",
                    node.name_any(),
                    get("cpu"),
                    get("memory"),
                    get("hugepages-1Gi")
                )
            })
            .collect();
        return vec![Finding::pass("allocatable", pages.join("; "))];
    }
    let mut short = Vec::new();
    for (point, pod) in &n.pods {
        let want: Amounts = nodes::pod_requests(pod);
        // The pod's own selector and tolerations: a client adds to the template's (a GPU
        // point tolerates the GPU taint, nodeos selects swap nodes).
        let spec = pod.spec.clone().unwrap_or_default();
        let selector = spec.node_selector.unwrap_or_default();
        let tolerations = spec.tolerations.unwrap_or_default();
        let candidates: Vec<&&Node> = all
            .iter()
            .filter(|node| nodes::eligible(node, &selector, &tolerations))
            .collect();
        if candidates.is_empty() {
            short.push(format!(
                "{point}: no node has its labels and tolerated taints"
            ));
            continue;
        }
        if candidates
            .iter()
            .all(|node| !nodes::shortfalls(node, &want).is_empty())
        {
            let best = candidates
                .iter()
                .map(|node| (node.name_any(), nodes::shortfalls(node, &want)))
                .min_by_key(|(_, s)| s.len())
                .expect("some node");
            short.push(format!(
                "{point} fits no node ({}: {})",
                best.0,
                best.1.join(", ")
            ));
        }
    }
    if short.is_empty() {
        vec![Finding::pass(
            "allocatable",
            format!(
                "{}: every point's pod fits the allocatable of some node it may use",
                n.what
            ),
        )]
    } else {
        vec![Finding::fail(
            "allocatable",
            format!("{}: {}", n.what, short.join("; ")),
            "size the points to what the kubelet offers (allocatable = capacity less its reservations and the hugepages; kubectl describe node), or add bigger machines",
        )]
    }
}

/// The static CPU manager is on where it can be read, or at least possible (a CPU
/// reservation exists). Pure.
fn cpu_manager_finding(n: &Needs, eligible: &[&Node], configz: &Result<String, String>) -> Finding {
    let fix = "set cpuManagerPolicy: static and reservedSystemCPUs in the kubelet's configuration (docs/prepare-cluster.md), drain the node, remove /var/lib/kubelet/cpu_manager_state and restart the kubelet";
    if let Ok(policy) = configz {
        let node = eligible[0].name_any();
        return if policy.eq_ignore_ascii_case("static") {
            Finding::pass(
                "cpu-manager",
                format!(
                    "{}: {node}'s kubelet runs the static CPU manager policy",
                    n.what
                ),
            )
        } else {
            Finding::fail(
                "cpu-manager",
                format!(
                    "{}: {node}'s kubelet runs cpuManagerPolicy {policy}: validators get no cores of their own",
                    n.what
                ),
                fix,
            )
        };
    }
    let unreserved: Vec<String> = eligible
        .iter()
        .filter(|node| nodes::reserved_cpu(node) == 0)
        .map(|node| node.name_any())
        .collect();
    let unread = configz.as_ref().err().cloned().unwrap_or_default();
    if unreserved.is_empty() {
        Finding::pass(
            "cpu-manager",
            format!(
                "{}: every node it may use reserves CPUs for the system, as the static CPU manager needs (the kubelet's cpuManagerPolicy itself is not readable here: {unread})",
                n.what
            ),
        )
    } else {
        Finding::warn(
            "cpu-manager",
            format!(
                "{}: {} reserve no CPU, so their kubelet cannot run the static CPU manager policy (it refuses to start without a reservation): validators share cores",
                n.what,
                unreserved.join(", ")
            ),
            fix,
        )
    }
}

/// The kubelet's cpuManagerPolicy through the API server's node proxy.
async fn configz(client: &Client, node: &Node) -> Result<String, String> {
    let req = http::Request::get(format!("/api/v1/nodes/{}/proxy/configz", node.name_any()))
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let text = client.request_text(req).await.map_err(|e| match e {
        kube::Error::Api(s) => format!("/configz: {}", s.message),
        e => format!("/configz: {e}"),
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    Ok(v["kubeletconfig"]["cpuManagerPolicy"]
        .as_str()
        .unwrap_or("none")
        .to_string())
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

/// `MAJOR.MINOR` of a kernel release (`6.8.0-45-generic`), if it reads as one.
fn kernel_release(kernel: &str) -> Option<(u32, u32)> {
    let mut parts = kernel.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Whether a pod has its own network and a preflight that reads `net.core.rmem_max` there.
fn checks_buffers_in_own_network(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    !spec.and_then(|s| s.host_network).unwrap_or(false)
        && spec
            .and_then(|s| s.init_containers.as_ref())
            .into_iter()
            .flatten()
            .filter(|c| c.name == crate::clients::pod::PREFLIGHT_CONTAINER)
            .flat_map(|c| c.args.iter().flatten())
            .any(|a| a.contains("net/core/rmem_max"))
}

/// A pod with its own network sees `net.core.rmem_max` and `wmem_max` only on Linux 6.11
/// or later (commit 19249c0724f2, "net: make net.core.{r,w}mem_{default,max}
/// namespaced"); before, the preflight of a benchmark ends it NodeNotPrepared. Judged from
/// each node's `status.nodeInfo.kernelVersion` (the kubelet's `uname -r`).
fn netns_buffers_finding(n: &Needs, eligible: &[&Node]) -> Option<Finding> {
    if !n.pods.iter().any(|(_, p)| checks_buffers_in_own_network(p)) {
        return None;
    }
    let old: Vec<String> = eligible
        .iter()
        .filter_map(|node| {
            let kernel = node
                .status
                .as_ref()?
                .node_info
                .as_ref()?
                .kernel_version
                .clone();
            (kernel_release(&kernel)? < (6, 11)).then(|| format!("{} ({kernel})", node.name_any()))
        })
        .collect();
    let detail = format!(
        "{}: its pods have their own network, which shows net.core.rmem_max and wmem_max only on Linux 6.11 or later",
        n.what
    );
    let fix = "run it on nodes with Linux 6.11 or later (select them with template.placement.nodeSelector), or upgrade these nodes' kernels";
    Some(if old.is_empty() {
        Finding::pass("kernel", detail)
    } else if old.len() == eligible.len() {
        Finding::fail(
            "kernel",
            format!(
                "{detail}; every node it may use runs an older one: {}",
                old.join(", ")
            ),
            fix,
        )
    } else {
        Finding::warn(
            "kernel",
            format!(
                "{detail}; on these its preflight ends the trial NodeNotPrepared: {}",
                old.join(", ")
            ),
            fix,
        )
    })
}

async fn storage_checks(client: &Client, n: &Needs, eligible: &[&Node]) -> Vec<Finding> {
    let classes: Api<StorageClass> = Api::all(client.clone());
    let pvs = Api::<PersistentVolume>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut out = Vec::new();
    for (class, per_trial) in &n.storage_classes {
        let sc = classes.get_opt(class).await.ok().flatten();
        out.push(storage_finding(
            n,
            class,
            *per_trial,
            sc.as_ref(),
            &pvs,
            eligible,
        ));
    }
    out
}

/// The StorageClass exists, binds when the pod is scheduled, and has local volumes on the
/// nodes the trials may use. Pure.
fn storage_finding(
    n: &Needs,
    class: &str,
    per_trial: usize,
    sc: Option<&StorageClass>,
    pvs: &[PersistentVolume],
    eligible: &[&Node],
) -> Finding {
    let Some(sc) = sc else {
        return Finding::fail(
            "storage",
            format!(
                "{}: StorageClass {class} does not exist: trial volumes would stay Pending",
                n.what
            ),
            if class == STORAGE_CLASS {
                "kubectl apply -f manifests/prepare/local-nvme.yaml, and run the local static provisioner on the validator machines (docs/prepare-cluster.md)".to_string()
            } else {
                format!(
                    "create StorageClass {class}, or use local-nvme (template.storage[].storageClassName)"
                )
            },
        );
    };
    if sc.volume_binding_mode.as_deref() != Some("WaitForFirstConsumer") {
        return Finding::warn(
            "storage",
            format!(
                "{}: StorageClass {class} binds {}: a local volume may be bound on a node before the scheduler picks one for the pod",
                n.what,
                sc.volume_binding_mode.as_deref().unwrap_or("Immediate")
            ),
            "set volumeBindingMode: WaitForFirstConsumer (manifests/prepare/local-nvme.yaml)",
        );
    }
    let names: BTreeSet<String> = eligible.iter().map(|e| e.name_any()).collect();
    let on_node = |pv: &PersistentVolume| -> Option<String> {
        let spec = pv.spec.as_ref()?;
        if spec.storage_class_name.as_deref() != Some(class) {
            return None;
        }
        let terms = &spec
            .node_affinity
            .as_ref()?
            .required
            .as_ref()?
            .node_selector_terms;
        terms
            .iter()
            .flat_map(|t| t.match_expressions.iter().flatten())
            .filter(|e| e.key == "kubernetes.io/hostname" && e.operator == "In")
            .flat_map(|e| e.values.iter().flatten())
            .find(|v| names.contains(*v))
            .cloned()
    };
    let mut total = 0;
    let mut available: BTreeMap<String, usize> = BTreeMap::new();
    for pv in pvs {
        if let Some(node) = on_node(pv) {
            total += 1;
            if pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available") {
                *available.entry(node).or_default() += 1;
            }
        }
    }
    // A provisioner with dynamic volumes needs no PersistentVolumes ahead of time.
    if sc.provisioner != "kubernetes.io/no-provisioner" {
        return Finding::pass(
            "storage",
            format!(
                "{}: StorageClass {class} ({}) binds when the pod is scheduled",
                n.what, sc.provisioner
            ),
        );
    }
    if total == 0 {
        return Finding::fail(
            "storage",
            format!(
                "{}: no PersistentVolume of StorageClass {class} on the nodes the trials may use",
                n.what
            ),
            "mount each NVMe under the local static provisioner's discovery directory and run the provisioner with the validator taint tolerated (docs/prepare-cluster.md)",
        );
    }
    let room = available.values().filter(|c| **c >= per_trial).count();
    if room == 0 {
        return Finding::warn(
            "storage",
            format!(
                "{}: {total} volumes of {class} on its nodes, but none has {per_trial} Available now (in use by running trials?)",
                n.what
            ),
            "wait for running trials to release their volumes, or add disks",
        );
    }
    Finding::pass(
        "storage",
        format!(
            "{}: StorageClass {class}, WaitForFirstConsumer; {room} nodes have {per_trial} Available volumes",
            n.what
        ),
    )
}

/// The Linux capabilities Pod Security's baseline level allows
/// (kubernetes/pod-security-admission v0.34.0 policy/check_capabilities_baseline.go).
const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// What of a pod the baseline level refuses (host namespaces, host ports and paths,
/// privileged containers, capabilities beyond baseline's). Pure.
pub fn beyond_baseline(pod: &Pod) -> Vec<String> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if spec.host_network == Some(true) {
        out.push("hostNetwork".to_string());
    }
    if spec.volumes.iter().flatten().any(|v| v.host_path.is_some()) {
        out.push("hostPath volumes".into());
    }
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let sc = c.security_context.as_ref();
        if sc.and_then(|s| s.privileged) == Some(true) {
            out.push(format!("{} is privileged", c.name));
        }
        for cap in sc
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|c| c.add.as_ref())
            .into_iter()
            .flatten()
        {
            let cap = cap.trim_start_matches("CAP_");
            if !BASELINE_CAPABILITIES.contains(&cap) {
                out.push(format!("{} adds {cap}", c.name));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn pod_security_finding(
    n: &Needs,
    ns: &str,
    ns_labels: Option<&BTreeMap<String, String>>,
) -> Option<Finding> {
    let level = ns_labels
        .and_then(|l| l.get(PSA_ENFORCE))
        .map(String::as_str);
    let needs: BTreeSet<String> = if n.pods.is_empty() {
        // The examples: Agave runs with host networking.
        BTreeSet::from(["hostNetwork (Agave)".to_string()])
    } else {
        n.pods
            .iter()
            .flat_map(|(_, p)| beyond_baseline(p))
            .collect()
    };
    let fix = format!("kubectl label namespace {ns} {PSA_ENFORCE}=privileged --overwrite");
    match (level, needs.is_empty()) {
        (Some("baseline" | "restricted"), false) => Some(Finding::fail(
            "pod-security",
            format!(
                "{}: namespace {ns} enforces Pod Security {}, which refuses {}",
                n.what,
                level.unwrap_or_default(),
                needs.into_iter().collect::<Vec<_>>().join(", ")
            ),
            fix,
        )),
        (Some(l), _) => Some(Finding::pass(
            "pod-security",
            format!("{}: namespace {ns} enforces Pod Security {l}", n.what),
        )),
        (None, false) if ns_labels.is_none() => Some(Finding::warn(
            "pod-security",
            format!("{}: namespace {ns} does not exist yet", n.what),
            format!("kubectl create namespace {ns}; {fix}"),
        )),
        (None, _) => Some(Finding::pass(
            "pod-security",
            format!(
                "{}: namespace {ns} sets no enforce level (the cluster's default applies, privileged unless your admission configuration says otherwise)",
                n.what
            ),
        )),
    }
}

/// Whether any finding failed.
pub fn failed(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.status == Status::Fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn needs() -> Needs {
        conventions(&Options {
            namespace: "validators".into(),
            ..Default::default()
        })
    }

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

    #[test]
    fn a_missing_storage_class_names_the_manifest_to_apply() {
        let f = storage_finding(&needs(), "local-nvme", 1, None, &[], &[]);
        assert_eq!(f.status, Status::Fail);
        assert!(f.fix.unwrap().contains("manifests/prepare/local-nvme.yaml"));
        let immediate: StorageClass = serde_saphyr::from_str(
            "metadata: {name: local-nvme}\nprovisioner: kubernetes.io/no-provisioner\n",
        )
        .unwrap();
        let f = storage_finding(&needs(), "local-nvme", 1, Some(&immediate), &[], &[]);
        assert_eq!(f.status, Status::Warn);
    }

    #[test]
    fn host_networking_and_extra_capabilities_need_the_privileged_level() {
        let pod: Pod = serde_saphyr::from_str(
            "spec:\n  hostNetwork: true\n  containers:\n  - name: v\n    securityContext: {capabilities: {add: [NET_RAW, CHOWN, CAP_SYS_ADMIN]}}\n",
        )
        .unwrap();
        assert_eq!(
            beyond_baseline(&pod),
            vec!["hostNetwork", "v adds NET_RAW", "v adds SYS_ADMIN"]
        );
        let mut n = needs();
        n.pods = vec![("p".into(), pod)];
        let baseline = BTreeMap::from([(PSA_ENFORCE.to_string(), "baseline".to_string())]);
        let f = pod_security_finding(&n, "validators", Some(&baseline)).unwrap();
        assert_eq!(f.status, Status::Fail);
        assert_eq!(
            f.fix.unwrap(),
            "kubectl label namespace validators pod-security.kubernetes.io/enforce=privileged --overwrite"
        );
    }

    #[test]
    fn a_benchmark_in_its_own_network_needs_linux_6_11() {
        let bench: Pod = serde_saphyr::from_str(
            "spec:\n  initContainers:\n  - name: preflight\n    args: ['need net.core.rmem_max \"$(val net/core/rmem_max)\" 134217728']\n  containers: [{name: v}]\n",
        )
        .unwrap();
        let node = |name: &str, kernel: &str| -> Node {
            serde_saphyr::from_str(&format!(
                "metadata: {{name: {name}}}\nstatus: {{nodeInfo: {{kernelVersion: '{kernel}', architecture: amd64, bootID: '', containerRuntimeVersion: '', kubeProxyVersion: '', kubeletVersion: '', machineID: '', operatingSystem: linux, osImage: '', systemUUID: ''}}}}\n"
            ))
            .unwrap()
        };
        let (old, new) = (
            node("a", "6.8.0-45-generic"),
            node("b", "6.14.0-29-generic"),
        );
        let mut n = needs();
        assert!(
            netns_buffers_finding(&n, &[&old]).is_none(),
            "no pods, nothing to judge"
        );
        n.pods = vec![("p".into(), bench.clone())];
        let f = netns_buffers_finding(&n, &[&old]).unwrap();
        assert_eq!(f.status, Status::Fail, "{f:?}");
        assert!(f.detail.ends_with("a (6.8.0-45-generic)"), "{}", f.detail);
        assert_eq!(
            netns_buffers_finding(&n, &[&old, &new]).unwrap().status,
            Status::Warn
        );
        assert_eq!(
            netns_buffers_finding(&n, &[&new]).unwrap().status,
            Status::Pass
        );
        // The node's network (a follower) has them on any kernel.
        let mut follower = bench;
        follower.spec.as_mut().unwrap().host_network = Some(true);
        n.pods = vec![("p".into(), follower)];
        assert!(netns_buffers_finding(&n, &[&old]).is_none());
    }

    #[test]
    fn no_reserved_cpu_means_no_static_cpu_manager() {
        let node: Node = serde_saphyr::from_str(
            "metadata: {name: n1}\nstatus: {capacity: {cpu: '64'}, allocatable: {cpu: '64'}}\n",
        )
        .unwrap();
        let f = cpu_manager_finding(&needs(), &[&node], &Err("forbidden".into()));
        assert_eq!(f.status, Status::Warn);
        assert!(f.detail.contains("n1 reserve no CPU"), "{}", f.detail);
        let f = cpu_manager_finding(&needs(), &[&node], &Ok("none".into()));
        assert_eq!(f.status, Status::Fail);
    }

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
