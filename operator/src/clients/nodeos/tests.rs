use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::clients::golden;

const EXAMPLE: &str = "nodeos-wax-memory-pressure.yaml";

/// A nodeos experiment on disk with the given spec lines under `nodeos:` and sweep.
fn disk(nodeos: &str, sweep: &str) -> String {
    format!(
        "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {{name: modes}}\nspec:\n  template:\n    nodeos:\n      image: 'ghcr.io/antelopeio/spring:v1.2.2'\n      chainStateDbSizeMb: 40960\n      snapshot: {{url: 'https://snapshots.example/wax.bin'}}\n      peers: ['peer.wax.alohaeos.com:9876']\n{nodeos}    resources: {{cpu: 8, memory: 64Gi}}\n    storage: [{{role: data, size: 1Ti}}, {{role: state, size: 100Gi}}]\n  sweep:\n{sweep}"
    )
}

fn pod(trial: &ValidatorTrial) -> Pod {
    crate::clients::render(&golden::input(trial))
        .expect("renders")
        .pod
}

fn container<'a>(pod: &'a Pod, name: &str) -> &'a k8s_openapi::api::core::v1::Container {
    let spec = pod.spec.as_ref().unwrap();
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

#[test]
fn golden_seed_example_pods() {
    for (i, name) in [(0, "wax-hog-0"), (1, "wax-hog-6Gi")] {
        let t = golden::trial(&golden::example(EXAMPLE), i);
        golden::check("nodeos", name, &golden::rendered(&t));
    }
}

/// The seed's pod: one 16 GiB budget for nodeos, the hog and the sidecars; the state on
/// the node's tmpfs, emptied first; swap-prepared nodes only.
#[test]
fn the_hog_shares_the_pods_memory_and_waits_for_catch_up() {
    let t = golden::trial(&golden::example(EXAMPLE), 2);
    let p = pod(&t);
    let spec = p.spec.as_ref().unwrap();
    let res = spec.resources.as_ref().unwrap();
    assert_eq!(res.limits.as_ref().unwrap()["memory"].0, "16Gi");
    // Burstable: the request (12Gi and the sidecars, 12864Mi) is below the limit.
    assert_eq!(res.requests.as_ref().unwrap()["memory"].0, "13488881664");
    let selector = spec.node_selector.as_ref().unwrap();
    assert_eq!(selector["valtune.dev/swap"], "LimitedSwap");
    assert_eq!(selector["valtune.dev/nodeos-state-tmpfs"], "true");
    let hog = container(&p, HOG_CONTAINER);
    let script = &hog.command.as_ref().unwrap()[2];
    assert!(
        script.starts_with("until [ -e /run/valtune/caught-up ]"),
        "{script}"
    );
    assert!(
        script.contains("--vm 1 --vm-bytes 8589934592 --vm-keep"),
        "{script}"
    );
    let nodeos = container(&p, VALIDATOR_CONTAINER);
    let cmd = nodeos.command.as_ref().unwrap();
    assert_eq!(cmd[0], "sh");
    assert!(cmd[2].starts_with("find /mnt/state -mindepth 1 -delete && exec nodeos"));
    let args = nodeos.args.as_ref().unwrap();
    for pair in [
        ["--state-dir", "/mnt/state"],
        ["--database-map-mode", "mapped"],
        ["--snapshot", "/mnt/snapshot/snapshot.bin"],
        ["--plugin", "eosio::prometheus_plugin"],
    ] {
        assert!(
            args.windows(2).any(|w| w == pair),
            "{pair:?} missing: {args:?}"
        );
    }
    let limits = nodeos.resources.as_ref().unwrap().limits.as_ref().unwrap();
    assert_eq!(limits["memory"].0, "16Gi");
    // The exporter's caught-up bound is the trial's warm-up bound.
    let x = container(&p, CHAIN_EXPORTER);
    assert!(
        x.args
            .as_ref()
            .unwrap()
            .contains(&"--caught-up-blocks=120".to_string())
    );
}

/// A swept map mode reaches nodeos as its flag (once); locked adds IPC_LOCK, heap and
/// locked keep their hugepages; no swap makes the pod Guaranteed.
#[test]
fn map_modes_reach_nodeos_and_locked_gets_ipc_lock() {
    let yaml = disk(
        "      allowMemoryLock: true\n",
        "    databaseMapMode: [mapped, heap, locked]\n",
    );
    for (i, mode) in ["mapped", "heap", "locked"].into_iter().enumerate() {
        let t = golden::trial(&yaml, i);
        let p = pod(&t);
        let n = container(&p, VALIDATOR_CONTAINER);
        let args = n.args.as_ref().unwrap();
        let flags: Vec<_> = args
            .iter()
            .filter(|a| *a == "--database-map-mode")
            .collect();
        assert_eq!(flags.len(), 1, "{args:?}");
        assert!(args.windows(2).any(|w| w == ["--database-map-mode", mode]));
        let caps = n
            .security_context
            .as_ref()
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|c| c.add.clone());
        assert_eq!(
            caps,
            (mode == "locked").then(|| vec!["IPC_LOCK".to_string()])
        );
        let res = p.spec.as_ref().unwrap().resources.as_ref().unwrap();
        assert_eq!(res.requests, res.limits, "no swap: a Guaranteed pod");
        assert_eq!(n.command.as_ref().unwrap(), &vec!["nodeos".to_string()]);
        if i == 2 {
            golden::check("nodeos", "locked-on-disk", &golden::rendered(&t));
        }
    }
}

#[test]
fn locked_without_the_opt_in_does_not_render() {
    let t = golden::trial(&disk("", "    databaseMapMode: [locked]\n"), 0);
    let err = crate::clients::render(&golden::input(&t)).unwrap_err();
    assert!(err.to_string().contains("allowMemoryLock"), "{err}");
}

#[test]
fn a_memory_state_is_a_sized_tmpfs_and_a_genesis_start_mounts_its_file() {
    let yaml = disk("", "    cpu: [8]\n")
        .replace(", {role: state, size: 100Gi}", "")
        .replace(
            "      snapshot: {url: 'https://snapshots.example/wax.bin'}\n",
            "      state: {medium: memory}\n      genesisJson: '{\"initial_timestamp\": \"2019-06-05T12:00:00.000\"}'\n",
        );
    let t = golden::trial(&yaml, 0);
    let r = crate::clients::render(&golden::input(&t)).unwrap();
    let state = r.pod.spec.as_ref().unwrap().volumes.as_ref().unwrap();
    let state = state.iter().find(|v| v.name == "state").unwrap();
    let dir = state.empty_dir.as_ref().unwrap();
    assert_eq!(dir.medium.as_deref(), Some("Memory"));
    assert_eq!(dir.size_limit.as_ref().unwrap().0, "41984Mi");
    let args = container(&r.pod, VALIDATOR_CONTAINER).args.clone().unwrap();
    assert!(
        args.windows(2)
            .any(|w| w == ["--genesis-json", "/etc/nodeos/genesis.json"])
    );
    let files = r.config_maps[0].data.as_ref().unwrap();
    assert!(files["genesis.json"].contains("initial_timestamp"));
    assert!(files["chain_exporter.py"].contains("valtune_nodeos_head_block_lag_seconds"));
}

#[test]
fn the_seed_plan_reads_the_tuning() {
    let t = golden::trial(&golden::example(EXAMPLE), 1);
    let plan = plan(
        &t.spec.template,
        t.spec.template.client.nodeos.as_ref().unwrap(),
    )
    .unwrap();
    assert_eq!(
        plan,
        Plan {
            mode: NodeosMapMode::Mapped,
            hog: 6 << 30,
            budget: 16 << 30,
            request: 12 << 30,
            swap: true,
        }
    );
}

#[test]
fn the_rules_are_in_the_crd() {
    let crd = crate::crd::crd_yaml(&crate::crd::crds()[0].1);
    for text in [
        "nodeos needs a data volume",
        "We recommend storing the state db file on tmpfs only when database-map-mode=mapped",
        "set template.nodeos.allowMemoryLock: true",
        "never swaps (the kubelet mounts it noswap",
        "swap needs a Burstable pod",
        "nodeos refuses --snapshot with --genesis-json",
    ] {
        assert!(crd.contains(text), "missing: {text}");
    }
}
