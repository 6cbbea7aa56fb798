//! `valtune report`: an experiment's trials and results, as a table, CSV, JSON or YAML.

use kube::api::{Api, ListParams};
use valtune::api::{ValidatorTrial, labels};
use valtune::results::dataset::Dataset;

use super::output::{Output, print_data};

#[derive(clap::Args)]
pub struct Args {
    /// The ValidatorExperiment's name.
    experiment: String,
    #[command(flatten)]
    kube: super::KubeArgs,
    /// table, wide (adds each trial's max lag, node and message: why it ended), csv
    /// (every column of wide), json or yaml (the experiment's status and each trial's).
    #[arg(
        short,
        long = "output",
        visible_alias = "format",
        value_enum,
        default_value = "table"
    )]
    output: Output,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let Args {
        experiment,
        kube,
        output,
    } = args;
    let (client, namespace, vx) = kube.experiment(&experiment).await?;
    let trials: Api<ValidatorTrial> = Api::namespaced(client, &namespace);
    let lp = ListParams::default().labels(&format!("{}={experiment}", labels::EXPERIMENT));
    let list = valtune::report::sorted(trials.list(&lp).await?.items, &vx.spec.sweep);
    let data = Dataset::from_trials(&vx.spec.sweep, &list);
    let client = valtune::clients::client_for(&vx.spec.template)?;
    let layout = client.report(&vx.spec.template, &vx.spec.sweep);
    match output {
        Output::Table | Output::Wide => {
            if output == Output::Wide {
                print!("{}", valtune::report::wide_table(&data, &layout));
            } else {
                print!("{}", valtune::report::table(&data, &layout));
            }
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
        Output::Csv => print!("{}", valtune::report::csv(&data, &layout)),
        Output::Json | Output::Yaml => {
            let rows: Vec<_> = list
                .iter()
                .map(|t| serde_json::json!({"trial": t.metadata.name, "point": t.spec.point, "repetition": t.spec.repetition, "status": t.status}))
                .collect();
            print_data(
                output,
                &serde_json::json!({"experiment": vx.status, "trials": rows, "notes": client.report_notes(&list)}),
            )?;
        }
    }
    Ok(())
}
