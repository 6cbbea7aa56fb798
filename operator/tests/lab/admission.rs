//! The CRD schema (OpenAPI + CEL) refuses bad experiments at `kubectl apply` time, with a
//! message that names the field and says what to do.

use kube::api::{DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::common::{experiments, lab, merge, refusals, yaml_file};

fn quickstart() -> Value {
    yaml_file("manifests/examples/quickstart-agave-ram-sweep.yaml")
}

/// (what is wrong, merge patch on the quickstart, field the error names, text it says)
fn invalid_cases() -> Vec<(&'static str, Value, &'static str, &'static str)> {
    vec![
        (
            "no client",
            json!({"spec": {"template": {"agave": null}}}),
            "spec.template",
            "set exactly one client",
        ),
        (
            "two clients",
            json!({"spec": {"template": {"besu": {"image": "hyperledger/besu:25.1.0"}}}}),
            "spec.template",
            "set exactly one client",
        ),
        (
            "memory limit below request",
            json!({"spec": {"sweep": {"memory": null}, "template": {"resources": {"memory": "512Gi", "memoryLimit": "256Gi"}}}}),
            "spec.template.resources.memoryLimit",
            "memoryLimit is below memory",
        ),
        (
            "sweep larger than maxTrials",
            json!({"spec": {"maxTrials": 4}}),
            "spec.maxTrials",
            "more trials than maxTrials",
        ),
        (
            "repetitions push the sweep past maxTrials",
            json!({"spec": {"maxTrials": 9, "trial": {"repetitions": 2}}}),
            "spec.maxTrials",
            "more trials than maxTrials",
        ),
        (
            "maxTrials above the hard cap",
            json!({"spec": {"maxTrials": 5000}}),
            "spec.maxTrials",
            "less than or equal to 1024",
        ),
        (
            "empty value list",
            json!({"spec": {"sweep": {"memory": []}}}),
            "spec.sweep.memory",
            "at least 1 items",
        ),
        (
            "the same memory written twice",
            json!({"spec": {"sweep": {"memory": ["1Ti", "1024Gi"]}}}),
            "spec.sweep.memory",
            "values must be unique",
        ),
        (
            "duplicate cpu values",
            json!({"spec": {"sweep": {"cpu": [32, 64, 32]}}}),
            "spec.sweep.cpu",
            "values must be unique",
        ),
        (
            "memory that is not a quantity",
            json!({"spec": {"sweep": {"memory": ["lots"]}}}),
            "spec.sweep.memory",
            "positive quantity",
        ),
        (
            "Agave program cache sizes without images",
            json!({"spec": {"sweep": {"programCacheEntries": [512, 1024]}}}),
            "spec.sweep.programCacheEntries",
            "compile-time constant MAX_LOADED_ENTRY_COUNT",
        ),
        (
            "Agave program cache size missing one image",
            json!({"spec": {"sweep": {"programCacheEntries": [512, 1024]},
                   "template": {"agave": {"programCacheImages": [{"entries": 512, "image": "agave:pc512"}]}}}}),
            "spec.sweep.programCacheEntries",
            "programCacheImages",
        ),
        (
            "program cache sweep for a client without one",
            json!({"spec": {"template": {"agave": null, "storage": null, "besu": {"image": "hyperledger/besu:25.1.0"}},
                   "sweep": {"programCacheEntries": [512]}}}),
            "spec.sweep.programCacheEntries",
            "Besu has no program cache",
        ),
        (
            "hugepages sweep for Agave",
            json!({"spec": {"sweep": {"hugepages1Gi": [0, 32]}}}),
            "spec.sweep.hugepages1Gi",
            "does not allocate hugepages",
        ),
        (
            "a tile count Agave does not have",
            json!({"spec": {"sweep": {"threads": [{"name": "verifyTiles", "values": [4, 8]}]}}}),
            "spec.sweep.threads",
            "Agave cannot set some of these thread knobs",
        ),
        (
            "a knob with both env and arg",
            json!({"spec": {"sweep": {"knobs": [{"name": "arena", "env": "MALLOC_ARENA_MAX", "arg": "--x", "values": ["2"]}]}}}),
            "spec.sweep.knobs[0]",
            "exactly one of env, arg or configKey",
        ),
        (
            "a config-file knob for Agave",
            json!({"spec": {"sweep": {"knobs": [{"name": "x", "configKey": "a.b", "values": ["1"]}]}}}),
            "spec.sweep.knobs",
            "Agave has no config file",
        ),
        (
            "Agave without a ledger volume",
            json!({"spec": {"template": {"storage": [{"role": "accounts", "size": "2Ti"}]}}}),
            "spec.template.storage",
            "Agave needs a ledger volume",
        ),
        (
            "a name too long for trial names",
            json!({"metadata": {"name": "a-very-long-experiment-name-that-will-not-fit"}}),
            "metadata.name",
            "longer than 40 characters",
        ),
        (
            "a duration in words",
            json!({"spec": {"trial": {"measurement": {"duration": "12 hours"}}}}),
            "spec.trial.measurement.duration",
            "positive duration such as",
        ),
        (
            "a zero warm-up limit",
            json!({"spec": {"trial": {"warmup": {"timeout": "0s"}}}}),
            "spec.trial.warmup.timeout",
            "positive duration such as",
        ),
        (
            "no parallelism",
            json!({"spec": {"parallelism": 0}}),
            "spec.parallelism",
            "greater than or equal to 1",
        ),
        (
            "no memory anywhere",
            json!({"spec": {"sweep": {"memory": null}}}),
            "spec.template.resources.memory",
            "no memory given",
        ),
        (
            "a memory limit beside a memory sweep",
            json!({"spec": {"template": {"resources": {"memoryLimit": "2Ti"}}}}),
            "spec.template.resources.memoryLimit",
            "conflicts with sweep.memory",
        ),
        (
            "a custom cluster without entrypoints",
            json!({"spec": {"template": {"agave": {"cluster": "custom"}}}}),
            "spec.template.agave.entrypoints",
            "needs at least one entrypoint",
        ),
        (
            "an unknown cluster",
            json!({"spec": {"template": {"agave": {"cluster": "mainnet"}}}}),
            "spec.template.agave.cluster",
            "Unsupported value",
        ),
        (
            "Firedancer without hugepages",
            json!({"spec": {"template": {"agave": null, "storage": null, "firedancer": {"image": "firedancer:v0.5"}}}}),
            "spec.template.resources.hugepages1Gi",
            "Firedancer places its workspaces in hugepages",
        ),
        (
            "an abort rule with both bounds",
            json!({"spec": {"trial": {"abortWhen": [{"metric": "slotLag", "above": 5000, "below": 1, "for": "30m"}]}}}),
            "spec.trial.abortWhen[0]",
            "exactly one of above or below",
        ),
        (
            "maxFailedTrials that can never be reached",
            json!({"spec": {"maxTrials": 10, "maxFailedTrials": 20}}),
            "spec.maxFailedTrials",
            "larger than maxTrials",
        ),
        (
            "a knob this Agave version lacks (--rayon-global-threads before 2.2)",
            json!({"spec": {"template": {"agave": {"image": "anzaxyz/agave:v2.0.5"}},
                   "sweep": {"threads": [{"name": "rayonGlobalThreads", "values": [8, 16]}]}}}),
            "spec.sweep.threads",
            "this Agave version has no rayonGlobalThreads: it exists from 2.2.0",
        ),
        (
            "a knob rendered by version, with no version known",
            json!({"spec": {"template": {"agave": {"image": "anzaxyz/agave:latest", "workload": "bench"}},
                   "sweep": {"threads": [{"name": "bankingThreads", "values": [4, 32]}]}}}),
            "spec.sweep.threads",
            "set template.agave.version",
        ),
        (
            "a reversed dynamic port range",
            json!({"spec": {"template": {"agave": {"dynamicPortRange": "8030-8000"}}}}),
            "spec.template.agave.dynamicPortRange",
            "reversed or empty",
        ),
        (
            "a port range Agave 3 refuses",
            json!({"spec": {"template": {"agave": {"image": "anzaxyz/agave:v3.0.1", "dynamicPortRange": "8000-8020"}}}}),
            "spec.template.agave.dynamicPortRange",
            "narrower than Agave from 3.0.0 accepts",
        ),
        (
            "an exporter port inside Agave's port range",
            json!({"spec": {"template": {"agave": {"exporters": {"processPort": 8010}}}}}),
            "spec.template.agave.exporters.processPort",
            "inside dynamicPortRange",
        ),
        (
            "a toleration operator Kubernetes does not have",
            json!({"spec": {"template": {"placement": {"tolerations": [{"key": "valtune.dev/validator", "operator": "Maybe", "effect": "NoSchedule"}]}}}}),
            "spec.template.placement.tolerations",
            "operator is Exists or Equal",
        ),
        (
            "a query of a series the client's profile does not have",
            json!({"spec": {"metrics": {"queries": {"blockLag": "max(x{$selector})"}}}}),
            "spec.metrics.queries",
            "Agave has no such series",
        ),
        (
            "an empty query",
            json!({"spec": {"metrics": {"queries": {"tps": ""}}}}),
            "spec.metrics.queries",
            "must select the trial's pod with $selector",
        ),
        (
            "an abort rule on a series the client does not have",
            json!({"spec": {"trial": {"abortWhen": [{"metric": "blockLag", "above": 5, "for": "5m"}]}}}),
            "spec.trial.abortWhen",
            "Agave has no such series to watch",
        ),
        (
            "solana-exporter v3.0.2 without the full RPC API it needs",
            json!({"spec": {"template": {"agave": {"fullRpcApi": false}}}}),
            "spec.template.agave.fullRpcApi",
            "answers HTTP 500 on every scrape",
        ),
        (
            "an extra argument this Agave version does not know",
            json!({"spec": {"template": {"agave": {"image": "anzaxyz/agave:v2.0.5"}, "extraArgs": ["--rayon-global-threads=4"]}}}),
            "spec.template.extraArgs",
            "this Agave version has no --rayon-global-threads",
        ),
        (
            "GPU signature verification on Agave 4.0, which removed --cuda",
            json!({"spec": {"template": {"agave": {"image": "anzaxyz/agave:v4.0.3"}},
                   "sweep": {"memory": null, "sigverify": ["cpu", "gpu"]}}}),
            "spec.sweep.sigverify",
            "Agave 4.0 removed --cuda",
        ),
        (
            "banking threads on a follower, which never leads",
            json!({"spec": {"template": {"agave": {"image": "anzaxyz/agave:v2.1.14"}},
                   "sweep": {"memory": null, "threads": [{"name": "bankingThreads", "values": [4, 32]}]}}}),
            "spec.sweep.threads",
            "set template.agave.workload to bench",
        ),
        (
            "a bench on Agave 3.x, whose images lack solana-bench-tps",
            json!({"spec": {"template": {"agave": {"image": "anzaxyz/agave:v3.0.14", "workload": "bench"}}}}),
            "spec.template.agave.bench.image",
            "do not ship solana-bench-tps",
        ),
        (
            "a tuned thread count this Agave version lacks",
            json!({"spec": {"template": {"agave": {"image": "anzaxyz/agave:v2.0.5"}, "tuning": {"threads": {"rayonGlobalThreads": 8}}}}}),
            "spec.template.tuning.threads",
            "this Agave version has no rayonGlobalThreads: it exists from 2.2.0; remove it from template.tuning.threads",
        ),
        (
            "a tuned tile count Agave does not have",
            json!({"spec": {"template": {"tuning": {"threads": {"verifyTiles": 8}}}}}),
            "spec.template.tuning.threads",
            "Agave cannot set some of these thread knobs",
        ),
        (
            "a tuned setting Agave has no knob for",
            json!({"spec": {"template": {"tuning": {"heap": "5Gi"}}}}),
            "spec.template.tuning.heap",
            "Agave has no heap knob",
        ),
        (
            "a tuned program cache size without its image",
            json!({"spec": {"template": {"tuning": {"programCacheEntries": 512}}}}),
            "spec.template.tuning.programCacheEntries",
            "compile-time constant MAX_LOADED_ENTRY_COUNT",
        ),
        (
            "tuned banking threads on a follower",
            json!({"spec": {"template": {"agave": {"image": "anzaxyz/agave:v3.0.14"}, "tuning": {"threads": {"bankingThreads": 8}}}}}),
            "spec.template.tuning.threads",
            "set template.agave.workload to bench",
        ),
        (
            "tuned GPU signature verification on Agave 4.0",
            json!({"spec": {"template": {"agave": {"image": "anzaxyz/agave:v4.0.3"}, "tuning": {"sigverify": "gpu"}}}}),
            "spec.sweep.sigverify",
            "template.tuning.sigverify",
        ),
        (
            "a Prometheus URL that is not one",
            json!({"spec": {"metrics": {"prometheusUrl": "prometheus:9090"}}}),
            "spec.metrics.prometheusUrl",
            "must be an http(s) URL",
        ),
    ]
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn the_quickstart_is_accepted_with_defaults_filled_in() {
    let lab = lab().await;
    let ns = lab.namespace("admission-ok").await;
    let api = experiments(&lab.client, &ns);
    let obj: DynamicObject = serde_json::from_value(quickstart()).unwrap();
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    let spec = &created.data["spec"];
    assert_eq!(spec["maxTrials"], 256);
    assert_eq!(spec["trial"]["repetitions"], 1);
    assert_eq!(spec["template"]["agave"]["rpcPort"], 8899);
    assert_eq!(spec["template"]["placement"]["exclusive"], true);
    assert_eq!(
        spec["template"]["storage"][0]["storageClassName"],
        "local-nvme"
    );
    // The user's text survives unchanged (no "12h" turned into "12h0m0s"), so GitOps sees no drift.
    assert_eq!(spec["trial"]["measurement"]["duration"], "12h");
    api.delete("agave-ram", &DeleteParams::default())
        .await
        .unwrap();
    lab.delete_namespace(&ns).await;
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn invalid_experiments_are_refused_with_the_field_and_the_fix() {
    let lab = lab().await;
    let ns = lab.namespace("admission-bad").await;
    let api = experiments(&lab.client, &ns);
    let cases = invalid_cases();
    assert!(cases.len() >= 15);
    let failures = refusals(&api, &quickstart(), cases).await;
    lab.delete_namespace(&ns).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_tuning_the_client_honours_is_accepted() {
    let lab = lab().await;
    let ns = lab.namespace("admission-tuning").await;
    let api = experiments(&lab.client, &ns);
    let tuned = merge(
        &quickstart(),
        &json!({"spec": {"template": {"tuning": {
            "threads": {"replayTransactionsThreads": 8, "rpcThreads": 4},
            "sigverify": "cpu",
        }}}}),
    );
    // No refusals: only the tuned experiment itself, which must be accepted.
    let failures = refusals(&api, &tuned, Vec::new()).await;
    lab.delete_namespace(&ns).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
