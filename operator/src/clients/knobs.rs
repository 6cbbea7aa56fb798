//! Knob tables. Each client has one: which sweep dimensions it honours, and how each
//! value reaches its process (an argument, an env var, a config key, the image, a
//! resource), by client version. The same table generates the client's admission rules
//! (CEL on the experiment) and drives its rendering, and a test renders every entry to
//! check that the two agree.

use kube::core::Rule;

use crate::api::sweep::{Setting, ThreadKnob, cel_ranged};
use crate::api::template::Tuning;
use crate::api::version::{Version, Versions, cel_known};

/// A sweep dimension: a typed field of `spec.sweep`, or one thread or tile count of
/// `spec.sweep.threads`. All but the resources can also be set by hand in the template's
/// `tuning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Memory,
    Cpu,
    Hugepages1Gi,
    ProgramCacheEntries,
    Setting(Setting),
    Thread(ThreadKnob),
}

/// Where an experiment gives a dimension its value: the sweep (a value per trial), or the
/// template's `tuning` (one value for every trial that does not sweep it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Sweep,
    Tuning,
}

impl Place {
    pub const ALL: [Place; 2] = [Place::Sweep, Place::Tuning];
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

    /// Whether it can be written at `place`: the resources are not tuning (the template
    /// has them in `resources`).
    pub fn is_at(&self, place: Place) -> bool {
        place == Place::Sweep || !matches!(self, Dim::Memory | Dim::Cpu | Dim::Hugepages1Gi)
    }

    /// Where it is written, for rule messages and field paths.
    pub fn field(&self, place: Place) -> String {
        let name = match self {
            Dim::Thread(_) => "threads",
            other => other.name(),
        };
        match place {
            Place::Sweep => format!("sweep.{name}"),
            Place::Tuning => format!("template.tuning.{name}"),
        }
    }

    /// CEL, on the experiment spec: whether the experiment sets this dimension at `place`.
    pub fn cel_set(&self, place: Place) -> String {
        match (self, place) {
            (Dim::Thread(t), Place::Sweep) => format!(
                "((has(self.sweep.threads) && self.sweep.threads.exists(t, t.name == '{}')) || {})",
                t.as_str(),
                cel_ranged(t.as_str())
            ),
            (Dim::Thread(t), Place::Tuning) => format!(
                "(has(self.template.tuning) && has(self.template.tuning.threads) && has(self.template.tuning.threads.{}))",
                t.as_str()
            ),
            (other, Place::Sweep) => format!(
                "(has(self.{}) || {})",
                other.field(place),
                cel_ranged(other.name())
            ),
            (other, Place::Tuning) => format!(
                "(has(self.template.tuning) && has(self.{}))",
                other.field(place)
            ),
        }
    }

    /// CEL, on the experiment spec: whether every trial takes this dimension's value from
    /// the template's tuning (it is set there and not swept).
    pub fn cel_from_tuning(&self) -> String {
        format!(
            "({} && !{})",
            self.cel_set(Place::Tuning),
            self.cel_set(Place::Sweep)
        )
    }

    /// This dimension's value in a template's tuning, written as the sweep writes it.
    /// None for the resources: the pod's skeleton renders them from the template's
    /// `resources`.
    pub fn value(&self, t: &Tuning) -> Option<String> {
        match self {
            Dim::Memory | Dim::Cpu | Dim::Hugepages1Gi => None,
            Dim::ProgramCacheEntries => t.program_cache_entries.map(|v| v.to_string()),
            Dim::Setting(s) => t.setting(*s),
            Dim::Thread(k) => t.threads.get(k).map(|v| v.to_string()),
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

    /// The admission rules the table implies, on the experiment spec: the same refusals
    /// for a value the sweep gives and one the template's tuning gives.
    pub fn rules(&self) -> Vec<Rule> {
        let mut rules = Vec::new();
        for place in Place::ALL {
            rules.extend(self.lacking(place));
            rules.push(self.thread_names(place));
        }
        rules.extend(self.generic_rules());
        for knob in self.knobs.iter().filter(|k| k.versioned()) {
            for place in Place::ALL.into_iter().filter(|p| knob.dim.is_at(*p)) {
                rules.extend(self.version_rules(knob, place));
            }
        }
        rules
    }

    /// Typed dimensions the client has no knob for, refused where they are written.
    fn lacking(&self, place: Place) -> Vec<Rule> {
        Dim::fields()
            .filter(|d| d.is_at(place) && self.get(*d).is_none())
            .map(|dim| {
                let why = self
                    .refusals
                    .iter()
                    .find(|r| r.dim == dim)
                    .map(|r| r.why.to_string())
                    .unwrap_or_else(|| {
                        format!(
                            "{} has no {} knob (it can sweep {})",
                            self.display,
                            dim.name(),
                            self.honoured()
                        )
                    });
                let field = dim.field(place);
                self.rule(
                    format!("!{}", dim.cel_set(place)),
                    format!("{why}: remove {field}"),
                    &field,
                )
            })
            .collect()
    }

    /// Thread names the client does not have.
    fn thread_names(&self, place: Place) -> Rule {
        let name = self.display;
        let threads = self.threads();
        let (cond, instead) = match place {
            Place::Sweep => {
                let allowed: Vec<String> = threads.iter().map(|t| format!("'{t}'")).collect();
                let all: Vec<String> = ThreadKnob::ALL
                    .iter()
                    .map(|t| format!("'{}'", t.as_str()))
                    .collect();
                (
                    format!(
                        "(!has(self.sweep.threads) || self.sweep.threads.all(t, t.name in [{0}])) && (!has(self.sweep.ranges) || self.sweep.ranges.all(r, !(r.name in [{1}]) || r.name in [{0}]))",
                        allowed.join(", "),
                        all.join(", ")
                    ),
                    "sweep the setting with sweep.knobs",
                )
            }
            // The tuning's counts are an object with a field per knob.
            Place::Tuning => {
                let lacked: Vec<String> = ThreadKnob::ALL
                    .iter()
                    .filter(|t| !threads.contains(&t.as_str()))
                    .map(|t| format!("!has(self.template.tuning.threads.{})", t.as_str()))
                    .collect();
                (
                    format!(
                        "!has(self.template.tuning) || !has(self.template.tuning.threads) || ({})",
                        lacked.join(" && ")
                    ),
                    "set it with template.env or template.extraArgs",
                )
            }
        };
        let field = Dim::Thread(ThreadKnob::BankingThreads).field(place);
        let message = if threads.is_empty() {
            format!(
                "{name} has no thread or tile counts valtune sets: remove {field} and {instead}"
            )
        } else {
            format!(
                "{name} cannot set some of these thread knobs: use only {}",
                threads.join(", ")
            )
        };
        self.rule(cond, message, &field)
    }

    /// Generic knobs (`sweep.knobs`) of a kind the client does not take.
    fn generic_rules(&self) -> Vec<Rule> {
        [
            (self.generic.env, "env"),
            (self.generic.arg, "arg"),
            (self.generic.config_key, "configKey"),
        ]
        .into_iter()
        .filter(|(on, _)| !on)
        .map(|(_, key)| {
            let why = if key == "configKey" {
                self.generic.no_config_key.to_string()
            } else {
                format!("{} takes no {key} knobs", self.display)
            };
            self.rule(
                format!("!has(self.sweep.knobs) || self.sweep.knobs.all(k, !has(k.{key}))"),
                why,
                "sweep.knobs",
            )
        })
        .collect()
    }

    /// A knob set at `place` whose rendering depends on the version: the version must be
    /// known, and have the knob.
    fn version_rules(&self, knob: &Knob, place: Place) -> [Rule; 2] {
        let (name, spec) = (self.display, self.spec());
        let version = crate::api::version::cel_version(&spec);
        let set = knob.dim.cel_set(place);
        let field = knob.dim.field(place);
        let ways: Vec<String> = knob
            .reach
            .iter()
            .map(|r| format!("{} {}", r.how.describe(), r.versions.describe()))
            .collect();
        let covered: Vec<String> = knob
            .reach
            .iter()
            .map(|r| format!("({})", r.versions.cel_contains(&version)))
            .collect();
        [
            self.rule(
                format!("!{set} || {}", cel_known(&version)),
                format!(
                    "how {} reaches {name} depends on its version ({}), which is not known: set {}.version or use an image tagged :vX.Y.Z",
                    knob.dim.name(),
                    ways.join("; "),
                    &spec["self.".len()..]
                ),
                &field,
            ),
            self.rule(
                format!(
                    "!{set} || !({}) || {}",
                    cel_known(&version),
                    covered.join(" || ")
                ),
                format!(
                    "this {name} version has no {}: it exists {}; remove it from {field} or use another version",
                    knob.dim.name(),
                    knob.reach
                        .iter()
                        .map(|r| r.versions.describe())
                        .collect::<Vec<_>>()
                        .join(" and "),
                ),
                &field,
            ),
        ]
    }
}

/// What a template's tuning adds to the validator process: arguments, env vars, config
/// keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub config: Vec<(String, String)>,
}

/// Applies the tuned values that reach the process as an argument, env var or config key
/// (resources, images and [`How::Client`] are the skeleton's and the client's to apply),
/// whether a sweep or the template set them. Pure.
pub fn apply(
    table: &KnobTable,
    tuning: &Tuning,
    version: Option<Version>,
) -> Result<Applied, KnobError> {
    let mut out = Applied::default();
    for knob in table.knobs {
        let Some(value) = knob.dim.value(tuning) else {
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

    fn tuning() -> Tuning {
        Tuning {
            threads: [(ThreadKnob::BankingThreads, 8)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_knob_reaches_the_process_the_way_its_version_says() {
        let old = apply(&TABLE, &tuning(), Some(Version::new(2, 1, 0))).unwrap();
        // The old version counts two threads the knob leaves out.
        assert_eq!(old.env, vec![("BANKING".into(), "10".into())]);
        assert!(old.args.is_empty());
        let new = apply(&TABLE, &tuning(), Some(V3)).unwrap();
        assert_eq!(new.args, vec!["--banking", "8"]);
        assert_eq!(
            apply(&TABLE, &tuning(), None),
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

    /// A value in the template's tuning is refused as the same value swept is, naming
    /// where it is written.
    #[test]
    fn the_rules_refuse_tuning_as_they_refuse_the_sweep() {
        let text = serde_json::to_string(&TABLE.rules()).unwrap();
        for lacked in ["programCacheEntries", "heap", "sigverify"] {
            assert!(
                text.contains(&format!("remove template.tuning.{lacked}\"")),
                "{lacked}: {text}"
            );
        }
        // Resources are not tuning.
        assert!(!text.contains("template.tuning.hugepages1Gi"));
        assert!(text.contains("!has(self.template.tuning.threads.verifyTiles) && "));
        assert!(!text.contains("!has(self.template.tuning.threads.bankingThreads)"));
        assert!(text.contains("remove it from template.tuning.threads or use another version"));
        assert!(text.contains("has(self.template.tuning.threads.bankingThreads)"));
    }
}
