//! Besu's options as a version judges them: upstream-keys' lists of every option of 25.12
//! and 26.2 and the options whose existence changed (crates/upstream-keys/src/besu.rs). A
//! besu.toml key is an option's long name without `--` (picocli's
//! TomlConfigurationDefaultProvider), and Besu stops at an unknown one.

use upstream_keys::besu;

use crate::api::version::{Version, Versions};
use crate::clients::config_keys::{Verdict, as_version, similar, tuple};

/// A besu.toml key: an option's long name without `--`, under any table.
pub fn judge(v: Version, key: &str) -> Verdict {
    let name = key.rsplit('.').next().unwrap_or(key);
    let option = format!("--{name}");
    let at = tuple(v);
    if let Some(range) = besu::versioned(&option) {
        if besu::in_range(range, at) {
            return Verdict::Known;
        }
        let range = Versions {
            since: as_version(range.0),
            before: as_version(range.1),
        };
        return Verdict::Lacks {
            why: format!(" (the option {option} exists {})", range.describe()),
            fix: "remove it, or use a version that has it".into(),
        };
    }
    if !besu::read_at(at) {
        return Verdict::Unjudged;
    }
    let list = besu::list(at);
    if list
        .lines()
        .any(|l| !l.starts_with('#') && l.trim() == option)
    {
        return Verdict::Known;
    }
    let options = list
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.trim().strip_prefix("--"));
    let fix = match similar(name, options) {
        Some(s) => format!("did you mean `{s}`? Correct the key or remove it"),
        None => "a besu.toml key is the long name of an option without -- (besu --help lists them): correct the key or remove it".into(),
    };
    Verdict::Lacks {
        why: format!(" (no option {option})"),
        fix,
    }
}
