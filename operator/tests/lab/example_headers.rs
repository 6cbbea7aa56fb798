//! The examples' "In the lab" headers (manifests/examples/, manifests/validators/): the
//! commands each gives, what it makes that has a result, and the order the examples test
//! (operator/tests/examples.rs, `make test-examples`) runs them in. The check that every
//! file has such a header runs in every `make test`.

use serde_json::Value;

#[cfg(test)]
use crate::common::repo_root;

/// The chains: each runs its examples in order; chains run at once.
pub const CHAINS: &[&[&str]] = &[
    &[
        "manifests/examples/smoke-agave-bench.yaml",
        "manifests/examples/quickstart-agave-ram-sweep.yaml",
        "manifests/examples/agave-ram-bisection.yaml",
        "manifests/examples/agave-ram-paired.yaml",
        "manifests/examples/agave-program-cache.yaml",
        "manifests/examples/besu-allocator-heap-sweep.yaml",
        "manifests/examples/besu-allocators-paired.yaml",
        "manifests/validators/besu-from-experiment.yaml",
    ],
    &[
        "manifests/examples/frankendancer-bench-tiles.yaml",
        "manifests/examples/firedancer-bench-tiles.yaml",
        "manifests/examples/firedancer-tiles-halving.yaml",
        "manifests/examples/firedancer-snapshot-reuse.yaml",
    ],
    &["manifests/examples/nodeos-wax-memory-pressure.yaml"],
    &["manifests/examples/agave-banking-threads-gpu.yaml"],
    &[
        "manifests/validators/agave.yaml",
        "manifests/validators/agave-failover.yaml",
        "manifests/validators/besu.yaml",
        "manifests/validators/frankendancer.yaml",
        "manifests/validators/frankendancer-failover.yaml",
        "manifests/validators/nodeos.yaml",
    ],
];

/// The commands of a file's "In the lab" block: the lines after it indented by three
/// spaces (after the rest of its sentence), FILE standing for the file.
pub fn lab_commands(path: &str, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        if line.starts_with("# In the lab") {
            inside = true;
        } else if inside {
            match line.strip_prefix("#   ") {
                Some(cmd) => out.push(cmd.replace("FILE", path)),
                // The block's sentence may go on before its commands, not after.
                None if out.is_empty() => {}
                None => break,
            }
        }
    }
    out
}

/// The objects a file creates that have a result: (kind, name).
pub fn results_of(text: &str) -> Vec<(String, String)> {
    serde_saphyr::from_multiple::<Value>(text)
        .unwrap()
        .into_iter()
        .filter(|d| {
            matches!(
                d["kind"].as_str(),
                Some("ValidatorExperiment" | "Validator")
            )
        })
        .map(|d| {
            (
                d["kind"].as_str().unwrap().to_string(),
                d["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[cfg(test)]
#[test]
fn every_example_has_lab_commands_and_a_result() {
    for chain in CHAINS {
        for file in chain.iter() {
            let text = std::fs::read_to_string(repo_root().join(file)).unwrap();
            assert!(
                !lab_commands(file, &text).is_empty(),
                "{file}: no In the lab commands"
            );
            assert!(
                !results_of(&text).is_empty(),
                "{file}: nothing with a result"
            );
        }
    }
    let listed: Vec<&str> = CHAINS.iter().flat_map(|c| c.iter().copied()).collect();
    for dir in ["manifests/examples", "manifests/validators"] {
        for e in std::fs::read_dir(repo_root().join(dir)).unwrap() {
            let p = format!("{dir}/{}", e.unwrap().file_name().to_string_lossy());
            assert!(
                listed.contains(&p.as_str()),
                "{p} is in no chain of this test"
            );
        }
    }
}
