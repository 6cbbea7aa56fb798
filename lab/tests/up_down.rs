//! The lab's own promises, on a second lab started beside the one `make test` runs: free
//! ports and a separate pod network (no collision), Ready nodes with hugepages, and a
//! `down` that leaves none of its processes running and no state behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use valtune_lab::control_plane::{UpOptions, down, up};

#[tokio::test]
#[ignore = "needs the lab's tools: run `make test`"]
async fn a_second_lab_comes_up_beside_the_first_and_goes_away_completely() {
    valtune_lab::init_crypto();
    let tools = PathBuf::from(std::env::var("VALTUNE_TOOLS_BIN").expect(
        "VALTUNE_TOOLS_BIN is not set: run the tests with `make test` (hack/tools/build.sh)",
    ));
    let dir = std::env::temp_dir().join(format!("valtune-second-lab-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = UpOptions {
        dir: dir.clone(),
        tools,
        topology: Path::new(env!("CARGO_MANIFEST_DIR")).join("topology.yaml"),
        time_scale: 720.0,
        scrape_interval: "1s".into(),
        lab_exe: PathBuf::from(env!("CARGO_BIN_EXE_valtune-lab")),
        valtune: None,
    };
    let state = up(&opts).await.expect("a second lab starts");
    if let Ok(first) = std::env::var("VALTUNE_LAB_DIR") {
        let first = valtune_lab::LabState::load(Path::new(&first)).unwrap();
        assert_ne!(first.apiserver_url, state.apiserver_url);
        assert_ne!(first.prometheus_url, state.prometheus_url);
        assert_ne!(first.pod_cidr, state.pod_cidr);
    }
    assert!(state.pod_cidr.starts_with("127."));

    let client = state.client().await.unwrap();
    let nodes: Api<Node> = Api::all(client);
    let list = nodes.list(&ListParams::default()).await.unwrap().items;
    // The topology's machines, and the lab's system node.
    let topology = valtune_lab::topology::Topology::load(&state.topology).unwrap();
    let machines = topology.nodes().unwrap();
    assert_eq!(list.len(), machines.len() + 1);
    for n in &list {
        let st = n.status.clone().unwrap();
        let ready = st
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        assert!(ready, "{:?} not Ready", n.metadata.name);
        if n.metadata.name.as_deref() == Some(valtune_lab::topology::SYSTEM_NODE) {
            let taints = n.spec.clone().unwrap().taints.unwrap_or_default();
            assert!(taints.is_empty(), "the system node is tainted: {taints:?}");
            continue;
        }
        // What the topology declares (the API server writes zero as "0").
        let machine = machines
            .iter()
            .find(|m| n.metadata.name.as_deref() == Some(m.name.as_str()))
            .expect("every node is one of the topology's machines");
        let want = match machine.hugepages1_gi {
            0 => "0".to_string(),
            gi => format!("{gi}Gi"),
        };
        let allocatable = st.allocatable.unwrap();
        assert_eq!(allocatable["hugepages-1Gi"].0, want);
        // Allocatable is what the machine's kubelet leaves: capacity less its
        // reservations and the hugepages, as the scheduler will see it.
        let expected = machine.allocatable().unwrap();
        assert_eq!(
            allocatable["cpu"].0,
            valtune_lab::allocatable::format_cpu(expected.cpu_millis)
        );
        // (The API server writes quantities in their canonical form: compare values.)
        let bytes = |q: &str| valtune_lab::sim::pod_view::parse_bytes(q).unwrap();
        assert_eq!(bytes(&allocatable["memory"].0), expected.memory);
        assert!(bytes(&allocatable["memory"].0) < bytes(&st.capacity.clone().unwrap()["memory"].0));
        let taints = n.spec.clone().unwrap().taints.unwrap();
        assert!(taints.iter().any(|t| t.effect == "NoSchedule"));
    }

    // A second `up` on a running lab reports it instead of starting another.
    let again = up(&opts).await.unwrap();
    assert_eq!(again.apiserver_url, state.apiserver_url);

    let processes = state.processes.clone();
    assert!(processes.len() >= 8, "{processes:?}");
    down(&dir, false).expect("down");
    for p in &processes {
        assert!(
            !p.is_alive(),
            "{} (pid {}) still runs after down",
            p.name,
            p.pid
        );
    }
    assert!(!dir.exists(), "down left {}", dir.display());
    assert!(
        !state.pod_network_lock.exists(),
        "down kept the pod network reserved"
    );
    // And its ports are free again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let api_port: u16 = state
        .apiserver_url
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    std::net::TcpListener::bind(("127.0.0.1", api_port)).expect("the API server's port is free");
}
