//! `valtune check` against the lab, and what a Prometheus without the remote-write
//! receiver does to an Agave experiment (issue 18). The lab runs a second Prometheus,
//! `monitoring/lab-no-receiver`, as clusters run theirs by default: no remote-write
//! receiver, scraping only namespaces labelled valtune.dev/lab-prometheus=no-receiver.

use std::process::Command;
use std::time::Duration;

use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use valtune::api::ValidatorExperiment;
use valtune::api::experiment::ExperimentPhase;
use valtune::api::trial::{TrialOutcome, ValidatorTrial};
use valtune::strategies::build::build_trial;
use valtune::strategies::plan::plan;

use crate::common::{Lab, create, example, lab, merge, repo_root, trials, wait_finished, wait_for};

const SMOKE: &str = "manifests/examples/smoke-agave-bench.yaml";

/// `valtune check ARGS` as a user runs it with the lab's kubeconfig: (passed, output).
fn check(lab: &Lab, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_valtune"))
        .arg("check")
        .args(args)
        .env("KUBECONFIG", &lab.state.kubeconfig)
        .env_remove("PROMETHEUS_URL")
        .output()
        .expect("running valtune check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The line of a check in the output (`FAIL  storage  ...` and its fix below).
fn line<'a>(out: &'a str, status: &str, check: &str) -> Option<&'a str> {
    out.lines()
        .find(|l| l.starts_with(status) && l[4..].trim_start().starts_with(check))
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn valtune_check_passes_on_the_lab_and_names_the_fix_of_each_gap() {
    let lab = lab().await;
    let ns = lab.namespace("check").await;
    let prom = lab.state.prometheus_url.clone();

    // The lab is prepared as docs/prepare-cluster.md says: every check passes, for the
    // conventions and for every example as written (so each fits the lab's allocatable).
    let (ok, out) = check(&lab, &["-n", &ns, "--prometheus-url", &prom]);
    assert!(ok, "{out}");
    for c in [
        "crds",
        "prometheus",
        "remote-write",
        "podmonitor",
        "nodes",
        "storage",
    ] {
        assert!(line(&out, "PASS", c).is_some(), "{c}: {out}");
    }
    let mut files = vec![
        "--prometheus-url".to_string(),
        prom.clone(),
        "-n".into(),
        ns.clone(),
    ];
    for entry in std::fs::read_dir(repo_root().join("manifests/examples")).unwrap() {
        files.extend(["-f".into(), entry.unwrap().path().display().to_string()]);
    }
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let (ok, out) = check(&lab, &files);
    assert!(ok, "{out}");
    assert!(!out.contains("FAIL"), "{out}");

    // No remote-write receiver: named, with the ways to turn it on.
    let bare = lab.state.prometheus_no_receiver_url.clone();
    let (ok, out) = check(&lab, &["-n", &ns, "--prometheus-url", &bare]);
    assert!(!ok, "{out}");
    assert!(
        line(&out, "FAIL", "remote-write").is_some_and(|l| l.contains("needs to be enabled")),
        "{out}"
    );
    assert!(out.contains("enableRemoteWriteReceiver=true"), "{out}");

    // A PodMonitor no Prometheus selects (the lab's selects all but this label).
    let (ok, out) = check(
        &lab,
        &[
            "-n",
            &ns,
            "--prometheus-url",
            &prom,
            "--pod-monitor-labels",
            "valtune.dev/lab-unselected=true",
        ],
    );
    assert!(!ok, "{out}");
    let failed = line(&out, "FAIL", "podmonitor").unwrap_or_else(|| panic!("{out}"));
    assert!(
        failed.contains(
            "Prometheus monitoring/lab selects PodMonitors labelled !valtune.dev/lab-unselected"
        ),
        "{out}"
    );
    assert!(
        out.contains("fix: give valtune's PodMonitors labels a Prometheus selects"),
        "{out}"
    );

    // A StorageClass the cluster lacks.
    let mut smoke = yaml(SMOKE);
    smoke["spec"]["template"]["storage"][0]["storageClassName"] = json!("fast-nvme");
    let file = std::env::temp_dir().join(format!("valtune-check-{ns}.yaml"));
    std::fs::write(&file, serde_saphyr::to_string(&smoke).unwrap()).unwrap();
    let (ok, out) = check(
        &lab,
        &[
            "-n",
            &ns,
            "--prometheus-url",
            &prom,
            "-f",
            file.to_str().unwrap(),
        ],
    );
    let _ = std::fs::remove_file(&file);
    assert!(!ok, "{out}");
    assert!(
        line(&out, "FAIL", "storage")
            .is_some_and(|l| l.contains("StorageClass fast-nvme does not exist")),
        "{out}"
    );
    assert!(out.contains("fix: create StorageClass fast-nvme"), "{out}");

    // And the tutorial's next step: the smoke example, as written, to a result.
    let _op = lab.start_operator(&ns);
    let mut vx: serde_json::Value = example(SMOKE);
    vx["metadata"]["namespace"] = json!(ns);
    create(&lab, &serde_json::from_value(vx).unwrap()).await;
    let done = wait_finished(&lab, &ns, "smoke", Duration::from_secs(240)).await;
    // Its report: one bar, kept up, its TPS line.
    let fig = crate::report::write(&lab, &done, &trials(&lab, &ns).await);
    assert_eq!(fig.summary("avg-tps").bars.len(), 1);
    assert!(crate::report::mean(&fig.series("tps").traces[0]) > 100.0);
    let t = trials(&lab, &ns).await.remove(0);
    let st = t.status.unwrap();
    assert_eq!(st.outcome, Some(TrialOutcome::KeptUp), "{st:?}");
    let r = st.results.unwrap();
    assert!(r.avg_tps.unwrap() > 100.0 && r.missing.is_empty(), "{r:?}");
    assert_eq!(done.status.unwrap().phase, ExperimentPhase::Succeeded);
    lab.delete_namespace(&ns).await;
}

fn yaml(path: &str) -> serde_json::Value {
    crate::common::yaml_file(path)
}

/// Without the receiver an Agave experiment waits, saying what to turn on; a trial that
/// runs anyway (started before the receiver went away) does not end KeptUp at 0 TPS: it
/// ends MetricsUnavailable naming the series that never arrived and why.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn without_the_remote_write_receiver_agave_waits_and_a_blind_trial_says_what_is_missing() {
    let lab = lab().await;
    let ns = lab
        .namespace_labelled(
            "noreceiver",
            valtune_lab::prometheus::NO_RECEIVER_NAMESPACE_LABEL,
        )
        .await;
    let bare = lab.state.prometheus_no_receiver_url.clone();
    let _op = lab.start_operator_with(&ns, Some(&bare));
    let mut v = merge(&example(SMOKE), &json!({"metadata": {"namespace": ns}}));
    v["metadata"]["name"] = json!("blind");
    let vx: ValidatorExperiment = serde_json::from_value(v).unwrap();
    create(&lab, &vx).await;

    let api: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    let waiting = wait_for(
        "the experiment to wait for the receiver",
        Duration::from_secs(60),
        || async {
            let vx = api.get("blind").await.map_err(|e| e.to_string())?;
            let st = vx.status.clone().unwrap_or_default();
            match st
                .conditions
                .iter()
                .find(|c| c.type_ == "MetricsPipelineReady")
            {
                Some(c) if c.status == "False" => Ok(vx),
                c => Err(format!("{c:?}")),
            }
        },
    )
    .await;
    let st = waiting.status.clone().unwrap();
    let c = st
        .conditions
        .iter()
        .find(|c| c.type_ == "MetricsPipelineReady")
        .unwrap();
    assert_eq!(c.reason, "RemoteWriteReceiverOff");
    assert!(
        c.message.contains("enableRemoteWriteReceiver=true"),
        "{}",
        c.message
    );
    assert_eq!(st.phase, ExperimentPhase::Pending);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(trials(&lab, &ns).await.is_empty(), "a trial started blind");

    // A trial already there when the receiver went away: the experiment's first, as it
    // would have made it.
    let created = api.get("blind").await.unwrap();
    let first = plan(&created.spec.sweep, 1).remove(0);
    let trial = build_trial(&created, &first).unwrap();
    Api::<ValidatorTrial>::namespaced(lab.client.clone(), &ns)
        .create(&PostParams::default(), &trial)
        .await
        .unwrap();
    let t = wait_for("the trial to finish", Duration::from_secs(240), || async {
        let list = Api::<ValidatorTrial>::namespaced(lab.client.clone(), &ns)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        match list.items.into_iter().next() {
            Some(t) if t.status.as_ref().is_some_and(|s| s.phase.is_finished()) => Ok(t),
            t => Err(format!(
                "{:?}",
                t.and_then(|t| t.status).map(|s| (s.phase, s.message))
            )),
        }
    })
    .await;
    let st = t.status.unwrap();
    assert_eq!(st.outcome, Some(TrialOutcome::MetricsUnavailable), "{st:?}");
    let message = st.message.clone().unwrap_or_default();
    let series = "banking_stage_worker_counts_processed_with_successful_result_count";
    assert!(message.contains(series), "{message}");
    assert!(message.contains("remote-write receiver"), "{message}");
    let r = st.results.clone().unwrap();
    assert_eq!(r.avg_tps, None, "{r:?}");
    assert_eq!(r.max_tps, None, "{r:?}");
    assert!(r.missing.iter().any(|m| m == series), "{r:?}");
    let complete = st
        .conditions
        .iter()
        .find(|c| c.type_ == "Complete")
        .unwrap();
    assert_eq!(
        (complete.status.as_str(), complete.reason.as_str()),
        ("False", "SeriesMissing")
    );
    lab.delete_namespace(&ns).await;
}
