//! Agave: `agave-validator` arguments, its sidecars and its metric profile.
//!
//! Agave serves JSON RPC and pushes InfluxDB line protocol; Prometheus sees it through
//! three sidecars (names and flags checked against their sources):
//! - asymmetric-research/solana-exporter v3.0.2 (`cmd/solana-exporter/slots.go`,
//!   `collector.go`): `solana_node_transactions_total` (a gauge holding the finalized
//!   transaction count from getEpochInfo) and `solana_node_num_slots_behind` (getHealth);
//! - ncabatoff/process-exporter 0.8.7 (`collector/process_collector.go`):
//!   `namedprocess_namegroup_memory_bytes{memtype="resident"|"virtual"|"swapped"}` and
//!   `namedprocess_namegroup_{major,minor}_page_faults_total`;
//! - prometheus/influxdb_exporter: `SOLANA_METRICS_CONFIG` datapoints become
//!   `<measurement>_<field>`, e.g. `loaded_programs_cache_stats_hits`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar};

use super::pod::{PodParts, sidecar_resources, volume_path};
use super::{MetricProfile, RenderError};
use crate::api::sweep::ThreadKnob;
use crate::api::template::{AgaveSpec, SolanaCluster, VolumeRole};
use crate::api::trial::ValidatorTrial;

pub const VALIDATOR_CONTAINER: &str = "validator";
pub const PROCESS_NAME: &str = "agave-validator";
const RPC_EXPORTER_PORT: i32 = 8080;
const PROCESS_EXPORTER_PORT: i32 = 9256;
const INFLUXDB_EXPORTER_PORT: i32 = 9122;
/// Prometheus port names the PodMonitor scrapes.
pub const METRICS_PORTS: [&str; 3] = ["metrics-rpc", "metrics-proc", "metrics-influx"];

struct ClusterPreset {
    entrypoints: &'static [&'static str],
    known_validators: &'static [&'static str],
    genesis_hash: &'static str,
}

/// From Agave's docs/src/clusters/available.md.
fn preset(cluster: SolanaCluster) -> Option<ClusterPreset> {
    match cluster {
        SolanaCluster::MainnetBeta => Some(ClusterPreset {
            entrypoints: &[
                "entrypoint.mainnet-beta.solana.com:8001",
                "entrypoint2.mainnet-beta.solana.com:8001",
                "entrypoint3.mainnet-beta.solana.com:8001",
                "entrypoint4.mainnet-beta.solana.com:8001",
                "entrypoint5.mainnet-beta.solana.com:8001",
            ],
            known_validators: &[
                "7Np41oeYqPefeNQEHSv1UDhYrehxin3NStELsSKCT4K2",
                "GdnSyH3YtwcxFvQrVVJMm1JhTS4QVX7MFsX56uJLUfiZ",
                "DE1bawNcRJB9rVm3buyMVfr8mBEoyyu73NBovf2oXJsJ",
                "CakcnaRDHka2gXyfbEd2d3xsvkJkqsLw2akB3zsN1D2S",
            ],
            genesis_hash: "5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d",
        }),
        SolanaCluster::Testnet => Some(ClusterPreset {
            entrypoints: &[
                "entrypoint.testnet.solana.com:8001",
                "entrypoint2.testnet.solana.com:8001",
                "entrypoint3.testnet.solana.com:8001",
            ],
            known_validators: &[
                "5D1fNXzvv5NjV1ysLjirC4WY92RNsVH18vjmcszZd8on",
                "Ft5fbkqNa76vnsjYNwjDZUXoTWpP7VYm3mtsaQckQADN",
                "9QxCLckBiJc783jnMvXZubK4wH86Eqqvashtrwvcsgkv",
            ],
            genesis_hash: "4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY",
        }),
        SolanaCluster::Devnet => Some(ClusterPreset {
            entrypoints: &[
                "entrypoint.devnet.solana.com:8001",
                "entrypoint2.devnet.solana.com:8001",
                "entrypoint3.devnet.solana.com:8001",
                "entrypoint4.devnet.solana.com:8001",
                "entrypoint5.devnet.solana.com:8001",
            ],
            known_validators: &[
                "dv1ZAGvdsz5hHLwWXsVnM94hWf1pjbKVau1QVkaMJ92",
                "dv2eQHeP4RFrJZ6UeiZWoc3XTtmtZCUKxxCApCDcRNV",
                "dv4ACNkpYPcE3aKmYDqZm9G5EB3J4MRoeE7WNDRBVJB",
                "dv3qDFk1DTF36Z62bNvrCXe9sKATA6xvVy6A798xxAS",
            ],
            genesis_hash: "EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG",
        }),
        SolanaCluster::Custom => None,
    }
}

/// How a thread knob reaches agave-validator (validator/src/cli/thread_args.rs).
fn thread_arg(knob: ThreadKnob) -> Option<&'static str> {
    Some(match knob {
        ThreadKnob::BankingThreads => "--block-production-num-workers",
        ThreadKnob::ReplayTransactionsThreads => "--replay-transactions-threads",
        ThreadKnob::ReplayForksThreads => "--replay-forks-threads",
        ThreadKnob::RayonGlobalThreads => "--rayon-global-threads",
        ThreadKnob::RpcThreads => "--rpc-threads",
        ThreadKnob::UnifiedSchedulerHandlerThreads => "--unified-scheduler-handler-threads",
        _ => return None,
    })
}

/// The `agave-validator` command line for a trial.
pub fn args(trial: &ValidatorTrial, agave: &AgaveSpec) -> Result<Vec<String>, RenderError> {
    let template = &trial.spec.template;
    let mut args: Vec<String> = vec![
        "--identity".into(),
        format!("{}/identity.json", volume_path(VolumeRole::Ledger)),
        // A tuning trial observes the chain; it must never vote with a real identity.
        "--no-voting".into(),
        "--ledger".into(),
        volume_path(VolumeRole::Ledger),
        "--rpc-port".into(),
        agave.rpc_port.to_string(),
        "--private-rpc".into(),
        "--dynamic-port-range".into(),
        agave.dynamic_port_range.clone(),
        "--wal-recovery-mode".into(),
        "skip_any_corrupted_record".into(),
        "--log".into(),
        "-".into(),
    ];
    for role in [
        VolumeRole::Accounts,
        VolumeRole::Snapshots,
        VolumeRole::AccountsIndex,
    ] {
        if template.storage.iter().any(|v| v.role == role) {
            let flag = match role {
                VolumeRole::Accounts => "--accounts",
                VolumeRole::Snapshots => "--snapshots",
                _ => "--accounts-index-path",
            };
            args.extend([flag.into(), volume_path(role)]);
        }
    }
    let preset = preset(agave.cluster);
    let entrypoints = preset
        .iter()
        .flat_map(|p| p.entrypoints.iter().map(|e| e.to_string()));
    for e in entrypoints.chain(agave.entrypoints.iter().cloned()) {
        args.extend(["--entrypoint".into(), e]);
    }
    let known = preset
        .iter()
        .flat_map(|p| p.known_validators.iter().map(|k| k.to_string()));
    let mut any_known = false;
    for k in known.chain(agave.known_validators.iter().cloned()) {
        args.extend(["--known-validator".into(), k]);
        any_known = true;
    }
    if any_known {
        args.push("--only-known-rpc".into());
    }
    if let Some(hash) = agave
        .expected_genesis_hash
        .clone()
        .or(preset.map(|p| p.genesis_hash.to_string()))
    {
        args.extend(["--expected-genesis-hash".into(), hash]);
    }
    match agave.limit_ledger_size {
        Some(n) => args.extend(["--limit-ledger-size".into(), n.to_string()]),
        None => args.push("--limit-ledger-size".into()),
    }
    for (name, value) in &trial.spec.point.threads {
        let knob: ThreadKnob = serde_json::from_value(serde_json::Value::String(name.clone()))
            .map_err(|_| RenderError::Knob(format!("unknown thread knob {name}")))?;
        let flag = thread_arg(knob)
            .ok_or_else(|| RenderError::Knob(format!("agave cannot set {name}")))?;
        args.extend([flag.into(), value.to_string()]);
    }
    args.extend(template.extra_args.iter().cloned());
    Ok(args)
}

/// The image of the trial: the one built with its program cache size, if it sweeps one.
pub fn image(trial: &ValidatorTrial, agave: &AgaveSpec) -> Result<String, RenderError> {
    match trial.spec.point.program_cache_entries {
        None => Ok(agave.image.clone()),
        Some(n) => agave
            .program_cache_images
            .iter()
            .find(|i| i.entries == n)
            .map(|i| i.image.clone())
            .ok_or_else(|| {
                RenderError::Knob(format!(
                    "no image in template.agave.programCacheImages has entries={n}"
                ))
            }),
    }
}

/// The validator container and its sidecars.
pub fn containers(
    trial: &ValidatorTrial,
    agave: &AgaveSpec,
    parts: &PodParts,
) -> Result<(Vec<Container>, Vec<Container>), RenderError> {
    let ledger = volume_path(VolumeRole::Ledger);
    let mut env = vec![
        // All four keys are required or Agave drops metrics (metrics/src/metrics.rs).
        env_var(
            "SOLANA_METRICS_CONFIG",
            &format!("host=http://127.0.0.1:{INFLUXDB_EXPORTER_PORT},db=agave,u=valtune,p=valtune"),
        ),
        // Datapoints are only sent at info level.
        env_var("RUST_LOG", "info"),
    ];
    env.extend(trial.spec.template.env.iter().cloned());

    let image = image(trial, agave)?;
    // The identity is generated once per volume: an unstaked, non-voting key.
    let keygen = Container {
        name: "identity".into(),
        image: Some(image.clone()),
        command: Some(vec!["sh".into(), "-c".into()]),
        args: Some(vec![format!(
            "test -f {ledger}/identity.json || solana-keygen new --no-bip39-passphrase --silent --outfile {ledger}/identity.json"
        )]),
        resources: Some(sidecar_resources()),
        volume_mounts: Some(parts.mounts.clone()),
        ..Default::default()
    };
    let validator = Container {
        name: VALIDATOR_CONTAINER.into(),
        image: Some(image),
        command: Some(vec![PROCESS_NAME.into()]),
        args: Some(args(trial, agave)?),
        env: Some(env),
        ports: Some(vec![port("rpc", agave.rpc_port)]),
        resources: Some(parts.validator_resources.clone()),
        volume_mounts: Some(parts.mounts.clone()),
        ..Default::default()
    };
    let rpc_exporter = sidecar(
        "rpc-exporter",
        &agave.exporters.rpc,
        vec![
            format!("-rpc-url=http://127.0.0.1:{}", agave.rpc_port),
            format!("-listen-address=:{RPC_EXPORTER_PORT}"),
            // Only the node's own figures; vote-account scans cost the RPC node dearly.
            "-light-mode".into(),
        ],
        METRICS_PORTS[0],
        RPC_EXPORTER_PORT,
    );
    let process_exporter = sidecar(
        "process-exporter",
        &agave.exporters.process,
        vec![
            format!("-procnames={PROCESS_NAME}"),
            "-threads=false".into(),
            // smaps of a validator with millions of mappings is expensive to read.
            "-gather-smaps=false".into(),
        ],
        METRICS_PORTS[1],
        PROCESS_EXPORTER_PORT,
    );
    let influxdb_exporter = sidecar(
        "influxdb-exporter",
        &agave.exporters.influxdb,
        vec![format!("--web.listen-address=:{INFLUXDB_EXPORTER_PORT}")],
        METRICS_PORTS[2],
        INFLUXDB_EXPORTER_PORT,
    );
    Ok((
        vec![keygen],
        vec![validator, rpc_exporter, process_exporter, influxdb_exporter],
    ))
}

/// An exporter sidecar serving Prometheus metrics on one named port.
fn sidecar(name: &str, image: &str, args: Vec<String>, port_name: &str, number: i32) -> Container {
    Container {
        name: name.into(),
        image: Some(image.into()),
        args: Some(args),
        ports: Some(vec![port(port_name, number)]),
        resources: Some(sidecar_resources()),
        ..Default::default()
    }
}

fn port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..Default::default()
    }
}

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    }
}

/// PromQL for an Agave pod. `$selector` is the pod's label matchers, `$rate` the window
/// for per-second rates (a few scrape intervals).
pub fn profile() -> MetricProfile {
    let proc = format!("$selector,groupname=\"{PROCESS_NAME}\"");
    MetricProfile {
        queries: BTreeMap::from([
            (
                "tps".into(),
                "sum(irate(solana_node_transactions_total{$selector}[$rate]))".into(),
            ),
            (
                "slotLag".into(),
                "max(solana_node_num_slots_behind{$selector})".into(),
            ),
            (
                "rssBytes".into(),
                format!("sum(namedprocess_namegroup_memory_bytes{{{proc},memtype=\"resident\"}})"),
            ),
            (
                "vszBytes".into(),
                format!("sum(namedprocess_namegroup_memory_bytes{{{proc},memtype=\"virtual\"}})"),
            ),
            (
                "majorFaultsPerSecond".into(),
                format!(
                    "sum(irate(namedprocess_namegroup_major_page_faults_total{{{proc}}}[$rate]))"
                ),
            ),
            (
                "minorFaultsPerSecond".into(),
                format!(
                    "sum(irate(namedprocess_namegroup_minor_page_faults_total{{{proc}}}[$rate]))"
                ),
            ),
        ]),
        ports: METRICS_PORTS.iter().map(|p| p.to_string()).collect(),
        validator_container: VALIDATOR_CONTAINER,
    }
}
