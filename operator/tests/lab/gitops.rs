//! valtune with a real Argo CD (v3.6.2, the lab's `--argocd`): what the Lua fixtures
//! cannot show. The chart syncs and is Healthy with its per-CRD server-side apply (and
//! with the Application's), its CRDs without a last-applied annotation, and fails with the
//! API server's "Too long" without it; it stays Synced while the operator works; an
//! experiment's and a Validator's Application show the health of their objects as the
//! chart's scripts say; Argo CD itself judges every fixture as the harness expects;
//! deleting the chart's Application keeps the CRDs and the results; the layout of
//! manifests/gitops/ syncs to completion, where waves between its Applications would hold
//! the root's sync while an experiment runs; a chart upgrade adding a CRD field syncs.
//!
//! The Applications are manifests/gitops/'s files as docs/gitops.md shows them, with what
//! a lab needs changed (`for_lab`): the repository URLs (the lab's git), the names and
//! namespaces (one per test), the lab's Prometheus, the operator watching the test's
//! namespace only. `make test-gitops` runs them against a lab of their own.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use valtune::api::{Validator, ValidatorExperiment};

use crate::argocd::{
    Argo, CHART_LABEL, Repo, argo, gitops_file, health_status, operation_phase, resource_health,
    summary, sync_status,
};
use crate::common::{Lab, example, merge, repo_root, trials, wait_finished, wait_for};

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
const TRACKING_ID: &str = "argocd.argoproj.io/tracking-id";
/// The field manager of Argo CD's server-side applies (argo-cd v3.6.2 common/common.go
/// `ArgoCDSSAManager`, set in controller/sync.go).
const ARGOCD_MANAGER: &str = "argocd-controller";
const CRDS: [&str; 3] = [
    "validatorexperiments.valtune.dev",
    "validatortrials.valtune.dev",
    "validators.valtune.dev",
];

/// An Application of manifests/gitops/ as the lab runs it: `name` in the argocd
/// namespace, its git source `repo`, its destination `ns`; for the chart, the lab's
/// Prometheus and an operator watching `ns` (release `name`).
fn for_lab(argo: &Argo, file: &str, name: &str, repo: &str, ns: &str) -> Value {
    let app = gitops_file(file);
    let mut patch = json!({
        "metadata": {"name": name},
        "spec": {"source": {"repoURL": repo}, "destination": {"namespace": ns}},
    });
    let chart = app["spec"]["source"]["path"] == "charts/valtune";
    if chart || file == "root.yaml" {
        patch["metadata"]["labels"] = json!({CHART_LABEL: "true"});
    }
    if chart {
        patch["spec"]["source"]["helm"] = json!({
            "releaseName": name,
            "valuesObject": {"operator": {
                "prometheusUrl": argo.lab.state.prometheus_url,
                "watchNamespace": ns,
                // A stopped leader's Lease must expire quickly in tests.
                "leaseDuration": "3s",
            }},
        });
    }
    merge(&app, &patch)
}

/// A repository with the chart at charts/valtune, as valtune's own.
fn chart_repo(argo: &Argo) -> (Repo, String) {
    let repo = Repo::new(argo, "valtune");
    repo.copy_dir("charts/valtune");
    let rev = repo.commit("valtune's chart");
    (repo, rev)
}

/// The quickstart experiment as the lab runs it, named `name` in `ns`, patched.
fn experiment_yaml(ns: &str, name: &str, patch: Value) -> Value {
    let mut v = merge(
        &example("manifests/examples/quickstart-agave-ram-sweep.yaml"),
        &patch,
    );
    v["metadata"] = json!({"name": name, "namespace": ns});
    v
}

async fn crd(lab: &Lab, name: &str) -> CustomResourceDefinition {
    Api::<CustomResourceDefinition>::all(lab.client.clone())
        .get(name)
        .await
        .unwrap()
}

/// Whether `manager` has applied (server-side) to the object.
fn applied_by(meta: &kube::api::ObjectMeta, manager: &str) -> bool {
    meta.managed_fields
        .iter()
        .flatten()
        .any(|m| m.manager.as_deref() == Some(manager) && m.operation.as_deref() == Some("Apply"))
}

fn annotation<'a>(meta: &'a kube::api::ObjectMeta, key: &str) -> Option<&'a String> {
    meta.annotations.as_ref()?.get(key)
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn argo_cd_judges_every_health_fixture_as_the_harness_expects() {
    let argo = argo().await;
    let dir = repo_root().join("target/test-logs/gitops");
    std::fs::create_dir_all(&dir).unwrap();
    // `--argocd-cm-path` reads a whole ConfigMap; the chart ships the patch of its data.
    let mut cm = crate::common::yaml_file("charts/valtune/argocd/argocd-cm.yaml");
    cm["apiVersion"] = json!("v1");
    cm["kind"] = json!("ConfigMap");
    cm["metadata"] = json!({"name": "argocd-cm"});
    let cm_path = dir.join(format!("argocd-cm-{}.yaml", crate::helm::unique()));
    std::fs::write(&cm_path, serde_saphyr::to_string(&cm).unwrap()).unwrap();

    let (mut judged, mut disagree) = (0, Vec::new());
    for kind in ["ValidatorExperiment", "ValidatorTrial", "Validator"] {
        let base = repo_root().join("charts/valtune/argocd").join(kind);
        let tests =
            crate::common::yaml_file(&format!("charts/valtune/argocd/{kind}/health_test.yaml"));
        let tests = tests["tests"].as_array().unwrap();
        // Every fixture has its expectation.
        let mut files: Vec<String> = std::fs::read_dir(base.join("testdata"))
            .unwrap()
            .map(|e| format!("testdata/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        files.sort();
        let mut listed: Vec<String> = tests
            .iter()
            .map(|t| t["inputPath"].as_str().unwrap().to_string())
            .collect();
        listed.sort();
        assert_eq!(
            files, listed,
            "{kind}: fixtures without an expectation, or the reverse"
        );
        for t in tests {
            let input = base.join(t["inputPath"].as_str().unwrap());
            let out = argo
                .cli()
                .args(["admin", "settings", "resource-overrides", "health"])
                .arg(&input)
                .arg("--argocd-cm-path")
                .arg(&cm_path)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let field = |p: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(p))
                    .map(|s| s.trim_end().to_string())
            };
            let got = (field("STATUS: "), field("MESSAGE: "));
            let want = (
                t["healthStatus"]["status"].as_str().map(String::from),
                Some(
                    t["healthStatus"]["message"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                ),
            );
            judged += 1;
            if !out.status.success() || got != want {
                disagree.push(format!(
                    "{}: Argo CD says {got:?} (exit {}, {}), the harness expects {want:?}",
                    input.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
    assert!(judged >= 30, "only {judged} fixtures judged");
}

/// Applies the chart's Application (the file `file`, as the lab runs it) from a fresh
/// chart repository, into a fresh namespace, and waits until it is Synced and Healthy.
async fn synced_chart(argo: &Argo, test: &str, file: &str) -> (String, Value) {
    let ns = argo.lab.namespace(test).await;
    let (repo, rev) = chart_repo(argo);
    argo.apply(&for_lab(argo, file, &ns, &repo.url, &ns)).await;
    let app = argo.wait_synced(&ns, Some(&rev), "Healthy").await;
    (ns, app)
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn the_chart_syncs_healthy_its_crds_applied_server_side_each() {
    let argo = argo().await;
    let _chart = argo.chart_lock().await;
    let (ns, app) = synced_chart(&argo, "gitops-chart", "apps/valtune.yaml").await;
    // Every object in sync, the operator's Deployment among the Healthy ones.
    for r in app["status"]["resources"].as_array().unwrap() {
        assert_eq!(r["status"], "Synced", "{r}");
    }
    assert_eq!(
        resource_health(&app, "Deployment", &format!("{ns}-valtune")).map(|h| h.0),
        Some("Healthy".into()),
        "{}",
        summary(&app)
    );
    for name in CRDS {
        let c = crd(&argo.lab, name).await;
        assert!(
            annotation(&c.metadata, LAST_APPLIED).is_none(),
            "{name} has a last-applied annotation"
        );
        assert!(
            applied_by(&c.metadata, ARGOCD_MANAGER),
            "{name}: no server-side apply by Argo CD"
        );
        // Argo CD tracks no CRD (reposerver/repository/repository.go L1843): it never
        // prunes or deletes one, whichever Application applied it.
        assert!(
            annotation(&c.metadata, TRACKING_ID).is_none(),
            "{name} is tracked"
        );
    }
    // Everything else of the chart is applied client-side, as the Application says.
    let deploy = Api::<Deployment>::namespaced(argo.lab.client.clone(), &ns)
        .get(&format!("{ns}-valtune"))
        .await
        .unwrap();
    assert!(annotation(&deploy.metadata, LAST_APPLIED).is_some());
    argo.delete(&ns).await;
    argo.lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn the_chart_syncs_healthy_with_the_applications_server_side_apply() {
    let argo = argo().await;
    let _chart = argo.chart_lock().await;
    let (ns, app) = synced_chart(
        &argo,
        "gitops-ssa",
        "variants/valtune-server-side-apply.yaml",
    )
    .await;
    for r in app["status"]["resources"].as_array().unwrap() {
        assert_eq!(r["status"], "Synced", "{r}");
    }
    for name in CRDS {
        let c = crd(&argo.lab, name).await;
        assert!(
            annotation(&c.metadata, LAST_APPLIED).is_none(),
            "{name} has a last-applied annotation"
        );
        assert!(applied_by(&c.metadata, ARGOCD_MANAGER), "{name}");
    }
    let deploy = Api::<Deployment>::namespaced(argo.lab.client.clone(), &ns)
        .get(&format!("{ns}-valtune"))
        .await
        .unwrap();
    assert!(annotation(&deploy.metadata, LAST_APPLIED).is_none());
    assert!(applied_by(&deploy.metadata, ARGOCD_MANAGER));
    argo.delete(&ns).await;
    argo.lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn without_server_side_apply_per_crd_the_chart_fails_too_long() {
    let argo = argo().await;
    let _chart = argo.chart_lock().await;
    let ns = argo.lab.namespace("gitops-csa").await;
    // The chart as it would be without the CRDs' sync-options annotation.
    let repo = Repo::new(&argo, "valtune-csa");
    repo.copy_dir("charts/valtune");
    let crds = repo.read("charts/valtune/templates/crds.yaml");
    let without = crds.replace(
        r#" "argocd.argoproj.io/sync-options" "ServerSideApply=true""#,
        "",
    );
    assert_ne!(
        crds, without,
        "templates/crds.yaml no longer sets the annotation this way"
    );
    repo.write("charts/valtune/templates/crds.yaml", &without);
    repo.commit("the chart without server-side apply for its CRDs");
    argo.apply(&for_lab(&argo, "apps/valtune.yaml", &ns, &repo.url, &ns))
        .await;
    // The API server refuses the two CRDs whose last-applied annotation would pass its
    // limit on an object's annotations (apimachinery ValidateAnnotationsSize); Argo CD
    // retries the sync, failing the same way.
    let refused = |app: &Value, crd: &str| {
        app["status"]["operationState"]["message"].as_str().is_some_and(|m| {
            m.contains(&format!(
                "CustomResourceDefinition.apiextensions.k8s.io \"{crd}\" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes"
            ))
        })
    };
    let failed = argo
        .wait_app(
            &ns,
            "its sync refused Too long",
            Duration::from_secs(300),
            |app| {
                if refused(app, "validatorexperiments.valtune.dev")
                    && refused(app, "validators.valtune.dev")
                {
                    Ok(app.clone())
                } else {
                    Err("not yet".into())
                }
            },
        )
        .await;
    assert!(
        !refused(&failed, "validatortrials.valtune.dev"),
        "{}",
        summary(&failed)
    );
    assert_ne!(sync_status(&failed), "Synced");
    argo.delete(&ns).await;
    // A client-side apply may have annotated the CRD that fits: the other tests check
    // that the chart's own way leaves none.
    let crds: Api<CustomResourceDefinition> = Api::all(argo.lab.client.clone());
    for name in CRDS {
        crds.patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"annotations": {LAST_APPLIED: null}}})),
        )
        .await
        .unwrap();
    }
    argo.lab.delete_namespace(&ns).await;
}

/// Every `reconciledAt` the Application shows during `window`, failing if it is ever not
/// Synced or syncs again; a hard refresh (manifests generated anew) every 20 s.
async fn steady(argo: &Argo, names: &[&str], window: Duration) -> Vec<usize> {
    let history = |app: &Value| app["status"]["history"].as_array().map_or(0, Vec::len);
    let mut first = Vec::new();
    for n in names {
        first.push(history(&argo.app(n).await));
    }
    let mut seen: Vec<std::collections::BTreeSet<String>> = vec![Default::default(); names.len()];
    let start = std::time::Instant::now();
    let mut refreshed = start;
    while start.elapsed() < window {
        if refreshed.elapsed() >= Duration::from_secs(20) {
            for n in names {
                argo.refresh(n, true).await;
            }
            refreshed = std::time::Instant::now();
        }
        for (i, n) in names.iter().enumerate() {
            let app = argo.app(n).await;
            assert_eq!(
                sync_status(&app),
                "Synced",
                "{n} after {:?}: {}",
                start.elapsed(),
                summary(&app)
            );
            assert_eq!(
                history(&app),
                first[i],
                "{n} synced again: {}",
                summary(&app)
            );
            seen[i].insert(
                app["status"]["reconciledAt"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    seen.iter().map(|s| s.len()).collect()
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn the_chart_and_a_running_experiment_stay_synced_while_the_operator_works() {
    let argo = argo().await;
    let _chart = argo.chart_lock().await;
    let (ns, _) = synced_chart(&argo, "gitops-steady", "apps/valtune.yaml").await;
    // An experiment run by the chart's operator, from an experiments Application.
    let repo = Repo::new(&argo, "experiments");
    repo.write_yaml(
        "experiments/steady.yaml",
        &experiment_yaml(
            &ns,
            "steady",
            json!({"spec": {"sweep": {"memory": ["512Gi", "1Ti"]}, "parallelism": 1}}),
        ),
    );
    let rev = repo.commit("an experiment");
    let vx_app = format!("{ns}-vx");
    argo.apply(&for_lab(
        &argo,
        "apps/experiments.yaml",
        &vx_app,
        &repo.url,
        &ns,
    ))
    .await;
    argo.wait_synced(&vx_app, Some(&rev), "Progressing").await;
    let vxs: Api<ValidatorExperiment> = Api::namespaced(argo.lab.client.clone(), &ns);
    let before = vxs.get("steady").await.unwrap();

    // Several reconciliations (every 20 s in the lab, and forced), each comparing the live
    // objects (the CRDs and Deployment with what the API server defaulted, the experiment
    // with the status the operator keeps writing) with Git: never OutOfSync, never synced
    // again.
    let reconciled = steady(&argo, &[&ns, &vx_app], Duration::from_secs(100)).await;
    assert!(
        reconciled.iter().all(|&n| n >= 4),
        "reconciliations seen: {reconciled:?}"
    );
    let after = vxs.get("steady").await.unwrap();
    assert_ne!(
        serde_json::to_value(&before.status).unwrap(),
        serde_json::to_value(&after.status).unwrap(),
        "the operator wrote no status meanwhile: the window proves nothing"
    );
    assert_eq!(before.metadata.generation, after.metadata.generation);
    argo.delete(&vx_app).await;
    argo.delete(&ns).await;
    argo.lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn an_experiment_application_is_progressing_then_healthy_and_leaves_the_trials_alone() {
    let argo = argo().await;
    let ns = argo.lab.namespace("gitops-vx").await;
    let _op = argo.lab.start_operator(&ns);
    let repo = Repo::new(&argo, "experiments");
    let sweep = |points: Value| {
        experiment_yaml(
            &ns,
            "ram",
            json!({"spec": {"sweep": {"memory": points}, "parallelism": 2}}),
        )
    };
    repo.write_yaml("experiments/ram.yaml", &sweep(json!(["512Gi", "1Ti"])));
    repo.commit("a RAM sweep");
    argo.apply(&for_lab(
        &argo,
        "apps/experiments.yaml",
        &ns,
        &repo.url,
        &ns,
    ))
    .await;

    // Running: Progressing, the script's message in the resource's health.
    argo.wait_app(
        &ns,
        "Progressing while trials run",
        Duration::from_secs(120),
        |app| match resource_health(app, "ValidatorExperiment", "ram") {
            Some((s, m))
                if s == "Progressing"
                    && m.contains("running")
                    && health_status(app) == "Progressing" =>
            {
                Ok(())
            }
            h => Err(format!("{h:?}")),
        },
    )
    .await;
    let done = wait_finished(&argo.lab, &ns, "ram", Duration::from_secs(300)).await;
    let recommendation = done
        .status
        .as_ref()
        .unwrap()
        .recommendation
        .as_ref()
        .unwrap()
        .summary
        .clone();
    let healthy = argo
        .wait_app(
            &ns,
            "Healthy with the recommendation",
            Duration::from_secs(60),
            |app| match resource_health(app, "ValidatorExperiment", "ram") {
                Some((s, m)) if s == "Healthy" && health_status(app) == "Healthy" => Ok(m),
                h => Err(format!("{h:?}")),
            },
        )
        .await;
    assert!(
        healthy.ends_with(&format!("; recommendation: {recommendation}")),
        "{healthy}"
    );

    // The trials are the operator's: not tracked by Argo CD, not among its resources, and
    // not pruned by its syncs (prune: true) however often it compares.
    let first = trials(&argo.lab, &ns).await;
    assert_eq!(first.len(), 2);
    let app = argo.app(&ns).await;
    for t in &first {
        assert!(
            annotation(&t.metadata, TRACKING_ID).is_none(),
            "{:?}",
            t.metadata
        );
        assert!(
            resource_health(&app, "ValidatorTrial", t.metadata.name.as_deref().unwrap()).is_none()
        );
    }
    let reconciled = steady(&argo, &[&ns], Duration::from_secs(45)).await;
    assert!(reconciled[0] >= 2, "{reconciled:?}");
    let uids = |ts: &[valtune::api::ValidatorTrial]| {
        let mut v: Vec<_> = ts.iter().map(|t| t.metadata.uid.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(uids(&trials(&argo.lab, &ns).await), uids(&first));

    // A point added in Git: Progressing again, the finished trials kept.
    repo.write_yaml(
        "experiments/ram.yaml",
        &sweep(json!(["512Gi", "768Gi", "1Ti"])),
    );
    let rev = repo.commit("a third point");
    argo.refresh(&ns, false).await;
    argo.wait_app(
        &ns,
        "Progressing at the edit",
        Duration::from_secs(120),
        |app| {
            if app["status"]["sync"]["revision"] == rev.as_str()
                && health_status(app) == "Progressing"
            {
                Ok(())
            } else {
                Err("not yet".into())
            }
        },
    )
    .await;
    let now = trials(&argo.lab, &ns).await;
    assert!(
        first
            .iter()
            .all(|t| now.iter().any(|n| n.metadata.uid == t.metadata.uid))
    );
    argo.delete(&ns).await;
    argo.lab.delete_namespace(&ns).await;
}

/// A finalizer the test puts on an experiment, as another controller (a backup tool, say)
/// might, to hold its deletion open long enough to see Argo CD's health of it.
const HOLD: &str = "valtune.dev/test-hold";

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn an_experiment_removed_from_git_shows_its_deletion_health_until_it_is_gone() {
    let argo = argo().await;
    let ns = argo.lab.namespace("gitops-vx-delete").await;
    let _op = argo.lab.start_operator(&ns);
    let repo = Repo::new(&argo, "experiments");
    repo.write_yaml(
        "experiments/ram.yaml",
        &experiment_yaml(
            &ns,
            "ram",
            json!({"spec": {"sweep": {"memory": ["512Gi", "1Ti"]}, "parallelism": 2}}),
        ),
    );
    // A second experiment keeps the directory (and the Application) non-empty.
    repo.write_yaml(
        "experiments/kept.yaml",
        &experiment_yaml(&ns, "kept", json!({"spec": {"suspend": true}})),
    );
    repo.commit("two experiments");
    argo.apply(&for_lab(
        &argo,
        "apps/experiments.yaml",
        &ns,
        &repo.url,
        &ns,
    ))
    .await;
    argo.wait_app(
        &ns,
        "ram Progressing",
        Duration::from_secs(120),
        |app| match resource_health(app, "ValidatorExperiment", "ram") {
            Some((s, _)) if s == "Progressing" && sync_status(app) == "Synced" => Ok(()),
            h => Err(format!("{h:?}")),
        },
    )
    .await;
    wait_for("ram's two trials", Duration::from_secs(120), || async {
        let n = trials(&argo.lab, &ns).await.len();
        if n == 2 {
            Ok(())
        } else {
            Err(format!("{n} trials"))
        }
    })
    .await;
    let vxs = crate::common::experiments(&argo.lab.client, &ns);
    vxs.patch(
        "ram",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": [HOLD]}})),
    )
    .await
    .unwrap();

    // Removed from Git: Argo CD prunes it (foreground deletion, its default), and while it
    // is held its health is the script's deletionMessage (gitops-engine v3.6.2
    // pkg/health/health.go), still Progressing, naming what holds it.
    repo.remove("experiments/ram.yaml");
    let rev = repo.commit("ram removed");
    argo.refresh(&ns, false).await;
    let (status, message) = argo
        .wait_app(
            &ns,
            "ram's deletion health",
            Duration::from_secs(120),
            |app| match resource_health(app, "ValidatorExperiment", "ram") {
                Some((s, m)) if m.starts_with("Deleting the experiment") => Ok((s, m)),
                h => Err(format!("{h:?}")),
            },
        )
        .await;
    assert_eq!(status, "Progressing", "{message}");
    assert!(
        message.starts_with(
            "Deleting the experiment, and with it its trials and their results; waiting for finalizers: "
        ) && message.contains(HOLD),
        "{message}"
    );
    // The sync that pruned it does not wait for it to be gone: one wave and no hooks, it
    // succeeds once every task ran (gitops-engine v3.6.2 pkg/sync/sync_context.go, the
    // `successful` case), so a held deletion holds no sync. (The health above may be
    // persisted by a refresh before the operation's end is.)
    argo.wait_app(
        &ns,
        "the pruning sync Succeeded",
        Duration::from_secs(60),
        |app| {
            let op = &app["status"]["operationState"];
            if op["phase"] == "Succeeded" && op["syncResult"]["revision"] == rev.as_str() {
                Ok(())
            } else {
                Err("not yet".into())
            }
        },
    )
    .await;
    assert!(
        vxs.get("ram")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some(),
        "ram is gone: the window proves nothing"
    );
    // The test lets it go. (Its trials are the garbage collector's to delete, not Argo
    // CD's: in a lab whose CRDs are seconds old, kube-controller-manager's garbage
    // collector may not have mapped ValidatorTrial yet and leave them.)
    let live = vxs.get("ram").await.unwrap();
    let rest: Vec<String> = live
        .metadata
        .finalizers
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != HOLD)
        .collect();
    vxs.patch(
        "ram",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": rest}})),
    )
    .await
    .unwrap();
    argo.wait_app(&ns, "Synced without ram", Duration::from_secs(120), |app| {
        if app["status"]["sync"]["revision"] == rev.as_str()
            && sync_status(app) == "Synced"
            && resource_health(app, "ValidatorExperiment", "ram").is_none()
            && resource_health(app, "ValidatorExperiment", "kept").is_some()
        {
            Ok(())
        } else {
            Err("not yet".into())
        }
    })
    .await;
    assert!(vxs.get_opt("ram").await.unwrap().is_none());
    assert!(vxs.get_opt("kept").await.unwrap().is_some());
    argo.delete(&ns).await;
    argo.lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn a_failed_experiment_makes_its_application_degraded() {
    let argo = argo().await;
    let ns = argo.lab.namespace("gitops-vx-failed").await;
    let _op = argo.lab.start_operator(&ns);
    let repo = Repo::new(&argo, "experiments");
    // No lab node has 128 1Gi hugepages: every trial is Unschedulable.
    repo.write_yaml(
        "experiments/fails.yaml",
        &experiment_yaml(
            &ns,
            "fails",
            json!({"spec": {
                "sweep": {"memory": ["512Gi", "1Ti"]},
                "template": {"resources": {"hugepages1Gi": 128}},
                "trial": {"schedulingTimeout": "3s", "retries": 0},
                "parallelism": 1,
                "maxFailedTrials": 1,
            }}),
        ),
    );
    repo.commit("an experiment that cannot run");
    argo.apply(&for_lab(
        &argo,
        "apps/experiments.yaml",
        &ns,
        &repo.url,
        &ns,
    ))
    .await;
    let message = argo
        .wait_app(
            &ns,
            "Degraded",
            Duration::from_secs(180),
            |app| match resource_health(app, "ValidatorExperiment", "fails") {
                Some((s, m)) if s == "Degraded" && health_status(app) == "Degraded" => Ok(m),
                h => Err(format!("{h:?}")),
            },
        )
        .await;
    assert!(message.contains("reaching maxFailedTrials=1"), "{message}");
    argo.delete(&ns).await;
    argo.lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn a_validator_application_is_progressing_while_it_catches_up_and_degraded_when_its_identity_is_held()
 {
    let argo = argo().await;
    let ns = argo.lab.namespace("gitops-validator").await;
    let _op = argo.lab.start_operator(&ns);
    // The identity is not in Git (apps/validators.yaml): created beside it.
    crate::validator::node_key(&argo.lab, &ns).await;
    let repo = Repo::new(&argo, "validators");
    // One core: the lab's Besu snap-syncs sqrt(12) times as long as on twelve
    // (lab/src/sim/clients/besu/model.rs `synced_at`), some 15 s at 720x.
    let mut besu = crate::validator::validator(&ns, "besu-a", "vv-01");
    besu["spec"]["template"]["resources"]["cpu"] = json!(1);
    repo.write_yaml("validators/besu-a.yaml", &besu);
    repo.commit("a Besu validator");
    argo.apply(&for_lab(&argo, "apps/validators.yaml", &ns, &repo.url, &ns))
        .await;
    // Starting and CatchingUp are both Progressing, and Argo CD 3.x reads a resource
    // again at once only when its health status or its spec changes (controller/cache/
    // cache.go skipResourceUpdate): between them its message waits for the next
    // reconciliation. The test asks for one (a refresh) once the Validator catches up.
    let validators: Api<Validator> = Api::namespaced(argo.lab.client.clone(), &ns);
    let message = wait_for(
        "Argo CD to show besu-a catching up",
        Duration::from_secs(180),
        || {
            let (argo, validators, ns) = (&argo, validators.clone(), ns.clone());
            async move {
                let v = validators
                    .get_opt("besu-a")
                    .await
                    .map_err(|e| e.to_string())?;
                let phase = v.and_then(|v| v.status).map(|s| s.phase);
                if phase != Some(valtune::api::validator::ValidatorPhase::CatchingUp) {
                    return Err(format!("the Validator is {phase:?}"));
                }
                argo.refresh(&ns, false).await;
                tokio::time::sleep(Duration::from_secs(2)).await;
                let app = argo.app(&ns).await;
                match resource_health(&app, "Validator", "besu-a") {
                    Some((s, m))
                        if s == "Progressing"
                            && m.starts_with("CatchingUp")
                            && health_status(&app) == "Progressing" =>
                    {
                        Ok(m)
                    }
                    h => Err(format!("Argo CD says {h:?}")),
                }
            }
        },
    )
    .await;
    assert!(message.contains("behind"), "{message}");
    crate::validator::wait_ready(&validators, "besu-a").await;
    argo.wait_app(&ns, "Healthy", Duration::from_secs(60), |app| {
        (health_status(app) == "Healthy")
            .then_some(())
            .ok_or_else(|| "not yet".to_string())
    })
    .await;

    // A second Validator of the same identity, from Git: held back, Degraded.
    repo.write_yaml(
        "validators/besu-b.yaml",
        &crate::validator::validator(&ns, "besu-b", "vv-02"),
    );
    repo.commit("a second Validator of the same identity");
    argo.refresh(&ns, false).await;
    let message = argo
        .wait_app(
            &ns,
            "Degraded, its identity held",
            Duration::from_secs(120),
            |app| match resource_health(app, "Validator", "besu-b") {
                Some((s, m)) if s == "Degraded" && health_status(app) == "Degraded" => Ok(m),
                h => Err(format!("{h:?}")),
            },
        )
        .await;
    assert!(
        message.starts_with("IdentityHeld: ") && message.contains("besu-a"),
        "{message}"
    );
    argo.delete(&ns).await;
    argo.lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn deleting_the_charts_application_removes_the_operator_and_keeps_the_crds_and_results() {
    let argo = argo().await;
    let _chart = argo.chart_lock().await;
    let (ns, _) = synced_chart(&argo, "gitops-delete", "apps/valtune.yaml").await;
    let uids: Vec<_> = {
        let mut v = Vec::new();
        for name in CRDS {
            v.push(crd(&argo.lab, name).await.metadata.uid);
        }
        v
    };
    // An experiment the chart's operator runs to its end.
    let vx: ValidatorExperiment = serde_json::from_value(experiment_yaml(
        &ns,
        "kept",
        json!({"spec": {"sweep": {"memory": ["1Ti"]}}}),
    ))
    .unwrap();
    Api::<ValidatorExperiment>::namespaced(argo.lab.client.clone(), &ns)
        .create(&PostParams::default(), &vx)
        .await
        .unwrap();
    let done = wait_finished(&argo.lab, &ns, "kept", Duration::from_secs(300)).await;
    let results = serde_json::to_value(&done.status).unwrap();
    assert!(
        done.status.as_ref().unwrap().recommendation.is_some(),
        "{results}"
    );
    let trial_results: Vec<Value> = trials(&argo.lab, &ns)
        .await
        .iter()
        .map(|t| serde_json::to_value(&t.status.as_ref().unwrap().results).unwrap())
        .collect();

    // The Application's resources finalizer deletes what it applied, in the foreground.
    argo.delete(&ns).await;
    let deployments: Api<Deployment> = Api::namespaced(argo.lab.client.clone(), &ns);
    wait_for("the operator gone", Duration::from_secs(60), || async {
        let n = deployments
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        if n == 0 {
            Ok(())
        } else {
            Err(format!("{n} Deployments"))
        }
    })
    .await;
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(argo.lab.client.clone(), &ns);
    assert!(
        sas.get_opt(&format!("{ns}-valtune"))
            .await
            .unwrap()
            .is_none()
    );
    let roles: Api<k8s_openapi::api::rbac::v1::Role> =
        Api::namespaced(argo.lab.client.clone(), &ns);
    assert!(
        roles
            .get_opt(&format!("{ns}-valtune"))
            .await
            .unwrap()
            .is_none()
    );
    // The CRDs, the same objects; the experiment and its trials with their results.
    for (name, uid) in CRDS.iter().zip(&uids) {
        assert_eq!(
            &crd(&argo.lab, name).await.metadata.uid,
            uid,
            "{name} was replaced"
        );
    }
    let kept = Api::<ValidatorExperiment>::namespaced(argo.lab.client.clone(), &ns)
        .get("kept")
        .await
        .unwrap();
    assert_eq!(serde_json::to_value(&kept.status).unwrap(), results);
    let now: Vec<Value> = trials(&argo.lab, &ns)
        .await
        .iter()
        .map(|t| serde_json::to_value(&t.status.as_ref().unwrap().results).unwrap())
        .collect();
    assert_eq!(now, trial_results);
    argo.lab.delete_namespace(&ns).await;
}

/// The layout of manifests/gitops/ in a repository of the lab's: apps/ (each Application
/// as the lab runs it, named after `ns` and deploying into it), an experiment and a
/// Validator; the chart in a second repository. The root Application's name.
async fn layout(argo: &Argo, ns: &str, waves: bool) -> (String, [String; 3]) {
    let (chart, _) = chart_repo(argo);
    let acme = Repo::new(argo, "acme");
    let names = [
        format!("{ns}-valtune"),
        format!("{ns}-vx"),
        format!("{ns}-v"),
    ];
    for (i, (file, name)) in ["valtune", "experiments", "validators"]
        .iter()
        .zip(&names)
        .enumerate()
    {
        let url = if i == 0 { &chart.url } else { &acme.url };
        let mut app = for_lab(argo, &format!("apps/{file}.yaml"), name, url, ns);
        if waves {
            // The layout docs/gitops.md recommended before: the chart first, then the rest.
            app["metadata"]["annotations"] = json!({"argocd.argoproj.io/sync-wave": i.to_string()});
        }
        acme.write_yaml(&format!("apps/{file}.yaml"), &app);
    }
    acme.write_yaml(
        "experiments/ram.yaml",
        &experiment_yaml(
            ns,
            "ram",
            json!({"spec": {"sweep": {"memory": ["512Gi", "1Ti"]}, "parallelism": 2}}),
        ),
    );
    acme.write_yaml(
        "validators/besu.yaml",
        &crate::validator::validator(ns, "besu", "vv-03"),
    );
    acme.commit("valtune, an experiment and a Validator");
    crate::validator::node_key(&argo.lab, ns).await;
    let root = format!("{ns}-root");
    let mut app = for_lab(argo, "root.yaml", &root, &acme.url, "argocd");
    app["spec"]["destination"]["namespace"] = json!(argo.argocd.namespace);
    argo.apply(&app).await;
    (root, names)
}

async fn delete_layout(argo: &Argo, ns: &str, root: &str, children: &[String]) {
    argo.delete(root).await;
    for c in children {
        argo.delete(c).await;
    }
    argo.lab.delete_namespace(ns).await;
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn the_recommended_layout_syncs_to_completion_while_its_experiment_runs() {
    let argo = argo().await;
    let _chart = argo.chart_lock().await;
    let ns = argo.lab.namespace("gitops-layout").await;
    let (root, [chart, vx, v]) = layout(&argo, &ns, false).await;
    // The root's sync is done while the experiment still runs (its Application
    // Progressing), though argocd-cm has Argo CD's Application health check (argo()).
    let seen = wait_for(
        "the root synced, the experiment's Application Progressing",
        Duration::from_secs(300),
        || {
            let argo = &argo;
            let (root, vx) = (root.clone(), vx.clone());
            async move {
                let r = argo.apps().get(&root).await.map_err(|e| e.to_string())?;
                let r = serde_json::to_value(r).unwrap();
                let x = argo.apps().get_opt(&vx).await.map_err(|e| e.to_string())?;
                let x = x
                    .map(|x| serde_json::to_value(x).unwrap())
                    .unwrap_or_default();
                if operation_phase(&r) == "Succeeded"
                    && sync_status(&r) == "Synced"
                    && health_status(&x) == "Progressing"
                {
                    Ok(r)
                } else {
                    Err(format!(
                        "root: {}; experiments: {}",
                        summary(&r),
                        summary(&x)
                    ))
                }
            }
        },
    )
    .await;
    assert_eq!(
        seen["status"]["operationState"]["syncResult"]["resources"]
            .as_array()
            .map(Vec::len),
        Some(3)
    );
    // Then each child as on its own: the operator, the experiment to its end, the Validator.
    argo.wait_synced(&chart, None, "Healthy").await;
    wait_finished(&argo.lab, &ns, "ram", Duration::from_secs(300)).await;
    argo.wait_synced(&vx, None, "Healthy").await;
    argo.wait_app(&v, "Synced", Duration::from_secs(120), |app| {
        (sync_status(app) == "Synced")
            .then_some(())
            .ok_or_else(|| "not yet".to_string())
    })
    .await;
    delete_layout(&argo, &ns, &root, &[chart, vx, v]).await;
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn with_waves_between_applications_a_running_experiment_holds_the_roots_sync() {
    let argo = argo().await;
    let _chart = argo.chart_lock().await;
    let ns = argo.lab.namespace("gitops-waves").await;
    let (root, [chart, vx, v]) = layout(&argo, &ns, true).await;
    // The experiments' Application (wave 1) is Progressing until the experiment ends, and
    // the root's sync waits on it: Running, and the Validators (wave 2) not even created.
    argo.wait_app(&vx, "Progressing", Duration::from_secs(300), |app| {
        (health_status(app) == "Progressing")
            .then_some(())
            .ok_or_else(|| "not yet".to_string())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let r = argo.app(&root).await;
    let running = Api::<ValidatorExperiment>::namespaced(argo.lab.client.clone(), &ns)
        .get("ram")
        .await
        .unwrap();
    assert_eq!(
        running.status.as_ref().map(|s| s.phase),
        Some(valtune::api::experiment::ExperimentPhase::Running),
        "the experiment ended: the window proves nothing"
    );
    assert_eq!(operation_phase(&r), "Running", "{}", summary(&r));
    assert!(
        argo.apps().get_opt(&v).await.unwrap().is_none(),
        "wave 2 was applied"
    );
    // Once it is Healthy, the root's sync goes on and ends.
    wait_finished(&argo.lab, &ns, "ram", Duration::from_secs(300)).await;
    argo.wait_app(&root, "its sync done", Duration::from_secs(180), |app| {
        (operation_phase(app) == "Succeeded")
            .then_some(())
            .ok_or_else(|| "not yet".to_string())
    })
    .await;
    delete_layout(&argo, &ns, &root, &[chart, vx, v]).await;
}

#[tokio::test]
#[ignore = "needs the lab with Argo CD: run `make test-gitops`"]
async fn a_chart_upgrade_adding_a_crd_field_syncs_and_so_do_experiments_using_it() {
    let argo = argo().await;
    let _chart = argo.chart_lock().await;
    let ns = argo.lab.namespace("gitops-upgrade").await;
    let (chart, rev) = chart_repo(&argo);
    argo.apply(&for_lab(&argo, "apps/valtune.yaml", &ns, &chart.url, &ns))
        .await;
    argo.wait_synced(&ns, Some(&rev), "Healthy").await;

    // Experiments synced by three Applications, each Synced before the upgrade: the
    // recommended one (client-side apply), one with server-side apply (so Server-Side
    // Diff, argo-cd#20458's case), and one with server-side apply but the usual diff
    // (the compare-options opt-out docs/gitops.md gives).
    let repo = Repo::new(&argo, "experiments");
    let noted = |name: &str, note: Option<&str>| {
        let mut vx = experiment_yaml(&ns, name, json!({"spec": {"suspend": true}}));
        if let Some(n) = note {
            vx["spec"]["gitopsNote"] = json!(n);
        }
        vx
    };
    // (app, directory and experiment, server-side apply, Server-Side Diff opted out)
    let apps = [
        (format!("{ns}-csa"), "csa", false, false),
        (format!("{ns}-ssd"), "ssd", true, false),
        (format!("{ns}-ssa"), "ssa", true, true),
    ];
    for (_, dir, _, _) in &apps {
        repo.write_yaml(&format!("{dir}/{dir}.yaml"), &noted(dir, None));
    }
    let rev = repo.commit("three experiments");
    for (name, dir, ssa, opt_out) in &apps {
        let mut app = for_lab(&argo, "apps/experiments.yaml", name, &repo.url, &ns);
        app["spec"]["source"]["path"] = json!(dir);
        if *ssa {
            app["spec"]["syncPolicy"]["syncOptions"] =
                json!(["CreateNamespace=true", "ServerSideApply=true"]);
        }
        if *opt_out {
            app["metadata"]["annotations"] =
                json!({"argocd.argoproj.io/compare-options": "ServerSideDiff=false"});
        }
        argo.apply(&app).await;
    }
    for (name, ..) in &apps {
        argo.wait_synced(name, Some(&rev), "Suspended").await;
    }

    // The next release's chart: the experiments' CRD has a new field.
    const CRD: &str = "charts/valtune/files/crds/validatorexperiments.yaml";
    let original = chart.read(CRD);
    let mut crd_doc: Value = serde_saphyr::from_str(&original).unwrap();
    crd_doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["gitopsNote"] = json!({"type": "string", "description": "A field of the next release."});
    chart.write(CRD, &serde_saphyr::to_string(&crd_doc).unwrap());
    let upgraded = chart.commit("the next release: a new field");
    argo.refresh(&ns, false).await;
    argo.wait_synced(&ns, Some(&upgraded), "Healthy").await;
    let live = crd(&argo.lab, "validatorexperiments.valtune.dev").await;
    let schema = serde_json::to_value(&live.spec.versions[0].schema).unwrap();
    assert!(
        schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["gitopsNote"].is_object(),
        "the CRD was not upgraded"
    );

    // Then the experiments use it: each Application syncs them (the controller reloads
    // the CRDs' schemas on a CRD event at v3.6.2: gitops-engine pkg/cache/cluster.go),
    // the field is stored, and nothing differs after.
    for (_, dir, _, _) in &apps {
        repo.write_yaml(
            &format!("{dir}/{dir}.yaml"),
            &noted(dir, Some("uses the new field")),
        );
    }
    let rev = repo.commit("the experiments use the new field");
    for (name, ..) in &apps {
        argo.refresh(name, false).await;
    }
    let vxs = crate::common::experiments(&argo.lab.client, &ns);
    for (name, dir, _, _) in &apps {
        argo.wait_synced(name, Some(&rev), "Suspended").await;
        assert_eq!(
            vxs.get(dir).await.unwrap().data["spec"]["gitopsNote"],
            "uses the new field"
        );
    }
    let names: Vec<&str> = apps.iter().map(|a| a.0.as_str()).collect();
    let reconciled = steady(&argo, &names, Duration::from_secs(45)).await;
    assert!(reconciled.iter().all(|&n| n >= 2), "{reconciled:?}");

    // Back to the release before: the field goes from the CRD.
    for (name, ..) in &apps {
        argo.delete(name).await;
    }
    chart.write(CRD, &original);
    let back = chart.commit("back to the release before");
    argo.refresh(&ns, false).await;
    argo.wait_synced(&ns, Some(&back), "Healthy").await;
    argo.delete(&ns).await;
    argo.lab.delete_namespace(&ns).await;
}
