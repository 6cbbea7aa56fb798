//! A generic config key (`template.<client>.config`, where `configKey` knobs land too)
//! judged by the key table of the client's version before the pod is created. The API
//! server cannot judge a key by version cheaply, so [`check`] runs where a trial renders
//! its pod (`clients::render`), and a key the version lacks ends the trial Invalid
//! naming the key, the version and the fix, instead of a pod whose client exits at start.
//!
//! The tables are upstream-keys' (crates/upstream-keys), which the lab's models read too:
//! Firedancer's config keys by release (generated from every release's default.toml),
//! Besu's options and nodeos' options, each extracted from upstream at its tags. A version outside what a table was read at is not
//! judged: a key unknown to the table may exist there.

use std::collections::BTreeSet;

use kube::core::Rule;

use crate::api::firedancer::{FiredancerFlavor, FiredancerSpec};
use crate::api::template::ValidatorTemplate;
use crate::api::version::{Version, Versions, cel_at_least, cel_version};

use upstream_keys::besu;
use upstream_keys::firedancer;
use upstream_keys::nodeos;

/// A config key the client's version does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {client} {version} has no {what} `{key}`{why}, and would exit at start: {fix}")]
pub struct KeyError {
    /// Where the key was written (the template's config map, where configKey knobs land).
    pub field: &'static str,
    /// "config key", or "option" for an argument.
    pub what: &'static str,
    pub client: &'static str,
    pub version: Version,
    pub key: String,
    /// What the table knows of the key elsewhere (" (it exists from 1.1.0)"), or "".
    pub why: String,
    pub fix: String,
}

/// What a table says of a key at a version.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Known,
    /// Unknown at this version: what the table knows of it elsewhere, and the fix.
    Lacks {
        why: String,
        fix: String,
    },
    /// The table was not read for this version.
    Unjudged,
}

/// Every config key of the template, and Besu's and nodeos' long options in `extraArgs`,
/// judged by the client version's table.
pub fn check(t: &ValidatorTemplate, version: Option<Version>) -> Result<(), Box<KeyError>> {
    let Some(v) = version else {
        // Firedancer's version is required at admission; Besu's and nodeos' keys are
        // then judged by nothing (the pod's client still says).
        return Ok(());
    };
    let c = &t.client;
    let (field, client, config) = if let Some(f) = &c.firedancer {
        (
            "template.firedancer.config (or a sweep.knobs configKey)",
            display(f),
            &f.config,
        )
    } else if let Some(b) = &c.besu {
        (
            "template.besu.config (or a sweep.knobs configKey)",
            "Besu",
            &b.config,
        )
    } else if let Some(n) = &c.nodeos {
        (
            "template.nodeos.config (or a sweep.knobs configKey)",
            "nodeos",
            &n.config,
        )
    } else {
        return Ok(());
    };
    let judge = |key: &str| match &c.firedancer {
        Some(f) => firedancer_key(f.flavor, v, key),
        None if c.besu.is_some() => besu_key(v, key),
        None => nodeos_key(v, key),
    };
    for key in config.keys() {
        if let Verdict::Lacks { why, fix } = judge(key) {
            return Err(Box::new(KeyError {
                field,
                what: "config key",
                client,
                version: v,
                key: key.clone(),
                why,
                fix,
            }));
        }
    }
    // Besu's and nodeos' long options on the command line are the same names (fdctl takes
    // none: admission refuses Firedancer's extraArgs). A word that does not start with
    // `--` is a value or a short option, which the tables do not hold.
    if c.firedancer.is_none() {
        for arg in &t.extra_args {
            let Some(name) = arg.strip_prefix("--").and_then(|a| a.split('=').next()) else {
                continue;
            };
            if let Verdict::Lacks { why, fix } = judge(name) {
                return Err(Box::new(KeyError {
                    field: "template.extraArgs (or a sweep.knobs arg)",
                    what: "option",
                    client,
                    version: v,
                    key: format!("--{name}"),
                    why: if why.contains("no option") {
                        String::new()
                    } else {
                        why
                    },
                    fix: fix.replace("Correct the key", "Correct the option"),
                }));
            }
        }
    }
    Ok(())
}

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

fn display(f: &FiredancerSpec) -> &'static str {
    match f.flavor {
        FiredancerFlavor::Frankendancer => "Frankendancer",
        FiredancerFlavor::Firedancer => "full Firedancer",
    }
}

fn tuple(v: Version) -> (u32, u32, u32) {
    (v.major, v.minor, v.patch)
}

fn as_version(v: Option<(u32, u32, u32)>) -> Option<Version> {
    v.map(|(a, b, c)| Version::new(a, b, c))
}

type Row = (&'static str, Option<firedancer::V>, Option<firedancer::V>);

/// A Firedancer key: itself in the table, or a table of keys (`tiles.gui`) whose keys an
/// inline table sets.
fn firedancer_key(flavor: FiredancerFlavor, v: Version, key: &str) -> Verdict {
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

/// A besu.toml key: an option's long name without `--`, under any table.
fn besu_key(v: Version, key: &str) -> Verdict {
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

/// A config.ini key: an option of the leap or spring release line the lists were read at.
fn nodeos_key(v: Version, key: &str) -> Verdict {
    let line = |(a, b, _): (u32, u32, u32)| (v.major, v.minor) == (a, b);
    let (own, other, other_name) = if line(nodeos::LEAP_READ_AT) {
        (nodeos::LEAP_ONLY, nodeos::SPRING_ONLY, "spring 1.x")
    } else if line(nodeos::SPRING_READ_AT) {
        (nodeos::SPRING_ONLY, nodeos::LEAP_ONLY, "leap 5.x")
    } else {
        return Verdict::Unjudged;
    };
    if nodeos::COMMON.contains(&key) || own.contains(&key) {
        return Verdict::Known;
    }
    let fix = if other.contains(&key) {
        format!("it is an option of {other_name}: remove it, or use an image of that line")
    } else {
        match similar(key, nodeos::COMMON.iter().chain(own).copied()) {
            Some(s) => format!("did you mean `{s}`? Correct the key or remove it"),
            None => "a config.ini key is a nodeos option name (nodeos --help lists them): correct the key or remove it".into(),
        }
    };
    Verdict::Lacks {
        why: String::new(),
        fix,
    }
}

/// The candidate nearest to `key` when it is near enough to be a typo: at most two edits
/// away.
fn similar<'a>(key: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .map(|c| (distance(key, c), c))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(yaml: &str) -> ValidatorTemplate {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn fd(flavor: &str, image: &str, key: &str) -> Result<(), Box<KeyError>> {
        let t = template(&format!(
            "firedancer: {{image: '{image}', flavor: {flavor}, config: {{'{key}': 'true'}}}}\n"
        ));
        let v = Version::from_image(image);
        check(&t, v)
    }

    /// (flavor, image, key, the error's text or None for accepted)
    #[test]
    fn firedancer_keys_are_judged_by_their_release() {
        let cases: [(&str, &str, &str, Option<&str>); 9] = [
            (
                "frankendancer",
                "fd:v0.1106.40201",
                "rpc.transaction_history",
                None,
            ),
            ("frankendancer", "fd:v0.1106.40201", "tiles.gui", None),
            (
                "frankendancer",
                "fd:v0.1106.40201",
                "rpc.transaction_histroy",
                Some(
                    "template.firedancer.config (or a sweep.knobs configKey): Frankendancer 0.1106.40201 has no config key `rpc.transaction_histroy`, and would exit at start: did you mean `rpc.transaction_history`?",
                ),
            ),
            (
                "firedancer",
                "fd:v1.0.1",
                "tiles.rserve.enabled",
                Some(
                    "full Firedancer 1.0.1 has no config key `tiles.rserve.enabled` (it exists from 1.1.0)",
                ),
            ),
            ("firedancer", "fd:v1.1.4", "tiles.rserve.enabled", None),
            (
                "firedancer",
                "fd:v1.1.4",
                "tiles.repair.repair_serve_listen_port",
                Some("(it exists before 1.1.0)"),
            ),
            (
                "frankendancer",
                "fd:v0.1106.40201",
                "tiles.rserve.enabled",
                Some("it is a full Firedancer key"),
            ),
            // A release newer than the table: a key it does not know may be new there.
            ("firedancer", "fd:v26.9.0", "tiles.brand_new.enabled", None),
            (
                "firedancer",
                "fd:v26.8.1",
                "tiles.brand_new.enabled",
                Some("correct the key or remove it"),
            ),
        ];
        for (flavor, image, key, want) in cases {
            let got = fd(flavor, image, key);
            match want {
                None => assert_eq!(got, Ok(()), "{image} {key}"),
                Some(text) => {
                    let msg = got.expect_err(key).to_string();
                    assert!(msg.contains(text), "{image} {key}: {msg}");
                }
            }
        }
    }

    #[test]
    fn besu_keys_are_options_of_the_version() {
        let besu = |image: &str, key: &str| {
            let t = template(&format!(
                "besu: {{image: '{image}', config: {{'{key}': 'true'}}}}\n"
            ));
            check(&t, Version::from_image(image))
        };
        assert_eq!(besu("hyperledger/besu:25.12.0", "rpc-http-enabled"), Ok(()));
        assert_eq!(
            besu("hyperledger/besu:25.12.0", "Xbonsai-full-flat-db-enabled"),
            Ok(())
        );
        let err = besu("hyperledger/besu:25.12.0", "rpc-http-enabld").unwrap_err();
        assert_eq!(
            err.to_string(),
            "template.besu.config (or a sweep.knobs configKey): Besu 25.12.0 has no config key `rpc-http-enabld` (no option --rpc-http-enabld), and would exit at start: did you mean `rpc-http-enabled`? Correct the key or remove it"
        );
        let err = besu(
            "hyperledger/besu:25.12.0",
            "Xsnapsync-synchronizer-flat-db-healing-enabled",
        )
        .unwrap_err();
        assert!(
            err.why.contains("exists from 23.7.0 and before 25.6.0"),
            "{err}"
        );
        assert_eq!(
            besu(
                "hyperledger/besu:25.5.0",
                "Xsnapsync-synchronizer-flat-db-healing-enabled"
            ),
            Ok(())
        );
        // 24.x: only the options whose range is known are judged.
        assert_eq!(besu("hyperledger/besu:24.12.2", "anything-at-all"), Ok(()));
        assert!(besu("hyperledger/besu:24.12.2", "miner-enabled").is_ok());
        assert!(besu("hyperledger/besu:26.2.0", "miner-enabled").is_err());
    }

    #[test]
    fn nodeos_keys_are_options_of_the_release_line() {
        let nodeos = |image: &str, key: &str| {
            let t = template(&format!(
                "nodeos: {{image: '{image}', config: {{'{key}': '1'}}}}\n"
            ));
            check(&t, Version::from_image(image))
        };
        assert_eq!(
            nodeos("waxteam/waxnode:v5.0.3wax02", "max-transaction-time"),
            Ok(())
        );
        assert_eq!(
            nodeos("waxteam/waxnode:v5.0.3wax02", "producer-threads"),
            Ok(())
        );
        let err = nodeos("waxteam/waxnode:v5.0.3wax02", "vote-threads").unwrap_err();
        assert!(err.fix.contains("an option of spring 1.x"), "{err}");
        assert_eq!(nodeos("antelope/spring:v1.2.2", "vote-threads"), Ok(()));
        let err = nodeos("antelope/spring:v1.2.2", "max-transaction-tme").unwrap_err();
        assert!(
            err.fix.contains("did you mean `max-transaction-time`"),
            "{err}"
        );
        // A line the lists were not read at is not judged.
        assert_eq!(nodeos("antelope/spring:v1.1.5", "vote-threads-x"), Ok(()));
    }

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

    #[test]
    fn long_options_in_extra_args_are_judged_by_the_same_tables() {
        let t = |yaml: &str| -> ValidatorTemplate { template(yaml) };
        let besu = t(
            "besu: {image: 'hyperledger/besu:25.12.0'}\nextraArgs: ['--rpc-http-enabled', '--rpc-http-port=8545', '8546', '-h']\n",
        );
        assert_eq!(
            check(&besu, Version::from_image("hyperledger/besu:25.12.0")),
            Ok(())
        );
        let besu =
            t("besu: {image: 'hyperledger/besu:25.12.0'}\nextraArgs: ['--rpc-http-enabld=true']\n");
        let err = check(&besu, Version::from_image("hyperledger/besu:25.12.0")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "template.extraArgs (or a sweep.knobs arg): Besu 25.12.0 has no option `--rpc-http-enabld`, and would exit at start: did you mean `rpc-http-enabled`? Correct the option or remove it"
        );
        let nodeos =
            t("nodeos: {image: 'waxteam/waxnode:v5.0.3wax02'}\nextraArgs: ['--vote-threads=4']\n");
        let err = check(&nodeos, Version::new(5, 0, 3).into()).unwrap_err();
        assert!(err.to_string().contains("nodeos 5.0.3 has no option `--vote-threads`, and would exit at start: it is an option of spring 1.x"), "{err}");
    }

    #[test]
    fn without_a_version_nothing_is_judged() {
        let t = template("besu: {image: besu:latest, config: {nonsense: '1'}}\n");
        assert_eq!(check(&t, None), Ok(()));
    }

    #[test]
    fn typos_are_near_and_other_words_are_not() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(
            similar("rpc.port_", ["rpc.port", "rpc.full_api"].into_iter()),
            Some("rpc.port")
        );
        assert_eq!(similar("layout.foo", ["rpc.port"].into_iter()), None);
    }
}
