//! Search strategies against the lab: the bisection example finds the model's threshold
//! in fewer trials than the grid, and confirms it side by side.

use std::time::Duration;

use serde_json::json;
use valtune::api::experiment::ExperimentPhase;
use valtune::api::trial::TrialOutcome;

use crate::common::{create, example, lab, trials, wait_finished};

/// The lab's Agave model keeps up from 512 GiB (lab/src/sim/clients/agave/model.rs: its
/// capacity reaches the chain's there), as the paper found.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_bisection_example_finds_the_least_memory_that_keeps_up_and_confirms_it() {
    let lab = lab().await;
    let ns = lab.namespace("bisect").await;
    let _operator = lab.start_operator(&ns);
    let mut v = example("manifests/examples/agave-ram-bisection.yaml");
    v["metadata"]["namespace"] = json!(ns);
    create(&lab, &serde_json::from_value(v).unwrap()).await;
    let vx = wait_finished(&lab, &ns, "agave-ram-bisect", Duration::from_secs(1200)).await;
    let st = vx.status.clone().unwrap();
    let all = trials(&lab, &ns).await;
    let runs = |m: &str| {
        let mut t: Vec<_> = all
            .iter()
            .filter(|t| t.spec.point.memory.as_deref() == Some(m))
            .collect();
        t.sort_by_key(|t| t.spec.repetition);
        t.iter()
            .filter_map(|t| t.status.as_ref().and_then(|s| s.outcome))
            .collect::<Vec<_>>()
    };
    let mut tried: Vec<String> = all
        .iter()
        .map(|t| {
            let s = t.status.clone().unwrap_or_default();
            format!("{} {:?}", s.point.unwrap_or_default(), s.outcome)
        })
        .collect();
    tried.sort();
    assert_eq!(st.phase, ExperimentPhase::Succeeded, "{tried:?}");
    let rec = st.recommendation.clone().unwrap();
    assert_eq!(rec.summary, "memory=512Gi", "{tried:?}");
    // Confirmed: the answer kept up twice, the size below it fell behind twice.
    assert_eq!(runs("512Gi"), [TrialOutcome::KeptUp; 2], "{tried:?}");
    assert_eq!(runs("448Gi").len(), 2, "{tried:?}");
    assert!(
        runs("448Gi").iter().all(|o| *o != TrialOutcome::KeptUp),
        "{tried:?}"
    );
    // Rounds of three (384Gi, 768Gi, 1088Gi; then 448Gi, 576Gi, 640Gi), 512Gi alone, then
    // the confirmation: 9 trials of the 21 a grid runs, and no trial below 384Gi.
    assert_eq!(all.len(), 9, "{tried:?}");
    for m in ["128Gi", "192Gi", "256Gi", "320Gi", "1400Gi"] {
        assert!(runs(m).is_empty(), "{m}: {tried:?}");
    }
    let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "BoundaryFound", "{}", ready.message);
    assert!(
        rec.support
            .as_deref()
            .unwrap()
            .starts_with("memory=512Gi: kept up 2/2"),
        "{rec:?}"
    );
    assert_eq!((st.trials.expected, st.trials.finished), (9, 9));
}
