//! A small SVG chart writer for the HTML report: axes with linear or log-10 scales, lines with markers and
//! min..max bars, a legend. It emits plain SVG text (no fonts to measure, no scripts), so the page is
//! self-contained and byte-stable for the same input.

use std::fmt::Write;

/// One series of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// Points: (x, y, y_low, y_high); low/high draw an error bar when they differ from y.
    pub points: Vec<(f64, f64, f64, f64)>,
}

/// An axis.
#[derive(Debug, Clone)]
pub struct Axis {
    /// Label.
    pub label: String,
    /// Log-10 scale.
    pub log: bool,
    /// Formats a tick value.
    pub fmt: fn(f64) -> String,
}

const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];
const W: f64 = 640.0;
const H: f64 = 360.0;
const L: f64 = 70.0;
const R: f64 = 170.0;
const T: f64 = 30.0;
const B: f64 = 50.0;

fn esc(s: &str) -> String {
    crate::escape::shown_in_markup(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn ticks(lo: f64, hi: f64, log: bool) -> Vec<f64> {
    if log {
        let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        let mut t = Vec::new();
        for e in a..=b {
            for m in [1.0, 2.0, 5.0] {
                let v = m * 10f64.powi(e);
                if v >= lo * 0.999 && v <= hi * 1.001 {
                    t.push(v);
                }
            }
        }
        if t.len() > 12 {
            t.retain(|v| (v.log10().fract()).abs() < 1e-9);
        }
        t
    } else {
        let span = (hi - lo).max(1e-12);
        let raw = span / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| span / s <= 6.0)
            .unwrap_or(mag * 10.0);
        let start = (lo / step).ceil() * step;
        (0..=12)
            .map(|i| start + i as f64 * step)
            .filter(|v| *v <= hi + step * 1e-9)
            .collect()
    }
}

/// Draws a line chart.
pub fn line_chart(title: &str, x: &Axis, y: &Axis, series: &[Series]) -> String {
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .flat_map(|p| [(p.0, p.2), (p.0, p.3), (p.0, p.1)])
        })
        .collect();
    let ok = |v: f64, log: bool| v.is_finite() && (!log || v > 0.0);
    let xs: Vec<f64> = pts.iter().map(|p| p.0).filter(|v| ok(*v, x.log)).collect();
    let ys: Vec<f64> = pts.iter().map(|p| p.1).filter(|v| ok(*v, y.log)).collect();
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" aria-label="{}">"#,
        esc(title)
    );
    let _ = write!(
        o,
        r##"<rect width="{W}" height="{H}" fill="#ffffff"/><text x="{}" y="18" font-size="14" font-family="sans-serif" text-anchor="middle">{}</text>"##,
        W / 2.0,
        esc(title)
    );
    if xs.is_empty() || ys.is_empty() {
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" font-size="13" font-family="sans-serif" text-anchor="middle">no data</text></svg>"#,
            W / 2.0,
            H / 2.0
        );
        return o;
    }
    let frame = Frame::of(x, y, &xs, &ys);
    frame.axes(&mut o, x, y);
    for (i, s) in series.iter().enumerate() {
        frame.series(&mut o, x, y, i, s);
    }
    o.push_str("</svg>");
    o
}

/// A line chart's plotting area: each axis's range (padded; a log axis by a factor) and the scales onto
/// the SVG's pixels.
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    xlog: bool,
    ylog: bool,
}

impl Frame {
    /// The range of the points on each axis, padded so that no point sits on the frame.
    fn of(x: &Axis, y: &Axis, xs: &[f64], ys: &[f64]) -> Frame {
        let (mut x0, mut x1) = (
            xs.iter().copied().fold(f64::INFINITY, f64::min),
            xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        );
        let (mut y0, mut y1) = (
            ys.iter().copied().fold(f64::INFINITY, f64::min),
            ys.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        );
        if x.log {
            x0 /= 1.3;
            x1 *= 1.3;
        } else if x1 == x0 {
            x0 -= 1.0;
            x1 += 1.0;
        }
        if y.log {
            y0 /= 1.5;
            y1 *= 1.5;
        } else {
            y0 = y0.min(0.0);
            y1 = if y1 == y0 { y0 + 1.0 } else { y1 * 1.08 };
        }
        Frame {
            x0,
            x1,
            y0,
            y1,
            xlog: x.log,
            ylog: y.log,
        }
    }

    /// A value's horizontal pixel.
    fn sx(&self, v: f64) -> f64 {
        let (x0, x1) = (self.x0, self.x1);
        let f = if self.xlog {
            (v.log10() - x0.log10()) / (x1.log10() - x0.log10())
        } else {
            (v - x0) / (x1 - x0)
        };
        L + f * (W - L - R)
    }

    /// A value's vertical pixel.
    fn sy(&self, v: f64) -> f64 {
        let (y0, y1) = (self.y0, self.y1);
        let f = if self.ylog {
            (v.log10() - y0.log10()) / (y1.log10() - y0.log10())
        } else {
            (v - y0) / (y1 - y0)
        };
        H - B - f * (H - T - B)
    }

    /// Axes, grid, ticks and the axes' labels.
    fn axes(&self, o: &mut String, x: &Axis, y: &Axis) {
        let (x0, x1, y0, y1) = (self.x0, self.x1, self.y0, self.y1);
        let sx = |v: f64| self.sx(v);
        let sy = |v: f64| self.sy(v);
        let _ = write!(
            o,
            r##"<g stroke="#999" stroke-width="1"><line x1="{L}" y1="{}" x2="{}" y2="{}"/><line x1="{L}" y1="{T}" x2="{L}" y2="{}"/></g>"##,
            H - B,
            W - R,
            H - B,
            H - B
        );
        for t in ticks(x0, x1, x.log) {
            let px = sx(t);
            let _ = write!(
                o,
                r##"<line x1="{px:.1}" y1="{T}" x2="{px:.1}" y2="{}" stroke="#eee"/><text x="{px:.1}" y="{}" font-size="11" font-family="sans-serif" text-anchor="middle">{}</text>"##,
                H - B,
                H - B + 16.0,
                esc(&(x.fmt)(t))
            );
        }
        for t in ticks(y0, y1, y.log) {
            let py = sy(t);
            let _ = write!(
                o,
                r##"<line x1="{L}" y1="{py:.1}" x2="{}" y2="{py:.1}" stroke="#eee"/><text x="{}" y="{:.1}" font-size="11" font-family="sans-serif" text-anchor="end">{}</text>"##,
                W - R,
                L - 6.0,
                py + 4.0,
                esc(&(y.fmt)(t))
            );
        }
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" font-size="12" font-family="sans-serif" text-anchor="middle">{}</text>"#,
            (L + W - R) / 2.0,
            H - 12.0,
            esc(&x.label)
        );
        let _ = write!(
            o,
            r#"<text x="16" y="{}" font-size="12" font-family="sans-serif" text-anchor="middle" transform="rotate(-90 16 {})">{}</text>"#,
            (T + H - B) / 2.0,
            (T + H - B) / 2.0,
            esc(&y.label)
        );
    }

    /// Series `i`: its line, its points with their ranges, its legend entry.
    fn series(&self, o: &mut String, x: &Axis, y: &Axis, i: usize, s: &Series) {
        let ok = |v: f64, log: bool| v.is_finite() && (!log || v > 0.0);
        let sx = |v: f64| self.sx(v);
        let sy = |v: f64| self.sy(v);
        let c = PALETTE[i % PALETTE.len()];
        let mut pts: Vec<&(f64, f64, f64, f64)> = s
            .points
            .iter()
            .filter(|p| ok(p.0, x.log) && ok(p.1, y.log))
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = pts
            .iter()
            .map(|p| format!("{:.1},{:.1}", sx(p.0), sy(p.1)))
            .collect();
        let _ = write!(
            o,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for p in &pts {
            let (px, py) = (sx(p.0), sy(p.1));
            if ok(p.2, y.log) && ok(p.3, y.log) && (p.2 != p.1 || p.3 != p.1) {
                let _ = write!(
                    o,
                    r#"<line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{:.1}" stroke="{c}" stroke-width="1.5"/>"#,
                    sy(p.2),
                    sy(p.3)
                );
            }
            let _ = write!(o, r#"<circle cx="{px:.1}" cy="{py:.1}" r="3" fill="{c}"/>"#);
        }
        let ly = T + 10.0 + i as f64 * 18.0;
        let _ = write!(
            o,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="3"/><text x="{}" y="{}" font-size="11" font-family="sans-serif">{}</text>"#,
            W - R + 10.0,
            W - R + 30.0,
            W - R + 35.0,
            ly + 4.0,
            esc(&s.name)
        );
    }
}

/// Draws horizontal bars (label, value).
pub fn bar_chart(
    title: &str,
    unit: &str,
    bars: &[(String, f64)],
    fmt: fn(f64) -> String,
) -> String {
    let ranged: Vec<(String, f64, f64, f64)> =
        bars.iter().map(|(l, v)| (l.clone(), *v, *v, *v)).collect();
    ranged_bar_chart(title, unit, &ranged, fmt)
}

/// Draws horizontal bars (label, value, low, high) with a low..high whisker where they differ.
pub fn ranged_bar_chart(
    title: &str,
    unit: &str,
    bars: &[(String, f64, f64, f64)],
    fmt: fn(f64) -> String,
) -> String {
    let h = 40.0 + bars.len() as f64 * 26.0;
    let max = bars
        .iter()
        .map(|b| b.1.max(b.3))
        .fold(0.0, f64::max)
        .max(1e-12);
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" aria-label="{}">"#,
        esc(title)
    );
    let _ = write!(
        o,
        r##"<rect width="{W}" height="{h}" fill="#ffffff"/><text x="{}" y="18" font-size="14" font-family="sans-serif" text-anchor="middle">{} ({})</text>"##,
        W / 2.0,
        esc(title),
        esc(unit)
    );
    for (i, (label, v, lo, hi)) in bars.iter().enumerate() {
        let y = 30.0 + i as f64 * 26.0;
        let w = (v / max) * (W - 260.0);
        let _ = write!(
            o,
            r#"<text x="195" y="{}" font-size="11" font-family="sans-serif" text-anchor="end">{}</text><rect x="200" y="{y}" width="{w:.1}" height="18" fill="{}"/><text x="{:.1}" y="{}" font-size="11" font-family="sans-serif">{}</text>"#,
            y + 13.0,
            esc(label),
            PALETTE[i % PALETTE.len()],
            204.0 + w.max(hi / max * (W - 260.0)),
            y + 13.0,
            esc(&fmt(*v))
        );
        if hi > lo {
            let (x0, x1) = (
                200.0 + lo / max * (W - 260.0),
                200.0 + hi / max * (W - 260.0),
            );
            let _ = write!(
                o,
                r##"<path d="M{x0:.1} {:.1}H{x1:.1}M{x0:.1} {:.1}V{:.1}M{x1:.1} {:.1}V{:.1}" stroke="#000000" stroke-width="1.2" fill="none"/>"##,
                y + 9.0,
                y + 4.0,
                y + 14.0,
                y + 4.0,
                y + 14.0
            );
        }
    }
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_are_powers_and_halves() {
        assert_eq!(
            ticks(1.0, 100.0, true),
            vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
        );
        let t = ticks(0.0, 10.0, false);
        assert_eq!(t.first(), Some(&0.0));
        assert!(t.len() >= 3 && t.len() <= 7, "{t:?}");
    }

    #[test]
    fn charts_are_well_formed_svg() {
        let s = line_chart(
            "t <&>",
            &Axis {
                label: "x".into(),
                log: true,
                fmt: |v| format!("{v}"),
            },
            &Axis {
                label: "y".into(),
                log: true,
                fmt: |v| format!("{v}"),
            },
            &[Series {
                name: "a".into(),
                points: vec![(2.0, 10.0, 9.0, 11.0), (8.0, 20.0, 20.0, 20.0)],
            }],
        );
        assert!(
            s.starts_with("<svg")
                && s.ends_with("</svg>")
                && s.contains("t &lt;&amp;&gt;")
                && s.contains("<polyline")
        );
        assert!(line_chart(
            "e",
            &Axis {
                label: "x".into(),
                log: false,
                fmt: |v| format!("{v}")
            },
            &Axis {
                label: "y".into(),
                log: false,
                fmt: |v| format!("{v}")
            },
            &[]
        )
        .contains("no data"));
        assert!(
            bar_chart("b", "MiB", &[("x".into(), 3.0)], |v| format!("{v}"))
                .contains("<rect x=\"200\"")
        );
        let r = ranged_bar_chart("r", "tps", &[("x".into(), 3.0, 2.0, 4.0)], |v| {
            format!("{v}")
        });
        assert!(r.contains("<path d=\"M"), "a whisker for the range");
        assert!(!bar_chart("b", "MiB", &[("x".into(), 3.0)], |v| format!("{v}")).contains("<path"));
    }
}
