//! Is this cluster ready for valtune's experiments? What `valtune check` runs (with the
//! user's kubeconfig) and, for its Prometheus part, the operator at start-up and before an
//! experiment starts trials (controller/preflight.rs). Each failed check names what to run
//! to fix it; docs/prepare-cluster.md explains each.
//!
//! The cluster is read through the API (CRDs, Nodes, StorageClasses, PersistentVolumes,
//! Namespaces, prometheus-operator's Prometheus resources) and Prometheus through its HTTP
//! API; the kubelet's own configuration only where the API server's node proxy serves it
//! (`/api/v1/nodes/NODE/proxy/configz`, which needs `get nodes/proxy`).

mod cluster;
mod monitoring;
mod node_fit;
mod pod_security;
pub mod selection;
mod storage;

// The node and Prometheus reads the operator shares (readiness/), under their old names.
pub use crate::readiness::{nodes, prometheus};

pub use crate::finding::{Finding, Status};
pub use cluster::{Options, failed, run};
pub use pod_security::beyond_baseline;

/// The findings as printed: one line each, the fix below. Pure.
pub fn render(findings: &[Finding]) -> String {
    let width = findings.iter().map(|f| f.check.len()).max().unwrap_or(0);
    let mut out = String::new();
    for f in findings {
        out.push_str(&format!(
            "{}  {:<width$}  {}\n",
            f.status.as_str(),
            f.check,
            f.detail
        ));
        if let Some(fix) = &f.fix {
            out.push_str(&format!("      {:<width$}  fix: {fix}\n", ""));
        }
    }
    let failed = findings.iter().filter(|f| f.status == Status::Fail).count();
    let warned = findings.iter().filter(|f| f.status == Status::Warn).count();
    out.push_str(&match (failed, warned) {
        (0, 0) => "all checks passed\n".to_string(),
        (0, w) => format!("no check failed ({w} warnings)\n"),
        (f, w) => format!("{f} checks failed, {w} warnings\n"),
    });
    out
}

/// The Prometheus part, as the operator runs it at start-up: does it answer, and is the
/// remote-write receiver on (`needs_receiver`: some client remote-writes)?
pub async fn prometheus_findings(
    reach: &prometheus::Reach,
    write: Option<(&prometheus::Reach, &str)>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    match prometheus::build_info(reach).await {
        Ok(version) => out.push(Finding::pass(
            "prometheus",
            format!("Prometheus {version} answers at {}", reach.describe()),
        )),
        Err(e) => {
            out.push(Finding::fail(
                "prometheus",
                format!("Prometheus at {} does not answer: {e}", reach.describe()),
                "check --prometheus-url (the operator's operator.prometheusUrl, an experiment's spec.metrics.prometheusUrl): kube-prometheus-stack serves http://prometheus-operated.MONITORING-NAMESPACE:9090",
            ));
            return out;
        }
    }
    if let Some((write_reach, path)) = write {
        out.push(receiver_finding(
            &prometheus::receiver(write_reach, path).await,
            &write_reach.describe(),
            path,
        ));
    }
    out
}

/// The receiver probe's answer as a finding. Pure.
pub fn receiver_finding(r: &prometheus::Receiver, at: &str, path: &str) -> Finding {
    match r {
        prometheus::Receiver::On => Finding::pass(
            "remote-write",
            format!("the remote-write receiver is on ({at}{path} accepts writes)"),
        ),
        prometheus::Receiver::Off(said) => Finding::fail(
            "remote-write",
            format!(
                "the remote-write receiver is off: POST {at}{path} answered \"{said}\"; Agave, Besu and Frankendancer followers remote-write their datapoints, and their trials would measure nothing"
            ),
            prometheus::RECEIVER_FIX,
        ),
        prometheus::Receiver::Unknown(why) => Finding::warn(
            "remote-write",
            format!("could not tell whether the remote-write receiver is on: {why}"),
            "run valtune check again once Prometheus answers",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_print_with_their_fix_and_a_total() {
        let out = render(&[
            Finding::pass("prometheus", "Prometheus 3.2.1 answers"),
            Finding::fail("remote-write", "off", "turn it on"),
        ]);
        assert_eq!(
            out,
            "PASS  prometheus    Prometheus 3.2.1 answers\nFAIL  remote-write  off\n                    fix: turn it on\n1 checks failed, 0 warnings\n"
        );
        assert_eq!(render(&[]), "all checks passed\n");
    }

    #[test]
    fn an_off_receiver_names_every_way_to_turn_it_on() {
        let f = receiver_finding(
            &prometheus::Receiver::Off("remote write receiver needs to be enabled".into()),
            "http://p:9090",
            "/api/v1/write",
        );
        assert_eq!(f.status, Status::Fail);
        let fix = f.fix.unwrap();
        for text in [
            "enableRemoteWriteReceiver=true",
            "spec.enableRemoteWriteReceiver: true",
            "--web.enable-remote-write-receiver",
        ] {
            assert!(fix.contains(text), "{fix}");
        }
    }
}
