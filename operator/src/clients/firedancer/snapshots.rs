//! Snapshot reuse (`template.firedancer.snapshotCache`): a follower's snapshot archives
//! kept in a directory of the node that outlives the trial, one per flavor and cluster,
//! so the next trial of that cluster on the node can start from them.
//!
//! Frankendancer (firedancer-io/firedancer `src/app/fdctl/config/default.toml` and
//! `src/app/fdctl/commands/run_agave.c` @v0.1106.40201): `[snapshots] path` becomes its
//! Agave's `--snapshots` and `incremental_path` its `--incremental-snapshot-archive-path`;
//! there is no key for `--maximum-local-snapshot-age`, so Agave's 2,500 slots decide
//! (validator/src/bootstrap.rs `should_use_local_snapshot`, docs/clients/agave.md).
//! `--snapshots` also holds Agave's bank snapshots, in `<path>/snapshots`
//! (validator/src/commands/run/execute.rs): one a trial left there, marked loadable for
//! fastboot, would be preferred to the archives when not older
//! (ledger/src/bank_forks_utils.rs, `UseSnapshotArchivesAtStartup::WhenNewest`), and
//! its account storages were on that trial's deleted accounts volume, so the start script
//! removes that subdirectory and only archives are reused.
//!
//! Full Firedancer (`src/app/firedancer/config/default.toml` @v1.0.1 and v1.1.4): `[paths]
//! snapshots`; the snapct tile uses the local full snapshot when its effective slot (a
//! local incremental no more than `max_local_incremental_age` behind the cluster, else a
//! peer's incremental on that full) is no more than `max_local_full_effective_age`
//! behind (`src/discof/restore/fd_snapct_tile.c` COLLECTING_PEERS). It makes no
//! snapshots of its own and keeps `max_full_snapshots_to_keep` (1) and
//! `max_incremental_snapshots_to_keep` (1) of what it downloaded. Its `snapshots`
//! configure stage accepts only a directory owned by the user and group with mode 0700
//! (`src/app/shared/commands/configure/snapshots.c`, `check_dir`; it has no undo, so
//! another owner or mode is fatal), which the start script makes the node's directory.

use k8s_openapi::api::core::v1::{HostPathVolumeSource, Volume, VolumeMount};

use super::config::cluster;
use super::layout::full;
use crate::api::firedancer::{FiredancerSnapshotCache, FiredancerSpec, FiredancerWorkload};
use crate::clients::parts;

/// Where the pod mounts the node's directory.
pub const MOUNT: &str = "/mnt/snapshot-cache";
pub const VOLUME: &str = "snapshot-cache";

/// The genesis hash a follower checks (`[consensus] expected_genesis_hash`).
pub fn genesis_hash(spec: &FiredancerSpec) -> Option<String> {
    spec.expected_genesis_hash
        .clone()
        .or_else(|| Some(cluster(spec.cluster).2.to_string()))
        .filter(|h| !h.is_empty())
}

/// The cache of a follower, if it has one.
pub fn cache(spec: &FiredancerSpec) -> Option<&FiredancerSnapshotCache> {
    (spec.workload == FiredancerWorkload::Follow)
        .then_some(spec.snapshot_cache.as_ref())
        .flatten()
}

/// The node's directory: `<hostPath>/<frankendancer|firedancer>/<genesis hash>`.
pub fn host_dir(spec: &FiredancerSpec, cache: &FiredancerSnapshotCache) -> Option<String> {
    let flavor = if full(spec) {
        "firedancer"
    } else {
        "frankendancer"
    };
    Some(format!(
        "{}/{flavor}/{}",
        cache.host_path.trim_end_matches('/'),
        genesis_hash(spec)?
    ))
}

/// The hostPath volume and its mount, for a follower with a snapshot cache (admission
/// refuses a cache without a genesis hash: never a directory shared by clusters).
pub fn volume(spec: &FiredancerSpec) -> Option<(Volume, VolumeMount)> {
    let path = host_dir(spec, cache(spec)?)?;
    let volume = Volume {
        name: VOLUME.into(),
        host_path: Some(HostPathVolumeSource {
            path,
            type_: Some("DirectoryOrCreate".into()),
        }),
        ..Default::default()
    };
    Some((volume, parts::mount(VOLUME, MOUNT, false)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> FiredancerSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn each_flavor_and_cluster_has_a_directory_of_its_own() {
        let path = |s: &FiredancerSpec| volume(s).unwrap().0.host_path.unwrap().path;
        let fd = spec("{image: x, cluster: testnet, snapshotCache: {hostPath: /srv/snap/}}");
        assert_eq!(
            path(&fd),
            "/srv/snap/frankendancer/4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY"
        );
        let full = spec("{image: x, flavor: firedancer, snapshotCache: {hostPath: /srv/snap}}");
        assert_eq!(
            path(&full),
            "/srv/snap/firedancer/5eykt4UsFv8P8NJdTREpY1vzqKqZKvdpKuc147dw2N9d"
        );
        let custom = spec("{image: x, cluster: custom, snapshotCache: {hostPath: /srv/snap}}");
        assert!(volume(&custom).is_none(), "no genesis hash, no directory");
        let bench = spec("{image: x, workload: bench, snapshotCache: {hostPath: /srv/snap}}");
        assert!(volume(&bench).is_none());
    }

    fn rendered(yaml: &str, v: crate::api::version::Version) -> String {
        let s = spec(yaml);
        super::super::config::config(&super::super::config::Inputs {
            spec: &s,
            tuning: &Default::default(),
            version: Some(v),
            volumes: vec![(
                crate::api::template::VolumeRole::Ledger,
                "/mnt/ledger".into(),
            )],
            datapoints_port: None,
            validator: None,
        })
        .unwrap()
        .render("")
    }

    /// Frankendancer's Agave keeps full and incremental archives in the node's directory;
    /// full Firedancer reads and keeps its snapshots there, with the ages asked for.
    #[test]
    fn the_config_points_each_flavor_at_the_nodes_directory() {
        use crate::api::version::Version;
        let fd = rendered(
            "{image: x, snapshotCache: {hostPath: /srv/snap}}",
            Version::new(0, 1106, 40201),
        );
        assert!(
            fd.contains("[snapshots]\nincremental_path = \"/mnt/snapshot-cache\"\npath = \"/mnt/snapshot-cache\"\n"),
            "{fd}"
        );
        let full = rendered(
            "{image: x, flavor: firedancer, snapshotCache: {hostPath: /srv/snap, maxLocalFullEffectiveAge: 100000, maxLocalIncrementalAge: 90000}}",
            Version::new(1, 1, 4),
        );
        for part in [
            "snapshots = \"/mnt/snapshot-cache\"\n",
            "[snapshots.sources]\nmax_local_full_effective_age = 100000\nmax_local_incremental_age = 90000\n",
        ] {
            assert!(full.contains(part), "{part}: {full}");
        }
        // Without a cache: the trial's own volume, and firedancer's default ages.
        let plain = rendered("{image: x, flavor: firedancer}", Version::new(1, 1, 4));
        assert!(
            plain.contains("snapshots = \"/mnt/ledger/snapshots\""),
            "{plain}"
        );
        assert!(!plain.contains("max_local"), "{plain}");
    }

    /// The start script prepares the node's directory as each flavor needs it, under
    /// `FD_ROOT` (the lab's copy of the container's files).
    #[test]
    fn the_start_script_prepares_the_directory() {
        let script = |full| super::super::start::cache_script(full, MOUNT);
        assert!(script(true).contains("chmod 700 \"$root/mnt/snapshot-cache\""));
        assert!(
            script(true)
                .contains("chown \"$user:$(id -g \"$user\")\" \"$root/mnt/snapshot-cache\"")
        );
        assert!(script(false).contains("rm -rf \"$root/mnt/snapshot-cache/snapshots\""));
        assert!(!script(false).contains("chmod"));
    }
}
