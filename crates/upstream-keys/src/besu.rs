//! The options Besu knows, by version: every long option name of two releases (the
//! `besu/options-<version>.txt` files, each saying how it was extracted from
//! hyperledger/besu at that tag), and the options whose existence changed between
//! versions with their range. A besu.toml key is an option's long name without `--`
//! (picocli's TomlConfigurationDefaultProvider), so the operator judges
//! `template.besu.config` by this table before the pod is created, and the lab's Besu
//! model refuses unknown options by it.

use crate::Source;
pub use crate::{V, in_range};

pub const SOURCE: Source = Source {
    repository: "hyperledger/besu",
    paths: "app/src/main/java/org/hyperledger/besu/cli/*, plugins/rocksdb/src/main/* (besu/src/main/java/... before 24.x)",
    tags: "25.12.0, 26.2.0 (every option); the versioned options' first and last tags",
    extracted_by: "git grep of the \"--...\" literals (the lists' headers; tests/fixtures/besu/versioned.txt)",
};

/// Options whose existence changed between versions (since, before), checked first.
pub const VERSIONED: [(&str, Option<V>, Option<V>); 7] = [
    (
        "--Xsnapsync-synchronizer-flat-db-healing-enabled",
        Some((23, 7, 0)),
        Some((25, 6, 0)),
    ),
    ("--Xbonsai-full-flat-db-enabled", Some((24, 5, 2)), None),
    (
        "--Xbonsai-limit-trie-logs-enabled",
        Some((24, 2, 0)),
        Some((25, 7, 0)),
    ),
    ("--bonsai-limit-trie-logs-enabled", Some((24, 6, 0)), None),
    ("--miner-enabled", None, Some((25, 12, 0))),
    ("--miner-coinbase", None, Some((25, 12, 0))),
    (
        "--Xplugin-rocksdb-high-spec-enabled",
        Some((22, 10, 0)),
        None,
    ),
];

/// The release lines whose every option the lists hold: 25.12 and 26.2.
pub const READ_AT: [V; 2] = [(25, 12, 0), (26, 2, 0)];

/// The list of the release the lab plays for `version`: 26.2.0's from 26.2, 25.12.0's
/// before (the lab runs no Besu older than the seed's, whose options it was read for).
pub fn list(version: V) -> &'static str {
    if version >= (26, 2, 0) {
        include_str!("besu/options-26.2.0.txt")
    } else {
        include_str!("besu/options-25.12.0.txt")
    }
}

/// Whether a release line's list was read at `version`'s line (major and minor).
pub fn read_at(version: V) -> bool {
    READ_AT.iter().any(|l| (l.0, l.1) == (version.0, version.1))
}

/// Whether `option` (`--name`) exists at `version`, as the lab's Besu plays it.
pub fn exists(option: &str, version: V) -> bool {
    if let Some(range) = versioned(option) {
        return in_range(range, version);
    }
    list(version)
        .lines()
        .any(|l| !l.starts_with('#') && l.trim() == option)
}

/// The range of an option whose existence changed between versions.
pub fn versioned(option: &str) -> Option<(Option<V>, Option<V>)> {
    VERSIONED
        .iter()
        .find(|(o, _, _)| *o == option)
        .map(|(_, since, before)| (*since, *before))
}
