//! The `agave-validator` command line: cluster presets, directories, and the knobs that
//! reach it as flags.

use super::LEDGER_DIR;
use super::knobs::AGAVE;
use crate::api::agave::{AgaveWorkload, SolanaCluster};
use crate::api::sweep::Sigverify;
use crate::api::template::{AgaveSpec, ValidatorTemplate, VolumeRole};
use crate::api::version::Version;
use crate::clients::knobs::{self, KnobError};

pub struct ClusterPreset {
    entrypoints: &'static [&'static str],
    known_validators: &'static [&'static str],
    genesis_hash: &'static str,
}

/// From Agave's docs/src/clusters/available.md.
pub fn preset(cluster: SolanaCluster) -> Option<ClusterPreset> {
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

/// The arguments, and the env vars the tuned knobs need.
pub type Command = (Vec<String>, Vec<(String, String)>);

/// The genesis hash a follower checks (`--expected-genesis-hash`): the spec's, or its
/// known cluster's.
pub fn genesis_hash(agave: &AgaveSpec) -> Option<String> {
    agave
        .expected_genesis_hash
        .clone()
        .or(preset(agave.cluster).map(|p| p.genesis_hash.to_string()))
}

/// The `agave-validator` command line of a template, and the env vars its knobs need.
pub fn args(
    template: &ValidatorTemplate,
    agave: &AgaveSpec,
    version: Option<Version>,
    mount: impl Fn(VolumeRole) -> String,
) -> Result<Command, KnobError> {
    let mut args = match agave.workload {
        AgaveWorkload::Follow => follow(agave),
        AgaveWorkload::Bench => super::bench::validator_args(agave),
    };
    for (role, flag) in [
        (VolumeRole::Accounts, "--accounts"),
        (VolumeRole::Snapshots, "--snapshots"),
        (VolumeRole::AccountsIndex, "--accounts-index-path"),
    ] {
        if template.storage.iter().any(|v| v.role == role) {
            args.extend([flag.into(), mount(role)]);
        }
    }
    if agave.workload == AgaveWorkload::Follow
        && let Some(cache) = &agave.snapshot_cache
    {
        args.extend(super::snapshots::args(cache));
    }
    if super::gpu::sigverify(&template.tuning, agave) == Sigverify::Gpu {
        // perf/src/perf_libs.rs init_cuda: loads libcuda-crypt.so, or exits.
        args.push("--cuda".into());
    }
    let applied = knobs::apply(&AGAVE, &template.tuning, version)?;
    args.extend(applied.args);
    args.extend(template.extra_args.iter().cloned());
    Ok((args, applied.env))
}

/// A non-voting validator joining its cluster.
fn follow(agave: &AgaveSpec) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--identity".into(),
        format!("{LEDGER_DIR}/identity.json"),
        // A tuning trial observes the chain; it must never vote with a real identity.
        "--no-voting".into(),
        "--ledger".into(),
        LEDGER_DIR.into(),
        "--rpc-port".into(),
        agave.rpc_port.to_string(),
        // The RPC binds to the node's loopback and is not advertised in gossip.
        "--private-rpc".into(),
        "--dynamic-port-range".into(),
        agave.dynamic_port_range.clone(),
        "--wal-recovery-mode".into(),
        "skip_any_corrupted_record".into(),
        "--log".into(),
        "-".into(),
    ];
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
    if any_known && agave.only_known_rpc {
        args.push("--only-known-rpc".into());
    }
    if agave.full_rpc_api {
        args.push("--full-rpc-api".into());
    }
    if let Some(hash) = genesis_hash(agave) {
        args.extend(["--expected-genesis-hash".into(), hash]);
    }
    match agave.limit_ledger_size {
        Some(n) => args.extend(["--limit-ledger-size".into(), n.to_string()]),
        None => args.push("--limit-ledger-size".into()),
    }
    args
}
