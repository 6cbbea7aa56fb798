//! A comparison's data, pure: each trial as the comparison reads it (from the operator's
//! dataset), its pairs rebuilt, what is set apart and why, and the judgement
//! ([`stats::compare`]). The operator's status judges through [`judge`].
//!
//! What counts (docs/concepts.md, "Numbers you can trust"): a trial's figure only from a
//! whole window (early abort, an OOM kill or an `abortWhen` rule cut others short, and
//! a failure measured nothing); a pair only when both sides measured one window. Others
//! are listed apart with why, never pooled.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::api::trial::{PairRole, TrialOutcome, TrialResults};
use crate::results::dataset::{Dataset, Measured};
use crate::results::stats::compare::{self, Effect, Judgement};

/// One trial as the comparison reads it.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    pub trial: String,
    /// Its point as the sweep writes it ("allocator=jemalloc"): trials are grouped by it.
    pub point: String,
    /// Its pair (the candidate side's trial name), in a paired design.
    pub pair: Option<String>,
    pub side: Option<PairRole>,
    pub window_start: Option<Timestamp>,
    pub window_end: Option<Timestamp>,
    pub measured: Measured,
    pub outcome: Option<TrialOutcome>,
    /// The compared figure, when the trial has it.
    pub value: Option<f64>,
}

/// What is compared with what.
#[derive(Clone, Debug, PartialEq)]
pub struct Design {
    /// The baseline point, as [`Observation::point`] writes it.
    pub baseline: String,
    pub paired: bool,
    /// `practicalDifference` as a fraction (0.05).
    pub practical: f64,
}

/// A trial left out, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct SetApart {
    pub trial: String,
    pub point: String,
    pub why: String,
}

/// Every candidate point's effect (those with at least two usable pairs or repetitions
/// per side), the noise floor, and what was left out.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    pub rows: Vec<(String, Effect)>,
    pub noise: Option<Effect>,
    /// How the variance was estimated ("pooled over 4 groups of pairs: ...").
    pub variance: Option<String>,
    pub set_apart: Vec<SetApart>,
    pub practical: f64,
}

impl Comparison {
    /// "+10% [+8%, +12%], 3 pairs: different by more than 5%".
    pub fn text(&self, e: &Effect) -> String {
        format!("{}: {}", e.describe(), e.verdict(self.practical))
    }

    /// What the A/A pairs say, judged like a candidate: identical configurations side by
    /// side should not differ.
    pub fn noise_text(&self) -> Option<String> {
        let e = self.noise.as_ref()?;
        let mut s = e.describe();
        if matches!(e.call, compare::Call::Real | compare::Call::Different) {
            s.push_str(
                ": identical configurations differed side by side: the design assumes they do not (look for a node or a side that is slower)",
            );
        }
        Some(s)
    }

    /// One line per set-apart trial.
    pub fn set_apart_lines(&self) -> Vec<String> {
        self.set_apart
            .iter()
            .map(|s| format!("{} ({}): {}", s.trial, s.point, s.why))
            .collect()
    }
}

/// Both measured one window: starts and ends agree to a second (status keeps whole
/// seconds, and a pair's two sides take the same start and length).
fn same_window(a: &Observation, b: &Observation) -> bool {
    let close = |x: Option<Timestamp>, y: Option<Timestamp>| match (x, y) {
        (Some(x), Some(y)) => x.duration_since(y).abs() <= jiff::SignedDuration::from_secs(1),
        _ => false,
    };
    close(a.window_start, b.window_start) && close(a.window_end, b.window_end)
}

/// Why an observation's value cannot be used, if it cannot.
fn unusable(o: &Observation) -> Option<String> {
    if let Some(why) = o.measured.why_apart(o.outcome) {
        return Some(why);
    }
    o.value
        .is_none()
        .then(|| "no value of the compared figure".to_string())
}

/// The comparison of `observations` by `design`; candidates in `order` (points as the
/// sweep writes them), then any other point met, in order of appearance.
pub fn judge(observations: &[Observation], design: &Design, order: &[String]) -> Comparison {
    let mut points: Vec<String> = order
        .iter()
        .filter(|p| **p != design.baseline)
        .cloned()
        .collect();
    for o in observations {
        if o.point != design.baseline && !points.contains(&o.point) {
            points.push(o.point.clone());
        }
    }
    let mut set_apart = Vec::new();
    let mut apart = |o: &Observation, why: String| {
        set_apart.push(SetApart {
            trial: o.trial.clone(),
            point: o.point.clone(),
            why,
        })
    };
    let judgement: Judgement = if design.paired {
        let mut by_pair: BTreeMap<&str, Vec<&Observation>> = BTreeMap::new();
        for o in observations {
            match &o.pair {
                Some(p) => by_pair.entry(p.as_str()).or_default().push(o),
                None => apart(o, "not in a pair".into()),
            }
        }
        let mut groups: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        let mut aa = Vec::new();
        for sides in by_pair.values() {
            let side = |r: PairRole| sides.iter().find(|o| o.side == Some(r)).copied();
            let (Some(b), Some(c)) = (side(PairRole::Baseline), side(PairRole::Candidate)) else {
                for o in sides {
                    apart(o, "its pair's other side is missing".into());
                }
                continue;
            };
            let why = match (unusable(b), unusable(c)) {
                (None, None) if !same_window(b, c) => {
                    Some("the pair's two sides measured different windows".to_string())
                }
                (None, None) => None,
                (Some(w), _) => Some(format!("its pair's baseline side {}: {w}", b.trial)),
                (None, Some(w)) => Some(w),
            };
            if let Some(why) = why {
                apart(c, why.clone());
                apart(b, format!("its partner {} is set apart", c.trial));
                continue;
            }
            let pair = (b.value.unwrap_or_default(), c.value.unwrap_or_default());
            if c.point == design.baseline {
                aa.push(pair);
            } else {
                groups.entry(c.point.as_str()).or_default().push(pair);
            }
        }
        let candidates: Vec<Vec<(f64, f64)>> = points
            .iter()
            .map(|p| groups.remove(p.as_str()).unwrap_or_default())
            .collect();
        compare::paired(&candidates, &aa, design.practical)
    } else {
        let mut values: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for o in observations {
            match unusable(o) {
                Some(why) => apart(o, why),
                None => values
                    .entry(o.point.as_str())
                    .or_default()
                    .push(o.value.unwrap_or_default()),
            }
        }
        let baseline = values.remove(design.baseline.as_str()).unwrap_or_default();
        let candidates: Vec<Vec<f64>> = points
            .iter()
            .map(|p| values.remove(p.as_str()).unwrap_or_default())
            .collect();
        compare::unpaired(&baseline, &candidates, design.practical)
    };
    let variance = judgement.describe_variance();
    let rows = points
        .into_iter()
        .zip(judgement.effects)
        .filter_map(|(p, e)| Some((p, e?)))
        .collect();
    Comparison {
        rows,
        noise: judgement.noise,
        variance,
        set_apart,
        practical: design.practical,
    }
}

/// Every finished trial of the dataset as the comparison reads it, each under its point
/// as the sweep writes it (so "1024Gi" and "1Ti" are one point).
pub fn observations(
    data: &Dataset,
    figure: impl Fn(&TrialResults) -> Option<f64>,
) -> Vec<Observation> {
    data.points()
        .iter()
        .flat_map(|p| p.finished().map(move |t| (p, t)))
        .map(|(p, t)| Observation {
            trial: t.name.clone(),
            point: p.point.describe(),
            pair: t.pair.as_ref().map(|pair| match pair.role {
                PairRole::Candidate => t.name.clone(),
                PairRole::Baseline => pair.partner.clone(),
            }),
            side: t.pair.as_ref().map(|pair| pair.role),
            window_start: t.window_start,
            window_end: t.window_end,
            measured: t.measured(),
            outcome: t.outcome,
            value: t.results.as_ref().and_then(&figure),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::stats::compare::Call;

    fn at(s: i64) -> Option<Timestamp> {
        Some(Timestamp::from_second(1_700_000_000 + s).unwrap())
    }

    /// A pair's two sides over one window [w, w + 100].
    fn pair(id: &str, point: &str, b: f64, c: f64, w: i64) -> [Observation; 2] {
        let side = |role: PairRole, name: String, point: &str, v: f64| Observation {
            trial: name,
            point: point.into(),
            pair: Some(id.into()),
            side: Some(role),
            window_start: at(w),
            window_end: at(w + 100),
            measured: Measured::Full,
            outcome: Some(TrialOutcome::KeptUp),
            value: Some(v),
        };
        [
            side(PairRole::Baseline, format!("{id}-b"), "x=a", b),
            side(PairRole::Candidate, id.into(), point, c),
        ]
    }

    fn design() -> Design {
        Design {
            baseline: "x=a".into(),
            paired: true,
            practical: 0.05,
        }
    }

    #[test]
    fn pairs_are_rebuilt_and_aa_pairs_feed_the_noise_floor() {
        let mut obs: Vec<Observation> = Vec::new();
        for (i, (b, c)) in [(100.0, 120.0), (90.0, 109.0), (110.0, 131.0)]
            .iter()
            .enumerate()
        {
            obs.extend(pair(&format!("p{i}"), "x=b", *b, *c, i as i64 * 200));
            let aa = [1.01, 0.99, 1.005][i];
            obs.extend(pair(&format!("aa{i}"), "x=a", *b, b * aa, i as i64 * 200));
        }
        let c = judge(&obs, &design(), &["x=a".into(), "x=b".into()]);
        assert_eq!(c.rows.len(), 1);
        let (point, e) = &c.rows[0];
        assert_eq!((point.as_str(), e.n, e.df), ("x=b", 3, 4.0));
        assert_eq!(e.call, Call::Different, "{e:?}");
        assert_eq!(c.noise.as_ref().unwrap().n, 3);
        assert!(c.set_apart.is_empty());
        assert!(
            c.text(e).ends_with("3 pairs: different by more than 5%"),
            "{}",
            c.text(e)
        );
    }

    #[test]
    fn cut_windows_failures_and_mismatched_windows_are_set_apart_with_why() {
        let mut obs: Vec<Observation> = Vec::new();
        obs.extend(pair("ok1", "x=b", 100.0, 120.0, 0));
        obs.extend(pair("ok2", "x=b", 100.0, 121.0, 200));
        let mut oom = pair("oom", "x=b", 100.0, 80.0, 400);
        oom[1].measured = Measured::Partial(TrialOutcome::OOMKilled);
        oom[1].outcome = Some(TrialOutcome::OOMKilled);
        let mut crash = pair("crash", "x=b", 100.0, 120.0, 600);
        crash[0].measured = Measured::Nothing;
        crash[0].outcome = Some(TrialOutcome::Crashed);
        let mut shifted = pair("shift", "x=b", 100.0, 120.0, 800);
        shifted[1].window_start = at(830);
        let mut early = pair("early", "x=b", 100.0, 150.0, 1000);
        early[1].measured = Measured::EndedEarly;
        obs.extend(oom);
        obs.extend(crash);
        obs.extend(shifted);
        obs.extend(early);
        let c = judge(&obs, &design(), &[]);
        let e = &c.rows[0].1;
        assert_eq!(e.n, 2, "only the two whole pairs count: {e:?}");
        let why: Vec<String> = c.set_apart_lines();
        assert_eq!(why.len(), 8, "{why:#?}");
        for want in [
            "oom (x=b): OOMKilled: part of its window only",
            "crash (x=b): its pair's baseline side crash-b: Crashed: measured nothing",
            "shift (x=b): the pair's two sides measured different windows",
            "early (x=b): early abort ended its window",
            "early-b (x=a): its partner early is set apart",
        ] {
            assert!(why.iter().any(|w| w == want), "{want} not in {why:#?}");
        }
    }

    #[test]
    fn unpaired_designs_compare_whole_windows_by_point() {
        let obs: Vec<Observation> = [
            ("x=a", 100.0),
            ("x=a", 104.0),
            ("x=a", 98.0),
            ("x=b", 150.0),
            ("x=b", 149.0),
            ("x=b", 153.0),
        ]
        .iter()
        .enumerate()
        .map(|(i, (p, v))| Observation {
            trial: format!("t{i}"),
            point: p.to_string(),
            pair: None,
            side: None,
            window_start: at(i as i64 * 200),
            window_end: at(i as i64 * 200 + 100),
            measured: Measured::Full,
            outcome: Some(TrialOutcome::KeptUp),
            value: Some(*v),
        })
        .collect();
        let c = judge(
            &obs,
            &Design {
                paired: false,
                ..design()
            },
            &[],
        );
        assert_eq!(c.rows[0].1.call, Call::Different, "{:?}", c.rows);
        assert_eq!(c.rows[0].1.n, 3);
        assert_eq!(c.variance, None);
    }
}
