//! `valtune check`'s node checks: enough prepared nodes for the placement, room for each
//! point's pod, the kubelet's static CPU manager, and the kernel a pod in its own network
//! needs. Pure, but for the kubelet's configuration read through the API server.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Client, ResourceExt};

use super::Finding;
use super::cluster::{NODE_LABEL, NODE_TAINT, Needs};
use super::nodes::{self, Amounts};

/// Enough prepared nodes for the needs' placement. Pure.
pub(super) fn node_finding(n: &Needs, eligible: &[&Node]) -> Finding {
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
pub(super) fn fit_findings(n: &Needs, eligible: &[&Node], all: &[&Node]) -> Vec<Finding> {
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
pub(super) fn cpu_manager_finding(
    n: &Needs,
    eligible: &[&Node],
    configz: &Result<String, String>,
) -> Finding {
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
pub(super) async fn configz(client: &Client, node: &Node) -> Result<String, String> {
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

/// `MAJOR.MINOR` of a kernel release (`6.8.0-45-generic`), if it reads as one.
pub(super) fn kernel_release(kernel: &str) -> Option<(u32, u32)> {
    let mut parts = kernel.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Whether a pod has its own network and a preflight that reads `net.core.rmem_max` there.
pub(super) fn checks_buffers_in_own_network(pod: &Pod) -> bool {
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
pub(super) fn netns_buffers_finding(n: &Needs, eligible: &[&Node]) -> Option<Finding> {
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

#[cfg(test)]
mod tests {
    use super::super::cluster::example_needs as needs;
    use super::*;
    use crate::check::Status;

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
}
