//! The data behind the report's figures, pure: which series a client's profile plots over
//! each trial's window (its PromQL, title and unit), the time series read for each trial,
//! and the summary per point (mean and 95% interval of a table column, with the points'
//! outcomes). Figures are drawn from these structs only (figures.rs), and they round-trip
//! through CSV, so `valtune report --from DIR` redraws a report without Prometheus.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::api::settings::QueryKey;
use crate::api::sweep::TrialPoint;
use crate::api::trial::TrialOutcome;
use crate::clients::profile::{Layout, MetricProfile};
use crate::report::csv_cell;
use crate::results::analysis::{expand, promql_duration};
use crate::results::dataset::Dataset;
use crate::results::stats;

/// One series a figure plots over each trial's window.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesSpec {
    /// The file name and CSV key: `tps`, `rss`, or a profile figure's name.
    pub name: String,
    pub title: String,
    /// The y axis' unit.
    pub unit: String,
    /// The profile's PromQL with its placeholders (analysis.rs `expand`); a client figure
    /// keeps `$window`/`$range`, read over a trailing bucket (see [`SeriesSpec::promql`]).
    pub query: String,
    pub scale: f64,
    /// A client figure aggregated over a bucket (`$window`, `$range`), not an instant
    /// series.
    pub bucketed: bool,
}

const GIB: f64 = 1.0 / (1u64 << 30) as f64;

impl SeriesSpec {
    /// The query for a pod, evaluated every `step`; a bucketed figure reads each
    /// evaluation's trailing `bucket`.
    pub fn promql(&self, selector: &str, scrape: Duration, bucket: Duration) -> String {
        let q = self
            .query
            .replace(
                "$range",
                &format!("[{}:{}]", promql_duration(bucket), promql_duration(scrape)),
            )
            .replace("$window", &promql_duration(bucket));
        expand(&q, selector, scrape)
    }
}

/// The series of a profile, in the order figures are shown: the paper's (TPS, lag,
/// memory, faults: Figures 3 and 4), then the client's own (program cache, tiles' busy
/// time, block processing percentiles, swap), each over buckets of the window.
pub fn specs(profile: &MetricProfile) -> Vec<SeriesSpec> {
    let lag = profile.lag_unit.as_str();
    let keys: [(QueryKey, &str, &str, String, f64); 7] = [
        (
            QueryKey::Tps,
            "tps",
            "Transactions per second",
            "TPS".into(),
            1.0,
        ),
        (
            QueryKey::SlotLag,
            "lag",
            "Behind the chain",
            lag.into(),
            1.0,
        ),
        (
            QueryKey::BlockLag,
            "lag",
            "Behind the chain",
            lag.into(),
            1.0,
        ),
        (
            QueryKey::RssBytes,
            "rss",
            "Resident memory (RSS)",
            "GiB".into(),
            GIB,
        ),
        (
            QueryKey::VszBytes,
            "vsz",
            "Virtual memory (VSZ)",
            "GiB".into(),
            GIB,
        ),
        (
            QueryKey::MajorFaultsPerSecond,
            "majorFaults",
            "Major page faults",
            "faults/s".into(),
            1.0,
        ),
        (
            QueryKey::MinorFaultsPerSecond,
            "minorFaults",
            "Minor page faults",
            "faults/s".into(),
            1.0,
        ),
    ];
    let mut out: Vec<SeriesSpec> = keys
        .into_iter()
        .filter(|(k, ..)| *k != QueryKey::SlotLag || profile.lag == QueryKey::SlotLag)
        .filter(|(k, ..)| *k != QueryKey::BlockLag || profile.lag == QueryKey::BlockLag)
        .filter_map(|(k, name, title, unit, scale)| {
            Some(SeriesSpec {
                name: name.into(),
                title: title.into(),
                unit,
                query: profile.query(k)?.to_string(),
                scale,
                bucketed: false,
            })
        })
        .collect();
    // A figure of the pod's whole life (`$life`: the snapshot download) is one number, in
    // the table, not a series over the window.
    for f in profile
        .figures
        .iter()
        .filter(|f| !f.query.contains("$life"))
    {
        let (title, unit) = describe_figure(f.name);
        out.push(SeriesSpec {
            name: f.name.into(),
            title,
            unit,
            query: f.query.clone(),
            scale: f.scale,
            bucketed: true,
        });
    }
    out
}

/// A profile figure's name read as a title and a unit: `bankBusyPct` is "bank busy" in
/// %, `blockProcessingP95Ms` "block processing p95" in ms.
pub fn describe_figure(name: &str) -> (String, String) {
    const SUFFIXES: [(&str, &str); 7] = [
        ("UsPerBatch", "µs per batch"),
        ("PerBatch", "per batch"),
        ("PerSecond", "per second"),
        ("Pct", "%"),
        ("GiB", "GiB"),
        ("Ms", "ms"),
        ("Us", "µs"),
    ];
    let (stem, unit) = SUFFIXES
        .iter()
        .find_map(|(s, u)| name.strip_suffix(s).map(|stem| (stem, *u)))
        .unwrap_or((name, "count"));
    let mut title = String::new();
    for c in stem.chars() {
        if c.is_ascii_uppercase() {
            title.push(' ');
            title.push(c.to_ascii_lowercase());
        } else {
            title.push(c);
        }
    }
    let mut chars = title.chars();
    let title = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => title,
    };
    (title, unit.to_string())
}

/// How a point or a trial ended, as figures mark it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mark {
    KeptUp,
    FellBehind,
    OomKilled,
    /// Any other ending (aborted, crashed, timed out ...), or not finished.
    Other,
}

impl Mark {
    pub fn of(outcome: Option<TrialOutcome>) -> Mark {
        match outcome {
            Some(TrialOutcome::KeptUp) => Mark::KeptUp,
            Some(TrialOutcome::FellBehind) => Mark::FellBehind,
            Some(TrialOutcome::OOMKilled) => Mark::OomKilled,
            _ => Mark::Other,
        }
    }

    /// A point's mark: OOM-killed if any repetition was, else fell behind if any did,
    /// kept up when all did.
    pub fn of_point(outcomes: &[Option<TrialOutcome>]) -> Mark {
        let marks: Vec<Mark> = outcomes.iter().map(|o| Mark::of(*o)).collect();
        [Mark::OomKilled, Mark::FellBehind, Mark::Other]
            .into_iter()
            .find(|m| marks.contains(m))
            .unwrap_or(if marks.is_empty() {
                Mark::Other
            } else {
                Mark::KeptUp
            })
    }

    pub fn describe(self) -> &'static str {
        match self {
            Mark::KeptUp => "kept up",
            Mark::FellBehind => "fell behind",
            Mark::OomKilled => "OOM-killed",
            Mark::Other => "other ending",
        }
    }
}

/// One trial's samples over its window.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    pub trial: String,
    /// The point's short label (the swept values).
    pub point: String,
    pub repetition: i32,
    /// The trial's outcome as its status writes it (`OOMKilled`), or `-`.
    pub outcome: String,
    /// (seconds since the window's start, value in the spec's unit).
    pub samples: Vec<(f64, f64)>,
}

impl Trace {
    pub fn mark(&self) -> Mark {
        match self.outcome.as_str() {
            "KeptUp" => Mark::KeptUp,
            "FellBehind" => Mark::FellBehind,
            "OOMKilled" => Mark::OomKilled,
            _ => Mark::Other,
        }
    }

    /// "128Gi #1: OOM-killed": the legend's entry.
    pub fn label(&self, repetitions: bool) -> String {
        let rep = if repetitions {
            format!(" #{}", self.repetition)
        } else {
            String::new()
        };
        format!("{}{rep}: {}", self.point, self.mark().describe())
    }

    /// The last sample's time: where an OOM-killed run ends.
    pub fn end(&self) -> Option<f64> {
        self.samples.last().map(|s| s.0)
    }
}

/// A figure of one series over every trial's window.
#[derive(Clone, Debug, PartialEq)]
pub struct SeriesFigure {
    pub name: String,
    pub title: String,
    pub unit: String,
    /// What the figure describes: the window and the load.
    pub caption: String,
    pub traces: Vec<Trace>,
}

impl SeriesFigure {
    /// The figure of `spec` over the traces with data: a trial with no datapoint gets no
    /// line (an OOM-killed run may end before its first), and a series no trial has data
    /// for gets no figure. What is drawn is then what series.csv holds, so `--from`
    /// redraws the same figure.
    pub fn of(spec: &SeriesSpec, caption: &str, traces: Vec<Trace>) -> Option<SeriesFigure> {
        let traces: Vec<Trace> = traces
            .into_iter()
            .filter(|t| !t.samples.is_empty())
            .collect();
        (!traces.is_empty()).then(|| SeriesFigure {
            name: spec.name.clone(),
            title: spec.title.clone(),
            unit: spec.unit.clone(),
            caption: caption.to_string(),
            traces,
        })
    }
}

/// One point's bar: the mean of a column over its finished repetitions, its 95% interval
/// (two repetitions on), and how its repetitions ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    pub point: String,
    pub n: usize,
    pub mean: f64,
    pub interval: Option<(f64, f64)>,
    /// The interval is from the one run's window (batches of its own samples,
    /// [`WINDOW_MEANS`]): it leaves out the variance between runs (another day, another
    /// node), which only repetitions or pairs measure.
    pub within_window: bool,
    pub mark: Mark,
    /// "kept up 2/3": how many measured repetitions kept up.
    pub support: String,
}

/// Table columns that are a series' mean over the window, with that series: a point run
/// once gets their interval from the series (the window's own stretches,
/// `results::stats::window::interval`).
pub const WINDOW_MEANS: [(&str, &str); 1] = [("AVG TPS", "tps")];

/// The interval of the one run of a point from its samples of the column's series: the
/// interval of the samples' mean from batches of a length chosen from the series
/// (results/stats/window.rs), moved to the column's mean (the status' figure is read
/// with its own query; the samples give the spread). None where the window holds too
/// few independent stretches. AVG TPS leaves out the samples above 3x the window's plain
/// mean (the paper's outliers, `results::analysis::avg_without_outliers`), and so does
/// its interval.
fn window_interval(mean: f64, samples: &[(f64, f64)]) -> Option<(f64, f64)> {
    let all: Vec<f64> = samples.iter().map(|s| s.1).collect();
    let plain = stats::mean(&all)?;
    let values: Vec<f64> = all.into_iter().filter(|v| *v <= 3.0 * plain).collect();
    let m = stats::mean(&values)?;
    let i = stats::window::interval(&values).ok()?.interval;
    Some((mean + i.lo - m, mean + i.hi - m))
}

/// A column of the report's table as bars per point.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryFigure {
    pub name: String,
    pub title: String,
    pub unit: String,
    pub caption: String,
    /// The swept parameters' names: the x axis.
    pub x: String,
    pub bars: Vec<Bar>,
}

/// A point's label under its bar: its swept values alone, in the order of the
/// dimensions ("128Gi", "2 / 30 / 1"), the x axis naming them ([`x_axis`]).
pub fn point_label(data: &Dataset, point: &TrialPoint) -> String {
    let values: Vec<String> = data
        .dimensions()
        .iter()
        .map(|d| d.value(point).unwrap_or_else(|| "-".into()))
        .collect();
    if values.is_empty() {
        point.describe()
    } else {
        values.join(" / ")
    }
}

/// A trial's point in a legend: its value alone when one parameter is swept ("128Gi"),
/// as `name=value` pairs otherwise.
pub fn legend_label(data: &Dataset, point: &TrialPoint) -> String {
    match data.dimensions() {
        [d] => d.value(point).unwrap_or_else(|| point.describe()),
        _ => point.describe(),
    }
}

/// The x axis' name: the swept parameters.
pub fn x_axis(data: &Dataset) -> String {
    let names: Vec<&str> = data.dimensions().iter().map(|d| d.name.as_str()).collect();
    if names.is_empty() {
        "point".into()
    } else {
        names.join(" / ")
    }
}

/// Splits a table header into a title and its unit: "MAX RSS GiB" is (MAX RSS, GiB),
/// "AVG TPS" keeps its name as the unit.
fn header_unit(header: &str) -> (String, String) {
    const UNITS: [&str; 5] = ["GiB", "ms", "s", "%", "blk"];
    match header.rsplit_once(' ') {
        Some((title, unit)) if UNITS.contains(&unit) => (title.to_string(), unit.to_string()),
        _ => (header.to_string(), header.to_string()),
    }
}

/// The summary figures of a table's columns: a bar per point that has the figure. A point
/// run once has an interval only where the column is a window mean of one of `series`.
pub fn summaries(
    data: &Dataset,
    layout: &Layout,
    series: &[SeriesFigure],
    caption: &str,
) -> Vec<SummaryFigure> {
    layout
        .numbers
        .iter()
        .map(|c| {
            let (title, unit) = header_unit(c.header);
            let window_series = WINDOW_MEANS
                .iter()
                .find(|(h, _)| *h == c.header)
                .and_then(|(_, name)| series.iter().find(|f| f.name == *name));
            let bars = data
                .points()
                .iter()
                .filter_map(|p| {
                    let (k, n) = p.kept_up_count();
                    let mut support = format!("kept up {k}/{n}");
                    // Whole windows only; a point whose every window was cut short (an
                    // OOM kill, an abort) still gets its bar, said so and without an
                    // interval: a partial window's mean is not comparable.
                    let e = match p.estimate(c.value) {
                        Some(e) => {
                            let cut = p.cut_short_values(c.value).len();
                            if cut > 0 {
                                support.push_str(&format!("; {cut} cut short, not counted"));
                            }
                            e
                        }
                        None => {
                            let cut = p.cut_short_values(c.value);
                            let mut e = stats::estimate(&cut, stats::Method::Repetitions)?;
                            e.interval = None;
                            support.push_str("; part of its window only");
                            e
                        }
                    };
                    let mut interval = e.interval.map(|i| (i.lo, i.hi));
                    let mut within_window = false;
                    if e.n == 1
                        && let Some(f) = window_series
                    {
                        let run = p
                            .finished()
                            .find(|t| t.results.as_ref().is_some_and(|r| (c.value)(r).is_some()));
                        let trace = run.and_then(|t| f.traces.iter().find(|tr| tr.trial == t.name));
                        interval = trace.and_then(|tr| window_interval(e.mean, &tr.samples));
                        within_window = interval.is_some();
                    }
                    Some(Bar {
                        point: point_label(data, &p.point),
                        n: e.n,
                        mean: e.mean,
                        interval,
                        within_window,
                        mark: Mark::of_point(&p.outcomes().collect::<Vec<_>>()),
                        support,
                    })
                })
                .collect();
            SummaryFigure {
                name: slug(c.header),
                title,
                unit,
                caption: caption.to_string(),
                x: x_axis(data),
                bars,
            }
        })
        .collect()
}

/// A header as a file name: `MAX RSS GiB` is `max-rss-gib`, `0 TPS s` `0-tps-s`.
pub fn slug(header: &str) -> String {
    let mut out = String::new();
    for c in header.chars() {
        match c {
            c if c.is_ascii_alphanumeric() => out.push(c.to_ascii_lowercase()),
            '%' => out.push_str("pct"),
            'µ' => out.push('u'),
            _ if !out.ends_with('-') && !out.is_empty() => out.push('-'),
            _ => {}
        }
    }
    out.trim_end_matches('-').to_string()
}

/// The step of a window's series (at least the scrape interval, at most about 720
/// samples a window) and the bucket a client figure is read over (a 48th of the window,
/// at least four scrapes), both whole scrape intervals.
pub fn steps(window: Duration, scrape: Duration) -> (Duration, Duration) {
    let whole = |d: Duration| {
        let n = (d.as_secs_f64() / scrape.as_secs_f64()).ceil().max(1.0);
        scrape.mul_f64(n)
    };
    (whole(window / 720), whole((window / 48).max(scrape * 4)))
}

const SERIES_HEADER: &str = "figure,title,unit,trial,point,repetition,outcome,seconds,value";
const SUMMARY_HEADER: &str = "figure,title,unit,x,point,n,mean,lo,hi,interval,mark,support";

/// Every figure's time series in one CSV, a sample a line, self-describing (title and
/// unit on each line) so it alone redraws them.
pub fn series_csv(figures: &[SeriesFigure]) -> String {
    let mut out = vec![SERIES_HEADER.to_string()];
    for f in figures {
        for t in &f.traces {
            for (s, v) in &t.samples {
                out.push(
                    [
                        f.name.as_str(),
                        &f.title,
                        &f.unit,
                        &t.trial,
                        &t.point,
                        &t.repetition.to_string(),
                        &t.outcome,
                        &s.to_string(),
                        &v.to_string(),
                    ]
                    .map(csv_cell)
                    .join(","),
                );
            }
        }
    }
    out.join("\n") + "\n"
}

/// The summary figures' bars in one CSV, a bar a line.
pub fn summary_csv(figures: &[SummaryFigure]) -> String {
    let mut out = vec![SUMMARY_HEADER.to_string()];
    let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    for f in figures {
        for b in &f.bars {
            out.push(
                [
                    f.name.as_str(),
                    &f.title,
                    &f.unit,
                    &f.x,
                    &b.point,
                    &b.n.to_string(),
                    &b.mean.to_string(),
                    &opt(b.interval.map(|i| i.0)),
                    &opt(b.interval.map(|i| i.1)),
                    interval_kind(b),
                    b.mark.describe(),
                    &b.support,
                ]
                .map(csv_cell)
                .join(","),
            );
        }
    }
    out.join("\n") + "\n"
}

/// What a bar's interval is over, as summary.csv says it.
fn interval_kind(b: &Bar) -> &'static str {
    match (b.interval, b.within_window) {
        (None, _) => "",
        (Some(_), true) => "window",
        (Some(_), false) => "repetitions",
    }
}

/// The cells of one CSV line (RFC 4180 quoting, as [`csv_cell`] writes it).
pub fn csv_line(line: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => cells.push(std::mem::take(&mut cell)),
            (c, _) => cell.push(c),
        }
    }
    cells.push(cell);
    cells
}

#[derive(Debug, thiserror::Error)]
#[error("{file} line {line}: {detail}")]
pub struct CsvError {
    pub file: &'static str,
    pub line: usize,
    pub detail: String,
}

/// Rows of a CSV with `header`, as maps by column; an error naming the line otherwise.
fn rows(
    file: &'static str,
    text: &str,
    header: &'static str,
) -> Result<Vec<BTreeMap<&'static str, String>>, CsvError> {
    let mut lines = text.lines();
    let head = lines.next().unwrap_or_default();
    if head != header {
        return Err(CsvError {
            file,
            line: 1,
            detail: format!("expected the header {header:?}, found {head:?}"),
        });
    }
    let names: Vec<&str> = header.split(',').collect();
    lines
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| {
            let cells = csv_line(l);
            if cells.len() != names.len() {
                return Err(CsvError {
                    file,
                    line: i + 2,
                    detail: format!("{} cells, expected {}", cells.len(), names.len()),
                });
            }
            Ok(names.iter().copied().zip(cells).collect())
        })
        .collect()
}

fn number<T: std::str::FromStr>(
    file: &'static str,
    line: usize,
    row: &BTreeMap<&str, String>,
    column: &str,
) -> Result<T, CsvError> {
    row[column].parse().map_err(|_| CsvError {
        file,
        line,
        detail: format!("{column} {:?} is not a number", row[column]),
    })
}

/// The figures of [`series_csv`], in the order written, each with `caption`.
pub fn read_series_csv(text: &str, caption: &str) -> Result<Vec<SeriesFigure>, CsvError> {
    const FILE: &str = "series.csv";
    let mut out: Vec<SeriesFigure> = Vec::new();
    for (i, row) in rows(FILE, text, SERIES_HEADER)?.into_iter().enumerate() {
        let line = i + 2;
        let sample = (
            number(FILE, line, &row, "seconds")?,
            number(FILE, line, &row, "value")?,
        );
        if out.last().is_none_or(|f| f.name != row["figure"]) {
            out.push(SeriesFigure {
                name: row["figure"].clone(),
                title: row["title"].clone(),
                unit: row["unit"].clone(),
                caption: caption.to_string(),
                traces: Vec::new(),
            });
        }
        let f = out.last_mut().expect("pushed above");
        if f.traces.last().is_none_or(|t| t.trial != row["trial"]) {
            f.traces.push(Trace {
                trial: row["trial"].clone(),
                point: row["point"].clone(),
                repetition: number(FILE, line, &row, "repetition")?,
                outcome: row["outcome"].clone(),
                samples: Vec::new(),
            });
        }
        f.traces
            .last_mut()
            .expect("pushed above")
            .samples
            .push(sample);
    }
    Ok(out)
}

/// The figures of [`summary_csv`], in the order written, each with `caption`.
pub fn read_summary_csv(text: &str, caption: &str) -> Result<Vec<SummaryFigure>, CsvError> {
    const FILE: &str = "summary.csv";
    let mut out: Vec<SummaryFigure> = Vec::new();
    for (i, row) in rows(FILE, text, SUMMARY_HEADER)?.into_iter().enumerate() {
        let line = i + 2;
        let opt = |c: &str| -> Result<Option<f64>, CsvError> {
            if row[c].is_empty() {
                Ok(None)
            } else {
                number(FILE, line, &row, c).map(Some)
            }
        };
        let interval = match (opt("lo")?, opt("hi")?) {
            (Some(lo), Some(hi)) => Some((lo, hi)),
            _ => None,
        };
        let mark = [Mark::KeptUp, Mark::FellBehind, Mark::OomKilled, Mark::Other]
            .into_iter()
            .find(|m| m.describe() == row["mark"])
            .ok_or_else(|| CsvError {
                file: FILE,
                line,
                detail: format!("unknown mark {:?}", row["mark"]),
            })?;
        if out.last().is_none_or(|f| f.name != row["figure"]) {
            out.push(SummaryFigure {
                name: row["figure"].clone(),
                title: row["title"].clone(),
                unit: row["unit"].clone(),
                caption: caption.to_string(),
                x: row["x"].clone(),
                bars: Vec::new(),
            });
        }
        out.last_mut().expect("pushed above").bars.push(Bar {
            point: row["point"].clone(),
            n: number(FILE, line, &row, "n")?,
            mean: number(FILE, line, &row, "mean")?,
            interval,
            within_window: row["interval"] == "window",
            mark,
            support: row["support"].clone(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::sweep::SweepSpec;
    use crate::api::trial::ValidatorTrial;

    fn agave() -> MetricProfile {
        let t = serde_saphyr::from_str("agave: {image: a}").unwrap();
        crate::clients::CLIENTS[0].profile(&t)
    }

    #[test]
    fn a_profile_plots_the_papers_series_then_its_own_figures_over_buckets() {
        let s = specs(&agave());
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names[..6],
            ["tps", "lag", "rss", "vsz", "majorFaults", "minorFaults"]
        );
        assert!(names.contains(&"programCacheMissesPerBatch"));
        let lag = &s[1];
        assert_eq!(
            (lag.title.as_str(), lag.unit.as_str()),
            ("Behind the chain", "slots")
        );
        let misses = s
            .iter()
            .find(|s| s.name == "programCacheMissesPerBatch")
            .unwrap();
        assert!(misses.bucketed);
        let q = misses.promql(
            "pod=\"p\"",
            Duration::from_secs(15),
            Duration::from_secs(900),
        );
        assert!(
            q.contains("loaded_programs_cache_stats_misses{pod=\"p\"}[900s]"),
            "{q}"
        );
        let min_rss = s.iter().find(|s| s.name == "minRssGiB").unwrap();
        let q = min_rss.promql(
            "pod=\"p\"",
            Duration::from_secs(15),
            Duration::from_secs(900),
        );
        assert!(q.ends_with(")[900s:15s])"), "{q}");
        // The snapshot download is a figure of the pod's whole life, not plotted.
        assert!(
            !names.contains(&crate::clients::profile::SNAPSHOT_DOWNLOAD_FIGURE),
            "{names:?}"
        );
        assert!(s.iter().all(|s| !s.query.contains("$life")));
        // Besu has no TPS query: its lag is in blocks.
        let besu = crate::clients::besu::profile::profile();
        let s = specs(&besu);
        assert_eq!(s[0].name, "lag");
        assert_eq!(s[0].unit, "blocks");
        assert!(s.iter().any(|s| s.name == "blockProcessingP95Ms"));
    }

    #[test]
    fn figure_names_read_as_titles_and_units() {
        let d = |n| describe_figure(n);
        assert_eq!(d("bankBusyPct"), ("Bank busy".into(), "%".into()));
        assert_eq!(
            d("blockProcessingP95Ms"),
            ("Block processing p95".into(), "ms".into())
        );
        assert_eq!(
            d("programCacheTimeUsPerBatch"),
            ("Program cache time".into(), "µs per batch".into())
        );
        assert_eq!(d("maxSwapGiB"), ("Max swap".into(), "GiB".into()));
        assert_eq!(d("peers"), ("Peers".into(), "count".into()));
        assert_eq!(slug("MAX RSS GiB"), "max-rss-gib");
        assert_eq!(slug("PC µs/BATCH"), "pc-us-batch");
        assert_eq!(slug("PC SAVED %"), "pc-saved-pct");
    }

    #[test]
    fn steps_bound_the_samples_and_stay_whole_scrapes() {
        let h12 = Duration::from_secs(12 * 3600);
        let s15 = Duration::from_secs(15);
        assert_eq!(
            steps(h12, s15),
            (Duration::from_secs(60), Duration::from_secs(900))
        );
        // The lab's minute: one sample a second, buckets of four.
        let (step, bucket) = steps(Duration::from_secs(60), Duration::from_secs(1));
        assert_eq!(
            (step, bucket),
            (Duration::from_secs(1), Duration::from_secs(4))
        );
    }

    fn trial(point: &str, rep: i32, outcome: &str, tps: f64) -> ValidatorTrial {
        serde_saphyr::from_str(&format!(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorTrial\nmetadata: {{name: t-{rep}-{tps}}}\nspec:\n  experiment: e\n  point: {{{point}}}\n  repetition: {rep}\n  template: {{agave: {{image: a}}}}\n  settings: {{}}\n  metrics: {{}}\nstatus:\n  phase: Succeeded\n  outcome: {outcome}\n  results: {{avgTps: {tps}, maxRssGib: 100}}\n"
        ))
        .unwrap()
    }

    /// The bars are the table's columns per point: the mean of the repetitions, an
    /// interval from two on, and the worst ending marked.
    #[test]
    fn summary_bars_carry_means_intervals_and_outcomes() {
        let sweep: SweepSpec = serde_saphyr::from_str("memory: [128Gi, 1Ti, 256Gi]").unwrap();
        let data = Dataset::from_trials(
            &sweep,
            &[
                trial("memory: 128Gi", 1, "OOMKilled", 1200.0),
                trial("memory: 1Ti", 1, "KeptUp", 4600.0),
                trial("memory: 1Ti", 2, "KeptUp", 4800.0),
                trial("memory: 1Ti", 3, "FellBehind", 4400.0),
            ],
        );
        let f = summaries(&data, &Layout::ram(), &[], "12h");
        let avg = &f[0];
        assert_eq!(
            (avg.name.as_str(), avg.title.as_str(), avg.x.as_str()),
            ("avg-tps", "AVG TPS", "memory")
        );
        // 256Gi has no trial: no bar.
        let points: Vec<&str> = avg.bars.iter().map(|b| b.point.as_str()).collect();
        assert_eq!(points, ["128Gi", "1Ti"]);
        // 128Gi's only window was cut short by the OOM kill: its bar, said so, no interval.
        assert_eq!(avg.bars[0].mark, Mark::OomKilled);
        assert_eq!(avg.bars[0].interval, None);
        assert_eq!(avg.bars[0].support, "kept up 0/1; part of its window only");
        let ti = &avg.bars[1];
        assert_eq!((ti.n, ti.mean, ti.mark), (3, 4600.0, Mark::FellBehind));
        // Student's t over the three repetitions: 4600 +- 4.303 x 200 / sqrt(3).
        let (lo, hi) = ti.interval.unwrap();
        let half = 4.302_652_73 * 200.0 / 3f64.sqrt();
        assert!((lo - (4600.0 - half)).abs() < 0.01 && (hi - (4600.0 + half)).abs() < 0.01);
        assert!(!ti.within_window);
        assert_eq!(ti.support, "kept up 2/3");
        let rss = f.iter().find(|f| f.name == "max-rss-gib").unwrap();
        assert_eq!((rss.title.as_str(), rss.unit.as_str()), ("MAX RSS", "GiB"));
        // Round trip through CSV.
        let back = read_summary_csv(&summary_csv(&f), "12h").unwrap();
        assert_eq!(back.len(), f.iter().filter(|f| !f.bars.is_empty()).count());
        assert_eq!(back[0], f[0]);
    }

    /// A point run once gets an interval only from its window's series (batches of its
    /// own samples, said so in the CSV); the spread of repetitions needs two.
    #[test]
    fn a_point_run_once_gets_its_windows_interval() {
        let sweep: SweepSpec = serde_saphyr::from_str("memory: [128Gi, 1Ti]").unwrap();
        let trials = [
            trial("memory: 128Gi", 1, "OOMKilled", 1200.0),
            trial("memory: 1Ti", 1, "KeptUp", 4600.0),
        ];
        let data = Dataset::from_trials(&sweep, &trials);
        // A noisy series around 4,500 TPS (the status' mean is 4,600: the interval moves
        // there), 120 samples of independent noise, three of them a burst of 25x (outliers
        // the mean leaves out, and so its interval).
        let mut rng = crate::results::stats::calibration::Rng::new(3);
        let samples: Vec<(f64, f64)> = (0..120)
            .map(|i| {
                let burst = if (40..43).contains(&i) { 25.0 } else { 1.0 };
                (i as f64 * 360.0, burst * (4500.0 + 150.0 * rng.normal()))
            })
            .collect();
        let tps = SeriesFigure {
            name: "tps".into(),
            title: "TPS".into(),
            unit: "TPS".into(),
            caption: String::new(),
            traces: vec![Trace {
                trial: trials[1].metadata.name.clone().unwrap(),
                point: "1Ti".into(),
                repetition: 1,
                outcome: "KeptUp".into(),
                samples,
            }],
        };
        let f = summaries(&data, &Layout::ram(), std::slice::from_ref(&tps), "12h");
        let avg = &f[0];
        let (lo, hi) = avg.bars[1].interval.expect("1Ti's window interval");
        assert!(avg.bars[1].within_window);
        assert!(lo < 4600.0 && 4600.0 < hi && hi - lo < 200.0, "{lo} {hi}");
        // 128Gi has no series: no interval; other columns are not window means.
        assert_eq!(
            (avg.bars[0].interval, avg.bars[0].within_window),
            (None, false)
        );
        assert!(
            f[1..]
                .iter()
                .all(|f| f.bars.iter().all(|b| b.interval.is_none()))
        );
        let text = summary_csv(&f);
        assert!(text.lines().nth(2).unwrap().contains(",window,"), "{text}");
        assert_eq!(read_summary_csv(&text, "12h").unwrap()[0], f[0]);
    }

    #[test]
    fn series_round_trip_through_csv_with_quoted_cells() {
        let f = vec![SeriesFigure {
            name: "tps".into(),
            title: "Transactions, per second".into(),
            unit: "TPS".into(),
            caption: "c".into(),
            traces: vec![
                Trace {
                    trial: "a".into(),
                    point: "memory=128Gi heap=\"x\"".into(),
                    repetition: 1,
                    outcome: "OOMKilled".into(),
                    samples: vec![(0.0, 1.5), (1.0, 2.0)],
                },
                Trace {
                    trial: "b".into(),
                    point: "256Gi".into(),
                    repetition: 2,
                    outcome: "FellBehind".into(),
                    samples: vec![(0.0, 3.0)],
                },
            ],
        }];
        let text = series_csv(&f);
        assert_eq!(read_series_csv(&text, "c").unwrap(), f);
        // A trial without a datapoint has no line, so the CSV redraws the figure as drawn.
        let spec = SeriesSpec {
            name: "tps".into(),
            title: "Transactions, per second".into(),
            unit: "TPS".into(),
            query: String::new(),
            scale: 1.0,
            bucketed: false,
        };
        let mut traces = f[0].traces.clone();
        traces.insert(
            0,
            Trace {
                trial: "c".into(),
                point: "64Gi".into(),
                repetition: 1,
                outcome: "OOMKilled".into(),
                samples: vec![],
            },
        );
        let drawn = SeriesFigure::of(&spec, "c", traces).unwrap();
        assert_eq!(drawn, f[0]);
        assert_eq!(
            read_series_csv(&series_csv(std::slice::from_ref(&drawn)), "c").unwrap(),
            [drawn]
        );
        assert_eq!(SeriesFigure::of(&spec, "c", vec![]), None);
        let bad = text.replace(",1.5", ",x");
        let err = read_series_csv(&bad, "c").unwrap_err().to_string();
        assert_eq!(err, "series.csv line 2: value \"x\" is not a number");
        assert!(read_series_csv("a,b\n", "c").is_err());
    }

    #[test]
    fn a_point_is_marked_by_its_worst_ending() {
        use TrialOutcome::*;
        let m = |o: &[Option<TrialOutcome>]| Mark::of_point(o);
        assert_eq!(m(&[Some(KeptUp), Some(KeptUp)]), Mark::KeptUp);
        assert_eq!(m(&[Some(KeptUp), Some(FellBehind)]), Mark::FellBehind);
        assert_eq!(m(&[Some(FellBehind), Some(OOMKilled)]), Mark::OomKilled);
        assert_eq!(m(&[Some(KeptUp), Some(Crashed)]), Mark::Other);
        assert_eq!(m(&[]), Mark::Other);
    }
}
