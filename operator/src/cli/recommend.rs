//! `valtune recommend`: the experiment's recommended point as a merge patch of its
//! `spec.template`, with the evidence (report/patch.rs computes both).

use anyhow::Context;
use clap::ValueEnum;
use kube::api::Api;
use valtune::api::ValidatorTrial;
use valtune::api::resolve::resolve_template;
use valtune::report::patch::{
    Evidence, no_recommendation, render_json, render_yaml, template_patch,
};

/// How the patch prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The patch as YAML, the evidence as comments: for `kubectl patch --patch-file`.
    Yaml,
    /// The patch and the evidence as fields of one object, for scripts.
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    /// The ValidatorExperiment's name.
    experiment: String,
    #[command(flatten)]
    kube: super::KubeArgs,
    /// yaml (the patch, the evidence as comments) or json (both as fields).
    #[arg(
        short,
        long = "output",
        visible_alias = "format",
        value_enum,
        default_value = "yaml"
    )]
    output: Format,
    /// Print the merge patch of this Validator (same namespace) instead: the point
    /// written into its spec.template, to commit to its manifest. Refused when the
    /// Validator runs another client, version or node class than the experiment measured.
    #[arg(long = "for", value_name = "VALIDATOR")]
    for_validator: Option<String>,
}

/// The recommendation's evidence and its patch of the template, from the trial it names.
pub fn evidence(
    vx: &valtune::api::ValidatorExperiment,
    namespace: &str,
    trial: &ValidatorTrial,
) -> anyhow::Result<(Evidence, serde_json::Value)> {
    let st = vx.status.clone().unwrap_or_default();
    let rec = st
        .recommendation
        .context("the experiment has no recommendation")?;
    let point = &trial.spec.point;
    let patch = template_patch(vx, point)
        .with_context(|| format!("trial {}: its point cannot be applied", rec.trial))?;
    let now = resolve_template(&vx.spec.template, &vx.spec.sweep, point)?;
    let evidence = Evidence {
        experiment: vx.metadata.name.clone().unwrap_or_default(),
        namespace: namespace.to_string(),
        phase: st.phase,
        point: rec.summary,
        reason: rec.reason,
        support: rec.support,
        trial: rec.trial,
        template_changed: now != trial.spec.template,
        validator: None,
    };
    Ok((evidence, patch))
}

/// The patch of Validator `name` and its evidence: the recommendation's point (from the
/// status, else from the trial it names) resolved over the Validator's template, after
/// the operator's own check of client, version and node class (`spec.tuning.fromExperiment`).
async fn for_validator(
    client: kube::Client,
    namespace: &str,
    vx: &valtune::api::ValidatorExperiment,
    name: &str,
) -> anyhow::Result<(Evidence, serde_json::Value)> {
    use k8s_openapi::api::core::v1::Node;
    use kube::ResourceExt;
    use valtune::api::Validator;
    use valtune::controller::validator::tuning::{Nodes, mismatch};
    use valtune::report::patch::validator_patch;

    let experiment = vx.name_any();
    let st = vx.status.clone().unwrap_or_default();
    let Some(rec) = st.recommendation else {
        anyhow::bail!(
            "experiment {namespace}/{experiment} has no recommendation: {}",
            no_recommendation(vx)
        );
    };
    let validators: Api<Validator> = Api::namespaced(client.clone(), namespace);
    let v = validators
        .get_opt(name)
        .await?
        .with_context(|| format!("no Validator {name} in namespace {namespace}"))?;
    let trials: Api<ValidatorTrial> = Api::namespaced(client.clone(), namespace);
    let trial = trials.get_opt(&rec.trial).await?;
    let point = match (&rec.point, &trial) {
        (Some(p), _) => p.clone(),
        (None, Some(t)) => t.spec.point.clone(),
        (None, None) => anyhow::bail!(
            "the recommendation names trial {}, which is gone from namespace {namespace}, and records no point: its point ({}) cannot be read",
            rec.trial,
            rec.summary
        ),
    };
    let nodes: Api<Node> = Api::all(client);
    let labels = |n: Option<String>| {
        let nodes = nodes.clone();
        async move {
            match n {
                Some(n) => nodes
                    .get_opt(&n)
                    .await
                    .map(|n| n.map(|n| n.labels().clone())),
                None => Ok(None),
            }
        }
    };
    let seen = Nodes {
        validator: labels(Some(v.spec.node_name.clone())).await?,
        trial: labels(
            trial
                .as_ref()
                .and_then(|t| t.status.as_ref()?.node_name.clone()),
        )
        .await?,
    };
    if let Some((reason, message)) = mismatch(&v.spec.template, &experiment, vx, &seen) {
        anyhow::bail!("not for Validator {namespace}/{name} ({reason}): {message}");
    }
    let patch = validator_patch(&v, vx, &point)
        .with_context(|| format!("trial {}: its point cannot be applied", rec.trial))?;
    let template_changed = trial.is_some_and(|t| {
        resolve_template(&vx.spec.template, &vx.spec.sweep, &point).ok() != Some(t.spec.template)
    });
    let evidence = Evidence {
        experiment,
        namespace: namespace.to_string(),
        phase: st.phase,
        point: rec.summary,
        reason: rec.reason,
        support: rec.support,
        trial: rec.trial,
        template_changed,
        validator: Some(name.to_string()),
    };
    Ok((evidence, patch))
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let Args {
        experiment,
        kube,
        output,
        for_validator: target,
    } = args;
    let (client, namespace, vx) = kube.experiment(&experiment).await?;
    if let Some(name) = target {
        let (evidence, patch) = for_validator(client, &namespace, &vx, &name).await?;
        print(output, &evidence, &patch)?;
        return Ok(());
    }
    let st = vx.status.clone().unwrap_or_default();
    let Some(rec) = st.recommendation else {
        anyhow::bail!(
            "experiment {namespace}/{experiment} has no recommendation: {} (valtune report {experiment} -n {namespace})",
            no_recommendation(&vx)
        );
    };
    let trials: Api<ValidatorTrial> = Api::namespaced(client, &namespace);
    let trial = trials.get_opt(&rec.trial).await?.with_context(|| {
        format!(
            "the recommendation names trial {}, which is gone from namespace {namespace}: its point ({}) cannot be read",
            rec.trial, rec.summary
        )
    })?;
    let (evidence, patch) = evidence(&vx, &namespace, &trial)?;
    print(output, &evidence, &patch)
}

fn print(output: Format, evidence: &Evidence, patch: &serde_json::Value) -> anyhow::Result<()> {
    match output {
        Format::Yaml => print!("{}", render_yaml(evidence, patch)),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&render_json(evidence, patch))?
        ),
    }
    Ok(())
}
