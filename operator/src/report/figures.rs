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

use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::layout;
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

/// Margin around the chart, and the width of the y axis' labels: the plot's left edge.
const MARGIN: u32 = 12;
const Y_LABELS: u32 = 80;
const LEGEND_FONT: f64 = 14.0;
/// A legend row's height, and a swatch's width with the gap after it.
const LEGEND_ROW: i32 = 20;
const SWATCH: i32 = 28;
/// Font sizes a bar's labels may take, largest first; they wrap at the smallest.
const BAR_FONT: [f64; 5] = [14.0, 13.0, 12.0, 11.0, 10.0];

/// The width in pixels of `text` in the bundled font (what plotters lays text out by).
fn text_width(text: &str, size: f64) -> f64 {
    FontDesc::new(FontFamily::Name(FAMILY), size, FontStyle::Normal)
        .box_size(text)
        .map_or(0.6 * size * text.chars().count() as f64, |(w, _)| w as f64)
}

/// What a legend entry's swatch shows.
#[derive(Clone, Copy)]
enum Swatch {
    Line(RGBColor),
    Fill(RGBColor),
    Interval,
}

struct Entry {
    swatch: Swatch,
    text: String,
}

/// The legend's rows above the plot, in a strip of their own: it never covers a line, a
/// bar or another text, however many entries it has.
fn legend_rows(entries: &[Entry]) -> (Vec<(f64, usize)>, Vec<String>) {
    let width = f64::from(SIZE.0 - 2 * MARGIN - Y_LABELS);
    let room = width - f64::from(SWATCH);
    let texts: Vec<String> = entries
        .iter()
        .map(|e| layout::cut(&e.text, room, LEGEND_FONT, &text_width))
        .collect();
    let widths: Vec<f64> = texts
        .iter()
        .map(|t| f64::from(SWATCH) + text_width(t, LEGEND_FONT))
        .collect();
    (layout::rows(&widths, width, 24.0), texts)
}

fn legend_height(entries: &[Entry]) -> u32 {
    let (rows, _) = legend_rows(entries);
    rows.last()
        .map_or(0, |(_, r)| (*r as u32 + 1) * LEGEND_ROW as u32 + 6)
}

fn draw_legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, entries: &[Entry]) -> Drawn<DB> {
    let (rows, texts) = legend_rows(entries);
    let left = (MARGIN + Y_LABELS) as i32;
    let style =
        TextStyle::from((FAMILY, LEGEND_FONT).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for ((e, (x, row)), text) in entries.iter().zip(rows).zip(texts) {
        let x = left + x as i32;
        let y = row as i32 * LEGEND_ROW + LEGEND_ROW / 2;
        match e.swatch {
            Swatch::Line(c) => area.draw(&PathElement::new(
                vec![(x, y), (x + 20, y)],
                c.stroke_width(3),
            ))?,
            Swatch::Fill(c) => area.draw(&Rectangle::new(
                [(x + 3, y - 6), (x + 17, y + 6)],
                c.filled(),
            ))?,
            Swatch::Interval => {
                let black = BLACK.stroke_width(2);
                area.draw(&PathElement::new(
                    vec![(x + 10, y - 8), (x + 10, y + 8)],
                    black,
                ))?;
                area.draw(&PathElement::new(
                    vec![(x + 5, y - 8), (x + 15, y - 8)],
                    black,
                ))?;
                area.draw(&PathElement::new(
                    vec![(x + 5, y + 8), (x + 15, y + 8)],
                    black,
                ))?;
            }
        }
        area.draw_text(&text, &style, (x + SWATCH, y))?;
    }
    Ok(())
}

/// The title over the figure, then the legend's strip: the area left for the chart.
fn head<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    entries: &[Entry],
) -> Result<DrawingArea<DB, Shift>, DrawingAreaErrorKind<DB::ErrorType>> {
    let area = area.titled(title, (FAMILY, 22))?;
    let (legend, rest) = area.split_vertically(legend_height(entries) + MARGIN / 2);
    draw_legend(&legend.margin(MARGIN / 2, 0, 0, 0), entries)?;
    Ok(rest)
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
    let repetitions = f.traces.iter().any(|t| t.repetition > 1);
    // The legend names each trial's point and ending, a line's colour each.
    let entries: Vec<Entry> = f
        .traces
        .iter()
        .enumerate()
        .map(|(i, t)| Entry {
            swatch: Swatch::Line(LINES[i % LINES.len()]),
            text: t.label(repetitions),
        })
        .collect();
    let area = head(
        &area,
        &format!("{} over the measurement window", f.title),
        &entries,
    )?;
    let mut chart = ChartBuilder::on(&area)
        .margin(MARGIN)
        .x_label_area_size(44)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(0.0..(end / per).max(1.0 / per), 0.0..upper(top))?;
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
    for (i, t) in f.traces.iter().enumerate() {
        let color = LINES[i % LINES.len()];
        let line: Vec<(f64, f64)> = t.samples.iter().map(|(s, v)| (s / per, *v)).collect();
        chart.draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?;
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
    Ok(())
}

/// A bar's labels under it, a line each: its point, its ending, and its runs.
fn bar_labels(b: &Bar) -> [String; 3] {
    let runs = if b.n > 1 {
        format!("n={}, {}", b.n, b.support)
    } else {
        "1 run".to_string()
    };
    [b.point.clone(), b.mark.describe().to_string(), runs]
}

/// The legend of a summary figure: the endings the bars' colours stand for, then what
/// their error bars are (the notes that are the same for many bars, said once).
fn summary_entries(f: &SummaryFigure) -> Vec<Entry> {
    let mut marks: Vec<Mark> = f.bars.iter().map(|b| b.mark).collect();
    marks.sort();
    marks.dedup();
    let mut entries: Vec<Entry> = marks
        .into_iter()
        .map(|m| Entry {
            swatch: Swatch::Fill(mark_color(m)),
            text: m.describe().to_string(),
        })
        .collect();
    if f.bars
        .iter()
        .any(|b| b.interval.is_some() && !b.within_window)
    {
        entries.push(Entry {
            swatch: Swatch::Interval,
            text: "95% interval of the mean over repetitions".into(),
        });
    }
    if f.bars.iter().any(|b| b.within_window) {
        entries.push(Entry {
            swatch: Swatch::Interval,
            text: "1 run: 95% interval within its window (not between runs)".into(),
        });
    }
    entries
}

fn draw_summary<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, f: &SummaryFigure) -> Drawn<DB> {
    root.fill(&WHITE)?;
    let (area, foot) = root.split_vertically(SIZE.1 - 30);
    footer(&foot, &f.caption)?;
    let area = head(
        &area,
        &format!("{} per point", f.title),
        &summary_entries(f),
    )?;
    let n = f.bars.len().max(1);
    let top = f
        .bars
        .iter()
        .map(|b| b.interval.map_or(b.mean, |i| i.1.max(b.mean)))
        .fold(0.0_f64, f64::max);
    // Each bar's labels fit its slot: the largest font at which all fit on one line, or
    // the smallest, wrapped; stacked under the axis, so no two overlap.
    let slot = f64::from(SIZE.0 - 2 * MARGIN - Y_LABELS) / n as f64 - 8.0;
    let labels: Vec<[String; 3]> = f.bars.iter().map(bar_labels).collect();
    let all: Vec<&str> = labels.iter().flatten().map(String::as_str).collect();
    let size = layout::fitting_size(&all, slot, &BAR_FONT, &text_width)
        .unwrap_or(BAR_FONT[BAR_FONT.len() - 1]);
    let lines: Vec<Vec<String>> = labels
        .iter()
        .map(|ls| {
            ls.iter()
                .flat_map(|l| layout::wrap(l, slot, size, &text_width))
                .collect()
        })
        .collect();
    let line_height = size.ceil() as u32 + 2;
    let most = lines.iter().map(Vec::len).max().unwrap_or(0) as u32;
    let mut chart = ChartBuilder::on(&area)
        .margin(MARGIN)
        .x_label_area_size(8 + most * line_height + 28)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d((0..n - 1).into_segmented(), 0.0..upper(top))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        // The points' labels are drawn below, fitted to their slots.
        .x_label_formatter(&|_| String::new())
        .x_desc(f.x.clone())
        .y_desc(f.unit.clone())
        .y_label_formatter(&|v| tick(*v))
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .light_line_style(RGBColor(242, 242, 242))
        .draw()?;
    let style = TextStyle::from((FAMILY, size).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, (b, ls)) in f.bars.iter().zip(&lines).enumerate() {
        let mut bar = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), b.mean),
            ],
            mark_color(b.mark).filled(),
        );
        bar.set_margin(0, 0, 14, 14);
        chart.draw_series(std::iter::once(bar))?;
        if let Some((lo, hi)) = b.interval {
            chart.draw_series(std::iter::once(ErrorBar::new_vertical(
                SegmentValue::CenterOf(i),
                lo,
                b.mean,
                hi,
                BLACK.stroke_width(2),
                14,
            )))?;
        }
        let (x, y) = chart.backend_coord(&(SegmentValue::CenterOf(i), 0.0));
        for (k, l) in ls.iter().enumerate() {
            root.draw_text(l, &style, (x, y + 8 + (k as u32 * line_height) as i32))?;
        }
    }
    Ok(())
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
                "text" if !body.trim().is_empty() => texts.push(body.trim().to_string()),
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
        assert!(overlaps(&svg).is_empty(), "{:?}", overlaps(&svg));
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
            "n=3, kept up 0/1",
            "95% interval of the mean over repetitions",
        ] {
            assert!(s.contains(text), "{text}: {s}");
        }
        assert!(overlaps(&svg).is_empty(), "{:?}", overlaps(&svg));
        // A bar per point in its outcome's colour (and the legend's swatch).
        assert!(s.contains("boxes #D62728: 2"), "{s}");
        golden("summary-avg-tps.txt", &s);
    }

    /// A text's box in the SVG, as plotters lays it out in the bundled font (a little
    /// wider than a browser draws the SVG's font-size, so boxes apart here are apart there).
    #[derive(Debug)]
    struct Boxed {
        text: String,
        x: (f64, f64),
        y: (f64, f64),
    }

    impl Boxed {
        fn meets(&self, x: (f64, f64), y: (f64, f64)) -> bool {
            let apart = |a: (f64, f64), b: (f64, f64)| a.1 <= b.0 + 0.5 || b.1 <= a.0 + 0.5;
            !apart(self.x, x) && !apart(self.y, y)
        }
    }

    fn number(attrs: &str, name: &str) -> Option<f64> {
        regex::Regex::new(&format!(r#"\b{name}="([-0-9.]+)""#))
            .unwrap()
            .captures(attrs)
            .map(|c| c[1].parse().unwrap())
    }

    fn text_boxes(svg: &str) -> Vec<Boxed> {
        register_font();
        let re = regex::Regex::new(r"<text ([^>]*)>\s*([^<]*?)\s*</text>").unwrap();
        re.captures_iter(svg)
            .filter(|c| !c[2].is_empty())
            .map(|c| {
                let (attrs, text) = (&c[1], c[2].replace("&apos;", "'").replace("&amp;", "&"));
                let (x, y) = (number(attrs, "x").unwrap(), number(attrs, "y").unwrap());
                // plotters writes its font size over 1.24 as the SVG's font-size.
                let em = number(attrs, "font-size").unwrap();
                let w = text_width(&text, em * 1.24);
                let dx = match attrs {
                    a if a.contains(r#"text-anchor="middle""#) => (-w / 2.0, w / 2.0),
                    a if a.contains(r#"text-anchor="end""#) => (-w, 0.0),
                    _ => (0.0, w),
                };
                let dy = match attrs {
                    a if a.contains(r#"dy="0.76em""#) => (0.0, em),
                    a if a.contains(r#"dy="0.5ex""#) => (-em / 2.0, em / 2.0),
                    _ => (-em, 0.0),
                };
                // The y axis' name is turned a quarter (rotate(270) about its anchor).
                let (dx, dy) = if attrs.contains("rotate(270") {
                    (dy, (-dx.1, -dx.0))
                } else {
                    (dx, dy)
                };
                Boxed {
                    text,
                    x: (x + dx.0, x + dx.1),
                    y: (y + dy.0, y + dy.1),
                }
            })
            .collect()
    }

    /// What overlaps in an SVG: two texts, a text and a bar, a text and a data line.
    fn overlaps(svg: &str) -> Vec<String> {
        let texts = text_boxes(svg);
        let mut out = Vec::new();
        for (i, a) in texts.iter().enumerate() {
            for b in &texts[i + 1..] {
                if a.meets(b.x, b.y) {
                    out.push(format!("{:?} and {:?}", a.text, b.text));
                }
            }
        }
        let bars = regex::Regex::new(r"<rect ([^>]*)/>").unwrap();
        let marks = [Mark::KeptUp, Mark::FellBehind, Mark::OomKilled, Mark::Other].map(|m| {
            let c = mark_color(m);
            format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2)
        });
        for c in bars.captures_iter(svg) {
            let a = &c[1];
            if !marks.iter().any(|m| a.contains(m.as_str())) {
                continue;
            }
            let (x, y) = (number(a, "x").unwrap(), number(a, "y").unwrap());
            let (w, h) = (number(a, "width").unwrap(), number(a, "height").unwrap());
            for t in texts.iter().filter(|t| t.meets((x, x + w), (y, y + h))) {
                out.push(format!("{:?} and a bar at {x},{y}", t.text));
            }
        }
        let lines = regex::Regex::new(r#"<polyline [^>]*points="([^"]*)""#).unwrap();
        for c in lines.captures_iter(svg) {
            let points: Vec<(f64, f64)> = c[1]
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            if points.len() <= 2 {
                continue; // an axis or a tick
            }
            for w in points.windows(2) {
                let ((x0, y0), (x1, y1)) = (w[0], w[1]);
                for k in 0..=20 {
                    let (x, y) = (
                        x0 + (x1 - x0) * k as f64 / 20.0,
                        y0 + (y1 - y0) * k as f64 / 20.0,
                    );
                    if let Some(t) = texts
                        .iter()
                        .find(|t| t.meets((x - 0.5, x + 0.5), (y - 0.5, y + 0.5)))
                    {
                        out.push(format!("{:?} and a line at {x},{y}", t.text));
                    }
                }
            }
        }
        out.dedup();
        out
    }

    /// Firedancer's bench (docs/figures/fd-bench-tiles-avg-tps.svg): eight layouts run once
    /// each, every bar with its window's interval, whose notes once overlapped; and a
    /// grid of sixteen points run three times.
    fn crowded(points: usize, n: usize) -> SummaryFigure {
        let bars = (0..points)
            .map(|i| Bar {
                point: format!("{} / {} / {}", [4, 30][i / 4 % 2], [2, 6][i / 2 % 2], i % 2),
                n,
                mean: 50_000.0 + 1000.0 * i as f64,
                interval: Some((48_000.0, 52_000.0 + 1000.0 * i as f64)),
                within_window: n == 1,
                mark: if i == 0 {
                    Mark::FellBehind
                } else {
                    Mark::KeptUp
                },
                support: format!("kept up {}/{n}", n - usize::from(i == 0)),
            })
            .collect();
        SummaryFigure {
            x: "verifyTiles / bankTiles / noBlockstore".into(),
            bars,
            ..fixture_summary()
        }
    }

    #[test]
    fn no_text_overlaps_another_a_bar_or_a_line() {
        for (points, n) in [(8, 1), (16, 3), (24, 1)] {
            let svg = summary_svg(&crowded(points, n)).unwrap();
            assert_eq!(
                overlaps(&svg),
                Vec::<String>::new(),
                "{points} points, n={n}"
            );
            if points <= 16 {
                let s = structure(&svg);
                assert!(s.contains("| 30 / 6 / 1 |"), "{s}");
            }
        }
        let svg = summary_svg(&crowded(8, 1)).unwrap();
        assert!(
            svg.contains("1 run: 95% interval within its window"),
            "{svg}"
        );
        assert_eq!(svg.matches("1 run\n").count(), 8, "{svg}");
        // Ten trials' lines and their legend.
        let mut f = fixture_series();
        f.traces = (0..10)
            .map(|i| {
                let mut t = f.traces[i % 3].clone();
                t.point = format!("{}Gi", 128 * (i + 1));
                t.samples.iter_mut().for_each(|s| s.1 += 400.0 * i as f64);
                t
            })
            .collect();
        let svg = series_svg(&f).unwrap();
        assert_eq!(overlaps(&svg), Vec::<String>::new());
        assert_eq!(structure(&svg).matches("line: ").count(), 10);
    }

    /// The figures docs/ shows, as the report drew them.
    #[test]
    fn the_docs_figures_have_no_overlapping_text() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/figures");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "svg") {
                let svg = std::fs::read_to_string(&path).unwrap();
                assert_eq!(overlaps(&svg), Vec::<String>::new(), "{}", path.display());
                checked += 1;
            }
        }
        assert!(checked >= 10, "{checked} figures in {}", dir.display());
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
