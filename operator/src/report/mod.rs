//! Experiment results as a table (the paper's Figure 3), CSV or JSON; the recommendation
//! as a patch (patch.rs); figures and a page in a directory (series.rs the data,
//! figures.rs the drawing, html.rs the page, dir.rs the files).

pub mod dir;
pub mod figures;
pub mod html;
pub mod layout;
pub mod patch;
pub mod progress;
pub mod series;

use std::collections::BTreeMap;

use kube::ResourceExt;

use crate::api::ValidatorExperiment;
use crate::api::sweep::SweepSpec;
use crate::api::trial::{TrialResults, ValidatorTrial};
use crate::clients::profile::{Layout, Objective};
use crate::results::dataset::{Dataset, Point};

fn num(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

/// A column's figures as printed: whole numbers (counts: seconds at zero TPS, slots
/// behind, ...) without decimals when every figure of the column is whole, two decimals
/// otherwise, so a column reads alike from row to row.
fn column(values: &[Option<f64>]) -> Vec<String> {
    let whole = values
        .iter()
        .flatten()
        .all(|v| v.fract() == 0.0 && v.abs() < 1e15);
    values
        .iter()
        .map(|v| match v {
            Some(v) if whole => format!("{v:.0}"),
            v => num(*v),
        })
        .collect()
}

/// Trials in the dataset's order: by point, the points by the swept values (numeric
/// where the values are numbers or quantities, so `128Gi` before `1Ti`, as written
/// otherwise), points no longer in the sweep last; then by repetition.
pub fn sorted(mut trials: Vec<ValidatorTrial>, sweep: &SweepSpec) -> Vec<ValidatorTrial> {
    let order: BTreeMap<String, usize> = Dataset::from_trials(sweep, &trials)
        .trials()
        .enumerate()
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    trials.sort_by_key(|t| order.get(&t.name_any()).copied());
    trials
}

/// The columns every table starts with.
const FIXED: [&str; 6] = ["TRIAL", "POINT", "REP", "PHASE", "OUTCOME", "COVER %"];

/// The columns `-o wide` and CSV add: why each trial ended, and where it ran.
const WIDE: [&str; 3] = ["MAX LAG", "NODE", "MESSAGE"];

/// Whether the client's columns already show the lag (nodeos: `MAX LAG blk`).
fn has_lag(layout: &Layout) -> bool {
    layout
        .numbers
        .iter()
        .any(|c| c.header.starts_with("MAX LAG"))
}

fn header(layout: &Layout, wide: bool) -> Vec<&'static str> {
    let extra = WIDE
        .iter()
        .copied()
        .filter(|h| wide && !(*h == "MAX LAG" && has_lag(layout)));
    FIXED
        .iter()
        .copied()
        .chain(layout.numbers.iter().map(|c| c.header))
        .chain(layout.saved.iter().map(|c| c.header))
        .chain(layout.text.iter().map(|c| c.header))
        .chain(extra)
        .collect()
}

fn rows(data: &Dataset, layout: &Layout, wide: bool) -> Vec<Vec<String>> {
    // Saved columns compare with the first point (in the dataset's order: the smallest
    // value of an ordered sweep) whose finished trials have the figure.
    let bases: Vec<Option<f64>> = layout
        .saved
        .iter()
        .map(|c| data.points().iter().find_map(|p| p.mean(c.value)))
        .collect();
    // Figures column by column, so each column decides once whether it is whole.
    let results: Vec<TrialResults> = data
        .trials()
        .map(|t| t.results.clone().unwrap_or_default())
        .collect();
    let mut figures: Vec<Vec<String>> = layout
        .numbers
        .iter()
        .map(|c| column(&results.iter().map(|r| (c.value)(r)).collect::<Vec<_>>()))
        .collect();
    figures.extend(layout.saved.iter().zip(&bases).map(|(c, base)| {
        let saved: Vec<Option<f64>> = results
            .iter()
            .map(|r| match ((c.value)(r), base) {
                (Some(v), Some(b)) if *b > 0.0 => Some(100.0 * (1.0 - v / b)),
                _ => None,
            })
            .collect();
        column(&saved)
    }));
    if wide && !has_lag(layout) {
        figures.push(column(
            &results.iter().map(|r| r.max_lag).collect::<Vec<_>>(),
        ));
    }
    data.trials()
        .zip(&results)
        .enumerate()
        .map(|(i, (t, r))| {
            let mut row = trial_cells(t);
            row.push(
                r.coverage
                    .map(|c| format!("{:.0}", c * 100.0))
                    .unwrap_or_else(|| "-".into()),
            );
            let n = layout.numbers.len() + layout.saved.len();
            row.extend(figures[..n].iter().map(|col| col[i].clone()));
            row.extend(
                layout
                    .text
                    .iter()
                    .map(|c| (c.value)(r).unwrap_or_else(|| "-".into())),
            );
            if wide {
                row.extend(figures[n..].iter().map(|col| col[i].clone()));
                row.push(t.node.clone().unwrap_or_else(|| "-".into()));
                row.push(t.message.clone().unwrap_or_else(|| "-".into()));
            }
            row
        })
        .collect()
}

/// The cells every trial table starts with: trial, point, repetition, phase, outcome.
pub(crate) fn trial_cells(t: &crate::results::dataset::TrialRecord) -> Vec<String> {
    vec![
        t.name.clone(),
        t.point.describe(),
        t.repetition.to_string(),
        format!("{:?}", t.phase),
        t.outcome
            .map(|o| o.as_str().to_string())
            .unwrap_or_else(|| "-".into()),
    ]
}

/// One line per point: how many measured repetitions kept up (with the exact interval),
/// and the objective's mean over the repetitions that measured their whole window (N),
/// with its 95% interval (Student's t) and standard deviation; repetitions whose window
/// was cut short or that measured nothing are counted apart (APART), never pooled. None
/// until some point has two measured repetitions: one repetition has a mean but no
/// spread, and the trials' table already shows it.
pub fn points_table(data: &Dataset, objective: &Objective) -> Option<String> {
    let measured = |p: &Point| p.kept_up_count().1;
    if !data.points().iter().any(|p| measured(p) >= 2) {
        return None;
    }
    let header = vec![
        "POINT".to_string(),
        "KEPT UP".to_string(),
        "N".to_string(),
        objective.name.to_uppercase(),
        "95% CI".to_string(),
        "SD".to_string(),
        "APART".to_string(),
    ];
    let rows = data
        .points()
        .iter()
        .filter(|p| p.finished().next().is_some())
        .map(|p| {
            let e = p.estimate(objective.value);
            let apart = p.set_apart();
            let mut why: BTreeMap<String, usize> = BTreeMap::new();
            for (t, _) in &apart {
                let o = t.outcome.map_or("unfinished", |o| o.as_str());
                let o = if t.early_abort { "early abort" } else { o };
                *why.entry(o.to_string()).or_default() += 1;
            }
            vec![
                p.point.describe(),
                p.kept_up_support()
                    .map(|s| {
                        let s = s.trim_start_matches("kept up ");
                        s.split(" (").next().unwrap_or(s).to_string()
                    })
                    .unwrap_or_else(|| "-".into()),
                e.as_ref().map_or(0, |e| e.n).to_string(),
                num(e.as_ref().map(|e| e.mean)),
                e.as_ref()
                    .and_then(|e| e.interval)
                    .map(|i| format!("[{:.2}, {:.2}]", i.lo, i.hi))
                    .unwrap_or_else(|| "-".into()),
                num(e.and_then(|e| e.sd)),
                if why.is_empty() {
                    "-".into()
                } else {
                    why.iter()
                        .map(|(o, k)| format!("{k} {o}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            ]
        })
        .collect();
    Some(aligned(header, rows))
}

/// Columns padded to their widest cell, two spaces apart.
pub fn aligned(header: Vec<String>, rows: Vec<Vec<String>>) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![line(&header)];
    out.extend(rows.iter().map(|r| line(r)));
    out.join("\n") + "\n"
}

/// The trials as a table with the client's columns, in the dataset's order.
pub fn table(data: &Dataset, layout: &Layout) -> String {
    let header = header(layout, false)
        .into_iter()
        .map(String::from)
        .collect();
    aligned(header, rows(data, layout, false))
}

/// The table with the lag, the node and the message of each trial (`-o wide`): why it
/// ended.
pub fn wide_table(data: &Dataset, layout: &Layout) -> String {
    let header = header(layout, true).into_iter().map(String::from).collect();
    aligned(header, rows(data, layout, true))
}

/// Every column of the wide table, one trial a line.
/// A CSV cell (RFC 4180): quoted when it holds a comma, a quote or a line break.
pub fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn csv(data: &Dataset, layout: &Layout) -> String {
    let quote = csv_cell;
    let mut out = vec![
        header(layout, true)
            .iter()
            .map(|h| {
                h.to_lowercase()
                    .replace(' ', "_")
                    .replace('%', "pct")
                    .replace('/', "_per_")
            })
            .collect::<Vec<_>>()
            .join(","),
    ];
    out.extend(
        rows(data, layout, true)
            .iter()
            .map(|r| r.iter().map(|c| quote(c)).collect::<Vec<_>>().join(",")),
    );
    out.join("\n") + "\n"
}

/// A line for each trial whose figures cover less of its window than asked, so a gap in
/// scraping is never read as a quiet validator.
pub fn coverage_notes(trials: &[ValidatorTrial]) -> String {
    let mut out = String::new();
    for t in trials {
        let results = t.status.as_ref().and_then(|s| s.results.as_ref());
        // Missing is not zero (results/analysis.rs): say which figures are blank and why.
        if let Some(r) = results.filter(|r| !r.missing.is_empty()) {
            out.push_str(&format!(
                "note: {} ({}): no datapoint of {} in its window: the figures they back are missing, not zero (kubectl describe vtrial: condition Complete)\n",
                t.metadata.name.clone().unwrap_or_default(),
                t.spec.point.describe(),
                r.missing.join(", ")
            ));
        }
        let Some(c) = results.and_then(|r| r.coverage) else {
            continue;
        };
        let min = t.spec.metrics.min_coverage;
        if c < min {
            out.push_str(&format!(
                "note: {} ({}): Prometheus scraped {:.0}% of its window, below metrics.minCoverage ({:.0}%): its figures describe the scraped part only\n",
                t.metadata.name.clone().unwrap_or_default(),
                t.spec.point.describe(),
                c * 100.0,
                min * 100.0
            ));
        }
    }
    out
}

/// The experiment's own summary lines: phase, counts, recommendation.
pub fn summary(vx: &ValidatorExperiment) -> String {
    let st = vx.status.clone().unwrap_or_default();
    let c = &st.trials;
    let mut out = format!(
        "experiment {}: {:?}, {} trials ({} finished: {} measured, {} failed; {} running)\n",
        vx.metadata.name.clone().unwrap_or_default(),
        st.phase,
        c.expected,
        c.finished,
        c.succeeded,
        c.failed,
        c.active
    );
    match &st.recommendation {
        Some(r) => {
            out.push_str(&format!("recommendation: {} ({})\n", r.summary, r.reason));
            if let Some(support) = &r.support {
                out.push_str(&format!("support: {support}\n"));
            }
        }
        None => out.push_str(&format!(
            "recommendation: {}\n",
            patch::no_recommendation(vx)
        )),
    }
    if let Some(c) = &st.comparison {
        out.push_str(&format!("against {} ({}):\n", c.baseline, c.figure));
        for e in &c.effects {
            out.push_str(&format!("  {}: {}\n", e.point, e.text));
        }
        if let Some(n) = &c.noise_floor {
            out.push_str(&format!("  noise floor (A/A pairs): {n}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::experiment::ExperimentPhase;
    use crate::clients::profile::{Column, RAM_COLUMNS, TextColumn};

    fn mk(point: &str, rep: i32, outcome: &str, tps: f64) -> ValidatorTrial {
        serde_saphyr::from_str(&format!(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorTrial\nmetadata: {{name: t-{rep}-{tps}}}\nspec:\n  experiment: e\n  point: {{{point}}}\n  repetition: {rep}\n  template: {{agave: {{image: a}}}}\n  settings: {{}}\n  metrics: {{}}\nstatus:\n  phase: Succeeded\n  outcome: {outcome}\n  results: {{avgTps: {tps}, maxTps: 9000.5}}\n"
        ))
        .unwrap()
    }

    fn sweep(yaml: &str) -> SweepSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn the_table_lines_up_in_the_order_of_the_sweep() {
        let s = sweep("memory: [128Gi, 1Ti]");
        let trials = Dataset::from_trials(
            &s,
            &[
                mk("memory: 1Ti", 1, "KeptUp", 4600.0),
                mk("memory: 128Gi", 1, "OOMKilled", 1200.0),
            ],
        );
        let t = table(&trials, &Layout::ram());
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("TRIAL"));
        // Every average is whole here: the column prints without decimals; MAX TPS has
        // a fraction and keeps two.
        assert!(
            lines[1].contains("memory=128Gi")
                && lines[1].contains("OOMKilled")
                && lines[1].contains(" 1200 ")
                && lines[1].contains(" 9000.50 "),
            "{t}"
        );
        assert!(lines[2].contains("memory=1Ti"));
        assert_eq!(lines[1].find("OOMKilled"), lines[2].find("KeptUp"));
        assert!(
            csv(&trials, &Layout::ram())
                .starts_with("trial,point,rep,phase,outcome,cover_pct,avg_tps")
        );
        // Text columns follow the numbers.
        let layout = Layout {
            numbers: RAM_COLUMNS[..1].to_vec(),
            text: vec![TextColumn {
                header: "NOTE",
                value: |r| r.avg_tps.map(|t| format!("{t} tps")),
            }],
            ..Default::default()
        };
        let t = table(&trials, &layout);
        assert!(t.lines().next().unwrap().ends_with("AVG TPS  NOTE"), "{t}");
        assert!(
            t.lines().nth(1).unwrap().ends_with("1200     1200 tps"),
            "{t}"
        );
        assert!(csv(&trials, &layout).contains(",1200,1200 tps,-,-,-\n"));
    }

    #[test]
    fn sorted_trials_follow_the_numeric_order_with_points_that_left_the_sweep_last() {
        let s = sweep("memory: [1536Gi, 1Ti, 128Gi]");
        let trials = sorted(
            vec![
                mk("memory: 256Gi", 1, "KeptUp", 1.0),
                mk("memory: 1536Gi", 1, "KeptUp", 2.0),
                mk("memory: 1024Gi", 2, "KeptUp", 3.0),
                mk("memory: 128Gi", 1, "OOMKilled", 4.0),
                mk("memory: 1Ti", 1, "KeptUp", 5.0),
            ],
            &s,
        );
        let points: Vec<String> = trials
            .iter()
            .map(|t| format!("{} {}", t.spec.point.describe(), t.spec.repetition))
            .collect();
        assert_eq!(
            points,
            [
                "memory=128Gi 1",
                "memory=1Ti 1",
                "memory=1Ti 2",
                "memory=1536Gi 1",
                "memory=256Gi 1"
            ]
        );
    }

    #[test]
    fn the_points_table_shows_counts_and_intervals_once_a_point_repeats() {
        let s = sweep("memory: [128Gi, 1Ti]");
        let one = Dataset::from_trials(&s, &[mk("memory: 1Ti", 1, "KeptUp", 4600.0)]);
        assert_eq!(points_table(&one, &Objective::default()), None);
        let data = Dataset::from_trials(
            &s,
            &[
                mk("memory: 128Gi", 1, "OOMKilled", 1200.0),
                mk("memory: 1Ti", 1, "KeptUp", 4600.0),
                mk("memory: 1Ti", 2, "KeptUp", 4700.0),
                mk("memory: 1Ti", 3, "FellBehind", 4500.0),
            ],
        );
        let t = points_table(&data, &Objective::default()).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("POINT") && lines[0].contains("AVERAGE TPS  95% CI"),
            "{t}"
        );
        // 128Gi measured (kept up 0 of 1: Clopper-Pearson's [0%, 97.5%]), but its window
        // was cut short: no mean, counted apart.
        let cells = |l: &str| -> Vec<String> {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(String::from)
                .collect()
        };
        assert_eq!(
            cells(lines[1]),
            [
                "memory=128Gi",
                "0/1 [0%, 98%]",
                "0",
                "-",
                "-",
                "-",
                "1 OOMKilled"
            ],
            "{t}"
        );
        let c = cells(lines[2]);
        assert_eq!(
            c[..4],
            ["memory=1Ti", "2/3 [9%, 99%]", "3", "4600.00"],
            "{t}"
        );
        assert!(
            c[4].starts_with('[') && c[5] == "100.00" && c[6] == "-",
            "{t}"
        );
    }

    #[test]
    fn the_wide_table_says_why_each_trial_ended() {
        let s = sweep("memory: [128Gi, 1Ti]");
        let mut oom = mk("memory: 128Gi", 1, "OOMKilled", 1200.0);
        let st = oom.status.as_mut().unwrap();
        st.message = Some("the validator exited (OOMKilled, exit code 137)".into());
        st.node_name = Some("r6a-1".into());
        st.results.as_mut().unwrap().max_lag = Some(2150.0);
        let mut kept = mk("memory: 1Ti", 1, "KeptUp", 4600.0);
        kept.status
            .as_mut()
            .unwrap()
            .results
            .as_mut()
            .unwrap()
            .max_lag = Some(12.0);
        let data = Dataset::from_trials(&s, &[oom, kept]);
        let t = wide_table(&data, &Layout::ram());
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].ends_with("MAX LAG  NODE   MESSAGE"), "{t}");
        assert!(
            lines[1].ends_with("2150     r6a-1  the validator exited (OOMKilled, exit code 137)"),
            "{t}"
        );
        assert!(lines[2].ends_with("12       -      -"), "{t}");
        // The plain table stays narrow; CSV has every column, the message quoted.
        assert!(!table(&data, &Layout::ram()).contains("MESSAGE"));
        assert!(
            csv(&data, &Layout::ram())
                .contains(",2150,r6a-1,\"the validator exited (OOMKilled, exit code 137)\"\n"),
            "{}",
            csv(&data, &Layout::ram())
        );
        // A client that shows its own lag (nodeos) does not get it twice.
        let layout = Layout {
            numbers: vec![Column {
                header: "MAX LAG blk",
                value: |r| r.max_lag,
            }],
            ..Default::default()
        };
        assert_eq!(wide_table(&data, &layout).matches("MAX LAG").count(), 1);
    }

    #[test]
    fn no_recommendation_says_whether_the_experiment_runs_or_found_none() {
        let mut vx: ValidatorExperiment = serde_saphyr::from_str(
            "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorExperiment\nmetadata: {name: e}\nspec:\n  template: {agave: {image: a}, resources: {memory: 1Ti}}\nstatus: {phase: Running, trials: {expected: 3, pending: 0, active: 2, finished: 1, succeeded: 1, failed: 0}}\n",
        )
        .unwrap();
        assert!(
            summary(&vx).ends_with(
                "recommendation: none yet: the experiment is running (1 of 3 trials finished) and no finished point kept up so far\n"
            ),
            "{}",
            summary(&vx)
        );
        vx.status.as_mut().unwrap().phase = ExperimentPhase::Succeeded;
        assert!(
            summary(&vx)
                .contains("recommendation: none: the experiment finished and no point kept up"),
            "{}",
            summary(&vx)
        );
    }

    /// Numeric sweep values sort by number (not 1024, 2048, 512 as text), whatever order
    /// they are written in.
    #[test]
    fn saved_columns_compare_with_the_first_point_of_the_sweep() {
        let s = sweep("programCacheEntries: [1024, 512, 2048]");
        let trials = Dataset::from_trials(
            &s,
            &[
                mk("programCacheEntries: 2048", 1, "KeptUp", 10.0),
                mk("programCacheEntries: 512", 2, "KeptUp", 44.0),
                mk("programCacheEntries: 1024", 1, "KeptUp", 15.0),
                mk("programCacheEntries: 512", 1, "KeptUp", 36.0),
            ],
        );
        let layout = Layout {
            saved: vec![Column {
                header: "SAVED %",
                value: |r| r.avg_tps,
            }],
            ..Default::default()
        };
        let t = table(&trials, &layout);
        let cells: Vec<(&str, &str)> = t
            .lines()
            .skip(1)
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w[1], w[w.len() - 1])
            })
            .collect();
        assert_eq!(
            cells,
            vec![
                ("programCacheEntries=512", "10.00"),
                ("programCacheEntries=512", "-10.00"),
                ("programCacheEntries=1024", "62.50"),
                ("programCacheEntries=2048", "75.00"),
            ],
            "{t}"
        );
        assert!(csv(&trials, &layout).starts_with(
            "trial,point,rep,phase,outcome,cover_pct,saved_pct,max_lag,node,message\n"
        ));
    }
}
