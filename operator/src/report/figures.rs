//! The report's figures drawn with plotters from the pure data of series.rs: a series over
//! every trial's window (the paper's Figures 3 and 4: one line per trial, the legend
//! naming its point and how it ended, an OOM-killed run ending in a cross where it was
//! killed), and bars per point of a table column with their 95% intervals as error bars
//! and each point's outcome marked. SVG for the page, PNG for anywhere else: text is laid
//! out (and, in the PNG, drawn) with the bundled DejaVu Sans, so no system font is read
//! and a PNG renders the same on every machine.

use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use super::series::{Bar, Mark, SeriesFigure, SummaryFigure, Trace};

/// Width and height of every figure, in pixels.
pub const SIZE: (u32, u32) = (960, 540);
/// The one family figures use; plotters looks fonts up by this name.
const FAMILY: &str = "sans-serif";
/// DejaVu Sans 2.37 (Debian's fonts-dejavu-core; its license beside it).
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_err() {
            panic!("the bundled DejaVu Sans is not a font");
        }
    });
}

#[derive(Debug, thiserror::Error)]
#[error("drawing figure {figure}: {detail}")]
pub struct FigureError {
    pub figure: String,
    pub detail: String,
}

/// Colours of the lines, one per trial in turn (Tableau 10).
const LINES: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// A bar's colour says how its point ended.
pub fn mark_color(m: Mark) -> RGBColor {
    match m {
        Mark::KeptUp => RGBColor(44, 160, 44),
        Mark::FellBehind => RGBColor(255, 127, 14),
        Mark::OomKilled => RGBColor(214, 39, 40),
        Mark::Other => RGBColor(127, 127, 127),
    }
}

/// The time axis' unit for a window of `seconds`: hours from two hours on (the paper's
/// 12-hour runs), minutes from two minutes.
fn time_unit(seconds: f64) -> (&'static str, f64) {
    if seconds >= 7200.0 {
        ("h", 3600.0)
    } else if seconds >= 120.0 {
        ("min", 60.0)
    } else {
        ("s", 1.0)
    }
}

/// A tick's label: whole numbers without decimals (the axis of 1500 TPS is not
/// "1500.0"), small ones with what they need.
pub fn tick(v: f64) -> String {
    if v.fract() == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn upper(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.08
    } else {
        1.0
    }
}

type Drawn<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// The figure's caption under the chart: the window and the load.
fn footer<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, caption: &str) -> Drawn<DB> {
    area.draw_text(
        caption,
        &TextStyle::from((FAMILY, 15).into_font()).color(&RGBColor(60, 60, 60)),
        (12, 6),
    )
}

fn draw_series<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, f: &SeriesFigure) -> Drawn<DB> {
    root.fill(&WHITE)?;
    let (area, foot) = root.split_vertically(SIZE.1 - 30);
    footer(&foot, &f.caption)?;
    let end = f
        .traces
        .iter()
        .filter_map(Trace::end)
        .fold(0.0_f64, f64::max);
    let (unit, per) = time_unit(end);
    let top = f
        .traces
        .iter()
        .flat_map(|t| t.samples.iter().map(|s| s.1))
        .fold(0.0_f64, f64::max);
    let mut chart = ChartBuilder::on(&area)
        .caption(
            format!("{} over the measurement window", f.title),
            (FAMILY, 22),
        )
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(80)
        // Headroom for the legend in the upper right, a line per trial.
        .build_cartesian_2d(
            0.0..(end / per).max(1.0 / per),
            0.0..upper(top) * (1.0 + 0.055 * f.traces.len() as f64),
        )?;
    chart
        .configure_mesh()
        .x_desc(format!("time since the window's start ({unit})"))
        .y_desc(f.unit.clone())
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .light_line_style(RGBColor(242, 242, 242))
        .draw()?;
    let repetitions = f.traces.iter().any(|t| t.repetition > 1);
    for (i, t) in f.traces.iter().enumerate() {
        let color = LINES[i % LINES.len()];
        let line: Vec<(f64, f64)> = t.samples.iter().map(|(s, v)| (s / per, *v)).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
            .label(t.label(repetitions))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
        // Where a run that did not keep up ended: a cross where the kernel killed it, a
        // triangle where it fell behind.
        if let Some(&last) = line.last() {
            match t.mark() {
                Mark::OomKilled => {
                    chart.draw_series(std::iter::once(Cross::new(
                        last,
                        8,
                        color.stroke_width(3),
                    )))?;
                }
                Mark::FellBehind => {
                    chart.draw_series(std::iter::once(TriangleMarker::new(
                        last,
                        8,
                        color.filled(),
                    )))?;
                }
                _ => {}
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn draw_summary<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, f: &SummaryFigure) -> Drawn<DB> {
    root.fill(&WHITE)?;
    let (area, foot) = root.split_vertically(SIZE.1 - 30);
    footer(&foot, &f.caption)?;
    let n = f.bars.len().max(1);
    let top = f
        .bars
        .iter()
        .map(|b| b.interval.map_or(b.mean, |i| i.1.max(b.mean)))
        .fold(0.0_f64, f64::max);
    let labels: Vec<String> = f.bars.iter().map(|b| b.point.clone()).collect();
    let mut chart = ChartBuilder::on(&area)
        .caption(format!("{} per point", f.title), (FAMILY, 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..upper(top) * 1.25)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .x_desc(f.x.clone())
        .y_desc(f.unit.clone())
        .y_label_formatter(&|v| tick(*v))
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .light_line_style(RGBColor(242, 242, 242))
        .draw()?;
    for (i, b) in f.bars.iter().enumerate() {
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), b.mean),
            ],
            mark_color(b.mark).filled(),
        );
        bar.set_margin(0, 0, 14, 14);
        chart.draw_series(std::iter::once(bar))?;
        let mut above = b.mean;
        if let Some((lo, hi)) = b.interval {
            chart.draw_series(std::iter::once(ErrorBar::new_vertical(
                SegmentValue::CenterOf(i),
                lo,
                b.mean,
                hi,
                BLACK.stroke_width(2),
                14,
            )))?;
            above = above.max(hi);
        }
        chart.draw_series(std::iter::once(Text::new(
            bar_note(b),
            (SegmentValue::CenterOf(i), above),
            TextStyle::from((FAMILY, 13).into_font()).pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Bottom,
            )),
        )))?;
    }
    // The legend names the endings the bars' colours stand for.
    let mut marks: Vec<Mark> = f.bars.iter().map(|b| b.mark).collect();
    marks.sort();
    marks.dedup();
    for m in marks {
        let color = mark_color(m);
        chart
            .draw_series(std::iter::empty::<Circle<(SegmentValue<usize>, f64), u32>>())?
            .label(m.describe())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// What a bar says above it: the ending, the count of repetitions from two, and for one
/// run whose interval is its window's that this interval leaves out run-to-run variance.
fn bar_note(b: &Bar) -> String {
    if b.n > 1 {
        format!("{} (n={}, {})", b.mark.describe(), b.n, b.support)
    } else if b.within_window {
        format!("{} (1 run, within its window)", b.mark.describe())
    } else {
        b.mark.describe().to_string()
    }
}

/// A figure of either kind.
#[derive(Clone, Copy)]
enum Figure<'f> {
    Series(&'f SeriesFigure),
    Summary(&'f SummaryFigure),
}

impl Figure<'_> {
    fn name(&self) -> &str {
        match self {
            Figure::Series(f) => &f.name,
            Figure::Summary(f) => &f.name,
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        match self {
            Figure::Series(f) => draw_series(root, f),
            Figure::Summary(f) => draw_summary(root, f),
        }
        .and_then(|_| root.present())
        .map_err(|e| e.to_string())
    }

    fn svg(self) -> Result<String, FigureError> {
        register_font();
        let mut out = String::new();
        {
            let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
            self.draw(&root).map_err(|detail| self.error(detail))?;
        }
        Ok(out)
    }

    fn png(self) -> Result<Vec<u8>, FigureError> {
        register_font();
        let mut rgb = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
            self.draw(&root).map_err(|detail| self.error(detail))?;
        }
        let err = |e: png::EncodingError| self.error(e.to_string());
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, SIZE.0, SIZE.1);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(err)?;
        writer.write_image_data(&rgb).map_err(err)?;
        writer.finish().map_err(err)?;
        Ok(out)
    }

    fn error(&self, detail: String) -> FigureError {
        FigureError {
            figure: self.name().to_string(),
            detail,
        }
    }
}

pub fn series_svg(f: &SeriesFigure) -> Result<String, FigureError> {
    Figure::Series(f).svg()
}

pub fn series_png(f: &SeriesFigure) -> Result<Vec<u8>, FigureError> {
    Figure::Series(f).png()
}

pub fn summary_svg(f: &SummaryFigure) -> Result<String, FigureError> {
    Figure::Summary(f).svg()
}

pub fn summary_png(f: &SummaryFigure) -> Result<Vec<u8>, FigureError> {
    Figure::Summary(f).png()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The parts of an SVG a reader sees, as text: its size, its texts in order, its
    /// lines (polylines with more than two points: data, not ticks) and filled boxes by
    /// colour. Parsed from the SVG, not compared as pixels.
    fn structure(svg: &str) -> String {
        let tag = regex::Regex::new(r"<(\w+)([^>]*?)/?>([^<]*)").unwrap();
        let attr = |attrs: &str, name: &str| {
            regex::Regex::new(&format!(r#"\b{name}="([^"]*)""#))
                .unwrap()
                .captures(attrs)
                .map(|c| c[1].to_string())
        };
        let mut out = Vec::new();
        let mut texts = Vec::new();
        let mut lines = Vec::new();
        let mut boxes: std::collections::BTreeMap<String, usize> = Default::default();
        for c in tag.captures_iter(svg) {
            let (name, attrs, body) = (&c[1], &c[2], &c[3]);
            match name {
                "svg" => out.push(format!(
                    "svg {}x{}",
                    attr(attrs, "width").unwrap_or_default(),
                    attr(attrs, "height").unwrap_or_default()
                )),
                "text" => texts.push(body.trim().to_string()),
                "polyline" => {
                    let points = attr(attrs, "points").unwrap_or_default();
                    let n = points.split_whitespace().count();
                    if n > 2 {
                        lines.push(format!(
                            "{} points, stroke {}",
                            n,
                            attr(attrs, "stroke").unwrap_or_default()
                        ));
                    }
                }
                "rect" => {
                    let fill = attr(attrs, "fill").unwrap_or_default();
                    if fill != "none" && fill != "#FFFFFF" {
                        *boxes.entry(fill).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
        out.push(format!("texts: {}", texts.join(" | ")));
        out.extend(lines.into_iter().map(|l| format!("line: {l}")));
        out.extend(boxes.into_iter().map(|(k, v)| format!("boxes {k}: {v}")));
        out.join("\n") + "\n"
    }

    fn golden(name: &str, actual: &str) {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("src/report/testdata")
            .join(name);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, actual).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (make golden writes it)", path.display()));
        assert_eq!(actual, expected, "{} differs (make golden)", path.display());
    }

    fn trace(point: &str, outcome: &str, samples: Vec<(f64, f64)>) -> Trace {
        Trace {
            trial: format!("t-{point}"),
            point: point.into(),
            repetition: 1,
            outcome: outcome.into(),
            samples,
        }
    }

    /// The paper's Figure 3 in the 12-hour window: 128Gi killed after four hours, 256Gi
    /// behind, 512Gi keeping up.
    pub fn fixture_series() -> SeriesFigure {
        let ramp = |hours: usize, level: f64| {
            (0..=hours * 4)
                .map(|q| (q as f64 * 900.0, level + (q % 3) as f64 * 100.0))
                .collect::<Vec<_>>()
        };
        SeriesFigure {
            name: "tps".into(),
            title: "Transactions per second".into(),
            unit: "TPS".into(),
            caption:
                "window: 12h per trial, from caught up; load: Agave 2.1.14 following mainnet-beta"
                    .into(),
            traces: vec![
                trace("128Gi", "OOMKilled", ramp(4, 1500.0)),
                trace("256Gi", "FellBehind", ramp(12, 3000.0)),
                trace("512Gi", "KeptUp", ramp(12, 4600.0)),
            ],
        }
    }

    pub fn fixture_summary() -> SummaryFigure {
        let bar = |point: &str, mean, interval, mark, n| Bar {
            point: point.into(),
            n,
            mean,
            interval,
            within_window: false,
            mark,
            support: "kept up 0/1".into(),
        };
        SummaryFigure {
            name: "avg-tps".into(),
            title: "AVG TPS".into(),
            unit: "AVG TPS".into(),
            caption: "window: 12h per trial".into(),
            x: "memory".into(),
            bars: vec![
                bar("128Gi", 1564.0, None, Mark::OomKilled, 1),
                bar("256Gi", 3099.7, None, Mark::FellBehind, 1),
                bar("512Gi", 4600.0, Some((4400.0, 4800.0)), Mark::KeptUp, 3),
            ],
        }
    }

    #[test]
    fn golden_series_figure_structure() {
        let svg = series_svg(&fixture_series()).unwrap();
        let s = structure(&svg);
        // One line per trial, each its colour; the legend names each point and ending.
        assert_eq!(s.matches("line: ").count(), 3, "{s}");
        for label in ["128Gi: OOM-killed", "256Gi: fell behind", "512Gi: kept up"] {
            assert!(s.contains(label), "{label}: {s}");
        }
        assert!(s.contains("Transactions per second over the measurement window"));
        assert!(
            s.contains("time since the window&apos;s start (h)")
                || s.contains("time since the window's start (h)"),
            "{s}"
        );
        assert!(s.contains("| TPS |"), "{s}");
        golden("series-tps.txt", &s);
    }

    #[test]
    fn golden_summary_figure_structure() {
        let svg = summary_svg(&fixture_summary()).unwrap();
        let s = structure(&svg);
        for text in [
            "AVG TPS per point",
            "128Gi",
            "256Gi",
            "512Gi",
            "memory",
            "OOM-killed",
            "fell behind",
            "kept up (n=3, kept up 0/1)",
        ] {
            assert!(s.contains(text), "{text}: {s}");
        }
        // A bar per point in its outcome's colour (and the legend's swatch).
        assert!(s.contains("boxes #D62728: 2"), "{s}");
        golden("summary-avg-tps.txt", &s);
    }

    #[test]
    fn pngs_are_drawn_with_the_bundled_font() {
        let png = series_png(&fixture_series()).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let decoder = png::Decoder::new(std::io::Cursor::new(png));
        let info = decoder.read_info().unwrap().info().clone();
        assert_eq!((info.width, info.height), SIZE);
        let png = summary_png(&fixture_summary()).unwrap();
        assert!(png.len() > 10_000, "{}", png.len());
    }

    #[test]
    fn ticks_are_whole_unless_small() {
        assert_eq!(tick(1500.0), "1500");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(1234.56), "1235");
    }

    #[test]
    fn empty_figures_still_draw() {
        let mut f = fixture_series();
        f.traces.iter_mut().for_each(|t| t.samples.clear());
        assert!(series_svg(&f).unwrap().contains("Transactions per second"));
        let mut s = fixture_summary();
        s.bars.clear();
        assert!(summary_svg(&s).unwrap().contains("AVG TPS per point"));
    }
}
