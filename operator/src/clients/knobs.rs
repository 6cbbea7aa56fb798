//! Knob tables. Each client has one: which sweep dimensions it honours, and how each
//! value reaches its process (an argument, an env var, a config key, the image, a
//! resource), by client version. The same table generates the client's admission rules
//! (CEL on the experiment) and drives its rendering, and a test renders every entry to
//! check that the two agree.

use kube::core::Rule;

use crate::api::sweep::{Setting, ThreadKnob, TrialPoint};
use crate::api::version::{Version, Versions, cel_known};

/// A sweep dimension: a typed field of `spec.sweep`, or one thread or tile count of
/// `spec.sweep.threads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Memory,
    Cpu,
    Hugepages1Gi,
    ProgramCacheEntries,
    Setting(Setting),
    Thread(ThreadKnob),
}

impl Dim {
    /// Every typed field of `spec.sweep` (threads and generic knobs are lists of their own).
    pub fn fields() -> impl Iterator<Item = Dim> {
        [
            Dim::Memory,
            Dim::Cpu,
            Dim::Hugepages1Gi,
            Dim::ProgramCacheEntries,
        ]
        .into_iter()
        .chain(Setting::ALL.into_iter().map(Dim::Setting))
    }

    /// The name users write: the sweep field, or the thread knob's name.
    pub fn name(&self) -> &'static str {
        match self {
            Dim::Memory => "memory",
            Dim::Cpu => "cpu",
            Dim::Hugepages1Gi => "hugepages1Gi",
            Dim::ProgramCacheEntries => "programCacheEntries",
            Dim::Setting(s) => s.as_str(),
            Dim::Thread(t) => t.as_str(),
        }
    }

    /// Where it is written, for rule messages and field paths.
    pub fn field(&self) -> String {
        match self {
            Dim::Thread(_) => "sweep.threads".into(),
            other => format!("sweep.{}", other.name()),
        }
    }

    /// CEL, on the experiment spec: whether the experiment sweeps this dimension.
    pub fn cel_swept(&self) -> String {
        match self {
            Dim::Thread(t) => format!(
                "(has(self.sweep.threads) && self.sweep.threads.exists(t, t.name == '{}'))",
                t.as_str()
            ),
            other => format!("has(self.{})", other.field()),
        }
    }

    /// This dimension's value at a point of the sweep, if the point sets it.
    pub fn value(&self, p: &TrialPoint) -> Option<String> {
        match self {
            Dim::Memory => p.memory.clone(),
            Dim::Cpu => p.cpu.map(|v| v.to_string()),
            Dim::Hugepages1Gi => p.hugepages1_gi.map(|v| v.to_string()),
            Dim::ProgramCacheEntries => p.program_cache_entries.map(|v| v.to_string()),
            Dim::Setting(s) => p.settings.get(s.as_str()).cloned(),
            Dim::Thread(t) => p.threads.get(t.as_str()).map(|v| v.to_string()),
        }
    }
}

/// How a value reaches the validator process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// A container resource of the validator (`memory`, `cpu`, `hugepages-1Gi`).
    Resource(&'static str),
    /// The container image (e.g. one image per compile-time constant).
    Image,
    /// A command-line flag followed by the value.
    Arg(&'static str),
    /// An environment variable of the validator container.
    Env(&'static str),
    /// A key of the client's config file (dotted path).
    ConfigKey(&'static str),
    /// Rendered by the client module itself (several parts of the pod at once), as said.
    Client(&'static str),
    /// A container beside the validator that the value sizes (e.g. a memory hog).
    Sidecar(&'static str),
}

impl How {
    pub fn describe(&self) -> String {
        match self {
            How::Resource(r) => format!("the container's {r} request and limit"),
            How::Image => "the image built for the value".into(),
            How::Arg(a) => format!("`{a} VALUE`"),
            How::Env(e) => format!("env `{e}`"),
            How::ConfigKey(k) => format!("config key `{k}`"),
            How::Client(what) => what.to_string(),
            How::Sidecar(what) => format!("a sidecar: {what}"),
        }
    }
}

/// How a value reaches the process in a range of client versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    pub versions: Versions,
    pub how: How,
    /// Added to the value on its way: the process counts what valtune's knob leaves out
    /// (e.g. Agave 2.x's `SOLANA_BANKING_THREADS` includes its two vote threads).
    pub plus: i64,
}

impl Reach {
    pub const fn always(how: How) -> Reach {
        Reach {
            versions: Versions::ALL,
            how,
            plus: 0,
        }
    }

    pub const fn within(versions: Versions, how: How) -> Reach {
        Reach {
            versions,
            how,
            plus: 0,
        }
    }

    fn value(&self, v: String) -> String {
        match (self.plus, v.parse::<i64>()) {
            (0, _) | (_, Err(_)) => v,
            (plus, Ok(n)) => (n + plus).to_string(),
        }
    }
}

/// One knob a client honours.
#[derive(Debug, Clone, Copy)]
pub struct Knob {
    pub dim: Dim,
    /// By version; the first reach whose range holds the version applies. Versions no
    /// reach covers do not have the knob (refused at admission when the version is known).
    pub reach: &'static [Reach],
    /// The upstream source that says so (repo, path, tag).
    pub source: &'static str,
}

impl Knob {
    /// How the knob reaches a process of `version`.
    pub fn reach(&self, version: Option<Version>) -> Result<&Reach, KnobError> {
        match version {
            Some(v) => {
                self.reach
                    .iter()
                    .find(|r| r.versions.contains(v))
                    .ok_or(KnobError::NotInVersion {
                        knob: self.dim.name(),
                        version: v,
                    })
            }
            None if self.versioned() => Err(KnobError::UnknownVersion {
                knob: self.dim.name(),
            }),
            None => self.reach.first().ok_or(KnobError::NotInVersion {
                knob: self.dim.name(),
                version: Version::new(0, 0, 0),
            }),
        }
    }

    /// Whether how it reaches the process depends on the version.
    pub fn versioned(&self) -> bool {
        self.reach.iter().any(|r| !r.versions.is_all())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KnobError {
    #[error("{knob} does not exist in version {version} of the client")]
    NotInVersion {
        knob: &'static str,
        version: Version,
    },
    #[error(
        "how {knob} is set depends on the client version, which is not known: set the client's version or use an image tagged :vX.Y.Z"
    )]
    UnknownVersion { knob: &'static str },
}

/// A dimension the client refuses, and why (shown at admission).
#[derive(Debug, Clone, Copy)]
pub struct Refusal {
    pub dim: Dim,
    pub why: &'static str,
}

/// Which generic knobs (`spec.sweep.knobs`) the client takes.
#[derive(Debug, Clone, Copy)]
pub struct Generic {
    pub env: bool,
    pub arg: bool,
    pub config_key: bool,
    /// Why configKey is refused, when it is.
    pub no_config_key: &'static str,
}

/// A client's knob table.
#[derive(Debug, Clone, Copy)]
pub struct KnobTable {
    /// The client's template key (`agave`): its spec is `spec.template.<client>`.
    pub client: &'static str,
    /// Its name in messages (`Agave`).
    pub display: &'static str,
    pub knobs: &'static [Knob],
    /// Dimensions refused with a reason of their own; others it lacks get a generic one.
    pub refusals: &'static [Refusal],
    pub generic: Generic,
}

impl KnobTable {
    pub fn get(&self, dim: Dim) -> Option<&Knob> {
        self.knobs.iter().find(|k| k.dim == dim)
    }

    fn spec(&self) -> String {
        format!("self.template.{}", self.client)
    }

    /// The names this client can sweep, for messages.
    fn honoured(&self) -> String {
        self.knobs
            .iter()
            .filter(|k| !matches!(k.dim, Dim::Thread(_)))
            .map(|k| k.dim.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn threads(&self) -> Vec<&'static str> {
        self.knobs
            .iter()
            .filter_map(|k| match k.dim {
                Dim::Thread(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// A rule that holds for experiments of other clients.
    fn rule(&self, cond: String, message: String, field: &str) -> Rule {
        Rule::new(format!("!has({}) || {cond}", self.spec()))
            .message(message.as_str())
            .field_path(format!(".{field}"))
    }

    /// The admission rules the table implies, on the experiment spec.
    pub fn rules(&self) -> Vec<Rule> {
        let (name, spec) = (self.display, self.spec());
        let mut rules = Vec::new();
        for dim in Dim::fields() {
            if self.get(dim).is_some() {
                continue;
            }
            let why = self
                .refusals
                .iter()
                .find(|r| r.dim == dim)
                .map(|r| r.why.to_string())
                .unwrap_or_else(|| {
                    format!(
                        "{name} has no {} knob (it can sweep {})",
                        dim.name(),
                        self.honoured()
                    )
                });
            rules.push(self.rule(
                format!("!{}", dim.cel_swept()),
                format!("{why}: remove {}", dim.field()),
                &dim.field(),
            ));
        }
        let threads = self.threads();
        let allowed = format!(
            "[{}]",
            threads
                .iter()
                .map(|t| format!("'{t}'"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let message = if threads.is_empty() {
            format!(
                "{name} has no thread or tile counts valtune sets: remove sweep.threads and sweep the setting with sweep.knobs"
            )
        } else {
            format!(
                "{name} cannot set some of these thread knobs: use only {}",
                threads.join(", ")
            )
        };
        rules.push(self.rule(
            format!("!has(self.sweep.threads) || self.sweep.threads.all(t, t.name in {allowed})"),
            message,
            "sweep.threads",
        ));
        for (on, key, field) in [
            (self.generic.env, "env", "env"),
            (self.generic.arg, "arg", "arg"),
            (self.generic.config_key, "configKey", "configKey"),
        ] {
            if on {
                continue;
            }
            let why = if key == "configKey" {
                self.generic.no_config_key.to_string()
            } else {
                format!("{name} takes no {field} knobs")
            };
            rules.push(self.rule(
                format!("!has(self.sweep.knobs) || self.sweep.knobs.all(k, !has(k.{key}))"),
                why,
                "sweep.knobs",
            ));
        }
        let version = crate::api::version::cel_version(&spec);
        for knob in self.knobs.iter().filter(|k| k.versioned()) {
            let swept = knob.dim.cel_swept();
            let ways: Vec<String> = knob
                .reach
                .iter()
                .map(|r| format!("{} {}", r.how.describe(), r.versions.describe()))
                .collect();
            rules.push(self.rule(
                format!("!{swept} || {}", cel_known(&version)),
                format!(
                    "how {} reaches {name} depends on its version ({}), which is not known: set {}.version or use an image tagged :vX.Y.Z",
                    knob.dim.name(),
                    ways.join("; "),
                    &spec["self.".len()..]
                ),
                &knob.dim.field(),
            ));
            let covered: Vec<String> = knob
                .reach
                .iter()
                .map(|r| format!("({})", r.versions.cel_contains(&version)))
                .collect();
            rules.push(self.rule(
                format!(
                    "!{swept} || !({}) || {}",
                    cel_known(&version),
                    covered.join(" || ")
                ),
                format!(
                    "this {name} version has no {}: it exists {}; remove it from {} or use another version",
                    knob.dim.name(),
                    knob.reach
                        .iter()
                        .map(|r| r.versions.describe())
                        .collect::<Vec<_>>()
                        .join(" and "),
                    knob.dim.field()
                ),
                &knob.dim.field(),
            ));
        }
        rules
    }
}

/// What a point's knobs add to the validator process: arguments, env vars, config keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub config: Vec<(String, String)>,
}

/// Applies a point's knobs that reach the process as an argument, env var or config key
/// (resources, images and [`How::Client`] are the skeleton's and the client's to apply).
/// Pure.
pub fn apply(
    table: &KnobTable,
    point: &TrialPoint,
    version: Option<Version>,
) -> Result<Applied, KnobError> {
    let mut out = Applied::default();
    for knob in table.knobs {
        let Some(value) = knob.dim.value(point) else {
            continue;
        };
        let reach = knob.reach(version)?;
        let value = reach.value(value);
        match reach.how {
            How::Arg(flag) => out.args.extend([flag.to_string(), value]),
            How::Env(name) => out.env.push((name.into(), value)),
            How::ConfigKey(key) => out.config.push((key.into(), value)),
            How::Resource(_) | How::Image | How::Client(_) | How::Sidecar(_) => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V3: Version = Version::new(3, 0, 0);

    static TABLE: KnobTable = KnobTable {
        client: "demo",
        display: "Demo",
        knobs: &[
            Knob {
                dim: Dim::Memory,
                reach: &[Reach::always(How::Resource("memory"))],
                source: "",
            },
            Knob {
                dim: Dim::Thread(ThreadKnob::BankingThreads),
                reach: &[
                    Reach {
                        versions: Versions::before(V3),
                        how: How::Env("BANKING"),
                        plus: 2,
                    },
                    Reach::within(Versions::since(V3), How::Arg("--banking")),
                ],
                source: "",
            },
        ],
        refusals: &[Refusal {
            dim: Dim::Hugepages1Gi,
            why: "Demo does not use hugepages",
        }],
        generic: Generic {
            env: true,
            arg: true,
            config_key: false,
            no_config_key: "Demo has no config file",
        },
    };

    fn point() -> TrialPoint {
        TrialPoint {
            memory: Some("64Gi".into()),
            threads: [("bankingThreads".to_string(), 8)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_knob_reaches_the_process_the_way_its_version_says() {
        let old = apply(&TABLE, &point(), Some(Version::new(2, 1, 0))).unwrap();
        // The old version counts two threads the knob leaves out.
        assert_eq!(old.env, vec![("BANKING".into(), "10".into())]);
        assert!(old.args.is_empty());
        let new = apply(&TABLE, &point(), Some(V3)).unwrap();
        assert_eq!(new.args, vec!["--banking", "8"]);
        assert_eq!(
            apply(&TABLE, &point(), None),
            Err(KnobError::UnknownVersion {
                knob: "bankingThreads"
            })
        );
    }

    #[test]
    fn the_rules_refuse_what_the_table_lacks_and_name_the_field() {
        let rules = TABLE.rules();
        let text = serde_json::to_string(&rules).unwrap();
        for lacked in [
            "sweep.cpu",
            "sweep.hugepages1Gi",
            "sweep.programCacheEntries",
        ] {
            assert!(
                text.contains(&format!("remove {lacked}")),
                "{lacked}: {text}"
            );
        }
        assert!(!text.contains("remove sweep.memory\""));
        assert!(text.contains("Demo does not use hugepages"));
        assert!(text.contains("t.name in ['bankingThreads']"));
        assert!(text.contains("Demo has no config file"));
        // The versioned knob: one rule wants the version known, one the knob in it.
        assert!(text.contains("depends on its version"));
        assert!(text.contains("exists before 3.0.0 and from 3.0.0"));
        assert!(
            rules
                .iter()
                .all(|r| r.rule.starts_with("!has(self.template.demo) || "))
        );
    }
}
