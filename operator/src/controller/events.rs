//! Events (events.k8s.io/v1): one per distinct note, a repeat of the same note within a
//! few minutes counted on the first (its `series`).
//!
//! kube-runtime's `Recorder` (5.0.0, kube-runtime/src/events.rs `EventKey`) folds every
//! event of one (object, type, reason, action) into the series of the first, note
//! ignored, as the Event API's KEP defines a series (kubernetes/enhancements
//! keps/sig-instrumentation/383-new-event-api-ga-graduation): five `TrialCreated` events
//! showed as the first trial's note "x5", and a Validator's second `RestartPending`
//! reason was never seen. Here the note is part of the key, so each distinct fact is its
//! own event, and a repeated one still costs one patch, not a new object.

use std::collections::HashMap;
use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// How long a repeat counts on the first event (kube-runtime's `CACHE_TTL`).
const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// What makes two events one series.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    uid: String,
    warning: bool,
    reason: String,
    note: String,
}

#[derive(Debug, Clone, PartialEq)]
struct Seen {
    namespace: String,
    name: String,
    count: i32,
    last: Timestamp,
}

/// What to write for one event.
#[derive(Debug, Clone, PartialEq)]
enum Write {
    Create,
    /// A repeat: the series of the event `name` now counts `count`.
    Count {
        namespace: String,
        name: String,
        count: i32,
    },
}

#[derive(Default)]
struct Series(HashMap<Key, Seen>);

impl Series {
    /// Forgets series older than the TTL, then says whether `key` starts a new event.
    fn write(&mut self, key: &Key, now: Timestamp) -> Write {
        self.0.retain(|_, s| s.last + SERIES_TTL > now);
        match self.0.get_mut(key) {
            Some(s) => {
                s.count += 1;
                s.last = now;
                Write::Count {
                    namespace: s.namespace.clone(),
                    name: s.name.clone(),
                    count: s.count,
                }
            }
            None => Write::Create,
        }
    }

    fn created(&mut self, key: Key, namespace: String, name: String, now: Timestamp) {
        let seen = Seen {
            namespace,
            name,
            count: 1,
            last: now,
        };
        self.0.insert(key, seen);
    }
}

/// Publishes the operator's events.
pub struct Events {
    client: Client,
    controller: String,
    instance: String,
    series: Mutex<Series>,
}

impl Events {
    pub fn new(client: Client, controller: &str, instance: &str) -> Self {
        Events {
            client,
            controller: controller.into(),
            instance: instance.into(),
            series: Mutex::default(),
        }
    }

    pub async fn publish(
        &self,
        regarding: ObjectReference,
        related: Option<ObjectReference>,
        warning: bool,
        reason: &str,
        note: &str,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = Key {
            uid: regarding.uid.clone().unwrap_or_default(),
            warning,
            reason: reason.into(),
            note: note.into(),
        };
        let write = self.series.lock().expect("lock").write(&key, now);
        let namespace = regarding.namespace.clone().unwrap_or("default".into());
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        match write {
            Write::Count {
                namespace: _,
                name,
                count,
            } => {
                let series = EventSeries {
                    count,
                    last_observed_time: MicroTime(now),
                };
                api.patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "series": series })),
                )
                .await?;
            }
            Write::Create => {
                let name = format!(
                    "{}.{:x}",
                    regarding.name.as_deref().unwrap_or(&self.controller),
                    now.as_nanosecond()
                );
                let event = Event {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some(namespace.clone()),
                        ..Default::default()
                    },
                    action: Some("Reconcile".into()),
                    reason: Some(reason.into()),
                    note: Some(note.into()),
                    event_time: Some(MicroTime(now)),
                    regarding: Some(regarding),
                    related,
                    reporting_controller: Some(self.controller.clone()),
                    reporting_instance: Some(self.instance.clone()),
                    type_: Some(if warning { "Warning" } else { "Normal" }.into()),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &event).await?;
                self.series
                    .lock()
                    .expect("lock")
                    .created(key, namespace, name, now);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(reason: &str, note: &str) -> Key {
        Key {
            uid: "u1".into(),
            warning: false,
            reason: reason.into(),
            note: note.into(),
        }
    }

    #[test]
    fn a_new_note_is_a_new_event_and_a_repeat_counts_on_the_first() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let at = |s: i64| t0 + SignedDuration::from_secs(s);
        let mut series = Series::default();
        let first = key("RestartPending", "a leader slot in 3 min");
        assert_eq!(series.write(&first, at(0)), Write::Create);
        series.created(first.clone(), "ns".into(), "vv.1".into(), at(0));
        // The same reason with another note: its own event.
        let other = key("RestartPending", "delinquent stake 7%");
        assert_eq!(series.write(&other, at(10)), Write::Create);
        // The same note again: the first's series.
        let count = |n| Write::Count {
            namespace: "ns".into(),
            name: "vv.1".into(),
            count: n,
        };
        assert_eq!(series.write(&first, at(20)), count(2));
        assert_eq!(series.write(&first, at(300)), count(3));
        // Another object, or a warning, is another event.
        let elsewhere = Key {
            uid: "u2".into(),
            ..first.clone()
        };
        assert_eq!(series.write(&elsewhere, at(301)), Write::Create);
        let warning = Key {
            warning: true,
            ..first.clone()
        };
        assert_eq!(series.write(&warning, at(301)), Write::Create);
        // A series idle past the TTL is over: the next is a new event.
        assert_eq!(series.write(&first, at(300 + 360)), Write::Create);
    }
}
