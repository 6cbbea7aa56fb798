//! Snapshot reuse: the snapshot archives a follower downloads and makes are kept in a
//! directory of the node that outlives the trial (`template.agave.snapshotCache`), one
//! per cluster, so the next trial of that cluster on the node starts from them.
//!
//! Agave (anza-xyz/agave, validator/src/bootstrap.rs `download_snapshots` and
//! `should_use_local_snapshot`, read at 0623227a; the same logic at the v4.0.3 the
//! examples pin): before downloading, it takes the highest local archive in
//! `--full-snapshot-archive-path` / `--incremental-snapshot-archive-path` (both default
//! to `--snapshots`, validator/src/commands/run/execute.rs) and uses it when its slot is
//! at least the cluster's newest snapshot slot less `--maximum-local-snapshot-age`
//! (default 2,500, DefaultArgs in run/args.rs), logging "Reusing local snapshot at slot
//! ..."; otherwise it downloads into the same directories and keeps
//! `--maximum-full-snapshots-to-retain` (2) and `--maximum-incremental-snapshots-to-
//! retain` (4) as it makes its own. Archive names carry a slot and a hash, not the
//! cluster, so the directory is keyed by the genesis hash: another cluster's archives
//! are never in it.

use k8s_openapi::api::core::v1::{HostPathVolumeSource, Volume, VolumeMount};

use crate::api::agave::{AgaveSnapshotCache, AgaveSpec, AgaveWorkload};
use crate::clients::parts;

/// Where the pod mounts the node's directory.
pub const MOUNT: &str = "/mnt/snapshot-cache";
pub const VOLUME: &str = "snapshot-cache";

/// The flags that point Agave's archives at the node's directory.
pub fn args(cache: &AgaveSnapshotCache) -> Vec<String> {
    let mut out = vec![
        "--full-snapshot-archive-path".to_string(),
        MOUNT.into(),
        "--incremental-snapshot-archive-path".into(),
        MOUNT.into(),
    ];
    if let Some(age) = cache.maximum_local_snapshot_age {
        out.extend(["--maximum-local-snapshot-age".into(), age.to_string()]);
    }
    out
}

/// The node's directory for this cluster: `<hostPath>/agave/<genesis hash>`.
pub fn host_dir(cache: &AgaveSnapshotCache, genesis_hash: &str) -> String {
    format!(
        "{}/agave/{genesis_hash}",
        cache.host_path.trim_end_matches('/')
    )
}

/// The hostPath volume and its mount, for a follower with a snapshot cache.
pub fn volume(agave: &AgaveSpec) -> Option<(Volume, VolumeMount)> {
    let cache = agave.snapshot_cache.as_ref()?;
    if agave.workload != AgaveWorkload::Follow {
        return None;
    }
    // Admission refuses a cache without a genesis hash (a custom cluster without
    // expectedGenesisHash): never a directory shared by clusters.
    let hash = super::args::genesis_hash(agave)?;
    let volume = Volume {
        name: VOLUME.into(),
        host_path: Some(HostPathVolumeSource {
            path: host_dir(cache, &hash),
            type_: Some("DirectoryOrCreate".into()),
        }),
        ..Default::default()
    };
    Some((volume, parts::mount(VOLUME, MOUNT, false)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::agave::SolanaCluster;

    fn spec(yaml: &str) -> AgaveSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn each_cluster_has_a_directory_of_its_own() {
        let mainnet = spec(
            "{image: 'anzaxyz/agave:v4.0.3', snapshotCache: {hostPath: /var/lib/valtune/snapshots/}}",
        );
        let mut testnet = mainnet.clone();
        testnet.cluster = SolanaCluster::Testnet;
        let path = |a: &AgaveSpec| volume(a).unwrap().0.host_path.unwrap().path;
        assert_eq!(
            path(&mainnet),
            "/var/lib/valtune/snapshots/agave/5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d"
        );
        assert_eq!(
            path(&testnet),
            "/var/lib/valtune/snapshots/agave/4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY"
        );
        let mut custom = mainnet.clone();
        custom.cluster = SolanaCluster::Custom;
        assert!(volume(&custom).is_none(), "no genesis hash, no directory");
        custom.expected_genesis_hash = Some("EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG".into());
        assert!(path(&custom).ends_with("/agave/EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcaWoxPkrZBG"));
    }

    #[test]
    fn the_age_reaches_agave_only_when_set() {
        let mut cache = AgaveSnapshotCache {
            host_path: "/srv/snap".into(),
            maximum_local_snapshot_age: None,
        };
        assert!(!args(&cache).contains(&"--maximum-local-snapshot-age".to_string()));
        cache.maximum_local_snapshot_age = Some(50_000);
        assert!(args(&cache).ends_with(&["--maximum-local-snapshot-age".into(), "50000".into()]));
    }
}
