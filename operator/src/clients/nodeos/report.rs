//! How nodeos results read in `valtune report`: seed 002's figures (in sync or behind,
//! swapping, writes per second) and its conclusion, the active working set (the memory
//! budget less the largest memory pressure that kept up).

use std::collections::BTreeMap;

use crate::api::quantity::parse_quantity;
use crate::api::trial::{TrialOutcome, TrialResults, ValidatorTrial};
use crate::clients::profile::{Column, Objective};

pub const COLUMNS: [Column; 9] = [
    Column {
        header: "FINAL LAG blk",
        value: |r| r.final_lag,
    },
    Column {
        header: "MAX LAG blk",
        value: |r| r.max_lag,
    },
    Column {
        header: "CATCH-UP blk/s",
        value: |r| r.figure("catchUpBlocksPerSecond"),
    },
    Column {
        header: "BLK/s",
        value: |r| r.figure("blocksPerSecond"),
    },
    Column {
        header: "MAX RSS GiB",
        value: |r| r.max_rss_gib,
    },
    Column {
        header: "MAX SWAP GiB",
        value: |r| r.figure("maxSwapGiB"),
    },
    Column {
        header: "MAJ FLT/s",
        value: |r| r.major_faults_per_second,
    },
    Column {
        header: "WRITES/s",
        value: |r| r.figure("diskWritesPerSecond"),
    },
    // The chain's load in the window, beside the results it explains.
    Column {
        header: "TX/BLOCK",
        value: |r| r.figure(super::profile::TX_PER_BLOCK),
    },
];

/// Among points that kept up (e.g. map modes), the one that faults least.
pub const OBJECTIVE: Objective = Objective {
    name: "major page faults per second",
    value: |r| r.major_faults_per_second,
    higher_is_better: false,
};

pub fn summary(r: &TrialResults) -> String {
    let f = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    format!(
        "{} blocks behind at the end (max {}), {} blocks/s, catch-up {} blocks/s, max RSS {} GiB, max swap {} GiB, {} major faults/s, {} writes/s",
        f(r.final_lag),
        f(r.max_lag),
        f(r.figure("blocksPerSecond")),
        f(r.figure("catchUpBlocksPerSecond")),
        f(r.max_rss_gib),
        f(r.figure("maxSwapGiB")),
        f(r.major_faults_per_second),
        f(r.figure("diskWritesPerSecond")),
    )
}

/// The memory budget and memory pressure of a trial, in bytes.
pub fn budget_and_pressure(t: &ValidatorTrial) -> Option<(u128, u128)> {
    let r = &t.spec.template.resources;
    let budget = parse_quantity(r.memory_limit.as_ref().or(r.memory.as_ref())?).ok()?;
    let hog = match t.spec.point.settings.get("memoryPressure") {
        Some(q) => parse_quantity(q).ok()?,
        None => 0,
    };
    Some((budget, hog))
}

fn gib(bytes: u128) -> String {
    let g = bytes as f64 / (1u64 << 30) as f64;
    if (g - g.round()).abs() < 0.05 {
        format!("{} GiB", g.round())
    } else {
        format!("{g:.1} GiB")
    }
}

/// Seed 002's conclusion, per memory budget of a memoryPressure sweep: the active working
/// set is about the budget less the largest pressure whose every finished trial kept up
/// (derived, as the seed derived its 10 GB, not measured).
pub fn working_set(trials: &[ValidatorTrial]) -> Vec<String> {
    // budget -> pressure -> outcomes of its finished trials
    let mut by: BTreeMap<u128, BTreeMap<u128, Vec<TrialOutcome>>> = BTreeMap::new();
    for t in trials {
        if !t.spec.point.settings.contains_key("memoryPressure") {
            continue;
        }
        let (Some((budget, hog)), Some(outcome)) = (
            budget_and_pressure(t),
            t.status.as_ref().and_then(|s| s.outcome),
        ) else {
            continue;
        };
        by.entry(budget)
            .or_default()
            .entry(hog)
            .or_default()
            .push(outcome);
    }
    let mut notes = Vec::new();
    for (budget, pressures) in by {
        let kept = |o: &Vec<TrialOutcome>| o.iter().all(|o| *o == TrialOutcome::KeptUp);
        let measured = |o: &Vec<TrialOutcome>| o.iter().all(|o| o.is_result());
        let best = pressures
            .iter()
            .filter(|(_, o)| kept(o))
            .map(|(h, _)| *h)
            .max();
        let Some(best) = best else {
            notes.push(format!(
                "no memory pressure kept up on a {} budget: the active working set is larger than it",
                gib(budget)
            ));
            continue;
        };
        let worse: Vec<String> = pressures
            .iter()
            .filter(|(h, o)| **h > best && measured(o) && !kept(o))
            .map(|(h, o)| {
                let what: Vec<&str> = o.iter().map(|o| o.as_str()).collect();
                format!("{} {}", gib(*h), what.join("/"))
            })
            .collect();
        let set = gib(budget - best);
        let mut line = format!(
            "active working set about {} - {} = {set} (the largest memory pressure that kept up on a {} budget",
            gib(budget),
            gib(best),
            gib(budget)
        );
        if worse.is_empty() {
            line.push_str(&format!("; nothing larger failed, so at most {set})"));
        } else {
            line.push_str(&format!("; {})", worse.join(", ")));
        }
        notes.push(line);
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(hog: &str, outcome: &str) -> ValidatorTrial {
        serde_saphyr::from_str(&format!(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorTrial\nmetadata: {{name: t-{hog}}}\nspec:\n  experiment: e\n  point: {{settings: {{memoryPressure: '{hog}'}}}}\n  repetition: 1\n  template: {{nodeos: {{image: waxnode}}, resources: {{memory: 8Gi, memoryLimit: 16Gi}}}}\n  settings: {{}}\n  metrics: {{}}\nstatus:\n  phase: Succeeded\n  outcome: {outcome}\n"
        ))
        .unwrap()
    }

    #[test]
    fn the_working_set_is_the_budget_less_the_largest_pressure_that_kept_up() {
        let notes = working_set(&[
            trial("0", "KeptUp"),
            trial("6Gi", "KeptUp"),
            trial("8Gi", "FellBehind"),
        ]);
        assert_eq!(
            notes,
            vec![
                "active working set about 16 GiB - 6 GiB = 10 GiB (the largest memory pressure that kept up on a 16 GiB budget; 8 GiB FellBehind)"
            ]
        );
        let notes = working_set(&[trial("0", "KeptUp"), trial("4Gi", "KeptUp")]);
        assert!(notes[0].contains("= 12 GiB") && notes[0].contains("at most 12 GiB"));
        let notes = working_set(&[trial("6Gi", "FellBehind")]);
        assert!(notes[0].starts_with("no memory pressure kept up on a 16 GiB budget"));
        // Without a memoryPressure sweep there is nothing to conclude.
        assert!(working_set(&[]).is_empty());
    }
}
