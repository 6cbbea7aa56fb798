//! `valtune plan FILE`: an experiment's trials, node-hours and wall-clock, before
//! anything runs (its strategy's schedule, priced by operator/src/cost.rs).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use valtune::api::ValidatorExperiment;
use valtune::api::settings::human;
use valtune::cost::{Cost, node_hours, plan_cost};

#[derive(clap::Args)]
pub struct Args {
    /// Experiment files (YAML, as you would `kubectl apply` them).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Trials at once (default: each experiment's spec.parallelism).
    #[arg(long)]
    parallelism: Option<u32>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut first = true;
    for (file, vx) in super::read_experiments(&args.files)? {
        let cost =
            plan_cost(&vx.spec, args.parallelism).with_context(|| format!("{}", file.display()))?;
        if !first {
            println!();
        }
        first = false;
        print!("{}", render(&vx, &cost));
    }
    anyhow::ensure!(!first, "no ValidatorExperiment in the files given");
    Ok(())
}

/// The plan as printed. Pure.
pub fn render(vx: &ValidatorExperiment, cost: &Cost) -> String {
    let name = vx.metadata.name.as_deref().unwrap_or("(unnamed)");
    let client = valtune::clients::client_for(&vx.spec.template)
        .map(|c| c.display().to_string())
        .unwrap_or_else(|e| e.to_string());
    // What the strategy runs, in its words.
    let strategy = valtune::strategies::strategy_for(&vx.spec);
    let mut out = format!(
        "experiment {name} ({client}): {}",
        strategy.describe(&vx.spec, &cost.schedule, cost.parallelism)
    );
    let r = &vx.spec.template.resources;
    let memory = vx
        .spec
        .sweep
        .memory
        .as_ref()
        .and_then(|m| m.last().cloned())
        .or(r.memory_limit.clone())
        .or(r.memory.clone())
        .unwrap_or_else(|| "-".into());
    out.push_str(&format!(
        "each trial holds one node ({} CPUs, up to {memory} of memory) for its warm-up (at most {}) and {}\n",
        r.cpu,
        human(cost.warmup_limit),
        match cost.schedule.stage {
            None => format!("a {} window", human(cost.window)),
            Some(stage) => format!("its {stage}'s window (the last {})", human(cost.window)),
        }
    ));
    // A trial runs its warm-up and its window: a stage's own, where its strategy has them.
    let per_trial = |per: Duration| {
        if cost.schedule.stage.is_none() {
            human(per)
        } else {
            let each: Vec<String> = cost
                .schedule
                .stages
                .iter()
                .map(|s| human(per.saturating_sub(cost.window) + s.window))
                .collect();
            each.join(", ")
        }
    };
    let header = match cost.schedule.stage {
        None => "PER TRIAL".to_string(),
        Some(stage) => format!("PER TRIAL (BY {})", stage.to_uppercase()),
    };
    let width = [cost.per_trial.expected, cost.per_trial.worst]
        .map(|p| per_trial(p).len())
        .into_iter()
        .chain([header.len(), 12])
        .max()
        .unwrap_or(12);
    out.push_str(&format!(
        "{:<10} {header:>width$} {:>12} {:>14}\n",
        "", "NODE-HOURS", "WALL-CLOCK"
    ));
    for (label, per, nh, wall) in [
        (
            "expected",
            cost.per_trial.expected,
            cost.node_hours.expected,
            cost.wall_clock.expected,
        ),
        (
            "at most",
            cost.per_trial.worst,
            cost.node_hours.worst,
            cost.wall_clock.worst,
        ),
    ] {
        out.push_str(&format!(
            "{label:<10} {:>width$} {:>12} {:>14}\n",
            per_trial(per),
            node_hours(nh),
            human(wall)
        ));
    }
    out.push_str(&format!(
        "expected warm-up: {}, {}\nat most: every warm-up reaching trial.warmup.timeout; the wall-clock assumes {} free {}\n",
        human(cost.warmup.typical.min(cost.warmup_limit)),
        cost.warmup.basis,
        cost.parallelism,
        if cost.parallelism == 1 { "node" } else { "nodes" }
    ));
    if let Some(grid) = &cost.grid {
        out.push_str(&format!(
            "a grid of the same values: about {} node-hours, {} wall-clock (each trial counted at its whole window)\n",
            node_hours(grid.node_hours),
            human(grid.wall_clock)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_lists_the_trials_and_both_cases() {
        let vx: ValidatorExperiment = serde_saphyr::from_str(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: ram}\nspec:\n  template: {agave: {image: a}, resources: {cpu: 64}}\n  sweep: {memory: [512Gi, 1Ti]}\n  trial: {warmup: {timeout: 4h}, measurement: {duration: 12h}}\n",
        )
        .unwrap();
        let cost = plan_cost(&vx.spec, Some(1)).unwrap();
        let out = render(&vx, &cost);
        assert!(
            out.starts_with("experiment ram (Agave): 2 trials, 1 at a time\n"),
            "{out}"
        );
        assert!(out.contains("memory=1Ti"), "{out}");
        assert!(out.contains("64 CPUs, up to 1Ti of memory"), "{out}");
        assert!(
            out.contains("expected            14h           28            28h"),
            "{out}"
        );
        assert!(
            out.contains("at most             16h           32            32h"),
            "{out}"
        );
    }

    /// Successive halving's trials run their rung's window, not the full one.
    #[test]
    fn successive_halving_shows_each_rungs_trial() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../manifests/examples/firedancer-tiles-halving.yaml"
        );
        let vx: ValidatorExperiment =
            serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let out = render(&vx, &plan_cost(&vx.spec, None).unwrap());
        // A 30m warm-up and rungs of 10m, 30m and 1h30m.
        assert!(
            out.contains("           PER TRIAL (BY RUNG)   NODE-HOURS     WALL-CLOCK\nexpected           40m, 1h, 2h           11             5h\n"),
            "{out}"
        );
    }

    #[test]
    fn a_bisection_lists_its_values_and_the_grid_beside_it() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../manifests/examples/agave-ram-bisection.yaml"
        );
        let vx: ValidatorExperiment =
            serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let out = render(&vx, &plan_cost(&vx.spec, None).unwrap());
        assert!(
            out.starts_with("experiment agave-ram-bisect (Agave): a bisection over 21 values, about 8 trials (10 at most) wherever the answer lies, 3 at a time (a grid: 21 trials)\n  values: memory=128Gi, memory=192Gi,"),
            "{out}"
        );
        assert!(
            out.contains("a grid of the same values: about 294 node-hours, 98h wall-clock"),
            "{out}"
        );
    }
}
