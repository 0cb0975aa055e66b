//! The dashboard's charts, drawn on the server as SVG with plotters: no
//! script and no request leaves the page. Legends and figures are HTML
//! beside the chart (crisp, selectable, and checked by the browser test);
//! the SVG holds the plot and its axes only.

use chrono::{DateTime, Duration, Utc};
use plotters::prelude::*;
use plotters::style::RGBColor;

pub const WIDTH: u32 = 960;
pub const HEIGHT: u32 = 260;

/// What the y axis counts, for its labels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// A share, 0..1, labelled in percent.
    Share,
    Usd,
    Count,
    Seconds,
}

impl Unit {
    fn label(self, v: f64) -> String {
        match self {
            Unit::Share => format!("{:.0}%", v * 100.0),
            Unit::Usd => {
                if v == 0.0 || v.abs() >= 1.0 {
                    format!("${v:.2}")
                } else {
                    format!("${v:.4}")
                }
            }
            Unit::Count => {
                if v.fract() == 0.0 {
                    format!("{v:.0}")
                } else {
                    format!("{v:.2}")
                }
            }
            Unit::Seconds => format!("{v}s"),
        }
    }
}

/// One series of a chart: a name (for the HTML legend), a color and one
/// value per bucket (`None`: nothing measured, drawn as a gap).
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub color: RGBColor,
    pub values: Vec<Option<f64>>,
}

/// A chart over the buckets' time axis: `stacked` areas (each bucket's
/// values summed bottom-up) under `lines`.
#[derive(Debug, Clone)]
pub struct TimeChart {
    pub starts: Vec<DateTime<Utc>>,
    pub step: Duration,
    pub unit: Unit,
    pub stacked: Vec<Series>,
    pub lines: Vec<Series>,
    /// A horizontal reference (a budget), dashed.
    pub reference: Option<(f64, RGBColor)>,
    /// Fixed top of the y axis (1.0 for shares); otherwise the data's.
    pub y_max: Option<f64>,
}

/// A series' color by its position: a palette readable on white, told
/// apart by people with the common color vision deficiencies (Okabe-Ito).
pub fn palette(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(0, 114, 178),
        RGBColor(230, 159, 0),
        RGBColor(0, 158, 115),
        RGBColor(204, 121, 167),
        RGBColor(86, 180, 233),
        RGBColor(213, 94, 0),
        RGBColor(240, 228, 66),
        RGBColor(120, 120, 120),
    ];
    COLORS[i % COLORS.len()]
}

pub fn hex(color: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", color.0, color.1, color.2)
}

type Drawn = Result<(), String>;

fn failed<E: std::fmt::Display>(e: E) -> String {
    format!("the chart could not be drawn: {e}")
}

impl TimeChart {
    pub fn svg(&self) -> Result<String, String> {
        let mut out = String::new();
        self.draw(&mut out)?;
        Ok(out)
    }

    fn draw(&self, out: &mut String) -> Drawn {
        let (Some(&first), Some(&last)) = (self.starts.first(), self.starts.last()) else {
            return Err("no buckets to draw".to_string());
        };
        let end = last + self.step;
        let stacked_tops: Vec<f64> = (0..self.starts.len())
            .map(|i| self.stacked.iter().map(|s| s.values.get(i).copied().flatten().unwrap_or(0.0)).sum())
            .collect();
        let data_max = stacked_tops
            .iter()
            .copied()
            .chain(self.lines.iter().flat_map(|s| s.values.iter().flatten().copied()))
            .chain(self.reference.map(|(v, _)| v))
            .fold(0.0_f64, f64::max);
        let y_max = self.y_max.unwrap_or(if data_max > 0.0 { data_max * 1.1 } else { 1.0 });
        let root = SVGBackend::with_string(out, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(64)
            .build_cartesian_2d(first..end, 0.0..y_max)
            .map_err(failed)?;
        let span = end - first;
        let time_format = if span > Duration::days(2) { "%m-%d %H:%M" } else { "%H:%M" };
        let unit = self.unit;
        chart
            .configure_mesh()
            .x_labels(8)
            .y_labels(5)
            .x_label_formatter(&|t| t.format(time_format).to_string())
            .y_label_formatter(&|v| unit.label(*v))
            .light_line_style(RGBColor(238, 238, 238))
            .bold_line_style(RGBColor(220, 220, 220))
            .draw()
            .map_err(failed)?;
        // Stacked: the running sum of each layer, drawn top layer first so
        // each lower one paints over the part that is its own.
        let mut cumulative = vec![0.0; self.starts.len()];
        let mut layers = Vec::new();
        for series in &self.stacked {
            for (i, total) in cumulative.iter_mut().enumerate() {
                *total += series.values.get(i).copied().flatten().unwrap_or(0.0);
            }
            layers.push((series.color, cumulative.clone()));
        }
        for (color, tops) in layers.iter().rev() {
            let points = self.step_points(tops.iter().map(|v| Some(*v)));
            chart
                .draw_series(AreaSeries::new(points.into_iter().flatten(), 0.0, color.mix(0.85)))
                .map_err(failed)?;
        }
        if let Some((value, color)) = self.reference {
            chart
                .draw_series(DashedLineSeries::new(
                    [(first, value), (end, value)],
                    6,
                    4,
                    color.stroke_width(2),
                ))
                .map_err(failed)?;
        }
        for series in &self.lines {
            for run in self.step_points(series.values.iter().copied()).split(Option::is_none) {
                let run: Vec<_> = run.iter().flatten().copied().collect();
                chart.draw_series(LineSeries::new(run, series.color.stroke_width(2))).map_err(failed)?;
            }
        }
        root.present().map_err(failed)?;
        Ok(())
    }

    /// A bucket's value held over its whole step (two points), so a chart
    /// reads as the buckets it was computed from.
    fn step_points(&self, values: impl Iterator<Item = Option<f64>>) -> Vec<Option<(DateTime<Utc>, f64)>> {
        let mut points = Vec::new();
        for (start, value) in self.starts.iter().zip(values) {
            match value {
                Some(v) => {
                    points.push(Some((*start, v)));
                    points.push(Some((*start + self.step, v)));
                }
                None => points.push(None),
            }
        }
        points
    }
}

/// One bar of the workflow timeline.
#[derive(Debug, Clone)]
pub struct Span {
    /// Milliseconds from the workflow's first attempt.
    pub start_ms: f64,
    pub end_ms: f64,
    pub color: RGBColor,
    /// The label of its row, left of the plot.
    pub label: String,
}

/// Every attempt of a workflow as a bar on its own row, first on top; the
/// gaps between bars are the waits. The axis counts from the first start.
pub fn timeline(spans: &[Span]) -> Result<String, String> {
    if spans.is_empty() {
        return Err("no attempts to draw".to_string());
    }
    let end = spans.iter().map(|s| s.end_ms.max(s.start_ms)).fold(1.0_f64, f64::max) * 1.02;
    // An instant for each millisecond offset: the rows share the clock axis
    // of `state_timeline`, labelled as offsets.
    let origin = DateTime::<Utc>::UNIX_EPOCH;
    let at = |ms: f64| origin + Duration::microseconds((ms * 1000.0) as i64);
    let rows: Vec<StateRow> = spans
        .iter()
        .map(|s| StateRow { label: s.label.clone(), bars: vec![(at(s.start_ms), at(s.end_ms), s.color)] })
        .collect();
    let offset = |t: DateTime<Utc>| {
        let ms = (t - origin).num_milliseconds() as f64;
        if end >= 10_000.0 { format!("{:.0}s", ms / 1000.0) } else { format!("{ms:.0}ms") }
    };
    state_timeline(&rows, origin, at(end), &offset)
}

/// One row of a state timeline: its label and the bars on it.
#[derive(Debug, Clone)]
pub struct StateRow {
    pub label: String,
    /// From, until (clipped to the chart's range by the caller) and color.
    pub bars: Vec<(DateTime<Utc>, DateTime<Utc>, RGBColor)>,
}

/// Rows of bars over a time axis (a breaker's open and half-open intervals
/// over the page's range, a workflow's attempts), first row on top; `tick`
/// labels the axis.
pub fn state_timeline(
    rows: &[StateRow],
    from: DateTime<Utc>,
    until: DateTime<Utc>,
    tick: &dyn Fn(DateTime<Utc>) -> String,
) -> Result<String, String> {
    if rows.is_empty() || until <= from {
        return Err("no states to draw".to_string());
    }
    let count = rows.len();
    let height = (60 + 26 * count as u32).min(4000);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(220)
            .build_cartesian_2d(from..until, 0.0..count as f64)
            .map_err(failed)?;
        let label_of = |y: &f64| {
            let i = count as f64 - y - 0.5;
            if (i - i.round()).abs() < 1e-9 && i >= 0.0 && (i as usize) < count {
                rows[i as usize].label.clone()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            // Half-row steps: the rows' middles (k + 0.5) are among the
            // points plotters labels.
            .y_labels(count * 2 + 1)
            .y_label_formatter(&label_of)
            .x_labels(8)
            .x_label_formatter(&|t| tick(*t))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()
            .map_err(failed)?;
        // A bar shorter than a pixel still shows as a sliver.
        let sliver = (until - from) / 500;
        chart
            .draw_series(rows.iter().enumerate().flat_map(|(i, row)| {
                let top = (count - i) as f64 - 0.15;
                row.bars.iter().map(move |(start, end, color)| {
                    let right = (*end).max(*start + sliver);
                    Rectangle::new([(*start, top), (right, top - 0.7)], color.filled())
                })
            }))
            .map_err(failed)?;
        root.present().map_err(failed)?;
    }
    Ok(out)
}

/// The colour of a reconciliation cause, on its bar and in its legend.
pub fn cause_color(cause: &str) -> &'static str {
    match cause {
        "unbilled_failures" => "#d62728",
        "emitter_cost" => "#ff7f0e",
        "tokens" => "#1f77b4",
        "price" => "#2ca02c",
        _ => "#7f7f7f",
    }
}

/// The causes of a drift as one bar around zero: positive causes (the
/// ledger above the bill) stack right of the axis, negative ones left, so
/// the bar's two ends differ by the drift.
pub fn causes_bar(causes: &[(&str, f64)]) -> String {
    const WIDTH: f64 = 640.0;
    const HEIGHT: f64 = 28.0;
    let right: f64 = causes.iter().map(|(_, v)| v.max(0.0)).sum();
    let left: f64 = causes.iter().map(|(_, v)| (-v).max(0.0)).sum();
    let scale = if right + left > 0.0 { (WIDTH - 2.0) / (right + left) } else { 0.0 };
    let zero = 1.0 + left * scale;
    let mut svg = format!(
        "<svg class=\"causes\" width=\"{WIDTH}\" height=\"{}\" viewBox=\"0 0 {WIDTH} {}\" role=\"img\" aria-label=\"causes of the drift\">",
        HEIGHT + 4.0,
        HEIGHT + 4.0
    );
    let (mut up, mut down) = (zero, zero);
    for (name, value) in causes {
        let width = value.abs() * scale;
        if width <= 0.0 {
            continue;
        }
        let x = if *value >= 0.0 {
            up += width;
            up - width
        } else {
            down -= width;
            down
        };
        svg += &format!(
            "<rect data-cause=\"{name}\" x=\"{x:.2}\" y=\"2\" width=\"{width:.2}\" height=\"{HEIGHT}\" fill=\"{}\"><title>{name}: {value:.6} USD</title></rect>",
            cause_color(name)
        );
    }
    svg += &format!(
        "<line x1=\"{zero:.2}\" x2=\"{zero:.2}\" y1=\"0\" y2=\"{}\" stroke=\"#000\"/></svg>",
        HEIGHT + 4.0
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn a_chart_is_an_svg_with_its_series_and_gaps() {
        let starts: Vec<_> = (0..4).map(|i| at("2026-11-28T02:00:00Z") + Duration::minutes(i)).collect();
        let chart = TimeChart {
            starts,
            step: Duration::minutes(1),
            unit: Unit::Share,
            stacked: vec![
                Series { name: "a".into(), color: palette(0), values: vec![Some(0.5); 4] },
                Series { name: "b".into(), color: palette(1), values: vec![Some(0.5); 4] },
            ],
            lines: vec![Series {
                name: "c".into(),
                color: palette(2),
                values: vec![Some(0.9), None, None, Some(0.8)],
            }],
            reference: Some((0.1, palette(5))),
            y_max: Some(1.0),
        };
        let svg = chart.svg().unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("02:00") && svg.contains("100%"), "labelled axes");
        assert!(svg.to_uppercase().contains(&hex(palette(0)).to_uppercase()), "the first series is drawn");
        assert!(TimeChart { starts: vec![], ..chart }.svg().is_err());
    }

    #[test]
    fn the_timeline_has_a_bar_per_attempt() {
        let spans: Vec<_> = (0..3)
            .map(|i| Span {
                start_ms: i as f64 * 1000.0,
                end_ms: i as f64 * 1000.0 + 500.0,
                color: palette(i),
                label: format!("#{i} sdk openai"),
            })
            .collect();
        let svg = timeline(&spans).unwrap();
        for i in 0..3 {
            assert!(svg.contains(&format!("#{i} sdk openai")), "row labels");
        }
        assert!(timeline(&[]).is_err());
    }
}
