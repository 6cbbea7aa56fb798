//! What an experiment sweeps, and its expansion into trial points.
//!
//! Each swept parameter is a list of values; the experiment runs the cartesian product of
//! all lists, `repetitions` times. An unswept parameter keeps the template's value.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::quantity::{Bytes, parse_quantity};

/// Lists of thread and knob sweeps are capped so the admission rule that bounds the sweep
/// size can spell out the product term by term (CEL has no fold).
pub const MAX_THREAD_SWEEPS: usize = 4;
pub const MAX_KNOB_SWEEPS: usize = 4;
/// The most values one parameter may sweep.
pub const MAX_VALUES: usize = 32;

const UNIQUE_INTS: &str = "self.all(x, self.exists_one(y, y == x))";
const UNIQUE_MSG: &str = "values must be unique: remove the repeated value";
const UNIQUE_QUANTITIES: &str = "!self.all(q, isQuantity(q)) || self.all(a, self.exists_one(b, quantity(a).compareTo(quantity(b)) == 0))";
const UNIQUE_QUANTITIES_MSG: &str =
    "values must be unique (1Ti and 1024Gi are the same size): remove the repeated value";

/// The parameters to sweep. Every list present must be non-empty and free of duplicates.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct SweepSpec {
    /// Memory per trial: the validator's request and limit (e.g. 128Gi ... 1536Gi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32), inner(length(max = 32)))]
    #[x_kube(
        validation = Rule::new("self.all(q, isQuantity(q) && quantity(q).isGreaterThan(quantity('0')))")
            .message("every value must be a positive quantity such as 256Gi or 1Ti"),
        validation = Rule::new(UNIQUE_QUANTITIES).message(UNIQUE_QUANTITIES_MSG)
    )]
    pub memory: Option<Vec<String>>,
    /// Whole CPU cores per trial (request = limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32), inner(range(min = 1, max = 1024)))]
    #[x_kube(validation = Rule::new(UNIQUE_INTS).message(UNIQUE_MSG))]
    pub cpu: Option<Vec<i32>>,
    /// 1 GiB hugepages per trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32), inner(range(min = 0, max = 4096)))]
    #[x_kube(validation = Rule::new(UNIQUE_INTS).message(UNIQUE_MSG))]
    pub hugepages1_gi: Option<Vec<i32>>,
    /// Program cache capacity in entries (Agave: one image per value, see
    /// template.agave.programCacheImages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), inner(range(min = 16, max = 65536)))]
    #[x_kube(validation = Rule::new(UNIQUE_INTS).message(UNIQUE_MSG))]
    pub program_cache_entries: Option<Vec<i32>>,
    /// Client thread or tile counts, by the client's knob name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4))]
    #[x_kube(validation = Rule::new("self.all(t, self.exists_one(u, u.name == t.name))")
        .message("each thread knob may appear once: merge the values of the repeated name"))]
    pub threads: Option<Vec<ThreadSweep>>,
    /// The memory allocator of the client process (Besu: `jemalloc`, which its image
    /// preloads, or glibc's malloc; docs/clients.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 8))]
    #[x_kube(validation = Rule::new(UNIQUE_INTS).message(UNIQUE_MSG))]
    pub allocator: Option<Vec<Allocator>>,
    /// glibc malloc's arena limit (`MALLOC_ARENA_MAX`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), inner(range(min = 1, max = 128)))]
    #[x_kube(validation = Rule::new(UNIQUE_INTS).message(UNIQUE_MSG))]
    pub malloc_arena_max: Option<Vec<i32>>,
    /// The JVM's maximum heap (`-Xmx`), a quantity such as 5Gi (Besu).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), inner(length(max = 32)))]
    #[x_kube(
        validation = Rule::new("self.all(q, isQuantity(q) && quantity(q).isGreaterThan(quantity('0')))")
            .message("every value must be a positive quantity such as 5Gi"),
        validation = Rule::new(UNIQUE_QUANTITIES).message(UNIQUE_QUANTITIES_MSG),
    )]
    pub heap: Option<Vec<String>>,
    /// Memory held by a hog beside the validator, inside its pod's memory (stress-ng
    /// `--vm-bytes`), a quantity; 0 runs no hog (nodeos).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 16), inner(length(max = 32)))]
    #[x_kube(
        validation = Rule::new("self.all(q, isQuantity(q) && quantity(q).compareTo(quantity('0')) >= 0)")
            .message("every value must be a quantity of 0 or more, such as 0, 6Gi or 8G"),
        validation = Rule::new(UNIQUE_QUANTITIES).message(UNIQUE_QUANTITIES_MSG),
    )]
    pub memory_pressure: Option<Vec<String>>,
    /// How nodeos maps its state (`--database-map-mode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4))]
    #[x_kube(validation = Rule::new(UNIQUE_INTS).message(UNIQUE_MSG))]
    pub database_map_mode: Option<Vec<super::nodeos::NodeosMapMode>>,
    /// Where transaction signatures are verified: `cpu`, or `gpu` (Agave `--cuda`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 2))]
    #[x_kube(validation = Rule::new(UNIQUE_INTS).message(UNIQUE_MSG))]
    pub sigverify: Option<Vec<Sigverify>>,
    /// Any other setting, as an environment variable, a CLI argument or a config key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4))]
    #[x_kube(validation = Rule::new("self.all(k, self.exists_one(l, l.name == k.name))")
        .message("each knob name may appear once: rename or merge the repeated knob"))]
    pub knobs: Option<Vec<KnobSweep>>,
}

/// A memory allocator.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum Allocator {
    Jemalloc,
    Glibc,
    Tcmalloc,
    Mimalloc,
}

/// Where signatures are verified.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema, Default,
)]
#[serde(rename_all = "camelCase")]
pub enum Sigverify {
    #[default]
    Cpu,
    Gpu,
}

/// A typed client setting the sweep can vary (the fields after `threads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Setting {
    Allocator,
    MallocArenaMax,
    Heap,
    MemoryPressure,
    DatabaseMapMode,
    Sigverify,
}

impl Setting {
    pub const ALL: [Setting; 6] = [
        Setting::Allocator,
        Setting::MallocArenaMax,
        Setting::Heap,
        Setting::MemoryPressure,
        Setting::DatabaseMapMode,
        Setting::Sigverify,
    ];

    /// The sweep field, and the key in a trial point's `settings`.
    pub fn as_str(self) -> &'static str {
        match self {
            Setting::Allocator => "allocator",
            Setting::MallocArenaMax => "mallocArenaMax",
            Setting::Heap => "heap",
            Setting::MemoryPressure => "memoryPressure",
            Setting::DatabaseMapMode => "databaseMapMode",
            Setting::Sigverify => "sigverify",
        }
    }

    /// Whether its values are numbers or quantities, which order by size (the others
    /// are names).
    pub fn is_ordered(self) -> bool {
        matches!(
            self,
            Setting::MallocArenaMax | Setting::Heap | Setting::MemoryPressure
        )
    }

    /// The swept values, as they appear in trial points.
    pub fn values(self, sweep: &SweepSpec) -> Option<Vec<String>> {
        fn text<T: Serialize>(v: &[T]) -> Vec<String> {
            v.iter().map(value_text).collect()
        }
        match self {
            Setting::Allocator => sweep.allocator.as_deref().map(text),
            Setting::MallocArenaMax => sweep.malloc_arena_max.as_deref().map(text),
            Setting::Heap => sweep.heap.as_deref().map(text),
            Setting::MemoryPressure => sweep.memory_pressure.as_deref().map(text),
            Setting::DatabaseMapMode => sweep.database_map_mode.as_deref().map(text),
            Setting::Sigverify => sweep.sigverify.as_deref().map(text),
        }
    }
}

/// A typed value as trial points write it: an enum by its name (`glibc`), a number as
/// its digits.
pub fn value_text<T: Serialize>(x: &T) -> String {
    match serde_json::to_value(x) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// A thread or tile count knob of one client (see docs/clients.md for the mapping).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSweep {
    pub name: ThreadKnob,
    #[schemars(length(min = 1, max = 32), inner(range(min = 1, max = 512)))]
    #[x_kube(validation = Rule::new(UNIQUE_INTS).message(UNIQUE_MSG))]
    pub values: Vec<i32>,
}

/// Thread and tile counts valtune knows how to set, per client.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum ThreadKnob {
    // Agave
    BankingThreads,
    ReplayTransactionsThreads,
    ReplayForksThreads,
    RayonGlobalThreads,
    RpcThreads,
    UnifiedSchedulerHandlerThreads,
    // Firedancer / Frankendancer tiles
    NetTiles,
    QuicTiles,
    VerifyTiles,
    BankTiles,
    ShredTiles,
    ResolvTiles,
    ExecTiles,
    GossvfTiles,
    SignTiles,
    // nodeos
    ChainThreads,
    HttpThreads,
    NetThreads,
    EosVmOcCompileThreads,
}

impl ThreadKnob {
    pub const ALL: [ThreadKnob; 19] = [
        ThreadKnob::BankingThreads,
        ThreadKnob::ReplayTransactionsThreads,
        ThreadKnob::ReplayForksThreads,
        ThreadKnob::RayonGlobalThreads,
        ThreadKnob::RpcThreads,
        ThreadKnob::UnifiedSchedulerHandlerThreads,
        ThreadKnob::NetTiles,
        ThreadKnob::QuicTiles,
        ThreadKnob::VerifyTiles,
        ThreadKnob::BankTiles,
        ThreadKnob::ShredTiles,
        ThreadKnob::ResolvTiles,
        ThreadKnob::ExecTiles,
        ThreadKnob::GossvfTiles,
        ThreadKnob::SignTiles,
        ThreadKnob::ChainThreads,
        ThreadKnob::HttpThreads,
        ThreadKnob::NetThreads,
        ThreadKnob::EosVmOcCompileThreads,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ThreadKnob::BankingThreads => "bankingThreads",
            ThreadKnob::ReplayTransactionsThreads => "replayTransactionsThreads",
            ThreadKnob::ReplayForksThreads => "replayForksThreads",
            ThreadKnob::RayonGlobalThreads => "rayonGlobalThreads",
            ThreadKnob::RpcThreads => "rpcThreads",
            ThreadKnob::UnifiedSchedulerHandlerThreads => "unifiedSchedulerHandlerThreads",
            ThreadKnob::NetTiles => "netTiles",
            ThreadKnob::QuicTiles => "quicTiles",
            ThreadKnob::VerifyTiles => "verifyTiles",
            ThreadKnob::BankTiles => "bankTiles",
            ThreadKnob::ShredTiles => "shredTiles",
            ThreadKnob::ResolvTiles => "resolvTiles",
            ThreadKnob::ExecTiles => "execTiles",
            ThreadKnob::GossvfTiles => "gossvfTiles",
            ThreadKnob::SignTiles => "signTiles",
            ThreadKnob::ChainThreads => "chainThreads",
            ThreadKnob::HttpThreads => "httpThreads",
            ThreadKnob::NetThreads => "netThreads",
            ThreadKnob::EosVmOcCompileThreads => "eosVmOcCompileThreads",
        }
    }
}

/// A generic knob: one of env, arg or configKey says how each value reaches the client.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("[has(self.env), has(self.arg), has(self.configKey)].filter(x, x).size() == 1")
        .message("set exactly one of env, arg or configKey to say how the value reaches the client"),
    validation = Rule::new("!has(self.configKey) || self.values.all(v, !v.contains('\\n') && !v.contains('\\r'))")
        .message("a configKey value must be on one line (a line break would write another key into the config file): write each value on one line")
        .field_path(".values"),
)]
pub struct KnobSweep {
    /// A short name for tables and trial labels.
    #[schemars(length(min = 1, max = 32), regex(pattern = r"^[a-z][a-zA-Z0-9]*$"))]
    pub name: String,
    /// Environment variable of the validator container, e.g. MALLOC_ARENA_MAX.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 128),
        regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$")
    )]
    pub env: Option<String>,
    /// Command-line flag, rendered as `<arg>=<value>`, e.g. --database-map-mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 2, max = 128),
        regex(pattern = r"^--?[A-Za-z0-9][A-Za-z0-9_.-]*$")
    )]
    pub arg: Option<String>,
    /// Dotted key in the client's config file (Firedancer/Besu TOML, nodeos config.ini).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128), regex(pattern = r"^[A-Za-z0-9_.-]+$"))]
    pub config_key: Option<String>,
    #[schemars(length(min = 1, max = 32), inner(length(max = 256)))]
    #[x_kube(validation = Rule::new("self.all(x, self.exists_one(y, y == x))").message(UNIQUE_MSG))]
    pub values: Vec<String>,
}

/// One point of the sweep: the value of each swept parameter. Unswept parameters are
/// absent and keep the template's value.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrialPoint {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages1_gi: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_cache_entries: Option<i32>,
    /// Thread knob name to count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub threads: BTreeMap<String, i32>,
    /// Typed client setting (allocator, heap, ...) to its value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    /// Knob name to value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub knobs: BTreeMap<String, String>,
}

impl TrialPoint {
    /// The point's values as (name, value) pairs, in a fixed order; memory as exact
    /// bytes when `exact`, else in the largest exact binary unit.
    fn parts(&self, exact: bool) -> Vec<(String, String)> {
        let mut parts = Vec::new();
        if let Some(m) = &self.memory {
            let value = parse_quantity(m)
                .map(|b| {
                    if exact {
                        b.to_string()
                    } else {
                        Bytes(b).to_string()
                    }
                })
                .unwrap_or_else(|_| m.clone());
            parts.push(("memory".into(), value));
        }
        let ints = [
            ("cpu", self.cpu),
            ("hugepages1Gi", self.hugepages1_gi),
            ("programCacheEntries", self.program_cache_entries),
        ];
        for (name, value) in ints {
            if let Some(v) = value {
                parts.push((name.into(), v.to_string()));
            }
        }
        for (k, v) in &self.threads {
            let key = if exact {
                format!("threads.{k}")
            } else {
                k.clone()
            };
            parts.push((key, v.to_string()));
        }
        for (k, v) in &self.settings {
            let key = if exact {
                format!("settings.{k}")
            } else {
                k.clone()
            };
            parts.push((key, v.clone()));
        }
        for (k, v) in &self.knobs {
            let key = if exact {
                format!("knobs.{k}")
            } else {
                k.clone()
            };
            parts.push((key, if exact { format!("{v:?}") } else { v.clone() }));
        }
        parts
    }

    /// A stable identity for the point: memory in bytes, so "1Ti" and "1024Gi" are the same
    /// trial and a cosmetic edit of the sweep keeps its results.
    pub fn canonical(&self) -> String {
        let parts: Vec<String> = self
            .parts(true)
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        parts.join(",")
    }

    /// Human-readable form for tables and events: "memory=512Gi cpu=32".
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .parts(false)
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if parts.is_empty() {
            "baseline".into()
        } else {
            parts.join(" ")
        }
    }
}

impl SweepSpec {
    /// How many points the sweep has (before repetitions).
    pub fn points(&self) -> usize {
        let len = |n: Option<usize>| n.unwrap_or(1);
        len(self.memory.as_ref().map(Vec::len))
            * len(self.cpu.as_ref().map(Vec::len))
            * len(self.hugepages1_gi.as_ref().map(Vec::len))
            * len(self.program_cache_entries.as_ref().map(Vec::len))
            * self
                .threads
                .iter()
                .flatten()
                .map(|t| t.values.len())
                .product::<usize>()
            * Setting::ALL
                .iter()
                .map(|s| s.values(self).map_or(1, |v| v.len()))
                .product::<usize>()
            * self
                .knobs
                .iter()
                .flatten()
                .map(|k| k.values.len())
                .product::<usize>()
    }

    /// The cartesian product of the swept values, in the order the values are written
    /// (earlier parameters vary slowest).
    pub fn expand(&self) -> Vec<TrialPoint> {
        let mut points = vec![TrialPoint::default()];
        fn cross<T: Clone>(
            points: Vec<TrialPoint>,
            values: &[T],
            set: impl Fn(&mut TrialPoint, &T),
        ) -> Vec<TrialPoint> {
            let mut out = Vec::with_capacity(points.len() * values.len());
            for p in points {
                for v in values {
                    let mut q = p.clone();
                    set(&mut q, v);
                    out.push(q);
                }
            }
            out
        }
        if let Some(v) = &self.memory {
            points = cross(points, v, |p, m| p.memory = Some(m.clone()));
        }
        if let Some(v) = &self.cpu {
            points = cross(points, v, |p, c| p.cpu = Some(*c));
        }
        if let Some(v) = &self.hugepages1_gi {
            points = cross(points, v, |p, h| p.hugepages1_gi = Some(*h));
        }
        if let Some(v) = &self.program_cache_entries {
            points = cross(points, v, |p, e| p.program_cache_entries = Some(*e));
        }
        for t in self.threads.iter().flatten() {
            let name = t.name.as_str().to_string();
            points = cross(points, &t.values, |p, n| {
                p.threads.insert(name.clone(), *n);
            });
        }
        for setting in Setting::ALL {
            if let Some(values) = setting.values(self) {
                points = cross(points, &values, |p, v| {
                    p.settings.insert(setting.as_str().into(), v.clone());
                });
            }
        }
        for k in self.knobs.iter().flatten() {
            points = cross(points, &k.values, |p, v| {
                p.knobs.insert(k.name.clone(), v.clone());
            });
        }
        points
    }
}

/// The CEL expression for the number of trials a spec asks for; `self` is the spec.
/// Thread and knob lists are capped, so their product is spelled out term by term.
pub fn trial_count_cel() -> String {
    let opt = |field: &str| format!("(has(self.sweep.{field}) ? size(self.sweep.{field}) : 1)");
    let mut terms = vec![
        opt("memory"),
        opt("cpu"),
        opt("hugepages1Gi"),
        opt("programCacheEntries"),
    ];
    terms.extend(Setting::ALL.iter().map(|s| opt(s.as_str())));
    for (list, max) in [("threads", MAX_THREAD_SWEEPS), ("knobs", MAX_KNOB_SWEEPS)] {
        for i in 0..max {
            terms.push(format!(
                "(has(self.sweep.{list}) && size(self.sweep.{list}) > {i} ? size(self.sweep.{list}[{i}].values) : 1)"
            ));
        }
    }
    terms.push("self.trial.repetitions".into());
    terms.join(" * ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_the_cartesian_product_in_written_order() {
        let sweep = SweepSpec {
            memory: Some(vec!["256Gi".into(), "512Gi".into()]),
            program_cache_entries: Some(vec![512, 1024, 2048]),
            threads: Some(vec![ThreadSweep {
                name: ThreadKnob::ReplayTransactionsThreads,
                values: vec![4, 8],
            }]),
            ..Default::default()
        };
        let points = sweep.expand();
        assert_eq!(points.len(), 12);
        assert_eq!(sweep.points(), 12);
        assert_eq!(points[0].memory.as_deref(), Some("256Gi"));
        assert_eq!(points[0].program_cache_entries, Some(512));
        assert_eq!(points[0].threads["replayTransactionsThreads"], 4);
        assert_eq!(points[1].threads["replayTransactionsThreads"], 8);
        assert_eq!(points[2].program_cache_entries, Some(1024));
        assert_eq!(points[11].memory.as_deref(), Some("512Gi"));
        assert_eq!(points[11].program_cache_entries, Some(2048));
    }

    #[test]
    fn typed_settings_are_swept_and_named_by_their_field() {
        let sweep: SweepSpec = serde_saphyr::from_str(
            "allocator: [jemalloc, glibc]\nmallocArenaMax: [1, 2]\nheap: [5Gi]\n",
        )
        .unwrap();
        let points = sweep.expand();
        assert_eq!(sweep.points(), 4);
        assert_eq!(points.len(), 4);
        assert_eq!(points[1].settings["allocator"], "jemalloc");
        assert_eq!(points[1].settings["mallocArenaMax"], "2");
        assert_eq!(
            points[3].describe(),
            "allocator=glibc heap=5Gi mallocArenaMax=2"
        );
        assert!(trial_count_cel().contains("size(self.sweep.mallocArenaMax)"));
    }

    #[test]
    fn an_empty_sweep_is_one_baseline_point() {
        let sweep = SweepSpec::default();
        assert_eq!(sweep.points(), 1);
        assert_eq!(sweep.expand(), vec![TrialPoint::default()]);
        assert_eq!(TrialPoint::default().describe(), "baseline");
    }

    #[test]
    fn trial_count_expression_multiplies_every_list() {
        let cel = trial_count_cel();
        assert!(cel.contains("size(self.sweep.memory)"));
        assert!(cel.contains("self.sweep.threads[3].values"));
        assert!(cel.contains("self.sweep.knobs[3].values"));
        assert!(cel.ends_with("self.trial.repetitions"));
    }
}
