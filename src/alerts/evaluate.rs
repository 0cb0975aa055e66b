//! One evaluation of every rule at an instant: each rule's value over its
//! window, computed by the report itself (`Report::from_rows` over the
//! workflows whose first attempt started in `[now - window, now)`), so an
//! alert can always be checked against `attempt-ledger report`.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use crate::read::{ReadError, Reader};
use crate::report::Report;
use crate::report::audit::Audit;
use crate::report::reconcile::Reconciliation;
use crate::store::Store;
use attempt_core::alert_rules::{Rule, RuleKind};
use attempt_core::model::{ErrorClass, name};
use attempt_core::reconcile::{MAX_DAYS, Question};
use attempt_core::request::{ReportFilter, Window};

/// One alert instance's reading: a rule, and for `primary_success` a route.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub rule: usize,
    /// Instance labels (the route for `primary_success`; empty otherwise).
    pub labels: BTreeMap<String, String>,
    /// `None`: no data in the window (never a breach).
    pub value: Option<f64>,
    pub breaching: bool,
    pub summary: String,
    pub details: serde_json::Value,
}

/// A rule's evaluation: its observations, or why it could not be evaluated
/// (its alerts then keep their state).
#[derive(Debug)]
pub struct RuleResult {
    pub rule: usize,
    pub outcome: Result<Vec<Observation>, String>,
}

/// Evaluates every rule at `now`. Rules sharing a window and workflow filter
/// share one report.
pub fn evaluate<S: std::borrow::Borrow<Store>>(
    reader: &Reader<S>,
    rules: &[Rule],
    now: DateTime<Utc>,
) -> Vec<RuleResult> {
    let mut reports: BTreeMap<(Duration, Option<String>), Result<Report, String>> = BTreeMap::new();
    let mut audits: BTreeMap<(Duration, Option<String>), Result<Audit, String>> = BTreeMap::new();
    let mut bills: BTreeMap<Duration, Result<Reconciliation, String>> = BTreeMap::new();
    rules
        .iter()
        .enumerate()
        .map(|(index, rule)| {
            if rule.kind == RuleKind::CostDrift {
                let bill = bills
                    .entry(rule.window)
                    .or_insert_with(|| window_bill(reader, rule, now).map_err(|e| e.to_string()));
                return RuleResult {
                    rule: index,
                    outcome: bill.as_ref().map(|b| observe_bill(index, rule, b)).map_err(Clone::clone),
                };
            }
            if rule.kind == RuleKind::PolicyViolation {
                let audit = audits
                    .entry((rule.window, rule.workflow.clone()))
                    .or_insert_with(|| window_audit(reader, rule, now).map_err(|e| e.to_string()));
                return RuleResult {
                    rule: index,
                    outcome: audit.as_ref().map(|a| observe_audit(index, rule, a)).map_err(Clone::clone),
                };
            }
            let report = reports
                .entry((rule.window, rule.workflow.clone()))
                .or_insert_with(|| window_report(reader, rule, now).map_err(|e| e.to_string()));
            RuleResult {
                rule: index,
                outcome: report.as_ref().map(|r| observe(index, rule, r, now)).map_err(Clone::clone),
            }
        })
        .collect()
}

/// Where a rule's window starts at `now` (`None`: a window longer than
/// time, so everything).
fn window_start(rule: &Rule, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let window = chrono::Duration::from_std(rule.window).unwrap_or(chrono::Duration::MAX);
    now.checked_sub_signed(window)
}

/// Fallback routes a fallback alert's summary names.
const SUMMARY_ROUTES: usize = 10;

/// The report a rule reads at `now` (the parts of it rules read).
pub fn window_report<S: std::borrow::Borrow<Store>>(
    reader: &Reader<S>,
    rule: &Rule,
    now: DateTime<Utc>,
) -> Result<Report, ReadError> {
    let filter = ReportFilter {
        since: window_start(rule, now),
        until: Some(now),
        workflow: rule.workflow.clone(),
        ..ReportFilter::default()
    };
    reader.alert_report(&filter)
}

/// The recovery audit a `policy_violation` rule reads at `now`: the same
/// window and workflow as the other kinds.
pub fn window_audit<S: std::borrow::Borrow<Store>>(
    reader: &Reader<S>,
    rule: &Rule,
    now: DateTime<Utc>,
) -> Result<Audit, ReadError> {
    reader.audit(Window { since: window_start(rule, now), until: Some(now), workflow: rule.workflow.clone() })
}

/// The reconciliation a `cost_drift` rule reads at `now`: the day cells of
/// its window, with the command's tolerances and settle time.
pub fn window_bill<S: std::borrow::Borrow<Store>>(
    reader: &Reader<S>,
    rule: &Rule,
    now: DateTime<Utc>,
) -> Result<Reconciliation, ReadError> {
    let no_params: [(&'static str, String); 0] = [];
    let mut question =
        Question::from_params(no_params.as_slice(), now).map_err(|e| ReadError::Asked(e.to_string()))?;
    question.since =
        window_start(rule, now).unwrap_or(question.since).max(now - chrono::Duration::days(MAX_DAYS));
    reader.reconcile(&question)
}

/// One observation per billing provider (or the rule's one) with settled,
/// compared cells: |drift| in percent of the billed cost, labelled
/// `provider`.
pub fn observe_bill(index: usize, rule: &Rule, bill: &Reconciliation) -> Vec<Observation> {
    let window = humantime::format_duration(rule.window).to_string();
    bill.totals
        .by_provider
        .iter()
        .filter(|p| rule.provider.as_deref().is_none_or(|wanted| Some(wanted) == p.key.as_deref()))
        .map(|p| {
            let value = p.drift_pct.map(f64::abs);
            let provider = p.key.clone().unwrap_or_default();
            Observation {
                rule: index,
                labels: BTreeMap::from([("provider".to_string(), provider.clone())]),
                breaching: breaches(rule, value),
                value,
                summary: format!(
                    "{provider}: ledger ${} against a bill of ${} over {} settled cells in the last {window}: drift ${} ({}) = unbilled failures ${} + emitter cost ${} + tokens ${} + price ${} + unexplained ${}",
                    p.ledger_cost_usd,
                    p.billed_cost_usd,
                    p.cells,
                    p.drift_usd,
                    value.map_or("no bill".into(), |v| format!("{v:.2} %")),
                    p.causes.unbilled_failures,
                    p.causes.emitter_cost,
                    p.causes.tokens,
                    p.causes.price,
                    p.causes.unexplained,
                ),
                details: json!(p),
            }
        })
        .collect()
}

/// One observation per finding (or the rule's one): the workflows that
/// have it (the minutes, for the retry budget), labelled `finding`.
pub fn observe_audit(index: usize, rule: &Rule, audit: &Audit) -> Vec<Observation> {
    let window = humantime::format_duration(rule.window).to_string();
    audit
        .findings
        .iter()
        .filter(|f| rule.finding.is_none_or(|wanted| wanted == f.finding))
        .map(|f| {
            let value = Some(f.count() as f64);
            Observation {
                rule: index,
                labels: BTreeMap::from([("finding".to_string(), f.finding.to_string())]),
                breaching: breaches(rule, value),
                value,
                summary: format!(
                    "{} {} in the last {window}: {} ({} attempts, ${:.4}); e.g. {}",
                    f.count(),
                    f.unit(),
                    f.why,
                    f.attempts,
                    f.cost_usd,
                    if f.examples.is_empty() { "none".to_string() } else { f.examples.join(", ") }
                ),
                details: json!(f),
            }
        })
        .collect()
}

/// One activation as an alert names it: the route change, why (with the
/// limit a 429 hit), how many, who served, what it cost against the
/// primary's price, and whether the primary's breaker was open.
fn fallback_summary(f: &crate::report::FallbackActivation) -> String {
    let mut reason = f.reason.map_or("none", name).to_string();
    if !f.limit_kinds.is_empty() {
        reason = format!("{reason} [{}]", f.limit_kinds.join(", "));
    }
    let mut text = format!("{} -> {} ({reason}: {}", f.primary(), f.fallback(), f.workflows);
    if !f.served_models.is_empty() {
        text += &format!(", served by {}", f.served_models.join(", "));
    }
    if let Some(cost) = f.fallback_cost_usd {
        text += &match f.primary_cost_usd {
            Some(primary) => {
                format!(", ${cost:.4} against ${primary:.4} at the primary's price ({:+.4})", cost - primary)
            }
            None => format!(", ${cost:.4} (no price for the primary)"),
        };
    }
    if let Some(open) = f.breaker_open_workflows.filter(|n| *n > 0) {
        text += &format!(", {open} while its breaker was open");
    }
    text + ")"
}

/// One open breaker: how long it has been open, and what the workflows
/// that started meanwhile did and cost.
fn circuit_observation(
    index: usize,
    rule: &Rule,
    c: &crate::report::CircuitInterval,
    open_seconds: f64,
) -> Observation {
    let route = c.route().to_string();
    let mut labels = BTreeMap::from([("route".to_string(), route.clone())]);
    for (key, value) in [
        ("provider", &c.provider),
        ("model", &c.model),
        ("route_group", &c.route_group),
        ("workflow", &c.workflow),
    ] {
        if let Some(value) = value {
            labels.insert(key.to_string(), value.clone());
        }
    }
    let primary = c
        .primary_cost_usd
        .map_or("no price for the primary".to_string(), |usd| format!("${usd:.4} at the primary's price"));
    Observation {
        rule: index,
        labels,
        breaching: breaches(rule, Some(open_seconds)),
        value: Some(open_seconds),
        summary: format!(
            "the breaker of {route}{} has been open since {} ({}); {} workflows started while it was open: {} fell \
             back, {} degraded, {} failed closed; their fallbacks cost ${:.4} ({primary})",
            c.workflow.as_ref().map_or(String::new(), |w| format!(" (caller {w})")),
            c.from,
            humantime::format_duration(std::time::Duration::from_secs(open_seconds.max(0.0) as u64)),
            c.workflows_started,
            c.outcomes.fallback_recovery,
            c.outcomes.degraded,
            c.outcomes.fail_closed,
            c.fallback_cost_usd,
        ),
        details: json!(c),
    }
}

fn breaches(rule: &Rule, value: Option<f64>) -> bool {
    match value {
        Some(v) if rule.kind.fires_below() => v < rule.threshold,
        Some(v) => v > rule.threshold,
        None => false,
    }
}

fn terminal(r: &Report) -> i64 {
    let w = &r.workflows;
    w.primary_success + w.retry_recovery + w.fallback_recovery + w.degraded + w.fail_closed
}

fn pct(v: Option<f64>) -> String {
    v.map_or("no data".into(), |v| format!("{:.1} %", v * 100.0))
}

/// A rule's observations from its window's report, read at `now` (the
/// window's end).
pub fn observe(index: usize, rule: &Rule, r: &Report, now: DateTime<Utc>) -> Vec<Observation> {
    let window = humantime::format_duration(rule.window).to_string();
    let per_hour = 3600.0 / rule.window.as_secs_f64();
    let enough = |n: i64| n >= rule.min_workflows as i64;
    let single = |value: Option<f64>, summary: String, details: serde_json::Value| {
        vec![Observation {
            rule: index,
            labels: BTreeMap::new(),
            breaching: breaches(rule, value),
            value,
            summary,
            details,
        }]
    };
    match rule.kind {
        RuleKind::FallbackActivation | RuleKind::FallbackRate => {
            let activations: i64 = r.fallbacks.iter().map(|f| f.workflows).sum();
            // The report lists every fallback route here (alert rules read
            // it unfolded); a notification names the first few.
            let mut routes: Vec<String> = r
                .fallbacks
                .iter()
                .take(SUMMARY_ROUTES)
                .map(fallback_summary)
                .collect();
            if r.fallbacks.len() > SUMMARY_ROUTES {
                routes.push(format!("and {} more", r.fallbacks.len() - SUMMARY_ROUTES));
            }
            let listed = &r.fallbacks[..r.fallbacks.len().min(crate::report::fold::FALLBACKS)];
            let value = if rule.kind == RuleKind::FallbackActivation {
                Some(activations as f64)
            } else {
                enough(r.workflows.total).then(|| activations as f64 / r.workflows.total as f64)
            };
            let summary = format!(
                "{activations} of {} workflows fell back in the last {window}{}{}",
                r.workflows.total,
                if routes.is_empty() { "" } else { ": " },
                routes.join(", ")
            );
            single(
                value,
                summary,
                json!({ "workflows": r.workflows.total, "activations": activations, "fallbacks": listed,
                        "fallbacks_not_listed": r.fallbacks.len() - listed.len() }),
            )
        }
        RuleKind::PrimarySuccess => r
            .by_primary_route
            .iter()
            .filter(|p| rule.provider.as_ref().is_none_or(|want| Some(want) == p.provider.as_ref()))
            .filter(|p| rule.model.as_ref().is_none_or(|want| Some(want) == p.model.as_ref()))
            .map(|p| {
                let value = if enough(p.terminal) { p.primary_success_rate } else { None };
                // A grouped route is labelled by its group; provider and
                // model label only routes without one.
                let labels = match &p.route_group {
                    Some(group) => BTreeMap::from([("route_group".to_string(), group.clone())]),
                    None => BTreeMap::from([
                        ("provider".to_string(), p.provider.clone().unwrap_or_default()),
                        ("model".to_string(), p.model.clone().unwrap_or_default()),
                    ]),
                };
                Observation {
                    rule: index,
                    labels,
                    breaching: breaches(rule, value),
                    value,
                    summary: format!(
                        "primary route {} answered first time for {} of {} terminal workflows ({}) in the last \
                         {window}; objective {}; {} recovered by retry, {} by fallback, {} degraded, {} failed closed",
                        p.key(),
                        p.primary_success,
                        p.terminal,
                        pct(value),
                        pct(Some(rule.threshold)),
                        p.retry_recovery,
                        p.fallback_recovery,
                        p.degraded,
                        p.fail_closed
                    ),
                    details: json!(p),
                }
            })
            .collect(),
        RuleKind::RetryRatio => {
            let b = &r.retry_budget;
            single(
                b.ratio,
                format!(
                    "{} retries for {} first attempts ({}) in the last {window}; budget {}",
                    b.retries,
                    b.first_attempts,
                    pct(b.ratio),
                    pct(Some(rule.threshold))
                ),
                json!({ "retries": b.retries, "first_attempts": b.first_attempts, "minutes_over_budget": b.minutes_over_budget }),
            )
        }
        RuleKind::FailClosedRate | RuleKind::DegradedRate => {
            let (label, count, rate) = if rule.kind == RuleKind::FailClosedRate {
                ("failed closed", r.workflows.fail_closed, r.rates.fail_closed)
            } else {
                ("degraded", r.workflows.degraded, r.rates.degraded)
            };
            let value = if enough(terminal(r)) { rate } else { None };
            single(
                value,
                format!("{count} of {} terminal workflows {label} ({}) in the last {window}", terminal(r), pct(value)),
                json!({ "workflows": r.workflows, "rates": r.rates }),
            )
        }
        RuleKind::WastedCostPerHour => {
            let value = r.cost_usd.wasted * per_hour;
            single(
                Some(value),
                format!(
                    "${:.2} wasted in the last {window} (${value:.2}/h) on {} attempts that returned nothing usable",
                    r.cost_usd.wasted, r.attempts.wasted
                ),
                json!({ "cost_usd": r.cost_usd, "wasted_attempts": r.attempts.wasted }),
            )
        }
        RuleKind::WastedTokensPerHour => {
            let tokens = (r.tokens.wasted.input + r.tokens.wasted.output) as f64;
            single(
                Some(tokens * per_hour),
                format!(
                    "{tokens} tokens wasted in the last {window} ({:.0}/h) on {} attempts",
                    tokens * per_hour,
                    r.attempts.wasted
                ),
                json!({ "tokens": r.tokens }),
            )
        }
        RuleKind::QuotaExhausted => {
            let quota: Vec<_> = r.error_classes.iter().filter(|e| e.error_class == ErrorClass::Quota).collect();
            let attempts: i64 = quota.iter().map(|e| e.attempts).sum();
            let providers: Vec<String> = quota.iter().map(|e| format!("{} ({})", e.provider, e.attempts)).collect();
            single(
                Some(attempts as f64),
                format!(
                    "{attempts} attempts failed on exhausted quota in the last {window}{}{}: retrying creates no \
                     credit, raise the limit or pay",
                    if providers.is_empty() { "" } else { ": " },
                    providers.join(", ")
                ),
                json!({ "attempts": attempts, "by_provider": quota }),
            )
        }
        RuleKind::ErrorRate => r
            .error_rates
            .iter()
            .filter(|e| rule.provider.as_ref().is_none_or(|want| *want == e.served_provider))
            .filter(|e| rule.model.as_ref().is_none_or(|want| *want == e.served_model))
            .map(|e| {
                let value = if e.attempts >= rule.min_workflows as i64 { e.rate } else { None };
                Observation {
                    rule: index,
                    labels: BTreeMap::from([
                        ("served_provider".to_string(), e.served_provider.clone()),
                        ("served_model".to_string(), e.served_model.clone()),
                        ("error_class".to_string(), name(e.error_class).to_string()),
                    ]),
                    breaching: breaches(rule, value),
                    value,
                    summary: format!(
                        "{}/{} failed {} of {} attempts with {} ({}) in the last {window}",
                        e.served_provider,
                        e.served_model,
                        e.failed,
                        e.attempts,
                        name(e.error_class),
                        pct(value)
                    ),
                    details: json!(e),
                }
            })
            .collect(),
        RuleKind::RatelimitHeadroom => r
            .headroom
            .iter()
            .filter(|h| rule.provider.as_ref().is_none_or(|want| *want == h.served_provider))
            .filter(|h| rule.model.as_ref().is_none_or(|want| *want == h.served_model))
            .filter(|h| h.min_ratio.is_some())
            .map(|h| {
                let mut labels = BTreeMap::from([
                    ("served_provider".to_string(), h.served_provider.clone()),
                    ("served_model".to_string(), h.served_model.clone()),
                    ("kind".to_string(), h.kind.clone()),
                ]);
                if let Some(account) = &h.billing_account {
                    labels.insert("billing_account".to_string(), account.clone());
                }
                let latest = match (h.remaining, h.limit) {
                    (Some(left), Some(limit)) => format!("{left} of {limit}"),
                    (Some(left), None) => format!("{left} (no limit stated)"),
                    _ => "none".to_string(),
                };
                Observation {
                    rule: index,
                    labels,
                    breaching: breaches(rule, h.min_ratio),
                    value: h.min_ratio,
                    summary: format!(
                        "{}/{} {} rate limit fell to {} remaining in the last {window} (lowest at {}; latest {latest}); \
                         {} attempts under 10 % since {}; {} 429s on this limit{}",
                        h.served_provider,
                        h.served_model,
                        h.kind,
                        pct(h.min_ratio),
                        h.min_at.as_deref().unwrap_or("?"),
                        h.attempts_below_10pct,
                        h.first_below_10pct_at.as_deref().unwrap_or("never"),
                        h.rate_limited,
                        h.first_429_at.as_ref().map_or(String::new(), |t| format!(", the first at {t}")),
                    ),
                    details: json!(h),
                }
            })
            .collect(),
        RuleKind::CircuitOpen => r
            .circuits
            .iter()
            .filter(|c| c.state == "open")
            .filter(|c| rule.provider.as_ref().is_none_or(|want| c.provider.as_ref() == Some(want)))
            .filter(|c| rule.model.as_ref().is_none_or(|want| c.model.as_ref() == Some(want)))
            .filter_map(|c| {
                let instant = |t: &str| DateTime::parse_from_rfc3339(t).ok().map(|t| t.with_timezone(&Utc));
                let from = instant(&c.from)?;
                // Open at `now`: a replay reads intervals that ended later.
                let open_at_now = from <= now && c.until.as_deref().and_then(instant).is_none_or(|until| until > now);
                open_at_now.then(|| circuit_observation(index, rule, c, (now - from).num_milliseconds() as f64 / 1000.0))
            })
            .collect(),
        // Read from the audit, not the report (`observe_audit`).
        RuleKind::PolicyViolation | RuleKind::CostDrift => Vec::new(),
    }
}
