//! A report directory (`valtune report --out DIR`): the figures as SVG and PNG, the data
//! behind them as CSV, the page's text as `report.json`, and `index.html`. Everything a
//! figure is drawn from is in the directory, so `valtune report --from DIR` redraws it
//! after Prometheus has dropped the samples.
//!
//! ```text
//! DIR/index.html        the page (figures inline)
//! DIR/report.json       its text: summary, recommendation, table, spec, nodes
//! DIR/series.csv        every series over every trial's window, a sample a line
//! DIR/summary.csv       every bar: a point's mean, 95% interval, outcome
//! DIR/table.csv         the trials' table (`valtune report -o csv`)
//! DIR/figures/NAME.svg  and NAME.png: summaries by column slug, series by name
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use kube::ResourceExt;

use super::figures::{self, FigureError};
use super::html::{self, Page};
use super::series::{
    self, CsvError, SeriesFigure, SeriesSpec, SummaryFigure, Trace, legend_label, specs, steps,
};
use crate::api::trial::ValidatorTrial;
use crate::clients::profile::MetricProfile;
use crate::results::analysis::selector;
use crate::results::dataset::Dataset;
use crate::results::prometheus::{PromError, Prometheus};

/// Everything a report directory holds, before it is drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub page: Page,
    pub series: Vec<SeriesFigure>,
    pub summaries: Vec<SummaryFigure>,
    /// `valtune report -o csv`; kept as written when redrawn.
    pub table_csv: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source} (is it a directory `valtune report --out` wrote?)")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Csv(#[from] CsvError),
    #[error(transparent)]
    Figure(#[from] FigureError),
}

fn write_file(path: PathBuf, bytes: &[u8]) -> Result<PathBuf, DirError> {
    std::fs::write(&path, bytes).map_err(|source| DirError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

fn read_file(path: PathBuf) -> Result<String, DirError> {
    std::fs::read_to_string(&path).map_err(|source| DirError::Io { path, source })
}

/// Writes the report into `dir` (created if missing), figures drawn from its data; the
/// files written.
pub fn write(dir: &Path, r: &Report) -> Result<Vec<PathBuf>, DirError> {
    let figures_dir = dir.join("figures");
    std::fs::create_dir_all(&figures_dir).map_err(|source| DirError::Io {
        path: figures_dir.clone(),
        source,
    })?;
    let mut written = Vec::new();
    let json = serde_json::to_string_pretty(&r.page).expect("a page serializes");
    written.push(write_file(dir.join("report.json"), json.as_bytes())?);
    written.push(write_file(
        dir.join("series.csv"),
        series::series_csv(&r.series).as_bytes(),
    )?);
    written.push(write_file(
        dir.join("summary.csv"),
        series::summary_csv(&r.summaries).as_bytes(),
    )?);
    if let Some(table) = &r.table_csv {
        written.push(write_file(dir.join("table.csv"), table.as_bytes())?);
    }
    // Each figure as SVG and PNG, and its entry on the page.
    let mut figure = |name: &str, title: String, svg: String, png: Vec<u8>| {
        written.push(write_file(
            figures_dir.join(format!("{name}.svg")),
            svg.as_bytes(),
        )?);
        written.push(write_file(figures_dir.join(format!("{name}.png")), &png)?);
        Ok::<_, DirError>((title, name.to_string(), svg))
    };
    let mut summaries = Vec::new();
    for f in &r.summaries {
        let (svg, png) = (figures::summary_svg(f)?, figures::summary_png(f)?);
        summaries.push(figure(&f.name, format!("{} per point", f.title), svg, png)?);
    }
    let mut series = Vec::new();
    for f in &r.series {
        let (svg, png) = (figures::series_svg(f)?, figures::series_png(f)?);
        series.push(figure(
            &f.name,
            format!("{} over the window", f.title),
            svg,
            png,
        )?);
    }
    let page = html::render(&r.page, &as_drawn(&summaries), &as_drawn(&series));
    written.push(write_file(dir.join("index.html"), page.as_bytes())?);
    Ok(written)
}

fn as_drawn(v: &[(String, String, String)]) -> Vec<html::Drawn<'_>> {
    v.iter()
        .map(|(title, name, svg)| html::Drawn { name, title, svg })
        .collect()
}

/// The report a directory holds (what [`write`] wrote), to redraw.
pub fn read(dir: &Path) -> Result<Report, DirError> {
    let path = dir.join("report.json");
    let page: Page = serde_json::from_str(&read_file(path.clone())?)
        .map_err(|source| DirError::Json { path, source })?;
    let series = series::read_series_csv(&read_file(dir.join("series.csv"))?, &page.describes)?;
    let summaries =
        series::read_summary_csv(&read_file(dir.join("summary.csv"))?, &page.describes)?;
    let table_csv = read_file(dir.join("table.csv")).ok();
    Ok(Report {
        page,
        series,
        summaries,
        table_csv,
    })
}

/// What every figure of an experiment describes: the measurement window (its length, where
/// it starts, the scrape interval) and the load (the client, its version, what it runs).
pub fn describes(vx: &crate::api::ValidatorExperiment) -> String {
    let t = &vx.spec.template;
    let client = crate::clients::client_for(t).ok();
    let mut load = client.map_or("the client", |c| c.display()).to_string();
    if let Some(v) = client.and_then(|c| c.version(t)) {
        load.push_str(&format!(" {v}"));
    }
    // The client's own section: what it runs and where (workload, cluster, network).
    let section = serde_json::to_value(t).ok().and_then(|v| {
        v.as_object()?
            .iter()
            .find(|(k, _)| client.is_some_and(|c| c.name() == k.as_str()))
            .map(|(_, v)| v.clone())
    });
    for key in ["workload", "cluster", "network"] {
        if let Some(v) = section
            .as_ref()
            .and_then(|s| s.get(key)?.as_str().map(String::from))
        {
            load.push_str(&format!(", {key} {v}"));
        }
    }
    let m = &vx.spec.trial.measurement;
    let from = serde_json::to_value(m.from)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    format!(
        "Window: {} per trial from {from}, scraped every {}. Load: {load}.",
        m.duration, vx.spec.metrics.scrape_interval
    )
}

/// A trial's measurement window and scrape interval, when it has a window.
pub struct TrialWindow {
    pub trial: String,
    pub selector: String,
    pub start: Timestamp,
    pub end: Timestamp,
    pub scrape: Duration,
}

impl TrialWindow {
    /// The trial's window as its status holds it, its pod's selector and its scrape
    /// interval; None before its window started.
    pub fn of(t: &ValidatorTrial) -> Option<TrialWindow> {
        let st = t.status.as_ref()?;
        let start = st.window_start.as_ref()?.0;
        let end = st
            .window_end
            .as_ref()
            .map(|w| w.0)
            .unwrap_or_else(Timestamp::now);
        let scrape = crate::api::settings::parse_duration(&t.spec.metrics.scrape_interval)
            .unwrap_or(Duration::from_secs(15));
        let pod = crate::clients::pod::pod_name(&t.name_any(), st.attempts.max(1));
        Some(TrialWindow {
            trial: t.name_any(),
            selector: selector(&t.namespace().unwrap_or_default(), &pod),
            start,
            end: end.max(start),
            scrape,
        })
    }

    fn length(&self) -> Duration {
        Duration::try_from(self.end.duration_since(self.start)).unwrap_or_default()
    }
}

/// One series of one trial over its window, from Prometheus' range queries: instant
/// series every step, client figures every bucket over the bucket before (the first at
/// the window's start plus a bucket); times in seconds since the window's start.
pub async fn read_trace(
    prom: &Prometheus,
    spec: &SeriesSpec,
    w: &TrialWindow,
) -> Result<Vec<(f64, f64)>, PromError> {
    let (step, bucket) = steps(w.length(), w.scrape);
    let query = spec.promql(&w.selector, w.scrape, bucket);
    let (from, every) = if spec.bucketed {
        let first = w.start + jiff::SignedDuration::try_from(bucket).unwrap_or_default();
        (first.min(w.end), bucket)
    } else {
        (w.start, step)
    };
    let start = w.start.as_millisecond() as f64 / 1000.0;
    Ok(prom
        .range(&query, from, w.end, every)
        .await?
        .into_iter()
        .map(|(t, v)| (t - start, v * spec.scale))
        .collect())
}

/// Every series of the profile over every trial with a window, by figure
/// ([`SeriesFigure::of`]: lines only for trials with data, figures only for series with
/// some).
pub async fn read_series(
    prom: &Prometheus,
    profile: &MetricProfile,
    data: &Dataset,
    trials: &[ValidatorTrial],
    caption: &str,
) -> Result<Vec<SeriesFigure>, PromError> {
    let windows: Vec<(TrialWindow, &ValidatorTrial)> = trials
        .iter()
        .filter_map(|t| Some((TrialWindow::of(t)?, t)))
        .collect();
    let mut out = Vec::new();
    for spec in specs(profile) {
        let mut traces = Vec::new();
        for (w, t) in &windows {
            let samples = read_trace(prom, &spec, w).await?;
            traces.push(Trace {
                trial: w.trial.clone(),
                point: legend_label(data, &t.spec.point),
                repetition: t.spec.repetition,
                outcome: t
                    .status
                    .as_ref()
                    .and_then(|s| s.outcome)
                    .map(|o| o.as_str().to_string())
                    .unwrap_or_else(|| "-".into()),
                samples,
            });
        }
        out.extend(SeriesFigure::of(&spec, caption, traces));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::figures::tests::{fixture_series, fixture_summary};

    #[test]
    fn a_directory_redraws_from_its_own_files() {
        let dir = std::env::temp_dir().join(format!("valtune-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut series = fixture_series();
        series.caption = "window: 12h".into();
        let mut summary = fixture_summary();
        summary.caption = "window: 12h".into();
        let r = Report {
            page: Page {
                experiment: "agave-ram".into(),
                describes: "window: 12h".into(),
                ..Default::default()
            },
            series: vec![series],
            summaries: vec![summary],
            table_csv: Some("trial\n".into()),
        };
        let written = write(&dir, &r).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.strip_prefix(&dir).unwrap().display().to_string())
            .collect();
        for f in [
            "index.html",
            "series.csv",
            "summary.csv",
            "table.csv",
            "figures/tps.svg",
            "figures/tps.png",
            "figures/avg-tps.svg",
            "figures/avg-tps.png",
        ] {
            assert!(names.contains(&f.to_string()), "{f}: {names:?}");
        }
        let back = read(&dir).unwrap();
        assert_eq!(back, r);
        let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
        assert_eq!(html.matches("<svg ").count(), 2);
        std::fs::remove_file(dir.join("report.json")).unwrap();
        let err = read(&dir).unwrap_err().to_string();
        assert!(err.contains("report.json"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
