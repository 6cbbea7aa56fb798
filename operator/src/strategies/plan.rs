//! A trial to run, by point and repetition, and its deterministic name; the grid's plan.

use sha2::{Digest, Sha256};

use crate::api::sweep::{SweepSpec, TrialPoint};
use crate::api::trial::PairRole;

/// A point and the repetition it runs as (1-based), and the pair it is part of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedTrial {
    pub point: TrialPoint,
    pub repetition: i32,
    pub pair: Option<PairSlot>,
}

/// A trial's side of a pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairSlot {
    pub role: PairRole,
    /// The partner's point (the baseline's for a candidate; in an A/A pair, its own).
    pub with: TrialPoint,
    /// The node it is pinned to, when the strategy matched nodes (not part of its name).
    pub node: Option<String>,
}

impl PlannedTrial {
    /// The trial's object name: the experiment's name and a hash of point and repetition.
    /// Deterministic, so a restarted operator finds the trials it made, and a spec edit
    /// that keeps a point keeps its trial. Running clusters hold trials by these names:
    /// the hash input must never change.
    pub fn name(&self, experiment: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.point.canonical().as_bytes());
        h.update(b"\0rep=");
        h.update(self.repetition.to_string().as_bytes());
        // A pair's trials: the partner's point and the side; a baseline trial is in every
        // pair, so both are needed. Unpaired trials hash as they always have.
        if let Some(pair) = &self.pair {
            h.update(b"\0pair=");
            h.update(pair.with.canonical().as_bytes());
            h.update(b"\0role=");
            h.update(pair.role.as_str().as_bytes());
        }
        let digest = h.finalize();
        let hex: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
        format!("{experiment}-{hex}")
    }

    /// Its partner, for a trial of a pair (on no node yet).
    pub fn partner(&self) -> Option<PlannedTrial> {
        let pair = self.pair.as_ref()?;
        Some(PlannedTrial {
            point: pair.with.clone(),
            repetition: self.repetition,
            pair: Some(PairSlot {
                role: pair.role.other(),
                with: self.point.clone(),
                node: None,
            }),
        })
    }
}

/// Every trial of a sweep: all points for repetition 1, then all for 2, and so on, so a
/// partial run covers the whole sweep before it repeats any point.
pub fn plan(sweep: &SweepSpec, repetitions: i32) -> Vec<PlannedTrial> {
    let points = sweep.expand();
    (1..=repetitions.max(1))
        .flat_map(|repetition| {
            points.iter().map(move |point| PlannedTrial {
                point: point.clone(),
                repetition,
                pair: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ram_sweep() -> SweepSpec {
        SweepSpec {
            memory: Some(
                ["128Gi", "256Gi", "512Gi", "1Ti", "1536Gi"]
                    .map(String::from)
                    .to_vec(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn plan_runs_every_point_before_repeating_one() {
        let planned = plan(&ram_sweep(), 2);
        assert_eq!(planned.len(), 10);
        assert!(planned[..5].iter().all(|t| t.repetition == 1));
        assert!(planned[5..].iter().all(|t| t.repetition == 2));
        assert_eq!(planned[0].point, planned[5].point);
    }

    #[test]
    fn trial_names_are_deterministic_unique_and_short() {
        let planned = plan(&ram_sweep(), 2);
        let names: Vec<String> = planned.iter().map(|t| t.name("agave-ram")).collect();
        let again: Vec<String> = plan(&ram_sweep(), 2)
            .iter()
            .map(|t| t.name("agave-ram"))
            .collect();
        assert_eq!(names, again);
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        // 40-character experiment names leave room for the suffix within 63 (label values).
        assert_eq!(planned[0].name(&"x".repeat(40)).len(), 51);
    }

    /// Running clusters have trials by these names: a change of the hash input would
    /// orphan them and start every point again.
    #[test]
    fn trial_names_are_pinned() {
        let planned = plan(&ram_sweep(), 2);
        assert_eq!(planned[2].name("agave-ram"), "agave-ram-230ba5c771");
        assert_eq!(planned[7].name("agave-ram"), "agave-ram-fe5e1a46f3");
        let mixed: SweepSpec = serde_saphyr::from_str(
            "cpu: [32]\nthreads: [{name: bankingThreads, values: [8]}]\nheap: [5Gi]\nknobs: [{name: arenas, env: MALLOC_ARENA_MAX, values: ['2']}]\n",
        )
        .unwrap();
        assert_eq!(plan(&mixed, 1)[0].name("besu-mix"), "besu-mix-8aa421ccca");
    }

    #[test]
    fn equal_memory_written_differently_is_the_same_trial() {
        let a = PlannedTrial {
            point: TrialPoint {
                memory: Some("1Ti".into()),
                ..Default::default()
            },
            repetition: 1,
            pair: None,
        };
        let b = PlannedTrial {
            point: TrialPoint {
                memory: Some("1024Gi".into()),
                ..Default::default()
            },
            repetition: 1,
            pair: None,
        };
        assert_eq!(a.name("e"), b.name("e"));
        assert_eq!(b.point.describe(), "memory=1Ti");
    }
}
