//! Besu as the lab plays it: recognised by its command (valtune's allocator wrapper or the
//! image's `besu`), started as its container would start it ([`start`]: the wrapper, the
//! start script, HotSpot, picocli; a bad option exits with the real program's words),
//! driven by the consensus client beside it when that one is wired to it (Engine API
//! port, the same JWT secret, the same network), then serving its Prometheus page,
//! posting each block's log line where its log4j2 configuration says ([`log4j`]), and
//! running out of heap or memory as the [`model`] says.

pub mod log4j;
pub mod model;
/// Besu's options by version, as upstream-keys extracted them from hyperledger/besu (the
/// model refuses unknown options by them; the operator judges besu.toml keys by the same).
pub use upstream_keys::besu as options;
pub mod start;

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod};

use super::{
    Env, Exit, Post, ProcFigures, Process, SimClient, Started, flag_values, image_version, seed,
};
use crate::sim::chain_load::started_at;
use crate::sim::clock::Clock;
use crate::sim::pod_view::PodView;
use model::{Allocator, BesuModel, Config};

pub struct BesuSim;

/// (major, minor, patch), comparable.
pub type V = (u32, u32, u32);

const GIB: f64 = (1u64 << 30) as f64;
/// The class whose INFO line reports each block (AbstractEngineNewPayload.java L87).
const NEW_PAYLOAD_LOGGER: &str =
    "org.hyperledger.besu.ethereum.api.jsonrpc.internal.methods.engine.AbstractEngineNewPayload";

fn version_of(image: &str) -> V {
    image_version(image).unwrap_or((25, 12, 0))
}

/// Whether the consensus client beside Besu drives it, and if not, why: Teku's Engine
/// endpoint must be Besu's Engine port on the pod's loopback, both must read the same
/// 256-bit hex secret (Besu: EngineAuthService reads at least 64 characters of line one;
/// Teku: JwtSecretKeyLoader trims the file), and both follow the same network.
pub fn wiring(
    pod: &PodView,
    besu: &Container,
    options: &std::collections::BTreeMap<String, String>,
) -> Result<(), String> {
    let spec = pod.pod.spec.as_ref().ok_or("no pod spec")?;
    let teku = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .find(|c| {
            let image = c.image.as_deref().unwrap_or("");
            image.contains("consensys/teku") || image.contains("/teku:")
        })
        .ok_or("no consensus client in the pod")?;
    let args = pod.command_line(teku);
    let engine_port = options
        .get("--engine-rpc-port")
        .or(options.get("--engine-rpc-http-port"))
        .map(String::as_str)
        .unwrap_or("8551");
    let endpoint = flag_values(&args, "--ee-endpoint")
        .last()
        .map(|s| s.to_string())
        .ok_or("Teku has no --ee-endpoint")?;
    let local = [
        format!("http://127.0.0.1:{engine_port}"),
        format!("http://localhost:{engine_port}"),
    ];
    if !local.iter().any(|l| endpoint.trim_end_matches('/') == l) {
        return Err(format!(
            "Teku's --ee-endpoint {endpoint} is not Besu's Engine API (port {engine_port})"
        ));
    }
    let besu_secret = options
        .get("--engine-jwt-secret")
        .and_then(|p| pod.file(besu, p))
        .ok_or("Besu has no JWT secret file: it writes an ephemeral jwt.hex Teku cannot know")?;
    let teku_secret = flag_values(&args, "--ee-jwt-secret-file")
        .last()
        .and_then(|p| pod.file(teku, p))
        .ok_or("Teku has no JWT secret file")?;
    let hex = |s: &str| {
        let s = s.trim();
        let s = s.strip_prefix("0x").unwrap_or(s);
        (s.len() == 64 && s.chars().all(|c| c.is_ascii_hexdigit())).then(|| s.to_lowercase())
    };
    let first_line = besu_secret.lines().next().unwrap_or("");
    match (hex(first_line), hex(&teku_secret)) {
        (Some(a), Some(b)) if a == b => {}
        (Some(_), Some(_)) => return Err("Besu and Teku read different JWT secrets".into()),
        _ => return Err("the JWT secret is not 64 hex characters".into()),
    }
    let network = options
        .get("--network")
        .map(|n| n.to_lowercase())
        .unwrap_or("mainnet".into());
    let teku_network = flag_values(&args, "--network")
        .last()
        .map(|n| n.to_lowercase())
        .unwrap_or("mainnet".into());
    if network != teku_network {
        return Err(format!("Besu follows {network} and Teku {teku_network}"));
    }
    Ok(())
}

fn cpu_limit(c: &Container) -> f64 {
    let q = c
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("cpu"));
    match q.map(|q| q.0.as_str()) {
        Some(s) if s.ends_with('m') => s[..s.len() - 1]
            .parse::<f64>()
            .map(|m| m / 1000.0)
            .unwrap_or(1.0),
        Some(s) => s.parse().unwrap_or(1.0),
        None => 4.0,
    }
}

impl SimClient for BesuSim {
    fn name(&self) -> &'static str {
        "besu"
    }

    fn recognise<'a>(&self, pod: &'a Pod) -> Option<&'a Container> {
        pod.spec.as_ref()?.containers.iter().find(|c| {
            let line: Vec<String> = c
                .command
                .iter()
                .flatten()
                .chain(c.args.iter().flatten())
                .cloned()
                .collect();
            start::besu_args(&line).is_some()
        })
    }

    fn start(&self, pod: &PodView, container: &Container, env: &Env, clock: &Clock) -> Started {
        let line = pod.command_line(container);
        let Some((args, wrapper)) = start::besu_args(&line) else {
            return Started::Exited(Exit {
                at: 0.0,
                reason: "Error",
                code: 127,
                message: "besu: not found".into(),
            });
        };
        let version = version_of(container.image.as_deref().unwrap_or(""));
        let file = |p: &str| pod.file(container, p);
        let s = match start::launch(&args, wrapper, env, version, &file) {
            Ok(s) => s,
            Err(exit) => return Started::Exited(exit),
        };
        let o = |k: &str| s.options.get(k).map(String::as_str);
        let limit = PodView::memory_limit(container)
            .map(|b| b as f64)
            .unwrap_or(64.0 * GIB);
        let cores = cpu_limit(container);
        let allocator = match s.preload.as_deref() {
            Some(l) if l.contains("jemalloc") => Allocator::Jemalloc,
            Some(l) if l.contains("tcmalloc") => Allocator::Tcmalloc,
            Some(l) if l.contains("mimalloc") => Allocator::Mimalloc,
            _ => Allocator::Glibc {
                arenas: s.arena_max.unwrap_or(8.0 * cores).min(8.0 * cores),
            },
        };
        let bonsai_default_flat = version >= (24, 5, 2);
        let flat = o("--Xbonsai-full-flat-db-enabled")
            .or(o("--Xsnapsync-synchronizer-flat-db-healing-enabled"))
            .map(|v| v.eq_ignore_ascii_case("true"))
            .unwrap_or(bonsai_default_flat);
        let wired = wiring(pod, container, &s.options);
        let metrics_on = o("--metrics-enabled").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        // The metrics server listens on --metrics-host and answers only Host headers on
        // --host-allowlist (403 otherwise: MetricsHttpService.java L96-106): Prometheus
        // scrapes by the pod's IP.
        let reachable = matches!(o("--metrics-host"), Some("0.0.0.0"))
            || o("--metrics-host") == Some(&pod.ip.to_string());
        let allowlist = o("--host-allowlist").unwrap_or("localhost,127.0.0.1");
        let allowed = allowlist
            .split(',')
            .any(|h| h == "*" || h == pod.ip.to_string());
        let metrics_port = o("--metrics-port")
            .and_then(|p| p.parse().ok())
            .unwrap_or(9545);
        let sinks = env
            .get("LOG4J_CONFIGURATION_FILE")
            .and_then(|p| pod.file(container, p))
            .map(|xml| log4j::http_sinks(&xml, NEW_PAYLOAD_LOGGER))
            .unwrap_or_default();
        let heap = s.heap.unwrap_or(limit * s.max_ram_percentage / 100.0);
        // The Engine API's port also serves /liveness and /readiness, to Host headers on
        // --engine-host-allowlist (EngineRPCOptions.java @25.12.0 L57-63: default
        // localhost,127.0.0.1; EngineJsonRpcService.java L604-616 answers 403 otherwise).
        let engine_port = o("--engine-rpc-port")
            .or(o("--engine-rpc-http-port"))
            .and_then(|p| p.parse().ok())
            .unwrap_or(8551);
        let engine_hosts = o("--engine-host-allowlist")
            .unwrap_or("localhost,127.0.0.1")
            .split(',')
            .map(|h| h.trim().to_lowercase())
            .collect();
        let model = BesuModel::new(
            seed(&pod.name),
            Config {
                cores,
                memory_limit: limit,
                heap,
                allocator,
                forest: o("--data-storage-format")
                    .is_some_and(|f| f.eq_ignore_ascii_case("FOREST")),
                flat_db: flat,
                high_spec: o("--Xplugin-rocksdb-high-spec-enabled")
                    .is_some_and(|v| v.eq_ignore_ascii_case("true")),
                g1_tuned: s.g1_tuned,
                exit_on_oom: s.exit_on_oom,
                wired: wired.is_ok(),
                chain: crate::sim::chain_load::of(pod, &container.name, clock.scale),
            },
        );
        Started::Running(Arc::new(Besu {
            model,
            metrics_port: (metrics_on && reachable).then_some(metrics_port),
            serves: allowed,
            sinks,
            version,
            clock: clock.clone(),
            start: started_at(&pod.pod, &container.name),
            wiring: wired.err(),
            engine_port,
            engine_hosts,
        }))
    }
}

/// A running Besu.
pub struct Besu {
    pub model: BesuModel,
    metrics_port: Option<u16>,
    serves: bool,
    sinks: Vec<log4j::HttpSink>,
    version: V,
    clock: Clock,
    start: Timestamp,
    /// Why the consensus client does not drive it, if it does not.
    pub wiring: Option<String>,
    engine_port: u16,
    engine_hosts: Vec<String>,
}

impl Besu {
    /// Wall-clock seconds of simulated second `t`.
    fn wall(&self, t: f64) -> f64 {
        self.clock.at(self.start, t).as_millisecond() as f64 / 1000.0
    }

    /// The "Imported #" line of AbstractEngineNewPayload.logImportedBlockInfo, in the
    /// version's format.
    fn block_line(&self, b: &model::Block) -> String {
        let v = self.version;
        let hash = format!("0x{:04x}…{:04x}", b.number % 65521, b.slot % 65521);
        let secs = b.exec_ms / 1000.0;
        let peers = 25;
        let number = group(b.number);
        let txs = b.txs;
        if v < (24, 12, 0) {
            format!(
                "Imported #{number} / {txs} tx / 16 ws / 3 blobs / base fee 1.02 gwei / 15,000,000 (50.0%) gas / ({hash}) in {secs:.3}s. Peers: {peers}"
            )
        } else if v < (25, 5, 0) {
            format!(
                "Imported #{number}  ({hash})|{txs:>5} tx| 16 ws| 3 blobs| base fee 1.02 gwei| gas used  15,000,000 ( 50.0%)| exec time {secs:.3}s| mgas/s {:6.2}| peers: {peers:2}",
                15.0 / secs.max(1e-3)
            )
        } else if v < (25, 10, 0) || b.exec_ms >= 1000.0 {
            format!(
                "Imported #{number}  ({hash})|{txs:>5} tx| 16 ws|  3 blobs| 1.02 gwei bfee|  15,000,000 ( 50.0%) gas used| {secs:.3}s exec| {:6.2} Mgas/s| {peers:2} peers",
                15.0 / secs.max(1e-3)
            )
        } else {
            format!(
                "Imported #{number}  ({hash})|{txs:>5} tx| 16 ws|  3 blobs| 1.02 gwei bfee|  15,000,000 ( 50.0%) gas used| {:.1}ms exec| {:6.2} Mgas/s| {peers:2} peers",
                b.exec_ms,
                15.0 / secs.max(1e-3)
            )
        }
    }
}

/// `%,d`: digits grouped by commas.
fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl Process for Besu {
    fn exit(&self) -> Option<Exit> {
        let heap = self
            .model
            .heap_oom_at()
            .filter(|_| self.model.c.exit_on_oom)
            .map(|at| Exit {
                at,
                reason: "Error",
                // HotSpot with ExitOnOutOfMemoryError (debug.cpp report_java_out_of_memory).
                code: 3,
                message: "Terminating due to java.lang.OutOfMemoryError: Java heap space".into(),
            });
        let kill = self.model.oom_kill_at().map(|at| Exit {
            at,
            reason: "OOMKilled",
            code: 137,
            message: String::new(),
        });
        [heap, kill]
            .into_iter()
            .flatten()
            .min_by(|a, b| a.at.total_cmp(&b.at))
    }

    fn posts(&self, t0: f64, t1: f64) -> Vec<Post> {
        let mut last_ms = i64::MIN;
        let lines: Vec<(String, i64)> = self
            .model
            .finished(t0, t1)
            .iter()
            .map(|b| {
                // Blocks closer than a millisecond in lab time get distinct stamps.
                let ms = ((self.wall(b.done) * 1000.0) as i64).max(last_ms + 1);
                last_ms = ms;
                (self.block_line(b), ms)
            })
            .collect();
        self.sinks
            .iter()
            .filter_map(|sink| {
                let body: String = lines
                    .iter()
                    .filter_map(|(line, ms)| sink.render(line, *ms))
                    .collect();
                (!body.is_empty()).then(|| Post {
                    url: sink.url.clone(),
                    body,
                })
            })
            .collect()
    }

    fn proc(&self, t: f64) -> ProcFigures {
        ProcFigures {
            comm: "java".into(),
            rss_bytes: self.model.rss(t) as u64,
            vsz_bytes: self.model.vsz(t) as u64,
            swap_bytes: 0,
            minor_faults: 0,
            major_faults: 0,
            read_bytes: 0,
            write_bytes: 0,
            threads: 180,
        }
    }

    fn metrics_ports(&self) -> Vec<u16> {
        self.metrics_port.into_iter().collect()
    }

    fn http_ports(&self) -> Vec<u16> {
        vec![self.engine_port]
    }

    /// `/readiness` on the Engine port as Besu answers it (HealthService.java and
    /// ReadinessCheck.java @25.12.0): 200 `{"status" : "UP"}` with at least `minPeers`
    /// peers (default 1) and at most `maxBlocksBehind` blocks (default 2) between the
    /// best known block and its head, 503 `"DOWN"` otherwise or for a parameter that is
    /// not a number; `/liveness` always UP. A Host off the allowlist gets 403.
    fn http_get(&self, t: f64, port: u16, path: &str, host: Option<&str>) -> Option<(u16, String)> {
        if port != self.engine_port {
            return None;
        }
        let host = host
            .map(|h| {
                h.rsplit_once(':')
                    .map(|(n, _)| n)
                    .unwrap_or(h)
                    .to_lowercase()
            })
            .unwrap_or_default();
        if !self
            .engine_hosts
            .iter()
            .any(|h| h == "*" || h == "all" || *h == host)
        {
            return Some((403, r#"{"message":"Host not authorized."}"#.into()));
        }
        let (route, query) = path.split_once('?').unwrap_or((path, ""));
        let param = |name: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        };
        let up = match route {
            "/liveness" => true,
            "/readiness" => {
                let min_peers = param("minPeers")
                    .map(|v| v.parse::<u64>().ok())
                    .unwrap_or(Some(1));
                let max_behind = param("maxBlocksBehind")
                    .map(|v| v.parse::<u64>().ok())
                    .unwrap_or(Some(2));
                let m = &self.model;
                let head = m.head(t).map(|b| b.number).unwrap_or(0);
                let best = m.chain_number(t).max(head);
                match (min_peers, max_behind) {
                    (Some(p), Some(b)) => m.peers(t) >= p && best - head <= b,
                    _ => false,
                }
            }
            _ => return None,
        };
        let (code, text) = if up { (200, "UP") } else { (503, "DOWN") };
        Some((code, format!("{{\n  \"status\" : \"{text}\"\n}}")))
    }

    fn metrics(&self, t: f64, port: u16, path: &str) -> Option<String> {
        // Only / and /metrics (MetricsHttpService.java L157-169); a Host off the allowlist
        // gets 403, which the lab shows as no page.
        if Some(port) != self.metrics_port || !matches!(path, "/" | "/metrics") || !self.serves {
            return None;
        }
        let m = &self.model;
        let head = m.head(t);
        let gauge = |name: &str, value: f64| format!("# TYPE {name} gauge\n{name} {value}\n");
        // Ages read in simulated seconds: the head's timestamp is placed that far before
        // the wall clock (docs/lab.md, time compression).
        let head_ts = self.wall(t) - m.head_age(t);
        let height = head.map(|b| b.number).unwrap_or(0) as f64;
        let mut page = String::new();
        page += &gauge("ethereum_blockchain_height", height);
        page += &gauge("besu_blockchain_chain_head_timestamp", head_ts);
        page += &gauge(
            "ethereum_best_known_block_number",
            (m.chain_number(t) as f64).max(height),
        );
        page += &gauge(
            "besu_synchronizer_in_sync",
            if m.head_age(t) < 3.0 * model::SLOT_S {
                1.0
            } else {
                0.0
            },
        );
        page += &gauge("ethereum_peer_count", m.peers(t) as f64);
        // DefaultBlockchain.createCounters @25.12.0 (BLOCKCHAIN category): client_java
        // exposes a counter with `_total`.
        let counter = "besu_blockchain_chain_head_transaction_count_counter_total";
        page += &format!(
            "# TYPE {counter} counter\n{counter} {}\n",
            m.transactions(t)
        );
        if self.version >= (25, 1, 0) {
            let ns = head.map(|b| b.exec_ms * 1e6).unwrap_or(0.0);
            page += &gauge("besu_block_processing_execution_time_head", ns.round());
        }
        page += &gauge("process_resident_memory_bytes", m.rss(t).round());
        page += &gauge("process_virtual_memory_bytes", m.vsz(t).round());
        page += &gauge("process_start_time_seconds", self.wall(0.0).round());
        page += "# TYPE jvm_memory_used_bytes gauge\n";
        page += &format!(
            "jvm_memory_used_bytes{{area=\"heap\"}} {}\n",
            m.heap_used(t).round()
        );
        page += &format!(
            "jvm_memory_used_bytes{{area=\"nonheap\"}} {}\n",
            (0.35 * GIB).round()
        );
        page += "# TYPE jvm_memory_committed_bytes gauge\n";
        page += &format!(
            "jvm_memory_committed_bytes{{area=\"heap\"}} {}\n",
            m.heap_committed(t).round()
        );
        page += "# TYPE jvm_memory_max_bytes gauge\n";
        page += &format!(
            "jvm_memory_max_bytes{{area=\"heap\"}} {}\n",
            m.c.heap.round()
        );
        Some(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(teku_args: &str, secrets: &[(&str, &str)]) -> PodView {
        let pod: Pod = serde_saphyr::from_str(&format!(
            "metadata: {{name: t-1, namespace: ns}}
spec:
  volumes:
  - {{name: jwt, secret: {{secretName: x-engine-jwt}}}}
  - {{name: other, secret: {{secretName: other-jwt}}}}
  initContainers:
  - name: teku
    image: consensys/teku:25.12.0
    args: [{teku_args}]
    volumeMounts: [{{name: jwt, mountPath: /jwt}}, {{name: other, mountPath: /other}}]
  containers:
  - name: besu
    image: hyperledger/besu:25.12.0
    command: [sh, -c, 'exec /opt/besu/bin/besu \"$@\"', besu]
    args: [--engine-jwt-secret=/jwt/jwt.hex]
    volumeMounts: [{{name: jwt, mountPath: /jwt}}]
"
        ))
        .unwrap();
        let secrets = secrets
            .iter()
            .map(|(name, value)| {
                (
                    name.to_string(),
                    [("jwt.hex".to_string(), value.to_string())].into(),
                )
            })
            .collect();
        PodView::new(
            pod,
            "127.0.0.9".parse().unwrap(),
            Default::default(),
            secrets,
        )
    }

    #[test]
    fn teku_drives_besu_only_with_the_same_secret_on_its_engine_port() {
        let key = "ab".repeat(32);
        let other = "cd".repeat(32);
        let secrets = [
            ("x-engine-jwt", key.as_str()),
            ("other-jwt", other.as_str()),
        ];
        let options = [(
            "--engine-jwt-secret".to_string(),
            "/jwt/jwt.hex".to_string(),
        )]
        .into();
        let check = |args: &str| {
            let view = pod(args, &secrets);
            let besu = view.pod.spec.as_ref().unwrap().containers[0].clone();
            wiring(&view, &besu, &options)
        };
        assert_eq!(
            check("--ee-endpoint=http://127.0.0.1:8551, --ee-jwt-secret-file=/jwt/jwt.hex"),
            Ok(())
        );
        assert_eq!(
            check("--ee-endpoint=http://127.0.0.1:8551, --ee-jwt-secret-file=/other/jwt.hex"),
            Err("Besu and Teku read different JWT secrets".into())
        );
        assert!(
            check("--ee-endpoint=http://127.0.0.1:8552, --ee-jwt-secret-file=/jwt/jwt.hex")
                .unwrap_err()
                .contains("is not Besu's Engine API (port 8551)")
        );
        assert!(
            check("--ee-endpoint=http://127.0.0.1:8551, --ee-jwt-secret-file=/jwt/jwt.hex, --network=hoodi")
                .unwrap_err()
                .contains("Besu follows mainnet and Teku hoodi")
        );
    }

    #[test]
    fn versions_come_from_the_image_tag() {
        assert_eq!(version_of("hyperledger/besu:25.12.0"), (25, 12, 0));
        assert_eq!(version_of("registry:5000/besu:24.1.2-amd64"), (24, 1, 2));
        assert_eq!(group(23_900_001), "23,900,001");
    }
}
