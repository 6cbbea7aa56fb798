//! A generic config key (`template.<client>.config`, where `configKey` knobs land too)
//! judged by the key table of the client's version before the pod is created. The API
//! server cannot judge a key by version cheaply, so [`check`] runs where a trial renders
//! its pod (`clients::render`), and a key the version lacks ends the trial Invalid
//! naming the key, the version and the fix, instead of a pod whose client exits at start.
//!
//! Each client gives its table (`ValidatorClient::config_keys`: clients/<client>/keys.rs)
//! over upstream-keys' (crates/upstream-keys), which the lab's models read too:
//! Firedancer's config keys by release (generated from every release's default.toml),
//! Besu's options and nodeos' options, each extracted from upstream at its tags. A version outside what a table was read at is not
//! judged: a key unknown to the table may exist there.

use std::collections::BTreeMap;

use crate::api::template::ValidatorTemplate;
use crate::api::version::Version;

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
pub enum Verdict {
    Known,
    /// Unknown at this version: what the table knows of it elsewhere, and the fix.
    Lacks {
        why: String,
        fix: String,
    },
    /// The table was not read for this version.
    Unjudged,
}

/// A client's config file and long options, as its version's key table judges them
/// (`ValidatorClient::config_keys`).
pub struct ConfigKeys<'a> {
    /// The client as the message names it (its flavor, where it has one).
    pub client: &'static str,
    /// Where the keys are written.
    pub field: &'static str,
    pub config: &'a BTreeMap<String, String>,
    /// Whether `extraArgs`' long options are the same names, judged by the same table.
    pub args: bool,
    /// The table's verdict on a key (an option's name without `--`) at a version.
    pub judge: Judge<'a>,
}

/// A table's verdict on a key at a version.
pub type Judge<'a> = Box<dyn Fn(Version, &str) -> Verdict + 'a>;

/// Every config key of the template, and the long options in `extraArgs` where the client
/// takes the same names, judged by the client version's table.
pub fn check(t: &ValidatorTemplate, version: Option<Version>) -> Result<(), Box<KeyError>> {
    let Some(v) = version else {
        // A client whose version is unknown has its keys judged by nothing (the pod's
        // client still says; Firedancer's version is required at admission).
        return Ok(());
    };
    let Some(keys) = super::client_for(t).ok().and_then(|c| c.config_keys(t)) else {
        return Ok(());
    };
    for key in keys.config.keys() {
        if let Verdict::Lacks { why, fix } = (keys.judge)(v, key) {
            return Err(Box::new(KeyError {
                field: keys.field,
                what: "config key",
                client: keys.client,
                version: v,
                key: key.clone(),
                why,
                fix,
            }));
        }
    }
    if !keys.args {
        return Ok(());
    }
    // A word that does not start with `--` is a value or a short option, which the
    // tables do not hold.
    for arg in &t.extra_args {
        let Some(name) = arg.strip_prefix("--").and_then(|a| a.split('=').next()) else {
            continue;
        };
        if let Verdict::Lacks { why, fix } = (keys.judge)(v, name) {
            return Err(Box::new(KeyError {
                field: "template.extraArgs (or a sweep.knobs arg)",
                what: "option",
                client: keys.client,
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
    Ok(())
}

/// A version as upstream-keys writes it.
pub fn tuple(v: Version) -> upstream_keys::V {
    (v.major, v.minor, v.patch)
}

/// An upstream-keys version as valtune's.
pub fn as_version(v: Option<upstream_keys::V>) -> Option<Version> {
    v.map(|(a, b, c)| Version::new(a, b, c))
}

/// The candidate nearest to `key` when it is near enough to be a typo: at most two edits
/// away.
pub fn similar<'a>(key: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
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
