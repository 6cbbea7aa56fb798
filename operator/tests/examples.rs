//! Every example in manifests/examples/ and manifests/validators/, run in the lab that
//! `make lab-up` starts (lab/topology.yaml, the chart installed as `make demo` installs
//! it), by the commands its header gives under "In the lab", run as written: each
//! experiment reaches Succeeded, each Validator Ready. `make test-examples` starts that
//! lab and runs this; `make test` does not (docs/lab.md, "Test budget").
//!
//! Examples that would share machines run one after the other (the Agave and Besu
//! experiments on bm-01..04, the Firedancer ones on fd-01..05); the chains run at once.
//! Each example runs in a namespace of its own (the commands' kubeconfig names it), which
//! is deleted, with what it made, before the next of its chain.

#[path = "lab/common.rs"]
#[allow(dead_code)]
mod common;
#[path = "lab/example_headers.rs"]
mod example_headers;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::discovery::ApiResource;

use common::{Lab, lab, repo_root};
use example_headers::{CHAINS, lab_commands, results_of};

/// How long one example may take in the lab (the longest, the bisection and the paired
/// comparison, take minutes at 720x).
const PER_EXAMPLE: Duration = Duration::from_secs(20 * 60);

/// A kubeconfig of the lab's whose context names `ns`: the header's commands run as
/// written, into a namespace of their own.
fn kubeconfig_for(lab: &Lab, ns: &str, dir: &Path) -> PathBuf {
    let path = dir.join(format!("kubeconfig-{ns}"));
    std::fs::copy(&lab.state.kubeconfig, &path).unwrap();
    let ok = std::process::Command::new(tools_bin().join("kubectl"))
        .args(["config", "set-context", "--current", "--namespace", ns])
        .env("KUBECONFIG", &path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "setting the namespace of {}", path.display());
    path
}

fn tools_bin() -> PathBuf {
    PathBuf::from(std::env::var("VALTUNE_TOOLS_BIN").expect("VALTUNE_TOOLS_BIN (make sets it)"))
}

/// Runs one example as its header says and waits for its result: Ok(what it came to),
/// or why not.
async fn run_example(lab: &Lab, file: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
    let commands = lab_commands(file, &text);
    if commands.is_empty() {
        return Err("its header has no \"In the lab\" commands".into());
    }
    let stem = Path::new(file).file_stem().unwrap().to_string_lossy();
    let ns = format!("ex-{}", stem.replace('_', "-"));
    let namespaces: Api<Namespace> = Api::all(lab.client.clone());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await;
    let dir = repo_root().join("target/examples");
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = kubeconfig_for(lab, &ns, &dir);
    let path = format!(
        "{}:{}:{}",
        repo_root().join("target/debug").display(),
        tools_bin().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for cmd in &commands {
        let out = tokio::process::Command::new("bash")
            .args(["-euo", "pipefail", "-c", cmd])
            .current_dir(repo_root())
            .env("KUBECONFIG", &kubeconfig)
            .env("PATH", &path)
            .output()
            .await
            .unwrap();
        if !out.status.success() {
            return Err(format!(
                "`{cmd}` failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let mut came_to = Vec::new();
    for (kind, name) in results_of(&text) {
        came_to.push(wait_result(lab, &ns, &kind, &name).await?);
    }
    Ok(came_to.join("; "))
}

/// Waits for an experiment to succeed or a Validator to be Ready.
async fn wait_result(lab: &Lab, ns: &str, kind: &str, name: &str) -> Result<String, String> {
    let ar = ApiResource {
        group: "valtune.dev".into(),
        version: "v1alpha1".into(),
        api_version: "valtune.dev/v1alpha1".into(),
        kind: kind.into(),
        plural: match kind {
            "Validator" => "validators".into(),
            _ => "validatorexperiments".into(),
        },
    };
    let api: Api<DynamicObject> = Api::namespaced_with(lab.client.clone(), ns, &ar);
    let deadline = Instant::now() + PER_EXAMPLE;
    let mut last = String::new();
    loop {
        if let Ok(o) = api.get(name).await {
            let status = o.data.get("status").cloned().unwrap_or_default();
            let phase = status["phase"].as_str().unwrap_or_default().to_string();
            let ready = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["type"] == "Ready")
                .cloned()
                .unwrap_or_default();
            last = format!("{kind} {name}: phase {phase:?}, Ready {ready}");
            match kind {
                "Validator" if ready["status"] == "True" => {
                    return Ok(format!("{name} Ready ({phase})"));
                }
                "ValidatorExperiment" if phase == "Succeeded" => {
                    let rec = status["recommendation"]["summary"]
                        .as_str()
                        .or(status["summary"]["recommendation"].as_str())
                        .unwrap_or("")
                        .to_string();
                    return Ok(format!("{name} Succeeded {rec}"));
                }
                "ValidatorExperiment" if phase == "Failed" => {
                    return Err(format!("{last}; conditions {}", status["conditions"]));
                }
                _ => {}
            }
        }
        if Instant::now() > deadline {
            return Err(format!("no result within {PER_EXAMPLE:?}: {last}"));
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// Deletes an example's namespace and waits until it is gone (its pods off the machines).
async fn clean(lab: &Lab, file: &str) {
    let stem = Path::new(file).file_stem().unwrap().to_string_lossy();
    let ns = format!("ex-{}", stem.replace('_', "-"));
    let namespaces: Api<Namespace> = Api::all(lab.client.clone());
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    let deadline = Instant::now() + Duration::from_secs(300);
    while namespaces.get_opt(&ns).await.ok().flatten().is_some() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

#[tokio::test]
#[ignore = "needs the lab `make lab-up` starts: run `make test-examples`"]
async fn every_example_reaches_its_result_as_its_header_says() {
    let lab = lab().await;
    let only = std::env::var("EXAMPLES").ok();
    let started = Instant::now();
    let chains = CHAINS.iter().map(|chain| {
        let (lab, only) = (&lab, only.clone());
        async move {
            let mut out = Vec::new();
            for file in chain.iter() {
                if only.as_ref().is_some_and(|o| !file.contains(o.as_str())) {
                    continue;
                }
                let t = Instant::now();
                let r = run_example(lab, file).await;
                eprintln!(
                    "[examples] {file}: {} ({:.0}s)",
                    match &r {
                        Ok(s) => format!("ok: {s}"),
                        Err(e) => format!("FAILED: {e}"),
                    },
                    t.elapsed().as_secs_f64()
                );
                out.push((file.to_string(), r, t.elapsed()));
                clean(lab, file).await;
            }
            out
        }
    });
    let results: Vec<_> = futures::future::join_all(chains)
        .await
        .into_iter()
        .flatten()
        .collect();
    let failed: Vec<&(String, Result<String, String>, Duration)> =
        results.iter().filter(|r| r.1.is_err()).collect();
    eprintln!(
        "[examples] {} examples in {:.0}s, {} failed",
        results.len(),
        started.elapsed().as_secs_f64(),
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "examples that did not reach their result: {failed:#?}"
    );
}
