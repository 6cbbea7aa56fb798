//! What an experiment costs before it runs: its trials, the node-hours they hold and the
//! wall-clock at a parallelism (`valtune plan`, and the examples' headers); and while it
//! runs, what it has spent against what a grid would (`status.nodeHours`). Pure.
//!
//! Each trial holds one node (placement.exclusive) from its start through warm-up and its
//! window. The expected case takes the client's typical warm-up (below, with where each
//! figure comes from); the worst case takes the experiment's own warm-up limit
//! (trial.warmup.timeout), after which a trial ends TimedOut. Trials that end early (an
//! OOM kill, a crash) cost less; a node lost or a retry costs more and is not counted.
//!
//! How many trials run, in how many waves and at which windows, is the strategy's to say
//! (its [`Schedule`]): a grid runs every point, so its expected and worst trial counts
//! are equal; a search that stops early expects fewer.

use std::time::Duration;

use jiff::Timestamp;

use crate::api::ValidatorTrial;
use crate::api::experiment::{NodeHours, ValidatorExperimentSpec};
use crate::api::settings::{WindowStart, human, parse_duration};
use crate::api::template::ValidatorTemplate;
pub use crate::clients::Warmup;
use crate::strategies::plan::plan;
pub use crate::strategies::schedule::{Bounds, Schedule};
use crate::strategies::strategy_for;

/// What an experiment will hold and for how long.
#[derive(Debug, Clone, PartialEq)]
pub struct Cost {
    pub trials: Bounds<u32>,
    /// How many trials run at once.
    pub parallelism: u32,
    /// The typical time from a trial's start to its window's start, and why.
    pub warmup: Warmup,
    /// The warm-up limit and the window, as the experiment states them.
    pub warmup_limit: Duration,
    pub window: Duration,
    /// One trial, from its start to its window's end.
    pub per_trial: Bounds<Duration>,
    pub node_hours: Bounds<f64>,
    /// Waves of `parallelism` trials (a search's rounds), one after the other (with
    /// enough nodes).
    pub wall_clock: Bounds<Duration>,
    /// For a search: what a grid of the same points would cost (expected).
    pub grid: Option<GridCost>,
    /// What the strategy runs: its stages' trials, waves and windows.
    pub schedule: Schedule,
}

/// A grid's expected cost, beside a search's.
#[derive(Debug, Clone, PartialEq)]
pub struct GridCost {
    pub trials: u32,
    pub node_hours: f64,
    pub wall_clock: Duration,
}

#[cfg(test)]
const MIN: u64 = 60;
#[cfg(test)]
const HOUR: u64 = 3600;

/// The typical time from a trial's start to its window's start for the template's client
/// and workload (each client says, with where its figures come from: issue 18's facts
/// notes, section 12). A template without a client (one that bypassed the schema) has
/// none.
pub fn typical_warmup(template: &ValidatorTemplate, from: WindowStart) -> Warmup {
    match crate::clients::client_for(template) {
        Ok(c) => c.typical_warmup(template, from),
        Err(_) => Warmup {
            typical: Duration::ZERO,
            basis: "no client is set",
        },
    }
}

/// A spec the cost cannot be read from (it bypassed the schema).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct CostError {
    pub field: &'static str,
    pub message: String,
}

/// What the experiment costs as its strategy runs it (the strategy's [`Schedule`], priced
/// at the client's warm-up and the windows). `parallelism` overrides the spec's.
pub fn plan_cost(
    spec: &ValidatorExperimentSpec,
    parallelism: Option<u32>,
) -> Result<Cost, CostError> {
    let duration = |field: &'static str, v: &str| {
        parse_duration(v).map_err(|e| CostError {
            field,
            message: e.to_string(),
        })
    };
    let warmup_limit = duration("spec.trial.warmup.timeout", &spec.trial.warmup.timeout)?;
    let window = duration(
        "spec.trial.measurement.duration",
        &spec.trial.measurement.duration,
    )?;
    let n = plan(&spec.sweep, spec.trial.repetitions).len() as u32;
    let parallelism = parallelism.unwrap_or(spec.parallelism.max(1) as u32).max(1);
    let schedule = strategy_for(spec).schedule(spec, parallelism, window);
    let warmup = typical_warmup(&spec.template, spec.trial.measurement.from);
    // A trial cannot warm up longer than its limit.
    let warm = Bounds {
        expected: warmup.typical.min(warmup_limit),
        worst: warmup_limit,
    };
    let per_trial = Bounds {
        expected: warm.expected + window,
        worst: warm.worst + window,
    };
    // Each stage's trials at its own window, its waves one after the other.
    let (mut node_hours, mut wall_clock) = (Bounds::exactly(0.0), Bounds::exactly(Duration::ZERO));
    for stage in &schedule.stages {
        let each = Bounds {
            expected: warm.expected + stage.window,
            worst: warm.worst + stage.window,
        };
        node_hours.expected += hours(each.expected) * f64::from(stage.trials.expected);
        node_hours.worst += hours(each.worst) * f64::from(stage.trials.worst);
        wall_clock.expected += each.expected * stage.waves.expected;
        wall_clock.worst += each.worst * stage.waves.worst;
    }
    Ok(Cost {
        node_hours,
        wall_clock,
        grid: schedule.searches.then(|| GridCost {
            trials: n,
            node_hours: hours(per_trial.expected) * n as f64,
            wall_clock: per_trial.expected * n.div_ceil(parallelism),
        }),
        trials: schedule.trials(),
        parallelism,
        warmup,
        warmup_limit,
        window,
        per_trial,
        schedule,
    })
}

/// Node-hours the trials held: each from its validator's start (`status.startedAt`) to
/// its end (`finishedAt`; now while it runs, collection included: the pod runs until
/// then), and each earlier attempt of a retried trial from its start to its end
/// (`previousAttempts`).
pub fn spent(trials: &[ValidatorTrial], now: Timestamp) -> f64 {
    let held = |start: Timestamp, end: Timestamp| {
        end.duration_since(start).as_secs_f64().max(0.0) / 3600.0
    };
    trials
        .iter()
        .filter_map(|t| t.status.as_ref())
        .map(|st| {
            let current = st
                .started_at
                .as_ref()
                .map(|start| held(start.0, st.finished_at.as_ref().map(|t| t.0).unwrap_or(now)));
            let earlier: f64 = st
                .previous_attempts
                .iter()
                .filter_map(|a| Some(held(a.started_at.as_ref()?.0, a.ended_at.0)))
                .sum();
            current.unwrap_or(0.0) + earlier
        })
        .sum()
}

/// What a trial held its node for besides its window, as this experiment's trials
/// show: the mean warm-up (from the validator's start to its window's start) of those
/// that reached a window, and the mean collection (from the window's end to the trial's)
/// of those that finished one. None before any trial reached a window.
pub fn observed_warmup(trials: &[ValidatorTrial]) -> Option<Duration> {
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let statuses = || trials.iter().filter_map(|t| t.status.as_ref());
    let warmups: Vec<f64> = statuses()
        .filter_map(|st| {
            let start = st.started_at.as_ref()?.0;
            let window = st.window_start.as_ref()?.0;
            Some(window.duration_since(start).as_secs_f64().max(0.0))
        })
        .collect();
    let collections: Vec<f64> = statuses()
        .filter_map(|st| {
            let end = st.window_end.as_ref()?.0;
            let finished = st.finished_at.as_ref()?.0;
            Some(finished.duration_since(end).as_secs_f64().max(0.0))
        })
        .collect();
    let warmup = mean(&warmups)?;
    Some(Duration::from_secs_f64(
        warmup + mean(&collections).unwrap_or(0.0),
    ))
}

/// What a full grid of the spec's points would hold: every point and repetition, each a
/// warm-up (`observed`: this experiment's, collection included; else the client's
/// typical one, at most the limit) and a whole window. None for a spec that bypassed the
/// schema.
pub fn grid_node_hours(spec: &ValidatorExperimentSpec, observed: Option<Duration>) -> Option<f64> {
    let mut grid = spec.clone();
    grid.strategy = Default::default();
    let c = plan_cost(&grid, None).ok()?;
    let warmup = observed.unwrap_or(c.warmup.typical).min(c.warmup_limit);
    Some(hours(warmup + c.window) * f64::from(c.trials.expected))
}

/// `status.nodeHours` of an experiment with these trials, to 0.01 node-hour.
pub fn node_hours_status(
    spec: &ValidatorExperimentSpec,
    trials: &[ValidatorTrial],
    now: Timestamp,
) -> NodeHours {
    let round = |h: f64| (h * 100.0).round() / 100.0;
    NodeHours {
        spent: round(spent(trials, now)),
        grid: grid_node_hours(spec, observed_warmup(trials)).map(round),
    }
}

fn hours(d: Duration) -> f64 {
    d.as_secs_f64() / 3600.0
}

/// Node-hours, to one decimal below ten and whole above.
pub fn node_hours(h: f64) -> String {
    if h < 10.0 {
        format!("{:.1}", h)
    } else {
        format!("{:.0}", h)
    }
}

impl Cost {
    /// The one line the examples' headers carry (and a test checks they still do).
    pub fn summary(&self) -> String {
        let n = self.trials.expected;
        let count = if self.trials.worst == n {
            format!("{n} {}", if n == 1 { "trial" } else { "trials" })
        } else {
            format!("about {n} trials ({} at most)", self.trials.worst)
        };
        let grid = self
            .grid
            .as_ref()
            .map(|g| {
                format!(
                    "; a grid of the same points: {} trials, about {} node-hours, {} wall-clock",
                    g.trials,
                    node_hours(g.node_hours),
                    human(g.wall_clock)
                )
            })
            .unwrap_or_default();
        let window = match self.schedule.stage {
            None => format!("{} window", human(self.window)),
            Some(stage) => {
                let each = |f: fn(&crate::strategies::schedule::Stage) -> String| {
                    let all: Vec<String> = self.schedule.stages.iter().map(f).collect();
                    all.join(", ")
                };
                format!(
                    "a {} window in {stage}s of {} trials",
                    each(|s| human(s.window)),
                    each(|s| s.trials.expected.to_string())
                )
            }
        };
        format!(
            "{count} x (about {} warm-up + {window}): about {} node-hours, {} at most (every warm-up at its {} limit); {} at a time: about {} wall-clock, {} at most{grid}",
            human(self.warmup.typical.min(self.warmup_limit)),
            node_hours(self.node_hours.expected),
            node_hours(self.node_hours.worst),
            human(self.warmup_limit),
            self.parallelism,
            human(self.wall_clock.expected),
            human(self.wall_clock.worst),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> ValidatorExperimentSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    const RAM: &str = "template: {agave: {image: a}}\nsweep: {memory: [128Gi, 256Gi, 512Gi, 1Ti, 1400Gi]}\ntrial: {warmup: {timeout: 4h}, measurement: {duration: 12h}}\nparallelism: 3\n";

    #[test]
    fn the_ram_sweep_costs_five_trials_of_fourteen_hours() {
        let c = plan_cost(&spec(RAM), None).unwrap();
        assert_eq!(c.trials.expected, 5);
        assert_eq!(c.per_trial.expected, Duration::from_secs(14 * HOUR));
        assert_eq!(c.per_trial.worst, Duration::from_secs(16 * HOUR));
        assert_eq!(c.node_hours.expected, 70.0);
        assert_eq!(c.node_hours.worst, 80.0);
        // Two waves of three.
        assert_eq!(c.wall_clock.expected, Duration::from_secs(28 * HOUR));
        assert_eq!(c.wall_clock.worst, Duration::from_secs(32 * HOUR));
        assert_eq!(
            c.summary(),
            "5 trials x (about 2h warm-up + 12h window): about 70 node-hours, 80 at most (every warm-up at its 4h limit); 3 at a time: about 28h wall-clock, 32h at most"
        );
    }

    #[test]
    fn parallelism_changes_the_wall_clock_not_the_node_hours() {
        let c = plan_cost(&spec(RAM), Some(5)).unwrap();
        assert_eq!(c.node_hours.expected, 70.0);
        assert_eq!(c.wall_clock.expected, Duration::from_secs(14 * HOUR));
        let c = plan_cost(&spec(RAM), Some(1)).unwrap();
        assert_eq!(c.wall_clock.worst, Duration::from_secs(80 * HOUR));
    }

    #[test]
    fn repetitions_multiply_and_the_limit_caps_the_typical_warm_up() {
        let s = spec(
            "template: {besu: {image: b}}\nsweep: {allocator: [jemalloc, glibc]}\ntrial: {repetitions: 3, warmup: {timeout: 1h}, measurement: {duration: 30m}}\n",
        );
        let c = plan_cost(&s, None).unwrap();
        assert_eq!(c.trials.expected, 6);
        // Besu typically syncs for a day, but this experiment gives it an hour.
        assert_eq!(c.per_trial.expected, Duration::from_secs(90 * MIN));
        assert_eq!(c.node_hours.expected, 9.0);
        assert_eq!(node_hours(c.node_hours.expected), "9.0");
    }

    #[test]
    fn the_window_from_the_first_execution_needs_only_the_snapshot_first() {
        let s = spec(
            "template: {agave: {image: a}}\ntrial: {measurement: {duration: 12h, from: firstExecution}}\n",
        );
        let c = plan_cost(&s, None).unwrap();
        assert_eq!(
            c.per_trial.expected,
            Duration::from_secs(12 * HOUR + 30 * MIN)
        );
        // Defaults: one trial, a 4h limit.
        assert_eq!(c.per_trial.worst, Duration::from_secs(16 * HOUR));
    }

    #[test]
    fn a_spec_that_bypassed_the_schema_names_its_field() {
        let mut s = spec(RAM);
        s.trial.measurement.duration = "soon".into();
        let e = plan_cost(&s, None).unwrap_err();
        assert_eq!(e.field, "spec.trial.measurement.duration");
    }

    /// A trial that started, reached its window and finished at these seconds (None: not
    /// yet).
    fn trial(started: Option<i64>, window: Option<i64>, finished: Option<i64>) -> ValidatorTrial {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let at = |h: Option<i64>| {
            h.map(|s| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    t0 + jiff::SignedDuration::from_secs(s),
                )
            })
        };
        let mut t = ValidatorTrial::new(
            "t",
            serde_saphyr::from_str(
                "experiment: x\npoint: {}\nrepetition: 1\ntemplate: {agave: {image: a}}\nsettings: {}\nmetrics: {}",
            )
            .unwrap(),
        );
        t.status = Some(crate::api::trial::ValidatorTrialStatus {
            started_at: at(started),
            window_start: at(window),
            finished_at: at(finished),
            ..Default::default()
        });
        t
    }

    /// Spent: each trial from its start to its end, a running one to now; a trial that
    /// never started holds no node.
    #[test]
    fn node_hours_spent_run_from_each_start_to_its_end_or_now() {
        let now: Timestamp = "2026-01-01T10:00:00Z".parse().unwrap();
        let mut trials = [
            trial(Some(0), Some(7200), Some(14 * 3600)),
            trial(Some(3600), Some(2 * 3600), None),
            trial(None, None, None),
        ];
        assert_eq!(spent(&trials, now), 14.0 + 9.0);
        assert_eq!(observed_warmup(&trials), Some(Duration::from_secs(5400)));
        // A retried trial: its earlier attempts held their nodes too (one lost after 2
        // hours; one unschedulable, never started, held none).
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let attempt = |started: Option<i64>, ended: i64| crate::api::trial::AttemptRecord {
            attempt: 1,
            outcome: crate::api::trial::TrialOutcome::NodeLost,
            started_at: started.map(|s| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    t0 + jiff::SignedDuration::from_secs(s),
                )
            }),
            node: None,
            message: String::new(),
            ended_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                t0 + jiff::SignedDuration::from_secs(ended),
            ),
        };
        let mut retried = trials.clone();
        retried[0].status.as_mut().unwrap().previous_attempts =
            vec![attempt(Some(0), 7200), attempt(None, 9000)];
        assert_eq!(spent(&retried, now), 14.0 + 9.0 + 2.0);
        // A finished window's collection counts with the warm-up: the node is held.
        trials[0].status.as_mut().unwrap().window_end = trials[0]
            .status
            .as_ref()
            .unwrap()
            .finished_at
            .clone()
            .map(|t| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    t.0 - jiff::SignedDuration::from_secs(60),
                )
            });
        assert_eq!(observed_warmup(&trials), Some(Duration::from_secs(5460)));
        assert_eq!(observed_warmup(&trials[2..]), None);
    }

    /// The grid's figure is every point with a whole window, whatever the strategy: the
    /// bisection example's 21 sizes, at its observed warm-up or the client's typical one.
    #[test]
    fn a_grid_of_the_same_points_costs_every_point_a_whole_window() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../manifests/examples/agave-ram-bisection.yaml"),
        )
        .unwrap();
        let vx: crate::api::ValidatorExperiment = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(grid_node_hours(&vx.spec, None), Some(21.0 * 14.0));
        assert_eq!(
            grid_node_hours(&vx.spec, Some(Duration::from_secs(3600))),
            Some(21.0 * 13.0)
        );
        // Never longer than the warm-up limit (4h).
        assert_eq!(
            grid_node_hours(&vx.spec, Some(Duration::from_secs(9 * 3600))),
            Some(21.0 * 16.0)
        );
        let now: Timestamp = "2026-01-01T10:00:00Z".parse().unwrap();
        let st = node_hours_status(&vx.spec, &[trial(Some(0), Some(4000), None)], now);
        assert_eq!(st.spent, 10.0);
        assert_eq!(
            st.grid,
            Some(((21.0 * (4000.0 + 43200.0) / 3600.0) * 100.0_f64).round() / 100.0)
        );
    }

    /// Every example's header states its cost as `valtune plan` computes it.
    #[test]
    fn every_example_header_states_its_computed_cost() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let vx: crate::api::ValidatorExperiment = serde_saphyr::from_str(&text).unwrap();
            let summary = plan_cost(&vx.spec, None).unwrap().summary();
            // The header wraps the line: compare without the comment markers.
            let header: String = text
                .lines()
                .take_while(|l| l.starts_with('#'))
                .map(|l| l.trim_start_matches('#').trim())
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                header.contains(&summary),
                "{}: the header should say `{summary}`",
                path.display()
            );
        }
    }
}
