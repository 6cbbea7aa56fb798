//! A pod's ServiceAccount token, projected as the kubelet projects it into every pod
//! (the kube-api-access volume): a TokenRequest for the pod's ServiceAccount, bound to the
//! pod, of the lifetime the ServiceAccount admission plugin gives that volume (3607 s),
//! rewritten once 80% of it has passed (kubernetes v1.34.2
//! pkg/kubelet/token/token_manager.go, requiresRefresh). Instead of the
//! in-cluster files at /var/run/secrets/kubernetes.io/serviceaccount, which a process
//! outside a container cannot be given, the process gets a kubeconfig naming the token
//! file (re-read by client libraries, as the in-cluster config is) and the lab's CA.
//! With automountServiceAccountToken false (on the pod, else on the ServiceAccount) it
//! gets no token, as a pod gets none.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use jiff::Timestamp;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use tracing::warn;

use crate::state::LabState;

/// The kube-api-access projection's expirationSeconds (kubernetes v1.34.2
/// plugin/pkg/admission/serviceaccount/admission.go L493,
/// pkg/serviceaccount/claims.go WarnOnlyBoundTokenExpirationSeconds = 60*60 + 7).
const TOKEN_SECONDS: i64 = 3607;

pub struct Projected {
    pub namespace: String,
    pub service_account: String,
    pod: String,
    pod_uid: String,
    /// None when the pod gets no token.
    pub token_file: Option<PathBuf>,
    pub kubeconfig: PathBuf,
    /// When the current token was issued and expires.
    issued: std::sync::Mutex<(Timestamp, Timestamp)>,
}

impl Projected {
    /// Requests the first token and writes the token file and kubeconfig under `dir`.
    pub async fn new(
        client: &Client,
        state: &LabState,
        pod: &Pod,
        dir: &Path,
    ) -> anyhow::Result<Projected> {
        let namespace = pod.namespace().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        let service_account = spec
            .service_account_name
            .clone()
            .unwrap_or_else(|| "default".into());
        let sa_api: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
        let sa = sa_api
            .get_opt(&service_account)
            .await?
            .with_context(|| format!("service account {namespace}/{service_account} not found"))?;
        let automount = spec
            .automount_service_account_token
            .or(sa.automount_service_account_token)
            .unwrap_or(true);
        let secrets = dir.join("serviceaccount");
        std::fs::create_dir_all(&secrets)?;
        let ca = secrets.join("ca.crt");
        std::fs::copy(state.dir.join("pki").join("apiserver.crt"), &ca)
            .context("copying the lab's CA")?;
        std::fs::write(secrets.join("namespace"), &namespace)?;
        let projected = Projected {
            namespace: namespace.clone(),
            service_account: service_account.clone(),
            pod: pod.name_any(),
            pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
            token_file: automount.then(|| secrets.join("token")),
            kubeconfig: dir.join("kubeconfig"),
            issued: std::sync::Mutex::new((Timestamp::now(), Timestamp::now())),
        };
        if automount {
            projected.refresh(client).await?;
        }
        let mut user = serde_json::json!({});
        if let Some(f) = &projected.token_file {
            user["tokenFile"] = serde_json::json!(f);
        }
        let kubeconfig = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": state.name, "cluster": {
                "server": state.apiserver_url,
                "certificate-authority": ca,
            }}],
            "users": [{"name": service_account, "user": user}],
            "contexts": [{"name": "pod", "context": {
                "cluster": state.name,
                "user": service_account,
                "namespace": namespace,
            }}],
            "current-context": "pod",
        });
        std::fs::write(&projected.kubeconfig, serde_saphyr::to_string(&kubeconfig)?)?;
        Ok(projected)
    }

    /// Asks the API server for a token bound to the pod and writes it (atomically).
    async fn refresh(&self, client: &Client) -> anyhow::Result<()> {
        let Some(file) = &self.token_file else {
            return Ok(());
        };
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &self.namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                // Empty: the API server's own audience, as the kubelet asks.
                audiences: Vec::new(),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(self.pod.clone()),
                    uid: Some(self.pod_uid.clone()),
                }),
                expiration_seconds: Some(TOKEN_SECONDS),
            },
            ..Default::default()
        };
        let issued = api
            .create_token_request(&self.service_account, &PostParams::default(), &request)
            .await
            .with_context(|| {
                format!(
                    "TokenRequest for service account {}/{}",
                    self.namespace, self.service_account
                )
            })?;
        let status = issued.status.context("a TokenRequest without status")?;
        let tmp = file.with_extension("tmp");
        std::fs::write(&tmp, &status.token)?;
        std::fs::rename(&tmp, file)?;
        *self.issued.lock().expect("lock") = (Timestamp::now(), status.expiration_timestamp.0);
        Ok(())
    }

    /// Rewrites the token once 80% of its life has passed, until aborted.
    pub async fn keep_fresh(self: std::sync::Arc<Self>, client: Client) {
        if self.token_file.is_none() {
            return;
        }
        loop {
            let (issued, expires) = *self.issued.lock().expect("lock");
            let life = expires.duration_since(issued);
            let at = issued + life * 4 / 5;
            let wait = Duration::try_from(at.duration_since(Timestamp::now()))
                .unwrap_or_default()
                .max(Duration::from_secs(1));
            tokio::time::sleep(wait).await;
            if let Err(e) = self.refresh(&client).await {
                warn!(pod = %self.pod, error = %e, "refreshing the service account token");
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
        }
    }
}
