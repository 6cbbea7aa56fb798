//! `valtune report`: an experiment's trials and results, as a table, CSV or JSON.

use anyhow::Context;
use clap::ValueEnum;
use kube::api::{Api, ListParams};
use valtune::api::{ValidatorExperiment, ValidatorTrial, labels};
use valtune::results::dataset::Dataset;

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    experiment: String,
    #[arg(short, long, default_value = "default")]
    namespace: String,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let Args {
        experiment,
        namespace,
        format,
    } = args;
    let client = super::kube_client().await?;
    let vxs: Api<ValidatorExperiment> = Api::namespaced(client.clone(), &namespace);
    let vx = vxs
        .get_opt(&experiment)
        .await?
        .with_context(|| format!("no ValidatorExperiment {experiment} in namespace {namespace}"))?;
    let trials: Api<ValidatorTrial> = Api::namespaced(client, &namespace);
    let lp = ListParams::default().labels(&format!("{}={experiment}", labels::EXPERIMENT));
    let list = valtune::report::sorted(trials.list(&lp).await?.items, &vx.spec.sweep);
    let data = Dataset::from_trials(&vx.spec.sweep, &list);
    let client = valtune::clients::client_for(&vx.spec.template)?;
    let layout = client.report(&vx.spec.template, &vx.spec.sweep);
    match format {
        Format::Table => {
            print!("{}", valtune::report::table(&data, &layout));
            print!("{}", valtune::report::coverage_notes(&list));
            let objective = client.objective(&vx.spec.sweep);
            if let Some(points) = valtune::report::points_table(&data, &objective) {
                println!();
                print!("{points}");
            }
            println!();
            print!("{}", valtune::report::summary(&vx));
            for note in client.report_notes(&list) {
                println!("{note}");
            }
        }
        Format::Csv => print!("{}", valtune::report::csv(&data, &layout)),
        Format::Json => {
            let rows: Vec<_> = list
                .iter()
                .map(|t| serde_json::json!({"trial": t.metadata.name, "point": t.spec.point, "repetition": t.spec.repetition, "status": t.status}))
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(
                    &serde_json::json!({"experiment": vx.status, "trials": rows, "notes": client.report_notes(&list)})
                )?
            );
        }
    }
    Ok(())
}
