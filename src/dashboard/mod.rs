//! The built-in dashboard: HTML pages drawn on the server from the same
//! data the JSON routes answer with (`report::Report`,
//! `report::timeseries::Timeseries`, `report::workflow::WorkflowDetail`,
//! the alert events). No script: filters are GET forms, so every view is a
//! URL; charts are inline SVG (`charts`); pages are minijinja templates
//! with HTML auto-escaping (`templates/`). This module renders only; the
//! handlers in `service::pages` fetch.

pub mod capacity;
pub mod charts;
pub mod view;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use chrono::{DateTime, Duration, Utc};
use minijinja::{Environment, Value, context};
use plotters::style::RGBColor;
use serde::Serialize;

use crate::report::Report;
use crate::report::timeseries::{Bound, QUANTILES, Timeseries};
use crate::report::workflow::WorkflowDetail;
use attempt_core::alert_event::AlertEvent;
use charts::{Series, Span, TimeChart, Unit, hex, palette};
pub use view::View;

/// The stylesheet, served at `STYLESHEET_PATH` (a file of our own origin,
/// so the pages' Content-Security-Policy allows no inline style).
pub const STYLESHEET: &str = include_str!("templates/dashboard.css");
pub const STYLESHEET_PATH: &str = "/dashboard.css";
/// No script, no frame, nothing from another origin.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self' data:; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

static TEMPLATES: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    for (name, source) in [
        ("base.html", include_str!("templates/base.html")),
        ("macros.html", include_str!("templates/macros.html")),
        ("overview.html", include_str!("templates/overview.html")),
        ("cost.html", include_str!("templates/cost.html")),
        ("attempts.html", include_str!("templates/attempts.html")),
        ("capacity.html", include_str!("templates/capacity.html")),
        ("alerts.html", include_str!("templates/alerts.html")),
        ("workflow.html", include_str!("templates/workflow.html")),
        ("audit.html", include_str!("templates/audit.html")),
        ("tune.html", include_str!("templates/tune.html")),
        ("reconcile.html", include_str!("templates/reconcile.html")),
        ("error.html", include_str!("templates/error.html")),
    ] {
        // The templates are compiled in; a broken one fails every test.
        if let Err(e) = env.add_template(name, source) {
            tracing::error!("dashboard template {name}: {e}");
        }
    }
    env.add_filter("pct", pct);
    env.add_filter("usd", usd_text);
    env.add_filter("int", int_text);
    env.add_filter("ms", ms_text);
    env
});

/// The outcomes in their stacking order, bottom up, with their colors.
const OUTCOMES: [(&str, RGBColor); 5] = [
    ("primary_success", RGBColor(0, 158, 115)),
    ("retry_recovery", RGBColor(86, 180, 233)),
    ("fallback_recovery", RGBColor(230, 159, 0)),
    ("degraded", RGBColor(204, 121, 167)),
    ("fail_closed", RGBColor(213, 94, 0)),
];
const FINAL_SUCCESS_COLOR: RGBColor = RGBColor(30, 30, 30);
const BUDGET_COLOR: RGBColor = RGBColor(213, 94, 0);

#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error("the page could not be drawn: {0}")]
    Template(#[from] minijinja::Error),
    #[error("{0}")]
    Chart(String),
}

/// The dashboard's pages, for the navigation bar.
const PAGES: [(&str, &str); 9] = [
    ("overview", "/"),
    ("cost", "/cost"),
    ("attempts", "/attempts"),
    ("capacity", "/capacity"),
    ("audit", "/audit"),
    ("reconcile", "/reconcile"),
    ("tune", "/tune"),
    ("alerts", "/alerts"),
    ("workflow", "/workflow"),
];

fn render(template: &str, page: &str, view: &View, extra: Value) -> Result<String, PageError> {
    let query = view.query(&[]);
    let nav: Vec<_> = PAGES
        .iter()
        .map(|(name, path)| context! { name => name, href => format!("{path}{query}"), current => *name == page })
        .collect();
    let common = context! {
        page => page,
        nav => nav,
        query => query,
        since => view.get("since"),
        until => view.get("until"),
        step => view.get("step"),
        workflow => view.get("workflow"),
        route => view.get("route"),
        retry_budget => view.get("retry_budget"),
        range_from => stamp(view.range.from),
        range_until => stamp(view.range.until),
        step_minutes => view.range.step_minutes,
        moved_to_newest => view.moved_to_newest.map(stamp),
        stylesheet => STYLESHEET_PATH,
    };
    Ok(TEMPLATES.get_template(template)?.render(context! { ..common, ..extra })?)
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// One legend entry: name, color and the figure over the range.
#[derive(Serialize)]
struct Legend {
    name: String,
    color: String,
    total: Option<f64>,
}

/// A chart as the templates take it: the SVG, its legend, and the numbers
/// it was drawn from (a table under the chart, read by the browser test).
#[derive(Serialize)]
struct ChartView {
    id: &'static str,
    title: String,
    svg: Value,
    unit: &'static str,
    legend: Vec<Legend>,
    columns: Vec<String>,
    rows: Vec<(String, Vec<Option<f64>>)>,
}

fn chart_view(
    id: &'static str,
    title: impl Into<String>,
    chart: &TimeChart,
    table: &[Series],
    totals: &[Option<f64>],
) -> Result<ChartView, PageError> {
    let svg = chart.svg().map_err(PageError::Chart)?;
    let unit = match chart.unit {
        Unit::Share => "share",
        Unit::Usd => "usd",
        Unit::Count => "count",
        Unit::Seconds => "seconds",
    };
    let series: Vec<&Series> = chart.stacked.iter().chain(chart.lines.iter()).collect();
    let legend = series
        .iter()
        .enumerate()
        .map(|(i, s)| Legend {
            name: s.name.clone(),
            color: hex(s.color),
            total: totals.get(i).copied().flatten(),
        })
        .collect();
    let rows = chart
        .starts
        .iter()
        .enumerate()
        .map(|(i, start)| (stamp(*start), table.iter().map(|s| s.values.get(i).copied().flatten()).collect()))
        .collect();
    Ok(ChartView {
        id,
        title: title.into(),
        svg: Value::from_safe_string(svg),
        unit,
        legend,
        columns: table.iter().map(|s| s.name.clone()).collect(),
        rows,
    })
}

fn starts(series: &Timeseries) -> Vec<DateTime<Utc>> {
    series
        .buckets
        .iter()
        .filter_map(|b| DateTime::parse_from_rfc3339(&b.start).ok().map(|t| t.with_timezone(&Utc)))
        .collect()
}

fn step(series: &Timeseries) -> Duration {
    Duration::seconds(series.step_seconds)
}

/// Whether a table row about `provider` is shown under the route filter.
fn on_route(route: Option<&str>, provider: Option<&str>) -> bool {
    route.is_none() || provider == route
}

fn terminal(counts: &BTreeMap<&'static str, i64>) -> i64 {
    OUTCOMES.iter().map(|(o, _)| counts.get(o).copied().unwrap_or(0)).sum()
}

/// Delivered workflows over terminal ones: the single rate that fallbacks
/// and retries keep high while the primary route fails.
fn final_success(counts: &BTreeMap<&'static str, i64>) -> Option<f64> {
    let delivered: i64 = OUTCOMES[..3].iter().map(|(o, _)| counts.get(o).copied().unwrap_or(0)).sum();
    let terminal = terminal(counts);
    (terminal > 0).then(|| delivered as f64 / terminal as f64)
}

/// Series by key from per-bucket maps, keys by their total over the range,
/// largest first.
fn keyed_series<K: AsRef<str> + Ord + Clone>(
    series: &Timeseries,
    pick: impl Fn(&crate::report::timeseries::Bucket) -> &BTreeMap<K, f64>,
) -> (Vec<Series>, Vec<Option<f64>>) {
    let mut totals: BTreeMap<K, f64> = BTreeMap::new();
    for b in &series.buckets {
        for (k, v) in pick(b) {
            *totals.entry(k.clone()).or_default() += v;
        }
    }
    let mut keys: Vec<(K, f64)> = totals.into_iter().collect();
    keys.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let made = keys
        .iter()
        .enumerate()
        .map(|(i, (k, _))| Series {
            name: k.as_ref().to_string(),
            color: palette(i),
            values: series.buckets.iter().map(|b| Some(pick(b).get(k).copied().unwrap_or(0.0))).collect(),
        })
        .collect();
    (made, keys.iter().map(|(_, t)| Some(*t)).collect())
}

/// A series per outcome: `value` of each bucket's workflows and that
/// outcome's count.
fn per_outcome<'a>(
    series: &Timeseries,
    outcomes: impl Iterator<Item = &'a (&'static str, RGBColor)>,
    value: impl Fn(&BTreeMap<&'static str, i64>, i64) -> Option<f64>,
) -> Vec<Series> {
    outcomes
        .map(|(outcome, color)| Series {
            name: outcome.to_string(),
            color: *color,
            values: series
                .buckets
                .iter()
                .map(|b| value(&b.workflows, b.workflows.get(outcome).copied().unwrap_or(0)))
                .collect(),
        })
        .collect()
}

pub fn overview(view: &View, series: &Timeseries, report: &Report) -> Result<String, PageError> {
    let starts = starts(series);
    let shares = per_outcome(series, OUTCOMES.iter(), |workflows, n| {
        let terminal = terminal(workflows);
        (terminal > 0).then(|| n as f64 / terminal as f64)
    });
    let final_line = Series {
        name: "final success".to_string(),
        color: FINAL_SUCCESS_COLOR,
        values: series.buckets.iter().map(|b| final_success(&b.workflows)).collect(),
    };
    let pending = [("queued", palette(7)), ("in_flight", palette(4))];
    let counts = per_outcome(series, OUTCOMES.iter().chain(pending.iter()), |_, n| Some(n as f64));
    let w = &report.workflows;
    let rates = &report.rates;
    let share_totals = [
        rates.primary_success,
        rates.retry_recovery,
        rates.fallback_recovery,
        rates.degraded,
        rates.fail_closed,
    ];
    let total_counts = [
        w.primary_success,
        w.retry_recovery,
        w.fallback_recovery,
        w.degraded,
        w.fail_closed,
        w.queued,
        w.in_flight,
    ];
    let report_final = {
        let terminal =
            w.primary_success + w.retry_recovery + w.fallback_recovery + w.degraded + w.fail_closed;
        (terminal > 0)
            .then(|| (w.primary_success + w.retry_recovery + w.fallback_recovery) as f64 / terminal as f64)
    };
    let mut share_legend_totals: Vec<Option<f64>> = share_totals.to_vec();
    share_legend_totals.push(report_final);
    let share_chart = TimeChart {
        starts: starts.clone(),
        step: step(series),
        unit: Unit::Share,
        stacked: shares.clone(),
        lines: vec![final_line.clone()],
        reference: None,
        y_max: Some(1.0),
    };
    let count_chart = TimeChart {
        starts,
        step: step(series),
        unit: Unit::Count,
        stacked: counts.clone(),
        lines: vec![],
        reference: None,
        y_max: None,
    };
    let mut share_table = shares;
    share_table.push(final_line);
    let charts = vec![
        chart_view(
            "outcome-shares",
            "Outcome rates of terminal workflows, by the minute of their first attempt",
            &share_chart,
            &share_table,
            &share_legend_totals,
        )?,
        chart_view(
            "outcome-counts",
            "Workflows by outcome",
            &count_chart,
            &counts,
            &total_counts.iter().map(|c| Some(*c as f64)).collect::<Vec<_>>(),
        )?,
    ];
    let route = view.get("route");
    let routes: Vec<_> =
        report.by_primary_route.iter().filter(|r| on_route(route, r.provider.as_deref())).collect();
    let fallbacks: Vec<_> = report
        .fallbacks
        .iter()
        .filter(|f| {
            on_route(route, f.primary_provider.as_deref()) || on_route(route, f.fallback_provider.as_deref())
        })
        .collect();
    render(
        "overview.html",
        "overview",
        view,
        context! { report => report, final_success => report_final, charts => charts, routes => routes, fallbacks => fallbacks,
        route_query => view.query(&[("route", None)]) },
    )
}

/// One breakdown of a bucket's cost.
type Pick = fn(&crate::report::timeseries::Bucket) -> &BTreeMap<String, f64>;

pub fn cost(view: &View, series: &Timeseries, report: &Report) -> Result<String, PageError> {
    let starts = starts(series);
    let mut charts = Vec::new();
    let usd_chart = |stacked: Vec<Series>| TimeChart {
        starts: starts.clone(),
        step: step(series),
        unit: Unit::Usd,
        stacked,
        lines: vec![],
        reference: None,
        y_max: None,
    };
    let picks: [(&'static str, &str, Pick); 4] = [
        ("cost-by-served-provider", "Cost by the provider that served", |b| &b.cost_by_served_provider),
        ("cost-by-requested-provider", "The same cost by the provider that was asked", |b| {
            &b.cost_by_requested_provider
        }),
        ("cost-by-served-model", "Cost by served model", |b| &b.cost_by_served_model),
        (
            "wasted-cost-by-served-provider",
            "Wasted cost (attempts not delivered) by the provider that served",
            |b| &b.wasted_cost_by_served_provider,
        ),
    ];
    for (id, title, pick) in picks {
        let (made, totals) = keyed_series(series, pick);
        charts.push(chart_view(id, title, &usd_chart(made.clone()), &made, &totals)?);
    }
    let wasted_tokens = Series {
        name: "wasted tokens".to_string(),
        color: palette(5),
        values: series.buckets.iter().map(|b| Some(b.wasted_tokens as f64)).collect(),
    };
    let token_chart = TimeChart {
        starts,
        step: step(series),
        unit: Unit::Count,
        stacked: vec![wasted_tokens.clone()],
        lines: vec![],
        reference: None,
        y_max: None,
    };
    let wasted_total = (report.tokens.wasted.input + report.tokens.wasted.output) as f64;
    charts.push(chart_view(
        "wasted-tokens",
        "Wasted tokens (input + output of attempts not delivered)",
        &token_chart,
        &[wasted_tokens],
        &[Some(wasted_total)],
    )?);
    let route = view.get("route");
    let providers: Vec<_> =
        report.by_served_provider.iter().filter(|p| on_route(route, Some(&p.served_provider))).collect();
    let models: Vec<_> =
        report.by_served_model.iter().filter(|m| on_route(route, Some(&m.served_provider))).collect();
    render(
        "cost.html",
        "cost",
        view,
        context! { report => report, charts => charts, providers => providers, models => models,
        wasted_tokens => report.tokens.wasted.input + report.tokens.wasted.output },
    )
}

pub fn attempts(view: &View, series: &Timeseries, report: &Report) -> Result<String, PageError> {
    let starts = starts(series);
    let layers: Vec<Series> = ["sdk", "gateway", "app", "queue"]
        .iter()
        .enumerate()
        .map(|(i, layer)| Series {
            name: layer.to_string(),
            color: palette(i),
            values: series
                .buckets
                .iter()
                .map(|b| Some(b.attempts_by_layer.get(layer).copied().unwrap_or(0) as f64))
                .collect(),
        })
        .collect();
    let layer_totals: Vec<Option<f64>> = ["sdk", "gateway", "app", "queue"]
        .iter()
        .map(|l| {
            Some(series.buckets.iter().map(|b| b.attempts_by_layer.get(l).copied().unwrap_or(0)).sum::<i64>()
                as f64)
        })
        .collect();
    let layer_chart = TimeChart {
        starts: starts.clone(),
        step: step(series),
        unit: Unit::Count,
        stacked: layers.clone(),
        lines: vec![],
        reference: None,
        y_max: None,
    };
    let ratio = Series {
        name: "retries / first attempts".to_string(),
        color: palette(0),
        values: series.buckets.iter().map(|b| b.retry_ratio).collect(),
    };
    let ratio_chart = TimeChart {
        starts: starts.clone(),
        step: step(series),
        unit: Unit::Count,
        stacked: vec![],
        lines: vec![ratio.clone()],
        reference: Some((report.retry_budget.budget, BUDGET_COLOR)),
        y_max: None,
    };
    let retry_table = vec![
        Series {
            name: "first attempts".to_string(),
            color: palette(7),
            values: series.buckets.iter().map(|b| Some(b.first_attempts as f64)).collect(),
        },
        Series {
            name: "retries".to_string(),
            color: palette(7),
            values: series.buckets.iter().map(|b| Some(b.retries as f64)).collect(),
        },
        ratio,
    ];
    let mut charts = vec![
        chart_view(
            "attempts-by-layer",
            "Attempts by the layer that sent them",
            &layer_chart,
            &layers,
            &layer_totals,
        )?,
        chart_view(
            "retry-ratio",
            format!("Retry ratio per bucket against the budget ({})", report.retry_budget.budget),
            &ratio_chart,
            &retry_table,
            &[report.retry_budget.ratio],
        )?,
    ];
    for (metric, title) in [("duration", "Attempt latency"), ("ttft", "Time to first token")] {
        let lines: Vec<Series> = QUANTILES
            .iter()
            .enumerate()
            .map(|(i, (name, _))| Series {
                name: format!("{name} (bucket bound)"),
                color: palette(i),
                values: series
                    .buckets
                    .iter()
                    .map(|b| {
                        let s = b.latency.get(metric)?;
                        let bound = [s.p50_le_seconds, s.p95_le_seconds, s.p99_le_seconds][i]?;
                        match bound {
                            Bound::Seconds(v) => Some(v),
                            Bound::Above => None,
                        }
                    })
                    .collect(),
            })
            .collect();
        if lines.iter().all(|s| s.values.iter().all(Option::is_none)) {
            continue;
        }
        let chart = TimeChart {
            starts: starts.clone(),
            step: step(series),
            unit: Unit::Seconds,
            stacked: vec![],
            lines: lines.clone(),
            reference: None,
            y_max: None,
        };
        let id = if metric == "duration" { "latency" } else { "ttft" };
        charts.push(chart_view(
            id,
            format!("{title}: percentiles, as the upper bound of their histogram bucket"),
            &chart,
            &lines,
            &[],
        )?);
    }
    let route = view.get("route");
    let errors: Vec<_> = report.error_classes.iter().filter(|e| on_route(route, Some(&e.provider))).collect();
    let latency: Vec<_> = series
        .latency
        .iter()
        .map(|(metric, s)| {
            context! { metric => metric, observations => s.observations,
            bounds => [s.p50_le_seconds, s.p95_le_seconds, s.p99_le_seconds].iter().map(|b| match b {
                Some(Bound::Seconds(v)) => format!("≤ {v} s"),
                Some(Bound::Above) => "above the last bound".to_string(),
                None => "–".to_string(),
            }).collect::<Vec<_>>() }
        })
        .collect();
    render(
        "attempts.html",
        "attempts",
        view,
        context! { report => report, charts => charts, errors => errors, latency => latency,
        quantiles => QUANTILES.iter().map(|(n, _)| *n).collect::<Vec<_>>() },
    )
}

pub fn audit(view: &View, audit: &crate::report::audit::Audit) -> Result<String, PageError> {
    render("audit.html", "audit", view, context! { audit => audit })
}

/// Cells listed on the reconcile page, largest |drift| first.
const RECONCILE_ROWS: usize = 200;

/// The ledger against the bill: the window's causes as one stacked bar,
/// the cells by |drift| (each linking to its attempts), what was not compared.
pub fn reconcile(
    view: &View,
    answer: &crate::report::reconcile::Reconciliation,
) -> Result<String, PageError> {
    // Money as numbers the templates format (the JSON answer keeps every digit).
    let answer = serde_json::to_value(answer).unwrap_or(serde_json::Value::Null);
    let mut cells: Vec<serde_json::Value> = answer["cells"].as_array().cloned().unwrap_or_default();
    let drift = |c: &serde_json::Value| c["drift_usd"].as_f64().map_or(0.0, f64::abs);
    cells.sort_by(|a, b| drift(b).total_cmp(&drift(a)));
    cells.truncate(RECONCILE_ROWS);
    let totals = &answer["totals"];
    let causes: Vec<(&str, f64)> = ["unbilled_failures", "emitter_cost", "tokens", "price", "unexplained"]
        .into_iter()
        .map(|k| (k, totals["causes"][k].as_f64().unwrap_or(0.0)))
        .collect();
    render(
        "reconcile.html",
        "reconcile",
        view,
        context! { answer => answer, cells => cells, shown => RECONCILE_ROWS,
        bar => charts::causes_bar(&causes), causes => causes.iter().map(|(k, v)| context! { name => k, usd => v, color => charts::cause_color(k) }).collect::<Vec<_>>() },
    )
}

/// The curve's overall and by-layer lines, and the replay of `limits` (the
/// page's own field: assignments separated by spaces).
pub fn tune(
    view: &View,
    tune: &crate::report::tune::Tune,
    limits: Option<&str>,
) -> Result<String, PageError> {
    let all = |l: &&crate::report::tune::CurveLine| l.after_class == "all" && l.primary_route == "all";
    let overall: Vec<_> = tune.curve.iter().filter(all).filter(|l| l.layer == "all").collect();
    let by_layer: Vec<_> = tune.curve.iter().filter(all).filter(|l| l.layer != "all").collect();
    let keep: Vec<(&str, &str)> =
        view.given.iter().filter(|(k, _)| *k != "limits").map(|(k, v)| (*k, v.as_str())).collect();
    // The report's outcome keys, in the record format's order.
    let outcomes = <attempt_core::model::Outcome as strum::VariantNames>::VARIANTS;
    render(
        "tune.html",
        "tune",
        view,
        context! { tune => tune, overall => overall, by_layer => by_layer, keep => keep, limits => limits,
        outcomes => outcomes },
    )
}

/// An alert with the link to the range around it.
#[derive(Serialize)]
struct AlertRow<'a> {
    #[serde(flatten)]
    event: &'a AlertEvent,
    href: String,
}

pub fn alerts(
    view: &View,
    firing: &[AlertEvent],
    pending: &[AlertEvent],
    history: &[AlertEvent],
) -> Result<String, PageError> {
    let linked = |events: &[AlertEvent]| -> Vec<Value> {
        events
            .iter()
            .map(|e| {
                // The hour before the episode began to the hour after this state.
                let since = stamp(e.active_since.min(e.at) - Duration::hours(1));
                let until = stamp(e.at.max(e.active_since) + Duration::hours(1));
                let href = format!("/{}", view.query(&[("since", Some(&since)), ("until", Some(&until))]));
                Value::from_serialize(AlertRow { event: e, href })
            })
            .collect()
    };
    render(
        "alerts.html",
        "alerts",
        view,
        context! { firing => linked(firing), pending => linked(pending), history => linked(history) },
    )
}

/// Colors of the timeline: delivered, failed, and other ended attempts.
fn attempt_color(delivered: bool, status: &str) -> RGBColor {
    match (delivered, status) {
        (true, _) => RGBColor(0, 158, 115),
        (false, "ok") => RGBColor(120, 120, 120),
        _ => RGBColor(213, 94, 0),
    }
}

pub fn workflow(
    view: &View,
    asked: Option<&str>,
    detail: Option<&WorkflowDetail>,
) -> Result<String, PageError> {
    let mut timeline = None;
    if let Some(detail) = detail {
        let start_of = |t: &str| DateTime::parse_from_rfc3339(t).ok().map(|t| t.with_timezone(&Utc));
        let first = detail.attempts.iter().filter_map(|a| start_of(&a.started_at)).min();
        if let Some(first) = first {
            let from_first = |t: &str| start_of(t).map(|t| (t - first).num_milliseconds() as f64);
            let last_end = detail
                .attempts
                .iter()
                .filter_map(|a| Some(from_first(&a.started_at)? + a.duration_ms.unwrap_or(0.0)))
                .fold(0.0_f64, f64::max);
            // The breakers its routes were in, on rows above the attempts,
            // clipped to the workflow's own span.
            let breakers = detail.circuits.iter().filter_map(|c| {
                let start = from_first(&c.from)?.max(0.0);
                let end = c.until.as_deref().and_then(from_first).unwrap_or(last_end).min(last_end);
                Some(Span {
                    start_ms: start,
                    end_ms: end.max(start),
                    color: if c.state == "open" { capacity::OPEN_COLOR } else { capacity::HALF_OPEN_COLOR },
                    label: format!("breaker {} {}", c.route(), c.state),
                })
            });
            let spans: Vec<Span> = breakers
                .chain(detail.attempts.iter().map(|a| {
                    let start_ms =
                        start_of(&a.started_at).map_or(0.0, |t| (t - first).num_milliseconds() as f64);
                    Span {
                        start_ms,
                        end_ms: start_ms + a.duration_ms.unwrap_or(0.0),
                        color: attempt_color(a.delivered, &a.status),
                        label: format!("#{} {} {}/{}", a.seq, a.layer, a.provider, a.model),
                    }
                }))
                .collect();
            timeline = Some(Value::from_safe_string(charts::timeline(&spans).map_err(PageError::Chart)?));
        }
    }
    render(
        "workflow.html",
        "workflow",
        view,
        context! { asked => asked, detail => detail, timeline => timeline,
        colors => context! { delivered => hex(attempt_color(true, "ok")),
                             failed => hex(attempt_color(false, "error")),
                             superseded => hex(attempt_color(false, "ok")),
                             open => hex(capacity::OPEN_COLOR),
                             half_open => hex(capacity::HALF_OPEN_COLOR) } },
    )
}

/// A page for an error, with the filters kept so the user can fix them.
pub fn error(view: Option<&View>, status: u16, message: &str) -> String {
    let view = view.cloned().unwrap_or_else(|| View {
        given: vec![],
        range: attempt_core::request::SeriesRange {
            from: DateTime::UNIX_EPOCH,
            until: DateTime::UNIX_EPOCH,
            step_minutes: 1,
            workflow: None,
            route: None,
        },
        retry_budget: 0.0,
        moved_to_newest: None,
    });
    render("error.html", "error", &view, context! { status => status, message => message }).unwrap_or_else(
        |e| {
            format!(
                "<!doctype html><title>error</title><p>{status}: {}</p><p>{}</p>",
                escape(message),
                escape(&e.to_string())
            )
        },
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

// Filters. The exact value goes in a data-value attribute beside each
// figure; these only shape what a person reads.

fn pct(value: Value) -> String {
    match f64::try_from(value) {
        Ok(v) if v.is_finite() => format!("{:.2} %", v * 100.0),
        _ => "–".to_string(),
    }
}

fn usd_text(value: Value) -> String {
    match f64::try_from(value) {
        Ok(v) if v.is_finite() => {
            let decimals = if v != 0.0 && v.abs() < 1.0 { 4 } else { 2 };
            let text = format!("{:.*}", decimals, v.abs());
            let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
            format!("{}${}.{fraction}", if v < 0.0 { "-" } else { "" }, thousands(whole))
        }
        _ => "–".to_string(),
    }
}

fn int_text(value: Value) -> String {
    if value.is_none() || value.is_undefined() {
        return "–".to_string();
    }
    let mut text = value.to_string();
    // A count carried as a float (a chart's legend) reads as a count.
    if let Some(whole) = text.strip_suffix(".0") {
        text = whole.to_string();
    }
    match text.strip_prefix('-') {
        Some(rest) => format!("-{}", thousands(rest)),
        None => thousands(&text),
    }
}

fn ms_text(value: Value) -> String {
    match f64::try_from(value) {
        Ok(v) if v.is_finite() => {
            if v >= 10_000.0 {
                format!("{:.1} s", v / 1000.0)
            } else {
                format!("{v:.0} ms")
            }
        }
        _ => "–".to_string(),
    }
}

fn thousands(digits: &str) -> String {
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return digits.to_string();
    }
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(pct(Value::from(0.81234)), "81.23 %");
        assert_eq!(pct(Value::from(())), "–");
        assert_eq!(usd_text(Value::from(1234567.891)), "$1,234,567.89");
        assert_eq!(usd_text(Value::from(0.00421)), "$0.0042");
        assert_eq!(usd_text(Value::from(-12.5)), "-$12.50");
        assert_eq!(int_text(Value::from(20000)), "20,000");
        assert_eq!(int_text(Value::from(-999)), "-999");
        assert_eq!(int_text(Value::from(1234.0)), "1,234");
        assert_eq!(int_text(Value::from(i128::MAX)), "170,141,183,460,469,231,731,687,303,715,884,105,727");
        assert_eq!(ms_text(Value::from(12345.0)), "12.3 s");
    }
}
