//! What nodes offer a trial's pod, read from the Node objects as the scheduler reads them.
//! Pure.
//!
//! - A pod lands only on nodes whose labels match its nodeSelector and whose NoSchedule
//!   and NoExecute taints it tolerates.
//! - It fits when its effective request fits the node's allocatable, resource by
//!   resource. The effective request is the larger of the sum of its containers plus its
//!   native sidecars and the largest ordinary init container (kubernetes/website
//!   concepts/workloads/pods/sidecar-containers.md, "Resource sharing within
//!   containers"); pod-level `spec.resources` replace the containers' cpu and memory
//!   (Kubernetes 1.34, PodLevelResources).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Node, Pod, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::api::quantity::{Bytes, parse_quantity};

/// Resources by name, in millicores for cpu and plain units (bytes, counts) otherwise.
pub type Amounts = BTreeMap<String, u128>;

/// A quantity in the unit [`Amounts`] uses for `resource`.
pub fn amount(resource: &str, q: &Quantity) -> Option<u128> {
    if resource == "cpu" {
        return millicores(&q.0);
    }
    parse_quantity(&q.0).ok()
}

fn millicores(q: &str) -> Option<u128> {
    match q.strip_suffix('m') {
        Some(m) => m.parse().ok(),
        None => q.parse::<f64>().ok().map(|c| (c * 1000.0).round() as u128),
    }
}

/// An amount as people write it.
pub fn show(resource: &str, v: u128) -> String {
    match resource {
        "cpu" if v.is_multiple_of(1000) => format!("{}", v / 1000),
        "cpu" => format!("{v}m"),
        "memory" | "ephemeral-storage" => gib(v),
        r if r.starts_with("hugepages-") => gib(v),
        _ => v.to_string(),
    }
}

/// Exact when a whole unit fits ("1400Gi"), else GiB to a tenth ("1435.9Gi").
fn gib(v: u128) -> String {
    let exact = Bytes(v).to_string();
    if exact.ends_with('i') || v < 1 << 30 {
        return exact;
    }
    format!("{:.1}Gi", v as f64 / (1u64 << 30) as f64)
}

fn requests(c: &Container) -> Amounts {
    let mut out = Amounts::new();
    let r = c.resources.as_ref();
    // A limit without a request is the request (the API server defaults it so).
    for map in [
        r.and_then(|r| r.limits.as_ref()),
        r.and_then(|r| r.requests.as_ref()),
    ]
    .into_iter()
    .flatten()
    {
        for (k, q) in map {
            if let Some(v) = amount(k, q) {
                out.insert(k.clone(), v);
            }
        }
    }
    out
}

fn add(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

/// The pod's effective request, resource by resource.
pub fn pod_requests(pod: &Pod) -> Amounts {
    let Some(spec) = &pod.spec else {
        return Amounts::new();
    };
    let mut running = Amounts::new();
    for c in &spec.containers {
        add(&mut running, &requests(c));
    }
    let mut init_peak = Amounts::new();
    let mut sidecars = Amounts::new();
    for c in spec.init_containers.iter().flatten() {
        let r = requests(c);
        if c.restart_policy.as_deref() == Some("Always") {
            // A native sidecar runs beside everything started after it.
            add(&mut sidecars, &r);
        } else {
            let mut at_start = sidecars.clone();
            add(&mut at_start, &r);
            for (k, v) in at_start {
                let e = init_peak.entry(k).or_default();
                *e = (*e).max(v);
            }
        }
    }
    add(&mut running, &sidecars);
    if let Some(pod_level) = spec.resources.as_ref() {
        let pod_requests = requests(&Container {
            resources: Some(pod_level.clone()),
            ..Default::default()
        });
        for k in ["cpu", "memory"] {
            if let Some(v) = pod_requests.get(k) {
                running.insert(k.into(), *v);
            }
        }
    }
    for (k, v) in init_peak {
        let e = running.entry(k).or_default();
        *e = (*e).max(v);
    }
    running
}

/// What a node's status says it has (`capacity`) or offers pods (`allocatable`).
pub fn node_amounts(node: &Node, allocatable: bool) -> Amounts {
    let status = node.status.as_ref();
    let map = if allocatable {
        status.and_then(|s| s.allocatable.as_ref())
    } else {
        status.and_then(|s| s.capacity.as_ref())
    };
    map.iter()
        .flat_map(|m| m.iter())
        .filter_map(|(k, q)| Some((k.clone(), amount(k, q)?)))
        .collect()
}

/// What the pod lacks on the node, resource by resource ("cpu: 64 requested, 62
/// allocatable"); empty when it fits. (Other pods on the node are not counted: this says
/// whether it can ever fit.)
pub fn shortfalls(node: &Node, want: &Amounts) -> Vec<String> {
    let have = node_amounts(node, true);
    want.iter()
        .filter(|(_, v)| **v > 0)
        .filter_map(|(k, v)| {
            let a = have.get(k).copied().unwrap_or(0);
            (a < *v).then(|| format!("{k}: {} requested, {} allocatable", show(k, *v), show(k, a)))
        })
        .collect()
}

/// Whether the pod's tolerations let it onto a node with these taints.
pub fn tolerates(tolerations: &[Toleration], node: &Node) -> bool {
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|t| {
            tolerations.iter().any(|tol| {
                let key = tol.key.as_deref().unwrap_or("");
                let exists = tol.operator.as_deref() == Some("Exists");
                let key_ok = (key.is_empty() && exists) || key == t.key;
                let value_ok = exists
                    || tol.value.as_deref().unwrap_or("") == t.value.as_deref().unwrap_or("");
                let effect_ok = tol
                    .effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == t.effect);
                key_ok && value_ok && effect_ok
            })
        })
}

/// Whether a pod with this nodeSelector and these tolerations may land on the node.
pub fn eligible(
    node: &Node,
    selector: &BTreeMap<String, String>,
    tolerations: &[Toleration],
) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    selector.iter().all(|(k, v)| labels.get(k) == Some(v)) && tolerates(tolerations, node)
}

/// CPUs the kubelet keeps from pods (capacity less allocatable), in millicores. The
/// static CPU manager refuses to start without such a reservation
/// (pkg/kubelet/cm/cpumanager/cpu_manager.go), so none means the policy is not static.
pub fn reserved_cpu(node: &Node) -> u128 {
    let cap = node_amounts(node, false).get("cpu").copied().unwrap_or(0);
    let alloc = node_amounts(node, true).get("cpu").copied().unwrap_or(0);
    cap.saturating_sub(alloc)
}

/// The node's swap as its kubelet reports it (`status.nodeInfo.swap.capacity`, 1.33+).
pub fn swap_bytes(node: &Node) -> Option<i64> {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .and_then(|i| i.swap.as_ref())
        .and_then(|s| s.capacity)
}

/// Whether the node is Ready.
pub fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(yaml: &str) -> Node {
        serde_saphyr::from_str(yaml).unwrap()
    }

    const R6A: &str = "metadata: {name: bm-01, labels: {valtune.dev/bare-metal: 'true'}}\nspec:\n  taints: [{key: valtune.dev/validator, value: 'true', effect: NoSchedule}]\nstatus:\n  capacity: {cpu: '192', memory: 1512Gi, hugepages-1Gi: 64Gi}\n  allocatable: {cpu: '190', memory: 1505652736Ki, hugepages-1Gi: 64Gi}\n  conditions: [{type: Ready, status: 'True'}]\n";

    fn pod(yaml: &str) -> Pod {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn sidecars_add_up_and_init_steps_take_the_peak() {
        let p = pod(
            "spec:\n  initContainers:\n  - {name: preflight, resources: {requests: {cpu: 100m, memory: 256Mi}}}\n  - {name: exporter, restartPolicy: Always, resources: {limits: {cpu: 100m, memory: 256Mi}}}\n  - {name: big-init, resources: {requests: {cpu: '100', memory: 1Gi}}}\n  containers:\n  - {name: validator, resources: {requests: {cpu: '64', memory: 1400Gi}}}\n",
        );
        let r = pod_requests(&p);
        // The big init step (100 + the sidecar started before it) beats 64.1 running.
        assert_eq!(r["cpu"], 100_100);
        assert_eq!(r["memory"], (1400u128 << 30) + (256 << 20));
    }

    #[test]
    fn pod_level_resources_replace_the_containers_cpu_and_memory() {
        let p = pod(
            "spec:\n  resources: {requests: {cpu: 8200m, memory: 8704Mi}, limits: {memory: 16Gi}}\n  containers:\n  - {name: nodeos, resources: {requests: {cpu: '8', memory: 8Gi}}}\n  - {name: hog, resources: {requests: {cpu: '1', memory: 64Mi}}}\n",
        );
        let r = pod_requests(&p);
        assert_eq!(r["cpu"], 8200);
        assert_eq!(r["memory"], 8704 << 20);
    }

    #[test]
    fn the_papers_one_and_a_half_tebibytes_do_not_fit_a_real_r6a() {
        let n = node(R6A);
        let mut want = Amounts::from([("cpu".into(), 64_300), ("memory".into(), 1536u128 << 30)]);
        assert_eq!(
            shortfalls(&n, &want),
            vec!["memory: 1536Gi requested, 1435.9Gi allocatable"]
        );
        want.insert("memory".into(), 1401u128 << 30);
        assert!(shortfalls(&n, &want).is_empty());
        want.insert("cpu".into(), 192_000);
        assert_eq!(
            shortfalls(&n, &want),
            vec!["cpu: 192 requested, 190 allocatable"]
        );
        assert_eq!(reserved_cpu(&n), 2000);
        assert!(ready(&n));
    }

    #[test]
    fn taints_need_a_toleration_and_labels_a_match() {
        let n = node(R6A);
        let sel = BTreeMap::from([("valtune.dev/bare-metal".to_string(), "true".to_string())]);
        let tol: Vec<Toleration> = serde_saphyr::from_str(
            "- {key: valtune.dev/validator, operator: Exists, effect: NoSchedule}",
        )
        .unwrap();
        assert!(eligible(&n, &sel, &tol));
        assert!(!eligible(&n, &sel, &[]));
        let other = BTreeMap::from([("pool".to_string(), "x".to_string())]);
        assert!(!eligible(&n, &other, &tol));
        let equal: Vec<Toleration> =
            serde_saphyr::from_str("- {key: valtune.dev/validator, value: 'false'}").unwrap();
        assert!(!tolerates(&equal, &n));
        let all: Vec<Toleration> = serde_saphyr::from_str("- {operator: Exists}").unwrap();
        assert!(tolerates(&all, &n));
    }
}
