//! What a pass observes: the attempt's pod (classified, pure), its node, and the
//! Prometheus readings the phase needs (lag, abort rules, results).

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};

use super::transition::{Needs, Observed, Partner, ReadError, Settings};
use crate::api::trial::{SnapshotSource, TrialPhase, ValidatorTrial, ValidatorTrialStatus};
use crate::clients::pod::{PREFLIGHT_CONTAINER, pod_name};
use crate::clients::{self, RenderInput, profile::MetricProfile};
use crate::controller::{Context, Error, now};
use crate::results::abort::{self, Verdict};
use crate::results::early_abort::LagSeries;
use crate::results::prometheus::PromError;

/// A Prometheus answer as the transition reads it; a transient failure also marks the
/// pass blind.
fn reading<T>(obs: &mut Observed, r: Result<T, PromError>) -> Result<T, String> {
    r.map_err(|e| {
        if e.is_transient() && obs.blind.is_none() {
            obs.blind = Some(e.to_string());
        }
        e.to_string()
    })
}
use crate::results::analysis::{self, Window};
use crate::results::prometheus::Prometheus;

/// What the validator's pod is doing, as far as the trial cares.
#[derive(Debug, Clone, PartialEq)]
pub enum PodState {
    /// No pod (never created, or deleted).
    Missing,
    /// The pod is being deleted, was garbage-collected, or its node is gone.
    Lost {
        node: Option<String>,
        reason: String,
    },
    /// Not running yet; `unschedulable` quotes the scheduler when it cannot place it.
    Waiting {
        unschedulable: Option<String>,
    },
    Running {
        node: String,
        started_at: Timestamp,
    },
    /// The client's preflight check of the node failed, saying what is missing.
    NotPrepared {
        node: Option<String>,
        message: String,
    },
    /// The validator container exited (OOMKilled, Error, ...), with its termination
    /// message when it left one.
    Exited {
        node: Option<String>,
        reason: String,
        exit_code: i32,
        finished_at: Timestamp,
        message: Option<String>,
    },
}

/// Classifies a pod. `node_exists` is whether the pod's node still exists (None if the
/// pod has no node yet or it was not checked).
pub fn classify(pod: Option<&Pod>, validator: &str, node_exists: Option<bool>) -> PodState {
    let Some(pod) = pod else {
        return PodState::Missing;
    };
    let spec_node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    let status = pod.status.clone().unwrap_or_default();
    let conditions = status.conditions.clone().unwrap_or_default();
    if let Some(c) = conditions
        .iter()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
    {
        return PodState::Lost {
            node: spec_node,
            reason: format!(
                "{}: {}",
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            ),
        };
    }
    if node_exists == Some(false) {
        return PodState::Lost {
            reason: format!(
                "node {} no longer exists",
                spec_node.clone().unwrap_or_default()
            ),
            node: spec_node,
        };
    }
    // An init step that failed: the preflight says the node lacks something; any other
    // stops the pod before the validator runs (restartPolicy Never). A native sidecar
    // (`restartPolicy: Always`) is no step: the kubelet stops it (143) once the
    // validator has ended, which is the validator's end, not its own.
    let sidecars: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    for c in status.init_container_statuses.iter().flatten() {
        if sidecars.contains(&c.name.as_str()) {
            continue;
        }
        let Some(t) = c.state.as_ref().and_then(|s| s.terminated.as_ref()) else {
            continue;
        };
        if t.exit_code == 0 {
            continue;
        }
        let message = t
            .message
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(|m| m.chars().take(400).collect::<String>());
        if c.name == PREFLIGHT_CONTAINER {
            return PodState::NotPrepared {
                node: spec_node,
                message: message.unwrap_or_else(|| {
                    format!("the preflight check exited with code {}", t.exit_code)
                }),
            };
        }
        return PodState::Exited {
            node: spec_node,
            reason: format!(
                "init container {}: {}",
                c.name,
                t.reason.clone().unwrap_or_else(|| "Error".into())
            ),
            exit_code: t.exit_code,
            finished_at: t.finished_at.as_ref().map(|t| t.0).unwrap_or_else(now),
            message,
        };
    }
    let container = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == validator);
    if let Some(state) = container.and_then(|c| c.state.as_ref()) {
        if let Some(t) = &state.terminated {
            return PodState::Exited {
                node: spec_node,
                reason: t.reason.clone().unwrap_or_else(|| "Error".into()),
                exit_code: t.exit_code,
                finished_at: t.finished_at.as_ref().map(|t| t.0).unwrap_or_else(now),
                message: t
                    .message
                    .as_deref()
                    .map(str::trim)
                    .filter(|m| !m.is_empty())
                    .map(|m| m.chars().take(400).collect()),
            };
        }
        if let (Some(r), Some(node)) = (&state.running, &spec_node) {
            return PodState::Running {
                node: node.clone(),
                started_at: r.started_at.as_ref().map(|t| t.0).unwrap_or_else(now),
            };
        }
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return PodState::Lost {
            node: spec_node,
            reason: "the pod was deleted".into(),
        };
    }
    if matches!(status.phase.as_deref(), Some("Failed") | Some("Succeeded")) {
        return PodState::Exited {
            node: spec_node,
            reason: status.reason.unwrap_or_else(|| "Error".into()),
            exit_code: -1,
            finished_at: now(),
            message: status.message,
        };
    }
    let unschedulable = conditions
        .iter()
        .find(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
        .map(|c| {
            let message = c.message.clone().unwrap_or_default();
            with_required_labels(message, pod)
        });
    PodState::Waiting { unschedulable }
}

/// The scheduler says a node "didn't match Pod's node affinity/selector" without saying
/// which labels: name the ones the pod requires, so the reason says what to prepare.
fn with_required_labels(message: String, pod: &Pod) -> String {
    let selector = pod.spec.as_ref().and_then(|s| s.node_selector.as_ref());
    match selector {
        Some(labels) if message.contains("node affinity/selector") && !labels.is_empty() => {
            let wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!(
                "{message} (the pod needs nodes labelled {})",
                wanted.join(", ")
            )
        }
        _ => message,
    }
}

/// The label matchers of the current attempt's pod.
pub fn selector(trial: &ValidatorTrial, st: &ValidatorTrialStatus) -> String {
    analysis::selector(
        &trial.namespace().unwrap_or_default(),
        &pod_name(&trial.name_any(), st.attempts.max(1)),
    )
}

/// Observes what `needs` asks for.
/// A paired trial's partner, read when this one is ready for its window (one GET a pass
/// while one side waits for the other).
async fn partner(trial: &ValidatorTrial, ctx: &Context, name: &str) -> Result<Partner, Error> {
    let ns = trial.namespace().unwrap_or_default();
    let api: Api<ValidatorTrial> = Api::namespaced(ctx.client.clone(), &ns);
    let found = api.get_opt(name).await;
    let Some(p) =
        found.map_err(|e| Error::ReadTrial(format!("reading its pair's trial {ns}/{name}"), e))?
    else {
        return Ok(Partner::Gone);
    };
    let st = p.status.unwrap_or_default();
    let done = st.phase.is_finished();
    Ok(match (&st.caught_up_at, &st.window_start, done) {
        (Some(_), Some(start), _) => Partner::Measuring(start.0),
        (Some(at), None, _) => Partner::CaughtUp(at.0),
        (None, _, true) => Partner::Gone,
        (None, _, false) => Partner::Waiting(name.to_string()),
    })
}

/// What downloading a snapshot cost the trials of the same experiment that did: the
/// mean of their reported download seconds, the time a trial starting from a local
/// snapshot saved (None: none downloaded yet). Read from the operator's watch of trials
/// (the experiments' store, [`Context::trials`]), not listed from the API server (issue
/// 23: a list of the experiment's trials per collected trial).
async fn snapshot_reference(trial: &ValidatorTrial, ctx: &Context) -> Result<Option<f64>, Error> {
    let Some(experiment) = trial.labels().get(crate::api::labels::EXPERIMENT) else {
        return Ok(None);
    };
    // Until the watch's first list arrives the store is empty, not "no downloads".
    ctx.trials_ready
        .clone()
        .wait_for(|ready| *ready)
        .await
        .map_err(|_| Error::WatchStopped("trials"))?;
    let ns = trial.namespace();
    let trials = ctx.trials.state();
    Ok(mean_download(trials.iter().map(|t| t.as_ref()).filter(
        |t| {
            t.namespace() == ns
                && t.labels().get(crate::api::labels::EXPERIMENT) == Some(experiment)
        },
    )))
}

/// The mean download seconds of the trials that downloaded their snapshot. Pure.
fn mean_download<'a>(trials: impl Iterator<Item = &'a ValidatorTrial>) -> Option<f64> {
    let downloads: Vec<f64> = trials
        .filter_map(|t| t.status.as_ref()?.results.as_ref()?.snapshot.clone())
        .filter(|s| s.source == SnapshotSource::Downloaded)
        .filter_map(|s| s.download_seconds)
        .collect();
    (!downloads.is_empty()).then(|| downloads.iter().sum::<f64>() / downloads.len() as f64)
}

pub async fn observe(
    trial: &ValidatorTrial,
    ctx: &Context,
    st: &ValidatorTrialStatus,
    needs: &Needs,
    s: &Settings,
    profile: &MetricProfile,
    prom: Option<&Prometheus>,
) -> Result<Observed, Error> {
    let mut obs = Observed::default();
    match needs {
        Needs::Render => {
            let attempt = st.attempts.max(1);
            let input = RenderInput::for_trial(
                trial,
                attempt,
                &st.lost_nodes,
                ctx.prometheus_url.as_deref(),
            );
            obs.render = Some(
                input
                    .and_then(|i| clients::render(&i))
                    .map(|r| r.pod.name_any())
                    .map_err(|e| e.to_string()),
            );
        }
        Needs::Follow {
            scraped,
            lag,
            tps,
            aborts,
            end,
            early,
        } => {
            let (pod, shortfall) = pod_state(trial, ctx, st, profile).await?;
            obs.pod = Some(pod);
            obs.node_shortfall = shortfall;
            let sel = selector(trial, st);
            let running = matches!(obs.pod, Some(PodState::Running { .. }));
            // Since the pod started: a moment Prometheus recorded counts even if this
            // operator looked late (a busy or restarted operator, a slow reconcile), and
            // samples pushed with their own timestamps (Agave flushes every 10 s) count
            // when they arrive.
            let since = st.started_at.as_ref().map(|t| t.0).unwrap_or_else(now);
            if let (true, Some(prom)) = (*lag, prom) {
                let q = analysis::expand(profile.query(profile.lag).unwrap_or(""), &sel, s.step);
                obs.lag = Some(prom.value(&q, None).await.map_err(|e| e.to_string()));
                if st.answering_at.is_none() {
                    let r = analysis::first_time(prom, &q, since, now(), s.step).await;
                    obs.first_answer = r.ok().flatten();
                }
                let within = format!("({q}) <= {}", s.max_lag);
                let r = analysis::first_time(prom, &within, since, now(), s.step).await;
                obs.caught_up = Some(reading(&mut obs, r));
            }
            if let (Some(pair), None) = (&trial.spec.pair, &st.window_start) {
                obs.partner = Some(partner(trial, ctx, &pair.partner).await?);
            }
            if let (true, Some(prom), Some(q)) = (
                *tps,
                prom,
                profile.query(crate::api::settings::QueryKey::Tps),
            ) {
                let executing = format!("({}) > 0", analysis::expand(q, &sel, s.step));
                let r = analysis::first_time(prom, &executing, since, now(), s.step).await;
                obs.first_execution = Some(reading(&mut obs, r));
            }
            // After the lag: a scrape that answered the lag has its `up` sample by now,
            // so a lag never arrives without its first scrape (a scrape landing between
            // the two queries would otherwise look unscraped).
            if let (true, true, Some(prom)) = (*scraped, running, prom) {
                let first =
                    analysis::first_time(prom, &format!("up{{{sel}}}"), since, now(), s.step)
                        .await
                        .map_err(|e| e.to_string());
                obs.first_scrape = first.as_ref().ok().copied().flatten();
                obs.up = Some(first.map(|f| f.is_some()));
            }
            if let (true, Some(prom), Some(start)) = (*aborts, prom, &st.window_start) {
                obs.aborts = abort::judge(
                    prom,
                    profile,
                    &sel,
                    s.step,
                    start.0,
                    now(),
                    &trial.spec.settings.abort_when,
                )
                .await;
                if let Some(Verdict::Blind(why)) =
                    obs.aborts.iter().find(|v| matches!(v, Verdict::Blind(_)))
                {
                    obs.blind = Some(why.clone());
                }
            }
            if let (true, Some(prom)) = (*early, prom) {
                let r = lag_series(prom, profile, &sel, st, s).await;
                let transient = r.as_ref().is_err_and(|e| e.is_transient());
                obs.early =
                    Some(reading(&mut obs, r).map_err(|message| ReadError { message, transient }));
            }
            if let (true, true, Some(prom), Some(window_end)) =
                (*end, running, prom, st.window_end.as_ref().map(|t| t.0))
            {
                let r = analysis::scrapes_around(prom, &sel, window_end, now(), s.step).await;
                obs.end_scrapes = Some(reading(&mut obs, r));
            }
        }
        Needs::Collect { check_scraped } => {
            let (Some(prom), Some(start), Some(end)) = (prom, &st.window_start, &st.window_end)
            else {
                return Ok(obs);
            };
            let sel = selector(trial, st);
            let window = Window {
                start: start.0,
                end: end.0,
                step: s.step,
                life_start: st.started_at.as_ref().map(|t| t.0),
            };
            if *check_scraped {
                let r = analysis::newest_scrape(prom, &sel).await;
                let newest = reading(&mut obs, r);
                let go_on = matches!(newest, Ok(Some(t)) if t >= window.end);
                obs.newest_sample = newest.as_ref().ok().copied().flatten();
                obs.scraped = Some(newest.map(|_| go_on));
                if !go_on {
                    return Ok(obs);
                }
                // Pushed series arrive later than scraped ones (a flush interval, a
                // remote-write queue, a backlog after an outage): wait for them past the
                // window's end too.
                let pushed: Vec<String> = profile
                    .headline_series()
                    .into_iter()
                    .filter(|series| profile.is_remote_written(series))
                    .collect();
                if !pushed.is_empty() {
                    let r = analysis::newest_pushed(prom, &pushed, &sel).await;
                    let newest = reading(&mut obs, r);
                    let go_on = matches!(newest, Ok(Some(t)) if t >= window.end);
                    obs.newest_sample = newest.as_ref().ok().copied().flatten();
                    obs.scraped = Some(newest.map(|_| go_on));
                    if !go_on {
                        return Ok(obs);
                    }
                }
            }
            let r = analysis::collect(prom, profile, &sel, &window, s.max_lag).await;
            obs.results = Some(reading(&mut obs, r));
            obs.snapshot_reference = snapshot_reference(trial, ctx).await?;
        }
        Needs::Nothing | Needs::Wait(_) | Needs::Finished => {}
    }
    Ok(obs)
}

/// The lag series early abort judges from (the client's own lag query): the recent
/// stretch its checks read, since caught up; and the warm-up's, from the validator's
/// first answer to caught up, at most 500 points of it.
async fn lag_series(
    prom: &Prometheus,
    profile: &MetricProfile,
    sel: &str,
    st: &ValidatorTrialStatus,
    s: &Settings,
) -> Result<LagSeries, PromError> {
    let q = analysis::expand(profile.query(profile.lag).unwrap_or(""), sel, s.step);
    let now = now();
    let (Some((rule, _)), Some(caught_up)) = (&s.early, st.caught_up_at.as_ref().map(|t| t.0))
    else {
        return Ok(LagSeries::default());
    };
    let span = SignedDuration::from_secs_f64(rule.span())
        + SignedDuration::try_from(s.step).unwrap_or_default();
    let recent = prom
        .range(&q, (now - span).max(caught_up), now, s.step)
        .await?;
    let answered = st
        .answering_at
        .as_ref()
        .or(st.started_at.as_ref())
        .map(|t| t.0);
    let warmup = match answered {
        Some(from) if from < caught_up => {
            let length = caught_up.duration_since(from).as_secs_f64();
            let step = s
                .step
                .max(std::time::Duration::from_secs_f64(length / 500.0));
            prom.range(&q, from, caught_up, step).await?
        }
        _ => Vec::new(),
    };
    Ok(LagSeries { recent, warmup })
}

/// The attempt's pod and whether its node still exists, from the watches' stores; before
/// measuring, what that node cannot give the trial (its node and why).
async fn pod_state(
    trial: &ValidatorTrial,
    ctx: &Context,
    st: &ValidatorTrialStatus,
    profile: &MetricProfile,
) -> Result<(PodState, Option<(String, String)>), Error> {
    let ns = trial.namespace().unwrap_or_default();
    let name = pod_name(&trial.name_any(), st.attempts.max(1));
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let pod = stored_or_read(&ctx.pods, ObjectRef::new(&name).within(&ns), &pods)
        .await
        .map_err(|e| Error::ReadPod(format!("reading pod {ns}/{name}"), e))?;
    let node_name = pod
        .as_ref()
        .and_then(|p| p.spec.as_ref()?.node_name.clone());
    let node = match &node_name {
        Some(name) => Some(
            stored_or_read(
                &ctx.nodes,
                ObjectRef::new(name),
                &Api::<Node>::all(ctx.client.clone()),
            )
            .await
            .map_err(|e| Error::ReadNode(format!("reading node {name}"), e))?,
        ),
        None => None,
    };
    let before_measuring = matches!(st.phase, TrialPhase::Scheduling | TrialPhase::WarmingUp);
    let shortfall = match (
        pod.as_deref(),
        node.as_ref().and_then(|n| n.as_deref()),
        node_name,
    ) {
        (Some(p), Some(n), Some(name)) if before_measuring => {
            clients::client_for(&trial.spec.template)
                .ok()
                .and_then(|c| c.node_shortfall(&trial.spec.template, p, n))
                .map(|why| (name, why))
        }
        _ => None,
    };
    let state = classify(
        pod.as_deref(),
        profile.validator_container,
        node.map(|n| n.is_some()),
    );
    Ok((state, shortfall))
}

/// An object from a watch's store, or, when the store does not hold it, from the API
/// server: the store is as fresh as the watch (it is updated before the trial it wakes is
/// reconciled), but a pod applied a moment ago may not have arrived yet, and deciding
/// that a pod or its node is gone on such a read would start a needless retry. A miss is
/// rare once the watch has listed (a new attempt's first pass; a node or pod truly gone).
async fn stored_or_read<K>(
    store: &Store<K>,
    key: ObjectRef<K>,
    api: &Api<K>,
) -> kube::Result<Option<std::sync::Arc<K>>>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    if let Some(found) = store.get(&key) {
        return Ok(Some(found));
    }
    Ok(api.get_opt(&key.name).await?.map(std::sync::Arc::new))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference a local start is judged against: the mean of the downloads only.
    #[test]
    fn the_snapshot_reference_is_the_mean_of_the_downloads() {
        use crate::api::trial::{SnapshotStart, TrialResults};
        let trial = |snapshot: Option<SnapshotStart>| {
            ValidatorTrial::test().results(TrialResults {
                snapshot,
                ..Default::default()
            })
        };
        let trials = [
            trial(Some(SnapshotStart::of(false, 300.0, None))),
            trial(Some(SnapshotStart::of(true, 20.0, Some(300.0)))),
            trial(Some(SnapshotStart::of(false, 500.0, None))),
            trial(None),
        ];
        assert_eq!(mean_download(trials.iter()), Some(400.0));
        assert_eq!(mean_download(trials[1..2].iter()), None);
        assert_eq!(mean_download(std::iter::empty()), None);
    }

    fn pod(yaml: &str) -> Pod {
        serde_saphyr::from_str(yaml).unwrap()
    }

    /// A pod the watch holds is read from its store, with no request; one it does not
    /// hold is asked of the API server (here one that does not answer: the error says
    /// the request was made, not that the pod is missing).
    #[tokio::test]
    async fn a_stored_pod_is_read_from_the_store_and_a_miss_from_the_api_server() {
        use kube::runtime::watcher;
        let (store, mut writer) = kube::runtime::reflector::store::<Pod>();
        let p = pod("metadata: {name: t-1-a1, namespace: ns}\nspec: {containers: []}\n");
        writer.apply_watcher_event(&watcher::Event::Apply(p.clone()));
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let api: Api<Pod> = Api::namespaced(kube::Client::try_from(config).unwrap(), "ns");
        let hit = stored_or_read(&store, ObjectRef::new("t-1-a1").within("ns"), &api).await;
        assert_eq!(hit.unwrap().as_deref(), Some(&p));
        let miss = stored_or_read(&store, ObjectRef::new("t-1-a2").within("ns"), &api).await;
        assert!(miss.is_err(), "{miss:?}");
    }

    #[test]
    fn no_pod_is_missing() {
        assert_eq!(classify(None, "validator", None), PodState::Missing);
    }

    #[test]
    fn an_oom_killed_validator_is_exited_with_the_reason() {
        let p = pod(
            "metadata: {name: p}\nspec: {nodeName: n1, containers: []}\nstatus:\n  phase: Running\n  containerStatuses:\n  - name: validator\n    image: x\n    imageID: ''\n    ready: false\n    restartCount: 0\n    state: {terminated: {reason: OOMKilled, exitCode: 137, finishedAt: '2026-01-01T00:00:09Z'}}\n  - name: rpc-exporter\n    image: x\n    imageID: ''\n    ready: true\n    restartCount: 0\n    state: {running: {startedAt: '2026-01-01T00:00:00Z'}}\n",
        );
        match classify(Some(&p), "validator", Some(true)) {
            PodState::Exited {
                reason,
                exit_code,
                finished_at,
                ..
            } => {
                assert_eq!(reason, "OOMKilled");
                assert_eq!(exit_code, 137);
                assert_eq!(finished_at, "2026-01-01T00:00:09Z".parse().unwrap());
            }
            other => panic!("{other:?}"),
        }
    }

    /// The sidecars the kubelet stopped after the validator ended say nothing of it.
    #[test]
    fn a_stopped_sidecar_is_not_the_validators_end() {
        let p = pod(
            "metadata: {name: p}\nspec: {nodeName: n1, initContainers: [{name: preflight}, {name: process-exporter, restartPolicy: Always}], containers: []}\nstatus:\n  phase: Failed\n  initContainerStatuses:\n  - {name: preflight, image: x, imageID: '', ready: true, restartCount: 0, state: {terminated: {reason: Completed, exitCode: 0}}}\n  - {name: process-exporter, image: x, imageID: '', ready: false, restartCount: 0, state: {terminated: {reason: Error, exitCode: 143}}}\n  containerStatuses:\n  - {name: validator, image: x, imageID: '', ready: false, restartCount: 0, state: {terminated: {reason: Error, exitCode: 1, finishedAt: '2026-01-01T00:00:09Z'}}}\n",
        );
        match classify(Some(&p), "validator", Some(true)) {
            PodState::Exited {
                reason, exit_code, ..
            } => assert_eq!((reason.as_str(), exit_code), ("Error", 1)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_termination_message_is_kept() {
        let p = pod(
            "metadata: {name: p}\nspec: {nodeName: n1, containers: []}\nstatus:\n  phase: Running\n  containerStatuses:\n  - name: validator\n    image: x\n    imageID: ''\n    ready: false\n    restartCount: 0\n    state: {terminated: {reason: Error, exitCode: 2, message: \"error: unexpected argument '--x' found\\n\", finishedAt: '2026-01-01T00:00:09Z'}}\n",
        );
        match classify(Some(&p), "validator", Some(true)) {
            PodState::Exited { message, .. } => {
                assert_eq!(
                    message.as_deref(),
                    Some("error: unexpected argument '--x' found")
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_failed_preflight_says_the_node_is_not_prepared() {
        let p = pod(
            "metadata: {name: p}\nspec: {nodeName: n1, containers: []}\nstatus:\n  phase: Failed\n  initContainerStatuses:\n  - name: preflight\n    image: x\n    imageID: ''\n    ready: false\n    restartCount: 0\n    state: {terminated: {reason: Error, exitCode: 1, message: 'the node is not prepared for Agave: vm.max_map_count is 65530 (needs 1000000);'}}\n",
        );
        assert_eq!(
            classify(Some(&p), "validator", Some(true)),
            PodState::NotPrepared {
                node: Some("n1".into()),
                message:
                    "the node is not prepared for Agave: vm.max_map_count is 65530 (needs 1000000);"
                        .into()
            }
        );
    }

    #[test]
    fn the_scheduler_reason_is_quoted() {
        let p = pod(
            "metadata: {name: p}\nspec: {containers: []}\nstatus:\n  phase: Pending\n  conditions:\n  - {type: PodScheduled, status: 'False', reason: Unschedulable, message: '0/4 nodes are available: 4 Insufficient hugepages-1Gi.'}\n",
        );
        assert_eq!(
            classify(Some(&p), "validator", None),
            PodState::Waiting {
                unschedulable: Some(
                    "0/4 nodes are available: 4 Insufficient hugepages-1Gi.".into()
                )
            }
        );
    }

    #[test]
    fn a_pod_whose_node_is_gone_is_lost() {
        let p = pod(
            "metadata: {name: p}\nspec: {nodeName: n1, containers: []}\nstatus:\n  phase: Running\n  containerStatuses:\n  - name: validator\n    image: x\n    imageID: ''\n    ready: true\n    restartCount: 0\n    state: {running: {startedAt: '2026-01-01T00:00:00Z'}}\n",
        );
        assert!(
            matches!(classify(Some(&p), "validator", Some(false)), PodState::Lost { node: Some(n), .. } if n == "n1")
        );
        assert_eq!(
            classify(Some(&p), "validator", Some(true)),
            PodState::Running {
                node: "n1".into(),
                started_at: "2026-01-01T00:00:00Z".parse().unwrap()
            }
        );
    }

    #[test]
    fn garbage_collected_pods_are_lost() {
        let p = pod(
            "metadata: {name: p}\nspec: {nodeName: n1, containers: []}\nstatus:\n  phase: Running\n  conditions:\n  - {type: DisruptionTarget, status: 'True', reason: DeletionByPodGC, message: 'PodGC: node no longer exists'}\n",
        );
        assert!(matches!(
            classify(Some(&p), "validator", None),
            PodState::Lost { .. }
        ));
    }
}
