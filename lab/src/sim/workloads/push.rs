//! What a simulated process sends on its own: the HTTP POSTs it makes (a log appender's
//! lines) and the datapoints it pushes as InfluxDB line protocol.

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use super::live::Live;
use crate::sim::pod_view::PodView;

/// Sends the HTTP POSTs the process makes on its own (a log appender's lines), once per
/// real second, to their pod-local addresses. A failed POST is dropped.
pub(super) async fn send_posts(live: Arc<Live>, view: PodView) {
    let http = reqwest::Client::new();
    let mut last = live.now();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if !live.alive() {
            return;
        }
        let now = live.now();
        let posts = live.process.posts(last, now);
        last = now;
        for post in posts {
            let url = view.local_addr(&post.url);
            match http.post(&url).body(post.body).send().await {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => warn!(%url, status = %r.status(), "post refused"),
                Err(e) => warn!(%url, error = %e, "posting"),
            }
        }
    }
}

/// Pushes the process's datapoints as InfluxDB line protocol, one POST per real second
/// (Agave batches every 10 s; a second of lab time is many simulated minutes). A failed
/// POST is dropped, as Agave drops it.
pub(super) async fn push_datapoints(live: Arc<Live>, url: String, host_id: String) {
    let http = reqwest::Client::new();
    // The agent buffers what the process submitted before its first write, and this task
    // starts a moment after the process (hours of simulated time, compressed): the first
    // write carries the last ten seconds' points (a start-up point such as Agave's
    // `bootstrap-snapshot-download`). A restarted simulator resends the same points.
    let mut last = (live.now() - 10.0 * live.clock.scale).max(0.0);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if !live.alive() {
            return;
        }
        let now = live.now();
        let points = live.process.datapoints(last, now);
        last = now;
        if points.is_empty() {
            continue;
        }
        let body: String = points
            .iter()
            .map(|p| {
                let fields: Vec<String> =
                    p.fields.iter().map(|(k, v)| format!("{k}={v}i")).collect();
                let ns = live.clock.at(live.start, p.at).as_nanosecond();
                // metrics/src/metrics.rs serialize_points: host_id, then the point's tags.
                let tags: String = p.tags.iter().map(|(k, v)| format!(",{k}={v}")).collect();
                format!(
                    "{},host_id={host_id}{tags} {} {ns}\n",
                    p.measurement,
                    fields.join(",")
                )
            })
            .collect();
        match http.post(&url).body(body).send().await {
            Ok(r) if r.status().is_success() => {}
            Ok(r) => warn!(%url, status = %r.status(), "datapoints refused"),
            Err(e) => warn!(%url, error = %e, "pushing datapoints"),
        }
    }
}
