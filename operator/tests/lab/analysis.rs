//! The analysis queries against a real Prometheus holding known series (backfilled with
//! promtool), so every figure has an exact expected value worked out by hand.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use jiff::Timestamp;
use valtune::clients::agave;
use valtune::results::analysis::{Window, collect, selector};
use valtune::results::prometheus::Prometheus;

use crate::common::wait_for;

const STEP: i64 = 15;

struct Server {
    child: std::process::Child,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tools() -> PathBuf {
    PathBuf::from(std::env::var("VALTUNE_TOOLS_BIN").expect(
        "VALTUNE_TOOLS_BIN is not set: run the tests with `make test` (hack/tools/build.sh)",
    ))
}

/// Per-interval TPS of the known series: 10 idle intervals (5 with datapoints of no
/// transactions, 5 without datapoints), 25 at 4,000, one burst at 60,000, then 4 at 5,000
/// (40 intervals of 15 s: a 10-minute window).
fn tps_pattern() -> Vec<f64> {
    let mut v = vec![0.0; 10];
    v.extend(std::iter::repeat_n(4000.0, 25));
    v.push(60000.0);
    v.extend(std::iter::repeat_n(5000.0, 4));
    v
}

/// Writes the series as OpenMetrics, backfills a TSDB and starts Prometheus on it.
/// Returns the server and the window's end.
async fn prometheus_with_known_series() -> (Server, String, i64) {
    valtune_lab::init_crypto();
    // One directory per Prometheus: the tests of this file run at the same time.
    static SERVERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("valtune-analysis-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Recent enough to be inside retention, aligned to the step.
    let start = (Timestamp::now().as_second() - 3 * 3600) / STEP * STEP;
    let sel = "namespace=\"ns\",pod=\"p-1\"";
    let g = "groupname=\"agave-validator\"";
    let mut om = String::new();
    let times: Vec<i64> = (0..=tps_pattern().len() as i64)
        .map(|i| start + STEP * i)
        .collect();
    // Agave's replayed-slot datapoints, as vmagent remote-writes them: five per interval,
    // each with its own timestamp, summing to the interval's transactions.
    om.push_str("# TYPE replay_slot_stats_total_transactions gauge\n");
    for (i, tps) in tps_pattern().iter().enumerate() {
        if (5..10).contains(&i) {
            continue; // no slot replayed at all
        }
        let end = start + STEP * (i as i64 + 1);
        for k in 0..5 {
            let t = end - 14 + 3 * k;
            let txs = tps * STEP as f64 / 5.0;
            writeln!(
                om,
                "replay_slot_stats_total_transactions{{{sel},db=\"agave\",host_id=\"x\"}} {txs} {t}"
            )
            .unwrap();
        }
    }
    // Prometheus scraped the pod every interval.
    om.push_str("# TYPE up gauge\n");
    for t in &times {
        writeln!(om, "up{{{sel},job=\"ns/agave\"}} 1 {t}").unwrap();
    }
    om.push_str("# TYPE solana_node_num_slots_behind gauge\n");
    for (i, t) in times.iter().enumerate() {
        // Lag falls from 400 to 0 over the first 20 samples, then stays 0; at the first
        // sample the node is still starting (unhealthy, no distance: unknown).
        let lag = if i == 0 {
            0
        } else {
            (400 - 20 * i as i64).max(0)
        };
        writeln!(om, "solana_node_num_slots_behind{{{sel}}} {lag} {t}").unwrap();
    }
    om.push_str("# TYPE solana_node_is_healthy gauge\n");
    for (i, t) in times.iter().enumerate() {
        let healthy = i > 0 && 400 - 20 * i as i64 <= 0;
        writeln!(om, "solana_node_is_healthy{{{sel}}} {} {t}", healthy as i32).unwrap();
    }
    om.push_str("# TYPE namedprocess_namegroup_memory_bytes gauge\n");
    for (i, t) in times.iter().enumerate() {
        // RSS: 100 GiB + 10 GiB per sample; VSZ twice that.
        let rss = (100 + 10 * i as u64) << 30;
        writeln!(
            om,
            "namedprocess_namegroup_memory_bytes{{{sel},{g},memtype=\"resident\"}} {rss} {t}"
        )
        .unwrap();
        writeln!(
            om,
            "namedprocess_namegroup_memory_bytes{{{sel},{g},memtype=\"virtual\"}} {} {t}",
            2 * rss
        )
        .unwrap();
    }
    for kind in ["major", "minor"] {
        writeln!(
            om,
            "# TYPE namedprocess_namegroup_{kind}_page_faults counter"
        )
        .unwrap();
        for (i, t) in times.iter().enumerate() {
            // 3 major and 30 minor faults per second, steadily.
            let per_s = if kind == "major" { 3 } else { 30 };
            writeln!(
                om,
                "namedprocess_namegroup_{kind}_page_faults_total{{{sel},{g}}} {} {t}",
                per_s * STEP * i as i64
            )
            .unwrap();
        }
    }
    // Besu's head, scraped every interval one slot (12 s) old (another pod).
    om.push_str("# TYPE besu_blockchain_chain_head_timestamp gauge\n");
    for t in &times {
        writeln!(
            om,
            "besu_blockchain_chain_head_timestamp{{namespace=\"ns\",pod=\"b-1\"}} {} {t}",
            t - 12
        )
        .unwrap();
    }
    om.push_str("# EOF\n");
    let file = dir.join("series.om");
    std::fs::write(&file, om).unwrap();
    let data = dir.join("data");
    let out = std::process::Command::new(tools().join("promtool"))
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&file)
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.join("prometheus.yml");
    std::fs::write(&config, "global: {}\n").unwrap();
    let child = std::process::Command::new(tools().join("prometheus"))
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let server = Server { child, dir };
    let http = reqwest::Client::new();
    wait_for("Prometheus to start", Duration::from_secs(60), || async {
        match http.get(format!("{url}/-/ready")).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    (server, url, start + STEP * tps_pattern().len() as i64)
}

#[tokio::test]
#[ignore = "needs the lab's tools: run `make test`"]
async fn the_papers_definitions_give_the_expected_figures() {
    let (_server, url, end) = prometheus_with_known_series().await;
    let prom = Prometheus::new(&url);
    let step = Duration::from_secs(STEP as u64);
    let profile = agave::profile(valtune::api::agave::AgaveWorkload::Follow);
    let window = Window {
        start: Timestamp::from_second(end - 600).unwrap(),
        end: Timestamp::from_second(end).unwrap(),
        step,
        life_start: None,
    };
    let r = wait_for(
        "the backfilled blocks to be queryable",
        Duration::from_secs(30),
        || async {
            match collect(&prom, &profile, &selector("ns", "p-1"), &window, 100.0).await {
                Ok(Some(r)) => Ok(r),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    // Plain mean (25*4000 + 60000 + 4*5000) / 40 = 4500; the 60,000 sample is above 3x
    // that, so it leaves the average: (100000 + 20000) / 39 = 3076.92.
    assert_eq!(r.avg_tps, Some(3076.92));
    assert_eq!(r.max_tps, Some(60000.0));
    // Ten idle intervals of 15 s: with datapoints of no transactions, or none at all.
    assert_eq!(r.zero_tps_seconds, Some(150.0));
    // RSS peaks at the last sample, 100 + 10*40 = 500 GiB; VSZ at 1000 GiB.
    assert_eq!(r.max_rss_gib, Some(500.0));
    assert_eq!(r.max_vsz_gib, Some(1000.0));
    // The window's 40 samples are the 2nd..41st: mean (110 + 500) / 2 = 305 GiB.
    assert_eq!(r.mean_rss_gib, Some(305.0));
    assert_eq!(r.major_faults_per_second, Some(3.0));
    assert_eq!(r.minor_faults_per_second, Some(30.0));
    // Lag 380 at the window's first sample, 0 from the 20th on.
    assert_eq!(r.max_lag, Some(380.0));
    assert_eq!(r.final_lag, Some(0.0));
    assert_eq!(r.kept_up, Some(true));
    assert_eq!(r.measured_seconds, Some(600.0));
}

/// Besu's blocks behind are the head's age when it was scraped: asked 14 s after a scrape,
/// the head scraped one slot old is still one slot behind, not two (`time()` would add
/// the sample's own age).
#[tokio::test]
#[ignore = "needs the lab's tools: run `make test`"]
async fn a_block_lag_is_the_heads_age_when_scraped_not_when_asked() {
    let (_server, url, end) = prometheus_with_known_series().await;
    let prom = Prometheus::new(&url);
    let profile = valtune::clients::besu::profile::profile();
    let lag = valtune::results::analysis::expand(
        profile.query(profile.lag).unwrap(),
        &selector("ns", "b-1"),
        Duration::from_secs(STEP as u64),
    );
    let at = Timestamp::from_second(end - STEP + 14).unwrap();
    let v = wait_for(
        "the backfilled blocks to be queryable",
        Duration::from_secs(30),
        || async {
            match prom.value(&lag, Some(at)).await {
                Ok(Some(v)) => Ok(v),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert_eq!(v, 1.0, "{lag}");
}
