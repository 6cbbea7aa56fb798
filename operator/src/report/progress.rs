//! `valtune report --watch`: where a running experiment stands, pure: each trial's phase,
//! how much of its measurement window has passed and remains, and the node-hours its
//! trials have held so far.

use std::time::Duration;

use jiff::Timestamp;

use super::aligned;
use crate::api::ValidatorExperiment;
use crate::results::dataset::{Dataset, TrialRecord};

/// Seconds from `a` to `b`, never negative.
fn seconds(a: Timestamp, b: Timestamp) -> f64 {
    b.duration_since(a).as_secs_f64().max(0.0)
}

/// "1h02m", "4m05s", "12s".
pub fn human(secs: f64) -> String {
    let s = secs.round() as u64;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// A trial's window: elapsed of its length while it measures, whole once it ended.
fn window(t: &TrialRecord, length: Duration, now: Timestamp) -> (String, String) {
    let Some(start) = t.window_start else {
        return ("-".into(), "-".into());
    };
    let end = t.window_end.filter(|_| t.phase.is_finished());
    let elapsed = seconds(start, end.unwrap_or(now)).min(length.as_secs_f64());
    let remaining = if t.phase.is_finished() {
        0.0
    } else {
        (length.as_secs_f64() - elapsed).max(0.0)
    };
    (
        format!("{}/{}", human(elapsed), human(length.as_secs_f64())),
        human(remaining),
    )
}

/// The hours trials held a node: from start to finish (to `now` while running).
pub fn node_hours(data: &Dataset, now: Timestamp) -> f64 {
    data.trials()
        .filter_map(|t| Some(seconds(t.started?, t.finished.unwrap_or(now))))
        .sum::<f64>()
        / 3600.0
        // An empty sum is -0.0, which would print as "-0.00".
        + 0.0
}

/// The progress view: a line for the experiment, a row per trial.
pub fn progress(
    vx: &ValidatorExperiment,
    data: &Dataset,
    length: Duration,
    now: Timestamp,
) -> String {
    let st = vx.status.clone().unwrap_or_default();
    let c = &st.trials;
    let age = vx
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| human(seconds(t.0, now)))
        .unwrap_or_else(|| "-".into());
    let mut out = format!(
        "experiment {}: {:?} for {age}, {}/{} trials finished ({} running), {:.2} node-hours so far\n",
        vx.metadata.name.clone().unwrap_or_default(),
        st.phase,
        c.finished,
        c.expected,
        c.active,
        node_hours(data, now)
    );
    let header = [
        "TRIAL",
        "POINT",
        "REP",
        "PHASE",
        "OUTCOME",
        "WINDOW",
        "REMAINING",
    ]
    .map(String::from)
    .to_vec();
    let rows = data
        .trials()
        .map(|t| {
            let (elapsed, remaining) = window(t, length, now);
            let mut row = super::trial_cells(t);
            row.extend([elapsed, remaining]);
            row
        })
        .collect();
    out.push_str(&aligned(header, rows));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::trial::{TrialOutcome, TrialPhase};

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_view_shows_each_window_and_the_node_hours_so_far() {
        let vx: ValidatorExperiment = serde_saphyr::from_str(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: e, creationTimestamp: '2026-01-01T00:00:00Z'}\nspec:\n  template: {agave: {image: a}}\n  sweep: {memory: [128Gi, 1Ti]}\nstatus: {phase: Running, trials: {expected: 2, pending: 0, active: 1, finished: 1, succeeded: 1, failed: 0}}\n",
        )
        .unwrap();
        let point = |m: &str| serde_saphyr::from_str(&format!("memory: {m}")).unwrap();
        let oom = TrialRecord {
            name: "a".into(),
            point: point("128Gi"),
            repetition: 1,
            phase: TrialPhase::Succeeded,
            outcome: Some(TrialOutcome::OOMKilled),
            started: Some(at("2026-01-01T00:00:00Z")),
            window_start: Some(at("2026-01-01T01:00:00Z")),
            window_end: Some(at("2026-01-01T05:00:00Z")),
            finished: Some(at("2026-01-01T05:00:00Z")),
            ..Default::default()
        };
        let running = TrialRecord {
            name: "b".into(),
            point: point("1Ti"),
            repetition: 1,
            phase: TrialPhase::Measuring,
            started: Some(at("2026-01-01T00:00:00Z")),
            window_start: Some(at("2026-01-01T02:00:00Z")),
            ..Default::default()
        };
        let data = Dataset::new(&vx.spec.sweep, [oom, running]);
        let now = at("2026-01-01T06:30:00Z");
        let text = progress(&vx, &data, Duration::from_secs(12 * 3600), now);
        let lines: Vec<&str> = text.lines().collect();
        // 5 h + 6.5 h of nodes held.
        assert_eq!(
            lines[0],
            "experiment e: Running for 6h30m, 1/2 trials finished (1 running), 11.50 node-hours so far"
        );
        assert!(lines[1].ends_with("REMAINING"), "{text}");
        assert!(lines[2].ends_with("4h00m/12h00m  0s"), "{text}");
        assert!(lines[3].ends_with("4h30m/12h00m  7h30m"), "{text}");
        assert_eq!(human(65.0), "1m05s");
        let none = Dataset::new(&vx.spec.sweep, []);
        assert_eq!(format!("{:.2}", node_hours(&none, now)), "0.00");
    }
}
