//! One view of an experiment's trials, pure: grouped by point (its canonical form, so
//! "1Ti" and "1024Gi" are one point) and repetition, the points in the order of the
//! swept values (numeric where the values are numbers or quantities, as written
//! otherwise). The status summary, the recommendation, the strategies and `valtune
//! report` all read it, so they group trials one way.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use kube::ResourceExt;

use crate::api::quantity::parse_quantity;
use crate::api::sweep::{Setting, SweepSpec, TrialPoint};
use crate::api::trial::{TrialOutcome, TrialPair, TrialPhase, TrialResults, ValidatorTrial};
use crate::results::stats::{self, Estimate, Interval, Method};

/// What the dataset keeps of a trial: who it is, where it stands, what it measured.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TrialRecord {
    pub name: String,
    /// The point as the trial's spec holds it.
    pub point: TrialPoint,
    pub repetition: i32,
    pub phase: TrialPhase,
    pub outcome: Option<TrialOutcome>,
    pub results: Option<TrialResults>,
    /// The node of its current (or last) attempt.
    pub node: Option<String>,
    /// Why it is where it is (its status message: for a finished trial, why it ended).
    pub message: Option<String>,
    pub started: Option<Timestamp>,
    pub window_start: Option<Timestamp>,
    pub window_end: Option<Timestamp>,
    pub finished: Option<Timestamp>,
    /// The trial is being deleted.
    pub deleting: bool,
    /// The pair it runs in (a paired comparison).
    pub pair: Option<TrialPair>,
    /// The node (its `kubernetes.io/hostname` label) its spec pins it to.
    pub pinned: Option<String>,
    /// Early abort ended its window (status.earlyAbort): a FellBehind of a shorter window.
    pub early_abort: bool,
}

/// How much of its window a finished trial measured: only whole windows feed figures and
/// pairs (a window cut short measured a different stretch of the chain, and a partial
/// mean is not comparable with a whole one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measured {
    /// Its whole window (KeptUp, or FellBehind at the window's end).
    Full,
    /// Early abort ended it (FellBehind): a sequential rule's verdict, not a whole window.
    EndedEarly,
    /// Part of its window: OOM-killed or aborted by an `abortWhen` rule.
    Partial(TrialOutcome),
    /// Nothing usable: a failure (Crashed, NodeLost, TimedOut, ...), or not finished.
    Nothing,
}

impl Measured {
    pub fn as_str(self) -> &'static str {
        match self {
            Measured::Full => "full",
            Measured::EndedEarly => "ended-early",
            Measured::Partial(_) => "partial",
            Measured::Nothing => "none",
        }
    }

    /// Why its figures are set apart (None: they are not).
    pub fn why_apart(self, outcome: Option<TrialOutcome>) -> Option<String> {
        match self {
            Measured::Full => None,
            Measured::EndedEarly => Some("early abort ended its window".into()),
            Measured::Partial(o) => Some(format!("{}: part of its window only", o.as_str())),
            Measured::Nothing => Some(match outcome {
                Some(o) => format!("{}: measured nothing", o.as_str()),
                None => "not finished".into(),
            }),
        }
    }
}

impl TrialRecord {
    pub fn measured(&self) -> Measured {
        if !self.phase.is_finished() {
            return Measured::Nothing;
        }
        match self.outcome {
            Some(TrialOutcome::KeptUp) => Measured::Full,
            Some(TrialOutcome::FellBehind) if self.early_abort => Measured::EndedEarly,
            Some(TrialOutcome::FellBehind) => Measured::Full,
            Some(o @ (TrialOutcome::OOMKilled | TrialOutcome::Aborted)) => Measured::Partial(o),
            _ => Measured::Nothing,
        }
    }

    /// A figure of a whole window.
    pub fn full_figure(&self, figure: impl Fn(&TrialResults) -> Option<f64>) -> Option<f64> {
        (self.measured() == Measured::Full)
            .then(|| self.results.as_ref().and_then(figure))
            .flatten()
    }
}

/// A node a paired comparison may place a trial on: it matches the template's placement.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NodeSlot {
    pub name: String,
    /// Its `kubernetes.io/hostname` label, which a pinned trial selects.
    pub hostname: String,
    /// Its value of the comparison's `matchNodesBy` label ("" without it): nodes of one
    /// class are a match.
    pub class: String,
    /// A valtune pod of any experiment runs there.
    pub busy: bool,
}

impl From<&ValidatorTrial> for TrialRecord {
    fn from(t: &ValidatorTrial) -> Self {
        let st = t.status.clone().unwrap_or_default();
        TrialRecord {
            name: t.name_any(),
            point: t.spec.point.clone(),
            repetition: t.spec.repetition,
            phase: st.phase,
            outcome: st.outcome,
            results: st.results,
            node: st.node_name,
            message: st.message,
            started: st.started_at.map(|t| t.0),
            window_start: st.window_start.map(|t| t.0),
            window_end: st.window_end.map(|t| t.0),
            finished: st.finished_at.map(|t| t.0),
            deleting: t.metadata.deletion_timestamp.is_some(),
            pair: t.spec.pair.clone(),
            pinned: t
                .spec
                .template
                .placement
                .node_selector
                .get(HOSTNAME_LABEL)
                .cloned(),
            early_abort: st.early_abort.is_some(),
        }
    }
}

/// The well-known label a pinned trial's node selector names its node by.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// How a swept parameter's values order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// By the number they stand for: quantities as bytes ("128Gi" < "1Ti" < "1536Gi"),
    /// counts as integers.
    Numeric,
    /// As the sweep writes them (allocators, map modes, sigverify, generic knobs).
    AsWritten,
}

/// Where a swept parameter lives in a trial point.
#[derive(Clone, Debug, PartialEq)]
enum Field {
    Memory,
    Cpu,
    Hugepages1Gi,
    ProgramCacheEntries,
    Thread(String),
    Setting(Setting),
    Knob(String),
}

impl Field {
    fn value(&self, p: &TrialPoint) -> Option<String> {
        let int = |v: Option<i32>| v.map(|v| v.to_string());
        match self {
            Field::Memory => p.memory.clone(),
            Field::Cpu => int(p.cpu),
            Field::Hugepages1Gi => int(p.hugepages1_gi),
            Field::ProgramCacheEntries => int(p.program_cache_entries),
            Field::Thread(name) => int(p.threads.get(name).copied()),
            Field::Setting(s) => p.settings.get(s.as_str()).cloned(),
            Field::Knob(name) => p.knobs.get(name).cloned(),
        }
    }
}

/// A point's place along one dimension; absent and unknown values sort last.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    Number(u128),
    Listed(usize),
    Unlisted,
    Absent,
}

/// One swept parameter, with its values in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Dimension {
    /// As tables name it: "memory", "bankingThreads", "heap", a knob's name.
    pub name: String,
    pub order: Order,
    /// The swept values, in `order`.
    pub values: Vec<String>,
    field: Field,
}

impl Dimension {
    fn new(name: &str, field: Field, order: Order, mut values: Vec<String>) -> Self {
        if order == Order::Numeric {
            values.sort_by_key(|v| number(v).map_or(Rank::Unlisted, Rank::Number));
        }
        Dimension {
            name: name.to_string(),
            order,
            values,
            field,
        }
    }

    /// The point's value of this parameter, as written.
    pub fn value(&self, p: &TrialPoint) -> Option<String> {
        self.field.value(p)
    }

    fn rank(&self, p: &TrialPoint) -> Rank {
        let Some(v) = self.value(p) else {
            return Rank::Absent;
        };
        match self.order {
            Order::Numeric => number(&v).map_or(Rank::Unlisted, Rank::Number),
            Order::AsWritten => self
                .values
                .iter()
                .position(|w| *w == v)
                .map_or(Rank::Unlisted, Rank::Listed),
        }
    }
}

/// The number a numeric value stands for: a quantity in bytes, or a plain count.
fn number(value: &str) -> Option<u128> {
    parse_quantity(value).ok()
}

/// The swept parameters in the order `SweepSpec::expand` varies them (earlier slowest).
fn dimensions(sweep: &SweepSpec) -> Vec<Dimension> {
    let sweep = &sweep.resolved();
    let ints = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>();
    let mut dims = Vec::new();
    if let Some(v) = &sweep.memory {
        dims.push(Dimension::new(
            "memory",
            Field::Memory,
            Order::Numeric,
            v.clone(),
        ));
    }
    let counts = [
        ("cpu", Field::Cpu, &sweep.cpu),
        ("hugepages1Gi", Field::Hugepages1Gi, &sweep.hugepages1_gi),
        (
            "programCacheEntries",
            Field::ProgramCacheEntries,
            &sweep.program_cache_entries,
        ),
    ];
    for (name, field, values) in counts {
        if let Some(v) = values {
            dims.push(Dimension::new(name, field, Order::Numeric, ints(v)));
        }
    }
    for t in sweep.threads.iter().flatten() {
        let name = t.name.as_str();
        dims.push(Dimension::new(
            name,
            Field::Thread(name.to_string()),
            Order::Numeric,
            ints(&t.values),
        ));
    }
    for s in Setting::ALL {
        if let Some(v) = s.values(sweep) {
            let order = if s.is_ordered() {
                Order::Numeric
            } else {
                Order::AsWritten
            };
            dims.push(Dimension::new(s.as_str(), Field::Setting(s), order, v));
        }
    }
    for k in sweep.knobs.iter().flatten() {
        dims.push(Dimension::new(
            &k.name,
            Field::Knob(k.name.clone()),
            Order::AsWritten,
            k.values.clone(),
        ));
    }
    dims
}

/// One point and its trials.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// `TrialPoint::canonical()`: the point's identity.
    pub key: String,
    /// The point as the sweep writes it (as its first trial does once it left the sweep).
    pub point: TrialPoint,
    /// The point is in the sweep (trials of points that left it stay, listed last).
    pub in_sweep: bool,
    /// Its trials by repetition, whatever their phase.
    pub trials: Vec<TrialRecord>,
}

impl Point {
    /// Its finished trials, by repetition.
    pub fn finished(&self) -> impl Iterator<Item = &TrialRecord> {
        self.trials.iter().filter(|t| t.phase.is_finished())
    }

    /// The outcome of each finished repetition.
    pub fn outcomes(&self) -> impl Iterator<Item = Option<TrialOutcome>> {
        self.finished().map(|t| t.outcome)
    }

    /// Some repetition was measured, and every measured one kept up with the chain: a
    /// crash or a lost node says nothing of whether the point is enough (it is run again,
    /// not counted as a "no").
    pub fn kept_up(&self) -> bool {
        let (k, n) = self.kept_up_count();
        n > 0 && k == n
    }

    /// A figure's values over the repetitions that measured their whole window: what
    /// means, spreads and intervals are computed from (others are shown apart).
    pub fn figure_values(&self, figure: impl Fn(&TrialResults) -> Option<f64>) -> Vec<f64> {
        self.finished()
            .filter_map(|t| t.full_figure(&figure))
            .collect()
    }

    /// A figure's values over the repetitions whose window was cut short (OOM-killed,
    /// aborted, ended early): shown apart, never pooled with whole windows.
    pub fn cut_short_values(&self, figure: impl Fn(&TrialResults) -> Option<f64>) -> Vec<f64> {
        self.finished()
            .filter(|t| matches!(t.measured(), Measured::Partial(_) | Measured::EndedEarly))
            .filter_map(|t| t.results.as_ref().and_then(&figure))
            .collect()
    }

    /// The finished repetitions whose figures are set apart, with why.
    pub fn set_apart(&self) -> Vec<(&TrialRecord, String)> {
        self.finished()
            .filter_map(|t| Some((t, t.measured().why_apart(t.outcome)?)))
            .collect()
    }

    /// The mean of a figure over its whole-window repetitions, unrounded.
    pub fn mean(&self, figure: impl Fn(&TrialResults) -> Option<f64>) -> Option<f64> {
        stats::mean(&self.figure_values(figure))
    }

    /// A figure over its whole-window repetitions: n, mean, standard deviation and, from
    /// two repetitions on, its 95% interval (Student's t over the repetitions).
    pub fn estimate(&self, figure: impl Fn(&TrialResults) -> Option<f64>) -> Option<Estimate> {
        stats::estimate(&self.figure_values(figure), Method::Repetitions)
    }

    /// How many measured repetitions kept up, of how many were measured (a crash or a
    /// node lost says nothing of whether the point is enough).
    pub fn kept_up_count(&self) -> (usize, usize) {
        let measured: Vec<TrialOutcome> = self
            .outcomes()
            .flatten()
            .filter(|o| o.is_result())
            .collect();
        let k = measured
            .iter()
            .filter(|o| **o == TrialOutcome::KeptUp)
            .count();
        (k, measured.len())
    }

    /// Finished repetitions that measured nothing (Crashed, NodeLost, ...): not counted.
    pub fn unmeasured(&self) -> usize {
        self.outcomes()
            .filter(|o| !o.is_some_and(|o| o.is_result()))
            .count()
    }

    /// "kept up 3/3 [29%, 100%]": the count with its exact (Clopper-Pearson) interval,
    /// and the repetitions that measured nothing, not counted; None before any
    /// repetition was measured.
    pub fn kept_up_support(&self) -> Option<String> {
        let (k, n) = self.kept_up_count();
        let Interval { lo, hi } = stats::binomial(k, n)?;
        let mut s = format!("kept up {k}/{n} [{:.0}%, {:.0}%]", lo * 100.0, hi * 100.0);
        match self.unmeasured() {
            0 => {}
            u => s.push_str(&format!(" ({u} more measured nothing, not counted)")),
        }
        Some(s)
    }
}

/// How an experiment's trials stand against the trials a strategy expects (by name).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Tally {
    /// Expected trials that exist.
    pub created: usize,
    /// Trials holding a node: unfinished expected ones, and unfinished others unless
    /// they are being deleted (a started trial whose point left the sweep runs to its
    /// end).
    pub active: usize,
    /// Expected trials finished, with any outcome.
    pub finished: usize,
    /// Expected trials finished with a measurement.
    pub succeeded: usize,
    /// Expected trials finished without a measurement, in the expected order.
    pub failed: Vec<String>,
}

/// An experiment's trials by point, the points in order: the sweep's (even those without
/// a trial yet) by the dimensions' order, then points that left the sweep.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Dataset {
    dimensions: Vec<Dimension>,
    points: Vec<Point>,
    /// Trial name -> (point, trial) indices.
    index: BTreeMap<String, (usize, usize)>,
    /// The nodes trials may be placed on, when the reconciler observed them (paired
    /// comparisons match nodes; None elsewhere, e.g. `valtune plan`).
    nodes: Option<Vec<NodeSlot>>,
}

impl Dataset {
    pub fn new(sweep: &SweepSpec, trials: impl IntoIterator<Item = TrialRecord>) -> Self {
        let dimensions = dimensions(sweep);
        let mut points: Vec<Point> = Vec::new();
        let mut by_key: BTreeMap<String, usize> = BTreeMap::new();
        for point in sweep.expand() {
            let key = point.canonical();
            if !by_key.contains_key(&key) {
                by_key.insert(key.clone(), points.len());
                points.push(Point {
                    key,
                    point,
                    in_sweep: true,
                    trials: Vec::new(),
                });
            }
        }
        for t in trials {
            let key = t.point.canonical();
            let i = *by_key.entry(key.clone()).or_insert_with(|| {
                points.push(Point {
                    key,
                    point: t.point.clone(),
                    in_sweep: false,
                    trials: Vec::new(),
                });
                points.len() - 1
            });
            points[i].trials.push(t);
        }
        points.sort_by_cached_key(|p| {
            let ranks: Vec<Rank> = dimensions.iter().map(|d| d.rank(&p.point)).collect();
            (!p.in_sweep, ranks, p.key.clone())
        });
        for p in &mut points {
            p.trials
                .sort_by(|a, b| (a.repetition, &a.name).cmp(&(b.repetition, &b.name)));
        }
        Self::indexed(dimensions, points)
    }

    /// The dataset of an experiment's trial objects.
    pub fn from_trials<'a>(
        sweep: &SweepSpec,
        trials: impl IntoIterator<Item = &'a ValidatorTrial>,
    ) -> Self {
        Self::new(sweep, trials.into_iter().map(TrialRecord::from))
    }

    fn indexed(dimensions: Vec<Dimension>, points: Vec<Point>) -> Self {
        let index = points
            .iter()
            .enumerate()
            .flat_map(|(i, p)| {
                p.trials
                    .iter()
                    .enumerate()
                    .map(move |(j, t)| (t.name.clone(), (i, j)))
            })
            .collect();
        Dataset {
            dimensions,
            points,
            index,
            nodes: None,
        }
    }

    /// The same trials, with the nodes they may be placed on.
    pub fn with_nodes(mut self, nodes: Vec<NodeSlot>) -> Self {
        self.nodes = Some(nodes);
        self
    }

    pub fn nodes(&self) -> Option<&[NodeSlot]> {
        self.nodes.as_deref()
    }

    /// The sweep's point whose values are `values` (by parameter name, as the sweep
    /// writes them; numbers and quantities by what they stand for).
    pub fn find_point(&self, values: &BTreeMap<String, String>) -> Option<&Point> {
        let same = |d: &Dimension, a: &str, b: &str| match d.order {
            Order::Numeric => number(a).is_some() && number(a) == number(b),
            Order::AsWritten => a == b,
        };
        self.points.iter().filter(|p| p.in_sweep).find(|p| {
            values.len() == self.dimensions.len()
                && self
                    .dimensions
                    .iter()
                    .all(|d| match (values.get(&d.name), d.value(&p.point)) {
                        (Some(want), Some(have)) => same(d, want, &have),
                        _ => false,
                    })
        })
    }

    /// The swept parameters, slowest-varying first.
    pub fn dimensions(&self) -> &[Dimension] {
        &self.dimensions
    }

    pub fn points(&self) -> &[Point] {
        &self.points
    }

    /// Every trial, point by point in order, then by repetition.
    pub fn trials(&self) -> impl Iterator<Item = &TrialRecord> {
        self.points.iter().flat_map(|p| p.trials.iter())
    }

    pub fn trial(&self, name: &str) -> Option<&TrialRecord> {
        let (i, j) = self.index.get(name)?;
        Some(&self.points[*i].trials[*j])
    }

    /// The same points with only the trials `keep` accepts.
    pub fn only(&self, keep: impl Fn(&TrialRecord) -> bool) -> Dataset {
        let points = self
            .points
            .iter()
            .map(|p| Point {
                trials: p.trials.iter().filter(|t| keep(t)).cloned().collect(),
                ..p.clone()
            })
            .collect();
        let mut d = Self::indexed(self.dimensions.clone(), points);
        d.nodes = self.nodes.clone();
        d
    }

    /// How the trials stand against `expected` (trial names).
    pub fn tally(&self, expected: &[String]) -> Tally {
        let mut tally = Tally::default();
        for name in expected {
            let Some(t) = self.trial(name) else {
                continue;
            };
            tally.created += 1;
            if !t.phase.is_finished() {
                tally.active += 1;
            } else {
                tally.finished += 1;
                if t.phase == TrialPhase::Succeeded {
                    tally.succeeded += 1;
                } else {
                    tally.failed.push(name.clone());
                }
            }
        }
        let expected: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
        tally.active += self
            .trials()
            .filter(|t| {
                !expected.contains(t.name.as_str()) && !t.deleting && !t.phase.is_finished()
            })
            .count();
        tally
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(yaml: &str) -> SweepSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn point(yaml: &str) -> TrialPoint {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn record(name: &str, point_yaml: &str, repetition: i32, phase: TrialPhase) -> TrialRecord {
        TrialRecord {
            name: name.into(),
            point: point(point_yaml),
            repetition,
            phase,
            ..Default::default()
        }
    }

    fn described(d: &Dataset) -> Vec<String> {
        d.points().iter().map(|p| p.point.describe()).collect()
    }

    #[test]
    fn numeric_values_sort_by_the_number_they_stand_for() {
        let d = Dataset::new(&sweep("memory: [1536Gi, 128Gi, 1Ti, 512G]"), []);
        assert_eq!(
            described(&d),
            [
                "memory=128Gi",
                "memory=512000000000",
                "memory=1Ti",
                "memory=1536Gi"
            ]
        );
        assert_eq!(d.dimensions()[0].order, Order::Numeric);
        assert_eq!(d.dimensions()[0].values, ["128Gi", "512G", "1Ti", "1536Gi"]);
        let d = Dataset::new(
            &sweep(
                "programCacheEntries: [2048, 512]\nmallocArenaMax: [96, 2]\nheap: [8Gi, 5120Mi]",
            ),
            [],
        );
        // mallocArenaMax varies slower than heap, as in the sweep's expansion.
        assert_eq!(
            described(&d)[..4],
            [
                "programCacheEntries=512 heap=5120Mi mallocArenaMax=2",
                "programCacheEntries=512 heap=8Gi mallocArenaMax=2",
                "programCacheEntries=512 heap=5120Mi mallocArenaMax=96",
                "programCacheEntries=512 heap=8Gi mallocArenaMax=96",
            ]
        );
        assert_eq!(d.points()[4].point.program_cache_entries, Some(2048));
    }

    #[test]
    fn categorical_values_keep_the_order_they_are_written_in_and_mix_with_numbers() {
        let d = Dataset::new(
            &sweep(
                "threads: [{name: bankingThreads, values: [32, 4]}]\nallocator: [jemalloc, glibc]\nknobs: [{name: mode, env: MODE, values: [z, a]}]",
            ),
            [],
        );
        assert_eq!(
            described(&d),
            [
                "bankingThreads=4 allocator=jemalloc mode=z",
                "bankingThreads=4 allocator=jemalloc mode=a",
                "bankingThreads=4 allocator=glibc mode=z",
                "bankingThreads=4 allocator=glibc mode=a",
                "bankingThreads=32 allocator=jemalloc mode=z",
                "bankingThreads=32 allocator=jemalloc mode=a",
                "bankingThreads=32 allocator=glibc mode=z",
                "bankingThreads=32 allocator=glibc mode=a",
            ]
        );
        let orders: Vec<(&str, Order)> = d
            .dimensions()
            .iter()
            .map(|d| (d.name.as_str(), d.order))
            .collect();
        assert_eq!(
            orders,
            [
                ("bankingThreads", Order::Numeric),
                ("allocator", Order::AsWritten),
                ("mode", Order::AsWritten),
            ]
        );
    }

    #[test]
    fn trials_group_by_canonical_point_and_repetition_and_points_that_left_come_last() {
        let d = Dataset::new(
            &sweep("memory: [1Ti, 512Gi]"),
            [
                record("b", "memory: 1024Gi", 2, TrialPhase::Succeeded),
                record("old", "memory: 256Gi", 1, TrialPhase::Measuring),
                record("a", "memory: 1Ti", 1, TrialPhase::Succeeded),
            ],
        );
        let points: Vec<(String, bool, Vec<&str>)> = d
            .points()
            .iter()
            .map(|p| {
                (
                    p.point.describe(),
                    p.in_sweep,
                    p.trials.iter().map(|t| t.name.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            points,
            [
                ("memory=512Gi".to_string(), true, vec![]),
                ("memory=1Ti".to_string(), true, vec!["a", "b"]),
                ("memory=256Gi".to_string(), false, vec!["old"]),
            ]
        );
        assert_eq!(
            d.trials().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["a", "b", "old"]
        );
        assert_eq!(d.trial("b").unwrap().repetition, 2);
        assert!(d.trial("c").is_none());
        let only = d.only(|t| t.name != "a");
        assert_eq!(only.points().len(), 3);
        assert_eq!(only.points()[1].trials.len(), 1);
        assert_eq!(only.trial("b").unwrap().name, "b");
    }

    #[test]
    fn figures_come_from_finished_repetitions_only() {
        let with = |name, rep, phase, outcome, tps| TrialRecord {
            outcome,
            results: Some(TrialResults {
                avg_tps: Some(tps),
                ..Default::default()
            }),
            ..record(name, "memory: 1Ti", rep, phase)
        };
        let d = Dataset::new(
            &sweep("memory: [1Ti]"),
            [
                with(
                    "a",
                    1,
                    TrialPhase::Succeeded,
                    Some(TrialOutcome::KeptUp),
                    10.0,
                ),
                with(
                    "b",
                    2,
                    TrialPhase::Succeeded,
                    Some(TrialOutcome::KeptUp),
                    15.0,
                ),
                with("c", 3, TrialPhase::Collecting, None, 1000.0),
            ],
        );
        let p = &d.points()[0];
        assert_eq!(p.figure_values(|r| r.avg_tps), [10.0, 15.0]);
        assert_eq!(p.mean(|r| r.avg_tps), Some(12.5));
        assert_eq!(p.mean(|r| r.max_tps), None);
        assert!(p.kept_up());
        let failed = with("d", 4, TrialPhase::Failed, Some(TrialOutcome::Crashed), 1.0);
        let d = Dataset::new(&sweep("memory: [1Ti]"), [failed]);
        assert!(!d.points()[0].kept_up());
        assert!(!Dataset::new(&sweep("memory: [1Ti]"), []).points()[0].kept_up());
    }

    /// Only whole windows feed figures: a window cut short (an OOM kill, an abortWhen
    /// rule, early abort) is shown apart, a failure measured nothing, and neither counts
    /// as a kept-up "no" unless it measured one.
    #[test]
    fn only_whole_windows_feed_figures() {
        use TrialOutcome::*;
        // (phase, outcome, early abort): how much it measured, whether its figure is
        // pooled, whether it counts among the measured repetitions of "kept up k of n".
        let cases = [
            (
                TrialPhase::Succeeded,
                Some(KeptUp),
                false,
                Measured::Full,
                true,
                true,
            ),
            (
                TrialPhase::Succeeded,
                Some(FellBehind),
                false,
                Measured::Full,
                true,
                true,
            ),
            (
                TrialPhase::Succeeded,
                Some(FellBehind),
                true,
                Measured::EndedEarly,
                false,
                true,
            ),
            (
                TrialPhase::Succeeded,
                Some(OOMKilled),
                false,
                Measured::Partial(OOMKilled),
                false,
                true,
            ),
            (
                TrialPhase::Succeeded,
                Some(Aborted),
                false,
                Measured::Partial(Aborted),
                false,
                true,
            ),
            (
                TrialPhase::Failed,
                Some(Crashed),
                false,
                Measured::Nothing,
                false,
                false,
            ),
            (
                TrialPhase::Failed,
                Some(NodeLost),
                false,
                Measured::Nothing,
                false,
                false,
            ),
            (
                TrialPhase::Failed,
                Some(TimedOut),
                false,
                Measured::Nothing,
                false,
                false,
            ),
            (
                TrialPhase::Failed,
                Some(MetricsUnavailable),
                false,
                Measured::Nothing,
                false,
                false,
            ),
            (
                TrialPhase::Collecting,
                None,
                false,
                Measured::Nothing,
                false,
                false,
            ),
        ];
        for (phase, outcome, early_abort, measured, pooled, counted) in cases {
            let t = TrialRecord {
                outcome,
                early_abort,
                // A crash's partial window may well have figures: they are not used.
                results: Some(TrialResults {
                    avg_tps: Some(7.0),
                    ..Default::default()
                }),
                ..record("t", "memory: 1Ti", 2, phase)
            };
            assert_eq!(t.measured(), measured, "{outcome:?}");
            let whole = TrialRecord {
                outcome: Some(KeptUp),
                results: Some(TrialResults {
                    avg_tps: Some(10.0),
                    ..Default::default()
                }),
                ..record("w", "memory: 1Ti", 1, TrialPhase::Succeeded)
            };
            let d = Dataset::new(&sweep("memory: [1Ti]"), [whole, t]);
            let p = &d.points()[0];
            let want: &[f64] = if pooled { &[10.0, 7.0] } else { &[10.0] };
            assert_eq!(p.figure_values(|r| r.avg_tps), want, "{outcome:?}");
            assert_eq!(p.kept_up_count().1, 1 + usize::from(counted), "{outcome:?}");
            let apart = p.set_apart();
            assert_eq!(
                apart.len(),
                usize::from(phase.is_finished() && !pooled),
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn a_point_carries_its_count_and_interval() {
        let with = |name, rep, outcome, tps| TrialRecord {
            outcome: Some(outcome),
            results: Some(TrialResults {
                avg_tps: Some(tps),
                ..Default::default()
            }),
            ..record(name, "memory: 1Ti", rep, TrialPhase::Succeeded)
        };
        let crashed = TrialRecord {
            outcome: Some(TrialOutcome::Crashed),
            ..record("d", "memory: 1Ti", 4, TrialPhase::Failed)
        };
        let d = Dataset::new(
            &sweep("memory: [1Ti]"),
            [
                with("a", 1, TrialOutcome::KeptUp, 10.0),
                with("b", 2, TrialOutcome::FellBehind, 12.0),
                with("c", 3, TrialOutcome::KeptUp, 14.0),
                crashed,
            ],
        );
        let p = &d.points()[0];
        let e = p.estimate(|r| r.avg_tps).unwrap();
        assert_eq!((e.n, e.mean, e.sd), (3, 12.0, Some(2.0)));
        assert!(e.interval.unwrap().contains(12.0));
        // The crash is not a measurement: 2 of 3 measured kept up.
        assert_eq!(p.kept_up_count(), (2, 3));
        assert_eq!(
            p.kept_up_support().unwrap(),
            "kept up 2/3 [9%, 99%] (1 more measured nothing, not counted)"
        );
        assert_eq!(
            Dataset::new(&sweep("memory: [1Ti]"), []).points()[0].kept_up_support(),
            None
        );
        // One pass supports little: exactly 2.5%, one-sided, not Wilson's 21%.
        let once = |outcome| {
            Dataset::new(&sweep("memory: [1Ti]"), [with("a", 1, outcome, 10.0)]).points()[0]
                .kept_up_support()
                .unwrap()
        };
        assert_eq!(once(TrialOutcome::KeptUp), "kept up 1/1 [2%, 100%]");
        assert_eq!(once(TrialOutcome::OOMKilled), "kept up 0/1 [0%, 98%]");
    }

    #[test]
    fn the_tally_counts_expected_trials_and_leftovers_that_hold_a_node() {
        let deleting = TrialRecord {
            deleting: true,
            ..record("gone", "memory: 128Gi", 1, TrialPhase::Pending)
        };
        let d = Dataset::new(
            &sweep("memory: [512Gi, 1Ti]"),
            [
                record("a", "memory: 512Gi", 1, TrialPhase::Succeeded),
                record("b", "memory: 1Ti", 1, TrialPhase::Failed),
                record("left", "memory: 256Gi", 1, TrialPhase::Measuring),
                record("done", "memory: 256Gi", 2, TrialPhase::Succeeded),
                deleting,
            ],
        );
        let expected = ["a", "b", "c"].map(String::from);
        assert_eq!(
            d.tally(&expected),
            Tally {
                created: 2,
                active: 1,
                finished: 2,
                succeeded: 1,
                failed: vec!["b".into()],
            }
        );
    }
}
