//! `valtune failover`: ask the operator to move a voting Agave or Frankendancer identity
//! from the pair member that signs with it (the holder of its Lease) to the other member,
//! by annotating the holder (`valtune.dev/failover-to`, metadata: `spec` stays as the
//! user's repository has it), then follow the move in the holder's status until the
//! other signs. Either direction: the first failover goes from the Validator with
//! `spareIdentity` to the one with `standbyFor`, the move back the other way.

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use valtune::api::Validator;
use valtune::api::validator::{FAILOVER_REQUESTED, FAILOVER_TO};
use valtune::controller::validator::observe::{lease_name, staked_of};
use valtune::controller::validator::pair::hand_over;

#[derive(clap::Args)]
pub struct Args {
    /// The failover pair member that signs with the staked identity now: the holder of
    /// its Lease (`valtune-identity-<secret>`), whichever of `spareIdentity` or
    /// `standbyFor` its manifest uses.
    validator: String,
    /// The other member of the pair, which takes the identity (its `identity.publicKey`
    /// or `standbyFor.publicKey` and Secret the same as this one's).
    #[arg(long, value_name = "VALIDATOR")]
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
    let api: Api<Validator> = Api::namespaced(client.clone(), &namespace);
    let active = api
        .get_opt(&validator)
        .await?
        .with_context(|| format!("no Validator {validator} in namespace {namespace}"))?;
    let standby = api
        .get_opt(&to)
        .await?
        .with_context(|| format!("no Validator {to} in namespace {namespace}"))?;
    let holder = match staked_of(&active) {
        Some(k) => {
            let leases: Api<Lease> = Api::namespaced(client, &namespace);
            let lease = lease_name(&k.secret_name);
            leases
                .get_opt(&lease)
                .await
                .with_context(|| format!("reading Lease {namespace}/{lease}"))?
                .and_then(|l| l.spec?.holder_identity)
                .filter(|h| !h.is_empty())
        }
        None => None,
    };
    hand_over(&active, &standby, holder.as_deref()).map_err(anyhow::Error::msg)?;
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
