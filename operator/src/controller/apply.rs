//! The one applier of rendered objects ([`Rendered`]), for the trial's attempts and the
//! Validator's pod alike: claims and generated Secrets created once (an existing one is
//! kept: a Secret shared by running pods stays what they read, a claim keeps its data),
//! ConfigMaps applied (server-side apply, one field manager), then the pod, applied or
//! created.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use crate::api::FIELD_MANAGER;
use crate::clients::Rendered;

/// How the pod is written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PodWrite {
    /// Server-side apply (a trial's attempt: its name is the attempt's).
    Apply,
    /// Created, never applied over (a Validator's: the name is the guard against a
    /// second pod, and a create fails while any pod of that name exists, terminating or
    /// not).
    Create,
}

/// What the applier did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Applied {
    /// The pod was created or applied.
    Pod,
    /// A pod of that name exists ([`PodWrite::Create`]): it is kept.
    PodKept,
}

/// Why an object was not written: the API server's error, or no random bytes for a
/// generated Secret. `what` names the object, as "applying ConfigMap ns/name".
#[derive(Debug)]
pub enum Refused {
    Api {
        what: String,
        source: kube::Error,
    },
    Random {
        what: String,
        source: std::io::Error,
    },
}

/// Where the applier writes, and how.
pub struct Applier<'a> {
    pub client: &'a Client,
    pub namespace: &'a str,
    pub pod: PodWrite,
    /// Generated Secrets are created once per operator process, not on each call (each
    /// create is an API write): later attempts of a trial, or another trial sharing one,
    /// skip it.
    pub secrets_once: bool,
}

impl Applier<'_> {
    /// Writes `r`: claims, generated Secrets, ConfigMaps, then the pod. Stops at the
    /// first refusal. A generated Secret's random bytes come from the kernel.
    pub async fn apply(&self, r: &Rendered) -> Result<Applied, Refused> {
        let ns = self.namespace;
        let pp = PostParams::default();
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
        for c in &r.claims {
            created(claims.create(&pp, c).await, || {
                format!("creating claim {ns}/{}", c.name_any())
            })?;
        }
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        for g in &r.secrets {
            let name = g.metadata.name.clone().unwrap_or_default();
            let owner = g
                .metadata
                .owner_references
                .iter()
                .flatten()
                .map(|o| o.uid.clone())
                .next()
                .unwrap_or_default();
            let key = format!("{ns}/{name}/{owner}");
            if self.secrets_once && ENSURED_SECRETS.lock().is_ok_and(|s| s.contains(&key)) {
                continue;
            }
            let what = || format!("creating Secret {ns}/{name}");
            let random = random_bytes(g.bytes).map_err(|source| Refused::Random {
                what: what(),
                source,
            })?;
            created(secrets.create(&pp, &g.secret(&random)).await, what)?;
            if self.secrets_once
                && let Ok(mut s) = ENSURED_SECRETS.lock()
            {
                s.insert(key);
            }
        }
        let apply = PatchParams::apply(FIELD_MANAGER).force();
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), ns);
        for cm in &r.config_maps {
            let name = cm.name_any();
            cms.patch(&name, &apply, &Patch::Apply(cm))
                .await
                .map_err(|source| Refused::Api {
                    what: format!("applying ConfigMap {ns}/{name}"),
                    source,
                })?;
        }
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let name = r.pod.name_any();
        match self.pod {
            PodWrite::Apply => pods
                .patch(&name, &apply, &Patch::Apply(&r.pod))
                .await
                .map(|_| Applied::Pod)
                .map_err(|source| Refused::Api {
                    what: format!("applying pod {ns}/{name}"),
                    source,
                }),
            PodWrite::Create => match pods.create(&pp, &r.pod).await {
                Ok(_) => Ok(Applied::Pod),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Applied::PodKept),
                Err(source) => Err(Refused::Api {
                    what: format!("creating pod {ns}/{name}"),
                    source,
                }),
            },
        }
    }
}

/// A create's result: an object that exists already is kept.
fn created<T>(r: kube::Result<T>, what: impl FnOnce() -> String) -> Result<(), Refused> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(source) => Err(Refused::Api {
            what: what(),
            source,
        }),
    }
}

/// Generated Secrets this process created or found (namespace/name/owner uid).
static ENSURED_SECRETS: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Default::default);

/// Random bytes from the kernel's CSPRNG.
pub(crate) fn random_bytes(n: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}
