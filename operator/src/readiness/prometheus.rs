//! Asking a Prometheus whether it answers and whether its remote-write receiver is on.
//!
//! The receiver: `POST /api/v1/write` with an empty body. Off, Prometheus answers 404
//! "remote write receiver needs to be enabled with --web.enable-remote-write-receiver"
//! (prometheus v3.2.1 web/api/v1/api.go L1862-1866); on, the handler runs, reads the
//! empty body as remote-write 1.0, fails to snappy-decode it and answers 400
//! (storage/remote/write_handler.go), writing nothing. 503 means its storage is not ready
//! yet (`api.ready`). Thanos, Mimir and VictoriaMetrics answer the same path, so the probe
//! works for them too.
//!
//! From a laptop the cluster's Prometheus (`http://prometheus-operated.monitoring:9090`)
//! is usually not reachable directly; `valtune check` then goes through the API server's
//! service proxy (`/api/v1/namespaces/NS/services/NAME:PORT/proxy/...`, what `kubectl
//! proxy` uses), which needs `get` on `services/proxy`.

use std::time::Duration;

/// Where a Prometheus is reached from.
#[derive(Clone)]
pub enum Reach {
    /// Its URL, as the operator inside the cluster reaches it.
    Direct { http: reqwest::Client, base: String },
    /// Through the API server's service proxy.
    Proxy {
        client: kube::Client,
        prefix: String,
    },
}

/// An HTTP answer: status code and body (a transport error is `Err`).
pub type Answer = Result<(u16, String), String>;

impl Reach {
    pub fn direct(http: reqwest::Client, url: &str) -> Reach {
        Reach::Direct {
            http,
            base: url.trim_end_matches('/').to_string(),
        }
    }

    /// The service proxy path for a URL whose host is a cluster Service
    /// (`NAME.NAMESPACE`, `NAME.NAMESPACE.svc`, `NAME.NAMESPACE.svc.cluster.local`), if
    /// it is one.
    pub fn proxy(client: kube::Client, url: &str) -> Option<Reach> {
        let parsed = reqwest::Url::parse(url).ok()?;
        let host = parsed.host_str()?;
        if host.parse::<std::net::IpAddr>().is_ok() {
            return None;
        }
        let parts: Vec<&str> = host.split('.').collect();
        let (name, ns) = match parts.as_slice() {
            [n, ns] | [n, ns, "svc"] | [n, ns, "svc", "cluster", "local"] => (*n, *ns),
            _ => return None,
        };
        let port = parsed.port_or_known_default()?;
        let scheme = if parsed.scheme() == "https" {
            "https:"
        } else {
            ""
        };
        let path = parsed.path().trim_end_matches('/');
        Some(Reach::Proxy {
            client,
            prefix: format!("/api/v1/namespaces/{ns}/services/{scheme}{name}:{port}/proxy{path}"),
        })
    }

    /// How it is reached, for messages.
    pub fn describe(&self) -> String {
        match self {
            Reach::Direct { base, .. } => base.clone(),
            Reach::Proxy { prefix, .. } => format!("the API server's service proxy {prefix}"),
        }
    }

    async fn call(&self, post: bool, path: &str) -> Answer {
        match self {
            Reach::Direct { http, base } => {
                let url = format!("{base}{path}");
                let req = if post {
                    http.post(&url).body(Vec::new())
                } else {
                    http.get(&url)
                };
                let resp = req
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await
                    .map_err(|e| format!("{url}: {e}"))?;
                let code = resp.status().as_u16();
                Ok((code, resp.text().await.unwrap_or_default()))
            }
            Reach::Proxy { client, prefix } => {
                let uri = format!("{prefix}{path}");
                let builder = if post {
                    http::Request::post(&uri)
                } else {
                    http::Request::get(&uri)
                };
                let req = builder.body(Vec::new()).map_err(|e| e.to_string())?;
                match client.request_text(req).await {
                    Ok(body) => Ok((200, body)),
                    Err(kube::Error::Api(s)) => Ok((s.code, s.message.clone())),
                    Err(e) => Err(format!("{uri}: {e}")),
                }
            }
        }
    }
}

/// Prometheus' version, from `/api/v1/status/buildinfo`.
pub async fn build_info(reach: &Reach) -> Result<String, String> {
    let (code, body) = reach.call(false, "/api/v1/status/buildinfo").await?;
    if code != 200 {
        return Err(format!("HTTP {code}: {}", first_line(&body)));
    }
    let v: serde_json::Value = serde_json::from_str(&body)
        .map_err(|_| format!("not Prometheus' API: {}", first_line(&body)))?;
    Ok(v["data"]["version"]
        .as_str()
        .unwrap_or("unknown version")
        .to_string())
}

/// What the remote-write probe found.
#[derive(Debug, Clone, PartialEq)]
pub enum Receiver {
    On,
    /// Off, with what Prometheus said.
    Off(String),
    /// Could not tell (unreachable, not ready, an unexpected answer).
    Unknown(String),
}

/// Reads a probe's answer. Pure.
pub fn classify(answer: &Answer) -> Receiver {
    match answer {
        Err(e) => Receiver::Unknown(e.clone()),
        Ok((404, body)) if body.contains("remote write receiver") => {
            Receiver::Off(first_line(body).to_string())
        }
        // The API server's own 404 (no such Service) is not Prometheus speaking.
        Ok((404, body)) if body.contains("services \"") => {
            Receiver::Unknown(first_line(body).to_string())
        }
        Ok((404, body)) => Receiver::Off(format!(
            "nothing accepts remote write here (HTTP 404: {})",
            first_line(body)
        )),
        Ok((503, body)) => Receiver::Unknown(format!(
            "Prometheus is not ready yet (HTTP 503: {})",
            first_line(body)
        )),
        Ok((code, _)) if (200..300).contains(code) || matches!(code, 400 | 415) => Receiver::On,
        Ok((code, body)) => Receiver::Unknown(format!("HTTP {code}: {}", first_line(body))),
    }
}

/// Probes the receiver at `write_path` (`/api/v1/write` below the reach's base).
pub async fn receiver(reach: &Reach, write_path: &str) -> Receiver {
    classify(&reach.call(true, write_path).await)
}

/// What to run to turn the receiver on, for every kind of install.
pub const RECEIVER_FIX: &str = "kube-prometheus-stack: helm upgrade RELEASE prometheus-community/kube-prometheus-stack --reuse-values --set prometheus.prometheusSpec.enableRemoteWriteReceiver=true; a Prometheus resource: spec.enableRemoteWriteReceiver: true; a plain Prometheus: --web.enable-remote-write-receiver (Prometheus 3 ignores --enable-feature=remote-write-receiver); docs/prepare-cluster.md";

fn first_line(s: &str) -> &str {
    let line = s.trim().lines().next().unwrap_or("");
    &line[..line.len().min(200)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_reads_prometheus_own_answers() {
        let off = Ok((
            404,
            "remote write receiver needs to be enabled with --web.enable-remote-write-receiver\n"
                .to_string(),
        ));
        assert_eq!(
            classify(&off),
            Receiver::Off(
                "remote write receiver needs to be enabled with --web.enable-remote-write-receiver"
                    .into()
            )
        );
        assert_eq!(
            classify(&Ok((400, "snappy: corrupt input".into()))),
            Receiver::On
        );
        assert_eq!(classify(&Ok((204, String::new()))), Receiver::On);
        assert!(
            matches!(classify(&Ok((503, "Service Unavailable".into()))), Receiver::Unknown(m) if m.contains("not ready"))
        );
        assert!(matches!(
            classify(&Err("connection refused".into())),
            Receiver::Unknown(_)
        ));
        assert!(matches!(
            classify(&Ok((
                404,
                "services \"prometheus-operated\" not found".into()
            ))),
            Receiver::Unknown(_)
        ));
    }

    #[test]
    fn a_cluster_service_url_goes_through_the_service_proxy() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            // A client that is never called: only the path is computed.
            let config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
            let client = kube::Client::try_from(config).unwrap();
            let path = |url: &str| match Reach::proxy(client.clone(), url) {
                Some(Reach::Proxy { prefix, .. }) => Some(prefix),
                _ => None,
            };
            assert_eq!(
                path("http://prometheus-operated.monitoring:9090").as_deref(),
                Some("/api/v1/namespaces/monitoring/services/prometheus-operated:9090/proxy")
            );
            assert_eq!(
                path("https://prom.obs.svc.cluster.local/prometheus/").as_deref(),
                Some("/api/v1/namespaces/obs/services/https:prom:443/proxy/prometheus")
            );
            assert_eq!(path("http://127.0.0.1:9090"), None);
            assert_eq!(path("http://prometheus.example.com:9090"), None);
        });
    }
}
