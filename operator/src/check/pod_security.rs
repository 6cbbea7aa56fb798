//! `valtune check`'s Pod Security check: the namespace's enforced level admits what the
//! experiments' pods need (host networking, host paths, capabilities beyond baseline's).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;

use super::Finding;
use super::cluster::Needs;

/// Pod Security Admission's namespace label (kubernetes/pod-security-admission).
const PSA_ENFORCE: &str = "pod-security.kubernetes.io/enforce";

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

pub(super) fn pod_security_finding(
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

#[cfg(test)]
mod tests {
    use super::super::cluster::example_needs as needs;
    use super::*;
    use crate::check::Status;

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
}
