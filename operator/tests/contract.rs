//! The contract between each client and the lab, pure (no lab needed): for every example
//! experiment, the operator renders a trial's pod; the lab's simulator must recognise it
//! from the pod alone, start its validator without the exit a real one would make on a
//! bad flag or setting, and serve (itself or through the pod's sidecar programs) every
//! series the client's metric profile queries, at the ports the PodMonitor scrapes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use valtune::api::ValidatorExperiment;
use valtune::clients::{self, RenderInput, client_for};
use valtune::strategies::build::build_trial;
use valtune::strategies::plan::plan;
use valtune_lab::sim::clients::{self as sim, Started};
use valtune_lab::sim::clock::Clock;
use valtune_lab::sim::pod_view::PodView;
use valtune_lab::sim::sidecars;

fn examples() -> Vec<(String, ValidatorExperiment)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path).unwrap();
            let mut vx: ValidatorExperiment =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            vx.metadata.namespace = Some("validators".into());
            vx.metadata.uid = Some("uid".into());
            out.push((path.file_name().unwrap().to_string_lossy().into_owned(), vx));
        }
    }
    assert!(!out.is_empty());
    out
}

/// The metric names a PromQL expression selects (names directly before `{`).
fn selected_names(query: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{").unwrap();
    re.captures_iter(query).map(|c| c[1].to_string()).collect()
}

/// The values a query requires of a label, e.g. `groupname="agave-validator"`.
fn label_values(query: &str, label: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(&format!(r#"{label}="([^"]*)""#)).unwrap();
    re.captures_iter(query).map(|c| c[1].to_string()).collect()
}

#[test]
fn every_example_renders_a_pod_the_lab_plays_and_serves_its_profile() {
    let registry = valtune_lab::topology::Topology::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../lab/topology.yaml"),
    )
    .unwrap()
    .images;
    let clock = Clock {
        scale: 720.0,
        step: 1.0,
    };
    let mut checked = 0;
    for (file, vx) in examples() {
        let client = client_for(&vx.spec.template).unwrap();
        if !client.runs_trials() {
            continue;
        }
        for planned in plan(&vx.spec.sweep, 1) {
            let trial = build_trial(&vx, &planned).expect("an example point");
            let what = format!("{file} ({})", planned.point.describe());
            let input = RenderInput::for_trial(&trial, 1, &[], Some("http://127.0.0.1:9090"));
            let rendered = input
                .and_then(|i| clients::render(&i))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let pod: Pod = rendered.pod;
            let config_maps: BTreeMap<String, BTreeMap<String, String>> = rendered
                .config_maps
                .iter()
                .map(|c| {
                    (
                        c.metadata.name.clone().unwrap(),
                        c.data.clone().unwrap_or_default(),
                    )
                })
                .collect();

            // Recognised from the pod alone, as the client it is.
            let (model, container) = sim::recognise(&pod)
                .unwrap_or_else(|| panic!("{what}: the lab does not recognise the pod"));
            assert_eq!(model.name(), client.name(), "{what}");
            // Generated Secrets hold random bytes once the operator creates them.
            let secrets: BTreeMap<String, BTreeMap<String, String>> = rendered
                .secrets
                .iter()
                .map(|g| {
                    let s = g.secret(&[0x5a; 64]);
                    (
                        s.metadata.name.clone().unwrap(),
                        s.string_data.clone().unwrap_or_default(),
                    )
                })
                .collect();
            let mut view = PodView::new(
                pod.clone(),
                "127.0.0.9".parse().unwrap(),
                config_maps,
                secrets,
            );
            // What the lab's registry says the examples' images hold.
            view.registry = registry.clone();
            let env = view.env(container);
            let process = match model.start(&view, container, &env, &clock) {
                Started::Running(p) => p,
                Started::Exited(exit) => {
                    panic!("{what}: the validator exits at start: {}", exit.message)
                }
            };

            // What is served: the process's own pages and what the sidecars make of it.
            // Two simulated hours: past every example's catch-up, and no more slots for
            // the program cache to replay than that needs.
            let t = 2.0 * 3600.0;
            let mut served: BTreeSet<String> = BTreeSet::from(["up".to_string()]);
            for port in process.metrics_ports() {
                for path in ["/metrics", "/v1/prometheus/metrics"] {
                    if let Some(page) = process.metrics(t, port, path) {
                        served.extend(
                            page.lines()
                                .filter(|l| !l.starts_with('#'))
                                .filter_map(|l| l.split(['{', ' ']).next().map(str::to_string)),
                        );
                    }
                }
            }
            let spec = pod.spec.as_ref().unwrap();
            for c in spec
                .init_containers
                .iter()
                .flatten()
                .chain(&spec.containers)
            {
                if let Some(program) = sidecars::program_of(c.image.as_deref().unwrap_or("")) {
                    served.extend(sidecars::metric_names(&program, process.as_ref(), t));
                    // A script serves what it declares (the lab runs it as it is).
                    if let Some((_, script)) = sidecars::python_script(&view, c) {
                        served.extend(sidecars::script_metric_names(&script));
                    }
                }
            }
            let profile = clients::profile(&trial).unwrap();
            for (key, query) in &profile.queries {
                for name in selected_names(query) {
                    assert!(
                        served.contains(&name),
                        "{what}: the profile's {key} query reads {name}, which nothing in the lab's pod serves (served: {served:?})"
                    );
                }
                for group in label_values(query, "groupname") {
                    assert_eq!(
                        group,
                        process.proc(t).comm,
                        "{what}: {key} selects a process group the process is not"
                    );
                }
            }
            // The PodMonitor scrapes ports the pod declares.
            let ports: BTreeSet<String> = spec
                .init_containers
                .iter()
                .flatten()
                .chain(&spec.containers)
                .flat_map(|c| c.ports.iter().flatten())
                .filter_map(|p| p.name.clone())
                .collect();
            for e in &profile.endpoints {
                assert!(
                    ports.contains(e.port),
                    "{what}: the PodMonitor scrapes port {}, which no container declares",
                    e.port
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 0);
}

#[test]
fn the_contract_notices_a_query_of_a_series_nobody_serves() {
    let names = selected_names(
        "sum(irate(solana_node_transactions_total{$selector}[$rate])) / on() max(up{$selector})",
    );
    assert_eq!(
        names,
        BTreeSet::from(["solana_node_transactions_total".into(), "up".into()])
    );
}

/// The lab compresses an experiment's unset warm-up limit and window from the operator's
/// defaults (lab/src/compress.rs); they must be the same.
#[test]
fn the_labs_compression_knows_the_operators_defaults() {
    let d = valtune::api::settings::TrialSettings::default();
    assert_eq!(
        valtune_lab::compress::DEFAULT_WARMUP_TIMEOUT,
        d.warmup.timeout
    );
    assert_eq!(
        valtune_lab::compress::DEFAULT_MEASUREMENT,
        d.measurement.duration
    );
    assert_eq!(
        valtune_lab::compress::DEFAULT_EARLY_WINDOW,
        d.early_abort.window
    );
    assert_eq!(
        valtune_lab::compress::DEFAULT_EARLY_INTERVAL,
        d.early_abort.interval
    );
}
