//! Table tests of the pod lifecycle: each drives one pod through a script of what its
//! containers do and checks what the kubelet does and reports.

use std::cell::RefCell;
use std::collections::BTreeSet;

use super::*;
use k8s_openapi::api::core::v1::Pod;

const TIMING: Timing = Timing {
    hook_floor: 0.0,
    probe_period_floor: 0.0,
    backoff_reset_floor: 0.0,
};

/// The node's images and the registry's: `missing` cannot be pulled.
#[derive(Default)]
struct Registry {
    present: RefCell<BTreeSet<String>>,
    missing: RefCell<BTreeSet<String>>,
}

impl Images for Registry {
    fn present(&self, image: &str) -> bool {
        self.present.borrow().contains(image)
    }
    fn pull(&self, image: &str) -> Result<(), String> {
        match self.missing.borrow().contains(image) {
            true => Err(format!("{image}: not found")),
            false => Ok(()),
        }
    }
}

/// A pod and its node, driven step by step.
struct Run {
    life: PodLife,
    images: Registry,
    now: f64,
}

fn run(yaml: &str) -> Run {
    let pod: Pod = serde_saphyr::from_str(yaml).unwrap();
    Run {
        life: PodLife::new(PodSpec::of(&pod), TIMING),
        images: Registry::default(),
        now: 0.0,
    }
}

impl Run {
    /// A sync at `t`: what the kubelet does, as words.
    fn at(&mut self, t: f64) -> Vec<String> {
        self.now = t;
        let acts = self.life.sync(t, &self.images);
        acts.iter()
            .map(|a| {
                let name = |i: &usize| self.life.containers[*i].spec.name.clone();
                match a {
                    Action::Pulled { image } => {
                        self.images.present.borrow_mut().insert(image.clone());
                        format!("pulled {image}")
                    }
                    Action::Start { container } => format!("start {}", name(container)),
                    Action::Probe {
                        container, kind, ..
                    } => format!("probe {} {}", kind.name(), name(container)),
                    Action::PreStop {
                        container, budget, ..
                    } => format!("preStop {} {budget}", name(container)),
                    Action::Signal { container, signal } => {
                        format!("{signal:?} {}", name(container)).to_lowercase()
                    }
                    Action::DeletePod => "delete".into(),
                }
            })
            .collect()
    }

    fn i(&self, name: &str) -> usize {
        self.life.index(name).unwrap()
    }

    fn exit(&mut self, name: &str, code: i32) {
        let i = self.i(name);
        let g = self.life.containers[i].generation;
        self.life.exited(i, g, End::exit(code, ""), self.now);
    }

    fn probe(&mut self, name: &str, kind: Kind, ok: bool) {
        let i = self.i(name);
        let g = self.life.containers[i].generation;
        self.life.probed(i, g, kind, ok, self.now);
    }

    /// A container's state in words, its restarts and readiness.
    fn state(&self, name: &str) -> String {
        let c = &self.life.containers[self.i(name)];
        let s = match &c.state {
            State::Waiting { reason, .. } => format!("waiting {reason}"),
            State::Running { .. } => "running".into(),
            State::Terminated(e) => format!("terminated {} {}", e.code, e.reason),
        };
        format!("{s} restarts={} ready={}", c.restarts, c.ready)
    }

    fn message(&self, name: &str) -> String {
        match &self.life.containers[self.i(name)].state {
            State::Waiting { message, .. } => message.clone().unwrap_or_default(),
            _ => String::new(),
        }
    }
}

const ONE: &str = "metadata: {name: p, namespace: ns, uid: u1}\nspec:\n  restartPolicy: POLICY\n  containers:\n  - {name: validator, image: 'agave:v4'}\n";

fn one(policy: &str) -> Run {
    run(&ONE.replace("POLICY", policy))
}

/// A container that exits 1, then 0, under each restart policy: what runs next and the
/// pod's phase.
#[test]
fn restart_policies_decide_what_runs_again() {
    for (policy, after_error, after_success, phase) in [
        (
            "Never",
            "terminated 1 Error restarts=0 ready=false",
            None,
            "Failed",
        ),
        (
            "OnFailure",
            "running restarts=1 ready=true",
            Some("terminated 0 Completed restarts=1 ready=false"),
            "Succeeded",
        ),
        (
            "Always",
            "running restarts=1 ready=true",
            Some("waiting CrashLoopBackOff restarts=1 ready=false"),
            "Running",
        ),
    ] {
        let mut r = one(policy);
        assert_eq!(
            r.at(0.0),
            vec!["pulled agave:v4", "start validator"],
            "{policy}"
        );
        assert_eq!(r.state("validator"), "running restarts=0 ready=true");
        r.exit("validator", 1);
        r.at(1.0);
        assert_eq!(r.state("validator"), after_error, "{policy}");
        if let Some(after) = after_success {
            r.now = 2.0;
            r.exit("validator", 0);
            r.at(2.0);
            assert_eq!(r.state("validator"), after, "{policy}");
        }
        assert_eq!(r.life.phase().0, phase, "{policy}");
    }
}

/// A container that exits a second after each start: started again at once, then after
/// 10 s, 20 s, 40 s of CrashLoopBackOff (the kubelet's message), its restarts counted and
/// its last termination kept.
#[test]
fn a_crash_loop_backs_off_and_counts_its_restarts() {
    let mut r = one("Always");
    r.at(0.0);
    let mut starts = vec![0.0];
    let mut t = 0.0;
    while starts.len() < 5 {
        t += 1.0;
        r.now = t;
        r.exit("validator", 1);
        loop {
            if r.at(t).contains(&"start validator".to_string()) {
                starts.push(t);
                break;
            }
            assert!(r.life.wake().unwrap() - t > 0.0);
            t = r.life.wake().unwrap();
        }
    }
    assert_eq!(starts, vec![0.0, 1.0, 12.0, 33.0, 74.0]);
    assert_eq!(r.state("validator"), "running restarts=4 ready=true");
    let last = r.life.containers[0].last.clone().unwrap();
    assert_eq!(
        (last.code, last.reason.as_str(), last.finished),
        (1, "Error", 34.0)
    );
    // Between two starts: waiting, with the kubelet's words.
    r.now = 75.0;
    r.exit("validator", 1);
    r.at(75.0);
    assert_eq!(
        r.state("validator"),
        "waiting CrashLoopBackOff restarts=4 ready=false"
    );
    assert_eq!(
        r.message("validator"),
        "back-off 1m20s restarting failed container=validator pod=p_ns(u1)"
    );
    assert_eq!(r.life.wake(), Some(155.0));
}

/// Init steps one at a time, then a native sidecar that must start (its startup probe
/// pass) before the validator does; a failed step under Never fails the pod, stopping the
/// sidecars.
#[test]
fn init_containers_and_sidecars_start_in_order() {
    let yaml = "metadata: {name: p, namespace: ns, uid: u1}\nspec:\n  restartPolicy: Always\n  initContainers:\n  - {name: step, image: busybox:1}\n  - {name: exporter, image: 'e:1', restartPolicy: Always, startupProbe: {tcpSocket: {port: 9}, periodSeconds: 1}}\n  containers:\n  - {name: validator, image: 'agave:v4'}\n";
    let mut r = run(yaml);
    assert_eq!(
        r.state("validator"),
        "waiting PodInitializing restarts=0 ready=false"
    );
    assert_eq!(r.at(0.0), vec!["pulled busybox:1", "start step"]);
    assert!(r.at(0.5).is_empty(), "the step runs");
    r.now = 1.0;
    r.exit("step", 0);
    assert_eq!(r.at(1.0), vec!["pulled e:1", "start exporter"]);
    assert_eq!(r.at(1.0), vec!["probe startup exporter"]);
    r.probe("exporter", Kind::Startup, false);
    assert!(r.at(1.5).is_empty(), "not started: the validator waits");
    r.now = 2.0;
    r.probe("exporter", Kind::Startup, true);
    assert_eq!(r.at(2.0), vec!["pulled agave:v4", "start validator"]);
    // Under Never, a failed step fails the pod.
    let mut r = run(&yaml.replace("Always\n  initContainers", "Never\n  initContainers"));
    r.at(0.0);
    r.exit("step", 3);
    assert!(r.at(1.0).is_empty());
    assert_eq!(r.life.ending, Some(Ending::InitFailed));
    assert_eq!(r.life.phase().0, "Failed");
    assert_eq!(
        r.state("validator"),
        "waiting PodInitializing restarts=0 ready=false"
    );
    // Under Always, it is run again (OnFailure), after its back-off.
    let mut r = run(yaml);
    r.at(0.0);
    r.exit("step", 3);
    assert_eq!(r.at(0.0), vec!["start step"]);
    r.exit("step", 3);
    assert!(r.at(5.0).is_empty());
    assert_eq!(
        r.state("step"),
        "waiting CrashLoopBackOff restarts=1 ready=false"
    );
    assert_eq!(r.at(10.0), vec!["start step"]);
}

/// Once the pod is initialized, a sidecar in its back-off holds nothing up: the
/// validator that crashes meanwhile is restarted.
#[test]
fn a_restarting_sidecar_holds_up_nothing_once_initialized() {
    let yaml = "metadata: {name: p, namespace: ns, uid: u1}\nspec:\n  initContainers:\n  - {name: exporter, image: 'e:1', restartPolicy: Always}\n  containers:\n  - {name: validator, image: 'agave:v4'}\n";
    let mut r = run(yaml);
    r.at(0.0);
    for t in [1.0, 2.0] {
        r.now = t;
        r.exit("exporter", 1);
        r.at(t);
    }
    assert_eq!(
        r.state("exporter"),
        "waiting CrashLoopBackOff restarts=1 ready=false"
    );
    r.exit("validator", 1);
    assert_eq!(r.at(3.0), vec!["start validator"]);
}

/// Under Never, once the validator has ended the pod's sidecars are stopped (SIGTERM)
/// and the pod ends Failed when they have.
#[test]
fn a_completed_pod_stops_its_sidecars() {
    let yaml = "metadata: {name: p, namespace: ns, uid: u1}\nspec:\n  restartPolicy: Never\n  initContainers:\n  - {name: exporter, image: 'e:1', restartPolicy: Always}\n  containers:\n  - {name: validator, image: 'agave:v4'}\n";
    let mut r = run(yaml);
    assert_eq!(
        r.at(0.0),
        vec![
            "pulled e:1",
            "start exporter",
            "pulled agave:v4",
            "start validator"
        ]
    );
    r.now = 5.0;
    r.exit("validator", 137);
    assert_eq!(r.at(5.0), vec!["term exporter"]);
    assert_eq!(r.life.phase().0, "Running", "until the sidecar has stopped");
    // SIGKILL once the pod's grace period (30 s by default) is spent.
    assert_eq!(r.at(35.0), vec!["kill exporter"]);
    r.exit("exporter", 137);
    assert_eq!(r.life.phase().0, "Failed");
    assert!(r.at(36.0).is_empty());
}

/// Readiness follows its probe; a liveness probe failing its threshold stops the
/// container (with the probe's own grace), which is then started again (Always).
#[test]
fn probes_set_readiness_and_liveness_restarts() {
    let yaml = "metadata: {name: p, namespace: ns, uid: u1}\nspec:\n  containers:\n  - name: operator\n    image: 'valtune:1'\n    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 5}\n    livenessProbe: {tcpSocket: {port: 8080}, periodSeconds: 5, failureThreshold: 2, initialDelaySeconds: 10, terminationGracePeriodSeconds: 4}\n";
    let mut r = run(yaml);
    r.at(0.0);
    assert_eq!(r.state("operator"), "running restarts=0 ready=false");
    assert_eq!(r.at(0.0), vec!["probe readiness operator"]);
    assert!(r.at(1.0).is_empty(), "asked once a period");
    r.probe("operator", Kind::Readiness, true);
    assert_eq!(r.state("operator"), "running restarts=0 ready=true");
    assert_eq!(r.life.wake(), Some(5.0));
    assert_eq!(
        r.at(10.0),
        vec!["probe readiness operator", "probe liveness operator"]
    );
    r.probe("operator", Kind::Liveness, false);
    r.now = 15.0;
    r.probe("operator", Kind::Liveness, false);
    assert_eq!(r.at(15.0), vec!["term operator"]);
    assert_eq!(r.at(19.0), vec!["kill operator"]);
    r.exit("operator", 137);
    assert_eq!(r.at(19.0), vec!["start operator"]);
    assert_eq!(r.state("operator"), "running restarts=1 ready=false");
}

/// A deleted pod: the validator's preStop hook within the grace period, then SIGTERM;
/// the sidecar waits for the validator to end; SIGKILL when the grace is spent; the
/// pod is deleted once nothing runs.
#[test]
fn a_deleted_pod_runs_the_hook_then_terminates_sidecars_last() {
    let yaml = "metadata: {name: p, namespace: ns, uid: u1}\nspec:\n  terminationGracePeriodSeconds: 600\n  initContainers:\n  - {name: agent, image: 'python:3', restartPolicy: Always}\n  containers:\n  - name: validator\n    image: 'agave:v4'\n    lifecycle: {preStop: {exec: {command: [agave-validator, exit, --force]}}}\n";
    let mut r = run(yaml);
    r.at(0.0);
    r.life.delete(Ending::Deleted { grace: 600.0 });
    assert_eq!(r.at(100.0), vec!["preStop validator 600"]);
    // The hook ends the validator; then its SIGTERM finds nothing, the agent's turn comes.
    r.now = 110.0;
    r.exit("validator", 0);
    let g = r.life.containers[1].generation;
    r.life.hook_done(1, g);
    assert_eq!(r.at(110.0), vec!["term agent"]);
    assert_eq!(r.at(699.0), Vec::<String>::new());
    assert_eq!(r.at(700.0), vec!["kill agent"]);
    r.exit("agent", 137);
    assert_eq!(r.at(700.0), vec!["delete"]);
    assert!(r.life.finished());
    assert_eq!(r.life.phase().0, "Succeeded", "the validator exited 0");
    // A hook that outlasts the grace: SIGTERM then, SIGKILL 2 s later; the agent is
    // terminated when the grace is spent even though the validator still runs.
    let mut r = run(yaml);
    r.at(0.0);
    r.life.delete(Ending::Deleted { grace: 30.0 });
    assert_eq!(r.at(0.0), vec!["preStop validator 30"]);
    assert_eq!(r.at(30.0), vec!["term agent", "term validator"]);
    assert_eq!(r.at(32.0), vec!["kill agent", "kill validator"]);
}

/// Past its activeDeadlineSeconds the pod is Failed (DeadlineExceeded) and its
/// containers are stopped; nothing starts again.
#[test]
fn a_pod_past_its_deadline_fails_and_stops() {
    let mut r = one("Always");
    r.at(0.0);
    r.life.past_deadline();
    assert_eq!(r.at(50.0), vec!["term validator"]);
    assert_eq!(
        r.life.phase(),
        (
            "Failed",
            Some((
                "DeadlineExceeded",
                "Pod was active on the node longer than the specified deadline"
            ))
        )
    );
    r.exit("validator", 143);
    assert!(r.at(51.0).is_empty());
    assert_eq!(
        r.state("validator"),
        "terminated 143 Error restarts=0 ready=false"
    );
}

/// An image the registry does not have: ErrImagePull, then ImagePullBackOff with the
/// pull's error for 10 s, 20 s; once it can be pulled, the container starts. An image
/// on the node is not pulled again (IfNotPresent), unless the policy is Always.
#[test]
fn an_image_that_cannot_be_pulled_backs_off() {
    let mut r = one("Always");
    r.images.missing.borrow_mut().insert("agave:v4".into());
    assert!(r.at(0.0).is_empty());
    assert_eq!(
        r.state("validator"),
        "waiting ErrImagePull restarts=0 ready=false"
    );
    assert_eq!(r.message("validator"), "agave:v4: not found");
    r.at(5.0);
    assert_eq!(
        r.state("validator"),
        "waiting ImagePullBackOff restarts=0 ready=false"
    );
    assert_eq!(
        r.message("validator"),
        "Back-off pulling image \"agave:v4\": ErrImagePull: agave:v4: not found"
    );
    assert_eq!(r.life.wake(), Some(10.0));
    r.at(10.0);
    assert_eq!(
        r.state("validator"),
        "waiting ErrImagePull restarts=0 ready=false"
    );
    assert_eq!(r.life.wake(), Some(30.0));
    r.images.missing.borrow_mut().clear();
    assert_eq!(r.at(30.0), vec!["pulled agave:v4", "start validator"]);
    // On the node now: a restart does not pull.
    r.exit("validator", 1);
    assert_eq!(r.at(31.0), vec!["start validator"]);
    let mut always = run(&ONE.replace("POLICY", "Always").replace(
        "image: 'agave:v4'",
        "image: 'agave:v4', imagePullPolicy: Always",
    ));
    always.images.present.borrow_mut().insert("agave:v4".into());
    always.images.missing.borrow_mut().insert("agave:v4".into());
    always.at(0.0);
    assert_eq!(
        always.state("validator"),
        "waiting ErrImagePull restarts=0 ready=false"
    );
}

/// What a runtime reports of an older run (a stale exit or probe) changes nothing.
#[test]
fn reports_of_an_older_run_are_stale() {
    let mut r = one("Always");
    r.at(0.0);
    r.exit("validator", 1);
    r.at(0.0);
    assert_eq!(r.life.containers[0].generation, 2);
    r.life.exited(0, 1, End::exit(2, ""), 1.0);
    assert_eq!(r.state("validator"), "running restarts=1 ready=true");
}
