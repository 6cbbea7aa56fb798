//! The pod status a kubelet writes, pure, from its containers' lifecycle
//! (kubernetes v1.34.2 pkg/kubelet/kubelet_pods.go `generateAPIPodStatus`,
//! `convertToAPIContainerStatuses`; pkg/kubelet/status/generate.go for the conditions;
//! prober/prober_manager.go `UpdatePodStatus` for `ready` and `started`):
//! - each container's state (waiting with its reason and message, running since,
//!   terminated with its code, reason and message), the last termination, its restarts,
//!   whether it started and is ready (a completed init container is ready);
//! - the conditions `Initialized` (every init container done, every sidecar started),
//!   `ContainersReady` (every container and sidecar ready) and `Ready` (that, and the
//!   readiness gates), each changing its `lastTransitionTime` only when its status does;
//! - the phase (lifecycle.rs [`PodLife::phase`]).

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod, PodCondition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use super::lifecycle::{Container, Ended, PodLife, Role, State};

fn terminated(e: &Ended, wall: &dyn Fn(f64) -> Time) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: e.code,
            reason: Some(e.reason.clone()),
            message: e.message.clone(),
            started_at: Some(wall(e.started)),
            finished_at: Some(wall(e.finished)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn container_status(
    c: &Container,
    before: Option<&ContainerStatus>,
    wall: &dyn Fn(f64) -> Time,
) -> ContainerStatus {
    let state = match &c.state {
        State::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: message.clone(),
            }),
            ..Default::default()
        },
        State::Running { since } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(wall(*since)),
            }),
            ..Default::default()
        },
        State::Terminated(e) => terminated(e, wall),
    };
    let ready = match (&c.spec.role, &c.state) {
        (Role::Init, State::Terminated(e)) => e.code == 0,
        _ => c.ready,
    };
    ContainerStatus {
        name: c.spec.name.clone(),
        image: c.spec.image.clone(),
        image_id: before.map(|b| b.image_id.clone()).unwrap_or_default(),
        ready,
        restart_count: c.restarts,
        started: Some(c.started && c.running()),
        state: Some(state),
        last_state: c.last.as_ref().map(|e| terminated(e, wall)),
        ..Default::default()
    }
}

/// A condition with its status; its transition time kept unless the status changed.
fn condition(
    before: &[PodCondition],
    type_: &str,
    ok: bool,
    why: Option<(&str, String)>,
    now: &Time,
) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    let old = before.iter().find(|c| c.type_ == type_);
    let transition = match old {
        Some(o) if o.status == status => o.last_transition_time.clone(),
        _ => Some(now.clone()),
    };
    let (reason, message) = match why.filter(|_| !ok) {
        Some((r, m)) => (Some(r.to_string()), Some(m)),
        None => (None, None),
    };
    PodCondition {
        type_: type_.into(),
        status: status.into(),
        last_transition_time: transition,
        reason,
        message,
        ..Default::default()
    }
}

/// The status patch (`{"status": ...}`, a merge patch) of the pod as its containers are
/// at `now`; `wall` gives the wall-clock time of a moment of the pod's clock.
pub fn patch(life: &PodLife, pod: &Pod, now: f64, wall: &dyn Fn(f64) -> Time) -> Value {
    let status = pod.status.clone().unwrap_or_default();
    let before_conditions = status.conditions.clone().unwrap_or_default();
    let find = |list: &Option<Vec<ContainerStatus>>, name: &str| {
        list.iter().flatten().find(|s| s.name == name).cloned()
    };
    let mut init = Vec::new();
    let mut main = Vec::new();
    for c in &life.containers {
        if c.spec.role == Role::Main {
            let before = find(&status.container_statuses, &c.spec.name);
            main.push(container_status(c, before.as_ref(), wall));
        } else {
            let before = find(&status.init_container_statuses, &c.spec.name);
            init.push(container_status(c, before.as_ref(), wall));
        }
    }
    let names = |f: &dyn Fn(&Container) -> bool| -> Vec<&str> {
        life.containers
            .iter()
            .filter(|c| f(c))
            .map(|c| c.spec.name.as_str())
            .collect()
    };
    let uninitialized = names(&|c| match c.spec.role {
        Role::Init => !matches!(&c.state, State::Terminated(e) if e.code == 0),
        Role::Sidecar => !c.started,
        Role::Main => false,
    });
    let unready = names(&|c| c.spec.role != Role::Init && !c.ready);
    let gates: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| s.readiness_gates.iter().flatten())
        .map(|g| g.condition_type.clone())
        .collect();
    let gates_ok = gates.iter().all(|g| {
        before_conditions
            .iter()
            .any(|c| &c.type_ == g && c.status == "True")
    });
    let t = wall(now);
    let list = |l: &[&str]| l.join(" ");
    let mut conditions: Vec<PodCondition> = before_conditions
        .iter()
        .filter(|c| {
            !matches!(
                c.type_.as_str(),
                "Initialized" | "ContainersReady" | "Ready"
            )
        })
        .cloned()
        .collect();
    conditions.push(condition(
        &before_conditions,
        "Initialized",
        uninitialized.is_empty(),
        Some((
            "ContainersNotInitialized",
            format!(
                "containers with incomplete status: [{}]",
                list(&uninitialized)
            ),
        )),
        &t,
    ));
    let ready_why = (
        "ContainersNotReady",
        format!("containers with unready status: [{}]", list(&unready)),
    );
    conditions.push(condition(
        &before_conditions,
        "ContainersReady",
        unready.is_empty(),
        Some(ready_why.clone()),
        &t,
    ));
    let ready_why = if unready.is_empty() {
        (
            "ReadinessGatesNotReady",
            "the status of pod readiness gates is not \"True\"".to_string(),
        )
    } else {
        ready_why
    };
    conditions.push(condition(
        &before_conditions,
        "Ready",
        unready.is_empty() && gates_ok,
        Some(ready_why),
        &t,
    ));
    let (phase, why) = life.phase();
    let (reason, message) = match why {
        Some((r, m)) => (Value::from(r), Value::from(m)),
        None => (Value::Null, Value::Null),
    };
    json!({"status": {
        "phase": phase,
        "reason": reason,
        "message": message,
        "conditions": conditions,
        "containerStatuses": main,
        "initContainerStatuses": init,
    }})
}

#[cfg(test)]
mod tests {
    use super::super::lifecycle::{End, PodSpec, Timing};
    use super::*;

    struct Pulled;
    impl super::super::lifecycle::Images for Pulled {
        fn present(&self, _: &str) -> bool {
            true
        }
        fn pull(&self, _: &str) -> Result<(), String> {
            Ok(())
        }
    }

    fn wall(t: f64) -> Time {
        Time(jiff::Timestamp::from_second(1_800_000_000 + t as i64).unwrap())
    }

    /// A validator crash-looping behind a started sidecar: its waiting state with the
    /// kubelet's words, its last termination and restarts; Initialized but not Ready, the
    /// readiness gate's condition kept; transition times move only with a status.
    #[test]
    fn a_crash_loop_reads_as_a_kubelet_writes_it() {
        let pod: Pod = serde_saphyr::from_str(
            "metadata: {name: v, namespace: ns, uid: u}\nspec:\n  readinessGates: [{conditionType: example.com/gate}]\n  initContainers:\n  - {name: agent, image: 'python:3', restartPolicy: Always}\n  containers:\n  - {name: validator, image: 'agave:v4'}\nstatus:\n  phase: Running\n  conditions:\n  - {type: example.com/gate, status: 'True'}\n  - {type: Ready, status: 'False', lastTransitionTime: '2027-01-15T08:00:00Z'}\n",
        )
        .unwrap();
        let mut life = PodLife::new(
            PodSpec::of(&pod),
            Timing {
                hook_floor: 0.0,
                probe_period_floor: 0.0,
                backoff_reset_floor: 0.0,
            },
        );
        life.sync(0.0, &Pulled);
        let ready = patch(&life, &pod, 0.0, &wall);
        assert_eq!(
            ready["status"]["conditions"],
            serde_json::json!([
                {"type": "example.com/gate", "status": "True"},
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2027-01-15T08:00:00Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2027-01-15T08:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2027-01-15T08:00:00Z"},
            ])
        );
        for (t, restart) in [(1.0, 1.0), (2.0, 12.0), (13.0, 13.0)] {
            life.exited(1, life.containers[1].generation, End::exit(1, "boom"), t);
            life.sync(restart, &Pulled);
        }
        let after: Pod = serde_json::from_value(serde_json::json!({
            "metadata": pod.metadata,
            "spec": pod.spec,
            "status": ready["status"],
        }))
        .unwrap();
        let p = patch(&life, &after, 13.0, &wall);
        let s = &p["status"]["containerStatuses"][0];
        assert_eq!(s["restartCount"], 2);
        assert_eq!(
            s["state"],
            serde_json::json!({"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting failed container=validator pod=v_ns(u)"}})
        );
        assert_eq!(
            s["lastState"],
            serde_json::json!({"terminated": {"exitCode": 1, "reason": "Error", "message": "boom", "startedAt": "2027-01-15T08:00:12Z", "finishedAt": "2027-01-15T08:00:13Z"}})
        );
        assert_eq!(
            (s["ready"].clone(), s["started"].clone()),
            (false.into(), false.into())
        );
        let ready = &p["status"]["conditions"][3];
        assert_eq!(
            (
                &ready["status"],
                &ready["reason"],
                &ready["lastTransitionTime"]
            ),
            (
                &"False".into(),
                &"ContainersNotReady".into(),
                &"2027-01-15T08:00:13Z".into()
            )
        );
        assert_eq!(p["status"]["initContainerStatuses"][0]["ready"], true);
        assert_eq!(p["status"]["phase"], "Running");
    }
}
