//! The report's charts as inline SVG: grouped bars and lines with points, drawn from the
//! report's rows. Text is left to the browser's own fonts (no font files, no metrics), and
//! every mark carries its numbers (`data-series`, `data-category`, `data-value`, the exact
//! `f64` of `report.json`) and a `<title>` a reader hovers for them.
//!
//! Why not a plotting crate: `plotters` lays its text out with font metrics, so its SVG
//! backend needs its `ttf` feature (font-kit and the system's fontconfig) or a bundled font
//! file, and it writes bare shapes, without classes or titles, so neither a reader nor a test
//! can tell a bar from a legend swatch.

use std::fmt::Write;

/// One series: a value per category (bars) or per x position (lines); `None` draws nothing.
pub struct Series {
    pub name: String,
    pub values: Vec<Option<f64>>,
}

/// A chart: its id (unique in the page), title, categories along x, series, and how values
/// read.
pub struct Chart<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub categories: Vec<String>,
    pub series: Vec<Series>,
    pub scale: Scale,
}

/// How the y axis reads its values.
#[derive(Clone, Copy)]
pub enum Scale {
    /// Shares in 0..=1, shown as percent.
    Share,
    /// Counts from 0.
    Count,
}

impl Scale {
    fn text(self, v: f64) -> String {
        match self {
            Scale::Share => format!("{:.1}%", v * 100.0),
            Scale::Count if v.fract() == 0.0 => format!("{v:.0}"),
            Scale::Count => format!("{v:.2}"),
        }
    }
}

/// Okabe and Ito's palette: told apart with every common colour-vision deficiency.
const COLORS: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
];

const W: f64 = 640.0;
const H: f64 = 300.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 56.0;

/// Escapes text for XML (content and attribute values).
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

impl Chart<'_> {
    /// The axis's top and the step of its ticks: 1 by 0.25 for shares; for counts, about four
    /// round steps (whole numbers when every value is) up to the largest value.
    fn axis(&self) -> (f64, f64) {
        match self.scale {
            Scale::Share => (1.0, 0.25),
            Scale::Count => {
                let values = || self.series.iter().flat_map(|s| s.values.iter().flatten());
                let max = values().fold(0.0f64, |a, &b| a.max(b)).max(1.0);
                let mut step = nice_ceiling(max / 4.0);
                if values().all(|v| v.fract() == 0.0) {
                    step = step.max(1.0).round();
                }
                (step * (max / step).ceil(), step)
            }
        }
    }

    /// Where `v` stands on an axis whose top is `top`.
    fn y(v: f64, top: f64) -> f64 {
        let h = H - TOP - BOTTOM;
        TOP + h - (v / top).clamp(0.0, 1.0) * h
    }

    /// The frame: title, legend, y grid with its ticks, axis labels and the categories;
    /// returns the axis's top, which places the marks.
    fn frame(&self, out: &mut String, kind: &str) -> f64 {
        let _ = write!(
            out,
            r#"<svg class="chart {kind}" id="{id}" data-chart="{id}" viewBox="0 0 {W} {H}" role="img" aria-labelledby="{id}-title" xmlns="http://www.w3.org/2000/svg"><title id="{id}-title">{title}</title><text class="chart-title" x="{LEFT}" y="16">{title}</text>"#,
            id = esc(self.id),
            title = esc(self.title),
        );
        // The legend, one swatch per series, along the top.
        let mut x = LEFT;
        for (i, s) in self.series.iter().enumerate() {
            let _ = write!(
                out,
                r#"<g class="legend"><rect class="swatch" x="{x}" y="24" width="10" height="10" fill="{c}"/><text x="{tx}" y="33">{name}</text></g>"#,
                c = COLORS[i % COLORS.len()],
                tx = x + 14.0,
                name = esc(&s.name)
            );
            x += 24.0 + 7.0 * s.name.chars().count() as f64;
        }
        let (top, step) = self.axis();
        let ticks = (top / step).round() as u32;
        for i in 0..=ticks {
            let v = step * f64::from(i);
            let y = Chart::y(v, top);
            let _ = write!(
                out,
                r#"<line class="grid" x1="{LEFT}" x2="{x2}" y1="{y}" y2="{y}"/><text class="tick" x="{tx}" y="{ty}" text-anchor="end">{label}</text>"#,
                x2 = W - RIGHT,
                tx = LEFT - 6.0,
                ty = y + 4.0,
                label = esc(&self.scale.text(v))
            );
        }
        let _ = write!(
            out,
            r#"<text class="axis-label" transform="translate(14 {cy}) rotate(-90)" text-anchor="middle">{y}</text><text class="axis-label" x="{cx}" y="{by}" text-anchor="middle">{x}</text>"#,
            cy = TOP + (H - TOP - BOTTOM) / 2.0,
            y = esc(self.y_label),
            cx = LEFT + (W - LEFT - RIGHT) / 2.0,
            by = H - 6.0,
            x = esc(self.x_label),
        );
        let n = self.categories.len().max(1) as f64;
        let band = (W - LEFT - RIGHT) / n;
        for (i, c) in self.categories.iter().enumerate() {
            let label: String = if c.chars().count() > 24 {
                c.chars().take(23).chain(['…']).collect()
            } else {
                c.clone()
            };
            let _ = write!(
                out,
                r#"<text class="category" x="{x}" y="{y}" text-anchor="middle"><title>{full}</title>{label}</text>"#,
                x = LEFT + band * (i as f64 + 0.5),
                y = H - BOTTOM + 16.0,
                full = esc(c),
                label = esc(&label)
            );
        }
        top
    }

    /// Grouped bars: a group per category, a bar per series in it.
    pub fn bars(&self) -> String {
        let mut out = String::new();
        let top = self.frame(&mut out, "bars");
        let n = self.categories.len().max(1) as f64;
        let band = (W - LEFT - RIGHT) / n;
        let per = self.series.len().max(1) as f64;
        let bar = (band * 0.8 / per).min(48.0);
        for (ci, category) in self.categories.iter().enumerate() {
            let start = LEFT + band * ci as f64 + (band - bar * per) / 2.0;
            for (si, s) in self.series.iter().enumerate() {
                let Some(v) = s.values.get(ci).copied().flatten() else {
                    continue;
                };
                let y = Chart::y(v, top);
                let _ = write!(
                    out,
                    r#"<rect class="bar" data-series="{sn}" data-category="{cn}" data-value="{v}" x="{x:.2}" y="{y:.2}" width="{w:.2}" height="{h:.2}" fill="{c}"><title>{cn}, {sn}: {text}</title></rect>"#,
                    sn = esc(&s.name),
                    cn = esc(category),
                    x = start + bar * si as f64,
                    w = (bar - 2.0).max(1.0),
                    h = (Chart::y(0.0, top) - y).max(0.5),
                    c = COLORS[si % COLORS.len()],
                    text = esc(&self.scale.text(v)),
                );
            }
        }
        out.push_str("</svg>");
        out
    }

    /// Lines with a point at each category along x, a line per series.
    pub fn lines(&self) -> String {
        let mut out = String::new();
        let top = self.frame(&mut out, "lines");
        let n = self.categories.len().max(1) as f64;
        let band = (W - LEFT - RIGHT) / n;
        for (si, s) in self.series.iter().enumerate() {
            let c = COLORS[si % COLORS.len()];
            let points: Vec<(f64, f64, &str, f64)> = self
                .categories
                .iter()
                .enumerate()
                .filter_map(|(ci, cat)| {
                    let v = s.values.get(ci).copied().flatten()?;
                    Some((
                        LEFT + band * (ci as f64 + 0.5),
                        Chart::y(v, top),
                        cat.as_str(),
                        v,
                    ))
                })
                .collect();
            let path: Vec<String> = points
                .iter()
                .map(|(x, y, ..)| format!("{x:.2},{y:.2}"))
                .collect();
            let _ = write!(
                out,
                r#"<polyline class="line" data-series="{sn}" points="{p}" fill="none" stroke="{c}" stroke-width="2"/>"#,
                sn = esc(&s.name),
                p = path.join(" ")
            );
            for (x, y, cat, v) in points {
                let _ = write!(
                    out,
                    r#"<circle class="point" data-series="{sn}" data-category="{cn}" data-value="{v}" cx="{x:.2}" cy="{y:.2}" r="4" fill="{c}"><title>{sn}, {cn}: {text}</title></circle>"#,
                    sn = esc(&s.name),
                    cn = esc(cat),
                    text = esc(&self.scale.text(v)),
                );
            }
        }
        out.push_str("</svg>");
        out
    }
}

/// The smallest of 1, 2, 2.5 or 5 times a power of ten at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|&c| c >= v)
        .unwrap_or(10.0 * p)
}
