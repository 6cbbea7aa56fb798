//! Where a figure's texts go, so that no two overlap: a text is fitted to the width it
//! has (a bar's slot, the legend's row) by a smaller font, then by wrapping at spaces, and
//! a word wider than the whole width is cut with an ellipsis. Pure: the width of a text
//! is measured by the caller's font.

/// The width in pixels of a text at a font size.
pub trait Measure: Fn(&str, f64) -> f64 {}
impl<F: Fn(&str, f64) -> f64> Measure for F {}

/// `text` cut to `width`, ending in an ellipsis when it had to be cut.
pub fn cut(text: &str, width: f64, size: f64, measure: &impl Measure) -> String {
    if measure(text, size) <= width {
        return text.to_string();
    }
    let mut chars: Vec<char> = text.chars().collect();
    while !chars.is_empty() {
        chars.pop();
        let s: String = chars.iter().collect::<String>() + "…";
        if measure(&s, size) <= width {
            return s;
        }
    }
    String::new()
}

/// The lines of `text` at `size`, each no wider than `width`: words wrapped at spaces.
pub fn wrap(text: &str, width: f64, size: f64, measure: &impl Measure) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let joined = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if measure(&joined, size) <= width {
            line = joined;
        } else {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            line = cut(word, width, size, measure);
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The largest of `sizes` at which every one of `texts` fits `width` on one line.
pub fn fitting_size(
    texts: &[&str],
    width: f64,
    sizes: &[f64],
    measure: &impl Measure,
) -> Option<f64> {
    sizes
        .iter()
        .copied()
        .find(|&s| texts.iter().all(|t| measure(t, s) <= width))
}

/// Entries of `widths` laid out left to right in rows no wider than `width`, `gap` between
/// two in a row: each entry's offset in its row and its row. An entry wider than the row
/// has a row of its own (the caller cuts its text to fit).
pub fn rows(widths: &[f64], width: f64, gap: f64) -> Vec<(f64, usize)> {
    let mut out = Vec::with_capacity(widths.len());
    let (mut x, mut row) = (0.0, 0);
    for &w in widths {
        if x > 0.0 && x + w > width {
            x = 0.0;
            row += 1;
        }
        out.push((x, row));
        x += w + gap;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every character 10 px wide at size 10, scaled with the size.
    fn mono(text: &str, size: f64) -> f64 {
        text.chars().count() as f64 * size
    }

    #[test]
    fn wrapping_keeps_every_line_within_the_width() {
        let cases: [(&str, f64, &[&str]); 4] = [
            ("kept up", 100.0, &["kept up"]),
            ("n=3, kept up 2/3", 100.0, &["n=3, kept", "up 2/3"]),
            ("30 / 6 / 1", 60.0, &["30 / 6", "/ 1"]),
            ("OOM-killed", 60.0, &["OOM-k…"]),
        ];
        for (text, width, lines) in cases {
            let got = wrap(text, width, 10.0, &mono);
            assert_eq!(got, lines, "{text} in {width}");
            assert!(got.iter().all(|l| mono(l, 10.0) <= width));
        }
        assert!(wrap("", 50.0, 10.0, &mono).is_empty());
        assert_eq!(cut("abc", 5.0, 10.0, &mono), "");
    }

    #[test]
    fn the_largest_size_that_fits_every_text() {
        let sizes = [13.0, 11.0, 9.0];
        assert_eq!(
            fitting_size(&["abcdefg", "ab"], 80.0, &sizes, &mono),
            Some(11.0)
        );
        assert_eq!(fitting_size(&["abcdefghijk"], 80.0, &sizes, &mono), None);
        assert_eq!(fitting_size(&[], 1.0, &sizes, &mono), Some(13.0));
    }

    #[test]
    fn rows_wrap_before_the_width() {
        assert_eq!(
            rows(&[40.0, 40.0, 40.0, 200.0, 10.0], 100.0, 10.0),
            [(0.0, 0), (50.0, 0), (0.0, 1), (0.0, 2), (0.0, 3)]
        );
        assert!(rows(&[], 100.0, 10.0).is_empty());
    }
}
