//! What the benches share: a lab of their own (the release `valtune-lab`, simulated
//! bare-metal nodes), valtune's CRDs, and the operator spawned as its own user.

use std::path::{Path, PathBuf};

use valtune_lab::LabState;
use valtune_lab::control_plane::{self, UpOptions};

#[allow(dead_code)] // bench.rs only
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Bare-metal nodes like lab/topology.yaml's (`memory` each), named `bench-NN`.
pub fn topology(nodes: usize, memory: &str) -> String {
    let mut t = format!(
        "defaults:\n  cpu: 192\n  memory: {memory}\n  hugepages1Gi: 64\n  pods: 110\n  nvme: [7Ti, 7Ti, 7Ti]\n  labels: {{valtune.dev/bare-metal: \"true\"}}\n  taints:\n    - {{key: valtune.dev/validator, value: \"true\", effect: NoSchedule}}\nnodes:\n",
    );
    for i in 1..=nodes {
        t.push_str(&format!("  - name: bench-{i:02}\n"));
    }
    t
}

/// A running bench lab: its state, an admin client, and the operator's listen address.
pub struct BenchLab {
    pub state: LabState,
    pub client: kube::Client,
    pub dir: PathBuf,
}

/// Starts a lab in `target/bench/<name>` with `topology` (a fresh one: a previous run's
/// is taken down first) and installs valtune's CRDs.
pub async fn up(name: &str, topology: &str) -> BenchLab {
    valtune_lab::init_crypto();
    let work = repo().join("target/bench");
    let _ = std::fs::create_dir_all(&work);
    let dir = work.join(name);
    let _ = control_plane::down(&dir, false);
    let topology_file = work.join(format!("{name}-topology.yaml"));
    std::fs::write(&topology_file, topology).unwrap();
    let state = control_plane::up(&UpOptions {
        dir: dir.clone(),
        tools: PathBuf::from(std::env::var("VALTUNE_TOOLS_BIN").expect("VALTUNE_TOOLS_BIN")),
        topology: topology_file,
        time_scale: 720.0,
        scrape_interval: "1s".into(),
        lab_exe: PathBuf::from(std::env::var("VALTUNE_LAB_EXE").expect("VALTUNE_LAB_EXE")),
        valtune: None,
    })
    .await
    .expect("starting the bench lab");
    let client = state.client().await.unwrap();
    control_plane::install_crds(&client, &repo().join("crds"))
        .await
        .unwrap();
    BenchLab { state, client, dir }
}

impl BenchLab {
    /// Spawns the operator as its own user (env sets its kubeconfig), so the audit log
    /// tells its writes from everyone else's; returns the address of its /metrics.
    pub fn spawn_operator(&self) -> String {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let listen = format!("127.0.0.1:{port}");
        control_plane::spawn_into(
            &self.state.dir,
            "operator",
            &[
                "/usr/bin/env".to_string(),
                format!("KUBECONFIG={}", self.state.operator_kubeconfig().display()),
                env!("CARGO_BIN_EXE_valtune").to_string(),
                "operator".into(),
                "--prometheus-url".into(),
                self.state.prometheus_url.clone(),
                "--listen".into(),
                listen.clone(),
                "--lease-namespace".into(),
                "default".into(),
            ],
        )
        .unwrap();
        listen
    }

    /// An example manifest as the lab runs it (lab/src/compress.rs), named `name` in
    /// namespace `name`.
    pub fn example(&self, path: &str, name: &str) -> serde_json::Value {
        let mut v: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(repo().join(path)).unwrap()).unwrap();
        valtune_lab::compress::Compression::of(&self.state)
            .and_then(|c| c.apply(&mut v))
            .unwrap();
        v["metadata"] = serde_json::json!({"name": name, "namespace": name});
        v
    }

    pub fn down(self) {
        control_plane::down(&self.dir, false).unwrap();
    }
}
