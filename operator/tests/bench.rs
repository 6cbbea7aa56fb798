//! `make bench`: the operator's footprint on a lab of its own. BENCH_TRIALS trials
//! (default 100) in BENCH_EXPERIMENTS experiments (default: the fewest that run them all
//! at once, an experiment running at most 64 at a time), BENCH_PARALLELISM of each at
//! once (default: all of them), on as many simulated nodes as trials run at once (a lab
//! holds 126: beyond, BENCH_PARALLELISM runs the trials in turns).
//! Each experiment sweeps memory x cpu (x repetitions) to reach its trial count (a list
//! holds at most 32 values, repetitions 16). Then:
//! - the time until every trial had started (its pod running, as the operator recorded
//!   it), from the experiments' creation;
//! - the operator's API writes per trial, by resource and verb, from the API server's
//!   audit log of the operator's own user (cross-checked against the API server's
//!   `apiserver_request_total` for valtune's resources), and its reads (get, list) by
//!   resource, which a watch cache could have answered;
//! - the operator's write rate while the trials start, against the raw write rate of the
//!   same API server measured by a plain client loop in the same run;
//! - Prometheus queries per trial, reconcile latency (p50, p90, p99 as histogram bucket
//!   bounds, and the mean) and peak RSS of the operator;
//! - the machine's load average (the bench shares its cores).
//!
//! It is a test only to share the lab harness; `make bench` runs it (release build).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use valtune::api::experiment::ExperimentPhase;
use valtune::api::trial::TrialPhase;
use valtune::api::{ValidatorExperiment, ValidatorTrial};
use valtune_lab::control_plane;

mod bench_lab;
use bench_lab::env_usize;

/// Writes per second a plain client loop gets from this API server (create + delete of
/// ConfigMaps, one at a time, for `for`).
async fn raw_write_rate(client: &kube::Client, ns: &str, r#for: Duration) -> f64 {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let start = Instant::now();
    let mut writes = 0u64;
    let mut i = 0u64;
    while start.elapsed() < r#for {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(format!("raw-{i}")),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &cm).await.unwrap();
        api.delete(&format!("raw-{i}"), &DeleteParams::default())
            .await
            .unwrap();
        writes += 2;
        i += 1;
    }
    writes as f64 / start.elapsed().as_secs_f64()
}

/// The most validator nodes a lab holds.
const LAB_NODES: usize = 126;

/// One request of the operator's user in the audit log.
struct Audited {
    resource: String,
    verb: String,
    at: Option<Timestamp>,
    /// The API server's answer (409: a conditional write from a stale copy).
    code: u64,
}

impl Audited {
    fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// The operator user's requests in the audit log (its writes, and its gets and lists).
fn audited(log: &Path) -> Vec<Audited> {
    let mut out = Vec::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if e["user"]["username"] != control_plane::OPERATOR_USER || e["stage"] != "ResponseComplete"
        {
            continue;
        }
        let r = &e["objectRef"];
        let mut resource = r["resource"].as_str().unwrap_or("?").to_string();
        if let Some(sub) = r["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        out.push(Audited {
            resource,
            verb: e["verb"].as_str().unwrap_or("?").to_string(),
            at: e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok()),
            code: e["responseStatus"]["code"].as_u64().unwrap_or(0),
        });
    }
    out
}

/// Counts by (resource, verb).
fn by_resource<'a>(requests: impl Iterator<Item = &'a Audited>) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for r in requests {
        *out.entry((r.resource.clone(), r.verb.clone())).or_insert(0) += 1;
    }
    out
}

/// How an experiment of `trials` trials sweeps: (memory values, cpu values, repetitions),
/// their product `trials`, each list at most 32 values and repetitions at most 16 (the
/// API's bounds); the fewest repetitions that fit. None if no such product exists.
fn shape(trials: usize) -> Option<(usize, usize, usize)> {
    (1..=16).filter(|r| trials % r == 0).find_map(|r| {
        let points = trials / r;
        (1..=32)
            .rev()
            .find(|m| points % m == 0 && points / m <= 32)
            .map(|m| (m, points / m, r))
    })
}

/// The fewest experiments that run `trials` at once: an experiment runs at most 64 of
/// its trials at a time (spec.parallelism), and each gets the same count.
fn fewest_experiments(trials: usize) -> usize {
    (1..=trials.max(1))
        .find(|e| trials % e == 0 && trials / e <= 64)
        .unwrap_or(trials)
}

/// The machine's load average (1, 5, 15 minutes) as /proc/loadavg says it.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A metric family's samples from a Prometheus text page: (labels, value).
fn samples(page: &str, name: &str) -> Vec<(String, f64)> {
    page.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| {
            let (head, value) = l.rsplit_once(' ')?;
            Some((head.to_string(), value.parse().ok()?))
        })
        .collect()
}

/// A quantile of a histogram from its cumulative buckets (the bucket's upper bound).
fn quantile(page: &str, name: &str, controller: &str, q: f64) -> Option<f64> {
    let buckets: Vec<(f64, f64)> = samples(page, &format!("{name}_bucket"))
        .into_iter()
        .filter(|(l, _)| l.contains(&format!("controller=\"{controller}\"")))
        .filter_map(|(l, v)| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            Some((
                if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                },
                v,
            ))
        })
        .collect();
    let total = buckets.iter().map(|b| b.1).fold(0.0, f64::max);
    buckets
        .iter()
        .find(|(_, count)| *count >= q * total)
        .map(|(le, _)| *le)
}

/// A histogram's mean from its _sum and _count.
fn mean(page: &str, name: &str, controller: &str) -> Option<f64> {
    let one = |suffix: &str| {
        samples(page, &format!("{name}_{suffix}"))
            .into_iter()
            .find(|(l, _)| l.contains(&format!("controller=\"{controller}\"")))
            .map(|s| s.1)
    };
    Some(one("sum")? / one("count")?).filter(|m| m.is_finite())
}

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{:.0} ms", v * 1000.0))
        .unwrap_or("-".into())
}

/// When every trial had started (its status past Scheduling, or finished having started),
/// watching every namespace's trials from `since`; waits until `expected` trials exist.
async fn watch_starts(
    client: kube::Client,
    expected: usize,
    since: Instant,
    out: Arc<Mutex<Starts>>,
) {
    let api: Api<ValidatorTrial> = Api::all(client);
    let mut started = HashSet::new();
    let mut seen = HashSet::new();
    let mut stream = watcher(api, watcher::Config::default())
        .applied_objects()
        .boxed();
    while let Some(Ok(t)) = stream.next().await {
        let name = format!(
            "{}/{}",
            t.metadata.namespace.clone().unwrap_or_default(),
            t.metadata.name.clone().unwrap_or_default()
        );
        seen.insert(name.clone());
        let st = t.status.unwrap_or_default();
        let running = match st.phase {
            TrialPhase::Pending | TrialPhase::Scheduling => false,
            TrialPhase::Failed => st.started_at.is_some(),
            _ => true,
        };
        if running {
            started.insert(name);
        }
        let mut o = out.lock().unwrap();
        if o.created.is_none() && seen.len() == expected {
            o.created = Some(since.elapsed());
        }
        if started.len() == expected {
            o.started = Some(since.elapsed());
            o.load_at_started = load_average();
            return;
        }
    }
}

/// The lab Prometheus' scrapes of the trials' pods over the last `secs`, by endpoint:
/// scrape duration (mean, max) and failed scrapes (up == 0) of all; lines of the report.
async fn scrapes(prometheus: &str, secs: u64) -> String {
    let query = |q: String| async move {
        let v: serde_json::Value = reqwest::Client::new()
            .post(format!("{prometheus}/api/v1/query"))
            .form(&[("query", q)])
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        Some(
            v["data"]["result"]
                .as_array()?
                .iter()
                .filter_map(|r| {
                    Some((
                        r["metric"]["endpoint"].as_str()?.to_string(),
                        r["value"][1].as_str()?.parse::<f64>().ok()?,
                    ))
                })
                .collect::<BTreeMap<String, f64>>(),
        )
    };
    let w = format!("[{secs}s]");
    let sel = "{namespace=~\"bench-.*\"}";
    let (Some(mean), Some(max), Some(all), Some(ok)) = (
        query(format!(
            "avg by (endpoint) (avg_over_time(scrape_duration_seconds{sel}{w}))"
        ))
        .await,
        query(format!(
            "max by (endpoint) (max_over_time(scrape_duration_seconds{sel}{w}))"
        ))
        .await,
        query(format!("sum by (endpoint) (count_over_time(up{sel}{w}))")).await,
        query(format!("sum by (endpoint) (sum_over_time(up{sel}{w}))")).await,
    ) else {
        return "  (Prometheus did not answer)\n".into();
    };
    let mut out = String::new();
    for (endpoint, mean) in &mean {
        let n = all.get(endpoint).copied().unwrap_or(0.0);
        out.push_str(&format!(
            "  {endpoint:<16} mean {:>5.0} ms, max {:>5.0} ms; failed {:.0} of {n:.0} scrapes\n",
            mean * 1000.0,
            max.get(endpoint).copied().unwrap_or(f64::NAN) * 1000.0,
            n - ok.get(endpoint).copied().unwrap_or(0.0),
        ));
    }
    out
}

#[derive(Default)]
struct Starts {
    /// Every trial existed.
    created: Option<Duration>,
    /// Every trial had started.
    started: Option<Duration>,
    load_at_started: String,
}

/// The status updates of `K` the watch sees, by which top-level status fields changed
/// (what each status write carried; `phase` changes by the phase reached).
async fn watch_status_changes<K>(api: Api<K>, out: Arc<Mutex<BTreeMap<String, u64>>>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    K: Send + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let mut last: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    let mut stream = watcher(api, watcher::Config::default())
        .applied_objects()
        .boxed();
    while let Some(Ok(o)) = stream.next().await {
        let key = format!(
            "{}/{}",
            o.meta().namespace.clone().unwrap_or_default(),
            o.meta().name.clone().unwrap_or_default()
        );
        let status = serde_json::to_value(&o).unwrap()["status"].clone();
        let old = last.insert(key, status.clone()).unwrap_or(json!({}));
        let changed = status_change(&old, &status);
        if !changed.is_empty() {
            *out.lock().unwrap().entry(changed).or_insert(0) += 1;
        }
    }
}

/// The top-level status fields that differ ("phase=Measuring" for a phase change), or ""
/// when none does.
fn status_change(old: &serde_json::Value, new: &serde_json::Value) -> String {
    let empty = serde_json::Map::new();
    let (o, n) = (
        old.as_object().unwrap_or(&empty),
        new.as_object().unwrap_or(&empty),
    );
    let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| o.get(*k) != n.get(*k))
        .map(|k| match (k.as_str(), n.get(k).and_then(|v| v.as_str())) {
            ("phase", Some(p)) => format!("phase={p}"),
            _ => k.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The events in the bench's namespaces, by (kind of the object, reason): events, and
/// occurrences (a repeat patches its event's series count instead of creating one).
async fn events_by_reason(client: &kube::Client, experiments: usize) -> String {
    use k8s_openapi::api::events::v1::Event;
    let mut by: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for e in 0..experiments {
        let api: Api<Event> = Api::namespaced(client.clone(), &format!("bench-{e:02}"));
        for ev in api.list(&Default::default()).await.unwrap().items {
            let kind = ev.regarding.and_then(|r| r.kind).unwrap_or_default();
            let n = by.entry((kind, ev.reason.unwrap_or_default())).or_default();
            n.0 += 1;
            n.1 += ev.series.map(|s| s.count as u64).unwrap_or(1);
        }
    }
    by.iter()
        .map(|((kind, reason), (events, seen))| {
            format!("  {kind:<20} {reason:<24} {events:>6} events, {seen:>6} occurrences\n")
        })
        .collect()
}

#[cfg(test)]
#[test]
fn a_status_change_names_the_fields_that_changed() {
    let old = json!({"phase": "WarmingUp", "message": "a", "answeringAt": null});
    let new =
        json!({"phase": "Measuring", "message": "b", "answeringAt": null, "windowStart": "t"});
    assert_eq!(
        status_change(&old, &new),
        "message phase=Measuring windowStart"
    );
    assert_eq!(status_change(&new, &new), "");
}

#[cfg(test)]
#[test]
fn a_trial_count_is_swept_within_the_api_bounds() {
    assert_eq!(shape(20), Some((20, 1, 1)));
    assert_eq!(shape(100), Some((25, 4, 1)));
    assert_eq!(shape(1024), Some((32, 32, 1)));
    // 1000 = 2^3 x 5^3 has no two factors both at most 32: repetitions make it.
    assert_eq!(shape(1000), Some((25, 20, 2)));
    assert_eq!(shape(300), Some((30, 10, 1)));
    // A prime above 32 cannot be swept.
    assert_eq!(shape(37), None);
    assert_eq!(fewest_experiments(100), 2);
    assert_eq!(fewest_experiments(300), 5);
    assert_eq!(fewest_experiments(1000), 20);
    assert_eq!(fewest_experiments(64), 1);
    for n in 1..=1024 {
        if let Some((m, c, r)) = shape(n) {
            assert_eq!(m * c * r, n);
            assert!(m <= 32 && c <= 32 && r <= 16);
        }
    }
}

#[tokio::test]
#[ignore = "a benchmark: run `make bench`"]
async fn bench() {
    let trials_total = env_usize("BENCH_TRIALS", 100);
    let experiments = env_usize("BENCH_EXPERIMENTS", fewest_experiments(trials_total));
    assert!(
        experiments > 0 && trials_total % experiments == 0,
        "BENCH_TRIALS ({trials_total}) must be a multiple of BENCH_EXPERIMENTS ({experiments})"
    );
    let per = trials_total / experiments;
    let parallelism = env_usize("BENCH_PARALLELISM", per).min(per);
    let Some((memories, cpus, repetitions)) = shape(per) else {
        panic!(
            "{per} trials per experiment is no product of two sweeps of at most 32 values and at most 16 repetitions: pick another BENCH_TRIALS"
        )
    };
    let at_once = experiments * parallelism;
    // A lab's nodes and pods share one /24 of 127.0.0.0/8 (lab/src/net.rs): 126 nodes
    // beside its system node (lab/src/control_plane.rs).
    assert!(
        at_once <= LAB_NODES,
        "{experiments} experiment(s) x BENCH_PARALLELISM {parallelism} = {at_once} trials at once, each on a node of its own; a lab has {LAB_NODES}: set BENCH_PARALLELISM to at most {} (the trials then run in turns)",
        LAB_NODES / experiments
    );
    let load_before = load_average();
    let lab = bench_lab::up("lab", &bench_lab::topology(at_once, "1512Gi")).await;
    let (state, client) = (&lab.state, lab.client.clone());
    let work = bench_lab::repo().join("target/bench");

    // The API server's own write rate, before the operator starts.
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("bench-raw".into());
    ns_api.create(&PostParams::default(), &ns).await.unwrap();
    let raw = raw_write_rate(&client, "bench-raw", Duration::from_secs(10)).await;

    let listen = lab.spawn_operator();

    let memory: Vec<String> = (0..memories)
        .map(|i| format!("{}Gi", 512 + 16 * i))
        .collect();
    let cpu: Vec<usize> = (0..cpus).map(|i| 32 + i).collect();
    for e in 0..experiments {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(format!("bench-{e:02}"));
        ns_api.create(&PostParams::default(), &ns).await.unwrap();
    }
    let started = Instant::now();
    let t0 = Timestamp::now();
    let starts = Arc::new(Mutex::new(Starts::default()));
    let trial_changes = Arc::new(Mutex::new(BTreeMap::new()));
    let experiment_changes = Arc::new(Mutex::new(BTreeMap::new()));
    let change_watches = [
        tokio::spawn(watch_status_changes(
            Api::<ValidatorTrial>::all(client.clone()),
            trial_changes.clone(),
        )),
        tokio::spawn(watch_status_changes(
            Api::<ValidatorExperiment>::all(client.clone()),
            experiment_changes.clone(),
        )),
    ];
    let watch = tokio::spawn(watch_starts(
        client.clone(),
        trials_total,
        started,
        starts.clone(),
    ));
    for e in 0..experiments {
        let name = format!("bench-{e:02}");
        // As the lab runs the example, then the bench's own sweep and timings.
        let mut v = lab.example("manifests/examples/quickstart-agave-ram-sweep.yaml", &name);
        v["spec"]["sweep"] = json!({"memory": memory, "cpu": cpu});
        v["spec"]["maxTrials"] = json!(per);
        v["spec"]["parallelism"] = json!(parallelism);
        v["spec"]["trial"] = json!({
            "repetitions": repetitions,
            "warmup": {"timeout": "60s"},
            "measurement": {"duration": "10s"},
        });
        let vx: ValidatorExperiment = serde_json::from_value(v).unwrap();
        Api::<ValidatorExperiment>::namespaced(client.clone(), &name)
            .create(&PostParams::default(), &vx)
            .await
            .unwrap();
    }
    let mut peak_load = 0.0f64;
    loop {
        let mut done = 0;
        for e in 0..experiments {
            let name = format!("bench-{e:02}");
            let vx = Api::<ValidatorExperiment>::namespaced(client.clone(), &name)
                .get(&name)
                .await
                .unwrap();
            if matches!(
                vx.status.map(|s| s.phase),
                Some(ExperimentPhase::Succeeded | ExperimentPhase::Failed)
            ) {
                done += 1;
            }
        }
        let one: f64 = load_average()
            .split(' ')
            .next()
            .and_then(|l| l.parse().ok())
            .unwrap_or(0.0);
        peak_load = peak_load.max(one);
        if done == experiments {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3600),
            "the bench did not finish in an hour"
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    watch.abort();
    // Let the last cleanups land.
    tokio::time::sleep(Duration::from_secs(10)).await;
    for w in &change_watches {
        w.abort();
    }

    let trials = trials_total as f64;
    let requests = audited(&state.dir.join("logs/audit.log"));
    let writes = by_resource(requests.iter().filter(|r| r.is_write()));
    let reads = by_resource(requests.iter().filter(|r| !r.is_write()));
    let metrics = reqwest::get(format!("http://{listen}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let queries: f64 = samples(&metrics, "valtune_prometheus_queries_total")
        .iter()
        .map(|s| s.1)
        .sum();
    let op = valtune_lab::LabState::load(&state.dir).unwrap();
    let op_pid = op.process("operator").unwrap().pid;
    let hwm_kib: f64 = std::fs::read_to_string(format!("/proc/{op_pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(f64::NAN);
    let apiserver = client
        .request_text(http::Request::get("/metrics").body(Vec::new()).unwrap())
        .await
        .unwrap();
    let valtune_writes: f64 = samples(&apiserver, "apiserver_request_total")
        .iter()
        .filter(|(l, _)| {
            l.contains("group=\"valtune.dev\"")
                && ["POST", "PATCH", "APPLY", "PUT", "DELETE"]
                    .iter()
                    .any(|v| l.contains(&format!("verb=\"{v}\"")))
        })
        .map(|s| s.1)
        .sum();
    let starts = std::mem::take(&mut *starts.lock().unwrap());

    let mut report = format!(
        "valtune bench: {trials_total} trials in {experiments} experiment(s) of {per} ({memories} memory x {cpus} cpu x {repetitions} repetitions), {at_once} at once on {at_once} nodes; {elapsed:.0}s to the end\n\
         load average (1, 5, 15 min): {load_before} before, {} when every trial had started, peak 1-min {peak_load:.1} (the machine is shared)\n\n",
        starts.load_at_started
    );
    let secs = |d: Option<Duration>| {
        d.map(|d| format!("{:.1} s", d.as_secs_f64()))
            .unwrap_or("never".into())
    };
    report.push_str(&format!(
        "every trial created after {}, every trial started after {} ({:.1} trials/s)\n",
        secs(starts.created),
        secs(starts.started),
        starts
            .started
            .map(|d| trials / d.as_secs_f64())
            .unwrap_or(0.0)
    ));
    // The operator's writes while the trials started, the lease apart.
    if let Some(d) = starts.started {
        let end = t0 + jiff::SignedDuration::try_from(d).unwrap();
        let n = requests
            .iter()
            .filter(|r| r.is_write() && r.resource != "leases")
            .filter(|r| r.at.is_some_and(|at| at >= t0 && at <= end))
            .count() as f64;
        let rate = n / d.as_secs_f64();
        report.push_str(&format!(
            "while they started the operator wrote {n:.0} times, {rate:.1} writes/s: {:.0}% of the raw client loop's {raw:.0} writes/s (goal >= 50%)\n\n",
            100.0 * rate / raw
        ));
    }
    report.push_str("operator API writes per trial (audit log of its user):\n");
    let mut per_trial_total = 0.0;
    let mut leases = 0.0;
    for ((resource, verb), n) in &writes {
        let share = *n as f64 / trials;
        if resource == "leases" {
            leases += *n as f64;
        } else {
            per_trial_total += share;
        }
        report.push_str(&format!(
            "  {resource:<32} {verb:<7} {n:>6}  {share:>6.2}/trial\n"
        ));
    }
    report.push_str(&format!(
        "  total, leases apart: {per_trial_total:.2}/trial (goal <= 16); the lease: {leases:.0} renewals in {elapsed:.0}s\n"
    ));
    let refused = by_resource(
        requests
            .iter()
            .filter(|r| r.is_write() && r.resource != "leases" && r.code >= 300),
    );
    for ((resource, verb), n) in &refused {
        let codes: BTreeMap<u64, u64> = requests
            .iter()
            .filter(|r| r.is_write() && &r.resource == resource && &r.verb == verb)
            .filter(|r| r.code >= 300)
            .fold(BTreeMap::new(), |mut m, r| {
                *m.entry(r.code).or_insert(0) += 1;
                m
            });
        report.push_str(&format!(
            "  of which refused: {resource} {verb} {n} ({:.2}/trial), by code {codes:?}\n",
            *n as f64 / trials
        ));
    }
    let audited_valtune: u64 = writes
        .iter()
        .filter(|((r, _), _)| r.starts_with("validator"))
        .map(|(_, n)| n)
        .sum();
    report.push_str(&format!(
        "  cross-check: apiserver_request_total has {valtune_writes:.0} writes to valtune.dev resources; the audit log {audited_valtune}\n"
    ));
    for (what, changes) in [
        ("trial", &trial_changes),
        ("experiment", &experiment_changes),
    ] {
        report.push_str(&format!(
            "{what} status updates by the fields they changed (a watch's view; per trial):\n"
        ));
        let mut rows: Vec<(String, u64)> = changes.lock().unwrap().clone().into_iter().collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1));
        for (fields, n) in rows {
            report.push_str(&format!("  {n:>6} {:>6.2}  {fields}\n", n as f64 / trials));
        }
    }
    report.push_str("events by object kind and reason:\n");
    report.push_str(&events_by_reason(&client, experiments).await);
    report.push_str("operator API reads per trial (get, list; watches apart):\n");
    for ((resource, verb), n) in &reads {
        report.push_str(&format!(
            "  {resource:<32} {verb:<7} {n:>6}  {:>6.2}/trial\n",
            *n as f64 / trials
        ));
    }
    report.push('\n');
    report.push_str(&format!(
        "Prometheus queries per trial: {:.1}\n",
        queries / trials
    ));
    for c in ["experiment", "trial"] {
        let q = |q| quantile(&metrics, "valtune_reconcile_duration_seconds", c, q);
        let count = samples(&metrics, "valtune_reconcile_duration_seconds_count")
            .into_iter()
            .find(|(l, _)| l.contains(&format!("controller=\"{c}\"")))
            .map(|s| s.1)
            .unwrap_or(0.0);
        report.push_str(&format!(
            "reconcile {c}: {count:.0} reconciles, p50 <= {}, p90 <= {}, p99 <= {} (bucket bounds; goal p99 < 50 ms), mean {}\n",
            ms(q(0.5)),
            ms(q(0.9)),
            ms(q(0.99)),
            ms(mean(&metrics, "valtune_reconcile_duration_seconds", c)),
        ));
    }
    report.push_str(&format!(
        "operator peak RSS (VmHWM): {:.1} MiB (goal < 64 MiB)\n",
        hwm_kib / 1024.0
    ));
    let op_total: f64 = writes.values().map(|n| *n as f64).sum::<f64>() - leases;
    report.push_str(&format!(
        "over the whole run the operator wrote {:.1} writes/s on average\n",
        op_total / elapsed,
    ));
    report.push_str(&format!(
        "the lab Prometheus' scrapes of the trials' pods (scrape timeout {}):\n{}",
        state.scrape_interval,
        scrapes(&state.prometheus_url, elapsed as u64 + 10).await
    ));
    println!("\n{report}");
    std::fs::write(work.join("report.txt"), &report).unwrap();
    lab.down();
}
