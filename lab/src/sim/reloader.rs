//! prometheus-operator renders the lab's `Prometheus` resource into a Secret (gzipped
//! config) and rule ConfigMaps, for a config-reloader sidecar to hand to Prometheus. The
//! lab runs Prometheus as a process, so this plays that sidecar: it substitutes the
//! sidecar's variables, points the Kubernetes service discovery at the lab's API server
//! (the rendered config assumes in-cluster credentials), writes the rule files, and
//! asks Prometheus to reload.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::prometheus::{Instance, NAME, NAMESPACE};
use crate::state::LabState;

/// Rewrites the operator's config of `prometheus` for its process on this machine. Pure.
pub fn rewrite(
    rendered: &str,
    state: &LabState,
    prometheus: &Instance,
    token_file: &Path,
) -> anyhow::Result<String> {
    let text = rendered
        .replace("$(SHARD)", "0")
        .replace("$(POD_NAME)", &format!("prometheus-{}-0", prometheus.name));
    let mut config: Value = serde_saphyr::from_str(&text).context("parsing the rendered config")?;
    regexes_as_strings(&mut config);
    let ca = state.dir.join("pki").join("apiserver.crt");
    if let Some(jobs) = config
        .get_mut("scrape_configs")
        .and_then(Value::as_array_mut)
    {
        for job in jobs.iter_mut() {
            if let Some(sds) = job
                .get_mut("kubernetes_sd_configs")
                .and_then(Value::as_array_mut)
            {
                for sd in sds.iter_mut() {
                    sd["api_server"] = json!(state.apiserver_url);
                    sd["authorization"] = json!({"type": "Bearer", "credentials_file": token_file});
                    sd["tls_config"] = json!({"ca_file": ca});
                }
            }
        }
        let self_target = prometheus.url.trim_start_matches("http://");
        jobs.push(
            json!({"job_name": "prometheus", "static_configs": [{"targets": [self_target]}]}),
        );
    }
    if let Some(files) = config.get_mut("rule_files").and_then(Value::as_array_mut) {
        let rules = state.dir.join("rules");
        for f in files.iter_mut() {
            if let Some(s) = f.as_str() {
                *f = json!(s.replace("/etc/prometheus/rules", &rules.display().to_string()));
            }
        }
    }
    Ok(format!(
        "# Rendered by prometheus-operator from the cluster's PodMonitors, ServiceMonitors and\n# PrometheusRules; adapted by valtune-lab for a Prometheus outside the cluster.\n{}",
        serde_saphyr::to_string(&config)?
    ))
}

/// `regex: $(SHARD)` became `regex: 0`, which YAML reads as a number; keep regexes text.
fn regexes_as_strings(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if k == "regex" && v.is_number() {
                    *v = json!(v.to_string());
                } else {
                    regexes_as_strings(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(regexes_as_strings),
        _ => {}
    }
}

fn gunzip(data: &[u8]) -> anyhow::Result<String> {
    let mut out = String::new();
    flate2::read::GzDecoder::new(data).read_to_string(&mut out)?;
    Ok(out)
}

async fn reload(url: &str) {
    let url = format!("{url}/-/reload");
    match reqwest::Client::new().post(&url).send().await {
        Ok(r) if r.status().is_success() => info!("Prometheus reloaded its configuration"),
        Ok(r) => warn!(status = %r.status(), "Prometheus refused the new configuration"),
        Err(e) => warn!(error = %e, "reloading Prometheus"),
    }
}

pub async fn run(client: Client, state: LabState) -> anyhow::Result<()> {
    let token_file = state.dir.join("prometheus-token");
    let token = kubeconfig_token(&state.kubeconfig)?;
    std::fs::write(&token_file, token)?;
    let configs = Instance::all(&state)
        .into_iter()
        .map(|p| watch_config(client.clone(), &state, p, &token_file));
    tokio::try_join!(
        futures::future::try_join_all(configs),
        watch_rules(client, &state)
    )?;
    Ok(())
}

fn kubeconfig_token(path: &Path) -> anyhow::Result<String> {
    let kc = kube::config::Kubeconfig::read_from(path)?;
    kc.auth_infos
        .iter()
        .find_map(|a| a.auth_info.as_ref()?.token.as_ref())
        .map(|t| secrecy::ExposeSecret::expose_secret(t).to_string())
        .context("the lab kubeconfig has no token")
}

async fn watch_config(
    client: Client,
    state: &LabState,
    prometheus: Instance,
    token_file: &Path,
) -> anyhow::Result<()> {
    let api: Api<Secret> = Api::namespaced(client, NAMESPACE);
    let cfg =
        watcher::Config::default().fields(&format!("metadata.name=prometheus-{}", prometheus.name));
    let mut stream = watcher(api, cfg).applied_objects().boxed();
    let mut last = String::new();
    while let Some(secret) = stream.next().await {
        let secret = match secret {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "watching the Prometheus config secret");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let Some(data) = secret
            .data
            .as_ref()
            .and_then(|d| d.get("prometheus.yaml.gz"))
        else {
            continue;
        };
        let config = match gunzip(&data.0).and_then(|c| rewrite(&c, state, &prometheus, token_file))
        {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %e, "the rendered Prometheus config");
                continue;
            }
        };
        if config != last {
            let tmp = prometheus.config.with_extension("yml.tmp");
            std::fs::write(&tmp, &config)?;
            std::fs::rename(&tmp, &prometheus.config)?;
            reload(&prometheus.url).await;
            last = config;
        }
    }
    Ok(())
}

async fn watch_rules(client: Client, state: &LabState) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let mut stream = watcher(api, watcher::Config::default())
        .applied_objects()
        .boxed();
    while let Some(cm) = stream.next().await {
        let Ok(cm) = cm else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let name = cm.name_any();
        if !name.starts_with(&format!("prometheus-{NAME}-rulefiles-")) {
            continue;
        }
        let dir = state.dir.join("rules").join(&name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        for (file, content) in cm.data.clone().unwrap_or_default() {
            std::fs::write(dir.join(file), content)?;
        }
        reload(&state.prometheus_url).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn points_discovery_at_the_lab_and_fills_in_the_sidecar_variables() {
        let state = LabState {
            name: "lab-1-2".into(),
            dir: PathBuf::from("/lab"),
            kubeconfig: PathBuf::from("/lab/kubeconfig"),
            apiserver_url: "https://127.0.0.1:6443".into(),
            prometheus_url: "http://127.0.0.1:9090".into(),
            prometheus_config: PathBuf::from("/lab/prometheus.yml"),
            prometheus_no_receiver_url: String::new(),
            prometheus_outage_url: String::new(),
            pod_cidr: "127.1.2.0/24".into(),
            pod_network_lock: PathBuf::new(),
            time_scale: 720.0,
            scrape_interval: "1s".into(),
            topology: PathBuf::new(),
            tools: PathBuf::new(),
            valtune: PathBuf::new(),
            processes: vec![],
            ready: true,
        };
        let rendered = "global:\n  external_labels:\n    prometheus_replica: $(POD_NAME)\nrule_files:\n- /etc/prometheus/rules/prometheus-lab-rulefiles-0/*.yaml\nscrape_configs:\n- job_name: podMonitor/ns/vx/0\n  kubernetes_sd_configs:\n  - role: pod\n    namespaces:\n      names: [ns]\n  relabel_configs:\n  - source_labels: [__tmp_hash]\n    regex: $(SHARD)\n    action: keep\n";
        let out = rewrite(
            rendered,
            &state,
            &Instance::all(&state)[0],
            Path::new("/lab/token"),
        )
        .unwrap();
        let v: Value = serde_saphyr::from_str(&out).unwrap();
        let sd = &v["scrape_configs"][0]["kubernetes_sd_configs"][0];
        assert_eq!(sd["api_server"], "https://127.0.0.1:6443");
        assert_eq!(sd["authorization"]["credentials_file"], "/lab/token");
        assert_eq!(sd["tls_config"]["ca_file"], "/lab/pki/apiserver.crt");
        assert_eq!(v["scrape_configs"][0]["relabel_configs"][0]["regex"], "0");
        assert_eq!(
            v["global"]["external_labels"]["prometheus_replica"],
            "prometheus-lab-0"
        );
        assert_eq!(
            v["rule_files"][0],
            "/lab/rules/prometheus-lab-rulefiles-0/*.yaml"
        );
        assert_eq!(v["scrape_configs"][1]["job_name"], "prometheus");
    }
}
