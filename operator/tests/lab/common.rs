//! Shared helpers for tests against the lab that `make test` starts (VALTUNE_LAB_DIR).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::Value;
use valtune_lab::LabState;

pub struct Lab {
    #[allow(dead_code)] // not every test needs the lab's endpoints
    pub state: LabState,
    pub client: Client,
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Attaches to the running lab and makes sure the CRDs in crds/ are installed.
pub async fn lab() -> Lab {
    valtune_lab::init_crypto();
    let dir = std::env::var("VALTUNE_LAB_DIR")
        .expect("VALTUNE_LAB_DIR is not set: these tests need the lab; run them with `make test`");
    let state = LabState::load(Path::new(&dir)).expect("loading the lab's state");
    assert!(state.all_running(), "the lab in {dir} is not running");
    let client = state.client().await.expect("a client for the lab");
    valtune_lab::control_plane::install_crds(&client, &repo_root().join("crds"))
        .await
        .expect("installing crds/");
    Lab { state, client }
}

impl Lab {
    /// A fresh namespace for one test.
    pub async fn namespace(&self, prefix: &str) -> String {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let mut ns: Namespace = Default::default();
        ns.metadata.generate_name = Some(format!("t-{prefix}-"));
        let created = api.create(&PostParams::default(), &ns).await.unwrap();
        created.metadata.name.unwrap()
    }

    pub async fn delete_namespace(&self, name: &str) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
}

/// A YAML file of the repository as JSON.
pub fn yaml_file(path: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join(path)).unwrap();
    serde_norway::from_str(&text).unwrap()
}

/// RFC 7386 JSON merge patch: objects merge, null deletes, anything else replaces.
pub fn merge(base: &Value, patch: &Value) -> Value {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            let mut out = b.clone();
            for (k, v) in p {
                if v.is_null() {
                    out.remove(k);
                } else {
                    let merged = merge(b.get(k).unwrap_or(&Value::Null), v);
                    out.insert(k.clone(), merged);
                }
            }
            Value::Object(out)
        }
        (_, p) => p.clone(),
    }
}
