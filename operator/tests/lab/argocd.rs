//! Argo CD in the lab, for the GitOps tests (gitops.rs): the lab's Argo CD (`valtune-lab
//! up --argocd`), git repositories it reads over `file://`, the Applications of
//! manifests/gitops/ as the tests apply them, and what a test reads of an Application's
//! status (Argo CD v3.6.2's `pkg/apis/application/v1alpha1/types.go`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};
use serde_json::{Value, json};
use valtune_lab::argocd::ArgoCd;

use crate::common::{Lab, lab, repo_root, wait_for};

pub struct Argo {
    pub lab: Lab,
    pub argocd: ArgoCd,
}

/// Attaches to the lab and its Argo CD, with valtune's health checks and Argo CD's
/// Application health check in argocd-cm, applied as docs/gitops.md says (a merge patch).
pub async fn argo() -> Argo {
    let lab = lab().await;
    let argocd = ArgoCd::load(&lab.state.dir)
        .expect("reading the lab's argocd.json")
        .expect("the lab runs no Argo CD: run these tests with `make test-gitops`");
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(lab.client.clone(), &argocd.namespace);
    for file in [
        "charts/valtune/argocd/argocd-cm.yaml",
        "manifests/gitops/argocd-cm-application-health.yaml",
    ] {
        let patch = crate::common::yaml_file(file);
        cms.patch("argocd-cm", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }
    Argo { lab, argocd }
}

/// The chart's CRDs are one per cluster: one chart Application at a time, or two would
/// each put back their release's labels on the CRDs, or their chart's CRDs (selfHeal).
static CHART: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The label of the Applications that install the chart (or an app-of-apps that does).
pub const CHART_LABEL: &str = "valtune.dev/test-installs-chart";

impl Argo {
    /// Waits for the chart to be this test's alone: deletes what a failed test left.
    pub async fn chart_lock(&self) -> tokio::sync::MutexGuard<'static, ()> {
        let guard = CHART.lock().await;
        let lp = kube::api::ListParams::default().labels(CHART_LABEL);
        let mut left = self.apps().list(&lp).await.unwrap().items;
        // App-of-apps first, or they would make their children again.
        left.sort_by_key(|a| a.data["spec"]["source"]["path"] == "charts/valtune");
        for app in left {
            self.delete(&app.metadata.name.unwrap()).await;
        }
        guard
    }
}

pub fn applications(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("argoproj.io", "v1alpha1", "Application");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&gvk))
}

impl Argo {
    pub fn apps(&self) -> Api<DynamicObject> {
        applications(&self.lab.client, &self.argocd.namespace)
    }

    /// Applies an Application (as `kubectl apply --server-side` would).
    pub async fn apply(&self, app: &Value) {
        let name = app["metadata"]["name"].as_str().unwrap().to_string();
        let obj: DynamicObject = serde_json::from_value(app.clone()).unwrap();
        self.apps()
            .patch(
                &name,
                &PatchParams::apply("valtune-test").force(),
                &Patch::Apply(&obj),
            )
            .await
            .unwrap_or_else(|e| panic!("applying Application {name}: {e}"));
    }

    pub async fn app(&self, name: &str) -> Value {
        let app = self.apps().get(name).await.unwrap();
        serde_json::to_value(app).unwrap()
    }

    /// Polls the Application until `check` accepts it.
    pub async fn wait_app<T>(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Value) -> Result<T, String>,
    ) -> T {
        let apps = self.apps();
        wait_for(&format!("Application {name}: {what}"), timeout, || {
            let apps = apps.clone();
            let check = &check;
            async move {
                let app = apps.get(name).await.map_err(|e| e.to_string())?;
                let v = serde_json::to_value(app).unwrap();
                check(&v).map_err(|e| format!("{e}; {}", summary(&v)))
            }
        })
        .await
    }

    /// Waits until the Application is Synced to `revision` (any, if None), its last sync
    /// operation Succeeded, and its health `health`.
    pub async fn wait_synced(&self, name: &str, revision: Option<&str>, health: &str) -> Value {
        self.wait_app(
            name,
            &format!("Synced and {health}"),
            Duration::from_secs(300),
            |app| {
                let ok = sync_status(app) == "Synced"
                    && revision.is_none_or(|r| app["status"]["sync"]["revision"] == r)
                    && operation_phase(app) == "Succeeded"
                    && health_status(app) == health;
                if ok {
                    Ok(app.clone())
                } else {
                    Err("not yet".into())
                }
            },
        )
        .await
    }

    /// Asks the controller to compare with git now (what the UI's Refresh does: the
    /// `argocd.argoproj.io/refresh` annotation, controller/appcontroller.go); `hard`
    /// also regenerates the manifests.
    pub async fn refresh(&self, name: &str, hard: bool) {
        let kind = if hard { "hard" } else { "normal" };
        self.apps()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {"argocd.argoproj.io/refresh": kind}}}),
                ),
            )
            .await
            .unwrap();
    }

    /// Deletes the Application (its resources finalizer, if it has one, deletes what it
    /// applied first) and waits until it is gone.
    pub async fn delete(&self, name: &str) {
        // A sync in progress (a failing one retrying, say) holds the deletion: stop it as
        // `argocd app terminate-op` does (server/application/application.go
        // TerminateOperation sets the phase Terminating).
        if let Ok(Some(app)) = self.apps().get_opt(name).await
            && app.data["status"]["operationState"]["phase"] == "Running"
        {
            let _ = self
                .apps()
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"operationState": {"phase": "Terminating"}}})),
                )
                .await;
        }
        let _ = self.apps().delete(name, &DeleteParams::default()).await;
        let apps = self.apps();
        wait_for(
            &format!("Application {name} gone"),
            Duration::from_secs(180),
            || {
                let apps = apps.clone();
                async move {
                    match apps.get_opt(name).await.map_err(|e| e.to_string())? {
                        None => Ok(()),
                        Some(a) => Err(summary(&serde_json::to_value(a).unwrap())),
                    }
                }
            },
        )
        .await;
    }

    /// The `argocd` CLI of the lab's build.
    pub fn cli(&self) -> Command {
        let mut c = Command::new(self.argocd.cli());
        c.env_clear()
            .env("HOME", self.argocd.git_dir.parent().unwrap().join("home"));
        c
    }
}

/// A manifest of manifests/gitops/ as JSON.
pub fn gitops_file(path: &str) -> Value {
    crate::common::yaml_file(&format!("manifests/gitops/{path}"))
}

pub fn sync_status(app: &Value) -> &str {
    app["status"]["sync"]["status"].as_str().unwrap_or("")
}

pub fn health_status(app: &Value) -> &str {
    app["status"]["health"]["status"].as_str().unwrap_or("")
}

pub fn operation_phase(app: &Value) -> &str {
    app["status"]["operationState"]["phase"]
        .as_str()
        .unwrap_or("")
}

/// The health Argo CD gives one of the Application's resources (kept in its status with
/// `--persist-resource-health`, as the lab runs the controller): (status, message).
pub fn resource_health(app: &Value, kind: &str, name: &str) -> Option<(String, String)> {
    app["status"]["resources"]
        .as_array()?
        .iter()
        .find(|r| r["kind"] == kind && r["name"] == name)
        .map(|r| {
            (
                r["health"]["status"].as_str().unwrap_or("").to_string(),
                r["health"]["message"].as_str().unwrap_or("").to_string(),
            )
        })
}

/// What a failed wait prints of an Application.
pub fn summary(app: &Value) -> String {
    let st = &app["status"];
    let conditions: Vec<String> = st["conditions"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| format!("{}: {}", c["type"], c["message"]))
                .collect()
        })
        .unwrap_or_default();
    let resources: Vec<String> = st["resources"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    format!(
                        "{}/{} {} {} {}",
                        r["kind"],
                        r["name"],
                        r["status"],
                        r["health"]["status"],
                        r["health"]["message"]
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "sync {} ({}), health {}, operation {} {}, conditions {conditions:?}, resources {resources:?}",
        sync_status(app),
        st["sync"]["revision"],
        health_status(app),
        operation_phase(app),
        st["operationState"]["message"],
    )
}

/// A git repository of the lab's (a bare one Argo CD reads by its `file://` URL) and a
/// work tree to commit to it.
pub struct Repo {
    pub url: String,
    work: PathBuf,
}

impl Repo {
    pub fn new(argo: &Argo, name: &str) -> Repo {
        let name = format!("{name}-{}", crate::helm::unique());
        let (bare, url) = argo.argocd.bare_repo(&name).unwrap();
        let work = repo_root().join("target/test-logs/gitops").join(&name);
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(work.parent().unwrap()).unwrap();
        git(
            work.parent().unwrap(),
            &["clone", "--quiet", &bare.display().to_string(), &name],
        );
        Repo { url, work }
    }

    pub fn write(&self, path: &str, text: &str) {
        let file = self.work.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    /// Writes a YAML document (JSON here) as a file.
    pub fn write_yaml(&self, path: &str, doc: &Value) {
        self.write(path, &serde_saphyr::to_string(doc).unwrap());
    }

    pub fn remove(&self, path: &str) {
        std::fs::remove_file(self.work.join(path)).unwrap();
    }

    pub fn read(&self, path: &str) -> String {
        std::fs::read_to_string(self.work.join(path)).unwrap()
    }

    /// Copies a directory of this repository (e.g. charts/valtune) to the same path.
    pub fn copy_dir(&self, path: &str) {
        copy_dir(&repo_root().join(path), &self.work.join(path));
    }

    /// Commits everything and pushes it to `main`; the commit's hash.
    pub fn commit(&self, message: &str) -> String {
        git(&self.work, &["add", "--all"]);
        git(
            &self.work,
            &[
                "-c",
                "user.name=valtune test",
                "-c",
                "user.email=test@valtune.invalid",
                "commit",
                "--quiet",
                "--message",
                message,
            ],
        );
        git(&self.work, &["push", "--quiet", "origin", "HEAD:main"]);
        git(&self.work, &["rev-parse", "HEAD"]).trim().to_string()
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("running git");
    assert!(
        out.status.success(),
        "git {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
