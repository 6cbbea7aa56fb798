//! `valtune collect`: read a finished trial's window from Prometheus again (after an
//! outage, say) without running it again.

use anyhow::Context;
use kube::api::{Api, Patch, PatchParams};
use valtune::api::{ValidatorTrial, labels};

#[derive(clap::Args)]
pub struct Args {
    /// The ValidatorTrial's name.
    trial: String,
    #[command(flatten)]
    kube: super::KubeArgs,
    /// How long to wait for the new result (0: do not wait).
    #[arg(long, default_value = "10m")]
    wait: String,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let Args { trial, kube, wait } = args;
    let wait = valtune::api::settings::parse_duration(&wait).context("--wait")?;
    let (client, namespace) = kube.connect().await?;
    let (trial, namespace) = (trial.as_str(), namespace.as_str());
    let api: Api<ValidatorTrial> = Api::namespaced(client, namespace);
    let t = api
        .get_opt(trial)
        .await?
        .with_context(|| format!("no ValidatorTrial {trial} in namespace {namespace}"))?;
    let st = t.status.clone().unwrap_or_default();
    anyhow::ensure!(
        st.phase.is_finished(),
        "trial {trial} is {:?}: only a finished trial is collected again",
        st.phase
    );
    let token = jiff::Timestamp::now().to_string();
    let patch = serde_json::json!({"metadata": {"annotations": {labels::COLLECT: token}}});
    api.patch(trial, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("annotating trial {trial}"))?;
    eprintln!(
        "asked the operator to collect {namespace}/{trial} again ({}={token})",
        labels::COLLECT
    );
    if wait.is_zero() {
        return Ok(());
    }
    let deadline = std::time::Instant::now() + wait;
    loop {
        let st = api.get(trial).await?.status.unwrap_or_default();
        if st.collected_for.as_deref() == Some(token.as_str()) && st.phase.is_finished() {
            println!(
                "{trial}: {} {}",
                st.outcome.map(|o| o.as_str()).unwrap_or("-"),
                st.message.unwrap_or_default()
            );
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "trial {trial} was not collected within {wait:?}: is the operator running? (kubectl describe vtrial {trial})"
        );
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}
