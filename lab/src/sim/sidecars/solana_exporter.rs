//! asymmetric-research/solana-exporter, played from its source (it is not on the Go module
//! proxy here). Behaviour at tag v3.0.2 (0e06a98), with line numbers of that tag:
//! - at start it calls `getVoteAccounts` (config.go L101-110, utils.go L115-118), even in
//!   light mode; an error is fatal ("error getting associated validator accounts: ...");
//! - a slot watcher calls `getEpochInfo` every `-slot-pace` (slots.go L184-198) and sets
//!   the gauges `solana_node_transactions_total`, `solana_node_slot_height`,
//!   `solana_node_block_height`;
//! - every scrape calls `getHealth`, `minimumLedgerSlot`, `getFirstAvailableBlock`
//!   (collector.go L334-348; the last two only on `--full-rpc-api`), `getVoteAccounts`
//!   (not in light mode), `getVersion`, `getIdentity`; one failing call makes the whole
//!   page HTTP 500 (promhttp's HTTPErrorOnError).
//!
//! Later commits, in no tag as of 2025-10-30, make light mode skip the full-API methods
//! (d112d7b) and the start-up call (059584b); an image tagged other than v3.0.x is played
//! with those fixes.
//!
//! One liberty: the real exporter runs those calls when it is scraped (`Collect`, the
//! end of collector.go), one after the other; the played one runs them on a tick of the
//! lab's scrape interval and serves the last page it rendered (a failed call still makes
//! it a 500). On a real node the exporter and the validator have CPUs of their own; in
//! the lab they share the simulator's process with every other pod, and on a busy
//! machine six round trips inside one scrape outlasted the lab's 1 s scrape timeout
//! (issue 23: up to 1.7 s at load 28-38, `up == 0` for 100 of 250 scrapes). The page a
//! scrape gets is at most one scrape interval old, which is what the scrape interval
//! already allows.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use serde_json::{Value, json};

use crate::sim::pod_view::PodView;

/// The names the exporter serves in light mode (desc.go, slots.go at v3.0.2).
pub const NAMES: &[&str] = &[
    "solana_node_is_healthy",
    "solana_node_num_slots_behind",
    "solana_node_version",
    "solana_node_transactions_total",
    "solana_node_slot_height",
    "solana_node_block_height",
];

/// Go `flag` values: `-name value`, `-name=value`, `--name=value`; a bare bool is true.
fn go_flag(args: &[String], name: &str) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let bare = a.trim_start_matches('-');
        if bare == name {
            return Some(it.next().cloned().unwrap_or_else(|| "true".into()));
        }
        if let Some(v) = bare.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
            return Some(v.to_string());
        }
    }
    None
}

fn go_bool(args: &[String], name: &str) -> bool {
    args.iter().any(|a| {
        let bare = a.trim_start_matches('-');
        bare == name || bare == format!("{name}=true")
    })
}

struct Rpc {
    http: reqwest::Client,
    /// Its `-rpc-url` as the pod says it.
    url: String,
    /// Where that is here, asked at each call: a validator started after the exporter
    /// (the kubelet starts native sidecars first) may bind its RPC to the pod's loopback.
    resolve: Resolve,
}

/// Maps an address of the pod to where it is on this machine (pod_view.rs `local_addr`).
pub type Resolve = Arc<dyn Fn(&str) -> String + Send + Sync>;

impl Rpc {
    /// One call; Err(text) as the exporter would report it.
    async fn call(&self, method: &str, params: Value) -> Result<Value, RpcFailure> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let resp = self
            .http
            .post((self.resolve)(&self.url))
            .json(&body)
            .send()
            .await
            .map_err(|e| RpcFailure::Transport(format!("{method}: {e}")))?;
        let v: Value = resp
            .json()
            .await
            .map_err(|e| RpcFailure::Transport(format!("{method}: {e}")))?;
        if let Some(err) = v.get("error") {
            return Err(RpcFailure::Rpc {
                code: err["code"].as_i64().unwrap_or(0),
                message: err["message"].as_str().unwrap_or("").to_string(),
                data: err.get("data").cloned().unwrap_or(Value::Null),
            });
        }
        Ok(v.get("result").cloned().unwrap_or(Value::Null))
    }
}

#[derive(Debug)]
enum RpcFailure {
    Transport(String),
    Rpc {
        code: i64,
        message: String,
        data: Value,
    },
}

impl std::fmt::Display for RpcFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RpcFailure::Transport(e) => write!(f, "{e}"),
            RpcFailure::Rpc { code, message, .. } => {
                write!(f, "rpc error (code: {code}): {message}")
            }
        }
    }
}

#[derive(Default)]
struct Watched {
    transactions: f64,
    slot: f64,
    block: f64,
}

fn log_line(log: &Path, line: &str) {
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = writeln!(f, "{} {line}", jiff::Timestamp::now());
    }
}

/// A rendered page: its status and body.
type Page = Arc<(axum::http::StatusCode, String)>;

/// Runs the exporter until it exits; its exit code. `refresh` is the lab's scrape
/// interval: how often the page is collected anew.
pub async fn run(
    view: &PodView,
    c: &Container,
    tag: &str,
    log: &Path,
    refresh: Duration,
    resolve: Resolve,
) -> Option<i32> {
    let args: Vec<String> = view
        .command_line(c)
        .iter()
        .map(|a| view.local_addr(a))
        .collect();
    let fixed = !tag.starts_with("v1.") && !tag.starts_with("v2.") && !tag.starts_with("v3.0.");
    let light = go_bool(&args, "light-mode");
    // The URL as the pod says it, resolved at each call.
    let url =
        go_flag(&view.command_line(c), "rpc-url").unwrap_or_else(|| "http://localhost:8899".into());
    let listen = go_flag(&args, "listen-address").unwrap_or_else(|| ":8080".into());
    let pace = go_flag(&args, "slot-pace")
        .and_then(|p| crate::state::parse_seconds(&p))
        .unwrap_or(1.0);
    let Ok(addr) = view.local_addr(&listen).parse::<SocketAddr>() else {
        log_line(log, &format!("invalid -listen-address {listen}"));
        return Some(1);
    };
    let rpc = Arc::new(Rpc {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .ok()?,
        url: url.clone(),
        resolve,
    });
    log_line(
        log,
        &format!("starting solana-exporter {tag} (rpc {url}, light mode {light})"),
    );
    if !(fixed && light)
        && let Err(e) = rpc
            .call("getVoteAccounts", json!([{"commitment": "finalized"}]))
            .await
    {
        log_line(
            log,
            &format!("error getting associated validator accounts: {e}"),
        );
        return Some(1);
    }
    let watched = Arc::new(Mutex::new(Watched::default()));
    let watcher = {
        let (rpc, watched, log) = (rpc.clone(), watched.clone(), log.to_path_buf());
        async move {
            loop {
                match rpc
                    .call("getEpochInfo", json!([{"commitment": "finalized"}]))
                    .await
                {
                    Ok(info) => {
                        let mut w = watched.lock().expect("lock");
                        w.transactions = info["transactionCount"].as_f64().unwrap_or(0.0);
                        w.slot = info["absoluteSlot"].as_f64().unwrap_or(0.0);
                        w.block = info["blockHeight"].as_f64().unwrap_or(0.0);
                    }
                    Err(e) => log_line(&log, &format!("failed to get epoch info: {e}")),
                }
                tokio::time::sleep(Duration::from_secs_f64(pace)).await;
            }
        }
    };
    // The collector's tick: the page is rendered here, not in the scrape (see above).
    let (page_tx, page_rx) = tokio::sync::watch::channel::<Option<Page>>(None);
    let collector = {
        let (rpc, watched) = (rpc.clone(), watched.clone());
        async move {
            loop {
                let page = Arc::new(scrape(&rpc, &watched, fixed, light).await);
                page_tx.send_replace(Some(page));
                tokio::time::sleep(refresh).await;
            }
        }
    };
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let mut rx = page_rx.clone();
            async move {
                // Before the first collection ends, the scrape waits for it.
                let page = match rx.wait_for(Option::is_some).await {
                    Ok(p) => p.clone(),
                    Err(_) => None,
                };
                match page {
                    Some(p) => (p.0, p.1.clone()),
                    None => (axum::http::StatusCode::SERVICE_UNAVAILABLE, String::new()),
                }
            }
        }),
    );
    let listener = match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            log_line(log, &format!("listening on {addr}: {e}"));
            return Some(1);
        }
    };
    tokio::select! {
        _ = watcher => Some(0),
        _ = collector => Some(0),
        r = axum::serve(listener, app) => {
            if let Err(e) = r {
                log_line(log, &format!("server: {e}"));
            }
            Some(1)
        }
    }
}

/// One scrape: the collector's calls, in order; any failure fails the page.
async fn scrape(
    rpc: &Rpc,
    watched: &Mutex<Watched>,
    fixed: bool,
    light: bool,
) -> (axum::http::StatusCode, String) {
    let mut errors = Vec::new();
    // getHealth: "ok" -> healthy; NodeUnhealthy with numSlotsBehind -> behind (null: 0).
    let (healthy, behind) = match rpc.call("getHealth", json!([])).await {
        Ok(_) => (1.0, 0.0),
        Err(RpcFailure::Rpc {
            code: -32005, data, ..
        }) => (0.0, data["numSlotsBehind"].as_f64().unwrap_or(0.0)),
        Err(e) => {
            errors.push(format!(
                "collected metric \"solana_node_is_healthy\" was collected with an error: {e}"
            ));
            (0.0, 0.0)
        }
    };
    if !(fixed && light) {
        for method in ["minimumLedgerSlot", "getFirstAvailableBlock"] {
            if let Err(e) = rpc.call(method, json!([])).await {
                errors.push(format!("error collecting metric: {method}: {e}"));
            }
        }
    }
    if !light && let Err(e) = rpc.call("getVoteAccounts", json!([])).await {
        errors.push(format!("error collecting metric: getVoteAccounts: {e}"));
    }
    let version = match rpc.call("getVersion", json!([])).await {
        Ok(v) => v["solana-core"].as_str().unwrap_or("").to_string(),
        Err(e) => {
            errors.push(format!("error collecting metric: getVersion: {e}"));
            String::new()
        }
    };
    if let Err(e) = rpc.call("getIdentity", json!([])).await {
        errors.push(format!("error collecting metric: getIdentity: {e}"));
    }
    if !errors.is_empty() {
        return (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "An error has occurred while serving metrics:\n\n{}\n",
                errors.join("\n")
            ),
        );
    }
    let w = watched.lock().expect("lock");
    let body = format!(
        "# HELP solana_node_is_healthy Whether the node is healthy\n# TYPE solana_node_is_healthy gauge\nsolana_node_is_healthy {healthy}\n\
         # HELP solana_node_num_slots_behind The number of slots that the node is behind the latest cluster confirmed slot.\n# TYPE solana_node_num_slots_behind gauge\nsolana_node_num_slots_behind {behind}\n\
         # HELP solana_node_version Node version of solana\n# TYPE solana_node_version gauge\nsolana_node_version{{version=\"{version}\"}} 1\n\
         # HELP solana_node_transactions_total Total number of transactions processed without error since genesis.\n# TYPE solana_node_transactions_total gauge\nsolana_node_transactions_total {}\n\
         # HELP solana_node_slot_height The current slot number\n# TYPE solana_node_slot_height gauge\nsolana_node_slot_height {}\n\
         # HELP solana_node_block_height The current block height of the node\n# TYPE solana_node_block_height gauge\nsolana_node_block_height {}\n",
        w.transactions, w.slot, w.block
    );
    (axum::http::StatusCode::OK, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A validator RPC that takes `delay` per call, as a starved one does; `failing`
    /// answers with an error.
    async fn slow_rpc(delay: Duration, failing: &'static str) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new().route(
            "/",
            axum::routing::post(move |axum::Json(req): axum::Json<Value>| async move {
                tokio::time::sleep(delay).await;
                let method = req["method"].as_str().unwrap_or("");
                axum::Json(if method == failing {
                    json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "busy"}})
                } else {
                    let result = match method {
                        "getHealth" => json!("ok"),
                        "getVersion" => json!({"solana-core": "4.0.3"}),
                        "getIdentity" => json!({"identity": "x"}),
                        "getEpochInfo" => {
                            json!({"absoluteSlot": 7, "blockHeight": 6, "transactionCount": 5})
                        }
                        _ => json!(0),
                    };
                    json!({"jsonrpc": "2.0", "id": 1, "result": result})
                })
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }

    /// The exporter of v3.0.2 in light mode against `rpc`; the address of its /metrics.
    async fn exporter(rpc: SocketAddr) -> String {
        crate::init_crypto();
        let listen = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "t-1", "namespace": "ns"},
            "spec": {"containers": [{"name": "rpc-exporter", "image": "e", "args": [
                format!("-rpc-url=http://{rpc}/"), "-light-mode", format!("-listen-address={listen}"),
            ]}]},
        }))
        .unwrap();
        let c = pod.spec.as_ref().unwrap().containers[0].clone();
        let view = PodView::new(
            pod,
            "127.0.0.1".parse().unwrap(),
            Default::default(),
            Default::default(),
        );
        let log = std::env::temp_dir().join(format!("solana-exporter-test-{}.log", listen.port()));
        tokio::spawn(async move {
            let v = view.clone();
            let resolve: Resolve = Arc::new(move |u| v.local_addr(u));
            run(&view, &c, "v3.0.2", &log, Duration::from_secs(1), resolve).await;
        });
        format!("http://{listen}/metrics")
    }

    /// A scrape waits for the first collection, then until it answers.
    async fn scrape_until_up(url: &str) -> reqwest::Response {
        for _ in 0..100 {
            if let Ok(r) = reqwest::get(url).await {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{url} never answered");
    }

    /// Issue 23: six round trips to a starved validator inside one scrape outlasted the
    /// lab's 1 s scrape timeout. The page is collected on the exporter's own tick; a
    /// scrape gets the last one at once.
    #[tokio::test]
    async fn a_scrape_is_answered_without_waiting_for_the_rpc_calls() {
        let rpc = slow_rpc(Duration::from_millis(400), "").await;
        let url = exporter(rpc).await;
        let first = scrape_until_up(&url).await;
        assert_eq!(first.status(), 200);
        let started = std::time::Instant::now();
        let page = reqwest::get(&url).await.unwrap();
        let took = started.elapsed();
        assert_eq!(page.status(), 200);
        let body = page.text().await.unwrap();
        assert!(body.contains("solana_node_is_healthy 1\n"), "{body}");
        assert!(
            body.contains("solana_node_version{version=\"4.0.3\"} 1"),
            "{body}"
        );
        // Five calls of 400 ms each (getHealth, minimumLedgerSlot, getFirstAvailableBlock,
        // getVersion, getIdentity) would take 2 s.
        assert!(took < Duration::from_secs(1), "the scrape took {took:?}");
    }

    /// A call that fails still fails the whole page, as promhttp's HTTPErrorOnError does.
    #[tokio::test]
    async fn a_failed_call_still_fails_the_page() {
        let rpc = slow_rpc(Duration::from_millis(10), "getIdentity").await;
        let url = exporter(rpc).await;
        let page = scrape_until_up(&url).await;
        assert_eq!(page.status(), 500);
        let body = page.text().await.unwrap();
        assert!(
            body.contains("getIdentity: rpc error (code: -32000): busy"),
            "{body}"
        );
    }

    #[test]
    fn go_flags_parse_in_every_spelling() {
        let args: Vec<String> = [
            "-rpc-url=http://x:8899",
            "-light-mode",
            "--listen-address",
            ":8080",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(go_flag(&args, "rpc-url").as_deref(), Some("http://x:8899"));
        assert_eq!(go_flag(&args, "listen-address").as_deref(), Some(":8080"));
        assert!(go_bool(&args, "light-mode"));
        assert!(!go_bool(&args, "comprehensive-slot-tracking"));
    }
}
