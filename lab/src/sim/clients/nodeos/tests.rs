use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

use super::*;
use crate::sim::pod_view::Machine;
use crate::topology::Prepared;

const GI: u128 = 1 << 30;

/// A nodeos pod as valtune renders one: a 16Gi pod-level budget, nodeos asking 8Gi, a
/// hog waiting for catch-up, the state at `state` (a volume line), args after the
/// defaults.
fn pod(image: &str, extra: &str, state: &str) -> Pod {
    serde_saphyr::from_str(&format!(
        r#"
metadata: {{name: wax-1, namespace: ns}}
spec:
  nodeName: wax-01
  resources:
    requests: {{cpu: "9200m", memory: 8768Mi}}
    limits: {{cpu: "9200m", memory: 16Gi}}
  initContainers:
  - name: chain-exporter
    image: python:3.13-alpine
    restartPolicy: Always
    command: [python3, /etc/valtune/chain_exporter.py]
    args: ["--nodeos=http://127.0.0.1:8888", "--caught-up-blocks=120"]
  containers:
  - name: nodeos
    image: {image}
    command: [sh, -c, 'find /mnt/state -mindepth 1 -delete && exec nodeos "$@"', nodeos]
    args: [--data-dir, /mnt/data, --config-dir, /etc/nodeos, --state-dir, /mnt/state,
           --chain-state-db-size-mb, "49152", --http-server-address, "0.0.0.0:8888",
           --plugin, "eosio::chain_api_plugin", --plugin, "eosio::prometheus_plugin",
           --snapshot, /mnt/snapshot/snapshot.bin{extra}]
    resources:
      requests: {{cpu: "8", memory: 8Gi}}
      limits: {{cpu: "8", memory: 16Gi}}
    volumeMounts:
    - {{name: data, mountPath: /mnt/data}}
    - {{name: config, mountPath: /etc/nodeos}}
    - {{name: state, mountPath: /mnt/state}}
  - name: memory-hog
    image: ghcr.io/colinianking/stress-ng:6c2ab88
    command: [sh, -c, "until [ -e /run/valtune/caught-up ]; do sleep 5; done; exec stress-ng --vm 1 --vm-bytes 6442450944 --vm-keep"]
  volumes:
  - {{name: data, emptyDir: {{}}}}
  - {{name: config, configMap: {{name: wax-1-nodeos}}}}
  - {state}
"#
    ))
    .unwrap()
}

const HOST_TMPFS: &str = "{name: state, hostPath: {path: /srv/nodeos-state, type: Directory}}";

/// A node of 64 GiB and 256 GiB of swap, prepared for the state on its tmpfs.
fn machine() -> Machine {
    Machine {
        memory: 64 * GI,
        prepared: Prepared {
            swap: Some("256Gi".into()),
            swap_behavior: Some("LimitedSwap".into()),
            tmpfs: vec!["/srv/nodeos-state".into()],
            ..Default::default()
        },
        chain_load: None,
        speed: None,
    }
}

fn view(pod: Pod, config: &str) -> PodView {
    let mut v = PodView::new(
        pod,
        "127.0.0.9".parse().unwrap(),
        BTreeMap::from([(
            "wax-1-nodeos".to_string(),
            BTreeMap::from([("config.ini".to_string(), config.to_string())]),
        )]),
        BTreeMap::new(),
    );
    v.machine = machine();
    v
}

fn clock() -> Clock {
    Clock {
        scale: 720.0,
        step: 1.0,
    }
}

fn start(v: &PodView) -> Started {
    let (sim, c) = crate::sim::clients::recognise(&v.pod).expect("recognised");
    assert_eq!(sim.name(), "nodeos");
    NodeosSim.start(v, c, &v.env(c), &clock())
}

fn exit_of(v: &PodView) -> Exit {
    match start(v) {
        Started::Exited(e) => e,
        Started::Running(_) => panic!("nodeos started"),
    }
}

fn reading(v: &PodView) -> pod_reading::Reading {
    let c = NodeosSim.recognise(&v.pod).unwrap();
    let line = v.command_line(c);
    pod_reading::read(v, c, &line[4..], &v.env(c)).unwrap_or_else(|e| panic!("{e:?}"))
}

const WAX: &str = "waxteam/waxnode:v5.0.3wax02";
const SPRING: &str = "ghcr.io/antelopeio/spring:v1.2.2";

#[test]
fn the_seed_pod_is_read_as_the_kubelet_and_nodeos_read_it() {
    let r = reading(&view(pod(WAX, "", HOST_TMPFS), "agent-name = lab\n"));
    let s = &r.setup;
    assert!(!r.spring);
    assert_eq!(s.budget_gib, 16.0);
    assert_eq!(s.hog_gib, 6.0);
    assert!(s.hog_waits);
    assert_eq!(s.place, model::Place::SwapTmpfs);
    assert_eq!(s.mode, model::Mode::Mapped);
    assert_eq!(s.db_gib, 48.0);
    // LimitedSwap: 8Gi of a 64Gi node's 256Gi of swap.
    assert_eq!(s.swap_gib, 32.0);
    assert!(r.chain_api && r.prometheus);
    assert_eq!(r.http_port, 8888);
    // Without a shared (pod-level) budget the hog presses nothing, and a Guaranteed pod
    // gets no swap.
    let mut p = pod(WAX, "", HOST_TMPFS);
    p.spec.as_mut().unwrap().resources = None;
    let r = reading(&view(p, ""));
    assert_eq!(r.setup.hog_gib, 0.0);
    assert_eq!(r.setup.swap_gib, 32.0);
    let mut p = pod(WAX, "", HOST_TMPFS);
    let res = p.spec.as_mut().unwrap().resources.as_mut().unwrap();
    res.requests = res.limits.clone();
    assert_eq!(reading(&view(p, "")).setup.swap_gib, 0.0);
}

#[test]
fn options_its_version_lacks_end_it_with_its_words() {
    let e = exit_of(&view(pod(WAX, ", --no-such-option", HOST_TMPFS), ""));
    assert_eq!(e.code, 254);
    assert_eq!(
        e.message,
        "Unknown option '--no-such-option' passed as command line argument"
    );
    // leap 5's producer-threads is gone from spring, vote-threads is new in it.
    let e = exit_of(&view(
        pod(SPRING, ", --producer-threads, '2'", HOST_TMPFS),
        "",
    ));
    assert!(e.message.contains("'--producer-threads'"));
    assert!(matches!(
        start(&view(pod(WAX, ", --producer-threads, '2'", HOST_TMPFS), "")),
        Started::Running(_)
    ));
    let e = exit_of(&view(
        pod(WAX, "", HOST_TMPFS),
        "prometheus-exporter-address = 0.0.0.0:9101\n",
    ));
    assert_eq!(
        e.message,
        "Unknown option 'prometheus-exporter-address' inside the config file /etc/nodeos/config.ini"
    );
    let e = exit_of(&view(
        pod(WAX, ", --database-map-mode, fast", HOST_TMPFS),
        "",
    ));
    assert!(
        e.message
            .contains("the argument ('fast') for option '--database-map-mode' is invalid")
    );
}

#[test]
fn chainbase_refuses_a_tmpfs_state_unless_mapped() {
    for state in [
        HOST_TMPFS,
        "{name: state, emptyDir: {medium: Memory, sizeLimit: 50Gi}}",
    ] {
        let e = exit_of(&view(pod(WAX, ", --database-map-mode, heap", state), ""));
        assert_eq!(e.code, 254);
        assert!(e.message.ends_with(
            "We recommend storing the state db file on tmpfs only when database-map-mode=mapped"
        ));
    }
    // On a disk, heap starts.
    let disk = "{name: state, emptyDir: {}}";
    assert!(matches!(
        start(&view(pod(WAX, ", --database-map-mode, heap", disk), "")),
        Started::Running(_)
    ));
}

#[test]
fn a_snapshot_and_a_genesis_together_are_refused() {
    let e = exit_of(&view(
        pod(
            WAX,
            ", --genesis-json, /etc/nodeos/genesis.json",
            HOST_TMPFS,
        ),
        "",
    ));
    assert!(
        e.message
            .contains("--snapshot is incompatible with --genesis-json")
    );
}

#[test]
fn a_state_larger_than_its_file_is_a_bad_alloc_while_loading() {
    let p = pod(WAX, "", HOST_TMPFS);
    let v = view(p, "");
    let Started::Running(n) = start(&v) else {
        panic!()
    };
    assert_eq!(n.exit(), None);
    let mut p = pod(WAX, "", HOST_TMPFS);
    let args = p.spec.as_mut().unwrap().containers[0]
        .args
        .as_mut()
        .unwrap();
    let at = args.iter().position(|a| a == "49152").unwrap();
    args[at] = "16384".into();
    let Started::Running(n) = start(&view(p, "")) else {
        panic!()
    };
    let e = n.exit().unwrap();
    assert_eq!((e.code, e.message.as_str()), (1, "bad alloc"));
}

#[test]
fn get_info_and_the_plugin_page_show_the_head_and_its_lag() {
    let v = view(pod(WAX, "", HOST_TMPFS), "");
    let Started::Running(n) = start(&v) else {
        panic!()
    };
    // Before the snapshot is loaded nothing answers.
    assert_eq!(n.metrics(60.0, 8888, "/v1/chain/get_info"), None);
    let t = 6.0 * 3600.0;
    let info: serde_json::Value =
        serde_json::from_str(&n.metrics(t, 8888, "/v1/chain/get_info").unwrap()).unwrap();
    assert_eq!(info["chain_id"], WAX_CHAIN_ID);
    assert_eq!(info["server_version_string"], "v5.0.3");
    let time = info["head_block_time"].as_str().unwrap();
    let head: jiff::civil::DateTime = time.parse().unwrap();
    let head = head.to_zoned(jiff::tz::TimeZone::UTC).unwrap().timestamp();
    let lag = jiff::Timestamp::now().duration_since(head).as_secs_f64();
    assert!(lag < 3.0, "in sync: {lag} s behind ({time})");
    let page = n.metrics(t, 8888, "/v1/prometheus/metrics").unwrap();
    for name in [
        "nodeos_head_block_num ",
        "nodeos_blocks_incoming ",
        "nodeos_trxs_incoming_total ",
        "nodeos_info{",
    ] {
        assert!(page.contains(&format!("\n{name}")), "{name}: {page}");
    }
    assert_eq!(n.metrics(t, 8888, "/v1/chain/get_block"), None);
}

#[test]
fn smaps_rollup_counts_the_tmpfs_state_in_swap_and_vmswap_does_not() {
    let v = view(pod(WAX, "", HOST_TMPFS), "");
    let Started::Running(n) = start(&v) else {
        panic!()
    };
    // Well after the catch-up, once the hog has taken its memory.
    let t = 4.0 * 3600.0;
    assert_eq!(n.proc(t).swap_bytes, 0);
    let files = n.proc_files(t);
    let (name, text) = &files[0];
    assert_eq!(name, "smaps_rollup");
    let swap_kb: u64 = text
        .lines()
        .find(|l| l.starts_with("Swap:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    // 32 GiB of state, 16 GiB less nodeos, the sidecars and the 6 GiB hog in RAM.
    let gib = swap_kb as f64 / (1 << 20) as f64;
    assert!((gib - 23.75).abs() < 0.01, "{gib} GiB in swap");
}
