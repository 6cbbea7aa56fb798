//! The swap a nodeos trial gets on its node, against what it may need, checked once the
//! pod is bound and before anything is measured.
//!
//! The kubelet grants swap by the node, not by the trial: under LimitedSwap a Burstable
//! pod's container whose memory request differs from its limit gets
//! `request / node memory x node swap` (kubernetes pkg/kubelet/kuberuntime/
//! kuberuntime_container_linux.go `calcSwapForBurstablePods`, v1.34), where node memory
//! and node swap are cAdvisor's `MachineInfo.MemoryCapacity` and `SwapCapacity`: what the
//! Node reports as `status.capacity.memory` (pkg/kubelet/cadvisor/util.go
//! `CapacityFromMachineInfo`) and `status.nodeInfo.swap.capacity` (Kubernetes 1.30+). So
//! the same 8Gi request gets 32 GiB on a 64 GiB machine with 256 GiB of swap and 1 GiB on
//! a 512 GiB machine with 64 GiB.
//!
//! What the trial may need: whatever of the state can be in memory that swap backs (a
//! node tmpfs, or the heap copy of `databaseMapMode: heap`) and does not fit the memory
//! limit beside the rest. As admission sizes the state everywhere else, that is
//! `chainStateDbSizeMb` (the size nodeos lets it reach), the 1 GiB EOS VM OC cache in the
//! state directory on a tmpfs, nodeos' own 2 GiB and the memory hog, less the limit. A
//! grant below it can OOM-kill nodeos part way through a long window for a reason that
//! is the node's, not the knob's: the trial ends `NodeNotPrepared` saying what it got,
//! what it may need, and the fixes.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;

use super::{NodeosMapMode, NodeosSpec, SWAP_LABEL, StateMedium, VALIDATOR_CONTAINER, plan};
use crate::api::quantity::{Bytes, parse_quantity};
use crate::api::template::ValidatorTemplate;
use crate::clients::NodeCheck;
use crate::finding::Finding;

const MIB: u128 = 1 << 20;
/// nodeos' own memory beside its state, as admission counts it (rules.rs).
const NODEOS_MIB: u128 = 2048;

/// What LimitedSwap gives a container (`calcSwapForBurstablePods`; 0 when the request is
/// larger than the node's memory, which the kubelet treats as an error and gives none).
pub fn granted(request: u128, node_memory: u128, node_swap: u128) -> u128 {
    if node_memory == 0 || request > node_memory {
        return 0;
    }
    (request as f64 / node_memory as f64 * node_swap as f64) as u128
}

/// The swap the trial may need beyond its memory limit, and how it is made up; None when
/// no part of the state lives in memory that swap backs.
pub fn needed(template: &ValidatorTemplate, spec: &NodeosSpec) -> Option<(u128, String)> {
    let p = plan(template, spec).ok()?;
    let tmpfs = spec.state.medium == StateMedium::HostTmpfs;
    if !p.swap || !(tmpfs || p.mode == NodeosMapMode::Heap) {
        return None;
    }
    let db = spec.chain_state_db_size_mb.max(0) as u128 * MIB;
    let cache = if tmpfs {
        super::render::OC_CACHE_MIB as u128 * MIB
    } else {
        0
    };
    let total = db + cache + NODEOS_MIB * MIB + p.hog;
    let why = format!(
        "chainStateDbSizeMb {}{} + 2Gi nodeos + memoryPressure {} - memoryLimit {}",
        spec.chain_state_db_size_mb,
        if tmpfs { " + 1Gi OC cache" } else { "" },
        Bytes(p.hog),
        Bytes(p.budget),
    );
    Some((total.saturating_sub(p.budget), why))
}

/// The node's memory and swap capacity as its kubelet reports them.
pub fn node_capacity(node: &Node) -> (u128, Option<u128>) {
    let status = node.status.as_ref();
    let memory = status
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("memory"))
        .and_then(|q| parse_quantity(&q.0).ok())
        .unwrap_or(0);
    let swap = status
        .and_then(|s| s.node_info.as_ref())
        .and_then(|i| i.swap.as_ref())
        .and_then(|s| s.capacity)
        .map(|b| b.max(0) as u128);
    (memory, swap)
}

/// The nodeos container's memory request, as the kubelet reads it from the pod.
fn request(pod: &Pod) -> Option<u128> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == VALIDATOR_CONTAINER)?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("memory")
        .and_then(|q| parse_quantity(&q.0).ok())
}

/// Why the trial's pod cannot get the swap it may need on `node`, if it cannot.
pub fn shortfall(
    template: &ValidatorTemplate,
    spec: &NodeosSpec,
    pod: &Pod,
    node: &Node,
) -> Option<String> {
    let (need, why) = needed(template, spec)?;
    let request = request(pod)?;
    let (memory, swap) = node_capacity(node);
    let got = granted(request, memory, swap.unwrap_or(0));
    if got >= need {
        return None;
    }
    let gib = |b: u128| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64);
    let reported = match swap {
        Some(s) => format!("node memory {} x node swap {}", Bytes(memory), Bytes(s)),
        None => format!(
            "node memory {}, and the node reports no swap (status.nodeInfo.swap.capacity, Kubernetes 1.30+)",
            Bytes(memory)
        ),
    };
    // The request that would be enough on this node, if one below the limit is (the
    // request stays 1Gi below it for the sidecars: admission).
    let limit = plan(template, spec).ok()?.budget;
    let enough = swap
        .filter(|s| *s > 0)
        .map(|s| ((need as f64 / s as f64 * memory as f64).ceil() as u128).div_ceil(1 << 30) << 30)
        .filter(|r| r + (1 << 30) <= limit)
        .map(|r| {
            format!(
                "raise template.resources.memory (the request) to at least {} on this node, ",
                Bytes(r)
            )
        })
        .unwrap_or_default();
    Some(format!(
        "the kubelet grants nodeos {} of swap (LimitedSwap: request {} / {}), and the state may need {} beyond the memory limit ({why}): {enough}run on nodes with more swap per GiB of memory, or lower chainStateDbSizeMb toward the state's size (docs/clients/nodeos.md, sizing swap)",
        gib(got),
        Bytes(request),
        reported,
        gib(need),
    ))
}

/// `valtune check`: nodeos' swap trials need nodes prepared for LimitedSwap
/// (docs/clients/nodeos.md), and each point the swap it may need there. Pure.
pub fn finding(n: &NodeCheck) -> Finding {
    let eligible = n.eligible;
    let (label, value) = SWAP_LABEL;
    let prepared: Vec<String> = eligible
        .iter()
        .filter(|node| {
            node.labels().get(label).map(String::as_str) == Some(value)
                && node_capacity(node).1.unwrap_or(0) > 0
        })
        .map(|node| node.name_any())
        .collect();
    if prepared.is_empty() {
        return Finding::fail(
            "swap",
            format!(
                "{}: swap: true, and no node it may use is labelled {label}={value} with swap (status.nodeInfo.swap.capacity)",
                n.what
            ),
            "prepare swap nodes as docs/clients/nodeos.md says (swap, failSwapOn: false, memorySwap.swapBehavior: LimitedSwap), then kubectl label node NODE valtune.dev/swap=LimitedSwap",
        );
    }
    let prepared: Vec<&&Node> = eligible
        .iter()
        .filter(|node| prepared.contains(&node.name_any()))
        .collect();
    // What the kubelet grants each point there, as the trial checks it once bound.
    let listed: Vec<String> = prepared
        .iter()
        .map(|node| {
            let (memory, swap) = node_capacity(node);
            format!(
                "{} ({} memory, {} swap)",
                node.name_any(),
                Bytes(memory),
                Bytes(swap.unwrap_or(0))
            )
        })
        .collect();
    let mut short = Vec::new();
    for ((point, pod), t) in n.points.iter().zip(n.templates) {
        let Some(spec) = t.client.nodeos.as_ref() else {
            continue;
        };
        let on: Vec<(String, String)> = prepared
            .iter()
            .filter_map(|node| shortfall(t, spec, pod, node).map(|why| (node.name_any(), why)))
            .collect();
        if on.len() == prepared.len()
            && let Some((node, why)) = on.first()
        {
            return Finding::fail(
                "swap",
                format!(
                    "{}: point {point} would end NodeNotPrepared on every swap node: node {node}: {why}",
                    n.what
                ),
                "prepare nodes whose swap per GiB of memory grants it, or size the request and chainStateDbSizeMb as docs/clients/nodeos.md (Sizing swap) says",
            );
        }
        if !on.is_empty() {
            let nodes: Vec<&str> = on.iter().map(|(node, _)| node.as_str()).collect();
            short.push(format!("{point} on {}", nodes.join(", ")));
        }
    }
    let detail = format!("{}: swap nodes: {}", n.what, listed.join(", "));
    if short.is_empty() {
        Finding::pass("swap", detail)
    } else {
        Finding::warn(
            "swap",
            format!("{detail}; too little swap granted for {}", short.join("; ")),
            "taint or relabel the nodes that grant too little, or size the request as docs/clients/nodeos.md (Sizing swap) says: a trial bound there ends NodeNotPrepared",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Status;

    fn template(yaml: &str) -> ValidatorTemplate {
        serde_saphyr::from_str(yaml).unwrap()
    }

    const WAX: &str = "nodeos:\n  image: waxteam/waxnode:v5.0.3wax02\n  chainStateDbSizeMb: 49152\n  state: {medium: hostTmpfs, hostPath: /srv/nodeos-state}\n  swap: true\nresources: {cpu: 8, memory: 12Gi, memoryLimit: 16Gi}\ntuning: {memoryPressure: 8Gi}\n";

    fn node(memory: &str, swap: Option<&str>) -> Node {
        let swap = swap
            .map(|s| {
                format!(
                    "  nodeInfo: {{swap: {{capacity: {}}}}}\n",
                    parse_quantity(s).unwrap()
                )
            })
            .unwrap_or_default();
        serde_saphyr::from_str(&format!(
            "metadata: {{name: n}}\nstatus:\n  capacity: {{memory: {memory}}}\n{swap}"
        ))
        .unwrap()
    }

    fn pod(request: &str) -> Pod {
        serde_saphyr::from_str(&format!(
            "metadata: {{name: p}}\nspec:\n  containers:\n  - name: nodeos\n    resources: {{requests: {{memory: {request}}}, limits: {{memory: 16Gi}}}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn the_kubelets_share_of_the_nodes_swap() {
        let gib = 1u128 << 30;
        assert_eq!(granted(8 * gib, 64 * gib, 256 * gib), 32 * gib);
        assert_eq!(granted(8 * gib, 512 * gib, 64 * gib), gib);
        assert_eq!(granted(8 * gib, 0, 64 * gib), 0);
        assert_eq!(granted(600 * gib, 512 * gib, 64 * gib), 0);
    }

    #[test]
    fn the_state_beyond_the_limit_is_what_swap_must_back() {
        let t = template(WAX);
        let spec = t.client.nodeos.clone().unwrap();
        let (need, why) = needed(&t, &spec).unwrap();
        // 48 + 1 + 2 + 8 - 16 = 43 GiB.
        assert_eq!(need, 43u128 << 30);
        assert!(
            why.contains("memoryPressure 8Gi - memoryLimit 16Gi"),
            "{why}"
        );
        // On disk, mapped: the page cache holds it, swap does not.
        let disk = template(&WAX.replace(
            "{medium: hostTmpfs, hostPath: /srv/nodeos-state}",
            "{medium: disk}",
        ));
        assert_eq!(needed(&disk, &disk.client.nodeos.clone().unwrap()), None);
    }

    #[test]
    fn a_big_node_grants_too_little_and_says_what_would_do() {
        let t = template(WAX);
        let spec = t.client.nodeos.clone().unwrap();
        // 12Gi of a 63Gi node's 256Gi: 48.8 GiB, enough.
        assert_eq!(
            shortfall(&t, &spec, &pod("12Gi"), &node("63Gi", Some("256Gi"))),
            None
        );
        // 12Gi of a 512Gi node's 64Gi: 1.5 GiB.
        let m = shortfall(&t, &spec, &pod("12Gi"), &node("512Gi", Some("64Gi"))).unwrap();
        assert!(
            m.starts_with("the kubelet grants nodeos 1.5 GiB of swap (LimitedSwap: request 12Gi / node memory 512Gi x node swap 64Gi), and the state may need 43.0 GiB beyond the memory limit"),
            "{m}"
        );
        // No request below the 16Gi limit is enough there.
        assert!(!m.contains("raise template.resources.memory"), "{m}");
        // 2Gi of a 63Gi node's 256Gi: 8.1 GiB; 11Gi would do.
        let m = shortfall(&t, &spec, &pod("2Gi"), &node("63Gi", Some("256Gi"))).unwrap();
        assert!(
            m.contains("grants nodeos 8.1 GiB") && m.contains("to at least 11Gi on this node"),
            "{m}"
        );
        let m = shortfall(&t, &spec, &pod("12Gi"), &node("63Gi", None)).unwrap();
        assert!(m.contains("the node reports no swap"), "{m}");
    }

    #[test]
    fn swap_nodes_are_listed_with_what_they_grant_each_point() {
        let template: ValidatorTemplate = serde_saphyr::from_str(
            "nodeos:\n  image: waxteam/waxnode:v5.0.3wax02\n  chainStateDbSizeMb: 49152\n  state: {medium: hostTmpfs, hostPath: /srv/nodeos-state}\n  swap: true\nresources: {cpu: 8, memory: 12Gi, memoryLimit: 16Gi}\ntuning: {memoryPressure: 8Gi}\n",
        )
        .unwrap();
        let pod: Pod = serde_saphyr::from_str(
            "metadata: {name: p}\nspec:\n  containers:\n  - name: nodeos\n    resources: {requests: {memory: 12Gi}, limits: {memory: 16Gi}}\n",
        )
        .unwrap();
        let node = |name: &str, memory: &str, swap: u64| -> Node {
            serde_saphyr::from_str(&format!(
                "metadata: {{name: {name}, labels: {{valtune.dev/swap: LimitedSwap}}}}\nstatus:\n  capacity: {{memory: {memory}}}\n  nodeInfo: {{swap: {{capacity: {swap}}}}}\n"
            ))
            .unwrap()
        };
        let small = node("wax-01", "63Gi", 256 << 30);
        let big = node("big-01", "512Gi", 64 << 30);
        let points = vec![("memoryPressure=8Gi".to_string(), pod)];
        let templates = vec![template.clone()];
        let check = |eligible: &[&Node]| {
            finding(&NodeCheck {
                what: "experiment wax",
                template: &template,
                points: &points,
                templates: &templates,
                eligible,
            })
        };
        let f = check(&[&small]);
        assert_eq!(f.status, Status::Pass, "{f:?}");
        assert!(
            f.detail
                .ends_with("swap nodes: wax-01 (63Gi memory, 256Gi swap)"),
            "{f:?}"
        );
        let f = check(&[&small, &big]);
        assert_eq!(f.status, Status::Warn, "{f:?}");
        assert!(
            f.detail
                .ends_with("too little swap granted for memoryPressure=8Gi on big-01"),
            "{f:?}"
        );
        let f = check(&[&big]);
        assert_eq!(f.status, Status::Fail, "{f:?}");
        assert!(f.detail.contains("would end NodeNotPrepared on every swap node: node big-01: the kubelet grants nodeos 1.5 GiB of swap"), "{f:?}");
    }
}
