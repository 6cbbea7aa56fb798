//! `valtune list`: the experiments of a namespace (or all), one line each.

use kube::ResourceExt;
use kube::api::{Api, ListParams};
use valtune::api::ValidatorExperiment;

use super::output::{Output, print_data};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    kube: super::KubeArgs,
    /// List the experiments of every namespace.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// table, wide (adds the recommendation's support), csv, json or yaml.
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
    let (client, namespace) = args.kube.connect().await?;
    let api: Api<ValidatorExperiment> = if args.all_namespaces {
        Api::all(client)
    } else {
        Api::namespaced(client, &namespace)
    };
    let mut items = api.list(&ListParams::default()).await?.items;
    items.sort_by_key(|vx| (vx.namespace(), vx.name_any()));
    match args.output {
        Output::Json | Output::Yaml => {
            let rows: Vec<_> = items.iter().map(row_data).collect();
            print_data(args.output, &serde_json::Value::Array(rows))?;
        }
        format => {
            if items.is_empty() && format != Output::Csv {
                let place = if args.all_namespaces {
                    "any namespace".to_string()
                } else {
                    format!("namespace {namespace}")
                };
                eprintln!("no ValidatorExperiment in {place}");
            } else {
                print!("{}", render(&items, format, args.all_namespaces));
            }
        }
    }
    Ok(())
}

/// One experiment as data: what the table shows, by name.
fn row_data(vx: &ValidatorExperiment) -> serde_json::Value {
    let st = vx.status.clone().unwrap_or_default();
    serde_json::json!({
        "namespace": vx.namespace(),
        "name": vx.name_any(),
        "client": st.client,
        "phase": st.phase,
        "trials": st.trials,
        "recommendation": st.recommendation,
    })
}

/// The experiments as a table or CSV. Pure.
pub fn render(items: &[ValidatorExperiment], format: Output, namespaces: bool) -> String {
    let wide = matches!(format, Output::Wide | Output::Csv);
    let mut header = vec![
        "NAME",
        "CLIENT",
        "PHASE",
        "TRIALS",
        "RUNNING",
        "RECOMMENDATION",
    ];
    if namespaces {
        header.insert(0, "NAMESPACE");
    }
    if wide {
        header.push("SUPPORT");
    }
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|vx| {
            let st = vx.status.clone().unwrap_or_default();
            let rec = st.recommendation.as_ref();
            let mut row = vec![
                vx.name_any(),
                st.client.clone().unwrap_or_else(|| "-".into()),
                format!("{:?}", st.phase),
                format!("{}/{}", st.trials.finished, st.trials.expected),
                st.trials.active.to_string(),
                rec.map(|r| r.summary.clone()).unwrap_or_else(|| "-".into()),
            ];
            if namespaces {
                row.insert(0, vx.namespace().unwrap_or_default());
            }
            if wide {
                row.push(
                    rec.and_then(|r| r.support.clone())
                        .unwrap_or_else(|| "-".into()),
                );
            }
            row
        })
        .collect();
    if format == Output::Csv {
        let mut out = header.join(",").to_lowercase() + "\n";
        for r in rows {
            let cells: Vec<String> = r.iter().map(|c| valtune::report::csv_cell(c)).collect();
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        return out;
    }
    valtune::report::aligned(header.iter().map(|h| h.to_string()).collect(), rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vx(name: &str, status: &str) -> ValidatorExperiment {
        serde_saphyr::from_str(&format!(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {{name: {name}, namespace: validators}}\nspec:\n  template: {{agave: {{image: a}}, resources: {{memory: 1Ti}}}}\nstatus: {status}\n"
        ))
        .unwrap()
    }

    #[test]
    fn each_experiment_is_a_line_with_its_counts_and_recommendation() {
        let items = [
            vx(
                "agave-ram",
                "{phase: Succeeded, client: agave, trials: {expected: 5, pending: 0, active: 0, finished: 5, succeeded: 5, failed: 0}, recommendation: {summary: memory=512Gi, reason: r, trial: t, support: 'kept up 1/1 [21%, 100%]'}}",
            ),
            vx(
                "besu",
                "{phase: Running, client: besu, trials: {expected: 8, pending: 5, active: 2, finished: 1, succeeded: 1, failed: 0}}",
            ),
        ];
        let t = render(&items, Output::Table, false);
        assert_eq!(
            t,
            "NAME       CLIENT  PHASE      TRIALS  RUNNING  RECOMMENDATION\n\
             agave-ram  agave   Succeeded  5/5     0        memory=512Gi\n\
             besu       besu    Running    1/8     2        -\n"
        );
        let w = render(&items, Output::Wide, true);
        assert!(w.starts_with("NAMESPACE   NAME "), "{w}");
        assert!(
            w.lines()
                .nth(1)
                .unwrap()
                .ends_with("memory=512Gi    kept up 1/1 [21%, 100%]"),
            "{w}"
        );
        let c = render(&items, Output::Csv, false);
        assert!(
            c.starts_with("name,client,phase,trials,running,recommendation,support\n"),
            "{c}"
        );
        assert!(
            c.contains(
                "agave-ram,agave,Succeeded,5/5,0,memory=512Gi,\"kept up 1/1 [21%, 100%]\"\n"
            ),
            "{c}"
        );
    }
}
