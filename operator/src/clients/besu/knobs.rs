//! Besu's knob table: what a Besu trial can sweep and how each value reaches the process,
//! and the settings of `template.besu` that exist only in some Besu versions, with the
//! flag each version takes (hyperledger/besu, the paths and tags cited per entry).

use kube::core::Rule;

use crate::api::sweep::Setting;
use crate::api::version::{Version, Versions, cel_known, cel_version};
use crate::clients::knobs::{Dim, Generic, How, Knob, KnobTable, Reach, Refusal};

/// `BESU_USING_JEMALLOC=false` turns the start script's jemalloc preload off from 24.12.0
/// (c15afb915b, #7424); before, the script always preloads jemalloc when it can.
pub const ALLOCATOR_SINCE: Version = Version::new(24, 12, 0);

pub static BESU: KnobTable = KnobTable {
    client: "besu",
    display: "Besu",
    knobs: &[
        Knob {
            dim: Dim::Memory,
            reach: &[Reach::always(How::Resource("memory"))],
            source: "",
        },
        Knob {
            dim: Dim::Cpu,
            reach: &[Reach::always(How::Resource("cpu"))],
            source: "",
        },
        Knob {
            dim: Dim::Setting(Setting::Allocator),
            reach: &[Reach::within(
                Versions::since(ALLOCATOR_SINCE),
                How::Client(
                    "env BESU_USING_JEMALLOC=false, and LD_PRELOAD of the allocator's library checked before Besu starts",
                ),
            )],
            source: "app/src/main/scripts/unixStartScript.txt @25.12.0 L199-212 (jemalloc preloaded unless BESU_USING_JEMALLOC is false; the switch first in 24.12.0)",
        },
        Knob {
            dim: Dim::Setting(Setting::MallocArenaMax),
            reach: &[Reach::always(How::Env("MALLOC_ARENA_MAX"))],
            source: "glibc malloc's arena limit (mallopt M_ARENA_MAX); the start script sets 2 itself only when jemalloc is missing (unixStartScript.txt @25.12.0 L208)",
        },
        Knob {
            dim: Dim::Setting(Setting::Heap),
            reach: &[Reach::always(How::Client("-Xmx in env BESU_OPTS"))],
            source: "unixStartScript.txt @25.12.0 L197: BESU_OPTS follows DEFAULT_JVM_OPTS, so its -Xmx wins",
        },
    ],
    refusals: &[
        Refusal {
            dim: Dim::ProgramCacheEntries,
            why: "Besu has no program cache to size (sweep a client setting with sweep.knobs instead)",
        },
        Refusal {
            dim: Dim::Hugepages1Gi,
            why: "Besu does not allocate hugepages, so sweeping them measures nothing",
        },
    ],
    generic: Generic {
        env: true,
        arg: true,
        config_key: true,
        no_config_key: "",
    },
};

/// A setting of `template.besu` that only some Besu versions have, and the flag each takes.
#[derive(Debug, Clone, Copy)]
pub struct VersionedSetting {
    /// The field under `template.besu`.
    pub field: &'static str,
    /// What it is, in messages.
    pub what: &'static str,
    /// CEL on the Besu spec (`b`): whether the experiment uses it.
    pub used: &'static str,
    /// The versions that have it; the first reach holding the version gives the flag.
    pub reach: &'static [Reach],
    /// Whether the flag differs by version (then the version must be known).
    pub needs_version: bool,
    pub source: &'static str,
}

impl VersionedSetting {
    /// How a process of `version` takes it: None when the version lacks it; the newest
    /// flag when the version is unknown (admission refuses that where it matters).
    pub fn reach(&self, version: Option<Version>) -> Option<&'static Reach> {
        match version {
            Some(v) => self.reach.iter().find(|r| r.versions.contains(v)),
            None => self.reach.last(),
        }
    }
}

const V23_7_0: Version = Version::new(23, 7, 0);
const V24_5_2: Version = Version::new(24, 5, 2);

/// Bonsai's full flat database ("flat DB healing" in seed 004).
pub static FLAT_DB: VersionedSetting = VersionedSetting {
    field: "flatDbHealing",
    what: "flat-db healing flag",
    used: "has(b.flatDbHealing)",
    reach: &[
        Reach::within(
            Versions {
                since: Some(V23_7_0),
                before: Some(V24_5_2),
            },
            How::Arg("--Xsnapsync-synchronizer-flat-db-healing-enabled"),
        ),
        Reach::within(
            Versions::since(V24_5_2),
            How::Arg("--Xbonsai-full-flat-db-enabled"),
        ),
    ],
    needs_version: true,
    source: "besu/.../options/unstable/SynchronizerOptions.java @23.7.0 (#5319, default false); .../options/storage/DiffBasedSubStorageOptions.java @24.5.2 (#6894, default true, the old name an alias); the alias removed in 25.6.0 (#8416): PathBasedExtraStorageOptions.java @25.12.0 L93-98",
};

/// The RocksDB high-spec block cache.
pub static HIGH_SPEC: VersionedSetting = VersionedSetting {
    field: "rocksdbHighSpec",
    what: "RocksDB high-spec flag",
    used: "b.rocksdbHighSpec",
    reach: &[Reach::within(
        Versions::since(Version::new(22, 10, 0)),
        How::Arg("--Xplugin-rocksdb-high-spec-enabled"),
    )],
    needs_version: false,
    source: "plugins/rocksdb/.../configuration/RocksDBCLIOptions.java (present @22.10.0, unchanged @25.12.0 L51, 96-103 and @26.2.0)",
};

/// Networks newer than some Besu versions (config/.../NetworkDefinition.java @25.12.0;
/// NetworkName.java before).
pub static HOODI: VersionedSetting = VersionedSetting {
    field: "network",
    what: "hoodi network",
    used: "b.network == 'hoodi'",
    reach: &[Reach::within(
        Versions::since(Version::new(25, 3, 0)),
        How::Arg("--network"),
    )],
    needs_version: false,
    source: "NetworkName.java: HOODI first in 25.3.0",
};

pub static EPHEMERY: VersionedSetting = VersionedSetting {
    field: "network",
    what: "ephemery network",
    used: "b.network == 'ephemery'",
    reach: &[Reach::within(
        Versions::since(Version::new(24, 10, 0)),
        How::Arg("--network"),
    )],
    needs_version: false,
    source: "NetworkName.java: EPHEMERY first in 24.10.0",
};

pub static VERSIONED: [&VersionedSetting; 4] = [&FLAT_DB, &HIGH_SPEC, &HOODI, &EPHEMERY];

/// The admission rules of the versioned settings, on the experiment spec.
pub fn versioned_rules() -> Vec<Rule> {
    let b = "self.template.besu";
    let version = cel_version(b);
    let known = cel_known(&version);
    let mut rules = Vec::new();
    for s in VERSIONED {
        let used = s.used.replace("b.", &format!("{b}."));
        let exists: Vec<String> = s
            .reach
            .iter()
            .map(|r| format!("({})", r.versions.cel_contains(&version)))
            .collect();
        let ranges: Vec<String> = s.reach.iter().map(|r| r.versions.describe()).collect();
        let path = format!(".template.besu.{}", s.field);
        if s.needs_version {
            let ways: Vec<String> = s
                .reach
                .iter()
                .map(|r| format!("{} {}", r.how.describe(), r.versions.describe()))
                .collect();
            rules.push(
                Rule::new(format!("!has({b}) || !({used}) || {known}"))
                    .message(
                        format!(
                            "the {} Besu takes depends on its version ({}), which is not known: set template.besu.version or use an image tagged :X.Y.Z",
                            s.what,
                            ways.join("; ")
                        )
                        .as_str(),
                    )
                    .field_path(path.clone()),
            );
        }
        rules.push(
            Rule::new(format!(
                "!has({b}) || !({used}) || !({known}) || {}",
                exists.join(" || ")
            ))
            .message(
                format!(
                    "this Besu version has no {}: it exists {}; remove template.besu.{} or use another version",
                    s.what,
                    ranges.join(" and "),
                    s.field
                )
                .as_str(),
            )
            .field_path(path),
        );
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_db_healing_takes_the_flag_of_its_version() {
        let flag = |v| match FLAT_DB.reach(Some(v)).map(|r| r.how) {
            Some(How::Arg(f)) => Some(f),
            _ => None,
        };
        assert_eq!(flag(Version::new(23, 4, 4)), None);
        assert_eq!(
            flag(Version::new(24, 1, 0)),
            Some("--Xsnapsync-synchronizer-flat-db-healing-enabled")
        );
        assert_eq!(
            flag(Version::new(24, 5, 2)),
            Some("--Xbonsai-full-flat-db-enabled")
        );
        // 25.6.0 removed the old name: passing it stops Besu.
        assert_eq!(
            flag(Version::new(25, 12, 0)),
            Some("--Xbonsai-full-flat-db-enabled")
        );
    }

    #[test]
    fn the_rules_name_the_field_and_the_versions() {
        let text = serde_json::to_string(&versioned_rules()).unwrap();
        assert!(text.contains("this Besu version has no flat-db healing flag: it exists from 23.7.0 and before 24.5.2 and from 24.5.2"));
        assert!(text.contains("set template.besu.version"));
        assert!(text.contains("this Besu version has no hoodi network: it exists from 25.3.0"));
        assert!(text.contains(".template.besu.rocksdbHighSpec"));
    }
}
