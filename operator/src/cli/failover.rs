//! `valtune failover`: ask the operator to move a voting Agave identity from its
//! Validator to a standby, by annotating the active Validator (`valtune.dev/failover-to`,
//! metadata: `spec` stays as the user's repository has it), then follow the move in the
//! active's status until the standby signs.

use anyhow::Context;
use kube::api::{Api, Patch, PatchParams};
use valtune::api::Validator;
use valtune::api::validator::{FAILOVER_REQUESTED, FAILOVER_TO};

#[derive(clap::Args)]
pub struct Args {
    /// The Validator that signs with the identity now (role voting, with spareIdentity).
    validator: String,
    /// The standby Validator that takes it (role standby, standbyFor naming the same
    /// identity Secret and publicKey).
    #[arg(long, value_name = "STANDBY")]
    to: String,
    #[command(flatten)]
    kube: super::KubeArgs,
    /// How long to follow the move (0: do not wait).
    #[arg(long, default_value = "10m")]
    wait: String,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let Args {
        validator,
        to,
        kube,
        wait,
    } = args;
    let wait = valtune::api::settings::parse_duration(&wait).context("--wait")?;
    let (client, namespace) = kube.connect().await?;
    let api: Api<Validator> = Api::namespaced(client, &namespace);
    let active = api
        .get_opt(&validator)
        .await?
        .with_context(|| format!("no Validator {validator} in namespace {namespace}"))?;
    anyhow::ensure!(
        active.spec.spare_identity.is_some(),
        "Validator {validator} has no spec.spareIdentity: it has no identity of its own to switch to, so it cannot hand its identity over (see docs/validators.md, failover)"
    );
    let standby = api
        .get_opt(&to)
        .await?
        .with_context(|| format!("no Validator {to} in namespace {namespace}"))?;
    let same = match (&active.spec.identity, &standby.spec.standby_for) {
        (Some(a), Some(b)) => a.secret_name == b.secret_name && a.public_key == b.public_key,
        _ => false,
    };
    anyhow::ensure!(
        same,
        "Validator {to} does not stand by for {validator}'s identity: its spec.standbyFor must name the same Secret and publicKey as {validator}'s spec.identity"
    );
    let requested = jiff::Timestamp::now().to_string();
    let patch = serde_json::json!({"metadata": {"annotations": {
        FAILOVER_TO: to,
        FAILOVER_REQUESTED: requested,
    }}});
    api.patch(&validator, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("annotating Validator {validator}"))?;
    eprintln!(
        "asked the operator to move {namespace}/{validator}'s identity to {to} ({FAILOVER_TO}={to})"
    );
    if wait.is_zero() {
        return Ok(());
    }
    let deadline = std::time::Instant::now() + wait;
    let mut last = String::new();
    loop {
        let f = api
            .get(&validator)
            .await?
            .status
            .and_then(|s| s.failover)
            .filter(|f| f.to == to && f.requested.as_deref() == Some(requested.as_str()));
        if let Some(f) = &f {
            if f.step != last {
                eprintln!("{validator}: {}", f.step);
                last = f.step.clone();
            }
            if f.done {
                println!(
                    "{to} signs with {}",
                    f.identity.as_deref().unwrap_or("the identity")
                );
                return Ok(());
            }
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the identity has not moved to {to} within {wait:?} (last: {last}); is the operator running? (kubectl describe vv {validator})"
        );
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}
