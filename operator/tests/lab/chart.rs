//! charts/valtune in the lab, as users install it: `helm install`, then the operator runs
//! as the chart's Deployment, its pod a real valtune process the lab starts with the
//! pod's ServiceAccount token (lab/src/sim/local_pods), so only the chart's RBAC lets it
//! work. Each test installs its own release watching its own namespace.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::Role;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use valtune::api::trial::TrialPhase;
use valtune::api::{ValidatorExperiment, ValidatorTrial};

use crate::common::{
    Lab, create, lab, quickstart_with, repo_root, trials, wait_finished, wait_for,
};
use crate::helm::{
    chart, fullname, helm, install, log_of, metrics_of, ready_pods, sample, uninstall,
};

/// An instant query of the lab's Prometheus: its result vector.
async fn prom_query(lab: &Lab, q: &str, at: Option<i64>) -> Vec<serde_json::Value> {
    let mut form = vec![("query", q.to_string())];
    if let Some(t) = at {
        form.push(("time", t.to_string()));
    }
    let resp: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/api/v1/query", lab.state.prometheus_url))
        .form(&form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resp["status"], "success", "{q}: {resp}");
    resp["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Argo CD's health of an object, by the chart's Lua script for its kind, run as Argo CD
/// runs argocd-cm scripts (hack/tools/luahealth).
fn argo_health(lab: &Lab, kind: &str, obj: &impl serde::Serialize) -> (String, String) {
    let file = repo_root().join(format!(
        "target/test-logs/health-{kind}-{}.yaml",
        crate::helm::unique()
    ));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, serde_saphyr::to_string(obj).unwrap()).unwrap();
    let script = chart().join(format!("argocd/{kind}/health.lua"));
    let out = std::process::Command::new(lab.state.tools.join("luahealth"))
        .args([
            "run",
            &script.display().to_string(),
            &file.display().to_string(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
    let (status, message) = text.split_once('\t').unwrap_or((&text, ""));
    (status.to_string(), message.to_string())
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_chart_runs_the_operator_as_its_service_account_through_an_experiment() {
    let lab = lab().await;
    let ns = lab.namespace("chart").await;
    let release = ns.clone();
    let name = fullname(&release);
    // Two replicas: one leads through the Lease, both serve /metrics and are Ready.
    // The lab's pod IPs are loopback addresses, which the API server refuses in
    // EndpointSlices: Prometheus scrapes the operator through the chart's PodMonitor. Its
    // ServiceMonitor is installed too, and must become a scrape job.
    install(
        &lab,
        &chart(),
        &release,
        &ns,
        &[
            "replicaCount=2",
            "metrics.podMonitor.enabled=true",
            "metrics.podMonitor.interval=1s",
        ],
    );
    let pods = ready_pods(&lab, &ns, &release, 2).await;
    let pod_names: Vec<String> = pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    let leases: Api<Lease> = Api::namespaced(lab.client.clone(), &ns);
    let holder = wait_for("a leader", Duration::from_secs(60), || async {
        let l = leases
            .get("valtune-operator")
            .await
            .map_err(|e| e.to_string())?;
        l.spec
            .and_then(|s| s.holder_identity)
            .ok_or_else(|| "no holder".to_string())
    })
    .await;
    assert!(
        pod_names.contains(&holder),
        "{holder} is none of {pod_names:?}"
    );

    let vx = quickstart_with(
        &ns,
        "chart-ram",
        json!({"spec": {"sweep": {"memory": ["256Gi", "1Ti"]}, "parallelism": 2}}),
    );
    let vxs: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    create(&lab, &vx).await;
    // While it runs, Argo CD would call it Progressing.
    let running = wait_for("the experiment to run", Duration::from_secs(60), || async {
        let vx = vxs.get("chart-ram").await.map_err(|e| e.to_string())?;
        match vx.status.as_ref().map(|s| s.phase) {
            Some(valtune::api::experiment::ExperimentPhase::Running) => Ok(vx),
            p => Err(format!("{p:?}")),
        }
    })
    .await;
    assert_eq!(
        argo_health(&lab, "ValidatorExperiment", &running).0,
        "Progressing"
    );

    let done = wait_finished(&lab, &ns, "chart-ram", Duration::from_secs(300)).await;
    let all = trials(&lab, &ns).await;
    assert_eq!(all.len(), 2);
    for t in &all {
        let st = t.status.clone().unwrap();
        assert_eq!(st.phase, TrialPhase::Succeeded, "{:?}", st.message);
        let (health, message) = argo_health(&lab, "ValidatorTrial", t);
        assert_eq!(health, "Healthy", "{message}");
    }
    let (health, message) = argo_health(&lab, "ValidatorExperiment", &done);
    assert_eq!(health, "Healthy", "{message}");
    assert!(message.contains("recommendation"), "{message}");

    // A Validator too: the chart's RBAC covers its Lease, claims, pod and disruption
    // budget, and Argo CD calls it Healthy once Besu says it is ready.
    crate::validator::node_key(&lab, &ns).await;
    let vv: valtune::api::Validator =
        serde_json::from_value(crate::validator::validator(&ns, "chart-besu", "vv-chart")).unwrap();
    let vvs: Api<valtune::api::Validator> = Api::namespaced(lab.client.clone(), &ns);
    vvs.create(&PostParams::default(), &vv).await.unwrap();
    let (ready, _) = crate::validator::wait_ready(&vvs, "chart-besu").await;
    let (health, message) = argo_health(&lab, "Validator", &ready);
    assert_eq!(health, "Healthy", "{message}");

    // It was the pod's ServiceAccount that wrote them (the lab's audit log).
    let user = format!("system:serviceaccount:{ns}:{name}");
    let audit = std::fs::read_to_string(lab.state.dir.join("logs/audit.log")).unwrap();
    let writes: Vec<(String, String)> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["user"]["username"] == user.as_str())
        .map(|e| {
            (
                e["objectRef"]["resource"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                e["verb"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for (resource, verb) in [
        ("validatortrials", "create"),
        ("pods", "patch"),
        ("leases", "update"),
        // The Validator's: its identity's Lease, its claim, its pod, its budget, status.
        ("leases", "create"),
        ("persistentvolumeclaims", "create"),
        ("pods", "create"),
        ("poddisruptionbudgets", "create"),
        ("validators", "patch"),
    ] {
        assert!(
            writes.iter().any(|(r, v)| r == resource && v == verb),
            "no {verb} of {resource} by {user} in the audit log: {writes:?}"
        );
    }

    // prometheus-operator took both monitors; Prometheus scrapes the operator and loads
    // the chart's rules.
    wait_for(
        "the ServiceMonitor's scrape job",
        Duration::from_secs(60),
        || async {
            let config = std::fs::read_to_string(&lab.state.prometheus_config).unwrap_or_default();
            let job = format!("serviceMonitor/{ns}/{name}/0");
            if config.contains(&job) {
                Ok(())
            } else {
                Err(format!("no {job}"))
            }
        },
    )
    .await;
    let finished = format!("sum(valtune_trials_finished{{job=\"{name}\",namespace=\"{ns}\"}})");
    wait_for(
        "the operator's metrics in Prometheus",
        Duration::from_secs(90),
        || async {
            let up = prom_query(
                &lab,
                &format!("sum(up{{job=\"{name}\",namespace=\"{ns}\"}})"),
                None,
            )
            .await;
            let n = prom_query(&lab, &finished, None).await;
            let value = |r: &[serde_json::Value]| {
                r.first()
                    .and_then(|s| s["value"][1].as_str())
                    .map(str::to_string)
            };
            match (value(&up).as_deref(), value(&n).as_deref()) {
                (Some("2"), Some("2")) => Ok(()),
                other => Err(format!("(up, trials finished) = {other:?}")),
            }
        },
    )
    .await;
    wait_for(
        "the chart's rules evaluated",
        Duration::from_secs(90),
        || async {
            let resp: serde_json::Value =
                reqwest::get(format!("{}/api/v1/rules", lab.state.prometheus_url))
                    .await
                    .map_err(|e| e.to_string())?
                    .json()
                    .await
                    .map_err(|e| e.to_string())?;
            let rules: Vec<serde_json::Value> = resp["data"]["groups"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|g| g["file"].as_str().is_some_and(|f| f.contains(&ns)))
                .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
                .collect();
            let ok = rules.iter().filter(|r| r["health"] == "ok").count();
            if rules.len() >= 9 && ok == rules.len() {
                Ok(())
            } else {
                Err(format!("{ok} of {} rules healthy: {rules:?}", rules.len()))
            }
        },
    )
    .await;
    // The dashboard's panels show data: the operator's series now, a trial's in its window.
    let trial = &all[0];
    let st = trial.status.clone().unwrap();
    let pod = format!("{}-{}", trial.metadata.name.clone().unwrap(), st.attempts);
    let at = st.window_end.clone().unwrap().0.as_second();
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(chart().join("files/dashboards/valtune.json")).unwrap(),
    )
    .unwrap();
    let mut queried = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            let q = expr
                .replace("$operator", &name)
                .replace("$namespace", &ns)
                .replace("$trial", &pod)
                .replace("$experiment", &trial.spec.experiment)
                .replace("$__rate_interval", "5s")
                .replace("$__interval_ms", "5000")
                .replace("$__interval", "5s");
            // Trial series at the window's end; the operator's, now.
            let when = (expr.contains("$trial") || expr.contains("$experiment")).then_some(at);
            let result = prom_query(&lab, &q, when).await;
            // Errors may be zero (no errors), but a series must exist. Validator series
            // exist with a Validator, and this release runs none.
            assert!(
                !result.is_empty()
                    || expr.contains("reconcile_errors")
                    || expr.contains("valtune_validator_"),
                "panel {:?}: {q} has no data",
                panel["title"]
            );
            // The experiment view names each line by its trial's point.
            if expr.contains("$experiment") {
                let points: Vec<_> = result.iter().map(|r| &r["metric"]["point"]).collect();
                assert!(
                    points.contains(&&serde_json::json!(trial.spec.point.describe())),
                    "panel {:?}: {points:?}",
                    panel["title"]
                );
            }
            queried += 1;
        }
    }
    assert!(queried >= 8, "{queried}");

    uninstall(&lab, &release, &ns);
    // The lab stops the processes with their pods.
    let ip = pods[0].status.clone().unwrap().pod_ip.unwrap();
    wait_for(
        "the operator processes to stop",
        Duration::from_secs(60),
        || async {
            match reqwest::get(format!("http://{ip}:8080/healthz")).await {
                Ok(_) => Err("still answering".to_string()),
                Err(_) => Ok(()),
            }
        },
    )
    .await;
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn without_one_rbac_rule_the_operator_fails_with_the_api_servers_forbidden_message() {
    let lab = lab().await;
    let ns = lab.namespace("rbac").await;
    let release = ns.clone();
    let name = fullname(&release);
    install(&lab, &chart(), &release, &ns, &[]);
    // The chart's Role for the watched namespace, less its rule for pods.
    let roles: Api<Role> = Api::namespaced(lab.client.clone(), &ns);
    let mut role = roles.get(&name).await.unwrap();
    let rules = role.rules.take().unwrap();
    let before = rules.len();
    role.rules = Some(
        rules
            .into_iter()
            .filter(|r| !r.resources.iter().flatten().any(|x| x == "pods"))
            .collect(),
    );
    assert_eq!(role.rules.as_ref().unwrap().len(), before - 1);
    roles
        .replace(&name, &PostParams::default(), &role)
        .await
        .unwrap();

    create(
        &lab,
        &quickstart_with(&ns, "rbac", json!({"spec": {"sweep": {"memory": ["1Ti"]}}})),
    )
    .await;
    let pod = ready_pods(&lab, &ns, &release, 1).await.remove(0);
    let refusal = format!(
        "is forbidden: User \"system:serviceaccount:{ns}:{name}\" cannot patch resource \"pods\""
    );
    wait_for(
        "the API server's refusal in the operator's log",
        Duration::from_secs(90),
        || async {
            // JSON logs escape the message's quotes.
            let log = log_of(&lab, &pod).replace("\\\"", "\"");
            if log.contains(&refusal) {
                Ok(())
            } else {
                Err(log.lines().rev().take(3).collect::<Vec<_>>().join(" | "))
            }
        },
    )
    .await;
    let page = metrics_of(&pod).await.unwrap();
    let errors = sample(
        &page,
        "valtune_reconcile_errors_total{controller=\"trial\",step=\"apply_rendered\",kind=\"forbidden\"}",
    );
    assert!(errors.is_some_and(|n| n >= 1.0), "{page}");
    let tapi: Api<ValidatorTrial> = Api::namespaced(lab.client.clone(), &ns);
    let t = tapi
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .remove(0);
    assert_eq!(t.status.unwrap_or_default().phase, TrialPhase::Pending);

    // `helm upgrade` puts the rule back; the trial goes on.
    install(&lab, &chart(), &release, &ns, &[]);
    wait_for(
        "the trial to get its pod",
        Duration::from_secs(120),
        || async {
            let t = tapi
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .remove(0);
            match t.status.unwrap_or_default().phase {
                TrialPhase::Pending => Err("Pending".to_string()),
                _ => Ok(()),
            }
        },
    )
    .await;
    uninstall(&lab, &release, &ns);
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_failing_liveness_probe_restarts_the_operator() {
    let lab = lab().await;
    let ns = lab.namespace("liveness").await;
    let release = ns.clone();
    install(&lab, &chart(), &release, &ns, &[]);
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(lab.client.clone(), &ns);
    // A probe of a path the operator does not serve: the kubelet restarts the container.
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "operator",
        "livenessProbe": {"httpGet": {"path": "/missing", "port": "http-metrics"},
                          "periodSeconds": 1, "failureThreshold": 2}}]}}}});
    deployments
        .patch(
            &fullname(&release),
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(lab.client.clone(), &ns);
    let lp = ListParams::default().labels(&format!("app.kubernetes.io/instance={release}"));
    wait_for("a restart", Duration::from_secs(90), || async {
        let list = pods.list(&lp).await.map_err(|e| e.to_string())?.items;
        let restarted = list
            .iter()
            .flat_map(|p| p.status.iter())
            .flat_map(|s| s.container_statuses.iter().flatten())
            .find(|c| c.restart_count >= 1);
        match restarted {
            Some(c)
                if c.last_state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .is_some() =>
            {
                Ok(())
            }
            _ => Err(format!("{} pods, none restarted", list.len())),
        }
    })
    .await;
    uninstall(&lab, &release, &ns);
    lab.delete_namespace(&ns).await;
}

/// Adds `spec.labNote` to the ValidatorExperiment CRD of a copy of the chart.
fn chart_with_a_new_field() -> std::path::PathBuf {
    let dir = repo_root().join(format!("target/test-logs/chart-{}", crate::helm::unique()));
    let status = std::process::Command::new("cp")
        .args([
            "-r",
            &chart().display().to_string(),
            &dir.display().to_string(),
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let file = dir.join("files/crds/validatorexperiments.yaml");
    let mut crd: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["labNote"] =
        json!({"type": "string", "description": "A field the upgrade adds."});
    std::fs::write(&file, serde_saphyr::to_string(&crd).unwrap()).unwrap();
    dir
}

/// Whether the API server (strict field validation, dry run) takes spec.labNote.
async fn takes_lab_note(lab: &Lab, ns: &str) -> Result<(), String> {
    let mut vx = serde_json::to_value(quickstart_with(ns, "note", json!({}))).unwrap();
    vx["spec"]["labNote"] = json!("hello");
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        lab.client.clone(),
        ns,
        &kube::api::ApiResource::erase::<ValidatorExperiment>(&()),
    );
    let strict = PatchParams {
        dry_run: true,
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..PatchParams::apply("chart-test")
    };
    api.patch("note", &strict, &Patch::Apply(&vx))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn helm_upgrade_with_a_changed_crd_schema_updates_the_crd_and_uninstall_keeps_it() {
    let lab = lab().await;
    let ns = lab.namespace("crds").await;
    let release = ns.clone();
    // The lab's CRDs are shared by every test: this release adopts them (Helm's ownership
    // labels), as a user's first helm install adopts CRDs applied with kubectl.
    let crds: Api<CustomResourceDefinition> = Api::all(lab.client.clone());
    for crd in [
        "validatorexperiments.valtune.dev",
        "validatortrials.valtune.dev",
        "validators.valtune.dev",
    ] {
        let adopt = json!({"metadata": {
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns}}});
        crds.patch(crd, &PatchParams::default(), &Patch::Merge(&adopt))
            .await
            .unwrap();
    }
    let only_crds = ["crds.enabled=true", "replicaCount=0"];
    install(&lab, &chart(), &release, &ns, &only_crds);
    let refused = takes_lab_note(&lab, &ns).await.unwrap_err();
    assert!(refused.contains("labNote"), "{refused}");

    let changed = chart_with_a_new_field();
    install(&lab, &changed, &release, &ns, &only_crds);
    let has_note = |crd: &CustomResourceDefinition| {
        serde_json::to_value(crd).unwrap()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            ["properties"]["spec"]["properties"]
            .get("labNote")
            .is_some()
    };
    let crd = crds.get("validatorexperiments.valtune.dev").await.unwrap();
    assert!(has_note(&crd), "helm upgrade did not change the CRD");
    let annotations = crd.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("helm.sh/resource-policy")
            .map(String::as_str),
        Some("keep")
    );
    wait_for(
        "the API server to take spec.labNote",
        Duration::from_secs(30),
        || takes_lab_note(&lab, &ns),
    )
    .await;

    // Back to the chart as it is: the field goes again.
    install(&lab, &chart(), &release, &ns, &only_crds);
    let crd = crds.get("validatorexperiments.valtune.dev").await.unwrap();
    assert!(
        !has_note(&crd),
        "helm upgrade did not take the field out again"
    );

    // Uninstalling keeps the CRDs (and every experiment with them).
    helm(&lab, &["uninstall", &release, "--namespace", &ns, "--wait"]);
    for crd in [
        "validatorexperiments.valtune.dev",
        "validatortrials.valtune.dev",
        "validators.valtune.dev",
    ] {
        let kept = crds.get_opt(crd).await.unwrap();
        assert!(
            kept.is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
            "{crd} was deleted"
        );
    }
    let _ = std::fs::remove_dir_all(changed);
    lab.delete_namespace(&ns).await;
}
