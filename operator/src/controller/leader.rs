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

/// How long a leader keeps trying to renew before it gives up: two thirds of the lease,
/// client-go's default ratio (renewDeadline 10 s of leaseDuration 15 s,
/// tools/leaderelection/leaderelection.go), so a leader that cannot renew stops with a
/// third of the lease left, before any other replica may see it expired.
pub fn renew_deadline(lease: Duration) -> Duration {
    lease * 2 / 3
}

/// How often a leader renews: client-go's retryPeriod, 2 s of a 15 s lease.
pub fn retry_period(lease: Duration) -> Duration {
    lease * 2 / 15
}

/// The renewal loop of [`LeaderElection::hold`], over any renewal: each try is cut off at
/// what is left of the renew deadline (a request that hangs does not hold the leader past
/// it), and time counts from before the try that succeeded (its renewTime is stamped
/// after that instant).
async fn hold_with<F, Fut>(lease: Duration, mut renew: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = kube::Result<Attempt>>,
{
    let deadline = renew_deadline(lease);
    let mut renewed = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(retry_period(lease)).await;
        let left = deadline.saturating_sub(renewed.elapsed());
        let sent = tokio::time::Instant::now();
        match tokio::time::timeout(left, renew()).await {
            Ok(Ok(Attempt::Acquired)) => renewed = sent,
            Ok(Ok(Attempt::HeldBy(holder))) => {
                tracing::error!(%holder, "lost the leader lease");
                return;
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "renewing the leader lease"),
            Err(_) => tracing::warn!("renewing the leader lease: no answer in time"),
        }
        if renewed.elapsed() >= deadline {
            tracing::error!(
                deadline = ?deadline,
                "could not renew the leader lease within its renew deadline"
            );
            return;
        }
    }
}

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

    /// Renews the lease until it cannot; returns when leadership is lost: held by another,
    /// or not renewed within the renew deadline ([`renew_deadline`]), so the process stops
    /// while the lease it last renewed still runs and no other replica can have taken it.
    pub async fn hold(&self) {
        hold_with(self.duration, || self.try_acquire()).await
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

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    /// How long `hold_with` holds on with renewals that each take `each` and then give
    /// `answer` (None: never answer), within 20 leases.
    async fn held_for(answer: Option<bool>, each: Duration) -> Option<Duration> {
        let start = tokio::time::Instant::now();
        let renew = || async move {
            match answer {
                None => std::future::pending().await,
                Some(ok) => {
                    tokio::time::sleep(each).await;
                    if ok {
                        Ok(Attempt::Acquired)
                    } else {
                        Err(kube::Error::Service("the API server is down".into()))
                    }
                }
            }
        };
        tokio::time::timeout(LEASE * 20, hold_with(LEASE, renew))
            .await
            .ok()
            .map(|()| start.elapsed())
    }

    /// A leader whose renewals hang or fail stops within the renew deadline (10 s of a
    /// 15 s lease), before the lease it last renewed runs out; one that renews holds on.
    /// (Before, a hanging renewal held it forever, and failing ones until the lease had
    /// run out, when another replica may already lead.)
    #[tokio::test(start_paused = true)]
    async fn a_leader_that_cannot_renew_stops_before_its_lease_runs_out() {
        let deadline = renew_deadline(LEASE);
        assert_eq!(deadline, Duration::from_secs(10));
        for (what, answer, each) in [
            ("hanging", None, Duration::ZERO),
            ("failing at once", Some(false), Duration::ZERO),
            ("failing slowly", Some(false), Duration::from_secs(4)),
        ] {
            let held = held_for(answer, each).await.expect(what);
            assert!(
                held <= deadline && held + retry_period(LEASE) > deadline,
                "{what}: held {held:?}"
            );
            assert!(held < LEASE, "{what}");
        }
        assert_eq!(held_for(Some(true), Duration::from_secs(1)).await, None);
    }
}
