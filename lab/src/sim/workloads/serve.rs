//! What a simulated process serves, at the addresses its flags say: JSON-RPC over HTTP,
//! its native Prometheus and health pages, and its admin RPC on a Unix socket.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tracing::warn;

use super::live::Live;
use crate::kubelet::firewall::Guarded;
use crate::sim::clients::Rpc;
use crate::topology::SLOW_RPC_LABEL;

/// The admin RPC on its Unix socket, as jsonrpc-ipc-server serves it: JSON-RPC 2.0
/// requests one after another on a connection, each answer a line.
pub(super) async fn serve_admin(path: PathBuf, live: Arc<Live>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // A socket file left by the previous process of this ledger.
    let _ = std::fs::remove_file(&path);
    let l = match tokio::net::UnixListener::bind(&path) {
        Ok(l) => l,
        Err(e) => {
            warn!(path = %path.display(), error = %e, "admin RPC socket");
            return;
        }
    };
    let _gone = RemoveOnDrop(path);
    while live.alive() {
        let Ok((mut conn, _)) = l.accept().await else {
            continue;
        };
        let live = live.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let n = match conn.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                let mut stream = serde_json::Deserializer::from_slice(&buf).into_iter::<Value>();
                let mut answers = Vec::new();
                while let Some(Ok(call)) = stream.next() {
                    answers.push(admin_answer(&live, &call));
                }
                let used = stream.byte_offset();
                buf.drain(..used);
                for a in answers {
                    let mut line = a.to_string();
                    line.push('\n');
                    if conn.write_all(line.as_bytes()).await.is_err() {
                        return;
                    }
                }
            }
        });
    }
}

fn admin_answer(live: &Live, call: &Value) -> Value {
    let id = call.get("id").cloned().unwrap_or(Value::Null);
    let method = call.get("method").and_then(Value::as_str).unwrap_or("");
    let params = call.get("params").cloned().unwrap_or(Value::Null);
    let answer = live.process.admin_rpc(live.now(), method, &params);
    // A call may change when it ends (`exit`).
    live.poke.notify_one();
    match answer {
        Some(rpc) => rpc_answer(rpc, id),
        // `pid` (admin_rpc_service.rs: `std::process::id()`): its pid in the pod.
        None if method == "pid" => rpc_answer(Rpc::Result(json!(live.pid)), id),
        None => {
            json!({"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": id})
        }
    }
}

/// A JSON-RPC 2.0 answer: the result, or the error with its data when it has some.
fn rpc_answer(rpc: Rpc, id: Value) -> Value {
    match rpc {
        Rpc::Result(r) => json!({"jsonrpc": "2.0", "result": r, "id": id}),
        Rpc::Error {
            code,
            message,
            data,
        } => {
            let mut err = json!({"code": code, "message": message});
            if let Some(d) = data {
                err["data"] = d;
            }
            json!({"jsonrpc": "2.0", "error": err, "id": id})
        }
    }
}

/// Removes the socket file when its server stops (the process exited).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// How late the processes of `node` answer JSON-RPC: the seconds of the node's
/// [`SLOW_RPC_LABEL`] (fault injection: a machine so busy its validator's RPC answers
/// come after its callers' timeouts), none without it.
pub(super) fn slow_rpc(nodes: &crate::kubelet::runtime::Nodes, node: &str) -> Duration {
    nodes
        .read()
        .expect("lock")
        .get(node)
        .and_then(|l| l.get(SLOW_RPC_LABEL))
        .and_then(|v| v.parse::<f64>().ok())
        .map(|s| Duration::from_secs_f64(s.clamp(0.0, 600.0)))
        .unwrap_or_default()
}

/// JSON-RPC 2.0 over HTTP POST (and Agave's `GET /health`), refused until the process
/// answers and after it exits; each answer held `late()` (the node's slow RPC).
pub(super) async fn serve_rpc<L>(mut listener: Guarded, live: Arc<Live>, late: L)
where
    L: Fn() -> Duration + Clone + Send + Sync + 'static,
{
    use axum::http::StatusCode;
    use axum::routing::{get, post};
    // A process that is not up yet refuses connections: listen only once it answers.
    while live
        .process
        .json_rpc(live.now(), "getHealth", &Value::Null)
        .is_none()
    {
        if !live.alive() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !listener.bind().await {
        return;
    }
    let health_live = live.clone();
    let rpc_live = live.clone();
    let health_late = late.clone();
    let app = axum::Router::new()
        .route(
            "/",
            post(move |body: axum::Json<Value>| {
                let live = rpc_live.clone();
                let late = late();
                async move {
                    if !late.is_zero() {
                        tokio::time::sleep(late).await;
                    }
                    let t = live.now();
                    let id = body.get("id").cloned().unwrap_or(Value::Null);
                    let method = body.get("method").and_then(Value::as_str).unwrap_or("");
                    let params = body.get("params").cloned().unwrap_or(Value::Null);
                    match live
                        .process
                        .json_rpc(t, method, &params)
                        .filter(|_| live.alive())
                    {
                        None => Err(StatusCode::SERVICE_UNAVAILABLE),
                        Some(rpc) => Ok(axum::Json(rpc_answer(rpc, id))),
                    }
                }
            }),
        )
        .route(
            "/health",
            get(move || {
                let live = health_live.clone();
                let late = health_late();
                async move {
                    if !late.is_zero() {
                        tokio::time::sleep(late).await;
                    }
                    match live.process.json_rpc(live.now(), "getHealth", &Value::Null) {
                        Some(Rpc::Result(_)) if live.alive() => (StatusCode::OK, "ok"),
                        Some(_) if live.alive() => (StatusCode::OK, "behind"),
                        _ => (StatusCode::SERVICE_UNAVAILABLE, "unknown"),
                    }
                }
            }),
        );
    // A process that is not up yet, or no more, refuses connections: serve only between.
    while live
        .process
        .json_rpc(live.now(), "getHealth", &Value::Null)
        .is_none()
    {
        if !live.alive() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let gone = {
        let live = live.clone();
        async move {
            while live.alive() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(gone)
        .await;
}

/// The process's native Prometheus pages and its other HTTP pages (health endpoints).
pub(super) async fn serve_metrics(mut listener: Guarded, live: Arc<Live>) {
    use axum::serve::Listener;
    if !listener.bind().await {
        return;
    }
    let Ok(port) = listener.local_addr().map(|a| a.port()) else {
        return;
    };
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap| {
            let live = live.clone();
            async move {
                let host = headers.get("host").and_then(|h| h.to_str().ok());
                let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
                if let Some((code, body)) = live
                    .process
                    .http_get(live.now(), port, path, host)
                    .filter(|_| live.alive())
                {
                    return (
                        axum::http::StatusCode::from_u16(code)
                            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR),
                        [("content-type", "application/json")],
                        body,
                    );
                }
                match live
                    .process
                    .metrics(live.now(), port, uri.path())
                    .filter(|_| live.alive())
                {
                    Some(text) => (
                        axum::http::StatusCode::OK,
                        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                        text,
                    ),
                    None => (
                        axum::http::StatusCode::NOT_FOUND,
                        [("content-type", "text/plain")],
                        String::new(),
                    ),
                }
            }
        },
    );
    let _ = axum::serve(listener, app).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::clients::{self, Exit, Process};
    use crate::sim::clock::Clock;
    use jiff::Timestamp;
    use std::sync::atomic::AtomicBool;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A process whose admin RPC answers `pid`.
    struct Admin;

    impl Process for Admin {
        fn exit(&self) -> Option<Exit> {
            None
        }
        fn proc(&self, _t: f64) -> clients::ProcFigures {
            clients::ProcFigures::sized("admin", 0, 0)
        }
        fn admin_rpc(&self, _t: f64, method: &str, _params: &Value) -> Option<Rpc> {
            (method == "pid").then(|| Rpc::Result(json!(42)))
        }
    }

    /// Two calls in one write get two answers, a line each; an unknown method is
    /// "Method not found"; the socket goes with its server.
    #[tokio::test]
    async fn the_admin_rpc_answers_on_its_unix_socket() {
        let dir = std::env::temp_dir().join(format!("vv-admin-{}", std::process::id()));
        let path = dir.join("admin.rpc");
        let live = Arc::new(Live {
            process: Arc::new(Admin),
            clock: Clock {
                scale: 1.0,
                step: 15.0,
            },
            start: Timestamp::now(),
            dead: AtomicBool::new(false),
            pid: 7,
            poke: tokio::sync::Notify::new(),
            gone: tokio::sync::Notify::new(),
        });
        let server = tokio::spawn(serve_admin(path.clone(), live));
        let mut conn = loop {
            match tokio::net::UnixStream::connect(&path).await {
                Ok(c) => break c,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        conn.write_all(
            br#"{"jsonrpc":"2.0","id":1,"method":"pid"}{"jsonrpc":"2.0","id":2,"method":"exit"}"#,
        )
        .await
        .unwrap();
        let mut lines = BufReader::new(conn).lines();
        let first: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        let second: Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(
            (first["id"].clone(), first["result"].clone()),
            (json!(1), json!(42))
        );
        assert_eq!(second["error"]["code"], -32601);
        server.abort();
        let _ = server.await;
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
