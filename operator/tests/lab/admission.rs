//! The CRD schema (OpenAPI + CEL) refuses bad experiments at `kubectl apply` time, with a
//! message that names the field and says what to do.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use valtune::api::ValidatorExperiment;
use valtune::api::trial::TrialOutcome;

use crate::common::{experiments, lab, merge, refusals, trials, wait_finished, yaml_file};

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
        // Snapshot caches (template.agave.snapshotCache, template.firedancer.snapshotCache):
        // a follower's, keyed by a genesis hash, honoured as far as the client can.
        (
            "an Agave snapshot cache on the bench workload",
            json!({"spec": {"template": {"agave": {"workload": "bench", "snapshotCache": {"hostPath": "/var/lib/valtune/snapshots"}}}}}),
            "spec.template.agave.snapshotCache",
            "snapshotCache is for a follower",
        ),
        (
            "an Agave snapshot cache of a custom cluster without its genesis hash",
            json!({"spec": {"template": {"agave": {"cluster": "custom", "entrypoints": ["10.0.0.1:8001"], "snapshotCache": {"hostPath": "/var/lib/valtune/snapshots"}}}}}),
            "spec.template.agave.snapshotCache",
            "set expectedGenesisHash",
        ),
        (
            "an Agave snapshot cache at a relative path",
            json!({"spec": {"template": {"agave": {"snapshotCache": {"hostPath": "var/lib/valtune/snapshots"}}}}}),
            "spec.template.agave.snapshotCache.hostPath",
            "an absolute path on the node without '..'",
        ),
        (
            "a Frankendancer snapshot cache with an age fdctl cannot pass to its Agave",
            json!({"spec": {"template": {"agave": null, "firedancer": {"image": "registry.example.com/frankendancer:v0.1106.40201", "privileged": true,
                   "snapshotCache": {"hostPath": "/var/lib/valtune/snapshots", "maxLocalIncrementalAge": 100000}}}}}),
            "spec.template.firedancer.snapshotCache",
            "Frankendancer has no key for how old a local snapshot may be",
        ),
        (
            "a Firedancer snapshot cache on the bench workload",
            json!({"spec": {"template": {"agave": null, "firedancer": {"image": "registry.example.com/firedancer:v1.0.1", "flavor": "firedancer", "workload": "bench",
                   "snapshotCache": {"hostPath": "/var/lib/valtune/snapshots"}}}}}),
            "spec.template.firedancer.snapshotCache",
            "snapshotCache is for a follower",
        ),
        (
            "a Firedancer snapshot cache of a custom cluster without its genesis hash",
            json!({"spec": {"template": {"agave": null, "firedancer": {"image": "registry.example.com/firedancer:v1.1.4", "flavor": "firedancer", "privileged": true,
                   "cluster": "custom", "entrypoints": ["10.0.0.1:8001"], "snapshotCache": {"hostPath": "/var/lib/valtune/snapshots"}}}}}),
            "spec.template.firedancer.snapshotCache",
            "set expectedGenesisHash",
        ),
        (
            "a Firedancer snapshot cache beside a config key for the same directory",
            json!({"spec": {"template": {"agave": null, "firedancer": {"image": "registry.example.com/firedancer:v1.1.4", "flavor": "firedancer", "privileged": true,
                   "config": {"snapshots.sources.max_local_incremental_age": "100"}, "snapshotCache": {"hostPath": "/var/lib/valtune/snapshots"}}}}}),
            "spec.template.firedancer.config",
            "with snapshotCache valtune writes the snapshot directory",
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

/// A range on the quickstart in place of its memory list, with these fields.
fn memory_range(min: &str, max: &str, step: &str) -> Value {
    json!({"spec": {"sweep": {"memory": null, "ranges": [{"name": "memory", "min": min, "max": max, "step": step}]}}})
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn ranges_and_bisection_are_refused_with_the_field_and_the_fix() {
    let lab = lab().await;
    let ns = lab.namespace("admission-ranges").await;
    let api = experiments(&lab.client, &ns);
    let bisect = json!({"spec": {"strategy": {"bisection": {}}}});
    // The quickstart's question at 64 GiB as a range, bisected: accepted (the grid's 23
    // trials would pass maxTrials 16: a bisection is bounded by maxTrials instead).
    let ranged = merge(
        &merge(
            &merge(&quickstart(), &memory_range("128Gi", "1536Gi", "64Gi")),
            &bisect,
        ),
        &json!({"spec": {"maxTrials": 16}}),
    );
    let cases: Vec<Case> = vec![
        (
            "a step that does not divide the range",
            memory_range("128Gi", "1000Gi", "64Gi"),
            "spec.sweep.ranges[0].step",
            "step does not divide max - min",
        ),
        (
            "min above max",
            memory_range("1Ti", "512Gi", "64Gi"),
            "spec.sweep.ranges[0].min",
            "min is above max: swap them",
        ),
        (
            "a range over an unordered parameter",
            json!({"spec": {"sweep": {"ranges": [{"name": "sigverify", "min": "1", "max": "2", "step": "1"}]}}}),
            "spec.sweep.ranges[0].name",
            "have values with no order",
        ),
        (
            "a count written as a quantity",
            json!({"spec": {"sweep": {"ranges": [{"name": "cpu", "min": "16", "max": "64", "step": "16k"}]}}}),
            "spec.sweep.ranges[0].min",
            "count ranges whole numbers",
        ),
        (
            "a parameter as a list and a range",
            json!({"spec": {"sweep": {"memory": ["128Gi", "256Gi"]}}}),
            "spec.sweep.ranges",
            "both as a list and as a range",
        ),
        (
            "a grid range past maxTrials",
            json!({"spec": {"strategy": null}}),
            "spec.maxTrials",
            "more trials than maxTrials",
        ),
    ];
    let mut failures = refusals(&api, &ranged, cases).await;
    let bisection_cases: Vec<Case> = vec![
        (
            "a second ordered parameter beside the bisected range",
            json!({"spec": {"sweep": {"cpu": [32, 64]}}}),
            "spec.strategy.bisection",
            "exactly one ordered parameter",
        ),
        (
            "two strategies",
            json!({"spec": {"strategy": {"successiveHalving": {}}}}),
            "spec.strategy",
            "set one strategy",
        ),
        (
            "successive halving with repetitions",
            json!({"spec": {"strategy": {"bisection": null, "successiveHalving": {"eta": 2}}, "trial": {"repetitions": 2}}}),
            "spec.trial.repetitions",
            "its repetitions are its rungs",
        ),
        (
            "bisection over an unordered parameter",
            json!({"spec": {"sweep": {"sigverify": ["cpu"]}}}),
            "spec.sweep.sigverify",
            "its values have no order",
        ),
    ];
    failures.extend(refusals(&api, &ranged, bisection_cases).await);
    // A client's rules see a range's values: Besu's heap below the container's memory.
    let besu = yaml_file(BESU);
    let heap = json!({"spec": {"sweep": {"heap": null, "ranges": [{"name": "heap", "min": "4Gi", "max": "32Gi", "step": "4Gi"}]}}});
    failures.extend(
        refusals(
            &api,
            &besu,
            vec![(
                "a heap range reaching the memory",
                heap,
                "spec.sweep.heap",
                "every heap must be below the container's memory",
            )],
        )
        .await,
    );
    lab.delete_namespace(&ns).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const FRANKENDANCER: &str = "manifests/examples/frankendancer-bench-tiles.yaml";
const FIREDANCER: &str = "manifests/examples/firedancer-bench-tiles.yaml";
const BESU: &str = "manifests/examples/besu-allocator-heap-sweep.yaml";
const NODEOS: &str = "manifests/examples/nodeos-wax-memory-pressure.yaml";
const QUICKSTART: &str = "manifests/examples/quickstart-agave-ram-sweep.yaml";

type Case = (&'static str, Value, &'static str, &'static str);

/// The shapes of free text that becomes a flag, a URL, an address or an image (api/shapes.rs),
/// a case per rule, on the example of a client that has the field.
fn shape_cases() -> Vec<(&'static str, Vec<Case>)> {
    let agave = |f: Value| json!({"spec": {"template": {"agave": f}}});
    let fd = |f: Value| json!({"spec": {"template": {"firedancer": f}}});
    let besu = |f: Value| json!({"spec": {"template": {"besu": f}}});
    let nodeos = |f: Value| json!({"spec": {"template": {"nodeos": f}}});
    vec![
        (
            QUICKSTART,
            vec![
                (
                    "an entrypoint without a port",
                    agave(json!({"entrypoints": ["entrypoint.testnet.solana.com"]})),
                    "spec.template.agave.entrypoints",
                    "each entrypoint must be host:port",
                ),
                (
                    "an entrypoint port above 65535",
                    agave(json!({"entrypoints": ["entrypoint.testnet.solana.com:80010"]})),
                    "spec.template.agave.entrypoints",
                    "a port from 1 to 65535",
                ),
                (
                    "an entrypoint whose digits are no IPv4 address",
                    agave(json!({"entrypoints": ["999.1.2.3:8001"]})),
                    "spec.template.agave.entrypoints",
                    "each entrypoint must be host:port",
                ),
                (
                    "an entrypoint given as a URL",
                    agave(json!({"entrypoints": ["http://entrypoint.testnet.solana.com:8001"]})),
                    "spec.template.agave.entrypoints",
                    "each entrypoint must be host:port",
                ),
                (
                    "a port range past the last port",
                    agave(json!({"dynamicPortRange": "65000-70000"})),
                    "spec.template.agave.dynamicPortRange",
                    "ends above port 65535",
                ),
                (
                    "a known validator that is no base58 key",
                    agave(
                        json!({"knownValidators": ["5D1fNXzvv5NjV1ysLjirC4WY92RNsVH18vjmcszZd8o0"]}),
                    ),
                    "spec.template.agave.knownValidators",
                    "each known validator must be a base58 public key",
                ),
                (
                    "a genesis hash that is no base58 hash",
                    agave(
                        json!({"expectedGenesisHash": "4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2Ns0I"}),
                    ),
                    "spec.template.agave.expectedGenesisHash",
                    "must be a base58 hash",
                ),
                (
                    "an image with a space",
                    agave(json!({"image": "anzaxyz/agave: v4.0.3"})),
                    "spec.template.agave.image",
                    "must be an image reference",
                ),
                (
                    "an exporter image given as a URL",
                    agave(
                        json!({"exporters": {"rpc": "https://ghcr.io/asymmetric-research/solana-exporter:v3.0.2"}}),
                    ),
                    "spec.template.agave.exporters.rpc",
                    "must be an image reference",
                ),
                (
                    "a program cache image in capitals",
                    agave(
                        json!({"programCacheImages": [{"entries": 512, "image": "Registry/Agave:pc512"}]}),
                    ),
                    "spec.template.agave.programCacheImages[0].image",
                    "must be an image reference",
                ),
                (
                    "a memory of nothing",
                    json!({"spec": {"sweep": {"memory": null}, "template": {"resources": {"memory": "0"}}}}),
                    "spec.template.resources.memory",
                    "must be a positive quantity",
                ),
                (
                    "a negative memory limit",
                    json!({"spec": {"sweep": {"memory": null}, "template": {"resources": {"memory": "1Ti", "memoryLimit": "-2Ti"}}}}),
                    "spec.template.resources.memoryLimit",
                    "must be a positive quantity",
                ),
                (
                    "a Prometheus URL without a host",
                    json!({"spec": {"metrics": {"prometheusUrl": "http://"}}}),
                    "spec.metrics.prometheusUrl",
                    "must be an http(s) URL with a host",
                ),
                (
                    "a remote-write URL that is a path",
                    json!({"spec": {"metrics": {"remoteWriteUrl": "/api/v1/write"}}}),
                    "spec.metrics.remoteWriteUrl",
                    "must be an http(s) URL with a host",
                ),
            ],
        ),
        (
            FRANKENDANCER,
            vec![
                (
                    "a Firedancer entrypoint without a port",
                    fd(json!({"entrypoints": ["entrypoint.testnet.solana.com"]})),
                    "spec.template.firedancer.entrypoints",
                    "each entrypoint must be host:port",
                ),
                (
                    "a config key with spaces",
                    fd(json!({"config": {"rpc transaction history": "true"}})),
                    "spec.template.firedancer.config",
                    "a config key is a dotted path of words such as rpc.transaction_history",
                ),
                (
                    "a config value that writes a second line",
                    fd(json!({"config": {"rpc.transaction_history": "true\nuser = \"root\""}})),
                    "spec.template.firedancer.config",
                    "a config value must be on one line",
                ),
                (
                    "a configKey knob value that writes a second line",
                    json!({"spec": {"sweep": {"knobs": [{"name": "noBlockstore", "configKey": "development.bench.disable_blockstore_from_slot", "values": ["0", "1\nuser = \"root\""]}]}}}),
                    "spec.sweep.knobs[0].values",
                    "a configKey value must be on one line",
                ),
                (
                    "a config key no Frankendancer release has",
                    fd(json!({"config": {"rpc.transaction_histroy": "true"}})),
                    "spec.template.firedancer.config",
                    "no release of this flavor has this config key",
                ),
                (
                    "a configKey knob no Frankendancer release has",
                    json!({"spec": {"sweep": {"knobs": [{"name": "noBlockstore", "configKey": "development.bench.disable_blockstore", "values": ["0", "1"]}]}}}),
                    "spec.sweep.knobs",
                    "no release of this flavor has this configKey",
                ),
                (
                    "an exporter image with a scheme",
                    fd(
                        json!({"exporters": {"datapoints": "docker://victoriametrics/vmagent:v1.110.0"}}),
                    ),
                    "spec.template.firedancer.exporters.datapoints",
                    "must be an image reference",
                ),
            ],
        ),
        (
            FIREDANCER,
            vec![
                (
                    "a Frankendancer key for full Firedancer",
                    fd(json!({"config": {"development.bench.disable_blockstore_from_slot": "1"}})),
                    "spec.template.firedancer.config",
                    "a key of the other flavor",
                ),
                (
                    "an IPv6 entrypoint for full Firedancer, which resolves IPv4 only",
                    fd(json!({"entrypoints": ["[2001:db8::1]:8001"]})),
                    "spec.template.firedancer.entrypoints",
                    "resolves [gossip] entrypoints to IPv4 addresses only",
                ),
            ],
        ),
        (
            BESU,
            vec![
                (
                    "a consensus image that is not Teku",
                    besu(json!({"consensus": {"image": "sigp/lighthouse:v7.0.0"}})),
                    "spec.template.besu.consensus.image",
                    "the consensus client valtune renders is Teku",
                ),
                (
                    "a checkpoint sync URL without a scheme",
                    besu(json!({"consensus": {"checkpointSyncUrl": "mainnet.checkpoint.sigp.io"}})),
                    "spec.template.besu.consensus.checkpointSyncUrl",
                    "must be an http(s) URL with a host",
                ),
                (
                    "JVM options with a bare word",
                    besu(json!({"jvmOptions": "-Xss4m G1"})),
                    "spec.template.besu.jvmOptions",
                    "jvmOptions are JVM options separated by spaces",
                ),
                (
                    "a besu.toml key written as a flag",
                    besu(json!({"config": {"--rpc-http-enabled": "true"}})),
                    "spec.template.besu.config",
                    "a config key is a dotted path of words such as rpc-http-enabled",
                ),
                (
                    "a besu.toml value that writes a second line",
                    besu(
                        json!({"config": {"rpc-http-enabled": "true\nrpc-http-host = \"0.0.0.0\""}}),
                    ),
                    "spec.template.besu.config",
                    "a config value must be on one line",
                ),
                (
                    "a block-times image with a space",
                    besu(json!({"blockTimes": {"image": "victoriametrics/vmagent v1.110.0"}})),
                    "spec.template.besu.blockTimes.image",
                    "must be an image reference",
                ),
            ],
        ),
        (
            NODEOS,
            vec![
                (
                    "a peer without a port",
                    nodeos(json!({"peers": ["peer.wax.alohaeos.com"]})),
                    "spec.template.nodeos.peers",
                    "each peer must be host:port[:trx|:blk]",
                ),
                (
                    "a peer with a connection type nodeos does not have",
                    nodeos(json!({"peers": ["peer.wax.alohaeos.com:9876:all"]})),
                    "spec.template.nodeos.peers",
                    "each peer must be host:port[:trx|:blk]",
                ),
                (
                    "a config.ini key written as a flag",
                    nodeos(json!({"config": {"--max-transaction-time": "100"}})),
                    "spec.template.nodeos.config",
                    "a config.ini key is a nodeos option name",
                ),
                (
                    "a snapshot URL that is a path",
                    nodeos(json!({"snapshot": {"hostPath": null, "url": "/snapshots/wax.bin"}})),
                    "spec.template.nodeos.snapshot.url",
                    "must be an http(s) URL with a host",
                ),
                (
                    "a negative memory pressure in the sweep",
                    json!({"spec": {"sweep": {"memoryPressure": ["0", "-6Gi"]}}}),
                    "spec.sweep.memoryPressure",
                    "every value must be a quantity of 0 or more",
                ),
                (
                    "a negative tuned memory pressure",
                    json!({"spec": {"sweep": {"memoryPressure": null}, "template": {"tuning": {"memoryPressure": "-6Gi"}}}}),
                    "spec.template.tuning.memoryPressure",
                    "must be a quantity of 0 or more",
                ),
                (
                    "a memory hog image with a tag but no name",
                    nodeos(json!({"memoryHog": {"image": ":latest"}})),
                    "spec.template.nodeos.memoryHog.image",
                    "must be an image reference",
                ),
            ],
        ),
    ]
}

/// Shapes the clients take, which the rules must not refuse: each example with a patch.
fn shapes_accepted() -> Vec<(&'static str, Value)> {
    vec![
        (
            QUICKSTART,
            json!({"spec": {"template": {"agave": {
                "entrypoints": ["entrypoint.testnet.solana.com:8001", "127.0.0.1:8001", "[2001:db8::1]:8001"],
                "knownValidators": ["5D1fNXzvv5NjV1ysLjirC4WY92RNsVH18vjmcszZd8on"],
                "image": "registry.local:5000/agave:v4.0.3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            }}}}),
        ),
        (
            BESU,
            json!({"spec": {"template": {"besu": {
                "jvmOptions": "-XX:+AlwaysPreTouch  -Xss4m",
                "config": {"rpc-http-enabled": "true", "rpc-http-port": "8545"},
                "consensus": {"image": "registry.local:5000/mirror/teku:25.12.0", "checkpointSyncUrl": "http://beacon.local:5052"},
            }}}}),
        ),
        (
            NODEOS,
            json!({"spec": {"template": {"nodeos": {
                "peers": ["p2p.wax.example:9876:blk", "10.0.0.7:9876:trx", "[2001:db8::7]:9876"],
                "config": {"max-transaction-time": "100"},
            }, "tuning": {"memoryPressure": "0"}}, "sweep": {"memoryPressure": null}}}),
        ),
    ]
}

#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn free_text_of_the_wrong_shape_is_refused_with_the_field_and_the_fix() {
    let lab = lab().await;
    let ns = lab.namespace("admission-shapes").await;
    let api = experiments(&lab.client, &ns);
    let mut failures = Vec::new();
    for (example, cases) in shape_cases() {
        let base = yaml_file(example);
        for f in refusals(&api, &base, cases).await {
            failures.push(format!("{example}: {f}"));
        }
    }
    for (example, patch) in shapes_accepted() {
        let base = merge(&yaml_file(example), &patch);
        for f in refusals(&api, &base, Vec::new()).await {
            failures.push(format!("{example} (shapes it takes): {f}"));
        }
    }
    lab.delete_namespace(&ns).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A config key the image's release lacks passes admission (the API server cannot judge a
/// key by version) and ends the trial Invalid before any pod exists, naming the key, the
/// version and the fix, where fdctl would have exited at start.
#[tokio::test]
#[ignore = "needs the lab: run `make test`"]
async fn a_config_key_the_version_lacks_ends_the_trial_before_its_pod() {
    let lab = lab().await;
    let ns = lab.namespace("admission-keys").await;
    let _op = lab.start_operator(&ns);
    // One point of the bench, with a key Frankendancer removed in v0.901 (tiles.poh became
    // tiles.pohh); the example runs v0.1106.40201.
    let mut v = merge(
        &crate::common::example(FRANKENDANCER),
        &json!({"spec": {
            "sweep": {
                "threads": [{"name": "verifyTiles", "values": [4]}, {"name": "bankTiles", "values": [2]}],
                "knobs": [{"name": "noBlockstore", "configKey": "development.bench.disable_blockstore_from_slot", "values": ["1"]}],
            },
            "template": {"firedancer": {"config": {"tiles.poh.lagged_consecutive_leader_start": "true"}}},
        }}),
    );
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["name"] = json!("fd-keys");
    let vx: ValidatorExperiment = serde_json::from_value(v).unwrap();
    let api: Api<ValidatorExperiment> = Api::namespaced(lab.client.clone(), &ns);
    api.create(&PostParams::default(), &vx).await.unwrap();
    wait_finished(&lab, &ns, "fd-keys", Duration::from_secs(120)).await;
    let st = trials(&lab, &ns).await.remove(0).status.unwrap();
    assert_eq!(st.outcome, Some(TrialOutcome::Invalid), "{st:?}");
    assert_eq!(st.attempts, 0, "no pod was created: {st:?}");
    let message = st.message.unwrap_or_default();
    assert!(
        message.contains("template.firedancer.config (or a sweep.knobs configKey): Frankendancer 0.1106.40201 has no config key `tiles.poh.lagged_consecutive_leader_start` (it exists before 0.901.0), and would exit at start: remove it, or use a release that has it"),
        "{message}"
    );
    lab.delete_namespace(&ns).await;
}
