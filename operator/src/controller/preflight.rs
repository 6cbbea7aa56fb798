//! Before an experiment starts trials: can its Prometheus receive what its client sends?
//! A client whose datapoints arrive by remote write (Agave, Besu, Frankendancer
//! followers: their profiles' `remote_written`) measures nothing against a Prometheus
//! without the remote-write receiver, so such an experiment waits, with condition
//! MetricsPipelineReady=False saying what to turn on, rather than run trials blind. Only
//! a receiver known to be off holds trials back; an unreachable Prometheus is the trials'
//! own business (they wait out outages: docs/metrics.md).
//!
//! The probe is `valtune check`'s (readiness/prometheus.rs), answered from a cache so a
//! reconcile costs no request while an answer is fresh.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::Context;
use super::status::condition;
use crate::api::experiment::ValidatorExperiment;
use crate::readiness::prometheus::{Reach, Receiver, receiver};

/// How long a probe's answer is trusted.
const FRESH: Duration = Duration::from_secs(30);
/// How soon a waiting experiment looks again (so turning the receiver on is noticed).
pub const RECHECK: Duration = Duration::from_secs(15);

/// Probe answers by remote-write URL.
#[derive(Default)]
pub struct Cache(Mutex<HashMap<String, (Instant, Receiver)>>);

/// What the experiment's metrics pipeline looks like before it starts trials.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Start no trials (the receiver is off).
    pub wait: bool,
    pub condition: Condition,
}

/// Where the experiment's pods remote-write (as the pod skeleton computes it).
fn write_url(vx: &ValidatorExperiment, ctx: &Context) -> Option<String> {
    let m = &vx.spec.metrics;
    m.remote_write_url.clone().or_else(|| {
        m.prometheus_url
            .as_deref()
            .or(ctx.prometheus_url.as_deref())
            .map(|u| format!("{}/api/v1/write", u.trim_end_matches('/')))
    })
}

/// The experiment's MetricsPipelineReady condition, and whether to hold its trials back;
/// None when its client remote-writes nothing (or no Prometheus is configured: rendering
/// says so).
pub async fn check(ctx: &Context, vx: &ValidatorExperiment, now: Timestamp) -> Option<Verdict> {
    let client = crate::clients::client_for(&vx.spec.template).ok()?;
    if !client.profile(&vx.spec.template).needs_remote_write() {
        return None;
    }
    let url = write_url(vx, ctx)?;
    let cached = ctx
        .preflight
        .0
        .lock()
        .expect("preflight cache")
        .get(&url)
        .filter(|(at, _)| at.elapsed() < FRESH)
        .map(|(_, r)| r.clone());
    let answer = match cached {
        Some(r) => r,
        None => {
            let r = receiver(&Reach::direct(ctx.http.clone(), &url), "").await;
            ctx.preflight
                .0
                .lock()
                .expect("preflight cache")
                .insert(url.clone(), (Instant::now(), r.clone()));
            r
        }
    };
    Some(verdict(&answer, &url, vx, now))
}

/// The condition for a probe's answer. Pure.
pub fn verdict(answer: &Receiver, url: &str, vx: &ValidatorExperiment, now: Timestamp) -> Verdict {
    let prev = vx
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let g = vx.metadata.generation;
    let c = |ok: bool, reason: &str, message: String| {
        condition(&prev, TYPE, ok, reason, message, g, now)
    };
    match answer {
        Receiver::On => Verdict {
            wait: false,
            condition: c(
                true,
                "RemoteWriteReceiverOn",
                format!("{url} accepts remote writes"),
            ),
        },
        Receiver::Off(said) => Verdict {
            wait: true,
            condition: c(
                false,
                "RemoteWriteReceiverOff",
                format!(
                    "waiting to start trials: this client's datapoints are remote-written to {url}, which answered \"{said}\"; its trials would measure nothing. Turn the receiver on ({}), or point spec.metrics.remoteWriteUrl at one that accepts writes",
                    crate::readiness::prometheus::RECEIVER_FIX
                ),
            ),
        },
        Receiver::Unknown(why) => Verdict {
            wait: false,
            condition: c(
                true,
                "RemoteWriteReceiverUnknown",
                format!(
                    "could not ask {url} whether it accepts remote writes ({why}); the trials watch their own data"
                ),
            ),
        },
    }
}

/// The condition's type.
pub const TYPE: &str = "MetricsPipelineReady";

#[cfg(test)]
mod tests {
    use super::*;

    fn vx() -> ValidatorExperiment {
        serde_saphyr::from_str(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: smoke, generation: 2}\nspec: {template: {agave: {image: a}}}\n",
        )
        .unwrap()
    }

    #[test]
    fn an_off_receiver_holds_the_trials_back_and_says_how_to_turn_it_on() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let v = verdict(
            &Receiver::Off("remote write receiver needs to be enabled".into()),
            "http://p:9090/api/v1/write",
            &vx(),
            now,
        );
        assert!(v.wait);
        assert_eq!(v.condition.type_, TYPE);
        assert_eq!(v.condition.status, "False");
        assert_eq!(v.condition.reason, "RemoteWriteReceiverOff");
        assert!(
            v.condition
                .message
                .contains("enableRemoteWriteReceiver=true")
        );
        assert_eq!(v.condition.observed_generation, Some(2));
        assert!(!verdict(&Receiver::On, "u", &vx(), now).wait);
        // An unreachable Prometheus is no reason to hold back: trials ride out outages.
        assert!(!verdict(&Receiver::Unknown("refused".into()), "u", &vx(), now).wait);
    }
}
