//! The lab's time compression applied to an experiment written for a real cluster:
//! `valtune-lab compress FILE` prints it as the lab runs it. manifests/examples/ hold what
//! a user applies on real machines (12-hour windows, warm-up limits of hours, 15 s
//! scrapes); the lab's validators run `--time-scale` times faster than the clock, so the
//! lab divides the durations the experiment states in simulated time by that scale,
//! and scrapes at its own interval. The file itself is never edited: `make demo`, the lab
//! tests and a user of `make lab-up` all run the example through this transform.
//!
//! What is compressed, and why (docs/lab.md, "Time compression"):
//! - `trial.warmup.timeout` and `trial.measurement.duration` (their defaults too, 4h and
//!   12h, operator/src/api/settings.rs), every `trial.abortWhen[].for` and
//!   `trial.earlyAbort.window` and `.interval` (defaults 1h and 20m): simulated time;
//! - `maxNodeHours`: node-hours held in simulated time, divided by the scale too;
//! - `metrics.scrapeInterval` becomes the lab's Prometheus interval;
//! - not `trial.schedulingTimeout` nor `trial.collectionDeadline`: they bound waits on the
//!   control plane and on Prometheus, which run at real speed in the lab too.
//!
//! Each compressed duration keeps a floor in real seconds, because the lab's own steps
//! (scheduling, starting sidecar processes, a scrape every interval) are not compressed:
//! a 30-minute warm-up limit is 2.5 s at 720x, less than the lab needs to start a pod.

use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

/// `trial.warmup.timeout` and `trial.measurement.duration` when an experiment does not
/// set them (operator/src/api/settings.rs `default_warmup_timeout`,
/// `default_measurement`; operator/tests/contract.rs checks they agree).
pub const DEFAULT_WARMUP_TIMEOUT: &str = "4h";
pub const DEFAULT_MEASUREMENT: &str = "12h";
/// `trial.earlyAbort.window` and `.interval` when unset (operator/src/api/settings.rs).
pub const DEFAULT_EARLY_WINDOW: &str = "1h";
pub const DEFAULT_EARLY_INTERVAL: &str = "20m";

/// The shortest warm-up limit the lab gives a trial: its pod must be scheduled, its init
/// steps and sidecar processes started and scraped a few times, in real time.
pub const MIN_WARMUP: Duration = Duration::from_secs(20);
/// The shortest window, in scrape intervals: enough samples for the paper's statistics
/// (a burst among three samples is never an outlier; docs/lab.md "Limits").
pub const MIN_WINDOW_SCRAPES: u32 = 30;
/// The shortest `abortWhen[].for`, in scrape intervals (a rule needs most samples of it).
pub const MIN_ABORT_SCRAPES: u32 = 5;
/// The shortest `earlyAbort.window`, in scrape intervals: a slope's bound needs enough
/// samples once their autocorrelation is allowed for; and the shortest interval between
/// its checks.
pub const MIN_EARLY_WINDOW_SCRAPES: u32 = 20;
pub const MIN_EARLY_INTERVAL_SCRAPES: u32 = 2;

/// How the lab compresses time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Compression {
    /// Simulated seconds per real second.
    pub time_scale: f64,
    /// The lab Prometheus' scrape interval.
    pub scrape_interval: Duration,
}

/// One field the transform changed, for the header it prints.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub field: &'static str,
    pub from: String,
    pub to: String,
}

impl Compression {
    /// The compression of a running lab.
    pub fn of(state: &crate::LabState) -> anyhow::Result<Compression> {
        Ok(Compression {
            time_scale: state.time_scale,
            scrape_interval: parse(&state.scrape_interval).with_context(|| {
                format!("the lab's scrape interval {:?}", state.scrape_interval)
            })?,
        })
    }

    fn scaled(&self, d: Duration, floor: Duration) -> Duration {
        // Whole milliseconds: PromQL and the CRD's duration pattern both take `ms`.
        let ms = (d.as_secs_f64() * 1000.0 / self.time_scale).round() as u64;
        Duration::from_millis(ms).max(floor)
    }

    /// Compresses one document in place; anything but a ValidatorExperiment is left as it
    /// is. Returns what changed.
    pub fn apply(&self, doc: &mut Value) -> anyhow::Result<Vec<Change>> {
        if doc.get("kind").and_then(Value::as_str) != Some("ValidatorExperiment") {
            return Ok(Vec::new());
        }
        let spec = doc
            .get_mut("spec")
            .and_then(Value::as_object_mut)
            .context("a ValidatorExperiment without spec")?;
        let mut changes = Vec::new();
        let trial = object(spec, "trial");
        let step = self.scrape_interval;
        for (section, key, field, default, floor) in [
            (
                "warmup",
                "timeout",
                "trial.warmup.timeout",
                DEFAULT_WARMUP_TIMEOUT,
                MIN_WARMUP,
            ),
            (
                "measurement",
                "duration",
                "trial.measurement.duration",
                DEFAULT_MEASUREMENT,
                step * MIN_WINDOW_SCRAPES,
            ),
        ] {
            let section = object(trial, section);
            let from = section
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or(default)
                .to_string();
            let to = format(self.scaled(parse(&from).context(field)?, floor));
            section.insert(key.into(), Value::String(to.clone()));
            changes.push(Change { field, from, to });
        }
        if let Some(rules) = trial.get_mut("abortWhen").and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                if let Some(from) = rule.get("for").and_then(Value::as_str).map(String::from) {
                    let d = parse(&from).context("trial.abortWhen[].for")?;
                    let to = format(self.scaled(d, step * MIN_ABORT_SCRAPES));
                    rule.insert("for".into(), Value::String(to.clone()));
                    changes.push(Change {
                        field: "trial.abortWhen[].for",
                        from,
                        to,
                    });
                }
            }
        }
        let early = object(trial, "earlyAbort");
        if early.get("enabled").and_then(Value::as_bool) != Some(false) {
            for (key, field, default, floor) in [
                (
                    "window",
                    "trial.earlyAbort.window",
                    DEFAULT_EARLY_WINDOW,
                    step * MIN_EARLY_WINDOW_SCRAPES,
                ),
                (
                    "interval",
                    "trial.earlyAbort.interval",
                    DEFAULT_EARLY_INTERVAL,
                    step * MIN_EARLY_INTERVAL_SCRAPES,
                ),
            ] {
                let from = early
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or(default)
                    .to_string();
                let to = format(self.scaled(parse(&from).context(field)?, floor));
                early.insert(key.into(), Value::String(to.clone()));
                changes.push(Change { field, from, to });
            }
        }
        // A budget of node-hours is time too: the lab's trials hold their nodes for lab
        // seconds.
        if let Some(budget) = spec.get("maxNodeHours").and_then(Value::as_f64) {
            let to = (budget / self.time_scale * 1000.0).round().max(1.0) / 1000.0;
            spec.insert("maxNodeHours".into(), serde_json::json!(to));
            changes.push(Change {
                field: "maxNodeHours",
                from: budget.to_string(),
                to: to.to_string(),
            });
        }
        let metrics = object(spec, "metrics");
        let from = metrics
            .get("scrapeInterval")
            .and_then(Value::as_str)
            .unwrap_or("15s")
            .to_string();
        let to = format(step);
        metrics.insert("scrapeInterval".into(), Value::String(to.clone()));
        changes.push(Change {
            field: "metrics.scrapeInterval",
            from,
            to,
        });
        Ok(changes)
    }

    /// Every document of a YAML text, compressed, as YAML with a header saying what
    /// changed (for `kubectl apply -f -`).
    pub fn yaml(&self, text: &str) -> anyhow::Result<String> {
        let docs: Vec<Value> = serde_saphyr::from_multiple(text).context("parsing YAML")?;
        let mut out = String::new();
        for mut doc in docs.into_iter().filter(|d| !d.is_null()) {
            let changes = self.apply(&mut doc)?;
            out.push_str("---\n");
            if !changes.is_empty() {
                out.push_str(&format!(
                    "# Compressed for the lab (valtune-lab compress, time scale {}, scrape {}):\n",
                    self.time_scale,
                    format(self.scrape_interval)
                ));
                for c in &changes {
                    out.push_str(&format!("#   {}: {} -> {}\n", c.field, c.from, c.to));
                }
            }
            out.push_str(&serde_saphyr::to_string(&doc)?);
        }
        Ok(out)
    }
}

/// `map[key]` as an object, created when missing.
fn object<'a>(
    map: &'a mut serde_json::Map<String, Value>,
    key: &str,
) -> &'a mut serde_json::Map<String, Value> {
    let v = map
        .entry(key)
        .or_insert_with(|| Value::Object(Default::default()));
    if !v.is_object() {
        *v = Value::Object(Default::default());
    }
    v.as_object_mut().expect("an object")
}

/// A Go-style duration ("90s", "1h30m", "500ms"), as the CRD's schema admits.
pub fn parse(value: &str) -> anyhow::Result<Duration> {
    let d: kube::core::Duration = value
        .parse()
        .map_err(|_| anyhow::anyhow!("{value:?} is not a duration such as 90s, 30m or 12h"))?;
    anyhow::ensure!(!d.is_negative(), "{value:?} is negative");
    Ok(d.into())
}

/// Seconds when whole, else milliseconds.
pub fn format(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lab() -> Compression {
        Compression {
            time_scale: 720.0,
            scrape_interval: Duration::from_secs(1),
        }
    }

    fn experiment(trial: Value, metrics: Value) -> Value {
        json!({"apiVersion": "valtune.dev/v1alpha1", "kind": "ValidatorExperiment",
               "metadata": {"name": "x"},
               "spec": {"template": {"agave": {"image": "a"}}, "trial": trial, "metrics": metrics}})
    }

    #[test]
    fn a_twelve_hour_window_is_a_lab_minute_and_the_scrape_the_labs() {
        let mut doc = experiment(
            json!({"warmup": {"timeout": "4h"}, "measurement": {"duration": "12h", "from": "firstExecution"}, "schedulingTimeout": "30m"}),
            json!({"scrapeInterval": "15s", "minCoverage": 0.9}),
        );
        let changes = lab().apply(&mut doc).unwrap();
        let spec = &doc["spec"];
        assert_eq!(spec["trial"]["warmup"]["timeout"], "20s");
        assert_eq!(spec["trial"]["measurement"]["duration"], "60s");
        assert_eq!(spec["trial"]["measurement"]["from"], "firstExecution");
        assert_eq!(spec["metrics"]["scrapeInterval"], "1s");
        // Waits on the control plane and Prometheus run at real speed in the lab too.
        assert_eq!(spec["trial"]["schedulingTimeout"], "30m");
        assert_eq!(spec["metrics"]["minCoverage"], 0.9);
        // Early abort's slope over 20 scrapes (1h is 5 s), its checks 2 s apart.
        assert_eq!(spec["trial"]["earlyAbort"]["window"], "20s");
        assert_eq!(spec["trial"]["earlyAbort"]["interval"], "2s");
        assert_eq!(changes.len(), 5);
        assert_eq!(changes[1].from, "12h");
    }

    #[test]
    fn short_durations_keep_the_labs_floors() {
        let mut doc = experiment(
            json!({"warmup": {"timeout": "30m"}, "measurement": {"duration": "10m"},
                   "abortWhen": [{"metric": "tps", "below": 1, "for": "30m"}, {"metric": "tps", "above": 1, "for": "3h"}]}),
            json!({}),
        );
        lab().apply(&mut doc).unwrap();
        let trial = &doc["spec"]["trial"];
        assert_eq!(trial["warmup"]["timeout"], "20s");
        assert_eq!(trial["measurement"]["duration"], "30s");
        assert_eq!(trial["abortWhen"][0]["for"], "5s");
        assert_eq!(trial["abortWhen"][1]["for"], "15s");
        let mut off = experiment(json!({"earlyAbort": {"enabled": false}}), json!({}));
        lab().apply(&mut off).unwrap();
        assert_eq!(
            off["spec"]["trial"]["earlyAbort"],
            json!({"enabled": false})
        );
        let mut budget = experiment(json!({}), json!({}));
        budget["spec"]["maxNodeHours"] = json!(150);
        lab().apply(&mut budget).unwrap();
        assert_eq!(budget["spec"]["maxNodeHours"], json!(0.208));
        let mut long = experiment(json!({"earlyAbort": {"window": "10h"}}), json!({}));
        lab().apply(&mut long).unwrap();
        assert_eq!(long["spec"]["trial"]["earlyAbort"]["window"], "50s");
    }

    #[test]
    fn unset_durations_are_the_operators_defaults_compressed() {
        let mut doc = experiment(json!(null), json!(null));
        lab().apply(&mut doc).unwrap();
        let trial = &doc["spec"]["trial"];
        assert_eq!(trial["warmup"]["timeout"], "20s");
        assert_eq!(trial["measurement"]["duration"], "60s");
        assert_eq!(doc["spec"]["metrics"]["scrapeInterval"], "1s");
    }

    #[test]
    fn fractions_are_milliseconds_and_other_kinds_pass_through() {
        let c = Compression {
            time_scale: 100.0,
            scrape_interval: Duration::from_millis(500),
        };
        let mut doc = experiment(json!({"measurement": {"duration": "36h15s"}}), json!({}));
        c.apply(&mut doc).unwrap();
        assert_eq!(doc["spec"]["trial"]["measurement"]["duration"], "1296150ms");
        assert_eq!(doc["spec"]["metrics"]["scrapeInterval"], "500ms");
        let mut cm = json!({"kind": "ConfigMap", "data": {"a": "12h"}});
        assert!(c.apply(&mut cm).unwrap().is_empty());
        assert_eq!(cm["data"]["a"], "12h");
        let bad = &mut experiment(json!({"measurement": {"duration": "soon"}}), json!({}));
        assert!(c.apply(bad).is_err());
    }

    #[test]
    fn every_example_compresses_and_says_what_changed() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let out = lab().yaml(&text).unwrap();
            assert!(
                out.contains("#   trial.measurement.duration: "),
                "{}",
                path.display()
            );
            let back: Value = serde_saphyr::from_str(&out).unwrap();
            assert_eq!(back["spec"]["metrics"]["scrapeInterval"], "1s");
        }
    }
}
