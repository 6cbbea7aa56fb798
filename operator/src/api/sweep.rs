//! What an experiment sweeps, and its expansion into trial points.
//!
//! Each swept parameter is a list of values, or (an ordered one) a range `min`..`max` by
//! `step` under `ranges`; the experiment runs the cartesian product of all of them,
//! `repetitions` times. An unswept parameter keeps the template's value.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use kube::core::Rule;

use super::quantity::{Bytes, parse_quantity};

/// Lists of thread and knob sweeps are capped so the admission rule that bounds the sweep
/// size can spell out the product term by term (CEL has no fold).
pub const MAX_THREAD_SWEEPS: usize = 4;
pub const MAX_KNOB_SWEEPS: usize = 4;
/// The most values one parameter may sweep.
pub const MAX_VALUES: usize = 32;
/// Ranges are capped as thread and knob lists are (the sweep-size rule spells them out).
pub const MAX_RANGES: usize = 4;

const UNIQUE_INTS: &str = "self.all(x, self.exists_one(y, y == x))";
const UNIQUE_MSG: &str = "values must be unique: remove the repeated value";
const UNIQUE_QUANTITIES: &str = "!self.all(q, isQuantity(q)) || self.all(a, self.exists_one(b, quantity(a).compareTo(quantity(b)) == 0))";
const UNIQUE_QUANTITIES_MSG: &str =
    "values must be unique (1Ti and 1024Gi are the same size): remove the repeated value";

/// The parameters to sweep. Every list present must be non-empty and free of duplicates.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = list_and_range_rule())]
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
    pub database_map_mode: Option<Vec<super::tuning::DatabaseMapMode>>,
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
    /// Ordered parameters swept as a range instead of a list: `min`, `min + step`, ...,
    /// `max` (docs/api.md, "Ranges").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4))]
    #[x_kube(validation = Rule::new("self.all(r, self.exists_one(s, s.name == r.name))")
        .message("each parameter may have one range: remove the repeated name"))]
    pub ranges: Option<Vec<RangeSweep>>,
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

/// An ordered parameter swept as a range: every value from `min` to `max` by `step`.
/// Quantities (memory, heap, memoryPressure) are written as quantities (`128Gi`), counts
/// as whole numbers (`'4'`), each as a string.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = range_name_rule(),
    validation = Rule::new("self.name != 'programCacheEntries'")
        .message("each programCacheEntries value needs an image built with it (template.agave.programCacheImages): list the values in sweep.programCacheEntries instead of a range")
        .field_path(".name"),
    validation = range_type_rule(),
    validation = Rule::new(format!("!{RANGE_PARSES} || {} <= 0", range_cmp("min", "max")))
        .message("min is above max: swap them")
        .field_path(".min"),
    validation = Rule::new(format!("!{RANGE_PARSES} || {} > 0", range_cmp("step", "0")))
        .message("step must be above 0")
        .field_path(".step"),
    validation = Rule::new(format!("!{RANGE_PARSES} || {RANGE_WHOLE}"))
        .message("min, max and step must be whole numbers of bytes (1Gi, not 0.5) or counts")
        .field_path(".step"),
    validation = Rule::new(format!("!{RANGE_PARSES} || !{RANGE_WHOLE} || {} <= 0 || ({} - {}) % {} == 0", range_cmp("step", "0"), range_int("max"), range_int("min"), range_int("step")))
        .message("step does not divide max - min, so the range would not end at max: change step to a divisor of max - min, or max to min plus a multiple of step")
        .field_path(".step"),
    validation = Rule::new(format!("!{RANGE_PARSES} || !{RANGE_WHOLE} || {} <= 0 || {} > 0 || ({} - {}) / {} < {MAX_VALUES}", range_cmp("step", "0"), range_cmp("min", "max"), range_int("max"), range_int("min"), range_int("step")))
        .message("the range has more than 32 values (the most one parameter may sweep): raise step or narrow min..max")
        .field_path(".step"),
    validation = range_bounds_rule(),
)]
pub struct RangeSweep {
    /// The parameter: memory, cpu, hugepages1Gi, mallocArenaMax, heap, memoryPressure, or
    /// a thread knob's name (bankingThreads, verifyTiles, ...). Parameters whose values
    /// are names (allocator, databaseMapMode, sigverify, sweep.knobs) have no order and
    /// are swept as lists.
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    /// Strings, counts too (`'4'`): the admission rules' cost is bounded by their length.
    #[schemars(length(min = 1, max = 32))]
    pub min: String,
    #[schemars(length(min = 1, max = 32))]
    pub max: String,
    #[schemars(length(min = 1, max = 32))]
    pub step: String,
}

/// Range names whose values are quantities (written `128Gi`).
pub const RANGE_QUANTITIES: [&str; 3] = ["memory", "heap", "memoryPressure"];
/// Range names whose values are counts, with the bounds their lists have.
pub const RANGE_COUNTS: [(&str, i64, i64); 3] = [
    ("cpu", 1, 1024),
    ("hugepages1Gi", 0, 4096),
    ("mallocArenaMax", 1, 128),
];
/// The bounds of a thread or tile count (as `ThreadSweep::values`).
const THREAD_BOUNDS: (i64, i64) = (1, 512);

/// CEL on a range: its three values parse as quantities (a number is one).
const RANGE_PARSES: &str =
    "(isQuantity(self.min) && isQuantity(self.max) && isQuantity(self.step))";
/// CEL on a range: its values are whole numbers that fit an int.
const RANGE_WHOLE: &str = "(quantity(self.min).isInteger() && quantity(self.max).isInteger() && quantity(self.step).isInteger())";

fn range_q(v: &str) -> String {
    if v == "0" {
        "quantity('0')".into()
    } else {
        format!("quantity(self.{v})")
    }
}

fn range_cmp(a: &str, b: &str) -> String {
    format!("{}.compareTo({})", range_q(a), range_q(b))
}

fn range_int(v: &str) -> String {
    format!("{}.asInteger()", range_q(v))
}

fn quoted(names: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    names
        .into_iter()
        .map(|n| format!("'{}'", n.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The names a range may take: the ordered parameters and the thread knobs.
pub fn range_names() -> Vec<&'static str> {
    RANGE_QUANTITIES
        .into_iter()
        .chain(RANGE_COUNTS.map(|c| c.0))
        .chain(ThreadKnob::ALL.map(ThreadKnob::as_str))
        .collect()
}

fn range_name_rule() -> Rule {
    Rule::new(format!(
        "self.name == 'programCacheEntries' || self.name in [{}]",
        quoted(range_names())
    ))
    .message("a range sweeps an ordered parameter: memory, cpu, hugepages1Gi, mallocArenaMax, heap, memoryPressure or a thread knob (bankingThreads, verifyTiles, ...); allocator, databaseMapMode, sigverify and generic knobs (sweep.knobs) have values with no order: list them in their own field instead")
    .field_path(".name")
}

/// Counts are whole numbers, quantities quantities (a count written `4Gi` is a slip).
fn range_type_rule() -> Rule {
    let all = |p: &str| {
        format!(
            "({} && {} && {})",
            p.replace('X', "self.min"),
            p.replace('X', "self.max"),
            p.replace('X', "self.step")
        )
    };
    Rule::new(format!(
        "self.name in [{}] ? {} : {}",
        quoted(RANGE_QUANTITIES),
        all("isQuantity(X)"),
        all("X.matches('^[0-9]+$')")
    ))
    .message("memory, heap and memoryPressure ranges are quantities (min: 128Gi), count ranges whole numbers (min: '4'): write min, max and step so")
    .field_path(".min")
}

/// Each count's bounds (a list's item bounds); memory and heap above 0, pressure 0 or more.
fn range_bounds_rule() -> Rule {
    let int = |v: &str| format!("int(self.{v})");
    let mut arms: Vec<String> = RANGE_COUNTS
        .iter()
        .map(|(n, lo, hi)| {
            format!(
                "self.name == '{n}' ? ({} >= {lo} && {} <= {hi})",
                int("min"),
                int("max")
            )
        })
        .collect();
    let (lo, hi) = THREAD_BOUNDS;
    arms.push(format!(
        "self.name in [{}] ? ({} >= {lo} && {} <= {hi})",
        quoted(ThreadKnob::ALL.map(ThreadKnob::as_str)),
        int("min"),
        int("max")
    ));
    arms.push(format!(
        "self.name == 'memoryPressure' ? {} >= 0",
        range_cmp("min", "0")
    ));
    arms.push(format!(
        "self.name in ['memory', 'heap'] ? {} > 0",
        range_cmp("min", "0")
    ));
    Rule::new(format!(
        "!{RANGE_PARSES} || !(self.name in [{}]) || ({} : true)",
        quoted(range_names()),
        arms.join(" : ")
    ))
    .message("the range leaves its parameter's bounds: cpu 1..1024, hugepages1Gi 0..4096, mallocArenaMax 1..128, thread and tile counts 1..512, memory and heap above 0, memoryPressure 0 or more: move min or max inside them")
    .field_path(".min")
}

impl RangeSweep {
    /// The range's values in order, as a list of its parameter writes them: quantities in
    /// the largest exact binary unit (`128Gi`), counts as numbers. Empty when it does not
    /// parse or is empty (admission refuses both).
    pub fn values(&self) -> Vec<String> {
        let num = |v: &str| parse_quantity(v).ok();
        let (Some(min), Some(max), Some(step)) = (num(&self.min), num(&self.max), num(&self.step))
        else {
            return Vec::new();
        };
        if step == 0 || min > max {
            return Vec::new();
        }
        let quantity = RANGE_QUANTITIES.contains(&self.name.as_str());
        (0..)
            .map(|i| min + i * step)
            .take_while(|v| *v <= max)
            .take(MAX_VALUES)
            .map(|v| {
                if quantity {
                    Bytes(v).to_string()
                } else {
                    v.to_string()
                }
            })
            .collect()
    }
}

/// CEL on the experiment spec: whether `name` (a sweep field or a thread knob) is swept
/// as a range.
pub fn cel_ranged(name: &str) -> String {
    format!("(has(self.sweep.ranges) && self.sweep.ranges.exists(r, r.name == '{name}'))")
}

/// CEL on the experiment spec: whether `field` is swept, as a list or a range.
pub fn cel_swept(field: &str) -> String {
    format!("(has(self.sweep.{field}) || {})", cel_ranged(field))
}

/// CEL on the experiment spec, where `field` is swept (as a list or a range): the values
/// that bound it, the list or the range's `[min, max]` (as strings for quantities, ints
/// for counts). Every value of a range lies between its ends, so a rule over all values
/// that is monotone in the value (a bound, a least or a most) reads these.
pub fn cel_bounds(field: &str) -> String {
    let ends = if RANGE_QUANTITIES.contains(&field) {
        "[r.min, r.max]"
    } else {
        "[int(r.min), int(r.max)]"
    };
    format!(
        "(has(self.sweep.{field}) ? self.sweep.{field} : self.sweep.ranges.filter(r, r.name == '{field}').map(r, {ends})[0])"
    )
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

/// A parameter is swept as a list or as a range, not both.
fn list_and_range_rule() -> Rule {
    let fields: Vec<String> = RANGE_QUANTITIES
        .into_iter()
        .chain(RANGE_COUNTS.map(|c| c.0))
        .map(|f| format!("(r.name == '{f}' && has(self.{f}))"))
        .collect();
    Rule::new(format!(
        "!has(self.ranges) || self.ranges.all(r, !({} || (has(self.threads) && self.threads.exists(t, t.name == r.name))))",
        fields.join(" || ")
    ))
    .message("a parameter is swept both as a list and as a range: keep one of them")
    .field_path(".ranges")
}

impl SweepSpec {
    /// The sweep with its ranges written out as lists (each range's values in order), so
    /// everything downstream reads lists. A range beside a list of the same parameter
    /// (admission refuses it) replaces the list.
    pub fn resolved(&self) -> SweepSpec {
        let mut s = self.clone();
        for r in s.ranges.take().into_iter().flatten() {
            let values = r.values();
            let ints = || values.iter().filter_map(|v| v.parse().ok()).collect();
            match r.name.as_str() {
                "memory" => s.memory = Some(values),
                "heap" => s.heap = Some(values),
                "memoryPressure" => s.memory_pressure = Some(values),
                "cpu" => s.cpu = Some(ints()),
                "hugepages1Gi" => s.hugepages1_gi = Some(ints()),
                "mallocArenaMax" => s.malloc_arena_max = Some(ints()),
                name => {
                    let Ok(knob) = serde_json::from_value::<ThreadKnob>(name.into()) else {
                        continue;
                    };
                    let threads = s.threads.get_or_insert_with(Vec::new);
                    threads.retain(|t| t.name != knob);
                    threads.push(ThreadSweep {
                        name: knob,
                        values: ints(),
                    });
                }
            }
        }
        s
    }

    /// How many points the sweep has (before repetitions).
    pub fn points(&self) -> usize {
        if self.ranges.is_some() {
            return self.resolved().points();
        }
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
        if self.ranges.is_some() {
            return self.resolved().expand();
        }
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
    // A range's count (1 where it does not parse: its own rules refuse it, and a
    // division by zero would fail this rule with an error instead of a message).
    for i in 0..MAX_RANGES {
        let r = format!("self.sweep.ranges[{i}]");
        let q = |v: &str| format!("quantity({r}.{v})");
        let parses = ["min", "max", "step"]
            .map(|v| format!("isQuantity({r}.{v}) && {}.isInteger()", q(v)))
            .join(" && ");
        terms.push(format!(
            "(has(self.sweep.ranges) && size(self.sweep.ranges) > {i} && {parses} && {}.isGreaterThan(quantity('0')) && !{}.isGreaterThan({}) ? ({}.asInteger() - {}.asInteger()) / {}.asInteger() + 1 : 1)",
            q("step"), q("min"), q("max"), q("max"), q("min"), q("step")
        ));
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
    fn a_range_expands_to_the_list_it_stands_for() {
        let ranged: SweepSpec = serde_saphyr::from_str(
            "ranges:\n  - {name: memory, min: 128Gi, max: 1536Gi, step: 64Gi}\n  - {name: bankingThreads, min: '4', max: '8', step: '2'}\n",
        )
        .unwrap();
        let memory: Vec<String> = (2..=24).map(|i| format!("{}Gi", i * 64)).collect();
        let listed = SweepSpec {
            memory: Some(memory.clone()),
            threads: Some(vec![ThreadSweep {
                name: ThreadKnob::BankingThreads,
                values: vec![4, 6, 8],
            }]),
            ..Default::default()
        };
        assert_eq!(ranged.points(), 23 * 3);
        // The same points (1Ti is 1024Gi), so the same trial names, as the list written out.
        let canonical = |s: &SweepSpec| {
            s.expand()
                .iter()
                .map(TrialPoint::canonical)
                .collect::<Vec<_>>()
        };
        assert_eq!(canonical(&ranged), canonical(&listed));
        assert_eq!(ranged.resolved().memory.unwrap()[14], "1Ti");
        assert_eq!(ranged.resolved().ranges, None);
    }

    #[test]
    fn range_values_by_kind() {
        let r = |name: &str, min: &str, max: &str, step: &str| RangeSweep {
            name: name.into(),
            min: min.into(),
            max: max.into(),
            step: step.into(),
        };
        // (case, range, values)
        let cases: [(&str, RangeSweep, Vec<&str>); 5] = [
            (
                "counts",
                r("mallocArenaMax", "1", "4", "1"),
                vec!["1", "2", "3", "4"],
            ),
            (
                "quantities from 0",
                r("memoryPressure", "0", "4Gi", "2Gi"),
                vec!["0", "2Gi", "4Gi"],
            ),
            ("one value", r("heap", "5Gi", "5Gi", "1Gi"), vec!["5Gi"]),
            ("min above max: none", r("cpu", "8", "4", "1"), vec![]),
            ("a zero step: none", r("cpu", "4", "8", "0"), vec![]),
        ];
        for (case, range, want) in cases {
            assert_eq!(range.values(), want, "{case}");
        }
        // Capped at the most one parameter may sweep (admission refuses more).
        assert_eq!(r("cpu", "1", "100", "1").values().len(), MAX_VALUES);
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
