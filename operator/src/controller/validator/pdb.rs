//! A PodDisruptionBudget per Validator: `minAvailable: 1` over its one pod, so no
//! eviction goes through; owned by the Validator (it goes with it). Not `maxUnavailable:
//! 0`, which says the same for a Deployment: the pod's controller is a Validator, which
//! has no `scale` subresource, and for such pods Kubernetes can count the expected pods
//! only from an integer `minAvailable` (kubernetes/website
//! content/en/docs/tasks/run-application/configure-pdb.md, "Arbitrary workloads and
//! arbitrary selectors"); with `maxUnavailable` the disruption controller reports 0
//! expected pods and the budget stops meaning anything (seen in the lab).
//!
//! Why no eviction at all: the pod cannot move (its node affinity names one host, its
//! state is on that host's NVMe), so an evicted pod is only recreated Pending on the same
//! cordoned node, and the validator is off the chain for the whole maintenance, its
//! identity's votes and blocks missed, without anyone having decided it. With this budget
//! `kubectl drain` stops at the pod ("Cannot evict pod as it would violate the pod's
//! disruption budget") and the operator decides: move a voting identity to a standby
//! first, then stop the pod on purpose (`kubectl delete pod`, which a budget does not
//! block, or `kubectl drain --disable-eviction`). A pod catching up is not evicted either
//! (`unhealthyPodEvictionPolicy: IfHealthyBudget`: an unready pod is evicted only while
//! the budget is met, and with one pod and `minAvailable: 1` it never is): an eviction
//! would only throw its catch-up away. The operator's own restarts
//! delete the pod, so the budget never holds them back. docs/validators.md, "Draining a
//! node".

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Resource, ResourceExt};

use crate::api::validator::VALIDATOR_LABEL;
use crate::api::{Validator, labels};
use crate::controller::{Context, Error, Result};

/// The Validator's budget: its name, over its pod (by [`VALIDATOR_LABEL`]). Pure.
pub fn budget(v: &Validator) -> PodDisruptionBudget {
    let name = v.name_any();
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: v.namespace(),
            labels: Some(
                [
                    (labels::MANAGED_BY.to_string(), labels::MANAGER.to_string()),
                    (VALIDATOR_LABEL.to_string(), name.clone()),
                ]
                .into(),
            ),
            owner_references: v.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some([(VALIDATOR_LABEL.to_string(), name)].into()),
                ..Default::default()
            }),
            unhealthy_pod_eviction_policy: Some("IfHealthyBudget".into()),
            ..Default::default()
        }),
        status: None,
    }
}

/// Creates the budget if it does not exist (a budget deleted by hand comes back).
pub async fn ensure(v: &Validator, ctx: &Context) -> Result<()> {
    let ns = v.namespace().unwrap_or_default();
    let name = v.name_any();
    let api: Api<PodDisruptionBudget> = Api::namespaced(ctx.client.clone(), &ns);
    let step = |what: &str| format!("{what} PodDisruptionBudget {ns}/{name}");
    if api
        .get_opt(&name)
        .await
        .map_err(|e| Error::EnsureBudget(step("reading"), e))?
        .is_some()
    {
        return Ok(());
    }
    match api.create(&PostParams::default(), &budget(v)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(Error::EnsureBudget(step("creating"), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_allows_no_eviction_of_the_validators_pod_and_goes_with_it() {
        let mut v: Validator = serde_saphyr::from_str(
            "apiVersion: valtune.dev/v1alpha1\nkind: Validator\nmetadata: {name: besu-a, namespace: ns, uid: u1}\nspec:\n  nodeName: bm-01\n  template: {besu: {image: b}, resources: {memory: 32Gi}}\n",
        )
        .unwrap();
        v.metadata.uid = Some("u1".into());
        let b = budget(&v);
        let spec = b.spec.unwrap();
        // An integer minAvailable: the only form Kubernetes counts for pods whose
        // controller has no scale subresource.
        assert_eq!(spec.min_available, Some(IntOrString::Int(1)));
        assert_eq!(spec.max_unavailable, None);
        assert_eq!(
            spec.selector.unwrap().match_labels.unwrap()[VALIDATOR_LABEL],
            "besu-a"
        );
        let owner = &b.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Validator", "u1")
        );
        assert_eq!(owner.controller, Some(true));
    }
}
