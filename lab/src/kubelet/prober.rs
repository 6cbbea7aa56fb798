//! Runs a probe as the kubelet's prober does (kubernetes v1.34.2 pkg/probe): an HTTP GET
//! answered 200-399 (a `Host` header is the request's Host: http/request.go
//! `newProbeRequest`), a TCP connection accepted, a command run in the container (exit
//! 0), each within the probe's timeout. What the lab cannot run (a command in a container
//! whose runtime cannot run it, a gRPC health check) counts as passing, with a warning.

use std::net::IpAddr;
use std::time::Duration;

use tracing::warn;

use super::probe::Action;
use super::runtime::Runtime;

/// The probe's result against a container of the pod at `ip`.
pub async fn run(action: &Action, ip: IpAddr, timeout: Duration, runtime: &dyn Runtime) -> bool {
    match action {
        Action::HttpGet {
            https,
            host,
            port,
            path,
            headers,
        } => {
            let host = host.clone().unwrap_or_else(|| ip.to_string());
            let scheme = if *https { "https" } else { "http" };
            let url = format!("{scheme}://{host}:{port}{path}");
            let client = match reqwest::Client::builder()
                // The kubelet does not verify a probe's certificate.
                .danger_accept_invalid_certs(true)
                .timeout(timeout)
                .build()
            {
                Ok(c) => c,
                Err(_) => return false,
            };
            let mut req = client.get(&url);
            for (k, v) in headers {
                req = req.header(k.as_str(), v.as_str());
            }
            match req.send().await {
                Ok(r) => (200..400).contains(&r.status().as_u16()),
                Err(_) => false,
            }
        }
        Action::Tcp { host, port } => {
            let host: IpAddr = host.as_deref().and_then(|h| h.parse().ok()).unwrap_or(ip);
            let connect = tokio::net::TcpStream::connect((host, *port));
            matches!(tokio::time::timeout(timeout, connect).await, Ok(Ok(_)))
        }
        Action::Exec(command) => match runtime.exec(command) {
            Some(ran) => matches!(tokio::time::timeout(timeout, ran).await, Ok(Ok(()))),
            None => {
                warn!(
                    ?command,
                    "the lab cannot run this exec probe in its container; counted as passing"
                );
                true
            }
        },
        Action::Grpc { .. } => {
            warn!("the lab does not run gRPC probes; counted as passing");
            true
        }
        Action::Invalid(why) => {
            warn!(%why, "a probe the kubelet cannot run");
            false
        }
    }
}
