//! Argo CD in the lab (`valtune-lab up --argocd`): Argo CD v3.6.2's repo-server and
//! application-controller, real processes of the one multi-call `argocd` binary built from
//! its Go module (hack/tools/build-argocd.sh), with Redis (Debian's redis-server) as their
//! cache and bare git repositories under `<lab>/argocd/git/` as the source, reached by
//! `file://` URLs as Argo CD's own e2e suite reaches its test repository
//! (test/e2e/fixture/fixture.go at v3.6.2). No API server, UI or Dex: Applications are
//! kubectl-applied, which is all the controller reads.
//!
//! How each process is run follows Argo CD's Procfile at v3.6.2 (its local, out-of-cluster
//! way): the role from the binary's name (cmd/main.go picks it from
//! filepath.Base(os.Args[0])), `ARGOCD_FAKE_IN_CLUSTER=true` with `KUBECONFIG` so the
//! in-cluster destination `https://kubernetes.default.svc` is the lab's API server
//! (pkg/apis/application/v1alpha1/types.go rawRestConfig), GPG off. The controller runs as
//! the lab's admin, as Argo CD's own controller runs with cluster-admin rights.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::control_plane::{apply_yaml, install_crds, spawn, wait_http};
use crate::net::free_port;
use crate::state::LabState;

/// The namespace Argo CD runs in, as its install manifests name it.
pub const NAMESPACE: &str = "argocd";
/// The lab's processes, in start order (`down` stops them in reverse).
pub const REDIS: &str = "argocd-redis";
pub const REPO_SERVER: &str = "argocd-repo-server";
pub const CONTROLLER: &str = "argocd-application-controller";

/// Seconds between the controller's reconciliations of an Application with git (its
/// `--app-resync`; Argo CD's default is 120 s, `timeout.reconciliation` in a real install).
/// Shorter here so a test sees several in a minute; nothing else is compressed.
pub const APP_RESYNC_SECONDS: u64 = 20;

/// Argo CD in a lab, as recorded in `<lab>/argocd.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArgoCd {
    /// hack/tools/build-argocd.sh's directory: `argocd` (and the role links to it),
    /// helm 4, and Argo CD's CRDs.
    pub tools: PathBuf,
    pub namespace: String,
    /// Bare repositories for Applications to read (`file://` + path).
    pub git_dir: PathBuf,
    pub repo_server: String,
    pub redis: String,
    /// The controller's metrics and health endpoint.
    pub controller_metrics: String,
}

impl ArgoCd {
    pub const FILE: &'static str = "argocd.json";

    /// Argo CD of the lab in `dir`, if it runs one.
    pub fn load(dir: &Path) -> anyhow::Result<Option<ArgoCd>> {
        let path = dir.join(Self::FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", path.display()))?,
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    /// The `argocd` CLI (e.g. `argocd admin settings resource-overrides health`).
    pub fn cli(&self) -> PathBuf {
        self.tools.join("argocd")
    }

    /// A new empty bare repository `<git_dir>/<name>.git` with `main` as its default
    /// branch, and its `file://` URL.
    pub fn bare_repo(&self, name: &str) -> anyhow::Result<(PathBuf, String)> {
        let path = self.git_dir.join(format!("{name}.git"));
        anyhow::ensure!(!path.exists(), "{} exists already", path.display());
        git(
            &["init", "--quiet", "--bare", "--initial-branch=main"],
            &path,
        )?;
        Ok((path.clone(), format!("file://{}", path.display())))
    }
}

fn git(args: &[&str], path: &Path) -> anyhow::Result<()> {
    let out = std::process::Command::new("git")
        .args(args)
        .arg(path)
        .output()
        .context("running git (install git)")?;
    anyhow::ensure!(
        out.status.success(),
        "git {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn log(msg: impl AsRef<str>) {
    eprintln!("[lab] {}", msg.as_ref());
}

/// Starts Argo CD in the running lab in `dir`, from the tools in `tools`. Does nothing if
/// it runs already; on failure, stops what it started.
pub async fn up(dir: &Path, tools: &Path) -> anyhow::Result<ArgoCd> {
    let mut state = LabState::load(dir)?;
    if let Some(running) = ArgoCd::load(dir)?
        && [REDIS, REPO_SERVER, CONTROLLER]
            .iter()
            .all(|n| state.process(n).is_some_and(|p| p.is_alive()))
    {
        return Ok(running);
    }
    for name in [
        "argocd",
        "argocd-repo-server",
        "argocd-application-controller",
        "helm",
        "crds/application-crd.yaml",
        "crds/appproject-crd.yaml",
    ] {
        anyhow::ensure!(
            tools.join(name).exists(),
            "{} is missing: build Argo CD with hack/tools/build-argocd.sh and pass the directory it prints",
            tools.join(name).display()
        );
    }
    let redis_server = which("redis-server")
        .context("redis-server is not installed (Argo CD's cache): apt-get install redis-server")?;
    let started = Instant::now();
    // What is left of an Argo CD that stopped is replaced.
    stop(&mut state)?;
    let result = start(&mut state, tools, &redis_server).await;
    match result {
        Ok(argocd) => {
            std::fs::write(
                dir.join(ArgoCd::FILE),
                serde_json::to_string_pretty(&argocd)?,
            )?;
            log(format!(
                "Argo CD up in {:.0}s: repositories in {}",
                started.elapsed().as_secs_f64(),
                argocd.git_dir.display()
            ));
            Ok(argocd)
        }
        Err(e) => {
            log("Argo CD did not start; stopping its processes");
            stop(&mut LabState::load(dir)?)?;
            Err(e)
        }
    }
}

/// Stops Argo CD's processes in the lab and forgets them.
fn stop(state: &mut LabState) -> anyhow::Result<()> {
    for name in [CONTROLLER, REPO_SERVER, REDIS] {
        while let Some(i) = state.processes.iter().position(|p| p.name == name) {
            state.processes.remove(i).stop(Duration::from_secs(10));
        }
    }
    state.save()
}

async fn start(state: &mut LabState, tools: &Path, redis_server: &Path) -> anyhow::Result<ArgoCd> {
    let tools = std::fs::canonicalize(tools)?;
    let home = state.dir.join("argocd");
    let git_dir = home.join("git");
    for d in ["redis", "home", "tmp", "tls", "ssh", "git"] {
        std::fs::create_dir_all(home.join(d))?;
    }
    let client = state.client().await?;

    // Argo CD's CRDs of the built version, its namespace and the settings objects its
    // install manifests create (argocd-cm and argocd-secret, empty, labelled so its
    // settings informers see them: util/settings/settings.go), and the `default` project
    // argocd-server would create at its start (server/server.go initializeDefaultProject).
    install_crds(&client, &tools.join("crds")).await?;
    apply_yaml(&client, &settings_yaml()).await?;

    let redis_port = free_port()?;
    let redis = format!("127.0.0.1:{redis_port}");
    spawn(
        state,
        REDIS,
        redis_server,
        &[
            "--bind".into(),
            "127.0.0.1".into(),
            "--port".into(),
            redis_port.to_string(),
            // A cache: nothing to keep.
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "no".into(),
            "--dir".into(),
            home.join("redis").display().to_string(),
        ],
    )?;
    wait_redis(state, &redis, Duration::from_secs(30)).await?;

    // Both processes get a clean environment: the tools directory first on PATH (the
    // repo-server runs `helm template` and `git` as programs: util/helm/cmd.go,
    // util/git/client.go), their home and temporary files (repository checkouts) in the
    // lab's directory.
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", tools.display());
    let env = |extra: &[(&str, String)]| -> Vec<String> {
        let mut v = vec![
            "-i".to_string(),
            format!("PATH={path}"),
            format!("HOME={}", home.join("home").display()),
            format!("TMPDIR={}", home.join("tmp").display()),
            format!("ARGOCD_TLS_DATA_PATH={}", home.join("tls").display()),
            format!("ARGOCD_SSH_DATA_PATH={}", home.join("ssh").display()),
            "ARGOCD_GPG_ENABLED=false".to_string(),
        ];
        v.extend(extra.iter().map(|(k, val)| format!("{k}={val}")));
        v
    };

    let repo_port = free_port()?;
    let repo_metrics = free_port()?;
    let repo_server = format!("127.0.0.1:{repo_port}");
    let mut args = env(&[]);
    args.extend([
        tools.join(REPO_SERVER).display().to_string(),
        "--address=127.0.0.1".into(),
        format!("--port={repo_port}"),
        "--metrics-address=127.0.0.1".into(),
        format!("--metrics-port={repo_metrics}"),
        format!("--redis={redis}"),
        // TLS as installed: a self-signed certificate made at start (no
        // /app/config/reposerver/tls), which the controller accepts without
        // --repo-server-strict-tls.
        "--logformat=text".into(),
    ]);
    spawn(state, REPO_SERVER, Path::new("/usr/bin/env"), &args)?;
    wait_http(
        state,
        REPO_SERVER,
        &format!("http://127.0.0.1:{repo_metrics}/metrics"),
        Duration::from_secs(60),
    )
    .await?;

    // The controller's metrics server listens on 0.0.0.0 (controller/appcontroller.go).
    let metrics_port = free_port()?;
    let mut args = env(&[
        ("KUBECONFIG", state.kubeconfig.display().to_string()),
        ("ARGOCD_FAKE_IN_CLUSTER", "true".into()),
    ]);
    args.extend([
        tools.join(CONTROLLER).display().to_string(),
        format!("--kubeconfig={}", state.kubeconfig.display()),
        format!("--namespace={NAMESPACE}"),
        format!("--repo-server={repo_server}"),
        format!("--redis={redis}"),
        format!("--metrics-port={metrics_port}"),
        format!("--app-resync={APP_RESYNC_SECONDS}"),
        // Argo CD adds up to a minute of jitter by default; the lab's tests count on the
        // period.
        "--app-resync-jitter=0".into(),
        // Per-resource health in each Application's status (Argo CD 3.x keeps it only in
        // Redis otherwise, for its API server): the tests, like `kubectl get application
        // -o yaml`, read it there. docs/gitops.md.
        "--persist-resource-health".into(),
        "--logformat=text".into(),
    ]);
    spawn(state, CONTROLLER, Path::new("/usr/bin/env"), &args)?;
    let controller_metrics = format!("127.0.0.1:{metrics_port}");
    wait_http(
        state,
        CONTROLLER,
        &format!("http://{controller_metrics}/healthz"),
        Duration::from_secs(90),
    )
    .await?;

    Ok(ArgoCd {
        tools,
        namespace: NAMESPACE.into(),
        git_dir,
        repo_server,
        redis,
        controller_metrics,
    })
}

fn settings_yaml() -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: {NAMESPACE}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: {NAMESPACE}
  labels: {{app.kubernetes.io/name: argocd-cm, app.kubernetes.io/part-of: argocd}}
---
apiVersion: v1
kind: Secret
metadata:
  name: argocd-secret
  namespace: {NAMESPACE}
  labels: {{app.kubernetes.io/name: argocd-secret, app.kubernetes.io/part-of: argocd}}
type: Opaque
---
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata:
  name: default
  namespace: {NAMESPACE}
spec:
  sourceRepos: ["*"]
  destinations: [{{server: "*", namespace: "*"}}]
  clusterResourceWhitelist: [{{group: "*", kind: "*"}}]
"#
    )
}

/// Waits until Redis answers PING.
async fn wait_redis(state: &LabState, addr: &str, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(p) = state.process(REDIS)
            && !p.is_alive()
        {
            bail!(
                "redis-server exited during start-up; last lines of {}:\n{}",
                p.log.display(),
                p.log_tail(15)
            );
        }
        if let Ok(mut conn) = tokio::net::TcpStream::connect(addr).await {
            let mut buf = [0u8; 7];
            if conn.write_all(b"PING\r\n").await.is_ok()
                && conn.read_exact(&mut buf).await.is_ok()
                && &buf == b"+PONG\r\n"
            {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("redis-server did not answer at {addr} after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}
