//! The experiment's admission rules that depend on its strategy, generated from
//! [`STRATEGIES`]: at most one strategy set under `spec.strategy`, a sweep no larger
//! than maxTrials unless maxTrials bounds the strategy itself, and each strategy's own
//! rules. crd.rs adds them to the experiment's CRD.

use kube::core::Rule;

use super::STRATEGIES;
use crate::api::experiment::MAX_TRIALS_CAP;
use crate::api::sweep::trial_count_cel;

/// Every strategy-dependent rule, on the experiment spec.
pub fn rules() -> Vec<Rule> {
    let mut rules = vec![max_trials(), one_strategy()];
    rules.extend(STRATEGIES.iter().flat_map(|s| s.rules()));
    rules
}

/// The CEL test that an experiment sets `spec.strategy.FIELD`.
fn set(field: &str) -> String {
    format!("(has(self.strategy) && has(self.strategy.{field}))")
}

/// The sweep's trials fit maxTrials, unless the strategy runs a part of the sweep and
/// stops at maxTrials.
fn max_trials() -> Rule {
    // A messageExpression quoting the count would be clearer, but the API server's cost
    // estimate for string() in it exceeds the budget, so the message explains the sum.
    let bounded: Vec<String> = STRATEGIES
        .iter()
        .filter(|s| s.bounded_by_max_trials())
        .filter_map(|s| s.setting())
        .map(|s| set(s.field))
        .chain([format!("{} <= self.maxTrials", trial_count_cel())])
        .collect();
    Rule::new(bounded.join(" || "))
        .message(format!(
            "the sweep asks for more trials than maxTrials (trials = the product of the swept value counts times trial.repetitions): sweep fewer values, lower trial.repetitions, or raise maxTrials (at most {MAX_TRIALS_CAP})"
        ).as_str())
        .field_path(".maxTrials")
}

/// At most one of the strategies set under `spec.strategy`.
fn one_strategy() -> Rule {
    let settings: Vec<_> = STRATEGIES.iter().filter_map(|s| s.setting()).collect();
    let set: Vec<String> = settings
        .iter()
        .map(|s| format!("has(self.strategy.{})", s.field))
        .collect();
    let each: Vec<String> = settings
        .iter()
        .map(|s| format!("strategy.{} {}", s.field, s.does))
        .collect();
    Rule::new(format!(
        "!has(self.strategy) || [{}].filter(x, x).size() <= 1",
        set.join(", ")
    ))
    .message(format!("set one strategy: {}", each.join(", ")).as_str())
    .field_path(".strategy")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(r: &Rule) -> serde_json::Value {
        serde_json::to_value(r).unwrap()
    }

    #[test]
    fn the_rules_come_from_every_strategy() {
        let rules: Vec<serde_json::Value> = rules().iter().map(json).collect();
        let text = |i: usize, key: &str| rules[i][key].as_str().unwrap().to_string();
        // maxTrials bounds the bisection itself; the others run the sweep they are given.
        assert!(
            text(0, "rule").starts_with(
                "(has(self.strategy) && has(self.strategy.bisection)) || (has(self.sweep.memory)"
            ),
            "{}",
            text(0, "rule")
        );
        // (Tests see the toy strategy too, listed after these.)
        assert!(
            text(1, "rule").starts_with("!has(self.strategy) || [has(self.strategy.bisection), has(self.strategy.successiveHalving)") && text(1, "rule").ends_with("].filter(x, x).size() <= 1"),
            "{}",
            text(1, "rule")
        );
        assert!(
            text(1, "message").starts_with("set one strategy: strategy.bisection searches one ordered parameter, strategy.successiveHalving finds the best point of any sweep"),
            "{}",
            text(1, "message")
        );
        for strategy in STRATEGIES {
            for r in strategy.rules() {
                assert!(rules.contains(&json(&r)), "{}", strategy.name());
            }
        }
        // Every rule names the field to fix.
        for r in &rules {
            let path = r["fieldPath"].as_str().unwrap_or_default();
            assert!(path.starts_with('.'), "{r}");
        }
    }
}
