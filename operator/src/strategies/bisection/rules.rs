//! The bisection's admission rules: one ordered parameter, searched once per value (the
//! confirmation repeats the answer), no baseline to compare against.

use kube::core::Rule;

/// The sweep fields a bisection can search: their values have an order.
pub const ORDERED_FIELDS: [&str; 8] = [
    "memory",
    "cpu",
    "hugepages1Gi",
    "programCacheEntries",
    "threads",
    "mallocArenaMax",
    "heap",
    "memoryPressure",
];

/// Swept fields whose values are names, with no order to bisect.
pub const UNORDERED_FIELDS: [&str; 4] = ["allocator", "databaseMapMode", "sigverify", "knobs"];

/// The bisection's admission rules, on the experiment spec.
pub fn rules() -> Vec<Rule> {
    let has = |f: &str| format!("has(self.sweep.{f})");
    // Lists of ordered fields, each thread knob, and each range (a range names an
    // ordered parameter: its own rules refuse the others).
    let lists: Vec<String> = ORDERED_FIELDS
        .iter()
        .filter(|f| **f != "threads")
        .map(|f| has(f))
        .collect();
    let ordered_count = format!(
        "[{}].filter(x, x).size() + (has(self.sweep.threads) ? size(self.sweep.threads) : 0) + (has(self.sweep.ranges) ? size(self.sweep.ranges) : 0)",
        lists.join(", ")
    );
    let mut rules = vec![
        Rule::new(format!(
            "!has(self.strategy) || !has(self.strategy.bisection) || {ordered_count} == 1"
        ))
        .message(format!(
            "strategy.bisection searches exactly one ordered parameter: sweep one of {} (one thread knob), as a list or a range, or remove strategy.bisection to run the grid",
            ORDERED_FIELDS.join(", ")
        ).as_str())
        .field_path(".strategy.bisection"),
        Rule::new("!has(self.strategy) || !has(self.strategy.bisection) || self.trial.repetitions == 1")
            .message("strategy.bisection runs each point once and repeats the answer in its confirmation round: set trial.repetitions to 1")
            .field_path(".trial.repetitions"),
    ];
    for f in UNORDERED_FIELDS {
        rules.push(
            Rule::new(format!(
                "!has(self.strategy) || !has(self.strategy.bisection) || !{}",
                has(f)
            ))
            .message(
                format!(
                    "strategy.bisection cannot search sweep.{f}: its values have no order; remove strategy.bisection (the grid runs every value) or sweep an ordered parameter"
                )
                .as_str(),
            )
            .field_path(format!(".sweep.{f}").as_str()),
        );
    }
    rules.push(
        Rule::new("!has(self.comparison) || !has(self.strategy) || !has(self.strategy.bisection)")
            .message("comparison cannot be combined with strategy.bisection (a bisection compares values by whether they keep up, not against a baseline): remove comparison, or remove strategy.bisection to run the grid against the baseline")
            .field_path(".comparison"),
    );
    rules
}
