//! The chart's rendered objects (with every values file in charts/valtune/ci/), the
//! install manifest and the examples, validated by kubeconform v0.8.0 against the lab
//! API server's own schemas: its OpenAPI v3 for every group-version they use (built-in
//! kinds, prometheus-operator's and valtune's CRDs), made strict as kubeconform's
//! `-strict` schemas are (no field a schema does not name), written as kubeconform's
//! default file names (`<kind><-group><-version>.json`). kubeconform cannot download
//! schemas here; the lab serves the ones of the Kubernetes version valtune targets.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::{Lab, lab, repo_root};
use crate::helm::{chart, helm, unique};

/// kubeconform's file name for a kind (pkg/registry/registry.go at v0.8.0: the kind
/// lower-cased, then `-<first label of the group>` and `-<version>`).
fn schema_file(api_version: &str, kind: &str) -> String {
    let suffix = match api_version.split_once('/') {
        Some((group, version)) => {
            format!("-{}-{version}", group.split('.').next().unwrap_or(group))
        }
        None => format!("-{api_version}"),
    };
    format!("{}{suffix}.json", kind.to_lowercase()).to_lowercase()
}

/// Every object schema that names its properties refuses others (as openapi2jsonschema's
/// --strict does), unless it keeps unknown fields on purpose.
fn strict(v: &mut Value) {
    match v {
        Value::Object(map) => {
            let names_fields = map.get("properties").is_some_and(Value::is_object);
            let open = map.contains_key("additionalProperties")
                || map.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
            if names_fields && !open {
                map.insert("additionalProperties".into(), json!(false));
            }
            map.values_mut().for_each(strict);
        }
        Value::Array(items) => items.iter_mut().for_each(strict),
        _ => {}
    }
}

/// The schemas `root` refers to, directly or not (and itself): a kind's file holds only
/// those, not its whole group-version's.
fn reachable(schemas: &Value, root: &str) -> serde_json::Map<String, Value> {
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(r) = map.get("$ref").and_then(Value::as_str)
                    && let Some(name) = r.strip_prefix("#/components/schemas/")
                {
                    out.push(name.to_string());
                }
                map.values().for_each(|v| refs(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut found = serde_json::Map::new();
    let mut todo = vec![root.to_string()];
    while let Some(name) = todo.pop() {
        if found.contains_key(&name) {
            continue;
        }
        let schema = schemas[&name].clone();
        refs(&schema, &mut todo);
        found.insert(name, schema);
    }
    found
}

/// The API server's answer as JSON, or why not.
async fn get_json(lab: &Lab, path: &str) -> Result<Value, String> {
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    let text = lab
        .client
        .request_text(req)
        .await
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{e}: {:?}", text.chars().take(200).collect::<String>()))
}

/// The OpenAPI v3 document of one group version (`apis/G/V` or `api/V`). While another
/// test changes a CRD the server rebuilds its OpenAPI: the document may answer with an
/// empty body for a moment, and the hash in its URL changes for good (the old one then
/// answers nothing), so each try reads the index again.
async fn openapi_doc(lab: &Lab, key: &str) -> Value {
    let mut last = String::new();
    for _ in 0..20 {
        let doc = match get_json(lab, "/openapi/v3").await {
            Ok(index) => match index["paths"][key]["serverRelativeURL"].as_str() {
                Some(url) => get_json(lab, url).await,
                None => panic!("the lab serves no OpenAPI for {key}"),
            },
            Err(e) => Err(e),
        };
        match doc {
            Ok(v) => return v,
            Err(e) => last = e,
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    panic!("GET the OpenAPI of {key}: {last}")
}

/// Writes a schema file for every (apiVersion, kind), from the lab's OpenAPI v3.
async fn write_schemas(lab: &Lab, kinds: &BTreeSet<(String, String)>, dir: &Path) {
    let versions: BTreeSet<&String> = kinds.iter().map(|(v, _)| v).collect();
    for api_version in versions {
        let key = if api_version.contains('/') {
            format!("apis/{api_version}")
        } else {
            format!("api/{api_version}")
        };
        let mut doc = openapi_doc(lab, &key).await;
        strict(&mut doc["components"]);
        let components = doc["components"].clone();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        for (name, schema) in components["schemas"].as_object().unwrap() {
            for gvk in schema["x-kubernetes-group-version-kind"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let kind = gvk["kind"].as_str().unwrap_or("");
                if gvk["group"] == group
                    && gvk["version"] == version
                    && kinds.contains(&(api_version.clone(), kind.to_string()))
                {
                    let file = json!({
                        "$ref": format!("#/components/schemas/{name}"),
                        "components": {"schemas": reachable(&components["schemas"], name)},
                    });
                    std::fs::write(
                        dir.join(schema_file(api_version, kind)),
                        serde_json::to_string(&file).unwrap(),
                    )
                    .unwrap();
                }
            }
        }
    }
}

fn kubeconform(lab: &Lab, schemas: &Path, files: &[PathBuf]) -> (bool, String) {
    let location = format!(
        "{}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}.json",
        schemas.display()
    );
    let out = std::process::Command::new(lab.state.tools.join("kubeconform"))
        .args([
            "-strict",
            "-summary",
            "-output",
            "json",
            "-schema-location",
            &location,
        ])
        .args(files)
        .output()
        .expect("running kubeconform (make tools)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_charts_objects_and_the_manifests_validate_against_the_lab_apiservers_schemas() {
    let lab = lab().await;
    let dir = repo_root().join(format!("target/test-logs/kubeconform-{}", unique()));
    let schemas = dir.join("schemas");
    std::fs::create_dir_all(&schemas).unwrap();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(chart().join("ci")).unwrap() {
        let values = entry.unwrap().path();
        let name = values.file_stem().unwrap().to_string_lossy().to_string();
        let rendered = helm(
            &lab,
            &[
                "template",
                "valtune",
                &chart().display().to_string(),
                "--namespace",
                "valtune-system",
                "--kube-version",
                "1.34.2",
                "-f",
                &values.display().to_string(),
            ],
        );
        let file = dir.join(format!("{name}.yaml"));
        std::fs::write(&file, rendered).unwrap();
        files.push(file);
    }
    files.push(repo_root().join("manifests/install/valtune.yaml"));
    for entry in std::fs::read_dir(repo_root().join("manifests/examples")).unwrap() {
        files.push(entry.unwrap().path());
    }
    let mut kinds = BTreeSet::new();
    for f in &files {
        for doc in
            serde_saphyr::from_multiple::<Value>(&std::fs::read_to_string(f).unwrap()).unwrap()
        {
            if let (Some(v), Some(k)) = (doc["apiVersion"].as_str(), doc["kind"].as_str()) {
                kinds.insert((v.to_string(), k.to_string()));
            }
        }
    }
    for expected in [
        "Deployment",
        "ClusterRole",
        "CustomResourceDefinition",
        "ServiceMonitor",
        "PrometheusRule",
        "ValidatorExperiment",
    ] {
        assert!(
            kinds.iter().any(|(_, k)| k == expected),
            "no {expected} among {kinds:?}"
        );
    }
    write_schemas(&lab, &kinds, &schemas).await;

    let (ok, out) = kubeconform(&lab, &schemas, &files);
    assert!(ok, "kubeconform refused:\n{out}");
    let report: Value = serde_json::from_str(&out[..out.rfind('}').map_or(out.len(), |i| i + 1)])
        .unwrap_or_else(|e| panic!("kubeconform's report: {e}\n{out}"));
    let summary = &report["summary"];
    assert!(summary["valid"].as_u64().unwrap_or(0) >= 30, "{summary}");
    for k in ["invalid", "errors", "skipped"] {
        assert_eq!(summary[k], 0, "{k}: {out}");
    }

    // A field no schema names is refused: the schemas are strict.
    let typo = dir.join("typo.yaml");
    let default = std::fs::read_to_string(dir.join("default-values.yaml")).unwrap();
    std::fs::write(
        &typo,
        default.replace("imagePullPolicy:", "imagePullPolcy:"),
    )
    .unwrap();
    let (ok, out) = kubeconform(&lab, &schemas, &[typo]);
    assert!(
        !ok && out.contains("imagePullPolcy"),
        "a misspelt field passed:\n{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
