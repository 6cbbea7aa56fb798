//! Paired comparison (`comparison.mode: paired`): every other point runs side by side
//! with a trial of the baseline, started in one pass on two matched nodes (the same value
//! of `matchNodesBy`), and the two swap nodes from one repetition to the next, so neither
//! the chain's load at that hour nor a node's own speed favours one side (duet
//! benchmarking, Bulej et al., ICPE 2020). `aaCalibration` adds a baseline-against-
//! baseline pair per repetition: the noise floor. A pair starts whole or not at all, and
//! `parallelism` counts pairs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::plan::{PairSlot, PlannedTrial};
use super::schedule::{Bounds, Schedule, Stage};
use super::{Decision, Done, Strategy, TrialGroup, failed_limit_reached};
use crate::api::experiment::ValidatorExperimentSpec;
use crate::api::sweep::TrialPoint;
use crate::api::trial::PairRole;
use crate::results::dataset::{Dataset, NodeSlot};

pub struct Paired;

/// One pair of the plan: the baseline's side and the candidate's.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedPair {
    pub baseline: PlannedTrial,
    pub candidate: PlannedTrial,
}

impl PlannedPair {
    fn new(baseline: &TrialPoint, candidate: &TrialPoint, repetition: i32) -> Self {
        let side = |role: PairRole, point: &TrialPoint, with: &TrialPoint| PlannedTrial {
            point: point.clone(),
            repetition,
            pair: Some(PairSlot {
                role,
                with: with.clone(),
                node: None,
            }),
        };
        PlannedPair {
            baseline: side(PairRole::Baseline, baseline, candidate),
            candidate: side(PairRole::Candidate, candidate, baseline),
        }
    }
}

/// Every pair, repetition by repetition: each other point against the baseline in the
/// sweep's order, then the A/A pair.
pub fn plan_pairs(spec: &ValidatorExperimentSpec, baseline: &TrialPoint) -> Vec<PlannedPair> {
    let aa = spec.comparison.as_ref().is_some_and(|c| c.aa_calibration);
    let key = baseline.canonical();
    let others: Vec<TrialPoint> = spec
        .sweep
        .expand()
        .into_iter()
        .filter(|p| p.canonical() != key)
        .collect();
    (1..=spec.trial.repetitions.max(1))
        .flat_map(|rep| {
            let mut v: Vec<PlannedPair> = others
                .iter()
                .map(|p| PlannedPair::new(baseline, p, rep))
                .collect();
            if aa {
                v.push(PlannedPair::new(baseline, baseline, rep));
            }
            v
        })
        .collect()
}

impl Strategy for Paired {
    fn name(&self) -> &'static str {
        "paired"
    }

    fn runs(&self, spec: &ValidatorExperimentSpec) -> bool {
        spec.comparison.as_ref().is_some_and(|c| c.paired())
    }

    fn decide(
        &self,
        experiment: &str,
        spec: &ValidatorExperimentSpec,
        trials: &Dataset,
    ) -> Decision {
        let baseline = spec
            .comparison
            .as_ref()
            .and_then(|c| trials.find_point(&c.baseline_values()))
            .map(|p| p.point.clone());
        let Some(baseline) = baseline else {
            return Decision {
                trials: Vec::new(),
                start: Vec::new(),
                stop: Vec::new(),
                expected: 0,
                done: Some(Done {
                    reason: "NoBaseline",
                    message: "comparison.baseline is not a point of the sweep".into(),
                }),
            };
        };
        let pairs = plan_pairs(spec, &baseline);
        let name = |p: &PlannedTrial| p.name(experiment);
        let names: Vec<String> = pairs
            .iter()
            .flat_map(|p| [name(&p.baseline), name(&p.candidate)])
            .collect();
        let tally = trials.tally(&names);
        let running = |n: &str| trials.trial(n).is_some_and(|t| !t.phase.is_finished());
        // Parallelism counts pairs: a pair holds a slot while either side runs; a started
        // trial outside the plan (its point left the sweep) holds one of its own.
        let in_pairs: usize = names.iter().filter(|n| running(n)).count();
        let pairs_running = pairs
            .iter()
            .filter(|p| running(&name(&p.baseline)) || running(&name(&p.candidate)))
            .count();
        let active_slots = pairs_running + tally.active.saturating_sub(in_pairs);
        let held = spec.suspend || failed_limit_reached(spec, tally.failed.len());
        let mut room = if held {
            0
        } else {
            (spec.parallelism.max(1) as usize).saturating_sub(active_slots)
        };
        let mut free = Free::new(trials);
        let mut start = Vec::new();
        for (i, pair) in pairs.iter().enumerate() {
            let b = trials.trial(&name(&pair.baseline));
            let c = trials.trial(&name(&pair.candidate));
            match (b, c) {
                (Some(_), Some(_)) => continue,
                (None, None) => {
                    if room == 0 {
                        break;
                    }
                    // Where the previous repetition of this pair ran: swap them.
                    let before = i
                        .checked_sub(pairs.len() / spec.trial.repetitions.max(1) as usize)
                        .map(|j| &pairs[j]);
                    let nodes_before = before.map(|p| {
                        let node = |t: &PlannedTrial| {
                            trials
                                .trial(&name(t))
                                .and_then(|r| r.pinned.clone().or(r.node.clone()))
                        };
                        (node(&p.baseline), node(&p.candidate))
                    });
                    let Some((nb, nc)) = free.take_pair(nodes_before) else {
                        // Not two matched nodes free: no later pair fits either.
                        break;
                    };
                    room -= 1;
                    start.push(TrialGroup(vec![
                        on(&pair.baseline, nb),
                        on(&pair.candidate, nc),
                    ]));
                }
                // Half of it exists (the other was deleted by hand, or a pass failed
                // between the two creates): the missing side, beside its partner.
                (Some(there), None) | (None, Some(there)) => {
                    let missing = if b.is_none() {
                        &pair.baseline
                    } else {
                        &pair.candidate
                    };
                    if there.phase.is_finished() {
                        if room == 0 {
                            continue;
                        }
                        room -= 1;
                    }
                    let near = there.pinned.clone().or(there.node.clone());
                    let Some(node) = free.take_one(near.as_deref()) else {
                        continue;
                    };
                    start.push(TrialGroup(vec![on(missing, node)]));
                }
            }
        }
        let done = (tally.finished == names.len()).then(|| Done {
            reason: "AllTrialsFinished",
            message: format!(
                "all {} pairs finished ({} trials failed)",
                pairs.len(),
                tally.failed.len()
            ),
        });
        Decision {
            expected: names.len(),
            trials: names,
            start,
            stop: Vec::new(),
            done,
        }
    }

    /// Two trials a pair, `parallelism` pairs at a time: each other point against the
    /// baseline, and the A/A pair, per repetition.
    fn schedule(
        &self,
        spec: &ValidatorExperimentSpec,
        parallelism: u32,
        window: Duration,
    ) -> Schedule {
        let aa = spec.comparison.as_ref().is_some_and(|c| c.aa_calibration);
        let pairs = (spec.sweep.points() as u32).saturating_sub(1) + u32::from(aa);
        let pairs = pairs * spec.trial.repetitions.max(1) as u32;
        let waves = pairs.div_ceil(parallelism.max(1));
        Schedule {
            stages: vec![Stage {
                trials: Bounds::exactly(2 * pairs),
                waves: Bounds::exactly(waves),
                window,
            }],
            stage: None,
            searches: false,
        }
    }
}

/// `p` pinned to `node` (None: nodes unknown, the scheduler places it).
fn on(p: &PlannedTrial, node: Option<String>) -> PlannedTrial {
    let mut p = p.clone();
    if let Some(slot) = p.pair.as_mut() {
        slot.node = node;
    }
    p
}

/// The nodes still free in this pass, by hostname; `None` when nodes were not observed.
struct Free {
    nodes: Option<Vec<NodeSlot>>,
    /// Every observed node's class, by name and by hostname (busy ones too).
    classes: BTreeMap<String, String>,
}

impl Free {
    /// The observed nodes no valtune pod holds and no unfinished trial is pinned to or
    /// runs on.
    fn new(trials: &Dataset) -> Self {
        let taken: BTreeSet<&str> = trials
            .trials()
            .filter(|t| !t.phase.is_finished())
            .flat_map(|t| [t.pinned.as_deref(), t.node.as_deref()])
            .flatten()
            .collect();
        let nodes = trials.nodes().map(|ns| {
            ns.iter()
                .filter(|n| {
                    !n.busy
                        && !taken.contains(n.hostname.as_str())
                        && !taken.contains(n.name.as_str())
                })
                .cloned()
                .collect()
        });
        let classes = trials
            .nodes()
            .unwrap_or_default()
            .iter()
            .flat_map(|n| {
                [
                    (n.name.clone(), n.class.clone()),
                    (n.hostname.clone(), n.class.clone()),
                ]
            })
            .collect();
        Free { nodes, classes }
    }

    fn class_of(&self, node: &str) -> Option<String> {
        self.classes.get(node).cloned()
    }

    fn take(&mut self, hostname: &str) -> Option<String> {
        let all = self.nodes.as_mut()?;
        let i = all.iter().position(|n| n.hostname == hostname)?;
        Some(all.remove(i).hostname)
    }

    /// Two free nodes of one class for (baseline, candidate): the previous repetition's
    /// nodes swapped when both are free, else the first class with two free nodes,
    /// keeping each side off the node it had. `Some((None, None))` when nodes are
    /// unknown.
    #[allow(clippy::type_complexity)]
    fn take_pair(
        &mut self,
        before: Option<(Option<String>, Option<String>)>,
    ) -> Option<(Option<String>, Option<String>)> {
        let Some(all) = self.nodes.as_ref() else {
            return Some((None, None));
        };
        let (had_b, had_c) = before.unwrap_or_default();
        let free = |n: &Option<String>| {
            n.as_ref()
                .is_some_and(|n| all.iter().any(|s| &s.hostname == n))
        };
        if free(&had_b) && free(&had_c) && had_b != had_c {
            let (b, c) = (had_c.clone()?, had_b.clone()?);
            if self.class_of(&b) == self.class_of(&c) {
                return Some((self.take(&b), self.take(&c)));
            }
        }
        let mut by_class: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for n in all {
            by_class.entry(&n.class).or_default().push(&n.hostname);
        }
        let (_, mut two) = by_class.into_iter().find(|(_, ns)| ns.len() >= 2)?;
        // The baseline avoids the node it had, where it can.
        if had_b.as_deref() == Some(two[0]) {
            two.swap(0, 1);
        }
        let (b, c) = (two[0].to_string(), two[1].to_string());
        Some((self.take(&b), self.take(&c)))
    }

    /// One free node, of `near`'s class when `near` is known.
    fn take_one(&mut self, near: Option<&str>) -> Option<Option<String>> {
        let Some(all) = self.nodes.as_ref() else {
            return Some(None);
        };
        // The partner's node holds its pod, so its class comes from every node's.
        let class = near.and_then(|n| self.class_of(n));
        let pick = all
            .iter()
            .find(|n| class.as_ref().is_none_or(|c| &n.class == c))?
            .hostname
            .clone();
        Some(self.take(&pick))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::trial::{TrialPair, TrialPhase};
    use crate::results::dataset::TrialRecord;

    const EXPERIMENT: &str = "alloc";

    /// The allocators against glibc, with `extra` (which may give its own comparison).
    fn spec(extra: &str) -> ValidatorExperimentSpec {
        let comparison = if extra.contains("comparison:") {
            ""
        } else {
            "comparison: {baseline: {allocator: glibc}}\n"
        };
        serde_saphyr::from_str(&format!(
            "template: {{besu: {{image: besu}}, resources: {{memory: 32Gi}}}}\n\
             sweep: {{allocator: [glibc, jemalloc, tcmalloc]}}\n{comparison}{extra}"
        ))
        .unwrap()
    }

    fn pairs_of(spec: &ValidatorExperimentSpec) -> Vec<PlannedPair> {
        let data = Dataset::new(&spec.sweep, []);
        let c = spec.comparison.as_ref().unwrap();
        plan_pairs(spec, &data.find_point(&c.baseline_values()).unwrap().point)
    }

    /// Nodes bm-1.. of class `r6a` (and `other` ones of class `c7`), those in `busy` held.
    fn nodes(n: usize, other: usize, busy: &[usize]) -> Vec<NodeSlot> {
        (1..=n + other)
            .map(|i| NodeSlot {
                name: format!("bm-{i}"),
                hostname: format!("bm-{i}"),
                class: if i <= n { "r6a" } else { "c7" }.into(),
                busy: busy.contains(&i),
            })
            .collect()
    }

    /// The trials of pair `i` in these phases, on these nodes (None: not created).
    fn pair(
        spec: &ValidatorExperimentSpec,
        i: usize,
        phases: [Option<TrialPhase>; 2],
        on: [&str; 2],
    ) -> Vec<TrialRecord> {
        let p = &pairs_of(spec)[i];
        [&p.baseline, &p.candidate]
            .into_iter()
            .zip(phases)
            .zip(on)
            .filter_map(|((t, phase), node)| {
                Some(TrialRecord {
                    name: t.name(EXPERIMENT),
                    point: t.point.clone(),
                    repetition: t.repetition,
                    phase: phase?,
                    pair: Some(TrialPair {
                        role: t.pair.as_ref()?.role,
                        partner: t.partner()?.name(EXPERIMENT),
                    }),
                    pinned: Some(node.to_string()),
                    ..Default::default()
                })
            })
            .collect()
    }

    /// What a decision starts: per group, (pair index, side nodes).
    fn started(spec: &ValidatorExperimentSpec, d: &Decision) -> Vec<(usize, Vec<Option<String>>)> {
        let pairs = pairs_of(spec);
        d.start
            .iter()
            .map(|g| {
                let i = pairs
                    .iter()
                    .position(|p| {
                        g.0.iter().any(|t| {
                            t.name(EXPERIMENT) == p.baseline.name(EXPERIMENT)
                                || t.name(EXPERIMENT) == p.candidate.name(EXPERIMENT)
                        })
                    })
                    .unwrap();
                (
                    i,
                    g.0.iter()
                        .map(|t| t.pair.as_ref().unwrap().node.clone())
                        .collect(),
                )
            })
            .collect()
    }

    fn s(v: &[&str]) -> Vec<Option<String>> {
        v.iter().map(|n| Some(n.to_string())).collect()
    }

    #[test]
    fn the_plan_pairs_every_point_with_the_baseline_and_names_them_apart() {
        let spec = spec(
            "trial: {repetitions: 2}\ncomparison: {baseline: {allocator: glibc}, aaCalibration: true}",
        );
        let pairs = pairs_of(&spec);
        // jemalloc, tcmalloc and the A/A pair, twice.
        assert_eq!(pairs.len(), 6);
        assert_eq!(pairs[1].candidate.point.describe(), "allocator=tcmalloc");
        assert_eq!(pairs[2].candidate.point, pairs[2].baseline.point);
        let mut names: Vec<String> = pairs
            .iter()
            .flat_map(|p| [p.baseline.name(EXPERIMENT), p.candidate.name(EXPERIMENT)])
            .collect();
        assert_eq!(
            names[0],
            pairs[0].candidate.partner().unwrap().name(EXPERIMENT)
        );
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 12, "every side of every pair has its own name");
    }

    /// The table: spec additions, observed nodes, the trials there are, and the groups
    /// started (pair index, nodes of baseline and candidate).
    #[test]
    fn pairs_start_whole_on_matched_nodes_and_swap_them() {
        use TrialPhase::*;
        type Trials = fn(&ValidatorExperimentSpec) -> Vec<TrialRecord>;
        type Case = (
            &'static str,
            &'static str,
            Option<Vec<NodeSlot>>,
            Trials,
            Vec<(usize, Vec<Option<String>>)>,
        );
        let cases: Vec<Case> = vec![
            (
                "parallelism counts pairs: two pairs on four nodes",
                "parallelism: 2",
                Some(nodes(4, 0, &[])),
                |_| vec![],
                vec![(0, s(&["bm-1", "bm-2"])), (1, s(&["bm-3", "bm-4"]))],
            ),
            (
                "three nodes: one pair, never half of the next",
                "parallelism: 2",
                Some(nodes(3, 0, &[])),
                |_| vec![],
                vec![(0, s(&["bm-1", "bm-2"]))],
            ),
            (
                "a node held by another pod does not count",
                "parallelism: 2",
                Some(nodes(4, 0, &[2])),
                |_| vec![],
                vec![(0, s(&["bm-1", "bm-3"]))],
            ),
            (
                "matched nodes only: one of each class is no pair",
                "parallelism: 2",
                Some(nodes(1, 2, &[])),
                |_| vec![],
                vec![(0, s(&["bm-2", "bm-3"]))],
            ),
            (
                "a running pair holds a slot of parallelism and its nodes",
                "parallelism: 2",
                Some(nodes(4, 0, &[])),
                |s| pair(s, 0, [Some(Measuring), Some(Succeeded)], ["bm-1", "bm-2"]),
                vec![(1, s(&["bm-2", "bm-3"]))],
            ),
            (
                "the next repetition swaps the pair's nodes",
                "trial: {repetitions: 2}",
                Some(nodes(4, 0, &[])),
                |s| {
                    [
                        pair(s, 0, [Some(Succeeded); 2], ["bm-3", "bm-1"]),
                        pair(s, 1, [Some(Succeeded); 2], ["bm-2", "bm-4"]),
                    ]
                    .concat()
                },
                vec![(2, s(&["bm-1", "bm-3"]))],
            ),
            (
                "nodes unknown: the pair starts, the scheduler places it",
                "",
                None,
                |_| vec![],
                vec![(0, vec![None, None])],
            ),
            (
                "half a pair (one deleted by hand): the missing side beside it",
                "",
                Some(nodes(3, 0, &[])),
                |s| pair(s, 0, [Some(Measuring), None], ["bm-1", "-"]),
                vec![(0, s(&["bm-2"]))],
            ),
            (
                "suspended: nothing",
                "suspend: true",
                Some(nodes(4, 0, &[])),
                |_| vec![],
                vec![],
            ),
        ];
        for (case, extra, observed, trials, want) in cases {
            let spec = spec(extra);
            let mut data = Dataset::new(&spec.sweep, trials(&spec));
            if let Some(n) = observed {
                data = data.with_nodes(n);
            }
            let d = Paired.decide(EXPERIMENT, &spec, &data);
            assert_eq!(started(&spec, &d), want, "{case}");
            assert!(
                d.start
                    .iter()
                    .all(|g| g.0.len() == 2 || case.starts_with("half")),
                "{case}"
            );
            assert_eq!(d.expected, 2 * pairs_of(&spec).len(), "{case}");
        }
    }

    #[test]
    fn done_once_every_pair_finished() {
        use TrialPhase::*;
        let spec = spec("");
        let trials = [
            pair(&spec, 0, [Some(Succeeded), Some(Failed)], ["a", "b"]),
            pair(&spec, 1, [Some(Succeeded); 2], ["a", "b"]),
        ]
        .concat();
        let d = Paired.decide(EXPERIMENT, &spec, &Dataset::new(&spec.sweep, trials));
        assert_eq!(
            d.done.unwrap().message,
            "all 2 pairs finished (1 trials failed)"
        );
    }
}
