//! The pod status writes a kubelet makes, made by the lab where kwok does not: a
//! container that exited (OOMKilled, an error, with its termination message), a pod
//! stopped past its activeDeadlineSeconds, and the deletion of a pod whose containers
//! it stopped (a pod with a preStop hook: kwok deletes the others itself).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};

pub fn now_time() -> Time {
    Time(Timestamp::from_second(Timestamp::now().as_second()).expect("a valid time"))
}

/// As the kubelet reports a container's exit (an OOM kill: reason OOMKilled, code 137):
/// the container terminated; the pod keeps running its other containers
/// (restartPolicy Never).
pub async fn terminate(
    api: &Api<Pod>,
    pod: &str,
    container: &str,
    reason: &str,
    code: i32,
    message: &str,
) -> kube::Result<()> {
    let current = api.get_status(pod).await?;
    let mut status = current.status.unwrap_or_default();
    for c in status.container_statuses.iter_mut().flatten() {
        if c.name == container {
            let started = c
                .state
                .as_ref()
                .and_then(|s| s.running.as_ref())
                .and_then(|r| r.started_at.clone());
            c.state = Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    reason: Some(reason.into()),
                    // What the container wrote to its termination-message path.
                    message: (!message.is_empty()).then(|| message.to_string()),
                    started_at: started,
                    finished_at: Some(now_time()),
                    ..Default::default()
                }),
                ..Default::default()
            });
            c.ready = false;
            c.started = Some(false);
        }
    }
    for cond in status.conditions.iter_mut().flatten() {
        if cond.type_ == "Ready" || cond.type_ == "ContainersReady" {
            cond.status = "False".into();
            cond.reason = Some("ContainersNotReady".into());
            cond.message = Some(format!("containers with unready status: [{container}]"));
            cond.last_transition_time = Some(now_time());
        }
    }
    let patch = serde_json::json!({"status": {"containerStatuses": status.container_statuses, "conditions": status.conditions}});
    api.patch_status(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// As the kubelet ends a terminating pod once its containers have stopped: deleted with
/// no grace left, for this pod only (its UID), as the status manager does
/// (pkg/kubelet/status/status_manager.go `canBeDeleted`, then `Delete` with
/// `GracePeriodSeconds: 0` and a UID precondition).
pub async fn delete_stopped(api: &Api<Pod>, pod: &str, uid: &str) -> kube::Result<()> {
    let dp = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(kube::api::Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(pod, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// As the kubelet stops a pod (past activeDeadlineSeconds): every container terminated,
/// the pod Failed with the reason.
pub async fn stop(api: &Api<Pod>, pod: &str, reason: &str, message: &str) -> kube::Result<()> {
    let current = api.get_status(pod).await?;
    let mut status = current.status.unwrap_or_default();
    for c in status.container_statuses.iter_mut().flatten() {
        if c.state.as_ref().is_some_and(|s| s.terminated.is_some()) {
            continue;
        }
        c.state = Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 137,
                reason: Some("Error".into()),
                finished_at: Some(now_time()),
                ..Default::default()
            }),
            ..Default::default()
        });
        c.ready = false;
    }
    let patch = serde_json::json!({"status": {
        "phase": "Failed",
        "reason": reason,
        "message": message,
        "containerStatuses": status.container_statuses,
    }});
    api.patch_status(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// As the kubelet reports an init container that failed under `restartPolicy: Never`: the
/// init container terminated with its code and message, the pod Failed, its containers
/// never started.
pub async fn init_failed(
    api: &Api<Pod>,
    pod: &str,
    container: &str,
    code: i32,
    message: &str,
) -> kube::Result<()> {
    let current = api.get_status(pod).await?;
    let mut status = current.status.unwrap_or_default();
    let mut found = false;
    for c in status.init_container_statuses.iter_mut().flatten() {
        if c.name == container {
            found = true;
            c.state = Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    reason: Some("Error".into()),
                    message: (!message.is_empty()).then(|| message.to_string()),
                    finished_at: Some(now_time()),
                    ..Default::default()
                }),
                ..Default::default()
            });
            c.ready = false;
        }
    }
    if !found {
        status
            .init_container_statuses
            .get_or_insert_with(Vec::new)
            .push(k8s_openapi::api::core::v1::ContainerStatus {
                name: container.into(),
                image: String::new(),
                image_id: String::new(),
                ready: false,
                restart_count: 0,
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: code,
                        reason: Some("Error".into()),
                        message: (!message.is_empty()).then(|| message.to_string()),
                        finished_at: Some(now_time()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            });
    }
    for c in status.container_statuses.iter_mut().flatten() {
        c.state = Some(ContainerState {
            waiting: Some(k8s_openapi::api::core::v1::ContainerStateWaiting {
                reason: Some("PodInitializing".into()),
                message: None,
            }),
            ..Default::default()
        });
        c.ready = false;
        c.started = Some(false);
    }
    let patch = serde_json::json!({"status": {
        "phase": "Failed",
        "initContainerStatuses": status.init_container_statuses,
        "containerStatuses": status.container_statuses,
    }});
    api.patch_status(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}
