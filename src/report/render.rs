//! Report output: `table` for a terminal, `json` with the keys of
//! interfaces.md, `csv` as `metric,value` rows a spreadsheet loads.

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use serde_json::Value;

use super::{LAKE_UNDERIVED_FALLBACK_KEYS, PerWorkflow, Rates, Report, WorkflowCounts};
use attempt_core::model::name;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

pub fn render(report: &Report, format: Format) -> String {
    match format {
        Format::Json if derived_some(report) => {
            serde_json::to_string_pretty(&json(report)).expect("a report always serialises") + "\n"
        }
        Format::Json => serde_json::to_string_pretty(report).expect("a report always serialises") + "\n",
        Format::Csv => csv(report),
        Format::Table => {
            let mut text = match &report.audit {
                Some(audit) => format!("{}\n{}", table(report), audit.render(Format::Table)),
                None => table(report),
            };
            if let Some(lake) = &report.lake {
                text += &lake_lines(lake);
            }
            text
        }
    }
}

/// Whether the report is of a lake read that derived some sections only.
fn derived_some(report: &Report) -> bool {
    report.lake.as_ref().is_some_and(|lake| lake.sections.is_some())
}

/// The report as JSON: of a lake report that derived some sections only,
/// those (and its `lake` section), so no consumer reads one it did not
/// derive as empty. (A `Value`'s keys are sorted: a whole report is
/// serialised as is, in its fields' order.)
fn json(report: &Report) -> Value {
    let mut value = serde_json::to_value(report).expect("a report always serialises");
    let derived = report.lake.as_ref().and_then(|lake| lake.sections.as_ref());
    if let (Some(sections), Value::Object(keys)) = (derived, &mut value) {
        keys.retain(|key, _| key == "lake" || sections.contains(key));
        if let Some(Value::Array(rows)) = keys.get_mut("fallbacks") {
            for row in rows.iter_mut().filter_map(Value::as_object_mut) {
                LAKE_UNDERIVED_FALLBACK_KEYS.iter().for_each(|key| drop(row.remove(*key)));
            }
        }
    }
    value
}

/// Whether the report derived its section `key`: a lake report may derive
/// some only (`LakeSource::sections`).
fn derived(report: &Report, key: &str) -> bool {
    report
        .lake
        .as_ref()
        .and_then(|lake| lake.sections.as_ref())
        .is_none_or(|sections| sections.iter().any(|s| s == key))
}

fn lake_lines(lake: &crate::report::LakeSource) -> String {
    let horizon = lake.horizon_hours.map_or("all of it".to_string(), |h| format!("{h} h around the window"));
    let skipped = if lake.skipped_files.is_empty() {
        String::new()
    } else {
        format!(
            "Left out {} bad files holding {} attempts (as their exports' records say)\n",
            lake.skipped_files.len(),
            lake.skipped_attempts
        )
    };
    let sections = match &lake.sections {
        Some(_) => {
            "Sections: those every lake engine derives (--every-section derives the others and the audit)\n"
        }
        None => "",
    };
    format!(
        "\nRead from lake {} by {}: {} copies, {} attempts; horizon {horizon}; {} attempts of these workflows \
         outside it\n{skipped}{sections}",
        lake.lake_id, lake.engine, lake.copies_read, lake.attempts, lake.attempts_outside_horizon
    )
}

/// Flattens the JSON report into `metric,value` rows; list items are named
/// by their identifying fields (`by_served_provider[openai].cost_usd`).
fn csv(report: &Report) -> String {
    let mut rows = Vec::new();
    flatten(&json(report), String::new(), &mut rows);
    let mut writer = ::csv::Writer::from_writer(Vec::new());
    let _ = writer.write_record(["metric", "value"]);
    for (metric, value) in rows {
        let _ = writer.write_record([metric, value]);
    }
    String::from_utf8(writer.into_inner().unwrap_or_default()).unwrap_or_default()
}

const IDENTITY_KEYS: [&str; 19] = [
    "value",
    "finding",
    "served_provider",
    "served_model",
    "workflow",
    "layer",
    "outcome",
    "error_class",
    "provider",
    "model",
    "route_group",
    "primary_route_group",
    "primary_provider",
    "primary_model",
    "fallback_route_group",
    "fallback_provider",
    "fallback_model",
    "reason",
    "start",
];

fn flatten(value: &Value, path: String, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                flatten(v, child, out);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let identity: Vec<String> = IDENTITY_KEYS
                    .iter()
                    .filter_map(|k| item.get(*k))
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        Value::Null => "(none)".to_string(),
                        other => other.to_string(),
                    })
                    .collect();
                let label = if identity.is_empty() { index.to_string() } else { identity.join("/") };
                flatten(item, format!("{path}[{label}]"), out);
            }
        }
        Value::Null => out.push((path, String::new())),
        Value::String(s) => out.push((path, s.clone())),
        other => out.push((path, other.to_string())),
    }
}

pub(super) fn new_table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic);
    table.set_header(header.iter().map(Cell::new));
    table
}

pub(super) fn right(text: impl ToString) -> Cell {
    Cell::new(text.to_string()).set_alignment(CellAlignment::Right)
}

fn pct(rate: Option<f64>) -> String {
    rate.map_or("-".to_string(), |r| format!("{:.1} %", r * 100.0))
}

pub(super) fn dollars(usd: f64) -> String {
    if usd != 0.0 && usd.abs() < 0.01 { format!("${usd:.6}") } else { format!("${usd:.2}") }
}

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or("-".to_string(), |v| v.to_string())
}

fn table(r: &Report) -> String {
    let mut out = String::new();
    let w = &r.workflows;
    out += &format!(
        "attempt-ledger report: {} workflows, {} attempts ({} wasted)\n\n",
        w.total, r.attempts.total, r.attempts.wasted
    );

    out += "Workflow outcomes (rates are shares of terminal workflows)\n";
    out += &outcome_table(w, &r.rates).to_string();
    out += "\n\n";

    out += "Waste: attempts that were not the delivered answer\n";
    let mut t = new_table(&["", "total", "wasted", "wasted share"]);
    let tt = &r.tokens;
    t.add_row(vec![
        Cell::new("attempts"),
        right(r.attempts.total),
        right(r.attempts.wasted),
        right(pct(r.waste_share.attempts)),
    ]);
    t.add_row(vec![
        Cell::new("input tokens"),
        right(tt.total.input),
        right(tt.wasted.input),
        right(pct(r.waste_share.input_tokens)),
    ]);
    t.add_row(vec![
        Cell::new("  of which cached"),
        right(tt.total.cached_input),
        right(tt.wasted.cached_input),
        right(""),
    ]);
    t.add_row(vec![
        Cell::new("  of which cache writes"),
        right(tt.total.cache_write_input),
        right(tt.wasted.cache_write_input),
        right(""),
    ]);
    t.add_row(vec![
        Cell::new("output tokens"),
        right(tt.total.output),
        right(tt.wasted.output),
        right(pct(r.waste_share.output_tokens)),
    ]);
    // Only reasoning models have the row: most traffic has none to show.
    if tt.total.reasoning_output != 0 {
        t.add_row(vec![
            Cell::new("  of which reasoning"),
            right(tt.total.reasoning_output),
            right(tt.wasted.reasoning_output),
            right(""),
        ]);
    }
    t.add_row(vec![
        Cell::new("cost (known)"),
        right(dollars(r.cost_usd.total)),
        right(dollars(r.cost_usd.wasted)),
        right(pct(r.waste_share.cost)),
    ]);
    out += &t.to_string();
    if r.cost_usd.unknown_cost_attempts > 0 {
        let reasons = &r.cost_usd.unknown_cost_reasons;
        let by_reason: Vec<String> = [
            ("no usage", reasons.no_usage),
            ("other currency", reasons.other_currency),
            ("no price", reasons.no_price),
            ("no tier price", reasons.no_tier_price),
            ("no kind price", reasons.no_kind_price),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(why, n)| format!("{why} {n}"))
        .collect();
        out += &format!(
            "\n{} attempts have unknown cost ({}); they are not in the dollar figures. `prices check` lists the prices missing.",
            r.cost_usd.unknown_cost_attempts,
            by_reason.join(", ")
        );
    }
    if r.cost_usd.region_unpriced_attempts > 0 {
        out += &format!(
            "\n{} attempts were priced without their region (no entry for the regional name): a regional premium may be missing.",
            r.cost_usd.region_unpriced_attempts
        );
    }
    out += "\n\n";

    out += "Cost by served provider and model (who actually answered)\n";
    let mut t = new_table(&[
        "served by",
        "model",
        "attempts",
        "rerouted",
        "cost",
        "wasted cost",
        "unknown cost",
        "prices as of",
    ]);
    for m in &r.by_served_model {
        t.add_row(vec![
            Cell::new(&m.served_provider),
            Cell::new(&m.served_model),
            right(m.attempts),
            right(m.rerouted_attempts),
            right(dollars(m.cost_usd)),
            right(dollars(m.wasted_cost_usd)),
            right(m.unknown_cost_attempts),
            Cell::new(m.prices_as_of.as_deref().unwrap_or("-")),
        ]);
    }
    out += &t.to_string();
    out += "\n\n";

    if !r.by_workflow.is_empty() {
        out += "Per workflow\n";
        let rows = r.by_workflow.iter().map(|b| BreakdownRow {
            name: b.workflow.as_deref().unwrap_or("(unnamed)"),
            counts: &b.workflows,
            rates: &b.rates,
            attempts: b.attempts,
            wasted_cost_usd: b.wasted_cost_usd,
        });
        out += &breakdown_table("workflow", rows);
    }

    if let Some(groups) = &r.groups {
        out += &format!("By {}\n", groups.dimension);
        let rows = groups.values.iter().map(|g| BreakdownRow {
            name: g.value.as_deref().unwrap_or("(none)"),
            counts: &g.workflows,
            rates: &g.rates,
            attempts: g.attempts,
            wasted_cost_usd: g.wasted_cost_usd,
        });
        out += &breakdown_table(&groups.dimension, rows);
    }

    out += "Retry amplification: attempts per workflow, by the layer that sent them\n";
    let mut t = new_table(&["layer", "attempts", "mean", "p50", "p99", "max"]);
    for a in &r.amplification {
        let PerWorkflow { mean, p50, p99, max } = &a.per_workflow;
        t.add_row(vec![
            Cell::new(a.layer.map_or("all", name)),
            right(a.attempts),
            right(mean.map_or("-".into(), |m| format!("{m:.2}"))),
            right(opt(*p50)),
            right(opt(*p99)),
            right(opt(*max)),
        ]);
    }
    out += &t.to_string();
    out += "\n\n";

    // A lake report derives no retry budget (`LakeSource::sections`).
    if derived(r, "retry_budget") {
        let b = &r.retry_budget;
        out += &format!(
            "Retry budget {}: overall retry ratio {}, {} of {} minutes over budget",
            pct(Some(b.budget)),
            pct(b.ratio),
            b.minutes_over_budget,
            b.minutes
        );
        if let (Some(peak), Some(minute)) = (b.peak_ratio, &b.peak_minute) {
            out += &format!(", peak {} at {minute}", pct(Some(peak)));
        }
        out += "\n";
        for incident in b.incidents.iter().take(10) {
            out += &format!(
                "  incident {} .. {}: {} min, {} retries on {} first attempts (peak {})\n",
                incident.start,
                incident.end,
                incident.minutes,
                incident.retries,
                incident.first_attempts,
                pct(incident.peak_ratio)
            );
        }
        if b.incidents.len() > 10 {
            out += &format!("  ... and {} more incidents (see --format json)\n", b.incidents.len() - 10);
        }
    }
    if let Some(all) = r.recovery_time_ms.iter().find(|t| t.outcome.is_none() && t.workflows > 0) {
        out += &format!(
            "Time spent recovering: {} recovered workflows, mean {:.0} ms, p99 {:.0} ms, max {:.0} ms\n",
            all.workflows,
            all.mean.unwrap_or(0.0),
            all.p99.unwrap_or(0.0),
            all.max.unwrap_or(0.0)
        );
    }
    out += "\n";

    if !r.by_primary_route.is_empty() {
        out += "Primary routes: how often the route a workflow was meant for answered first time\n";
        let mut t = new_table(&[
            "primary route",
            "workflows",
            "primary success",
            "retry recovery",
            "fallback recovery",
            "degraded",
            "fail-closed",
        ]);
        for p in &r.by_primary_route {
            let with_rate = |n: i64| format!("{n} ({})", pct(super::share(n as f64, p.terminal as f64)));
            t.add_row(vec![
                Cell::new(p.key().to_string()),
                right(p.workflows),
                right(with_rate(p.primary_success)),
                right(with_rate(p.retry_recovery)),
                right(with_rate(p.fallback_recovery)),
                right(with_rate(p.degraded)),
                right(with_rate(p.fail_closed)),
            ]);
        }
        out += &t.to_string();
        out += "\n\n";
    }

    if !r.fallbacks.is_empty() {
        out += "Fallback activations (reason: the error just before the fallback)\n";
        let mut t = new_table(&["primary route", "fallback route", "reason", "workflows", "recovered"]);
        for f in &r.fallbacks {
            t.add_row(vec![
                Cell::new(f.primary().to_string()),
                Cell::new(f.fallback().to_string()),
                Cell::new(f.reason.map_or("none", name)),
                right(f.workflows),
                right(f.recovered),
            ]);
        }
        out += &t.to_string();
        out += "\n\n";
    }

    if !r.error_classes.is_empty() {
        out += "Failed attempts by error class\n";
        let mut t =
            new_table(&["error class", "provider", "attempts", "input tokens", "output tokens", "cost"]);
        for e in &r.error_classes {
            let class = match &e.limit_kind {
                Some(kind) => format!("{} ({kind})", name(e.error_class)),
                None => name(e.error_class).to_string(),
            };
            t.add_row(vec![
                Cell::new(class),
                Cell::new(&e.provider),
                right(e.attempts),
                right(e.input_tokens),
                right(e.output_tokens),
                right(dollars(e.cost_usd)),
            ]);
        }
        out += &t.to_string();
        out += "\n";
    }

    if !r.error_rates.is_empty() {
        out += "\nError rate by the route that served (failed / its attempts)\n";
        let mut t = new_table(&["served route", "error class", "failed", "attempts", "rate"]);
        for e in &r.error_rates {
            t.add_row(vec![
                Cell::new(format!("{}/{}", e.served_provider, e.served_model)),
                Cell::new(name(e.error_class)),
                right(e.failed),
                right(e.attempts),
                right(pct(e.rate)),
            ]);
        }
        out += &t.to_string();
        out += "\n";
    }

    if !r.headroom.is_empty() {
        out += "\nRate-limit headroom (what the providers' responses said remained)\n";
        let mut t = new_table(&[
            "served route",
            "account",
            "limit",
            "latest",
            "lowest",
            "at",
            "attempts < 10 %",
            "429s",
            "warning before the first 429",
        ]);
        for h in &r.headroom {
            let latest = match (h.remaining, h.limit) {
                (Some(left), Some(limit)) => format!("{left} / {limit}"),
                (Some(left), None) => left.to_string(),
                _ => "-".into(),
            };
            let warning = match (&h.warning_seconds, &h.first_below_10pct_at, &h.first_429_at) {
                (Some(seconds), _, _) => format!("{seconds:.0} s"),
                (None, Some(_), None) => "no 429 yet".into(),
                (None, None, Some(_)) => "none".into(),
                _ => "-".into(),
            };
            t.add_row(vec![
                Cell::new(format!("{}/{}", h.served_provider, h.served_model)),
                Cell::new(h.billing_account.as_deref().unwrap_or("-")),
                Cell::new(&h.kind),
                right(latest),
                right(pct(h.min_ratio)),
                Cell::new(h.min_at.as_deref().unwrap_or("-")),
                right(h.attempts_below_10pct),
                right(h.rate_limited),
                right(warning),
            ]);
        }
        out += &t.to_string();
        out += "\n";
    }

    if !r.latency.is_empty() {
        out += "\nLatency by requested route (a percentile is its histogram bucket's upper bound)\n";
        let mut t = new_table(&["route", "status", "metric", "attempts", "p50", "p90", "p99", "mean"]);
        let seconds = |s: Option<f64>| s.map_or("> 300 s".to_string(), |s| format!("{s} s"));
        for l in &r.latency {
            t.add_row(vec![
                Cell::new(format!("{}/{}", l.provider, l.model)),
                Cell::new(&l.status),
                Cell::new(&l.metric),
                right(l.observations),
                right(seconds(l.p50_seconds)),
                right(seconds(l.p90_seconds)),
                right(seconds(l.p99_seconds)),
                right(format!("{:.3} s", l.mean_seconds)),
            ]);
        }
        out += &t.to_string();
        out += "\n";
    }

    if !r.circuits.is_empty() {
        out += "\nCircuit breakers (open and half-open intervals)\n";
        let mut t = new_table(&[
            "route",
            "caller",
            "state",
            "from",
            "until",
            "workflows started",
            "fell back",
            "degraded",
            "failed closed",
            "fallback cost",
            "at primary price",
            "probes ok",
        ]);
        for c in &r.circuits {
            let route = c.route().to_string();
            let open = c.state == "open";
            let dash_unless = |shown: bool, text: String| if shown { text } else { "-".into() };
            t.add_row(vec![
                Cell::new(route),
                Cell::new(c.workflow.as_deref().unwrap_or("all")),
                Cell::new(&c.state),
                Cell::new(&c.from),
                Cell::new(c.until.as_deref().unwrap_or("(still)")),
                right(dash_unless(open, c.workflows_started.to_string())),
                right(dash_unless(open, c.outcomes.fallback_recovery.to_string())),
                right(dash_unless(open, c.outcomes.degraded.to_string())),
                right(dash_unless(open, c.outcomes.fail_closed.to_string())),
                right(dash_unless(open, format!("${:.4}", c.fallback_cost_usd))),
                right(dash_unless(
                    open,
                    c.primary_cost_usd.map_or("no price".into(), |usd| format!("${usd:.4}")),
                )),
                right(dash_unless(!open, format!("{} / {}", c.probes_succeeded, c.probes))),
            ]);
        }
        out += &t.to_string();
        out += "\n";
        if r.circuits_omitted > 0 {
            out += &format!("({} older intervals not listed)\n", r.circuits_omitted);
        }
    }
    out
}

/// One line of a per-name outcome table (per workflow, per dimension value).
struct BreakdownRow<'a> {
    name: &'a str,
    counts: &'a WorkflowCounts,
    rates: &'a Rates,
    attempts: i64,
    wasted_cost_usd: f64,
}

fn breakdown_table<'a>(first_column: &str, rows: impl Iterator<Item = BreakdownRow<'a>>) -> String {
    let mut t = new_table(&[
        first_column,
        "workflows",
        "primary",
        "retry rec.",
        "fallback rec.",
        "degraded",
        "fail-closed",
        "queued",
        "in flight",
        "attempts",
        "wasted cost",
    ]);
    for row in rows {
        let (c, rates) = (row.counts, row.rates);
        t.add_row(vec![
            Cell::new(row.name),
            right(c.total),
            right(pct(rates.primary_success)),
            right(pct(rates.retry_recovery)),
            right(pct(rates.fallback_recovery)),
            right(pct(rates.degraded)),
            right(pct(rates.fail_closed)),
            right(c.queued),
            right(c.in_flight),
            right(row.attempts),
            right(dollars(row.wasted_cost_usd)),
        ]);
    }
    format!("{t}\n\n")
}

fn outcome_table(w: &WorkflowCounts, rates: &Rates) -> Table {
    let mut t = new_table(&["outcome", "workflows", "rate"]);
    let rows = [
        ("primary success", w.primary_success, Some(rates.primary_success)),
        ("retry recovery", w.retry_recovery, Some(rates.retry_recovery)),
        ("fallback recovery", w.fallback_recovery, Some(rates.fallback_recovery)),
        ("degraded", w.degraded, Some(rates.degraded)),
        ("fail-closed", w.fail_closed, Some(rates.fail_closed)),
        ("queued (not terminal)", w.queued, None),
        ("in flight (not terminal)", w.in_flight, None),
    ];
    for (label, n, rate) in rows {
        t.add_row(vec![Cell::new(label), right(n), right(rate.map_or(String::new(), pct))]);
    }
    t
}
