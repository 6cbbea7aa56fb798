//! `valtune report`: an experiment's trials and results, as a table, CSV, JSON or YAML;
//! with `--out DIR`, also its figures, the data behind them and a page (report/dir.rs);
//! with `--from DIR`, the figures and page of such a directory redrawn from its files.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use valtune::api::{ValidatorExperiment, ValidatorTrial, labels};
use valtune::clients::ValidatorClient;
use valtune::report::dir::{self, Report};
use valtune::report::html::{NodeInfo, Page};
use valtune::results::dataset::Dataset;

use super::output::{Output, print_data};

#[derive(clap::Args)]
pub struct Args {
    /// The ValidatorExperiment's name (required, except with --from).
    #[arg(required_unless_present = "from")]
    experiment: Option<String>,
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
    /// Also write the report into DIR: a figure per series of the client over each
    /// trial's window and per column of the table by point (SVG and PNG), the data behind
    /// them (CSV) and index.html, one page readable offline (docs/report.md).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Redraw the figures and index.html of a directory `--out` wrote, from its own
    /// files: no cluster, no Prometheus.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["experiment", "out"])]
    from: Option<PathBuf>,
    /// The Prometheus that scraped the trials (its base URL, e.g.
    /// http://localhost:9090 after `kubectl port-forward`): `--out` reads each trial's
    /// series over its window from it while it still holds them.
    #[arg(long, env = "PROMETHEUS_URL", value_name = "URL")]
    prometheus_url: Option<String>,
    /// Follow a running experiment: redraw each trial's phase, window elapsed and
    /// remaining, and the node-hours so far until it ends, then print the report.
    #[arg(short, long, conflicts_with = "from")]
    watch: bool,
    /// How often --watch reads the experiment.
    #[arg(
        long,
        default_value = "2s",
        value_name = "DURATION",
        requires = "watch"
    )]
    interval: String,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    if let Some(from) = &args.from {
        let report = dir::read(from)?;
        dir::write(from, &report)?;
        println!(
            "redrew {} figures and {} from {}",
            report.series.len() + report.summaries.len(),
            from.join("index.html").display(),
            from.display()
        );
        return Ok(());
    }
    let Args {
        experiment,
        kube,
        output,
        out,
        prometheus_url,
        watch,
        interval,
        ..
    } = args;
    let experiment = experiment.expect("clap requires it without --from");
    if watch {
        let every = valtune::api::settings::parse_duration(&interval).context("--interval")?;
        follow(&kube, &experiment, every).await?;
    }
    let (client, namespace, vx) = kube.experiment(&experiment).await?;
    let trials: Api<ValidatorTrial> = Api::namespaced(client.clone(), &namespace);
    let lp = ListParams::default().labels(&format!("{}={experiment}", labels::EXPERIMENT));
    let list = valtune::report::sorted(trials.list(&lp).await?.items, &vx.spec.sweep);
    let data = Dataset::from_trials(&vx.spec.sweep, &list);
    let vclient = valtune::clients::client_for(&vx.spec.template)?;
    let layout = vclient.report(&vx.spec.template, &vx.spec.sweep);
    let (table, summary) = text(&vx, &list, &data, vclient, output == Output::Wide);
    match output {
        Output::Table | Output::Wide => print!("{table}\n{summary}"),
        Output::Csv => print!("{}", valtune::report::csv(&data, &layout)),
        Output::Json | Output::Yaml => {
            let rows: Vec<_> = list
                .iter()
                .map(|t| serde_json::json!({"trial": t.metadata.name, "point": t.spec.point, "repetition": t.spec.repetition, "status": t.status}))
                .collect();
            print_data(
                output,
                &serde_json::json!({"experiment": vx.status, "trials": rows, "notes": vclient.report_notes(&list)}),
            )?;
        }
    }
    let Some(out) = out else {
        return Ok(());
    };
    let describes = dir::describes(&vx);
    let series = match &prometheus_url {
        Some(url) => {
            let prom = valtune::results::prometheus::Prometheus::new(url);
            let profile = vclient
                .profile(&vx.spec.template)
                .with_overrides(&vx.spec.metrics.queries);
            dir::read_series(&prom, &profile, &data, &list, &describes)
                .await
                .with_context(|| format!("reading the trials' series from Prometheus at {url}"))?
        }
        None => {
            eprintln!(
                "note: no --prometheus-url (or PROMETHEUS_URL): {} has the figures per point only, not the series over each window",
                out.display()
            );
            Vec::new()
        }
    };
    let patch = vx
        .status
        .as_ref()
        .and_then(|s| s.recommendation.as_ref())
        .and_then(|r| {
            list.iter()
                .find(|t| t.metadata.name.as_deref() == Some(&r.trial))
        })
        .and_then(|t| super::recommend::evidence(&vx, &namespace, t).ok())
        .map(|(e, p)| valtune::report::patch::render_yaml(&e, &p));
    let page = Page {
        experiment: experiment.clone(),
        namespace: namespace.clone(),
        generated: jiff::Timestamp::now().to_string(),
        client: client_line(vclient, &vx),
        describes: describes.clone(),
        table,
        summary,
        patch,
        spec: serde_saphyr::to_string(&vx.spec).context("writing the spec as YAML")?,
        nodes: nodes(client, &list).await,
    };
    let report = Report {
        page,
        summaries: valtune::report::series::summaries(&data, &layout, &series, &describes),
        series,
        table_csv: Some(valtune::report::csv(&data, &layout)),
    };
    dir::write(&out, &report)?;
    eprintln!(
        "wrote {} figures, their data and {}",
        report.series.len() + report.summaries.len(),
        out.join("index.html").display()
    );
    Ok(())
}

/// Redraws the progress view every `every` until the experiment ends: in place on a
/// terminal, else (a log, `make demo`) each time it changes.
async fn follow(
    kube: &super::KubeArgs,
    name: &str,
    every: std::time::Duration,
) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let tty = std::io::stdout().is_terminal();
    let mut last = String::new();
    loop {
        let (client, namespace, vx) = kube.experiment(name).await?;
        let trials: Api<ValidatorTrial> = Api::namespaced(client, &namespace);
        let lp = ListParams::default().labels(&format!("{}={name}", labels::EXPERIMENT));
        let data = Dataset::from_trials(&vx.spec.sweep, &trials.list(&lp).await?.items);
        let length = valtune::api::settings::parse_duration(&vx.spec.trial.measurement.duration)
            .unwrap_or_default();
        let view = valtune::report::progress::progress(&vx, &data, length, jiff::Timestamp::now());
        let phase = vx.status.map(|s| s.phase).unwrap_or_default();
        // The times change every pass; a log gets the view only when a phase does.
        let key = format!(
            "{phase:?} {:?}",
            data.trials()
                .map(|t| (&t.name, t.phase, t.outcome))
                .collect::<Vec<_>>()
        );
        if tty {
            print!("\x1b[H\x1b[2J{view}");
        } else if key != last {
            println!("{view}");
        }
        last = key;
        if matches!(
            phase,
            valtune::api::experiment::ExperimentPhase::Succeeded
                | valtune::api::experiment::ExperimentPhase::Failed
        ) {
            println!();
            return Ok(());
        }
        tokio::time::sleep(every).await;
    }
}

/// The table and its notes, and the summary with the client's conclusions, as printed.
fn text(
    vx: &ValidatorExperiment,
    list: &[ValidatorTrial],
    data: &Dataset,
    client: &dyn ValidatorClient,
    wide: bool,
) -> (String, String) {
    let layout = client.report(&vx.spec.template, &vx.spec.sweep);
    let mut table = if wide {
        valtune::report::wide_table(data, &layout)
    } else {
        valtune::report::table(data, &layout)
    };
    table.push_str(&valtune::report::coverage_notes(list));
    if let Some(points) = valtune::report::points_table(data, &client.objective(&vx.spec.sweep)) {
        table.push('\n');
        table.push_str(&points);
    }
    let mut summary = valtune::report::summary(vx);
    for note in client.report_notes(list) {
        summary.push_str(&note);
        summary.push('\n');
    }
    (table, summary)
}

/// "Agave 2.1.14 (image anzaxyz/agave:v2.1.14)".
fn client_line(client: &dyn ValidatorClient, vx: &ValidatorExperiment) -> String {
    let t = &vx.spec.template;
    let (image, _) = client.image_and_version(t);
    match client.version(t) {
        Some(v) => format!("{} {v} (image {image})", client.display()),
        None => format!("{} (image {image})", client.display()),
    }
}

/// The nodes the trials ran on, as the API server describes them (name only when it
/// cannot be read, e.g. without RBAC on nodes).
async fn nodes(client: kube::Client, list: &[ValidatorTrial]) -> Vec<NodeInfo> {
    let mut by_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in list {
        if let Some(n) = t.status.as_ref().and_then(|s| s.node_name.clone()) {
            by_node
                .entry(n)
                .or_default()
                .push(t.metadata.name.clone().unwrap_or_default());
        }
    }
    let api: Api<Node> = Api::all(client);
    let mut out = Vec::new();
    for (name, trials) in by_node {
        let node = api.get_opt(&name).await.ok().flatten();
        let status = node.and_then(|n| n.status);
        let info = status.as_ref().and_then(|s| s.node_info.clone());
        let cap = |k: &str| {
            status
                .as_ref()
                .and_then(|s| s.capacity.as_ref()?.get(k).map(|q| q.0.clone()))
                .unwrap_or_default()
        };
        out.push(NodeInfo {
            name,
            trials,
            kubelet: info
                .as_ref()
                .map(|i| i.kubelet_version.clone())
                .unwrap_or_default(),
            kernel: info
                .as_ref()
                .map(|i| i.kernel_version.clone())
                .unwrap_or_default(),
            os: info
                .as_ref()
                .map(|i| i.os_image.clone())
                .unwrap_or_default(),
            cpu: cap("cpu"),
            memory: cap("memory"),
        });
    }
    out
}
