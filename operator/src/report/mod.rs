//! Experiment results as a table (the paper's Figure 3), CSV or JSON.

use crate::api::ValidatorExperiment;
use crate::api::quantity::parse_quantity;
use crate::api::trial::ValidatorTrial;
use crate::clients::profile::{Column, TextColumn};

fn num(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into())
}

/// Trials in a stable order: by memory, then point, then repetition.
pub fn sorted(mut trials: Vec<ValidatorTrial>) -> Vec<ValidatorTrial> {
    trials.sort_by_key(|t| {
        (
            t.spec
                .point
                .memory
                .as_deref()
                .and_then(|m| parse_quantity(m).ok()),
            t.spec.point.canonical(),
            t.spec.repetition,
        )
    });
    trials
}

/// The columns every table starts with.
const FIXED: [&str; 6] = ["TRIAL", "POINT", "REP", "PHASE", "OUTCOME", "COVER %"];

fn header(columns: &[Column], text: &[TextColumn]) -> Vec<&'static str> {
    FIXED
        .iter()
        .copied()
        .chain(columns.iter().map(|c| c.header))
        .chain(text.iter().map(|c| c.header))
        .collect()
}

fn rows(trials: &[ValidatorTrial], columns: &[Column], text: &[TextColumn]) -> Vec<Vec<String>> {
    trials
        .iter()
        .map(|t| {
            let st = t.status.clone().unwrap_or_default();
            let r = st.results.clone().unwrap_or_default();
            let mut row = vec![
                t.metadata.name.clone().unwrap_or_default(),
                t.spec.point.describe(),
                t.spec.repetition.to_string(),
                format!("{:?}", st.phase),
                st.outcome
                    .map(|o| o.as_str().to_string())
                    .unwrap_or_else(|| "-".into()),
                r.coverage
                    .map(|c| format!("{:.0}", c * 100.0))
                    .unwrap_or_else(|| "-".into()),
            ];
            row.extend(columns.iter().map(|c| num((c.value)(&r))));
            row.extend(
                text.iter()
                    .map(|c| (c.value)(&r).unwrap_or_else(|| "-".into())),
            );
            row
        })
        .collect()
}

/// The trials as a table with the client's columns (`columns`).
pub fn table(trials: &[ValidatorTrial], columns: &[Column]) -> String {
    table_with(trials, columns, &[])
}

/// The trials as a table with the client's number and then text columns.
pub fn table_with(trials: &[ValidatorTrial], columns: &[Column], text: &[TextColumn]) -> String {
    let header = header(columns, text);
    let rows = rows(trials, columns, text);
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![line(header.clone())];
    out.extend(
        rows.iter()
            .map(|r| line(r.iter().map(String::as_str).collect())),
    );
    out.join("\n") + "\n"
}

pub fn csv(trials: &[ValidatorTrial], columns: &[Column]) -> String {
    csv_with(trials, columns, &[])
}

pub fn csv_with(trials: &[ValidatorTrial], columns: &[Column], text: &[TextColumn]) -> String {
    let quote = |s: &str| {
        if s.contains([',', '"']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut out = vec![
        header(columns, text)
            .iter()
            .map(|h| h.to_lowercase().replace(' ', "_").replace('%', "pct"))
            .collect::<Vec<_>>()
            .join(","),
    ];
    out.extend(
        rows(trials, columns, text)
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
        let Some(c) = t
            .status
            .as_ref()
            .and_then(|s| s.results.as_ref())
            .and_then(|r| r.coverage)
        else {
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
        Some(r) => out.push_str(&format!("recommendation: {} ({})\n", r.summary, r.reason)),
        None => out.push_str("recommendation: none yet (no point kept up)\n"),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::profile::{RAM_COLUMNS, TextColumn};

    #[test]
    fn the_table_lines_up_and_sorts_by_memory() {
        let mk = |mem: &str, outcome: &str, tps: f64| -> ValidatorTrial {
            serde_saphyr::from_str(&format!(
                "apiVersion: valtune.dev/v1alpha1\nkind: ValidatorTrial\nmetadata: {{name: t-{mem}}}\nspec:\n  experiment: e\n  point: {{memory: {mem}}}\n  repetition: 1\n  template: {{agave: {{image: a}}}}\n  settings: {{}}\n  metrics: {{}}\nstatus:\n  phase: Succeeded\n  outcome: {outcome}\n  results: {{avgTps: {tps}, maxTps: 9000.5}}\n"
            ))
            .unwrap()
        };
        let trials = sorted(vec![
            mk("1Ti", "KeptUp", 4600.0),
            mk("128Gi", "OOMKilled", 1200.0),
        ]);
        let t = table(&trials, &RAM_COLUMNS);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("TRIAL"));
        assert!(
            lines[1].contains("memory=128Gi")
                && lines[1].contains("OOMKilled")
                && lines[1].contains("1200.00")
        );
        assert!(lines[2].contains("memory=1Ti"));
        assert_eq!(lines[1].find("OOMKilled"), lines[2].find("KeptUp"));
        assert!(
            csv(&trials, &RAM_COLUMNS)
                .starts_with("trial,point,rep,phase,outcome,cover_pct,avg_tps")
        );
        // Text columns follow the numbers.
        let text = [TextColumn {
            header: "NOTE",
            value: |r| r.avg_tps.map(|t| format!("{t} tps")),
        }];
        let t = table_with(&trials, &RAM_COLUMNS[..1], &text);
        assert!(t.lines().next().unwrap().ends_with("AVG TPS  NOTE"), "{t}");
        assert!(
            t.lines().nth(1).unwrap().ends_with("1200.00  1200 tps"),
            "{t}"
        );
        assert!(csv_with(&trials, &RAM_COLUMNS[..1], &text).contains(",1200.00,1200 tps\n"));
    }
}
