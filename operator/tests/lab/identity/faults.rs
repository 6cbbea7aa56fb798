//! Playing a schedule's steps against a pair in the lab, and lifting every fault.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use valtune::api::Validator;
use valtune::api::validator::{FAILOVER_REQUESTED, FAILOVER_TO};

use super::Client;
use super::schedule::{Member, Step};
use crate::common::{Lab, Operator};
use crate::validator::{create_member, node_answers};

/// Whether the lab's kubelet plays the faults of containers (a killed container, a
/// failed image pull, a blocked port). Until it does, schedules draw none of them.
pub fn kubelet_faults() -> bool {
    false
}

/// One seed's pair, its operators and the faults in force.
pub struct Run<'a> {
    lab: &'a Lab,
    ns: String,
    client: &'static Client,
    nodes: [String; 2],
    pub staked: String,
    operators: Vec<Operator>,
    validators: Api<Validator>,
    leases: Api<Lease>,
    pods: Api<Pod>,
    machines: Api<Node>,
    deleted: [bool; 2],
    stopped: [bool; 2],
    cordoned: [bool; 2],
    trials: usize,
    changes: usize,
}

impl<'a> Run<'a> {
    /// Two operator replicas for `ns` (leader election decides which acts), the pair's
    /// machines answering and schedulable (whatever a failed seed before left).
    pub async fn new(
        lab: &'a Lab,
        ns: &str,
        client: &'static Client,
        nodes: &(String, String),
    ) -> Run<'a> {
        let run = Run {
            lab,
            ns: ns.to_string(),
            client,
            nodes: [nodes.0.clone(), nodes.1.clone()],
            staked: String::new(),
            operators: vec![lab.start_operator(ns), lab.start_operator(ns)],
            validators: Api::namespaced(lab.client.clone(), ns),
            leases: Api::namespaced(lab.client.clone(), ns),
            pods: Api::namespaced(lab.client.clone(), ns),
            machines: Api::all(lab.client.clone()),
            deleted: [false; 2],
            stopped: [false; 2],
            cordoned: [false; 2],
            trials: 0,
            changes: 0,
        };
        for node in &run.nodes {
            node_answers(lab, node, true).await;
            run.cordon(node, false).await;
        }
        run
    }

    fn name(&self, m: Member) -> &'static str {
        self.client.members[m.ix()]
    }

    fn lease(&self) -> String {
        format!("valtune-identity-{}-identity", self.client.keys)
    }

    /// The member whose Validator holds the staked identity's Lease.
    async fn holder(&self) -> Option<Member> {
        let lease = self.leases.get_opt(&self.lease()).await.ok()??;
        let h = lease.spec?.holder_identity?;
        [Member::A, Member::B]
            .into_iter()
            .find(|m| self.name(*m) == h)
    }

    async fn cordon(&self, node: &str, on: bool) {
        let _ = self
            .machines
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"unschedulable": on}})),
            )
            .await;
    }

    /// Plays one step; what it did, for the seed's history.
    pub async fn apply(&mut self, step: &Step) -> String {
        match step {
            Step::Wait { ms } => {
                tokio::time::sleep(Duration::from_millis(*ms)).await;
                String::new()
            }
            Step::Failover => match self.holder().await {
                Some(from) => self.failover(from, Duration::from_secs(60)).await,
                None => "no member holds the Lease: nothing to move".into(),
            },
            Step::AbandonedFailover { after_ms } => {
                let Some(from) = self.holder().await else {
                    return "no member holds the Lease: nothing asked".into();
                };
                let asked = self.ask(from, self.name(from.other())).await;
                tokio::time::sleep(Duration::from_millis(*after_ms)).await;
                let patch = json!({"metadata": {"annotations": {FAILOVER_TO: null, FAILOVER_REQUESTED: null}}});
                let withdrawn = self
                    .validators
                    .patch(
                        self.name(from),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await
                    .map_or_else(|e| format!("withdrawing: {e}"), |_| "withdrawn".into());
                format!("{asked}; {withdrawn}")
            }
            Step::WrongWayFailover => match self.holder().await {
                Some(holder) => self.ask(holder.other(), self.name(holder)).await,
                None => "no member holds the Lease: nothing asked".into(),
            },
            Step::DeleteValidator(m) => {
                self.deleted[m.ix()] = true;
                result(
                    self.validators
                        .delete(self.name(*m), &DeleteParams::default())
                        .await,
                )
            }
            Step::RecreateValidator(m) => self.recreate(*m).await,
            Step::DeleteLease => result(
                self.leases
                    .delete(&self.lease(), &DeleteParams::default())
                    .await,
            ),
            Step::KillLeader => self.kill_leader().await,
            Step::StartReplica => {
                self.operators.push(self.lab.start_operator(&self.ns));
                format!("{} replicas", self.operators.len())
            }
            Step::NodeStops(m) => {
                self.stopped[m.ix()] = true;
                node_answers(self.lab, &self.nodes[m.ix()], false).await;
                format!("{} stops answering", self.nodes[m.ix()])
            }
            Step::NodeBack(m) => {
                self.stopped[m.ix()] = false;
                node_answers(self.lab, &self.nodes[m.ix()], true).await;
                format!("{} answers again", self.nodes[m.ix()])
            }
            Step::Cordon(m) => {
                self.cordoned[m.ix()] = true;
                self.cordon(&self.nodes[m.ix()], true).await;
                format!("{} cordoned", self.nodes[m.ix()])
            }
            Step::Uncordon(m) => {
                self.cordoned[m.ix()] = false;
                self.cordon(&self.nodes[m.ix()], false).await;
                format!("{} uncordoned", self.nodes[m.ix()])
            }
            Step::TrialWaits(m) => self.trial_waits(*m).await,
            Step::Change(m) => self.change(*m).await,
            Step::BadImage(_)
            | Step::GoodImage(_)
            | Step::KillValidator(_)
            | Step::KillAgent { .. }
            | Step::BlockAgentPort
            | Step::UnblockAgentPort => "not played: the lab's kubelet has no such fault".into(),
        }
    }

    /// `valtune failover FROM --to OTHER`, as a user runs it, followed for `wait`.
    async fn failover(&self, from: Member, wait: Duration) -> String {
        let (f, to) = (self.name(from), self.name(from.other()));
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_valtune"));
        command
            .args(["failover", f, "--to", to, "-n", &self.ns])
            .args(["--wait", &format!("{}s", wait.as_secs())])
            .arg("--kubeconfig")
            .arg(&self.lab.state.kubeconfig);
        let out = tokio::task::spawn_blocking(move || command.output().unwrap())
            .await
            .unwrap();
        let last = |b: &[u8]| {
            String::from_utf8_lossy(b)
                .lines()
                .last()
                .unwrap_or_default()
                .to_string()
        };
        format!(
            "{f} -> {to}: {} ({})",
            out.status,
            if out.status.success() {
                last(&out.stdout)
            } else {
                last(&out.stderr)
            }
        )
    }

    /// Annotates `from` with a failover request to `to` (what the CLI does first).
    async fn ask(&self, from: Member, to: &str) -> String {
        let patch = json!({"metadata": {"annotations": {
            FAILOVER_TO: to,
            FAILOVER_REQUESTED: jiff::Timestamp::now().to_string(),
        }}});
        match self
            .validators
            .patch(
                self.name(from),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => format!("asked {} to hand over to {to}", self.name(from)),
            Err(e) => format!("asking {}: {e}", self.name(from)),
        }
    }

    async fn recreate(&mut self, m: Member) -> String {
        let name = self.name(m);
        // A Validator still being deleted (its pod on a machine that does not answer)
        // cannot be created again until it is gone: a user would wait too.
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.validators.get_opt(name).await.ok().flatten().is_some() {
            if Instant::now() > deadline {
                return format!("{name} still exists (being deleted): not re-created yet");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        create_member(
            &self.validators,
            self.client.example,
            m.ix(),
            (name, &self.nodes[m.ix()]),
            &self.staked,
        )
        .await;
        self.deleted[m.ix()] = false;
        format!("{name} re-created")
    }

    /// SIGKILL of the replica that leads (its Lease names `<host>-<pid>`).
    async fn kill_leader(&mut self) -> String {
        let leases: Api<Lease> = Api::namespaced(self.lab.client.clone(), &self.ns);
        let holder = leases
            .get_opt("valtune-operator")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.holder_identity)
            .unwrap_or_default();
        let Some(i) = self.operators.iter().position(|o| o.identity() == holder) else {
            return format!("no replica leads (Lease holder {holder:?})");
        };
        self.operators.remove(i).kill();
        format!("killed the leader {holder}")
    }

    /// A pod like a trial's that fits the member's machine only without its Validator's
    /// pod (no priority of its own, as trials have none).
    async fn trial_waits(&mut self, m: Member) -> String {
        self.trials += 1;
        let name = format!("soak-trial-{}", self.trials);
        let node = &self.nodes[m.ix()];
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "tolerations": [{"key": "valtune.dev/lab-pool", "operator": "Equal", "value": "validators", "effect": "NoSchedule"}],
                "containers": [{"name": "trial", "image": "registry.lab/valtune-soak-trial:1",
                    "resources": {"requests": {"cpu": "1", "memory": "1000Gi"}, "limits": {"cpu": "1", "memory": "1000Gi"}}}]
            }
        }))
        .unwrap();
        result(self.pods.create(&PostParams::default(), &pod).await)
            + &format!(" ({name} waits for {node})")
    }

    /// A change to the member's spec that restarts its pod: its memory, between 512Gi and
    /// 496Gi.
    async fn change(&mut self, m: Member) -> String {
        self.changes += 1;
        let memory = if self.changes % 2 == 1 {
            "496Gi"
        } else {
            "512Gi"
        };
        let patch = json!({"spec": {"template": {"resources": {"memory": memory}}}});
        result(
            self.validators
                .patch(self.name(m), &PatchParams::default(), &Patch::Merge(&patch))
                .await,
        ) + &format!(" (memory {memory})")
    }

    /// Every fault lifted: machines back and schedulable, deleted Validators re-created,
    /// two replicas.
    pub async fn lift(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        for m in [Member::A, Member::B] {
            if self.stopped[m.ix()] {
                out.push(self.apply(&Step::NodeBack(m)).await);
            }
            if self.cordoned[m.ix()] {
                out.push(self.apply(&Step::Uncordon(m)).await);
            }
        }
        for m in [Member::A, Member::B] {
            if self.deleted[m.ix()] {
                let mut note = self.recreate(m).await;
                // Its old pod may be finishing on a machine that just came back.
                for _ in 0..6 {
                    if !self.deleted[m.ix()] {
                        break;
                    }
                    note = self.recreate(m).await;
                }
                out.push(note);
            }
        }
        while self.operators.len() < 2 {
            out.push(self.apply(&Step::StartReplica).await);
        }
        out
    }

    /// The namespace deleted and its pods gone from the pair's machines, which are left
    /// answering and schedulable for the next seed.
    pub async fn clean_up(self) {
        for node in &self.nodes {
            node_answers(self.lab, node, true).await;
            self.cordon(node, false).await;
        }
        drop(self.operators);
        self.lab.delete_namespace(&self.ns).await;
        let all: Api<Pod> = Api::all(self.lab.client.clone());
        let deadline = Instant::now() + Duration::from_secs(180);
        for node in &self.nodes {
            let on = ListParams::default().fields(&format!("spec.nodeName={node}"));
            while let Ok(list) = all.list(&on).await {
                if list.items.is_empty() {
                    break;
                }
                if Instant::now() > deadline {
                    // What a stuck kubelet leaves: confirmed gone by hand, as an admin would.
                    for p in list.items {
                        let ns = p.metadata.namespace.unwrap_or_default();
                        let api: Api<Pod> = Api::namespaced(self.lab.client.clone(), &ns);
                        let _ = api
                            .delete(
                                &p.metadata.name.unwrap_or_default(),
                                &DeleteParams {
                                    grace_period_seconds: Some(0),
                                    ..Default::default()
                                },
                            )
                            .await;
                    }
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
}

fn result<T>(r: kube::Result<T>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(kube::Error::Api(e)) => format!("{} {}", e.code, e.reason),
        Err(e) => e.to_string(),
    }
}
