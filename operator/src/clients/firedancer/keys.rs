//! Firedancer's config keys as a release judges them: upstream-keys' table of every
//! release's default.toml (crates/upstream-keys/src/firedancer.rs), by flavor. fdctl and
//! firedancer refuse a key their release lacks (src/app/platform/fd_config_extract.c L65
//! @v0.1106.40201), so [`judge`] names the key, the release and the fix before the pod is
//! created; [`admission_rules`] refuses at `kubectl apply` a key no release has.

use std::collections::BTreeSet;

use kube::core::Rule;
use upstream_keys::firedancer;

use crate::api::firedancer::{FiredancerFlavor, FiredancerSpec};
use crate::api::version::{Version, Versions, cel_at_least, cel_version};
use crate::clients::config_keys::{Verdict, as_version, similar, tuple};

/// Admission: a Firedancer config key (or `configKey` knob) that no release of its flavor
/// has, nor any table of keys, is refused at `kubectl apply` (a typo, or a key of the other
/// flavor), naming the field and the fix; which release has which key is judged before the
/// pod ([`check`]). A release newer than the table's is left to that judgment too.
pub fn admission_rules() -> Vec<Rule> {
    let f = "self.template.firedancer";
    let version = cel_version(f);
    let list = |rows: &[Row]| {
        let mut names: BTreeSet<String> = BTreeSet::new();
        for (k, _, _) in rows {
            let mut prefix = String::new();
            for word in k.split('.') {
                if !prefix.is_empty() {
                    prefix.push('.');
                }
                prefix.push_str(word);
                names.insert(prefix.clone());
            }
        }
        let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
        format!("[{}]", quoted.join(", "))
    };
    let next = |(a, b, _): firedancer::V| Version::new(a, b + 1, 0);
    let keys = format!(
        "({f}.flavor == 'firedancer' ? {} : {})",
        list(firedancer::FULL_KEYS),
        list(firedancer::KEYS)
    );
    let newer = format!(
        "({f}.flavor == 'firedancer' ? {} : {})",
        cel_at_least(&version, next(firedancer::FULL_NEWEST)),
        cel_at_least(&version, next(firedancer::NEWEST)),
    );
    vec![
        Rule::new(format!(
            "!has({f}) || !has({f}.config) || {newer} || {f}.config.all(k, k in {keys})"
        ))
        .message("no release of this flavor has this config key (src/app/fdctl/config/default.toml for Frankendancer, src/app/firedancer/config/default.toml for full Firedancer, every release valtune knows): correct the key (a typo, or a key of the other flavor) or remove it")
        .field_path(".template.firedancer.config"),
        Rule::new(format!(
            "!has({f}) || !has(self.sweep.knobs) || {newer} || self.sweep.knobs.all(n, !has(n.configKey) || n.configKey in {keys})"
        ))
        .message("no release of this flavor has this configKey (src/app/fdctl/config/default.toml for Frankendancer, src/app/firedancer/config/default.toml for full Firedancer, every release valtune knows): correct the key (a typo, or a key of the other flavor)")
        .field_path(".sweep.knobs"),
    ]
}

pub fn display(f: &FiredancerSpec) -> &'static str {
    match f.flavor {
        FiredancerFlavor::Frankendancer => "Frankendancer",
        FiredancerFlavor::Firedancer => "full Firedancer",
    }
}

type Row = (&'static str, Option<firedancer::V>, Option<firedancer::V>);

/// A Firedancer key: itself in the table, or a table of keys (`tiles.gui`) whose keys an
/// inline table sets.
pub fn judge(flavor: FiredancerFlavor, v: Version, key: &str) -> Verdict {
    let (table, other, newest, file, other_name): (&[Row], &[Row], _, _, _) = match flavor {
        FiredancerFlavor::Frankendancer => (
            firedancer::KEYS,
            firedancer::FULL_KEYS,
            firedancer::NEWEST,
            "src/app/fdctl/config/default.toml",
            "full Firedancer",
        ),
        FiredancerFlavor::Firedancer => (
            firedancer::FULL_KEYS,
            firedancer::KEYS,
            firedancer::FULL_NEWEST,
            "src/app/firedancer/config/default.toml",
            "Frankendancer",
        ),
    };
    let names = |k: &str| k == key || k.starts_with(&format!("{key}."));
    let rows: Vec<&Row> = table.iter().filter(|(k, _, _)| names(k)).collect();
    let at = tuple(v);
    let present =
        |(_, since, before): &&Row| since.is_none_or(|s| at >= s) && before.is_none_or(|b| at < b);
    if rows.iter().any(present) {
        return Verdict::Known;
    }
    if let Some((_, since, before)) = rows.first() {
        let range = Versions {
            since: as_version(*since),
            before: as_version(*before),
        };
        return Verdict::Lacks {
            why: format!(" (it exists {})", range.describe()),
            fix: "remove it, or use a release that has it".into(),
        };
    }
    if at > newest && (at.0, at.1) != (newest.0, newest.1) {
        return Verdict::Unjudged;
    }
    let fix = if other.iter().any(|(k, _, _)| names(k)) {
        format!(
            "it is a {other_name} key: remove it, or set template.firedancer.flavor to the flavor it belongs to"
        )
    } else {
        match similar(key, table.iter().filter(|r| present(r)).map(|(k, _, _)| *k)) {
            Some(s) => format!("did you mean `{s}`? Correct the key or remove it"),
            None => format!(
                "correct the key or remove it (the release's keys are its {file}; valtune's table is crates/upstream-keys/src/firedancer.rs)"
            ),
        }
    };
    Verdict::Lacks {
        why: String::new(),
        fix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_knows_every_key_and_table_of_each_flavor_and_skips_newer_releases() {
        let rules = admission_rules();
        assert_eq!(rules.len(), 2);
        let cel = &rules[0].rule;
        for known in [
            "'tiles.gui'",
            "'tiles.gui.enabled'",
            "'tiles'",
            "'tiles.rserve.enabled'",
        ] {
            assert!(cel.contains(known), "{known}");
        }
        // Full Firedancer's list first, Frankendancer's second.
        let (full, franken) = cel.split_once(" : [").unwrap();
        assert!(full.contains("'tiles.rserve.enabled'"));
        assert!(!franken.contains("'tiles.rserve.enabled'"));
        assert!(franken.contains("'development.bench.disable_blockstore_from_slot'"));
        // Releases after the tables' newest lines (26.8, 0.1106) are not judged here.
        let re = |v| regex::Regex::new(&crate::api::version::at_least_regex(v)).unwrap();
        assert!(cel.contains(
            &crate::api::version::at_least_regex(Version::new(26, 9, 0)).replace('\\', "\\\\")
        ));
        assert!(re(Version::new(0, 1107, 0)).is_match("v0.1107.40300"));
        assert!(!re(Version::new(0, 1107, 0)).is_match("v0.1106.40201"));
    }
}
