//! `valtune analyze`: trial results from a Prometheus for one pod and time window, with
//! no cluster.

use anyhow::Context;

#[derive(clap::Args)]
pub struct Args {
    /// The Prometheus that scraped the pod (its base URL, e.g. http://prometheus:9090).
    #[arg(long, env = "PROMETHEUS_URL")]
    prometheus_url: String,
    /// The client whose metric profile to read (its template key).
    #[arg(long, default_value = "agave", value_parser = clap::builder::PossibleValuesParser::new(valtune::clients::CLIENTS.iter().map(|c| c.name())))]
    client: String,
    /// The client version, where metric names depend on it.
    #[arg(long)]
    client_version: Option<String>,
    /// The pod's namespace (its `namespace` label in Prometheus).
    #[arg(long)]
    namespace: String,
    /// The pod's name (its `pod` label in Prometheus).
    #[arg(long)]
    pod: String,
    /// The window's start, RFC 3339 (2026-01-31T12:00:00Z).
    #[arg(long)]
    start: jiff::Timestamp,
    /// The window's end, RFC 3339.
    #[arg(long)]
    end: jiff::Timestamp,
    /// The scrape interval (one sample per step).
    #[arg(long, default_value = "15s")]
    step: String,
    /// Kept up at or below this lag (default: the client's).
    #[arg(long)]
    max_lag: Option<i64>,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    use valtune::results::analysis::{Window, collect, selector};
    let Args {
        prometheus_url: url,
        client,
        client_version: version,
        namespace,
        pod,
        start,
        end,
        step,
        max_lag,
    } = args;
    anyhow::ensure!(end > start, "--end must be after --start");
    let step = valtune::api::settings::parse_duration(&step).context("--step")?;
    let template: valtune::api::template::ValidatorTemplate = serde_json::from_value(
        serde_json::json!({&client: {"image": "unknown", "version": version}}),
    )
    .with_context(|| {
        let names: Vec<&str> = valtune::clients::CLIENTS.iter().map(|c| c.name()).collect();
        format!("--client {client}: use one of {}", names.join(", "))
    })?;
    let profile = valtune::clients::client_for(&template)?.profile(&template);
    let prom = valtune::results::prometheus::Prometheus::new(&url);
    let window = Window {
        start,
        end,
        step,
        life_start: None,
    };
    let max_lag = max_lag.unwrap_or(profile.default_max_lag) as f64;
    match collect(
        &prom,
        &profile,
        &selector(&namespace, &pod),
        &window,
        max_lag,
    )
    .await?
    {
        Some(results) => println!("{}", serde_json::to_string_pretty(&results)?),
        None => anyhow::bail!(
            "Prometheus at {url} has no samples for {namespace}/{pod} in [{start}, {end}]"
        ),
    }
    Ok(())
}
