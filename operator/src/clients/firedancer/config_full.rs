//! The TOML config of a full Firedancer trial: keys of firedancer-io/firedancer
//! `src/app/firedancer/config/default.toml`, every one present in all tags from v1.0.0 to
//! v26.08.1 unless said (read with tomllib; hack/firedancer/config_keys.py). Full
//! Firedancer has no Agave inside: no `agave_affinity`, no `[ledger]`, `[rpc]` or
//! `[reporting]`; its files live under `[paths]` and it serves RPC from its own rpc tile
//! (`[tiles.rpc]`).

use super::config::{
    AFFINITY, Config, Inputs, SCRATCH_DIR, Value, bench, cluster, common, identity_path,
    tile_counts,
};
use super::versions::V1_1;
use crate::api::firedancer::FiredancerWorkload;
use crate::api::template::VolumeRole;
use crate::clients::knobs::KnobError;

pub fn config(i: &Inputs) -> Result<Config, KnobError> {
    let s = i.spec;
    let mut c = Config::default();
    common(&mut c, s);
    // Everything not placed elsewhere (identity, genesis, default snapshots) goes under
    // `[paths] base` (default `/home/{user}/.firedancer/{name}`).
    c.set("paths.base", Value::Str(SCRATCH_DIR.into()));
    let volume = |role| {
        i.volumes
            .iter()
            .find(|(r, _)| *r == role)
            .map(|(_, p)| p.clone())
    };
    if let Some(p) = volume(VolumeRole::Accounts) {
        // `[paths] accounts` is the accounts database file itself.
        c.set("paths.accounts", Value::Str(format!("{p}/accounts.db")));
    }
    let ledger = volume(VolumeRole::Ledger);
    match (volume(VolumeRole::Snapshots), &ledger) {
        (Some(p), _) => c.set("paths.snapshots", Value::Str(p)),
        (None, Some(p)) => c.set("paths.snapshots", Value::Str(format!("{p}/snapshots"))),
        _ => {}
    }
    // A snapshot cache: the node's directory, and how old a local snapshot may be
    // (`[snapshots.sources]`, snapshots.rs).
    if let Some(cache) = super::snapshots::cache(s) {
        c.set(
            "paths.snapshots",
            Value::Str(super::snapshots::MOUNT.into()),
        );
        if let Some(age) = cache.max_local_full_effective_age {
            c.set(
                "snapshots.sources.max_local_full_effective_age",
                Value::Int(age),
            );
        }
        if let Some(age) = cache.max_local_incremental_age {
            c.set(
                "snapshots.sources.max_local_incremental_age",
                Value::Int(age),
            );
        }
    }
    // The shreds rserve keeps for repair, from v1.1.0 (`[paths] shredb`); v1.0 keeps
    // no ledger of its own, so a ledger volume holds only its snapshots.
    if let Some(p) = &ledger
        && i.version.is_some_and(|v| v >= V1_1)
    {
        c.set("paths.shredb", Value::Str(format!("{p}/shreds.db")));
    }
    // Every tile on a core of the container's own; nothing else runs beside them.
    c.set("layout.affinity", Value::Str(AFFINITY.into()));
    tile_counts(&mut c, i)?;
    // The event tile reports to events-in.firedancer.io (`[tiles.event] url`); an
    // experiment does not, and the tile would take a core of its own.
    c.set("telemetry", Value::Bool(false));
    // The rpc tile: firedancer-dev bench needs it ("RPC tile must be enabled to run
    // bench", src/app/shared_dev/commands/bench/bench.c); it listens on 127.0.0.1.
    c.set("tiles.rpc.enabled", Value::Bool(true));
    c.set("tiles.rpc.rpc_listen_port", Value::Int(s.rpc_port.into()));
    match s.workload {
        FiredancerWorkload::Follow => {
            let (entrypoints, _, genesis) = cluster(s.cluster);
            let mut e: Vec<String> = entrypoints.iter().map(|e| e.to_string()).collect();
            e.extend(s.entrypoints.iter().cloned());
            c.set("gossip.entrypoints", Value::Strs(e));
            // A live cluster's genesis hash makes it a live cluster, which needs an
            // identity (src/app/shared/fd_config.c fd_config_fill); never a vote account.
            c.set("paths.identity_key", Value::Str(identity_path()));
            let genesis = s.expected_genesis_hash.clone().unwrap_or(genesis.into());
            if !genesis.is_empty() {
                c.set("consensus.expected_genesis_hash", Value::Str(genesis));
            }
        }
        FiredancerWorkload::Bench => bench(&mut c, s),
    }
    for (k, v) in &s.config {
        c.set(k, Value::user(v));
    }
    Ok(c)
}

/// Keys of full Firedancer that valtune writes (refused as config keys).
pub const RESERVED: [&str; 9] = [
    "paths.base",
    "paths.accounts",
    "paths.snapshots",
    "paths.shredb",
    "paths.identity_key",
    "telemetry",
    "tiles.rpc.enabled",
    "tiles.rpc.rpc_listen_port",
    "tiles.gui.gui_listen_address",
];

#[cfg(test)]
mod tests {
    use super::super::config;
    use super::*;
    use crate::api::firedancer::FiredancerSpec;
    use crate::api::sweep::ThreadKnob;
    use crate::api::template::Tuning;
    use crate::api::version::Version;

    fn render(yaml: &str, v: Version, volumes: &[(VolumeRole, &str)]) -> String {
        let spec: FiredancerSpec = serde_saphyr::from_str(yaml).unwrap();
        let tuning = Tuning {
            threads: [(ThreadKnob::ExecTiles, 4)].into(),
            ..Default::default()
        };
        config::config(&Inputs {
            spec: &spec,
            tuning: &tuning,
            version: Some(v),
            volumes: volumes.iter().map(|(r, p)| (*r, p.to_string())).collect(),
            datapoints_port: None,
            validator: None,
        })
        .unwrap()
        .render("")
    }

    #[test]
    fn a_follower_writes_full_firedancers_keys() {
        let text = render(
            "image: x\nflavor: firedancer\ncluster: testnet\nlayout: {signTiles: 3}",
            Version::new(1, 1, 4),
            &[
                (VolumeRole::Ledger, "/mnt/ledger"),
                (VolumeRole::Accounts, "/mnt/accounts"),
            ],
        );
        for part in [
            "telemetry = false\n",
            "[paths]\naccounts = \"/mnt/accounts/accounts.db\"\nbase = \"/var/lib/firedancer\"\nidentity_key = \"/var/lib/firedancer/identity.json\"\nshredb = \"/mnt/ledger/shreds.db\"\nsnapshots = \"/mnt/ledger/snapshots\"\n",
            "execrp_tile_count = 4\n",
            "sign_tile_count = 3\n",
            "expected_genesis_hash = \"4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY\"",
            "[tiles.rpc]\nenabled = true\nrpc_listen_port = 8899\n",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        // Nothing of Frankendancer's Agave.
        for key in [
            "agave_affinity",
            "scratch_directory",
            "[ledger]",
            "[rpc]",
            "known_validators",
        ] {
            assert!(!text.contains(key), "{key}: {text}");
        }
        // v1.0 has no [paths] shredb.
        let old = render(
            "image: x\nflavor: firedancer",
            Version::new(1, 0, 1),
            &[(VolumeRole::Ledger, "/mnt/ledger")],
        );
        assert!(!old.contains("shredb"), "{old}");
    }

    #[test]
    fn the_bench_has_no_live_cluster_keys() {
        let text = render(
            "image: x\nflavor: firedancer\nworkload: bench\nbench: {benchgTiles: 8}",
            Version::new(26, 8, 1),
            &[],
        );
        assert!(text.contains("benchg_tile_count = 8"), "{text}");
        assert!(!text.contains("entrypoints") && !text.contains("identity_key"));
    }
}
