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
    };
    Ok((evidence, patch))
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let Args {
        experiment,
        kube,
        output,
    } = args;
    let (client, namespace, vx) = kube.experiment(&experiment).await?;
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
    match output {
        Format::Yaml => print!("{}", render_yaml(&evidence, &patch)),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&render_json(&evidence, &patch))?
        ),
    }
    Ok(())
}
