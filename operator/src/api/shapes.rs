//! The shapes of free text that becomes a flag, a URL, an address or an image: CEL rules
//! the API server checks at `kubectl apply`, each naming the field (the rule's place) and
//! the fix. Their regular expressions are RE2 (CEL's `matches`), and the unit tests below
//! run them with Rust's `regex` on the same examples.
//!
//! The API server's CEL for CRD validation at Kubernetes 1.34 (whose compatibility version
//! is 1.33) has the URL, regex, list, quantity, strings (v2), IP and CIDR, and format
//! libraries (kubernetes apiserver pkg/cel/environment/base.go); these rules use `isURL`,
//! `url`, `matches`, `find`, `split`, `isIP`, `ip`, `isQuantity` and `quantity`, all there
//! from 1.30.

use kube::core::Rule;

/// One RFC 1123 label: letters, digits and inner hyphens, at most 63.
const LABEL: &str = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";

/// A host (a hostname, an IPv4 address, or an IPv6 address in brackets), a colon and a
/// port, followed by `suffix` (a regular expression, "" for none).
pub fn host_port_regex(suffix: &str) -> String {
    format!(r"^({LABEL}(\.{LABEL})*|\[[0-9A-Fa-f:.]+\]):[0-9]{{1,5}}{suffix}$")
}

/// Quotes a regular expression (or any text) as a CEL string literal.
pub fn cel_str(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// CEL: whether the string `x` is host:port with a port of 1 to 65535, an all-digit host
/// a real IPv4 address and a bracketed host an IPv6 one; `suffix` (a regular expression)
/// may follow the port.
pub fn cel_host_port(x: &str, suffix: &str) -> String {
    let port = format!(
        "int({x}.find({}).split(':')[1])",
        cel_str(&format!(":[0-9]+{suffix}$"))
    );
    format!(
        "({x}.matches({re}) && {port} >= 1 && {port} <= 65535 && (!{x}.matches('^[0-9.]+:') || isIP({x}.split(':')[0])) && (!{x}.startsWith('[') || (isIP({x}.substring(1, {x}.indexOf(']'))) && ip({x}.substring(1, {x}.indexOf(']'))).family() == 6)))",
        re = cel_str(&host_port_regex(suffix)),
    )
}

/// Every entry of a list is host:port (Agave's `--entrypoint`, Firedancer's
/// `[gossip] entrypoints`).
pub fn host_ports(what: &str, example: &str) -> Rule {
    Rule::new(format!("self.all(e, {})", cel_host_port("e", "")))
        .message(format!(
            "each {what} must be host:port: a hostname or an IPv4 address (or [IPv6]), a colon and a port from 1 to 65535, e.g. {example}: fix the entry"
        ).as_str())
}

/// A base58 public key or hash, as Solana writes them (32 bytes: 32 to 44 characters).
pub const BASE58: &str = "^[1-9A-HJ-NP-Za-km-z]{32,44}$";

/// Every entry of a list is a base58 public key.
pub fn base58_keys(what: &str) -> Rule {
    Rule::new(format!("self.all(k, k.matches({}))", cel_str(BASE58))).message(
        format!(
            "each {what} must be a base58 public key (32 to 44 of the characters 1-9, A-Z and a-z without 0, O, I and l): fix the mistyped key"
        )
        .as_str(),
    )
}

/// A base58 hash.
pub fn base58_hash(what: &str) -> Rule {
    Rule::new(format!("self.matches({})", cel_str(BASE58))).message(
        format!(
            "{what} must be a base58 hash (32 to 44 of the characters 1-9, A-Z and a-z without 0, O, I and l): fix the mistyped hash, or remove it to use the cluster's"
        )
        .as_str(),
    )
}

/// An http(s) URL with a host.
pub fn http_url(example: &str) -> Rule {
    Rule::new(
        "isURL(self) && (url(self).getScheme() == 'http' || url(self).getScheme() == 'https') && url(self).getHostname() != ''",
    )
    .message(format!("must be an http(s) URL with a host, such as {example}").as_str())
}

/// A quantity greater than zero.
pub fn positive_quantity(example: &str) -> Rule {
    Rule::new("isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))")
        .message(format!("must be a positive quantity such as {example}").as_str())
}

/// A quantity of zero or more (Kubernetes quantities may be negative).
pub fn non_negative_quantity(example: &str) -> Rule {
    Rule::new("isQuantity(self) && quantity(self).compareTo(quantity('0')) >= 0")
        .message(format!("must be a quantity of 0 or more, such as {example}").as_str())
}

/// An image reference as the container runtime parses it (distribution/reference
/// `ReferenceRegexp`): an optional registry host (with a port), lowercase path
/// components, an optional tag and an optional digest.
pub const IMAGE: &str = r"^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(\.([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$";

/// An image reference; the kubelet cannot pull anything else (InvalidImageName).
pub fn image() -> Rule {
    Rule::new(format!("self.matches({})", cel_str(IMAGE))).message(
        "must be an image reference such as registry.example.com/org/name:tag or name@sha256:<digest> (lowercase repository, no spaces or scheme): fix the reference",
    )
}

/// The repository name of a Teku image: its last path component contains `teku`.
pub const TEKU_IMAGE: &str = r"^([^@]*/)?[^/@:]*teku[^/@:]*(:[^/@:]+)?(@[^@]+)?$";

/// The consensus client's image runs Teku: valtune renders Teku's flags for it.
pub fn teku_image() -> Rule {
    Rule::new(format!("self.matches({})", cel_str(TEKU_IMAGE))).message(
        "the consensus client valtune renders is Teku (--ee-endpoint, --ee-jwt-secret-file, --data-base-path, --checkpoint-sync-url are Teku's flags; another client exits on them): use a Teku image such as consensys/teku:25.12.0, or a mirror whose repository name contains teku",
    )
}

/// Dotted keys of a config file, whose words match `word` (a regular expression).
pub fn config_keys(word: &str, example: &str) -> Rule {
    let re = format!("^{word}(\\.{word})*$");
    Rule::new(format!("self.all(k, k.matches({}))", cel_str(&re))).message(
        format!(
            "a config key is a dotted path of words such as {example}: fix the key (a value goes in the value)"
        )
        .as_str(),
    )
}

/// The longest config value: bounds the API server's cost estimate of the rules that read
/// every value (an unbounded string counts as the whole request).
pub const MAX_CONFIG_VALUE: i64 = 4096;

/// A config map's values are at most [`MAX_CONFIG_VALUE`] characters (a schemars
/// `transform`: its `inner` bounds only list items).
pub fn bounded_values(schema: &mut schemars::Schema) {
    if let Some(o) = schema
        .get_mut("additionalProperties")
        .and_then(|v| v.as_object_mut())
    {
        o.insert("maxLength".into(), MAX_CONFIG_VALUE.into());
    }
}

/// Config values on one line: a line break would start another key the checks never saw.
pub fn one_line_values() -> Rule {
    Rule::new("self.all(k, !self[k].contains('\\n') && !self[k].contains('\\r'))").message(
        "a config value must be on one line (a line break would write another key into the file): write the value on one line",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(pattern: &str) -> regex::Regex {
        regex::Regex::new(pattern).unwrap()
    }

    #[test]
    fn host_port_takes_hostnames_ipv4_and_bracketed_ipv6() {
        let plain = re(&host_port_regex(""));
        for ok in [
            "entrypoint.testnet.solana.com:8001",
            "a:1",
            "127.0.0.1:65535",
            "[2001:db8::1]:8001",
            "Peer-1.WAX.example:9876",
        ] {
            assert!(plain.is_match(ok), "{ok}");
        }
        for bad in [
            "entrypoint.testnet.solana.com",
            "http://a:1",
            "a:",
            ":8001",
            "a b:1",
            "-a:1",
            "a:123456",
            "a:80/x",
            "2001:db8::1:8001",
        ] {
            assert!(!plain.is_match(bad), "{bad}");
        }
        let nodeos = re(&host_port_regex("(:(trx|blk))?"));
        assert!(nodeos.is_match("p2p.blk.eos.io:9876:blk"));
        assert!(nodeos.is_match("p2p.eos.io:9876"));
        assert!(!nodeos.is_match("p2p.eos.io:9876:all"));
        assert!(!plain.is_match("p2p.eos.io:9876:trx"));
    }

    #[test]
    fn the_port_is_found_after_the_host_even_in_brackets() {
        let cel = cel_host_port("e", "(:(trx|blk))?");
        assert!(cel.contains("e.find(':[0-9]+(:(trx|blk))?$').split(':')[1]"));
        let port = re(":[0-9]+(:(trx|blk))?$");
        for (s, p) in [
            ("[::1]:9876", "9876"),
            ("h:9876:trx", "9876"),
            ("1.2.3.4:80", "80"),
        ] {
            let found = port.find(s).unwrap().as_str();
            assert_eq!(found.split(':').nth(1), Some(p), "{s}");
        }
    }

    #[test]
    fn base58_refuses_the_letters_it_lacks() {
        let b = re(BASE58);
        assert!(b.is_match("5D1fNXzvv5NjV1ysLjirC4WY92RNsVH18vjmcszZd8on"));
        assert!(b.is_match("4uhcVJyU9pJkvQyS88uRDiswHXSCkY3zQawwpjk2NsNY"));
        assert!(!b.is_match("5D1fNXzvv5NjV1ysLjirC4WY92RNsVH18vjmcszZd8o0"));
        assert!(!b.is_match("5D1fNXzvv5NjV1ysLjirC4WY92RNsVH18vjmcszZd8oI"));
        assert!(!b.is_match("short"));
    }

    #[test]
    fn image_references_parse_as_the_runtime_parses_them() {
        let i = re(IMAGE);
        for ok in [
            "anzaxyz/agave:v4.0.3",
            "registry.example.com/agave:v4.0.3-pc1024",
            "registry.example.com/frankendancer:v0.1106.40201",
            "ghcr.io/colinianking/stress-ng:6c2ab8831bca51f17d97538d106996ca411c4c79",
            "python:3.13-alpine",
            "waxteam/waxnode:v5.0.3wax02",
            "localhost:5000/teku",
            "consensys/teku@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "victoriametrics/vmagent:v1.110.0",
        ] {
            assert!(i.is_match(ok), "{ok}");
        }
        for bad in [
            "Anza/Agave:v4",
            "https://registry/agave:v1",
            "agave: v4",
            "agave:",
            "agave@sha256:short",
            "",
        ] {
            assert!(!i.is_match(bad), "{bad}");
        }
    }

    #[test]
    fn a_teku_image_is_named_teku() {
        let t = re(TEKU_IMAGE);
        for ok in [
            "consensys/teku:25.12.0",
            "registry.local:5000/mirror/teku:25.12.0",
            "teku",
            "consensys/teku@sha256:0123456789abcdef0123456789abcdef",
            "registry.example.com/teku-jdk21:25.12.0",
        ] {
            assert!(t.is_match(ok), "{ok}");
        }
        for bad in [
            "sigp/lighthouse:v7.0.0",
            "statusim/nimbus-eth2:amd64-latest",
            "teku/lighthouse:v7",
            "gcr.io/prysmaticlabs/prysm/beacon-chain:v6.0.0",
        ] {
            assert!(!t.is_match(bad), "{bad}");
        }
    }

    /// Every image, entrypoint and peer the examples write has the shape its rule wants.
    #[test]
    fn the_examples_have_the_shapes() {
        fn walk(key: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
            match v {
                serde_json::Value::Object(m) => m.iter().for_each(|(k, v)| walk(k, v, out)),
                serde_json::Value::Array(a) => a.iter().for_each(|v| walk(key, v, out)),
                serde_json::Value::String(s) => out.push((key.to_string(), s.clone())),
                _ => {}
            }
        }
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/examples");
        let (image, plain, nodeos) = (
            re(IMAGE),
            re(&host_port_regex("")),
            re(&host_port_regex("(:(trx|blk))?")),
        );
        let mut checked = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let doc: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
            let mut strings = Vec::new();
            walk("", &doc, &mut strings);
            for (key, value) in strings {
                let shape = match key.as_str() {
                    "image" | "fetchImage" => &image,
                    "entrypoints" => &plain,
                    "peers" => &nodeos,
                    _ => continue,
                };
                assert!(shape.is_match(&value), "{}: {key} {value}", path.display());
                checked += 1;
            }
        }
        assert!(checked >= 10, "checked {checked}");
    }

    #[test]
    fn cel_strings_escape_backslashes_and_quotes() {
        assert_eq!(cel_str(r"a\.b'c"), r"'a\\.b\'c'");
    }
}
