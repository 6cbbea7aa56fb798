//! Start-up refusals without a cluster: the operator renders a trial's objects as it would
//! apply them, the lab resolves the pod as a kubelet would (its env, files and node; lab
//! src/sim/pod_view.rs) and runs its init steps, and the lab's model of the client starts
//! it. A setting the image or the node cannot run exits as the real process does, with its
//! own last words. The path through the API server, the kubelet's termination state and
//! the trial's message is kept by one lab test (operator/tests/lab/agave.rs, a flag the
//! image's version lacks) and the transition's table tests (a Crashed exit's message).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};
use valtune_lab::sim::clients::{CLIENTS, Exit, Started};
use valtune_lab::sim::clock::Clock;
use valtune_lab::sim::init_steps;
use valtune_lab::sim::pod_view::{Machine, PodView};
use valtune_lab::topology::Topology;

use super::golden;
use crate::report::patch::merge_apply as merge;

/// How the first point of `example` patched by `patch` ends when it starts on `node` of
/// the test lab's topology: the init step's or the validator's exit.
async fn start(example: &str, patch: Value, node: &str) -> Exit {
    let base: Value = serde_saphyr::from_str(&golden::example(example)).expect("an example");
    let yaml = serde_json::to_string(&merge(&base, &patch)).expect("JSON is YAML");
    let r = super::render(&golden::input(&golden::trial(&yaml, 0))).expect("it renders");

    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let topology = Topology::load(&root.join("lab/topology-test.yaml")).expect("the topology");
    let lab_node = topology
        .nodes()
        .expect("its nodes")
        .into_iter()
        .find(|n| n.name == node)
        .unwrap_or_else(|| panic!("no node {node}"));
    let mut pod = r.pod.clone();
    pod.spec.as_mut().expect("a spec").node_name = Some(node.into());
    let config_maps = r
        .config_maps
        .iter()
        .map(|c| {
            (
                c.metadata.name.clone().unwrap_or_default(),
                c.data.clone().unwrap_or_default(),
            )
        })
        .collect();
    let secrets = r
        .secrets
        .iter()
        .map(|s| {
            let secret = s.secret(&[7; 64]);
            let data: BTreeMap<String, String> = secret.string_data.unwrap_or_default();
            (secret.metadata.name.unwrap_or_default(), data)
        })
        .collect();
    let mut view = PodView::new(
        pod.clone(),
        "127.0.0.2".parse().unwrap(),
        config_maps,
        secrets,
    );
    view.machine = Machine::of(&lab_node);
    view.registry = topology.images.clone();

    let sys = tempfile_dir(node);
    lab_node
        .prepared
        .write_sysctls(&sys, view.host_network())
        .expect("the node's sysctls");
    if let Err((container, code, message)) = init_steps::run(&view, &sys, &lab_node.prepared).await
    {
        return Exit {
            at: 0.0,
            reason: "Error",
            code,
            message: format!("{container}: {message}"),
        };
    }
    let (sim, container) = CLIENTS
        .iter()
        .find_map(|c| c.recognise(&pod).map(|v| (c, v.clone())))
        .expect("a client the lab plays");
    let env = view.env(&container);
    let clock = Clock {
        scale: 720.0,
        step: 1.0,
    };
    match sim.start(&view, &container, &env, &clock) {
        Started::Exited(exit) => exit,
        Started::Running(p) => p
            .exit()
            .unwrap_or_else(|| panic!("{example} {patch}: it runs and never exits")),
    }
}

fn tempfile_dir(node: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "valtune-startup-{}-{node}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

const AGAVE: &str = "quickstart-agave-ram-sweep.yaml";
const BESU: &str = "besu-allocator-heap-sweep.yaml";
const FRANKENDANCER: &str = "frankendancer-bench-tiles.yaml";

fn besu(sweep: Value) -> Value {
    json!({"spec": {"sweep": merge(&json!({"allocator": null, "mallocArenaMax": null, "heap": null}), &sweep)}})
}

fn frankendancer(patch: Value) -> Value {
    merge(
        &json!({"spec": {"sweep": {
            "threads": [{"name": "verifyTiles", "values": [30]}, {"name": "bankTiles", "values": [6]}],
            "knobs": [{"name": "noBlockstore", "configKey": "development.bench.disable_blockstore_from_slot", "values": ["1"]}],
        }}}),
        &patch,
    )
}

/// (case, example, patch, node, exit code, texts of its last words)
type Case = (
    &'static str,
    &'static str,
    Value,
    &'static str,
    i32,
    Vec<&'static str>,
);

#[tokio::test]
async fn what_the_image_or_the_node_cannot_run_exits_as_the_client_does() {
    let cases: Vec<Case> = vec![
        (
            "a flag the version lacks (--cuda, removed in Agave 4.0)",
            AGAVE,
            json!({"spec": {"sweep": {"memory": ["1Ti"]}, "template": {"agave": {"image": "anzaxyz/agave:stable"}, "extraArgs": ["--cuda"]}}}),
            "bm-01",
            1,
            vec!["Found argument '--cuda'"],
        ),
        (
            "sigverify on GPUs with an image without perf-libs",
            AGAVE,
            json!({"spec": {"sweep": {"memory": ["1Ti"]}, "template": {"agave": {"image": "anzaxyz/agave:v2.0.5", "sigverify": "gpu"}}}}),
            "gpu-01",
            1,
            vec!["Unable to load \"libcuda-crypt.so\""],
        ),
        (
            "an allocator the image lacks",
            BESU,
            besu(json!({"allocator": ["tcmalloc"]})),
            "bm-01",
            1,
            vec![
                "allocator tcmalloc is not in this image",
                "'libtcmalloc_minimal.so.4' from LD_PRELOAD cannot be preloaded",
            ],
        ),
        (
            "a heap the live set does not fit",
            BESU,
            besu(json!({"heap": ["2Gi"]})),
            "bm-01",
            3,
            vec!["Terminating due to java.lang.OutOfMemoryError: Java heap space"],
        ),
        (
            "too few 1 GiB pages for the workspaces",
            FRANKENDANCER,
            frankendancer(json!({"spec": {"template": {"resources": {"hugepages1Gi": 16}}}})),
            "fd-01",
            1,
            vec![
                "ENOMEM-Out of memory when trying to create workspace `",
                "gigantic pages. Firedancer reserves enough memory",
            ],
        ),
        (
            // Past admission (a stale object, a trial written by hand): fdctl's own check.
            "more tiles than the container's cores",
            FRANKENDANCER,
            frankendancer(json!({"spec": {"template": {"resources": {"cpu": 40}}}})),
            "fd-01",
            1,
            vec![
                "The topology you are using has 47 tiles, but the CPU affinity specified in the config tile as [layout.affinity] only provides for 40 cores",
            ],
        ),
    ];
    for (case, example, patch, node, code, texts) in cases {
        let exit = start(example, patch, node).await;
        assert_eq!(exit.code, code, "{case}: {exit:?}");
        for text in texts {
            assert!(exit.message.contains(text), "{case}: {:?}", exit.message);
        }
    }
}
