//! `valtune report --out` on an example the lab ran to completion (issue 22): the
//! directory has a figure per result, as SVG and PNG, the data behind them as CSV, the
//! table and the page; no figure is empty, a bar's colour is how its point's trials
//! ended, and the page shows every figure in a browser. A test that ran an example calls
//! [`write`] after its own checks of the trials and checks the seed's shape on the data
//! the figures are drawn from.

use std::path::Path;

use valtune::api::ValidatorExperiment;
use valtune::api::trial::ValidatorTrial;
use valtune::report::series::{
    Bar, Mark, SeriesFigure, SummaryFigure, Trace, point_label, read_series_csv, read_summary_csv,
};
use valtune::results::dataset::Dataset;

use crate::common::Lab;

/// The figures' data of a report directory, as its CSV files hold it.
pub struct Written {
    pub series: Vec<SeriesFigure>,
    pub summaries: Vec<SummaryFigure>,
}

impl Written {
    pub fn series(&self, name: &str) -> &SeriesFigure {
        let names: Vec<&str> = self.series.iter().map(|f| f.name.as_str()).collect();
        self.series
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no series figure {name}: {names:?}"))
    }

    pub fn summary(&self, name: &str) -> &SummaryFigure {
        let names: Vec<&str> = self.summaries.iter().map(|f| f.name.as_str()).collect();
        self.summaries
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no summary figure {name}: {names:?}"))
    }

    /// The bar of `point` (its label under the bar, "30 / 6 / 1") in figure `name`.
    pub fn bar(&self, name: &str, point: &str) -> &Bar {
        let f = self.summary(name);
        let points: Vec<&str> = f.bars.iter().map(|b| b.point.as_str()).collect();
        f.bars
            .iter()
            .find(|b| b.point == point)
            .unwrap_or_else(|| panic!("no bar {point} in {name}: {points:?}"))
    }

    /// The highest bar of figure `name`.
    pub fn tallest(&self, name: &str) -> &Bar {
        let f = self.summary(name);
        f.bars
            .iter()
            .max_by(|a, b| a.mean.total_cmp(&b.mean))
            .unwrap_or_else(|| panic!("no bar in {name}"))
    }

    /// The line of `point` (its legend's label) in series figure `name`.
    pub fn trace(&self, name: &str, point: &str) -> &Trace {
        let f = self.series(name);
        let points: Vec<&str> = f.traces.iter().map(|t| t.point.as_str()).collect();
        f.traces
            .iter()
            .find(|t| t.point == point)
            .unwrap_or_else(|| panic!("no line {point} in {name}: {points:?}"))
    }
}

/// The mean of a line's samples.
pub fn mean(t: &Trace) -> f64 {
    t.samples.iter().map(|s| s.1).sum::<f64>() / t.samples.len().max(1) as f64
}

/// `valtune report NAME --out DIR` as a user runs it, on the finished experiment `vx`
/// whose trials are `trials`; the directory's checks, then its figures' data.
/// VALTUNE_REPORT_KEEP=DIR copies the directory to DIR/NAME (docs/figures are drawn so).
pub fn write(lab: &Lab, vx: &ValidatorExperiment, trials: &[ValidatorTrial]) -> Written {
    let name = vx.metadata.name.clone().unwrap();
    let ns = vx.metadata.namespace.clone().unwrap();
    let out = std::env::temp_dir().join(format!("valtune-report-{ns}-{name}"));
    let _ = std::fs::remove_dir_all(&out);
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_valtune"))
        .args(["report", &name, "-n", &ns, "--out"])
        .arg(&out)
        .env("KUBECONFIG", &lab.state.kubeconfig)
        .env("PROMETHEUS_URL", &lab.state.prometheus_url)
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "valtune report {name}: {printed}");
    let read = |f: &str| {
        std::fs::read_to_string(out.join(f)).unwrap_or_else(|e| panic!("{name}: {f}: {e}"))
    };
    let written = Written {
        series: read_series_csv(&read("series.csv"), "").unwrap(),
        summaries: read_summary_csv(&read("summary.csv"), "").unwrap(),
    };
    let table = read("table.csv");
    assert!(table.lines().count() > trials.len(), "{name}: {table}");
    // A figure per result, none empty: a series figure has a line of at least two samples
    // for a trial, a summary figure a bar per point that has the column.
    assert!(
        !written.series.is_empty(),
        "{name}: no series figure\n{printed}"
    );
    assert!(!written.summaries.is_empty(), "{name}: no summary figure");
    for f in &written.series {
        assert!(
            f.traces.iter().any(|t| t.samples.len() >= 2),
            "{name}: {} has no line",
            f.name
        );
    }
    // Each bar is coloured by how its point's trials ended.
    let data = Dataset::from_trials(&vx.spec.sweep, trials);
    for f in &written.summaries {
        assert!(!f.bars.is_empty(), "{name}: {} has no bar", f.name);
        for b in &f.bars {
            assert!(b.mean.is_finite(), "{name}: {} {b:?}", f.name);
            let p = data
                .points()
                .iter()
                .find(|p| point_label(&data, &p.point) == b.point)
                .unwrap_or_else(|| panic!("{name}: {}: no point {}", f.name, b.point));
            let outcomes: Vec<_> = p.outcomes().collect();
            assert_eq!(
                b.mark,
                Mark::of_point(&outcomes),
                "{name}: {} {b:?}",
                f.name
            );
        }
    }
    // Every figure as SVG and PNG, inline in the page.
    let figures: Vec<&str> = written
        .series
        .iter()
        .map(|f| f.name.as_str())
        .chain(written.summaries.iter().map(|f| f.name.as_str()))
        .collect();
    for f in &figures {
        for ext in ["svg", "png"] {
            let path = out.join(format!("figures/{f}.{ext}"));
            let len = path.metadata().map(|m| m.len()).unwrap_or(0);
            assert!(len > 1000, "{name}: {} has {len} bytes", path.display());
        }
    }
    let html = read("index.html");
    assert_eq!(html.matches("<figure ").count(), figures.len(), "{name}");
    assert_eq!(html.matches("<svg ").count(), figures.len(), "{name}");
    browser_check(&out, figures.len());
    if let Some(keep) = std::env::var_os("VALTUNE_REPORT_KEEP") {
        copy_dir(&out, &Path::new(&keep).join(&name));
    }
    std::fs::remove_dir_all(&out).unwrap();
    written
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let p = entry.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, target).unwrap();
        }
    }
}

/// Opens the page in a headless Chromium, when one is installed (Debian's `chromium`
/// package; .ci/run installs it), and checks every figure is drawn at its size and every
/// PNG decodes: a probe page (the report's, plus each PNG as an image and a script that
/// measures them, none of which the report itself has) written beside it.
pub fn browser_check(out: &Path, figures: usize) {
    let chromium = ["chromium", "chromium-browser"].into_iter().find(|c| {
        std::process::Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(chromium) = chromium else {
        eprintln!(
            "note: no chromium on PATH: the report's browser check is skipped (apt-get install chromium)"
        );
        return;
    };
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    let images: String = html
        .split("<figure id=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap())
        .map(|id| format!("<img class=\"probe\" src=\"figures/{id}.png\">"))
        .collect();
    let script = "<script>addEventListener('load', () => { const figs = [...document.querySelectorAll('figure svg')]; const drawn = figs.filter(s => { const r = s.getBoundingClientRect(); return r.width > 300 && r.height > 150; }).length; const imgs = [...document.querySelectorAll('img.probe')]; const loaded = imgs.filter(i => i.complete && i.naturalWidth === 960).length; document.body.setAttribute('data-probe', `${figs.length} ${drawn} ${imgs.length} ${loaded}`); });</script>";
    let probe = out.join("probe.html");
    std::fs::write(
        &probe,
        html.replace("</body>", &format!("{images}{script}</body>")),
    )
    .unwrap();
    // A profile of its own: Chromium refuses a second instance on one profile, and tests
    // run side by side.
    let profile = out.join("chromium-profile");
    let dom = std::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=10000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", probe.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    let probed = dom
        .split("data-probe=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("the probe did not run: {dom:.2000}"));
    let n = figures.to_string();
    assert_eq!(
        probed,
        [n.as_str(); 4].join(" "),
        "figures, drawn, images, decoded"
    );
    std::fs::remove_file(probe).unwrap();
    let _ = std::fs::remove_dir_all(profile);
}
