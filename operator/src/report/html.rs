//! `index.html` of a report directory: one self-contained page (figures inline as SVG, no
//! script or style from elsewhere), readable offline and attachable to an issue or a pull
//! request. Pure: the page is a function of [`Page`] and the drawn figures.

use serde::{Deserialize, Serialize};

/// What the page says beside its figures; saved as `report.json` so `valtune report
/// --from DIR` redraws the page without the cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    pub experiment: String,
    pub namespace: String,
    /// When the report was written (RFC 3339).
    pub generated: String,
    /// The client and its version, e.g. "Agave 2.1.14 (image ...)".
    pub client: String,
    /// The window and load every figure describes.
    pub describes: String,
    /// `valtune report`'s table, its notes and the points' table, as printed.
    pub table: String,
    /// The phase, counts, recommendation and its support, as printed.
    pub summary: String,
    /// `valtune recommend`'s patch, when there is a recommendation.
    pub patch: Option<String>,
    /// The experiment's spec as YAML.
    pub spec: String,
    /// The nodes the trials ran on.
    pub nodes: Vec<NodeInfo>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    pub name: String,
    /// The trials that ran on it.
    pub trials: Vec<String>,
    pub kubelet: String,
    pub kernel: String,
    pub os: String,
    pub cpu: String,
    pub memory: String,
}

/// A drawn figure: its file stem (for the PNG and CSV links), title and SVG.
pub struct Drawn<'a> {
    pub name: &'a str,
    pub title: &'a str,
    pub svg: &'a str,
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str =
    "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
pre{background:#f6f8fa;padding:.8em;overflow-x:auto;font-size:13px}
figure{margin:1.5em 0}figure svg{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{font-size:14px;color:#444}table{border-collapse:collapse;font-size:14px}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}";

fn figure(f: &Drawn, kind: &str) -> String {
    // The SVG keeps its own width and height; the viewBox lets the page scale it.
    let svg = f.svg.replacen(
        "<svg ",
        &format!(
            "<svg viewBox=\"0 0 {} {}\" ",
            super::figures::SIZE.0,
            super::figures::SIZE.1
        ),
        1,
    );
    format!(
        "<figure id=\"{name}\" class=\"{kind}\">\n{svg}\n<figcaption>{title}: <a href=\"figures/{name}.svg\">SVG</a>, <a href=\"figures/{name}.png\">PNG</a>; data in <a href=\"{csv}\">{csv}</a></figcaption>\n</figure>\n",
        name = escape(f.name),
        title = escape(f.title),
        csv = if kind == "series" {
            "series.csv"
        } else {
            "summary.csv"
        },
    )
}

/// The page: the answer first (summary, recommendation), the trials' table, then the
/// figures (summaries per point, then the series over the windows), the spec, the nodes.
pub fn render(page: &Page, summaries: &[Drawn], series: &[Drawn]) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>valtune report: {exp}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>valtune report: {exp}</h1>\n<p>Namespace {ns}; {client}; written {generated}.</p>\n<p>{describes}</p>\n<h2>Result</h2>\n<pre id=\"summary\">{summary}</pre>\n",
        exp = escape(&page.experiment),
        ns = escape(&page.namespace),
        client = escape(&page.client),
        generated = escape(&page.generated),
        describes = escape(&page.describes),
        summary = escape(&page.summary),
    );
    if let Some(patch) = &page.patch {
        out.push_str(&format!(
            "<h3>The recommendation as a patch of the template</h3>\n<pre id=\"patch\">{}</pre>\n",
            escape(patch)
        ));
    }
    out.push_str(&format!(
        "<h2>Trials</h2>\n<pre id=\"table\">{}</pre>\n<p>As CSV: <a href=\"table.csv\">table.csv</a>.</p>\n",
        escape(&page.table)
    ));
    out.push_str("<h2>Per point</h2>\n<p>Bars are the mean over a point's finished repetitions, coloured by how they ended; error bars are 95% intervals (Student's t over the repetitions that measured their whole window, from two on; for the AVG TPS of a point run once, from batches of its own window's samples, named in the figure's legend \"1 run: 95% interval within its window\", and none where the window holds too few independent stretches).</p>\n");
    for f in summaries {
        out.push_str(&figure(f, "summary"));
    }
    out.push_str("<h2>Over the measurement window</h2>\n<p>One line per trial; an OOM-killed run ends in a cross where it was killed, a run that fell behind in a triangle.</p>\n");
    for f in series {
        out.push_str(&figure(f, "series"));
    }
    out.push_str(&format!(
        "<h2>Experiment</h2>\n<pre id=\"spec\">{}</pre>\n",
        escape(&page.spec)
    ));
    if !page.nodes.is_empty() {
        out.push_str("<h2>Nodes</h2>\n<table id=\"nodes\">\n<tr><th>node</th><th>trials</th><th>kubelet</th><th>kernel</th><th>OS</th><th>CPU</th><th>memory</th></tr>\n");
        for n in &page.nodes {
            let cells = [
                n.name.clone(),
                n.trials.join(", "),
                n.kubelet.clone(),
                n.kernel.clone(),
                n.os.clone(),
                n.cpu.clone(),
                n.memory.clone(),
            ];
            out.push_str("<tr>");
            for c in cells {
                out.push_str(&format!("<td>{}</td>", escape(&c)));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_holds_its_figures_inline_and_escapes_text() {
        let page = Page {
            experiment: "agave-ram".into(),
            namespace: "validators".into(),
            client: "Agave 2.1.14".into(),
            describes: "window: 12h".into(),
            summary: "recommendation: memory=512Gi (below it <128Gi>)".into(),
            patch: Some("spec: {}".into()),
            spec: "template: {}".into(),
            nodes: vec![NodeInfo {
                name: "r6a-1".into(),
                trials: vec!["a".into(), "b".into()],
                kubelet: "v1.34.1".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let svg = "<svg width=\"960\" height=\"540\" xmlns=\"http://www.w3.org/2000/svg\"></svg>";
        let html = render(
            &page,
            &[Drawn {
                name: "avg-tps",
                title: "AVG TPS per point",
                svg,
            }],
            &[Drawn {
                name: "tps",
                title: "TPS",
                svg,
            }],
        );
        assert_eq!(html.matches("<figure ").count(), 2);
        assert!(html.contains("<svg viewBox=\"0 0 960 540\" width=\"960\""));
        assert!(html.contains("(below it &lt;128Gi&gt;)"));
        assert!(html.contains("<td>a, b</td>"));
        assert!(html.contains("href=\"figures/tps.png\""));
        // Nothing is loaded from elsewhere.
        assert!(!html.contains("src=\"http") && !html.contains("<script"));
    }
}
