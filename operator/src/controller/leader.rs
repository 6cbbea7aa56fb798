//! Leader election on a coordination.k8s.io Lease, so that only one replica reconciles.
//! A replica acquires the lease when it is free or expired, renews it, and gives up (the
//! process exits) if it cannot renew in time; on a clean shutdown it releases it.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};
use tracing::info;

pub struct LeaderElection {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
}

enum Attempt {
    Acquired,
    HeldBy(String),
}

impl LeaderElection {
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.into(),
            identity: identity.into(),
            duration,
        }
    }

    fn spec(&self, transitions: i32, acquired: Option<MicroTime>) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.duration.as_secs().max(1) as i32),
            acquire_time: Some(acquired.unwrap_or(now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// One try: take the lease if it is ours, free, or expired. Updates carry the
    /// resourceVersion read, so two replicas racing for it cannot both win.
    async fn try_acquire(&self) -> kube::Result<Attempt> {
        let Some(lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(self.spec(0, None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Acquired),
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    Ok(Attempt::HeldBy("another replica".into()))
                }
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let ours = holder == self.identity;
        let expired = match (&spec.renew_time, spec.lease_duration_seconds) {
            (Some(t), Some(d)) => {
                t.0 + jiff::SignedDuration::from_secs(d as i64) < Timestamp::now()
            }
            _ => true,
        };
        if !ours && !holder.is_empty() && !expired {
            return Ok(Attempt::HeldBy(holder));
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + if ours { 0 } else { 1 };
        let acquired = if ours {
            spec.acquire_time.clone()
        } else {
            None
        };
        let mut updated = lease.clone();
        updated.spec = Some(self.spec(transitions, acquired));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => Ok(Attempt::Acquired),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                Ok(Attempt::HeldBy("another replica".into()))
            }
            Err(e) => Err(e),
        }
    }

    /// Waits until this replica holds the lease.
    pub async fn acquire(&self) -> anyhow::Result<()> {
        let mut logged = String::new();
        loop {
            match self.try_acquire().await {
                Ok(Attempt::Acquired) => {
                    info!(lease = %self.name, identity = %self.identity, "acquired the leader lease");
                    return Ok(());
                }
                Ok(Attempt::HeldBy(holder)) => {
                    if holder != logged {
                        info!(lease = %self.name, %holder, "waiting for the leader lease");
                        logged = holder;
                    }
                }
                Err(e) => tracing::warn!(error = %e, "leader election"),
            }
            tokio::time::sleep(self.duration / 5).await;
        }
    }

    /// Renews the lease until it cannot; returns when leadership is lost.
    pub async fn hold(&self) {
        let mut last_renewal = std::time::Instant::now();
        loop {
            tokio::time::sleep(self.duration / 3).await;
            match self.try_acquire().await {
                Ok(Attempt::Acquired) => last_renewal = std::time::Instant::now(),
                Ok(Attempt::HeldBy(holder)) => {
                    tracing::error!(%holder, "lost the leader lease");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "renewing the leader lease");
                    if last_renewal.elapsed() > self.duration {
                        tracing::error!("could not renew the leader lease in time");
                        return;
                    }
                }
            }
        }
    }

    /// Gives the lease up so a successor need not wait for it to expire.
    pub async fn release(&self) {
        if let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await
            && lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                == Some(&self.identity)
        {
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = None;
                spec.renew_time = None;
            }
            let name = lease.name_any();
            let _ = self
                .api
                .replace(&name, &PostParams::default(), &lease)
                .await;
            info!(lease = %self.name, "released the leader lease");
        }
    }
}
