//! The capacity page: what caused the retries and fallbacks the other pages
//! count. The lowest rate-limit headroom per bucket beside the 429s by the
//! limit they hit, each route's breaker timeline over the range, and the
//! report's `headroom`, `rate_limits` and `circuits` sections as tables.

use chrono::{DateTime, Utc};
use minijinja::{Value, context};
use plotters::style::RGBColor;

use super::charts::{self, Series, StateRow, TimeChart, Unit, palette};
use super::{PageError, View, chart_view, on_route, render, starts, step};
use crate::report::Report;
use crate::report::timeseries::Timeseries;

/// The share under which a response counts as a warning (the report's
/// `attempts_below_10pct`), drawn as the chart's reference line.
const WARNING_SHARE: f64 = 0.1;
const WARNING_COLOR: RGBColor = RGBColor(213, 94, 0);
/// Routes drawn on the headroom chart: those that ran lowest.
const HEADROOM_LINES: usize = 8;
/// The kinds of limit a 429 can hit, in the record format's order.
const LIMIT_KINDS: [&str; 5] = ["requests", "tokens", "input_tokens", "output_tokens", "unknown"];
pub const OPEN_COLOR: RGBColor = RGBColor(213, 94, 0);
pub const HALF_OPEN_COLOR: RGBColor = RGBColor(230, 159, 0);

pub fn capacity(view: &View, series: &Timeseries, report: &Report) -> Result<String, PageError> {
    let starts = starts(series);
    let mut lowest: Vec<(String, f64)> = Vec::new();
    for bucket in &series.buckets {
        for (route, ratio) in &bucket.headroom_min_ratio {
            match lowest.iter_mut().find(|(r, _)| r == route) {
                Some((_, low)) => *low = low.min(*ratio),
                None => lowest.push((route.clone(), *ratio)),
            }
        }
    }
    lowest.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    lowest.truncate(HEADROOM_LINES);
    let headroom_lines: Vec<Series> = lowest
        .iter()
        .enumerate()
        .map(|(i, (route, _))| Series {
            name: route.clone(),
            color: palette(i),
            values: series.buckets.iter().map(|b| b.headroom_min_ratio.get(route).copied()).collect(),
        })
        .collect();
    let limited: Vec<Series> = LIMIT_KINDS
        .iter()
        .enumerate()
        .map(|(i, kind)| Series {
            name: kind.to_string(),
            color: palette(i),
            values: series
                .buckets
                .iter()
                .map(|b| Some(b.rate_limited.get(*kind).copied().unwrap_or(0) as f64))
                .collect(),
        })
        .collect();
    let limited_totals: Vec<Option<f64>> =
        limited.iter().map(|s| Some(s.values.iter().flatten().sum())).collect();
    let headroom_chart = TimeChart {
        starts: starts.clone(),
        step: step(series),
        unit: Unit::Share,
        stacked: vec![],
        lines: headroom_lines.clone(),
        reference: Some((WARNING_SHARE, WARNING_COLOR)),
        y_max: Some(1.0),
    };
    let limited_chart = TimeChart {
        starts,
        step: step(series),
        unit: Unit::Count,
        stacked: limited.clone(),
        lines: vec![],
        reference: None,
        y_max: None,
    };
    let charts = vec![
        chart_view(
            "headroom",
            "Lowest rate-limit headroom a response stated (remaining / limit, any kind), by served route; dashed: 10 %",
            &headroom_chart,
            &headroom_lines,
            &lowest.iter().map(|(_, low)| Some(*low)).collect::<Vec<_>>(),
        )?,
        chart_view("rate-limited", "429s by the limit they hit", &limited_chart, &limited, &limited_totals)?,
    ];
    let route = view.get("route");
    let headroom: Vec<_> =
        report.headroom.iter().filter(|h| on_route(route, Some(&h.served_provider))).collect();
    let rate_limits: Vec<_> =
        report.rate_limits.iter().filter(|r| on_route(route, Some(&r.served_provider))).collect();
    let circuits: Vec<_> = report
        .circuits
        .iter()
        .filter(|c| c.route_group.is_some() || on_route(route, c.provider.as_deref()))
        .map(|c| context! { circuit => c, route => c.route().to_string() })
        .collect();
    let timeline = breaker_timeline(report, view.range.from, view.range.until)?;
    render(
        "capacity.html",
        "capacity",
        view,
        context! { report => report, charts => charts, headroom => headroom, rate_limits => rate_limits,
        circuits => circuits, timeline => timeline,
        colors => context! { open => charts::hex(OPEN_COLOR), half_open => charts::hex(HALF_OPEN_COLOR) } },
    )
}

/// A row per route and caller with its open and half-open intervals,
/// clipped to the range; `None` when no breaker left its closed state.
fn breaker_timeline(
    report: &Report,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Option<Value>, PageError> {
    let at = |t: &str| DateTime::parse_from_rfc3339(t).ok().map(|t| t.with_timezone(&Utc));
    let mut rows: Vec<StateRow> = Vec::new();
    for c in &report.circuits {
        let label = match &c.workflow {
            Some(caller) => format!("{} ({caller})", c.route()),
            None => c.route().to_string(),
        };
        let Some(start) = at(&c.from) else { continue };
        let end = c.until.as_deref().and_then(at).unwrap_or(until);
        let (start, end) = (start.max(from), end.min(until));
        if start >= end {
            continue;
        }
        let color = if c.state == "open" { OPEN_COLOR } else { HALF_OPEN_COLOR };
        match rows.iter_mut().find(|r| r.label == label) {
            Some(row) => row.bars.push((start, end, color)),
            None => rows.push(StateRow { label, bars: vec![(start, end, color)] }),
        }
    }
    if rows.is_empty() {
        return Ok(None);
    }
    let format = if until - from > chrono::Duration::days(2) { "%m-%d %H:%M" } else { "%H:%M" };
    let clock = |t: DateTime<Utc>| t.format(format).to_string();
    let svg = charts::state_timeline(&rows, from, until, &clock).map_err(PageError::Chart)?;
    Ok(Some(Value::from_safe_string(svg)))
}
