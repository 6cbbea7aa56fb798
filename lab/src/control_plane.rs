//! `up` and `down`: a real control plane (etcd, kube-apiserver with RBAC, kube-scheduler,
//! kube-controller-manager), kwok for the simulated kubelets, Prometheus, and the lab's
//! simulator, on free loopback ports, recorded in the lab's state file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::net::{free_port, release_pod_network, reserve_pod_network};
use crate::process::ProcessRecord;
use crate::prometheus;
use crate::state::LabState;
use crate::topology::{LAB_LABEL, Topology, gpu_runtime_class, storage_class};

pub const FIELD_MANAGER: &str = "valtune-lab";
/// The user of `operator.kubeconfig`: an operator run against the lab by hand.
pub const OPERATOR_USER: &str = "valtune-operator";

/// Settings for `up`.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub dir: PathBuf,
    pub tools: PathBuf,
    pub topology: PathBuf,
    pub time_scale: f64,
    pub scrape_interval: String,
    /// The `valtune-lab` binary (runs the simulator).
    pub lab_exe: PathBuf,
    /// The `valtune` binary the lab runs for pods of valtune's image (default: beside
    /// `lab_exe`, e.g. target/debug/valtune).
    pub valtune: Option<PathBuf>,
}

const TOOLS: [&str; 8] = [
    "etcd",
    "prometheus-operator",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
    "kwok",
    "prometheus",
    "kubectl",
];

fn log(msg: impl AsRef<str>) {
    eprintln!("[lab] {}", msg.as_ref());
}

/// Starts a lab in `opts.dir`, or reports the one already running there.
pub async fn up(opts: &UpOptions) -> anyhow::Result<LabState> {
    for tool in TOOLS {
        let path = opts.tools.join(tool);
        anyhow::ensure!(
            path.exists(),
            "{} is missing: build the lab's tools with `make tools` (hack/tools/build.sh)",
            path.display()
        );
    }
    let topology = Topology::load(&opts.topology)?;
    anyhow::ensure!(
        opts.time_scale >= 1.0,
        "--time-scale must be at least 1 (simulated seconds per real second)"
    );

    if let Ok(existing) = LabState::load(&opts.dir) {
        if existing.all_running() {
            log(format!("already running in {}", opts.dir.display()));
            return Ok(existing);
        }
        log("found a stopped or partial lab; cleaning it up first");
        down(&opts.dir, false)?;
    } else if opts.dir.join("etcd").exists() {
        // A lab taken down with --keep (its state file gone, its data kept for reading):
        // a new lab on its etcd data would bring the old lab's objects back to life.
        log(format!(
            "found a kept lab's data in {}; removing it first",
            opts.dir.display()
        ));
        std::fs::remove_dir_all(&opts.dir)
            .with_context(|| format!("removing {}", opts.dir.display()))?;
    }
    std::fs::create_dir_all(opts.dir.join("logs"))?;
    let dir = std::fs::canonicalize(&opts.dir)?;
    let started = Instant::now();

    let network = reserve_pod_network(&dir)?;
    let name = format!("lab-{}-{}", network.a, network.b);
    let mut state = LabState {
        name: name.clone(),
        dir: dir.clone(),
        kubeconfig: dir.join("kubeconfig"),
        apiserver_url: String::new(),
        prometheus_url: String::new(),
        prometheus_config: dir.join("prometheus.yml"),
        prometheus_no_receiver_url: String::new(),
        prometheus_outage_url: String::new(),
        pod_cidr: network.cidr(),
        pod_network_lock: network.lock.clone(),
        time_scale: opts.time_scale,
        scrape_interval: opts.scrape_interval.clone(),
        topology: std::fs::canonicalize(&opts.topology)?,
        tools: std::fs::canonicalize(&opts.tools)?,
        valtune: opts
            .valtune
            .clone()
            .unwrap_or_else(|| opts.lab_exe.with_file_name("valtune")),
        processes: Vec::new(),
        ready: false,
    };
    state.save()?;

    match start(
        &mut state,
        opts,
        &topology,
        &network.kwok_cidr(),
        &network.node_ip(),
        network.node_ips().collect(),
    )
    .await
    {
        Ok(()) => {
            state.ready = true;
            state.save()?;
            log(format!(
                "up in {:.0}s: {} validator nodes and {}, pods in {}",
                started.elapsed().as_secs_f64(),
                topology.nodes()?.len(),
                crate::topology::SYSTEM_NODE,
                state.pod_cidr
            ));
            Ok(state)
        }
        Err(e) => {
            log("start failed; stopping what was started");
            let _ = down(&dir, true);
            Err(e)
        }
    }
}

async fn start(
    state: &mut LabState,
    opts: &UpOptions,
    topology: &Topology,
    kwok_cidr: &str,
    node_ip: &str,
    node_ips: Vec<String>,
) -> anyhow::Result<()> {
    let dir = state.dir.clone();
    let tool = |t: &str| opts.tools.join(t);
    let pki = dir.join("pki");
    std::fs::create_dir_all(&pki)?;

    // Credentials: a static admin token, one for an operator run by hand (its own user,
    // so the audit log tells its writes apart), and a service-account signing key.
    let token = random_hex();
    let operator_token = random_hex();
    std::fs::write(
        dir.join("tokens.csv"),
        format!(
            "{token},valtune-lab-admin,valtune-lab-admin,\"system:masters\"\n{operator_token},{OPERATOR_USER},{OPERATOR_USER},\"system:masters\"\n"
        ),
    )?;
    // The audit log records every write of that operator user, and of service accounts
    // (the operator's own pod, installed by the chart, runs as one), and the operator
    // user's gets and lists (`make bench` counts the reads a watch cache could answer);
    // nothing else.
    std::fs::write(
        dir.join("audit-policy.yaml"),
        format!(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  users: [{OPERATOR_USER}]\n  verbs: [create, update, patch, delete, deletecollection, get, list]\n- level: Metadata\n  userGroups: [system:serviceaccounts]\n  verbs: [create, update, patch, delete, deletecollection]\n- level: None\n"
        ),
    )?;
    openssl(&["genrsa", "-out", path_str(&pki.join("sa.key"))?, "2048"])?;
    openssl(&[
        "rsa",
        "-in",
        path_str(&pki.join("sa.key"))?,
        "-pubout",
        "-out",
        path_str(&pki.join("sa.pub"))?,
    ])?;
    // prometheus-operator authenticates with a client certificate only.
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let (ca_crt, ca_key) = (pki.join("client-ca.crt"), pki.join("client-ca.key"));
    let (po_crt, po_key, po_csr) = (pki.join("po.crt"), pki.join("po.key"), pki.join("po.csr"));
    let mut args = vec![
        "req",
        "-x509",
        "-days",
        "3650",
        "-subj",
        "/CN=valtune-lab-client-ca",
    ];
    args.extend(ec);
    args.extend(["-keyout", path_str(&ca_key)?, "-out", path_str(&ca_crt)?]);
    openssl(&args)?;
    let mut args = vec![
        "req",
        "-subj",
        "/O=system:masters/CN=valtune-lab-prometheus-operator",
    ];
    args.extend(ec);
    args.extend(["-keyout", path_str(&po_key)?, "-out", path_str(&po_csr)?]);
    openssl(&args)?;
    openssl(&[
        "x509",
        "-req",
        "-days",
        "3650",
        "-in",
        path_str(&po_csr)?,
        "-CA",
        path_str(&ca_crt)?,
        "-CAkey",
        path_str(&ca_key)?,
        "-CAcreateserial",
        "-out",
        path_str(&po_crt)?,
    ])?;

    let etcd_port = free_port()?;
    let etcd_peer = free_port()?;
    let api_port = free_port()?;
    let prom_port = free_port()?;
    let bare_port = free_port()?;
    let outage_port = free_port()?;
    state.apiserver_url = format!("https://127.0.0.1:{api_port}");
    state.prometheus_url = format!("http://127.0.0.1:{prom_port}");
    state.prometheus_no_receiver_url = format!("http://127.0.0.1:{bare_port}");
    state.prometheus_outage_url = format!("http://127.0.0.1:{outage_port}");

    // etcd
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let peer_url = format!("http://127.0.0.1:{etcd_peer}");
    spawn(
        state,
        "etcd",
        &tool("etcd"),
        &[
            "--name=lab".into(),
            format!("--data-dir={}", dir.join("etcd").display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=lab={peer_url}"),
            // A lab's data is disposable; fsync only costs time on a shared disk.
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
        ],
    )?;
    wait_http(
        state,
        "etcd",
        &format!("{etcd_url}/health"),
        Duration::from_secs(30),
    )
    .await?;

    // kube-apiserver
    spawn(
        state,
        "kube-apiserver",
        &tool("kube-apiserver"),
        &[
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            format!("--cert-dir={}", pki.display()),
            format!("--token-auth-file={}", dir.join("tokens.csv").display()),
            format!(
                "--audit-policy-file={}",
                dir.join("audit-policy.yaml").display()
            ),
            format!(
                "--audit-log-path={}",
                dir.join("logs").join("audit.log").display()
            ),
            format!("--client-ca-file={}", ca_crt.display()),
            "--authorization-mode=RBAC".into(),
            format!(
                "--service-account-key-file={}",
                pki.join("sa.pub").display()
            ),
            format!(
                "--service-account-signing-key-file={}",
                pki.join("sa.key").display()
            ),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            "--allow-privileged=true".into(),
            // The lab's apiserver advertises loopback, which the endpoint reconciler refuses.
            "--endpoint-reconciler-type=none".into(),
            "--enable-priority-and-fairness=false".into(),
            "--profiling=false".into(),
        ],
    )?;
    write_kubeconfig(state, &state.kubeconfig, &token, &pki.join("apiserver.crt"))?;
    write_kubeconfig(
        state,
        &state.operator_kubeconfig(),
        &operator_token,
        &pki.join("apiserver.crt"),
    )?;
    let client = wait_apiserver(state, Duration::from_secs(90)).await?;

    let kubeconfig = state.kubeconfig.display().to_string();
    let component_auth = [
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--bind-address=127.0.0.1".into(),
        "--leader-elect=false".into(),
        // The lab has no front proxy; skip looking up its (absent) CA configmap.
        "--authentication-skip-lookup=true".into(),
    ];
    let mut args = component_auth.to_vec();
    args.push(format!("--secure-port={}", free_port()?));
    spawn(state, "kube-scheduler", &tool("kube-scheduler"), &args)?;

    let mut args = component_auth.to_vec();
    args.extend([
        format!("--secure-port={}", free_port()?),
        format!(
            "--service-account-private-key-file={}",
            pki.join("sa.key").display()
        ),
        format!("--root-ca-file={}", pki.join("apiserver.crt").display()),
        "--use-service-account-credentials=false".into(),
        // Pods of a deleted node are garbage-collected promptly (NodeLost tests).
        "--node-monitor-grace-period=20s".into(),
    ]);
    spawn(
        state,
        "kube-controller-manager",
        &tool("kube-controller-manager"),
        &args,
    )?;

    // kwok: the simulated kubelets of the topology's nodes.
    let kwok_config = dir.join("kwok.yaml");
    std::fs::write(&kwok_config, crate::kwok::config_yaml(kwok_cidr, node_ip))?;
    spawn(
        state,
        "kwok",
        &tool("kwok"),
        &[
            format!("--kubeconfig={kubeconfig}"),
            format!("--config={}", kwok_config.display()),
            "--manage-all-nodes=false".into(),
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".into(),
            // Server-side: a node whose label changes leaves the watch (kwok v0.7.0 drops
            // an update that no longer matches its client-side annotation filter, and
            // would keep playing the node: pkg/utils/informer/informer.go).
            format!(
                "--manage-nodes-with-label-selector={}={}",
                crate::topology::KUBELET_LABEL.0,
                crate::topology::KUBELET_LABEL.1
            ),
            format!("--cidr={kwok_cidr}"),
            format!("--node-ip={node_ip}"),
            "--node-lease-duration-seconds=20".into(),
        ],
    )?;

    // Prometheus, scraping itself until the simulator hands it the operator's config;
    // a second one without the remote-write receiver, as many clusters run theirs; a
    // third that outage tests stop.
    for (name, port, config, receiver) in [
        (
            "prometheus",
            prom_port,
            state.prometheus_config.clone(),
            true,
        ),
        (
            "prometheus-no-receiver",
            bare_port,
            prometheus::no_receiver_config(&dir),
            false,
        ),
        (
            prometheus::OUTAGE_PROCESS,
            outage_port,
            prometheus::outage_config(&dir),
            true,
        ),
    ] {
        std::fs::write(
            &config,
            prometheus::render_config(&prometheus::Config {
                scrape_interval: state.scrape_interval.clone(),
                self_target: format!("127.0.0.1:{port}"),
            }),
        )?;
        let mut args = vec![
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", dir.join(name).display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--web.enable-lifecycle".into(),
            "--web.enable-admin-api".into(),
            "--log.level=warn".into(),
        ];
        if receiver {
            // vmagent sidecars remote-write trial pods' datapoints here.
            args.push("--web.enable-remote-write-receiver".into());
        }
        spawn(state, name, &tool("prometheus"), &args)?;
    }
    for (name, url) in [
        ("prometheus", state.prometheus_url.clone()),
        (
            "prometheus-no-receiver",
            state.prometheus_no_receiver_url.clone(),
        ),
        (
            prometheus::OUTAGE_PROCESS,
            state.prometheus_outage_url.clone(),
        ),
    ] {
        wait_http(
            state,
            name,
            &format!("{url}/-/ready"),
            Duration::from_secs(60),
        )
        .await?;
    }

    // The cluster's contents: storage class, nodes, local PVs, prometheus-operator CRDs.
    apply(&client, storage_class(&state.name)).await?;
    let mut nodes = topology.nodes()?;
    nodes.push(crate::topology::system_node());
    anyhow::ensure!(
        nodes.len() <= 127,
        "the topology has {} nodes; a lab has addresses for 127",
        nodes.len()
    );
    for (n, ip) in nodes.iter_mut().zip(node_ips) {
        n.ip = Some(ip);
        // What the machine's kernel gives a validator, where the lab's kubelet reads it:
        // in the host's network namespace and in a pod's own.
        for host_network in [true, false] {
            n.prepared.write_sysctls(
                &crate::sim::init_steps::sysctl_dir(&dir.join("nodes").join(&n.name), host_network),
                host_network,
            )?;
        }
    }
    if nodes.iter().any(|n| n.gpus > 0) {
        apply(&client, gpu_runtime_class(&state.name)).await?;
    }
    for n in &nodes {
        apply(&client, n.node(&state.name)).await?;
        for pv in n.volumes(&state.name) {
            apply(&client, pv).await?;
        }
    }
    install_crds(&client, &vendor_crds_dir()).await?;

    // prometheus-operator renders PodMonitors, ServiceMonitors and PrometheusRules for the
    // lab's Prometheus resource; the simulator hands the result to the Prometheus process.
    spawn(
        state,
        "prometheus-operator",
        &tool("prometheus-operator"),
        &[
            format!("-apiserver={}", state.apiserver_url),
            format!("-ca-file={}", pki.join("apiserver.crt").display()),
            format!("-cert-file={}", po_crt.display()),
            format!("-key-file={}", po_key.display()),
            format!("-web.listen-address=127.0.0.1:{}", free_port()?),
            "-kubelet-endpoints=false".into(),
            "-log-level=warn".into(),
        ],
    )?;
    apply_yaml(&client, &prometheus::resource_yaml(&state.scrape_interval)).await?;

    spawn(
        state,
        "simulator",
        &opts.lab_exe,
        &["sim".into(), format!("--dir={}", dir.display())],
    )?;

    wait_nodes_ready(state, &client, nodes.len(), Duration::from_secs(60)).await?;
    Ok(())
}

/// Stops exactly the processes the lab in `dir` started and removes its state, unless
/// `keep` (then the logs, etcd and Prometheus data stay for inspection).
pub fn down(dir: &Path, keep: bool) -> anyhow::Result<()> {
    let state = LabState::load(dir)?;
    for p in state.processes.iter().rev() {
        if p.is_alive() {
            log(format!("stopping {} (pid {})", p.name, p.pid));
        }
        p.stop(Duration::from_secs(10));
    }
    let survivors: Vec<_> = state
        .processes
        .iter()
        .filter(|p| p.is_alive())
        .map(|p| format!("{} (pid {})", p.name, p.pid))
        .collect();
    if !survivors.is_empty() {
        bail!("these lab processes did not stop: {}", survivors.join(", "));
    }
    release_pod_network(&state.pod_network_lock);
    if keep {
        std::fs::remove_file(dir.join(LabState::FILE))?;
        log(format!("stopped; logs and data kept in {}", dir.display()));
    } else {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        log("stopped and removed");
    }
    Ok(())
}

/// Stops one of the lab's processes (e.g. Prometheus, for an outage), keeping its record
/// and its data so [`start_again`] can bring it back.
pub fn stop_one(dir: &Path, name: &str) -> anyhow::Result<()> {
    let state = LabState::load(dir)?;
    let p = state
        .process(name)
        .with_context(|| format!("the lab in {} has no process {name}", dir.display()))?;
    p.stop(Duration::from_secs(10));
    anyhow::ensure!(!p.is_alive(), "{name} (pid {}) did not stop", p.pid);
    Ok(())
}

/// Starts a stopped process of the lab again, with its arguments and data.
pub fn start_again(dir: &Path, name: &str) -> anyhow::Result<()> {
    let mut state = LabState::load(dir)?;
    let i = state
        .processes
        .iter()
        .position(|p| p.name == name)
        .with_context(|| format!("the lab in {} has no process {name}", dir.display()))?;
    let old = state.processes[i].clone();
    if old.is_alive() {
        return Ok(());
    }
    anyhow::ensure!(
        !old.program.as_os_str().is_empty(),
        "{name} was started by an older valtune-lab that did not record how; restart the lab"
    );
    let mut new = ProcessRecord::spawn(name, &old.program, &old.args, &old.log)?;
    new.adopted = old.adopted;
    state.processes[i] = new;
    state.save()
}

/// Starts a process as part of a running lab, replacing one of the same name.
pub fn spawn_into(dir: &Path, name: &str, command: &[String]) -> anyhow::Result<i32> {
    let mut state = LabState::load(dir)?;
    anyhow::ensure!(
        state.all_running(),
        "the lab in {} is not running",
        dir.display()
    );
    if let Some(old) = state.processes.iter().position(|p| p.name == name) {
        anyhow::ensure!(
            state.processes[old].adopted,
            "{name} is one of the lab's own processes"
        );
        state.processes.remove(old).stop(Duration::from_secs(10));
    }
    let (program, args) = command.split_first().context("no command given")?;
    spawn(&mut state, name, Path::new(program), args)?;
    let pid = match state.processes.last_mut() {
        Some(p) => {
            p.adopted = true;
            p.pid
        }
        None => 0,
    };
    state.save()?;
    Ok(pid)
}

pub(crate) fn spawn(
    state: &mut LabState,
    name: &str,
    program: &Path,
    args: &[String],
) -> anyhow::Result<()> {
    let log_path = state.dir.join("logs").join(format!("{name}.log"));
    let record = ProcessRecord::spawn(name, program, args, &log_path)?;
    state.processes.push(record);
    state.save()
}

fn check_alive(state: &LabState, name: &str) -> anyhow::Result<()> {
    if let Some(p) = state.process(name)
        && !p.is_alive()
    {
        bail!(
            "{name} exited during start-up; last lines of {}:\n{}",
            p.log.display(),
            p.log_tail(15)
        );
    }
    Ok(())
}

pub(crate) async fn wait_http(
    state: &LabState,
    name: &str,
    url: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + timeout;
    loop {
        check_alive(state, name)?;
        if let Ok(r) = http.get(url).timeout(Duration::from_secs(2)).send().await
            && r.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{name} not ready at {url} after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn wait_apiserver(state: &LabState, timeout: Duration) -> anyhow::Result<Client> {
    let deadline = Instant::now() + timeout;
    loop {
        check_alive(state, "kube-apiserver")?;
        if let Ok(client) = state.client().await {
            let req = http::Request::get("/readyz").body(Vec::new())?;
            if let Ok(body) = client.request_text(req).await
                && body.trim() == "ok"
            {
                return Ok(client);
            }
        }
        if Instant::now() > deadline {
            bail!("kube-apiserver not ready after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

async fn wait_nodes_ready(
    state: &LabState,
    client: &Client,
    want: usize,
    timeout: Duration,
) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let lp = ListParams::default().labels(&format!("{LAB_LABEL}={}", state.name));
    let deadline = Instant::now() + timeout;
    loop {
        check_alive(state, "kwok")?;
        let ready = nodes
            .list(&lp)
            .await?
            .items
            .iter()
            .filter(|n| {
                let ready = n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                // The apiserver taints a new node not-ready; the node lifecycle controller
                // lifts it a moment after Ready. Until then nothing schedules there.
                let untainted = !n
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|ts| ts.iter().any(|t| t.key == NOT_READY_TAINT));
                ready && untainted
            })
            .count();
        if ready >= want {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "only {ready} of {want} nodes Ready and without the {NOT_READY_TAINT} taint \
                 after {timeout:?}; see logs/kwok.log and logs/kube-controller-manager.log"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Server-side apply of a cluster-scoped object (status included, for nodes: kwok takes
/// over the conditions, but capacity and allocatable are the topology's).
pub async fn apply<K>(client: &Client, obj: K) -> anyhow::Result<()>
where
    K: Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let name = obj.name_any();
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &pp, &Patch::Apply(&obj))
        .await
        .with_context(|| format!("applying {} {name}", K::kind(&Default::default())))?;
    let has_status = serde_json::to_value(&obj)?
        .get("status")
        .is_some_and(|s| !s.is_null());
    if has_status {
        api.patch_status(&name, &pp, &Patch::Apply(&obj))
            .await
            .with_context(|| format!("applying status of {name}"))?;
    }
    Ok(())
}

/// The prometheus-operator CRDs vendored with the lab.
pub fn vendor_crds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vendor-crds/prometheus-operator-v0.80.1")
}

/// Installs every CRD in a directory of YAML files and waits until each is served.
pub async fn install_crds(client: &Client, dir: &Path) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
            .with_context(|| format!("parsing {}", file.display()))?;
        for value in docs {
            if value.is_null() {
                continue;
            }
            let crd: CustomResourceDefinition = serde_json::from_value(value)
                .with_context(|| format!("parsing {}", file.display()))?;
            apply(client, crd.clone()).await?;
            names.push(crd.name_any());
        }
    }
    for name in names {
        kube::runtime::wait::await_condition(
            api.clone(),
            &name,
            kube::runtime::wait::conditions::is_crd_established(),
        )
        .await?;
    }
    Ok(())
}

/// Applies every document of a YAML string (any kind the API server serves).
pub async fn apply_yaml(client: &Client, yaml: &str) -> anyhow::Result<()> {
    use kube::api::DynamicObject;
    use kube::discovery::{ApiCapabilities, Scope};
    let discovery = kube::Discovery::new(client.clone()).run().await?;
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(yaml)?;
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        let obj: DynamicObject = serde_json::from_value(doc)?;
        let tm = obj
            .types
            .clone()
            .context("object without apiVersion/kind")?;
        let gvk = kube::api::GroupVersionKind::try_from(&tm)?;
        let (ar, caps): (_, ApiCapabilities) = discovery
            .resolve_gvk(&gvk)
            .with_context(|| format!("{gvk:?} is not served"))?;
        let api: Api<DynamicObject> = match (caps.scope, obj.metadata.namespace.as_deref()) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &ar),
            _ => Api::all_with(client.clone(), &ar),
        };
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&obj.name_any(), &pp, &Patch::Apply(&obj))
            .await
            .with_context(|| format!("applying {} {}", tm.kind, obj.name_any()))?;
    }
    Ok(())
}

fn write_kubeconfig(state: &LabState, path: &Path, token: &str, ca: &Path) -> anyhow::Result<()> {
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": state.name, "cluster": {
            "server": state.apiserver_url,
            "certificate-authority": ca,
        }}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": state.name, "context": {"cluster": state.name, "user": "admin", "namespace": "default"}}],
        "current-context": state.name,
    });
    std::fs::write(path, serde_saphyr::to_string(&kubeconfig)?)?;
    Ok(())
}

fn openssl(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .context("running openssl (install the openssl package)")?;
    anyhow::ensure!(
        out.status.success(),
        "openssl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn path_str(p: &Path) -> anyhow::Result<&str> {
    p.to_str().context("non-UTF-8 path")
}

fn random_hex() -> String {
    (0..4)
        .map(|_| format!("{:016x}", crate::net::random()))
        .collect()
}
