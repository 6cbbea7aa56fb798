//! Shared helpers for tests against the lab that `make test` starts (VALTUNE_LAB_DIR).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::Value;
use valtune_lab::LabState;

pub struct Lab {
    #[allow(dead_code)] // not every test needs the lab's endpoints
    pub state: LabState,
    pub client: Client,
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Attaches to the running lab and makes sure the CRDs in crds/ are installed.
pub async fn lab() -> Lab {
    valtune_lab::init_crypto();
    let dir = std::env::var("VALTUNE_LAB_DIR")
        .expect("VALTUNE_LAB_DIR is not set: these tests need the lab; run them with `make test`");
    let state = LabState::load(Path::new(&dir)).expect("loading the lab's state");
    assert!(state.all_running(), "the lab in {dir} is not running");
    let client = state.client().await.expect("a client for the lab");
    // Once per test process: a test that changes a CRD on purpose (the chart's upgrade
    // test) must not have it re-applied under it by a test that starts meanwhile.
    let mut installed = CRDS_INSTALLED.lock().await;
    if !*installed {
        valtune_lab::control_plane::install_crds(&client, &repo_root().join("crds"))
            .await
            .expect("installing crds/");
        *installed = true;
    }
    Lab { state, client }
}

/// Whether this process has installed crds/ into the lab (tokio's Mutex: tests run on
/// runtimes of their own, and the first holds it across the install).
static CRDS_INSTALLED: tokio::sync::Mutex<bool> = tokio::sync::Mutex::const_new(false);

impl Lab {
    /// What the validators of namespace `ns` signed with `identity`, from the lab's
    /// signing record (outside the cluster: lab/src/sim/signing), and every violation of
    /// "never two signers" the checker finds in it.
    pub fn signed(
        &self,
        ns: &str,
        identity: &str,
    ) -> (
        Vec<valtune_lab::sim::signing::Stretch>,
        Vec<valtune_lab::sim::signing::check::Violation>,
    ) {
        use valtune_lab::sim::signing;
        let record: Vec<_> = signing::read(&signing::path_in(&self.state.dir))
            .expect("reading the lab's signing record")
            .into_iter()
            .filter(|s| s.identity == identity && s.process.starts_with(&format!("{ns}/")))
            .collect();
        let violations = signing::check::check(&record);
        (record, violations)
    }

    /// A fresh namespace for one test.
    pub async fn namespace(&self, prefix: &str) -> String {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let mut ns: Namespace = Default::default();
        ns.metadata.generate_name = Some(format!("t-{prefix}-"));
        let created = api.create(&PostParams::default(), &ns).await.unwrap();
        created.metadata.name.unwrap()
    }

    /// A fresh namespace with a label, e.g. the one a second Prometheus selects.
    pub async fn namespace_labelled(&self, prefix: &str, (key, value): (&str, &str)) -> String {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let mut ns: Namespace = Default::default();
        ns.metadata.generate_name = Some(format!("t-{prefix}-"));
        ns.metadata.labels = Some([(key.to_string(), value.to_string())].into());
        let created = api.create(&PostParams::default(), &ns).await.unwrap();
        created.metadata.name.unwrap()
    }

    pub async fn delete_namespace(&self, name: &str) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
}

/// A YAML file of the repository as JSON.
pub fn yaml_file(path: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join(path)).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// An example of manifests/examples as the lab runs it: the file as written for a real
/// cluster, with the lab's time compression applied (`valtune-lab compress`,
/// lab/src/compress.rs), never an edited copy. Tests patch it in lab time after that.
pub fn example(path: &str) -> Value {
    let mut v = yaml_file(path);
    let dir = std::env::var("VALTUNE_LAB_DIR")
        .expect("VALTUNE_LAB_DIR is not set: these tests need the lab; run them with `make test`");
    let state = LabState::load(Path::new(&dir)).expect("loading the lab's state");
    valtune_lab::compress::Compression::of(&state)
        .and_then(|c| c.apply(&mut v))
        .expect("compressing the example for the lab");
    v
}

pub use valtune::report::patch::merge_apply as merge;

/// A `valtune operator` process watching one namespace, killed when dropped. Its log goes
/// to target/test-logs/<namespace>-<n>.log (n counts the processes started).
pub struct Operator {
    child: std::process::Child,
    pub listen: String,
    pub log: PathBuf,
}

impl Lab {
    pub fn start_operator(&self, namespace: &str) -> Operator {
        self.start_operator_with(namespace, Some(&self.state.prometheus_url))
    }

    /// An operator with a given `--prometheus-url` (None: no default Prometheus).
    pub fn start_operator_with(&self, namespace: &str, prometheus: Option<&str>) -> Operator {
        self.spawn_operator(namespace, prometheus, &self.state.kubeconfig)
    }

    /// An operator as the lab's operator user, whose reads (gets and lists) the audit
    /// log records too (docs/lab.md).
    #[allow(dead_code)] // one test reads its requests
    pub fn start_audited_operator(&self, namespace: &str) -> Operator {
        let kubeconfig = self.state.operator_kubeconfig();
        self.spawn_operator(namespace, Some(&self.state.prometheus_url), &kubeconfig)
    }

    fn spawn_operator(
        &self,
        namespace: &str,
        prometheus: Option<&str>,
        kubeconfig: &std::path::Path,
    ) -> Operator {
        let logs = repo_root().join("target/test-logs");
        std::fs::create_dir_all(&logs).unwrap();
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let log = logs.join(format!("{namespace}-{n}.log"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let listen = format!("127.0.0.1:{port}");
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_valtune"));
        match prometheus {
            Some(url) => command.env("VALTUNE_PROMETHEUS_URL", url),
            None => command.env_remove("VALTUNE_PROMETHEUS_URL"),
        };
        let child = command
            .args([
                "operator",
                "--namespace",
                namespace,
                "--listen",
                &listen,
                // A SIGKILLed leader's lease must expire quickly in tests.
                "--lease-duration",
                "3s",
            ])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,kube=warn")
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("starting valtune operator");
        Operator { child, listen, log }
    }
}

impl Operator {
    #[allow(dead_code)] // the outage tests read its memory
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The identity it competes for the lease with (hostname and pid).
    pub fn identity(&self) -> String {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        format!("{}-{}", host.trim(), self.child.id())
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: no chance to release the lease or finish anything.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, and the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` every second until it returns Some, or panics after `timeout` with the
/// last state `describe` gives.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: std::time::Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(state) if std::time::Instant::now() > deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last state: {state}")
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
        }
    }
}

/// An example as the lab runs it, renamed, in a namespace, with a merge patch (in lab
/// time) applied.
pub fn example_as(
    path: &str,
    ns: &str,
    name: &str,
    patch: Value,
) -> valtune::api::ValidatorExperiment {
    let mut v = merge(&example(path), &patch);
    v["metadata"]["namespace"] = serde_json::json!(ns);
    v["metadata"]["name"] = serde_json::json!(name);
    serde_json::from_value(v).unwrap()
}

/// The quickstart experiment as the lab runs it, renamed, in a namespace, with a merge
/// patch (in lab time) applied.
pub fn quickstart_with(ns: &str, name: &str, patch: Value) -> valtune::api::ValidatorExperiment {
    example_as(
        "manifests/examples/quickstart-agave-ram-sweep.yaml",
        ns,
        name,
        patch,
    )
}

pub async fn experiment(lab: &Lab, ns: &str, name: &str) -> valtune::api::ValidatorExperiment {
    let api: Api<valtune::api::ValidatorExperiment> = Api::namespaced(lab.client.clone(), ns);
    api.get(name).await.unwrap()
}

/// Waits until the experiment is Succeeded or Failed.
pub async fn wait_finished(
    lab: &Lab,
    ns: &str,
    name: &str,
    timeout: std::time::Duration,
) -> valtune::api::ValidatorExperiment {
    use valtune::api::experiment::ExperimentPhase;
    let api: Api<valtune::api::ValidatorExperiment> = Api::namespaced(lab.client.clone(), ns);
    wait_for(&format!("experiment {name} to finish"), timeout, || {
        let api = api.clone();
        async move {
            let vx = api.get(name).await.map_err(|e| e.to_string())?;
            let st = vx.status.clone().unwrap_or_default();
            match st.phase {
                ExperimentPhase::Succeeded | ExperimentPhase::Failed => Ok(vx),
                p => Err(format!("{p:?} {:?}", st.trials)),
            }
        }
    })
    .await
}

/// Every trial in a namespace.
/// A figure of a trial's results; the test fails naming the trial without it.
pub fn figure(t: &valtune::api::ValidatorTrial, name: &str) -> f64 {
    t.status
        .as_ref()
        .and_then(|s| s.results.as_ref())
        .and_then(|r| r.figure(name))
        .unwrap_or_else(|| panic!("{}: no {name} in {:?}", t.spec.point.describe(), t.status))
}

pub async fn trials(lab: &Lab, ns: &str) -> Vec<valtune::api::ValidatorTrial> {
    let api: Api<valtune::api::ValidatorTrial> = Api::namespaced(lab.client.clone(), ns);
    api.list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
}

/// Waits until the namespace holds no pods and no volume claims, nor trials when
/// `trials_too`: what a finished or deleted experiment must leave behind.
pub async fn wait_released(lab: &Lab, ns: &str, trials_too: bool, timeout: std::time::Duration) {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
    let lp = kube::api::ListParams::default();
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), ns);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(lab.client.clone(), ns);
    let trials: Api<valtune::api::ValidatorTrial> = Api::namespaced(lab.client.clone(), ns);
    wait_for("pods, claims and trials to be gone", timeout, || async {
        let n = (
            pods.list(&lp).await.map_err(|e| e.to_string())?.items.len(),
            claims
                .list(&lp)
                .await
                .map_err(|e| e.to_string())?
                .items
                .len(),
            if trials_too {
                trials
                    .list(&lp)
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .len()
            } else {
                0
            },
        );
        if n == (0, 0, 0) {
            Ok(())
        } else {
            Err(format!("(pods, claims, trials) = {n:?}"))
        }
    })
    .await;
}

/// A fresh namespace with its own operator, and the quickstart experiment in it, named
/// `name` and patched with `patch`.
pub async fn start_experiment(
    lab: &Lab,
    name: &str,
    patch: serde_json::Value,
) -> (String, Operator) {
    let ns = lab.namespace(name).await;
    let op = lab.start_operator(&ns);
    create(lab, &quickstart_with(&ns, name, patch)).await;
    (ns, op)
}

pub async fn create(lab: &Lab, vx: &valtune::api::ValidatorExperiment) {
    let ns = vx.metadata.namespace.clone().unwrap();
    let api: Api<valtune::api::ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    api.create(&PostParams::default(), vx).await.unwrap();
}

/// ValidatorExperiments as plain objects: admission tests send what the typed API would
/// not let them build.
pub fn experiments(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::erase::<valtune::api::ValidatorExperiment>(&());
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// A case of an admission test: (what is wrong, a merge patch on the base object, the
/// field the API server's error names, the text it says).
pub type Refusal<'a> = (&'a str, Value, &'a str, &'a str);

/// Sends the base object, then each case's patch of it, as dry runs (admission runs,
/// nothing is stored), and lists what went otherwise than expected: the base refused, a
/// case accepted, or refused without naming the field (the API server prefixes each error
/// with its path) and the text. Rules on the object's root (metadata.name) name their
/// field in the message instead.
pub async fn refusals(
    api: &Api<DynamicObject>,
    base: &Value,
    cases: Vec<Refusal<'_>>,
) -> Vec<String> {
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let mut failures = Vec::new();
    let ok: DynamicObject = serde_json::from_value(base.clone()).unwrap();
    if let Err(e) = api.create(&pp, &ok).await {
        failures.push(format!("the base object itself: {e}"));
    }
    for (what, patch, field, text) in cases {
        let obj: DynamicObject = serde_json::from_value(merge(base, &patch)).unwrap();
        match api.create(&pp, &obj).await {
            Ok(_) => failures.push(format!("{what}: accepted")),
            Err(kube::Error::Api(status)) => {
                let msg = status.message;
                let names_field = msg.contains(&format!("{field}:"))
                    || (field == "metadata.name"
                        && msg.contains("<nil>: Invalid value: \"object\": metadata.name"));
                if !(names_field && msg.contains(text)) {
                    failures.push(format!(
                        "{what}: expected `{field}: ...{text}...`, got: {msg}"
                    ));
                }
            }
            Err(e) => failures.push(format!("{what}: {e}")),
        }
    }
    failures
}
