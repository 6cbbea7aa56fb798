//! Client versions. A trial's client version is its spec's `version`, else the image tag's
//! `X.Y.Z` (`anzaxyz/agave:v2.1.14`); flags and knobs that exist only in some versions are
//! checked against it at admission and rendered by it.
//!
//! The same reading is written twice, once here and once in CEL for the admission rules
//! ([`cel_version`], [`cel_at_least`]); the tests below run both on the same inputs.

use std::fmt;

/// What a spec's `version` field accepts: `2.1.14`, `v2.1.14`, `0.503.20214`, `3.0.0-rc1`.
pub const VERSION_PATTERN: &str = r"^v?[0-9]+\.[0-9]+\.[0-9]+([-+.][0-9A-Za-z.+-]*)?$";

/// Where an image reference's tag is: the first `:v?X.Y.Z` (a registry port such as
/// `:5000/` has no dots, so it is never taken for one).
const TAG_PATTERN: &str = r":v?[0-9]+\.[0-9]+\.[0-9]+";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            major,
            minor,
            patch,
        }
    }

    /// Reads the leading `X.Y.Z` of `v2.1.14`, `2.1.14-rc1`, ...
    pub fn parse(s: &str) -> Option<Version> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts = s.splitn(3, '.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let rest = parts.next()?;
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let patch = rest[..end].parse().ok()?;
        Some(Version::new(major, minor, patch))
    }

    /// The version in an image reference's tag, as [`TAG_PATTERN`] finds it.
    pub fn from_image(image: &str) -> Option<Version> {
        image.match_indices(':').find_map(|(i, _)| {
            let tag = &image[i + 1..];
            let tag = tag.strip_prefix('v').unwrap_or(tag);
            // Exactly the digits-dot-digits-dot-digits prefix the CEL pattern takes.
            let v = Version::parse(tag)?;
            tag.starts_with(|c: char| c.is_ascii_digit()).then_some(v)
        })
    }

    /// A spec's version: its `version` field, else its image's tag.
    pub fn of(explicit: Option<&str>, image: &str) -> Option<Version> {
        match explicit {
            Some(v) => Version::parse(v),
            None => Version::from_image(image),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A half-open range of versions: `since` included, `before` excluded; None is unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Versions {
    pub since: Option<Version>,
    pub before: Option<Version>,
}

impl Versions {
    pub const ALL: Versions = Versions {
        since: None,
        before: None,
    };

    pub const fn since(v: Version) -> Versions {
        Versions {
            since: Some(v),
            before: None,
        }
    }

    pub const fn before(v: Version) -> Versions {
        Versions {
            since: None,
            before: Some(v),
        }
    }

    pub fn is_all(&self) -> bool {
        self.since.is_none() && self.before.is_none()
    }

    pub fn contains(&self, v: Version) -> bool {
        self.since.is_none_or(|s| v >= s) && self.before.is_none_or(|b| v < b)
    }

    /// "from 3.0.0", "before 2.1.0", "from 2.1.0 and before 4.0.0".
    pub fn describe(&self) -> String {
        match (self.since, self.before) {
            (None, None) => "in every version".into(),
            (Some(s), None) => format!("from {s}"),
            (None, Some(b)) => format!("before {b}"),
            (Some(s), Some(b)) => format!("from {s} and before {b}"),
        }
    }

    /// CEL: whether the version string `expr` (from [`cel_version`]) is in the range.
    pub fn cel_contains(&self, expr: &str) -> String {
        let mut terms = Vec::new();
        if let Some(s) = self.since {
            terms.push(cel_at_least(expr, s));
        }
        if let Some(b) = self.before {
            terms.push(format!("!({})", cel_at_least(expr, b)));
        }
        if terms.is_empty() {
            "true".into()
        } else {
            terms.join(" && ")
        }
    }
}

/// CEL: the version string of the client spec at `spec` (e.g. `self.template.agave`): its
/// `version`, else the `:vX.Y.Z` its image tag starts with, else "" (unknown).
pub fn cel_version(spec: &str) -> String {
    format!(
        "(has({spec}.version) ? {spec}.version : {spec}.image.find('{}'))",
        TAG_PATTERN.replace('\\', "\\\\")
    )
}

/// CEL: whether a version string from [`cel_version`] is known.
pub fn cel_known(expr: &str) -> String {
    format!("size({expr}) > 0")
}

/// CEL: whether a version string from [`cel_version`] (`:v2.1.14`, `2.1.14`, ...) is at
/// least `v`. CEL has no version type on every supported Kubernetes, so the comparison is
/// a regular expression over the three numbers.
pub fn cel_at_least(expr: &str, v: Version) -> String {
    format!(
        "{expr}.matches('{}')",
        at_least_regex(v).replace('\\', "\\\\")
    )
}

/// An RE2 expression matching version strings `[:][v]A.B.C...` with (A, B, C) >= `v`.
pub fn at_least_regex(v: Version) -> String {
    let head = r"^:?v?0*";
    let mut alts = vec![format!(r"{head}({})\.", greater_int(v.major))];
    alts.push(format!(
        r"{head}{}\.0*({})\.",
        v.major,
        greater_int(v.minor)
    ));
    alts.push(format!(
        r"{head}{}\.0*{}\.0*({}|{})([^0-9]|$)",
        v.major,
        v.minor,
        greater_int(v.patch),
        v.patch
    ));
    alts.join("|")
}

/// An RE2 alternation matching the decimal integers (no leading zeros) greater than `n`.
fn greater_int(n: u32) -> String {
    let digits: Vec<u32> = n
        .to_string()
        .chars()
        .map(|c| c as u32 - '0' as u32)
        .collect();
    let len = digits.len();
    // More digits than n.
    let mut alts = vec![format!("[1-9][0-9]{{{len},}}")];
    // As many digits, larger at the first position where they differ.
    for i in 0..len {
        let d = digits[i];
        if d == 9 {
            continue;
        }
        let lowest = d + 1;
        let prefix: String = digits[..i].iter().map(|d| d.to_string()).collect();
        let class = if lowest == 9 {
            "9".to_string()
        } else {
            format!("[{lowest}-9]")
        };
        let rest = len - i - 1;
        let tail = if rest == 0 {
            String::new()
        } else {
            format!("[0-9]{{{rest}}}")
        };
        alts.push(format!("{prefix}{class}{tail}"));
    }
    alts.join("|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_from_fields_and_image_tags() {
        assert_eq!(Version::parse("v2.1.14"), Some(Version::new(2, 1, 14)));
        assert_eq!(Version::parse("3.0.0-rc1"), Some(Version::new(3, 0, 0)));
        assert_eq!(
            Version::parse("0.503.20214"),
            Some(Version::new(0, 503, 20214))
        );
        assert_eq!(Version::parse("latest"), None);
        assert_eq!(
            Version::from_image("anzaxyz/agave:v2.1.14"),
            Some(Version::new(2, 1, 14))
        );
        assert_eq!(
            Version::from_image("registry.local:5000/agave:3.0.1@sha256:abcd"),
            Some(Version::new(3, 0, 1))
        );
        assert_eq!(Version::from_image("agave:latest"), None);
        assert_eq!(Version::from_image("registry:5000/agave"), None);
        assert_eq!(
            Version::of(Some("2.0.5"), "agave:v9.9.9"),
            Some(Version::new(2, 0, 5))
        );
    }

    #[test]
    fn ranges_contain_what_they_say() {
        let r = Versions {
            since: Some(Version::new(2, 1, 0)),
            before: Some(Version::new(4, 0, 0)),
        };
        assert!(r.contains(Version::new(2, 1, 0)));
        assert!(r.contains(Version::new(3, 9, 99)));
        assert!(!r.contains(Version::new(2, 0, 25)));
        assert!(!r.contains(Version::new(4, 0, 0)));
        assert_eq!(r.describe(), "from 2.1.0 and before 4.0.0");
    }

    /// The CEL regular expression and the Rust comparison agree on many versions.
    #[test]
    fn the_cel_comparison_agrees_with_rust() {
        let samples = [
            "0.0.0",
            "0.1.9",
            "1.18.27",
            "2.0.0",
            "2.0.25",
            "2.1.0",
            "2.1.14",
            "2.1.15",
            "2.2.0",
            "2.9.99",
            "2.10.0",
            "3.0.0",
            "3.0.1-rc1",
            "3.1.7",
            "4.0.0",
            "9.0.0",
            "10.0.0",
            "19.2.3",
            "100.0.0",
            "0.503.20214",
            "0.1106.0",
            "25.1.0",
            "24.12.2",
        ];
        let bounds = [
            Version::new(3, 0, 0),
            Version::new(2, 1, 0),
            Version::new(2, 1, 15),
            Version::new(4, 0, 0),
            Version::new(0, 0, 0),
            Version::new(10, 0, 0),
            Version::new(0, 600, 0),
            Version::new(25, 1, 0),
            Version::new(2, 9, 100),
        ];
        for bound in bounds {
            let re = regex::Regex::new(&at_least_regex(bound)).unwrap();
            for s in samples {
                let v = Version::parse(s).unwrap();
                for written in [
                    s.to_string(),
                    format!("v{s}"),
                    format!(":v{s}"),
                    format!(":{s}"),
                ] {
                    assert_eq!(
                        re.is_match(&written),
                        v >= bound,
                        "{written} >= {bound}: regex {}",
                        at_least_regex(bound)
                    );
                }
            }
        }
    }

    #[test]
    fn the_cel_tag_pattern_finds_what_rust_finds() {
        let re = regex::Regex::new(TAG_PATTERN).unwrap();
        for image in [
            "anzaxyz/agave:v2.1.14",
            "registry.local:5000/agave:3.0.1@sha256:abcd",
            "agave:latest",
            "registry:5000/agave",
            "firedancer:v0.503.20214",
        ] {
            let cel = re.find(image).map(|m| m.as_str().to_string());
            let rust = Version::from_image(image);
            assert_eq!(cel.and_then(|s| Version::parse(&s[1..])), rust, "{image}");
        }
        assert!(cel_version("self.template.agave").contains(".find(':v?[0-9]+"));
    }
}
