//! Every YAML file under manifests/ passes a server-side dry run: the API server (with
//! the CRDs and their rules) accepts what the docs tell users to apply.

use std::path::{Path, PathBuf};

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::{Discovery, Scope};

use crate::common::{lab, repo_root};

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn every_manifest_passes_a_server_side_dry_run() {
    let lab = lab().await;
    let ns = lab.namespace("manifests").await;
    let discovery = Discovery::new(lab.client.clone()).run().await.unwrap();
    let mut files = Vec::new();
    yaml_files(&repo_root().join("manifests"), &mut files);
    assert!(!files.is_empty(), "manifests/ has no YAML files");
    let mut failures = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for doc in serde_saphyr::from_multiple::<serde_json::Value>(&text).unwrap() {
            if doc.is_null() {
                continue;
            }
            // A patch file (`kubectl patch --patch-file`, as manifests/gitops' argocd-cm
            // one) is no object of its own.
            if doc.get("apiVersion").is_none() {
                checked += 1;
                continue;
            }
            let mut obj: DynamicObject = serde_json::from_value(doc).unwrap();
            // Into the test's namespace, whatever a rendered manifest names (users
            // create manifests/install's valtune-system first).
            obj.metadata.namespace = None;
            let types = obj.types.clone().expect("apiVersion and kind");
            let gvk = kube::api::GroupVersionKind::try_from(&types).unwrap();
            // Argo CD's kinds are served in the GitOps lab only, where make test-gitops
            // syncs these very files (operator/tests/lab/gitops.rs).
            if gvk.group == "argoproj.io" {
                checked += 1;
                continue;
            }
            let Some((ar, caps)) = discovery.resolve_gvk(&gvk) else {
                failures.push(format!("{}: {gvk:?} is not served", file.display()));
                continue;
            };
            let api: Api<DynamicObject> = match caps.scope {
                Scope::Namespaced => Api::namespaced_with(lab.client.clone(), &ns, &ar),
                Scope::Cluster => Api::all_with(lab.client.clone(), &ar),
            };
            let pp = PatchParams::apply("manifest-test").dry_run();
            let name = obj.metadata.name.clone().unwrap_or_default();
            if let Err(e) = api.patch(&name, &pp, &Patch::Apply(&obj)).await {
                failures.push(format!("{} ({} {name}): {e}", file.display(), types.kind));
            }
            checked += 1;
        }
    }
    lab.delete_namespace(&ns).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= files.len());
}
