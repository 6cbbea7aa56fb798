//! What a Validator's pass needs from the cluster and the pod: the rendered objects and
//! their hash, the identity's Lease, the Validator's pod and any other pod of its
//! identity, the pod's node, and the client's answers at its own endpoints.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};
use serde_json::Value;

use super::tuning::{self, Tuned};
use crate::api::labels;
use crate::api::settings::MetricsSettings;
use crate::api::validator::{
    DEFAULT_IDENTITY_AGENT_PORT, FAILOVER_REQUESTED, FAILOVER_TO, IDENTITY_LABEL, IDENTITY_REQUEST,
    POD_HASH, VALIDATOR_LABEL, Validator, ValidatorRole, identity_label,
};
use crate::api::{ValidatorExperiment, ValidatorTrial};
use crate::clients::health::Health;
use crate::clients::input::{Group, Keys, Lifecycle, Owner, Pair, Role, SecretKey};
use crate::clients::window::{self, Reach, Reading, RestartWindow};
use crate::clients::{self, RenderInput, Rendered};
use crate::controller::{Context, Error, Result};

/// Everything [`super::decide::decide`] judges.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The objects of the Validator's pod, or why they cannot be rendered.
    pub rendered: Result<Rendered, String>,
    /// The rendered pod's hash (also on it, as [`POD_HASH`]).
    pub hash: String,
    pub lease: LeaseState,
    /// The Validator's pod, if one exists (terminating included).
    pub pod: Option<PodState>,
    /// Pods of the same identity that are not the Validator's.
    pub others: Vec<String>,
    /// The client's health answer, if the pod runs and answered.
    pub answer: Option<Answer>,
    /// Why the health endpoint of a running pod gave no answer, when something may
    /// listen there (a timeout, a broken connection; not a refused connection, which is
    /// a process not serving yet): a busy validator is not a stopped one.
    pub unanswered: Option<String>,
    /// (head, lag), if the client shows them.
    pub position: Option<(i64, i64)>,
    /// The client's restart window.
    pub window: Arc<dyn RestartWindow>,
    /// The window's figures, read from the client when a change is pending and its window
    /// reads any, or why they could not be read.
    pub look: Option<Result<Reading, String>>,
    /// `spec.tuning.fromExperiment`, resolved (what `rendered` runs) or refused.
    pub tuning: Tuned,
    /// A failover pair member's view of the staked identity (who holds it, what its pod
    /// and a standby asked to take it report).
    pub pair: Option<super::pair::View>,
}

/// The identity's Lease as seen.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(test, derive(serde::Deserialize), serde(rename_all = "camelCase"))]
pub enum LeaseState {
    /// No identity given: nothing to hold.
    NoIdentity,
    /// Nobody holds it: this Validator takes it (`name`).
    Free { name: String },
    /// This Validator holds it.
    Ours { name: String },
    /// Another Validator holds it.
    HeldBy { name: String, holder: String },
}

#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(
    test,
    derive(serde::Deserialize),
    serde(rename_all = "camelCase", default)
)]
pub struct PodState {
    pub name: String,
    /// The hash of what it was rendered from.
    pub hash: Option<String>,
    pub terminating: bool,
    /// Pending, Running, Succeeded, Failed.
    pub phase: String,
    pub node: Option<String>,
    /// Whether its node reports Ready (None: not bound yet).
    pub node_ready: Option<bool>,
    pub image: Option<String>,
    /// How the kubelet reports the client's container restarting, if it has restarted
    /// or waits to ([`restarts`]).
    pub restarts: Option<String>,
}

/// The client's container (the pod's first) as the kubelet reports its restarts: how
/// many, how the last run ended, and what it waits for (a CrashLoopBackOff); None if it
/// never ended.
pub fn restarts(p: &Pod) -> Option<String> {
    let name = p.spec.as_ref()?.containers.first()?.name.clone();
    let cs = p
        .status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == name)?;
    let last = cs.last_state.as_ref().and_then(|s| s.terminated.as_ref());
    let waiting = cs.state.as_ref().and_then(|s| s.waiting.as_ref());
    let last = last.map(|t| {
        let reason = t.reason.as_deref().unwrap_or("Error");
        format!(", the last ending {reason} with exit code {}", t.exit_code)
    });
    let wait = waiting
        .filter(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
        .map(|w| format!("; {}", w.message.as_deref().unwrap_or("CrashLoopBackOff")));
    let times = if cs.restart_count == 1 {
        "time"
    } else {
        "times"
    };
    (cs.restart_count > 0 || wait.is_some()).then(|| {
        format!(
            "container {name} restarted {} {times}{}{}",
            cs.restart_count,
            last.unwrap_or_default(),
            wait.unwrap_or_default()
        )
    })
}

/// What the health endpoint said: the HTTP status and body, verbatim, and its meaning.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub code: u16,
    pub body: String,
    pub health: Health,
}

/// The Lease of an identity Secret.
pub fn lease_name(secret: &str) -> String {
    format!("valtune-identity-{secret}")
}

/// What the Validator's pod is rendered from.
pub fn input(v: &Validator, prometheus_url: Option<&str>) -> RenderInput {
    let name = v.name_any();
    let mut owner_labels = BTreeMap::from([
        (labels::MANAGED_BY.to_string(), labels::MANAGER.to_string()),
        (VALIDATOR_LABEL.to_string(), name.clone()),
    ]);
    if let Some(id) = &v.spec.identity {
        owner_labels.insert(IDENTITY_LABEL.into(), identity_label(&id.secret_name));
    }
    let key = |k: &crate::api::validator::KeyRef| SecretKey {
        secret: k.secret_name.clone(),
        key: k.key.clone(),
    };
    let agent_port = agent_port(v);
    let agent_enters_validator = v.spec.identity_agent_enters_validator_mount_namespace;
    let pair = match (
        &v.spec.identity,
        &v.spec.spare_identity,
        &v.spec.standby_for,
    ) {
        (Some(staked), Some(spare), _) => Some(Pair {
            staked: key(staked),
            spare: key(spare),
            agent_port,
            agent_enters_validator,
        }),
        (Some(spare), None, Some(staked)) => Some(Pair {
            staked: key(staked),
            spare: key(spare),
            agent_port,
            agent_enters_validator,
        }),
        _ => None,
    };
    let keys = Keys {
        identity: v.spec.identity.as_ref().map(key),
        vote: v.spec.vote_account.as_ref().map(key),
        producer: v.spec.producer_name.clone(),
        pair,
    };
    let reference = v.controller_owner_ref(&());
    RenderInput {
        owner: Owner {
            name: name.clone(),
            namespace: v.namespace(),
            reference: reference.clone(),
            labels: owner_labels.clone(),
        },
        // A Validator is a group of one: its generated Secrets go with it.
        group: Group {
            name,
            labels: owner_labels,
            owners: reference.into_iter().collect(),
        },
        template: v.spec.template.clone(),
        remote_write: MetricsSettings::default().remote_write(prometheus_url),
        max_lag: None,
        role: match v.spec.role {
            ValidatorRole::Voting => Role::Voting(keys),
            ValidatorRole::NonVoting => Role::NonVoting(keys),
            ValidatorRole::Standby => Role::Standby(keys),
        },
        lifecycle: Lifecycle::LongRunning {
            node: v.spec.node_name.clone(),
        },
    }
}

/// A failover pair member's identity agent port.
pub fn agent_port(v: &Validator) -> i32 {
    v.spec
        .identity_agent_port
        .unwrap_or(DEFAULT_IDENTITY_AGENT_PORT)
}

/// The objects rendered for `v`, the pod annotated with their hash.
pub fn render(v: &Validator, prometheus_url: Option<&str>) -> (Result<Rendered, String>, String) {
    match clients::render(&input(v, prometheus_url)) {
        Ok(mut r) => {
            let hash = hash_of(&r);
            r.pod
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(POD_HASH.into(), hash.clone());
            (Ok(r), hash)
        }
        Err(e) => (Err(e.to_string()), String::new()),
    }
}

/// A hash of the pod and its ConfigMaps as rendered (before any defaulting). FNV-1a, not
/// std's `DefaultHasher`, whose output Rust may change between releases: an operator
/// built with another toolchain would then see every pod as changed and restart them all.
fn hash_of(r: &Rendered) -> String {
    let text = serde_json::to_string(&(&r.pod, &r.config_maps)).unwrap_or_default();
    let h = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{h:016x}")
}

pub async fn observe(v: &Validator, ctx: &Context) -> Result<Observed> {
    let ns = v.namespace().unwrap_or_default();
    let name = v.name_any();
    let tuning = tuning_of(v, ctx).await?;
    let (rendered, hash) = match &tuning {
        Tuned::Resolved { template, .. } => {
            let mut tuned = v.clone();
            tuned.spec.template = (**template).clone();
            render(&tuned, ctx.prometheus_url.as_deref())
        }
        _ => render(v, ctx.prometheus_url.as_deref()),
    };
    let client = clients::client_for(&v.spec.template).ok();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);

    let mut lease = LeaseState::NoIdentity;
    let mut others = Vec::new();
    if let Some(id) = &v.spec.identity {
        let lname = lease_name(&id.secret_name);
        let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), &ns);
        let found = leases
            .get_opt(&lname)
            .await
            .map_err(|e| Error::ReadLease(format!("reading Lease {ns}/{lname}"), e))?;
        let holder = found
            .and_then(|l| l.spec?.holder_identity)
            .filter(|h| !h.is_empty());
        lease = match holder {
            None => LeaseState::Free { name: lname },
            Some(h) if h == name => LeaseState::Ours { name: lname },
            Some(h) => LeaseState::HeldBy {
                name: lname,
                holder: h,
            },
        };
        let lp = ListParams::default().labels(&format!(
            "{IDENTITY_LABEL}={}",
            identity_label(&id.secret_name)
        ));
        others = pods
            .list(&lp)
            .await
            .map_err(|e| {
                Error::ListPods(format!("listing pods of identity {}", id.secret_name), e)
            })?
            .items
            .into_iter()
            .map(|p| p.name_any())
            .filter(|p| *p != name)
            .collect();
    }

    let pod = pods
        .get_opt(&name)
        .await
        .map_err(|e| Error::ReadPod(format!("reading pod {ns}/{name}"), e))?;
    let mut state = None;
    let mut answer = None;
    let mut unanswered = None;
    let mut position = None;
    let mut look = None;
    if let Some(p) = &pod {
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
        let node_ready = match &node {
            Some(n) => {
                let nodes: Api<Node> = Api::all(ctx.client.clone());
                let got = nodes
                    .get_opt(n)
                    .await
                    .map_err(|e| Error::ReadNode(format!("reading node {n}"), e))?;
                Some(got.is_some_and(|n| node_is_ready(&n)))
            }
            None => None,
        };
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".into());
        let ip = p.status.as_ref().and_then(|s| s.pod_ip.clone());
        if let (Some(c), Some(ip), "Running", None) =
            (client, &ip, phase.as_str(), &p.metadata.deletion_timestamp)
        {
            let t = &v.spec.template;
            if let Some(probe) = c.health(t) {
                let url = format!("http://{ip}:{}{}", probe.port, probe.path);
                let got = match probe.rpc_method {
                    Some(m) => ask(ctx.http.post(&url).json(&rpc_call(m, Value::Null))).await,
                    None => ask(host(ctx.http.get(&url), probe.host.as_deref())).await,
                };
                let got = match got {
                    Ok(got) => Some(got),
                    Err(NoAnswer::Refused) => None,
                    Err(NoAnswer::Other(e)) => {
                        unanswered = Some(format!("{url}: {e}"));
                        None
                    }
                };
                if let (Some(read), Some((200, body))) = (probe.position, &got) {
                    position = read(body);
                }
                answer = got.map(|(code, body)| Answer {
                    health: (probe.judge)(code, &body),
                    code,
                    body,
                });
            }
            let read = c
                .restart_window(t)
                .read(Reach {
                    endpoints: &Endpoints(ctx),
                    ip,
                    spec: &v.spec,
                    health: answer.as_ref().map(|a| (a.health, a.body.as_str())),
                    pending: p.annotations().get(POD_HASH) != Some(&hash),
                })
                .await;
            position = read.position.or(position);
            look = read.reading;
            if let Some(probe) = c.position(t) {
                let url = format!("http://{ip}:{}{}", probe.port, probe.path);
                position = get(ctx, &url, None)
                    .await
                    .filter(|(code, _)| *code == 200)
                    .and_then(|(_, page)| probe.read(&page));
            }
        }
        state = Some(PodState {
            name: p.name_any(),
            hash: p.annotations().get(POD_HASH).cloned(),
            terminating: p.metadata.deletion_timestamp.is_some(),
            phase,
            node,
            node_ready,
            image: p
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone()),
            restarts: restarts(p),
        });
    }
    let pair = pair_view(v, ctx, &lease, pod.as_ref()).await?;
    Ok(Observed {
        pair,
        rendered,
        hash,
        lease,
        pod: state,
        others,
        answer,
        unanswered,
        position,
        window: client
            .map(|c| c.restart_window(&v.spec.template))
            .unwrap_or_else(|| Arc::new(window::Immediate)),
        look,
        tuning,
    })
}

/// The staked identity a failover pair member signs with when it holds its Lease: a
/// voting one's `identity` (with `spareIdentity`), a standby's `standbyFor`.
pub fn staked_of(v: &Validator) -> Option<&crate::api::validator::KeyRef> {
    match (&v.spec.role, &v.spec.spare_identity, &v.spec.standby_for) {
        (ValidatorRole::Voting, Some(_), _) => v.spec.identity.as_ref(),
        (ValidatorRole::Standby, _, Some(s)) => Some(s),
        _ => None,
    }
}

async fn pair_view(
    v: &Validator,
    ctx: &Context,
    lease: &LeaseState,
    pod: Option<&Pod>,
) -> Result<Option<super::pair::View>> {
    use super::pair::{Asked, Holder, Incoming, View};
    let Some(staked) = staked_of(v) else {
        return Ok(None);
    };
    let Some(key) = staked.public_key.clone() else {
        return Ok(None);
    };
    let ns = v.namespace().unwrap_or_default();
    let name = v.name_any();
    let lname = lease_name(&staked.secret_name);
    let mut holder = if v.spec.role == ValidatorRole::Voting {
        match lease {
            LeaseState::Ours { .. } => Holder::Us,
            LeaseState::HeldBy { holder, .. } => Holder::Other(Some(holder.clone())),
            _ => Holder::Other(None),
        }
    } else {
        match holder_of(ctx, &ns, &lname).await? {
            Some(h) if h == name => Holder::Us,
            h => Holder::Other(h),
        }
    };
    let own = match pod {
        Some(p) => Some(member_of(ctx, p, rpc_port(v)).await?),
        None => None,
    };
    // The holder's own annotation: a failover to this Validator under way.
    let mut incoming = false;
    if let Holder::Other(Some(h)) = &holder {
        let vs: Api<Validator> = Api::namespaced(ctx.client.clone(), &ns);
        let o = vs
            .get_opt(h)
            .await
            .map_err(|e| Error::ReadValidator(format!("reading Validator {ns}/{h}"), e))?;
        let said = o.as_ref().map(|o| super::pair::incoming(o, &name));
        incoming = said == Some(Incoming::Moving);
        // Done: the holder moved the Lease here before recording the move done; the Lease
        // read above may predate that move (read again: it decides), or the identity was
        // moved back since (then the holder's old annotation still names this Validator,
        // which signs no more).
        if said == Some(Incoming::Done)
            && holder_of(ctx, &ns, &lname).await?.as_deref() == Some(name.as_str())
        {
            holder = Holder::Us;
        }
    }
    let mut failover = None;
    if let (Holder::Us, Some(to)) = (&holder, v.annotations().get(FAILOVER_TO)) {
        let vs: Api<Validator> = Api::namespaced(ctx.client.clone(), &ns);
        let other = vs
            .get_opt(to)
            .await
            .map_err(|e| Error::ReadValidator(format!("reading Validator {ns}/{to}"), e))?;
        let standby = match other {
            None => Err(format!("no Validator {to} in namespace {ns}")),
            Some(_) if *to == name => Err(format!("{to} is this Validator")),
            Some(o) => match staked_of(&o) {
                Some(k)
                    if k.secret_name == staked.secret_name && k.public_key == staked.public_key =>
                {
                    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
                    match pods
                        .get_opt(to)
                        .await
                        .map_err(|e| Error::ReadPod(format!("reading pod {ns}/{to}"), e))?
                    {
                        Some(p) => Ok(Some(member_of(ctx, &p, rpc_port(&o)).await?)),
                        None => Ok(None),
                    }
                }
                _ => Err(format!(
                    "Validator {to} is not a failover pair member of identity Secret {} (a standby with standbyFor naming it, with the same publicKey)",
                    staked.secret_name
                )),
            },
        };
        failover = Some(Asked {
            to: to.clone(),
            requested: v.annotations().get(FAILOVER_REQUESTED).cloned(),
            standby,
        });
    }
    Ok(Some(View {
        agent_port: agent_port(v),
        name,
        staked: key,
        lease: lname,
        holder,
        own,
        failover,
        incoming,
    }))
}

/// The holder of Lease `lname`, if anybody holds it.
async fn holder_of(ctx: &Context, ns: &str, lname: &str) -> Result<Option<String>> {
    let leases: Api<Lease> = Api::namespaced(ctx.client.clone(), ns);
    Ok(leases
        .get_opt(lname)
        .await
        .map_err(|e| Error::ReadLease(format!("reading Lease {ns}/{lname}"), e))?
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// Where a pair member answers getIdentity (its client's JSON-RPC port).
fn rpc_port(v: &Validator) -> i32 {
    let t = &v.spec.template;
    clients::client_for(t)
        .ok()
        .and_then(|c| c.identity_rpc_port(t))
        .unwrap_or(8899)
}

/// A pair member's pod as its validator reports itself: getIdentity, getHealth, getSlot.
async fn member_of(ctx: &Context, p: &Pod, rpc_port: i32) -> Result<super::pair::Member> {
    let node_ready = match p.spec.as_ref().and_then(|s| s.node_name.clone()) {
        Some(n) => {
            let nodes: Api<Node> = Api::all(ctx.client.clone());
            let got = nodes
                .get_opt(&n)
                .await
                .map_err(|e| Error::ReadNode(format!("reading node {n}"), e))?;
            Some(got.is_some_and(|n| node_is_ready(&n)))
        }
        None => None,
    };
    let ip = p.status.as_ref().and_then(|s| s.pod_ip.clone());
    let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && p.metadata.deletion_timestamp.is_none();
    let mut side = super::failover::PodSide {
        name: p.name_any(),
        terminating: p.metadata.deletion_timestamp.is_some(),
        node_ready,
        ..Default::default()
    };
    if let (true, Some(ip)) = (running, &ip) {
        let url = format!("http://{ip}:{rpc_port}/");
        let result = |answer: Option<(u16, String)>| {
            answer
                .and_then(|(_, body)| serde_json::from_str::<Value>(&body).ok())
                .map(|v| v["result"].clone())
        };
        side.identity = result(post(ctx, &url, "getIdentity", Value::Null).await)
            .and_then(|r| r["identity"].as_str().map(String::from));
        side.healthy =
            result(post(ctx, &url, "getHealth", Value::Null).await).is_some_and(|r| r == "ok");
        side.slot = result(post(ctx, &url, "getSlot", Value::Null).await).and_then(|r| r.as_u64());
    }
    Ok(super::pair::Member {
        side,
        ip,
        request: p.annotations().get(IDENTITY_REQUEST).cloned(),
    })
}

/// The experiment `spec.tuning.fromExperiment` names, read with the labels of the
/// Validator's node and of the node its recommended trial ran on (the node class check).
async fn tuning_of(v: &Validator, ctx: &Context) -> Result<Tuned> {
    let Some(source) = &v.spec.tuning else {
        return Ok(Tuned::NotAsked);
    };
    let ns = v.namespace().unwrap_or_default();
    let name = &source.from_experiment;
    let vxs: Api<ValidatorExperiment> = Api::namespaced(ctx.client.clone(), &ns);
    let vx = vxs
        .get_opt(name)
        .await
        .map_err(|e| Error::ReadExperiment(format!("reading experiment {ns}/{name}"), e))?;
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let labels_of = |node: String| {
        let nodes = nodes.clone();
        async move {
            nodes
                .get_opt(&node)
                .await
                .map_err(|e| Error::ReadNode(format!("reading node {node}"), e))
                .map(|n| n.map(|n| n.labels().clone()))
        }
    };
    let mut seen = tuning::Nodes {
        validator: labels_of(v.spec.node_name.clone()).await?,
        trial: None,
    };
    let trial = vx
        .as_ref()
        .and_then(|x| x.status.as_ref()?.recommendation.as_ref())
        .map(|r| r.trial.clone());
    if let Some(trial) = trial {
        let trials: Api<ValidatorTrial> = Api::namespaced(ctx.client.clone(), &ns);
        let node = trials
            .get_opt(&trial)
            .await
            .map_err(|e| Error::ReadTrial(format!("reading trial {ns}/{trial}"), e))?
            .and_then(|t| t.status?.node_name);
        if let Some(node) = node {
            seen.trial = labels_of(node).await?;
        }
    }
    Ok(tuning::resolve(&v.spec.template, name, vx.as_ref(), &seen))
}

fn node_is_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Why a request got no answer.
#[derive(Debug)]
enum NoAnswer {
    /// The connection was refused (or the address is unreachable): nothing listens.
    Refused,
    /// A timeout, a broken connection or body: something may listen, and be busy.
    Other(String),
}

fn rpc_call(method: &str, params: Value) -> Value {
    let mut call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method});
    if !params.is_null() {
        call["params"] = params;
    }
    call
}

fn host(req: reqwest::RequestBuilder, host: Option<&str>) -> reqwest::RequestBuilder {
    match host {
        Some(h) => req.header(reqwest::header::HOST, h),
        None => req,
    }
}

/// A request with a short timeout: (status, body) whole (the judge parses it; status
/// keeps its first 512 characters), or why there was none.
async fn ask(req: reqwest::RequestBuilder) -> std::result::Result<(u16, String), NoAnswer> {
    let failed = |e: reqwest::Error| {
        if e.is_connect() && !e.is_timeout() {
            NoAnswer::Refused
        } else {
            NoAnswer::Other(e.to_string())
        }
    };
    let resp = req
        .timeout(std::time::Duration::from_secs(3))
        .send()
        .await
        .map_err(failed)?;
    let code = resp.status().as_u16();
    let body = resp.text().await.map_err(failed)?;
    Ok((code, body))
}

/// A JSON-RPC 2.0 call by POST: (status, body), or None when nothing answered.
async fn post(ctx: &Context, url: &str, method: &str, params: Value) -> Option<(u16, String)> {
    ask(ctx.http.post(url).json(&rpc_call(method, params)))
        .await
        .ok()
}

/// The pod's endpoints as the client's restart window reads them.
struct Endpoints<'a>(&'a Context);

impl window::Endpoints for Endpoints<'_> {
    fn get<'a>(&'a self, url: &'a str) -> futures::future::BoxFuture<'a, Option<(u16, String)>> {
        Box::pin(get(self.0, url, None))
    }

    fn rpc<'a>(
        &'a self,
        url: &'a str,
        method: &'a str,
        params: Value,
    ) -> futures::future::BoxFuture<'a, Option<(u16, String)>> {
        Box::pin(post(self.0, url, method, params))
    }
}

/// GET: (status, body), or None when nothing answered.
async fn get(ctx: &Context, url: &str, host_header: Option<&str>) -> Option<(u16, String)> {
    ask(host(ctx.http.get(url), host_header)).await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kubelet's report of a crash-looping client container, in a sentence; nothing
    /// for one that never ended.
    #[test]
    fn restarts_read_as_the_kubelet_reports_them() {
        let pod = |status: &str| -> Pod {
            serde_saphyr::from_str(&format!(
                "spec:\n  containers: [{{name: validator}}, {{name: agent}}]\nstatus:\n  containerStatuses:\n  - {{name: agent, image: a, imageID: '', ready: true, restartCount: 9}}\n  - {{name: validator, image: a, imageID: '', ready: false, {status}}}\n"
            ))
            .unwrap()
        };
        assert_eq!(
            restarts(&pod("restartCount: 3, state: {waiting: {reason: CrashLoopBackOff, message: 'back-off 40s restarting failed container=validator pod=v_ns(u)'}}, lastState: {terminated: {exitCode: 1, reason: Error}}")).as_deref(),
            Some("container validator restarted 3 times, the last ending Error with exit code 1; back-off 40s restarting failed container=validator pod=v_ns(u)")
        );
        assert_eq!(
            restarts(&pod("restartCount: 1, state: {running: {}}, lastState: {terminated: {exitCode: 137, reason: OOMKilled}}")).as_deref(),
            Some("container validator restarted 1 time, the last ending OOMKilled with exit code 137")
        );
        assert_eq!(
            restarts(&pod("restartCount: 0, state: {running: {}}")),
            None
        );
    }
}
