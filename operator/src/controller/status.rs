//! Status helpers shared by the reconcilers: conditions that keep their transition time,
//! and server-side apply of the status subresource (fields dropped are removed).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::core::NamespaceResourceScope;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::FIELD_MANAGER;

/// A condition; keeps the previous transition time while the status does not change.
pub fn condition(
    previous: &[Condition],
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    let status = if status { "True" } else { "False" }.to_string();
    let since = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    Condition {
        type_: type_.into(),
        status,
        reason: reason.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: since,
    }
}

/// Writes the whole status with server-side apply, on the condition that the object is
/// still the one the status was decided from: a pass that read a stale copy (the watch
/// had not delivered its own last write yet) gets a conflict and runs again on the
/// fresh object, instead of undoing that write (a finished trial taken for running).
/// Returns the resourceVersion of the object written.
pub async fn apply_status<K, S>(api: &Api<K>, obj: &K, status: &S) -> kube::Result<Option<String>>
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
    S: Serialize,
{
    let mut patch = serde_json::json!({
        "apiVersion": K::api_version(&Default::default()),
        "kind": K::kind(&Default::default()),
        "status": status,
    });
    if let Some(rv) = obj.resource_version() {
        patch["metadata"] = serde_json::json!({ "resourceVersion": rv });
    }
    let written = api
        .patch_status(
            &obj.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?;
    Ok(written.resource_version())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_keeps_its_transition_time_until_its_status_changes() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        let first = condition(&[], "Ready", false, "Running", "m", Some(1), t0);
        let same = condition(
            std::slice::from_ref(&first),
            "Ready",
            false,
            "Running",
            "m2",
            Some(2),
            t1,
        );
        assert_eq!(same.last_transition_time, Time(t0));
        let flipped = condition(&[same], "Ready", true, "Succeeded", "m", Some(2), t1);
        assert_eq!(flipped.last_transition_time, Time(t1));
    }
}
