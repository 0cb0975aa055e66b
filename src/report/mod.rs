//! The report of docs/record-format.md ("Outcomes" and "Waste, cost, amplification"), shaped for people and
//! programs. The numbers come from `queries/*.sql` (through the store); this
//! module only divides, converts units and arranges keys (interfaces.md).

pub mod audit;
pub mod fold;
pub mod prices;
pub mod quantile;
pub mod reconcile;
mod render;
pub mod timeseries;
pub mod tune;
pub mod workflow;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

pub use render::{Format, render};

use crate::store::ReportRows;
use crate::store::queries::{GroupRow, MinuteRow, OutcomeCounts};
use attempt_core::model::{ErrorClass, Layer, Outcome, name};

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    pub workflows: WorkflowCounts,
    pub rates: Rates,
    pub attempts: Attempts,
    pub tokens: TokenTotals,
    pub cost_usd: CostTotals,
    pub waste_share: WasteShare,
    pub by_served_provider: Vec<ServedProvider>,
    pub by_served_model: Vec<ServedModel>,
    pub by_workflow: Vec<WorkflowBreakdown>,
    pub amplification: Vec<LayerAmplification>,
    pub retry_budget: RetryBudget,
    pub recovery_time_ms: Vec<RecoveryTime>,
    pub error_classes: Vec<ErrorClassCount>,
    pub by_primary_route: Vec<PrimaryRoute>,
    pub fallbacks: Vec<FallbackActivation>,
    /// Rate-limited attempts by the limit they hit.
    pub rate_limits: Vec<RateLimitCount>,
    /// What the providers said remained of their rate limits, and how long
    /// before the first 429 it fell under 10 %.
    pub headroom: Vec<Headroom>,
    /// Per served provider and model, the share of its attempts that failed
    /// with each error class.
    pub error_rates: Vec<ServedErrorRate>,
    /// Attempt duration and time-to-first-token percentiles by requested
    /// route and status (bucket bounds: `model::LATENCY_BUCKETS`).
    pub latency: Vec<LatencyPercentiles>,
    /// Breaker timelines: each route's open and half-open intervals in the
    /// window (the latest `fold::CIRCUIT_ROWS`), oldest first.
    pub circuits: Vec<CircuitInterval>,
    /// Intervals in the window left out of `circuits` (the oldest).
    pub circuits_omitted: u64,
    /// Present when the report was asked to group by a dimension.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<DimensionGroups>,
    /// The recovery audit of the same workflows (`report` and
    /// `GET /api/v1/report`; the dashboard and alerts read it apart).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<audit::Audit>,
    /// How current the derived tables were (`GET /api/v1/report`: the
    /// service derives after acknowledging; a command derives everything
    /// when it opens the database, so its report is always complete).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub derivation: Option<Freshness>,
    /// What a report over an attempt lake read (`report --lake`,
    /// `scripts/lake-report.py`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lake: Option<LakeSource>,
}

/// The report's keys a lake read derives by SQL (`store::LAKE_QUERIES`),
/// as Spark's and ClickHouse's reports do (`scripts/lake-report.py`).
pub const LAKE_SECTIONS: [&str; 12] = [
    "workflows",
    "rates",
    "attempts",
    "tokens",
    "cost_usd",
    "waste_share",
    "by_served_provider",
    "by_served_model",
    "by_workflow",
    "amplification",
    "by_primary_route",
    "fallbacks",
];

/// The keys of a `fallbacks` row a lake read does not derive: what an
/// activation cost and why come from each workflow's spend and breaker
/// timeline, which only the node's derivation (and `--every-section`) has.
pub const LAKE_UNDERIVED_FALLBACK_KEYS: [&str; 5] =
    ["limit_kinds", "served_models", "fallback_cost_usd", "primary_cost_usd", "breaker_open_workflows"];

/// The lake a report was read from, and what of it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LakeSource {
    /// The engine that read it.
    pub engine: String,
    pub lake_id: String,
    /// The report's keys it derived (`LAKE_SECTIONS`); the others (and
    /// `LAKE_UNDERIVED_FALLBACK_KEYS`) are left out of the report, not
    /// reported empty. Absent: every section
    /// (`report --lake --every-section`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sections: Option<Vec<String>>,
    /// Rows read: every stored copy inside the horizon.
    pub copies_read: u64,
    /// Attempts left once copies and superseded trace revisions are dropped.
    pub attempts: u64,
    /// How far around a window the lake was read (NULL without a window:
    /// all of it).
    pub horizon_hours: Option<f64>,
    /// Attempts of the reported workflows that started outside the
    /// horizon: not read, so their workflows may be counted differently
    /// than by a report over everything (widen --horizon until this is 0).
    pub attempts_outside_horizon: u64,
    /// Files left out (`--skip-bad-files`): each with why, and the attempts
    /// its export's record says it holds (null when no record lists it).
    pub skipped_files: Vec<SkippedFile>,
    /// The attempts the skipped files hold, as far as records say.
    pub skipped_attempts: u64,
    /// The Iceberg table's snapshot read, when the lake was read through
    /// its catalog (`report --lake LAKE --catalog URI`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iceberg_snapshot_id: Option<i64>,
}

/// A file of the lake a report left out.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SkippedFile {
    pub path: String,
    pub reason: String,
    pub attempts: Option<u64>,
}

/// How current an answer is: whether every write acknowledged before the
/// question was derived when it was read, and if not, how far behind.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Freshness {
    pub complete: bool,
    /// Acknowledged writes not derived yet.
    pub pending_commits: u64,
    /// How long the oldest of them has waited.
    pub lag_seconds: f64,
}

/// Outcomes and cost by the values of one dimension (`--group-by`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DimensionGroups {
    pub dimension: String,
    pub values: Vec<GroupBreakdown>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GroupBreakdown {
    /// The dimension's value; `null` for workflows without one, `other` for
    /// values beyond the first K.
    pub value: Option<String>,
    pub workflows: WorkflowCounts,
    pub rates: Rates,
    pub attempts: i64,
    pub wasted_attempts: i64,
    pub cost_usd: f64,
    pub wasted_cost_usd: f64,
    pub unknown_cost_attempts: i64,
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct WorkflowCounts {
    pub total: i64,
    pub primary_success: i64,
    pub retry_recovery: i64,
    pub fallback_recovery: i64,
    pub degraded: i64,
    pub fail_closed: i64,
    pub queued: i64,
    pub in_flight: i64,
}

/// Shares of terminal workflows; `None` (JSON null) when there are none.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Rates {
    pub primary_success: Option<f64>,
    pub retry_recovery: Option<f64>,
    pub fallback_recovery: Option<f64>,
    pub degraded: Option<f64>,
    pub fail_closed: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Attempts {
    pub total: i64,
    pub wasted: i64,
    pub per_workflow: PerWorkflow,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PerWorkflow {
    pub mean: Option<f64>,
    pub p50: Option<i64>,
    pub p99: Option<i64>,
    pub max: Option<i64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TokenTotals {
    pub total: TokenCounts,
    pub wasted: TokenCounts,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TokenCounts {
    /// All input, cached and cache-written parts included.
    #[serde(serialize_with = "whole_number")]
    pub input: i128,
    #[serde(serialize_with = "whole_number")]
    pub output: i128,
    #[serde(serialize_with = "whole_number")]
    pub cached_input: i128,
    #[serde(serialize_with = "whole_number")]
    pub cache_write_input: i128,
    /// The part of `output` spent reasoning.
    #[serde(serialize_with = "whole_number")]
    pub reasoning_output: i128,
    /// The part of `cache_write_input` written to a one-hour cache.
    #[serde(serialize_with = "whole_number")]
    pub cache_write_1h_input: i128,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CostTotals {
    /// Known cost only; attempts of unknown cost are counted, never priced 0.
    pub total: f64,
    pub wasted: f64,
    pub unknown_cost_attempts: i64,
    pub wasted_unknown_cost_attempts: i64,
    /// The unknown-cost attempts by why (they add up to
    /// `unknown_cost_attempts`).
    pub unknown_cost_reasons: UnknownCostReasons,
    /// Attempts priced by an entry found only once their served model's
    /// region was dropped: a regional premium may be missing.
    pub region_unpriced_attempts: i64,
    /// Server-side web searches (billed per request), all and wasted.
    #[serde(serialize_with = "whole_number")]
    pub web_search_requests: i128,
    #[serde(serialize_with = "whole_number")]
    pub wasted_web_search_requests: i128,
}

/// Attempts of unknown cost by why (docs/prices.md).
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct UnknownCostReasons {
    /// An answer that stated no usage at all.
    pub no_usage: i64,
    /// A cost stated in another currency than USD.
    pub other_currency: i64,
    /// No entry of the served model in force on its day.
    pub no_price: i64,
    /// No row for its tier, or for its tier at its prompt size.
    pub no_tier_price: i64,
    /// A kind of token (or web searches) it used has no price.
    pub no_kind_price: i64,
}

/// Wasted share of all tokens (input + output) and of all known cost.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WasteShare {
    pub attempts: Option<f64>,
    pub tokens: Option<f64>,
    pub input_tokens: Option<f64>,
    pub output_tokens: Option<f64>,
    pub cost: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ServedProvider {
    pub served_provider: String,
    pub attempts: i64,
    pub rerouted_attempts: i64,
    pub cost_usd: f64,
    pub wasted_cost_usd: f64,
    pub unknown_cost_attempts: i64,
    /// The oldest as-of day of the prices that priced its attempts (null:
    /// none was priced from its tokens).
    pub prices_as_of: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ServedModel {
    pub served_provider: String,
    pub served_model: String,
    pub attempts: i64,
    pub wasted_attempts: i64,
    pub rerouted_attempts: i64,
    #[serde(serialize_with = "whole_number")]
    pub input_tokens: i128,
    #[serde(serialize_with = "whole_number")]
    pub output_tokens: i128,
    #[serde(serialize_with = "whole_number")]
    pub cached_input_tokens: i128,
    pub cost_usd: f64,
    pub wasted_cost_usd: f64,
    pub unknown_cost_attempts: i64,
    pub prices_as_of: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WorkflowBreakdown {
    /// The `workflow` name; `null` for workflows that never said one.
    pub workflow: Option<String>,
    pub workflows: WorkflowCounts,
    pub rates: Rates,
    pub attempts: i64,
    pub wasted_attempts: i64,
    pub cost_usd: f64,
    pub wasted_cost_usd: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LayerAmplification {
    /// `None`: every layer (spelled `all`).
    #[serde(serialize_with = "spelled_or_all")]
    pub layer: Option<Layer>,
    pub attempts: i64,
    pub per_workflow: PerWorkflow,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RetryBudget {
    pub budget: f64,
    /// Retries / first attempts over the whole scope.
    pub ratio: Option<f64>,
    pub first_attempts: i64,
    pub retries: i64,
    pub minutes: i64,
    pub minutes_over_budget: i64,
    pub peak_ratio: Option<f64>,
    pub peak_minute: Option<String>,
    /// Runs of consecutive minutes over the budget.
    pub incidents: Vec<BudgetIncident>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BudgetIncident {
    pub start: String,
    /// Exclusive: the minute after the last one over budget.
    pub end: String,
    pub minutes: i64,
    pub first_attempts: i64,
    pub retries: i64,
    pub peak_ratio: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RecoveryTime {
    /// `None`: both recovered outcomes (spelled `all`).
    #[serde(serialize_with = "spelled_or_all")]
    pub outcome: Option<Outcome>,
    pub workflows: i64,
    pub total: Option<f64>,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ErrorClassCount {
    #[serde(serialize_with = "spelled")]
    pub error_class: ErrorClass,
    /// Of `rate_limit`, the limit hit: `requests`, `tokens`, `input_tokens`,
    /// `output_tokens` or `unknown`; `null` for every other class.
    pub limit_kind: Option<String>,
    pub provider: String,
    pub attempts: i64,
    #[serde(serialize_with = "whole_number")]
    pub input_tokens: i128,
    #[serde(serialize_with = "whole_number")]
    pub output_tokens: i128,
    pub cost_usd: f64,
}

/// Outcomes of the workflows meant for one route: its own success rate,
/// which fallbacks can hide behind a healthy overall rate.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PrimaryRoute {
    /// The route group when the workflows' primary attempts named one (then
    /// provider and model are `null`: a group spans deployments).
    pub route_group: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub workflows: i64,
    /// Workflows with a terminal outcome: the rates' denominator.
    pub terminal: i64,
    pub primary_success: i64,
    pub retry_recovery: i64,
    pub fallback_recovery: i64,
    pub degraded: i64,
    pub fail_closed: i64,
    /// primary_success / terminal; `null` when nothing is terminal.
    pub primary_success_rate: Option<f64>,
}

/// Workflows that sent an attempt to a route other than their primary, by
/// the first fallback route and what failed just before it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FallbackActivation {
    pub primary_route_group: Option<String>,
    pub primary_provider: Option<String>,
    pub primary_model: Option<String>,
    pub fallback_route_group: Option<String>,
    pub fallback_provider: Option<String>,
    pub fallback_model: Option<String>,
    /// Error class of the last failed attempt before the fallback; `none`
    /// when nothing had failed (an open circuit, a routing policy).
    /// `None`: nothing failed first (spelled `none`).
    #[serde(serialize_with = "spelled_or_none")]
    pub reason: Option<ErrorClass>,
    pub workflows: i64,
    /// Of those, workflows whose outcome is `fallback_recovery`.
    pub recovered: i64,
    /// What happened, for a listed activation (empty / null on the row
    /// that folds the rest): the limit kinds of the primary's 429s, the
    /// provider/models that served the fallbacks, what those attempts cost
    /// and what the same tokens would have cost at the primary's price
    /// (null: no price for it), and how many of the workflows started while
    /// the primary's breaker was open.
    pub limit_kinds: Vec<String>,
    pub served_models: Vec<String>,
    pub fallback_cost_usd: Option<f64>,
    pub primary_cost_usd: Option<f64>,
    pub breaker_open_workflows: Option<i64>,
}

/// The attempts one served route failed with one error class, of all it
/// served.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ServedErrorRate {
    pub served_provider: String,
    pub served_model: String,
    #[serde(serialize_with = "spelled")]
    pub error_class: ErrorClass,
    pub failed: i64,
    pub attempts: i64,
    /// failed / attempts.
    pub rate: Option<f64>,
}

/// Rate-limited attempts of one served route by the limit they hit.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RateLimitCount {
    pub served_provider: String,
    pub served_model: String,
    /// `requests`, `tokens`, `input_tokens`, `output_tokens` or `unknown`.
    pub kind: String,
    pub attempts: i64,
}

/// One kind of rate limit of one served route and billing account, as its
/// responses stated it (docs/record-format.md, "Headroom").
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Headroom {
    pub served_provider: String,
    pub served_model: String,
    pub billing_account: Option<String>,
    pub kind: String,
    /// The latest statement's remaining and limit.
    pub remaining: Option<i64>,
    pub limit: Option<i64>,
    /// The lowest remaining / limit stated, and its minute.
    pub min_ratio: Option<f64>,
    pub min_at: Option<String>,
    /// Attempts whose response stated under 10 % remaining, the first one.
    pub attempts_below_10pct: i64,
    pub first_below_10pct_at: Option<String>,
    /// 429s that hit this limit, the first one.
    pub rate_limited: i64,
    pub first_429_at: Option<String>,
    /// The warning the headers gave: from the first attempt under 10 % to
    /// the first 429, when both happened in that order.
    pub warning_seconds: Option<f64>,
}

impl Headroom {
    fn of(r: &crate::store::queries::HeadroomRow) -> Headroom {
        let instant = |t: Option<DateTime<Utc>>| t.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true));
        let warning_seconds = match (r.first_below_10pct_at, r.first_429_at) {
            (Some(below), Some(limited)) if below <= limited => {
                Some((limited - below).num_milliseconds() as f64 / 1000.0)
            }
            _ => None,
        };
        Headroom {
            served_provider: r.served_provider.clone(),
            served_model: r.served_model.clone(),
            billing_account: r.billing_account.clone(),
            kind: r.kind.clone(),
            remaining: r.remaining,
            limit: r.limit,
            min_ratio: r.min_ratio,
            min_at: r.min_at.map(minute_text),
            attempts_below_10pct: r.attempts_below_10pct,
            first_below_10pct_at: instant(r.first_below_10pct_at),
            rate_limited: r.rate_limited,
            first_429_at: instant(r.first_429_at),
            warning_seconds,
        }
    }
}

/// Duration or time-to-first-token of one requested route and status: each
/// percentile is the upper bound of the histogram bucket it fell in (null:
/// above the last bound), the mean exact.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LatencyPercentiles {
    pub provider: String,
    pub model: String,
    pub status: String,
    /// `duration` or `ttft`.
    pub metric: String,
    pub observations: i64,
    pub p50_seconds: Option<f64>,
    pub p90_seconds: Option<f64>,
    pub p99_seconds: Option<f64>,
    pub mean_seconds: f64,
}

/// One open or half-open interval of one route's breaker
/// (docs/record-format.md, "Breaker timelines").
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CircuitInterval {
    /// The route: provider and model, or its group.
    pub provider: Option<String>,
    pub model: Option<String>,
    pub route_group: Option<String>,
    /// Whose breaker: a workflow name, or every caller's (null).
    pub workflow: Option<String>,
    pub state: String,
    pub from: String,
    /// Null while it lasts.
    pub until: Option<String>,
    /// Open intervals: workflows of the window whose first attempt started
    /// in it on this primary route, and how they ended.
    pub workflows_started: i64,
    pub outcomes: WorkflowCounts,
    /// What those workflows' attempts off the primary route cost, and what
    /// the same tokens would have cost at the primary's price (null: no
    /// price for the primary).
    pub fallback_cost_usd: f64,
    pub primary_cost_usd: Option<f64>,
    pub unknown_cost_attempts: i64,
    /// Half-open intervals: attempts sent to the route in it, and successes.
    pub probes: i64,
    pub probes_succeeded: i64,
}

impl CircuitInterval {
    /// The route, named as every other section names routes.
    pub fn route(&self) -> attempt_core::request::RouteKey {
        attempt_core::request::RouteKey {
            route_group: self.route_group.clone(),
            provider: self.provider.clone(),
            model: self.model.clone(),
        }
    }

    fn of(r: &crate::store::queries::CircuitRow) -> CircuitInterval {
        let instant = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
        CircuitInterval {
            provider: r.provider.clone(),
            model: r.model.clone(),
            route_group: r.route_group.clone(),
            workflow: r.workflow.clone(),
            state: r.state.clone(),
            from: instant(r.from),
            until: r.until.map(instant),
            workflows_started: r.counts.workflows,
            outcomes: counts(&r.counts),
            fallback_cost_usd: usd(r.fallback_cost_pusd),
            primary_cost_usd: r.primary_cost_pusd.map(usd),
            unknown_cost_attempts: r.unknown_cost_attempts,
            probes: r.probes,
            probes_succeeded: r.probes_succeeded,
        }
    }
}

pub(crate) fn usd(pico: i128) -> f64 {
    pico as f64 / attempt_core::model::PicoUsd::PER_USD
}

fn share(part: impl Into<f64>, whole: impl Into<f64>) -> Option<f64> {
    let whole = whole.into();
    (whole != 0.0).then(|| part.into() / whole)
}

fn minute_text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

impl Report {
    /// The report of `rows`, its lists of names folded to their bounds
    /// (`fold.rs`): what every reader shows.
    pub fn from_rows(rows: &ReportRows, retry_budget: f64) -> Self {
        Self::from_unfolded_rows(&fold::fold_lists(rows), retry_budget)
    }

    /// The report of `rows` as they are, every route listed: what alert
    /// rules read, since a rule may name a route past the listed ones.
    pub fn from_unfolded_rows(rows: &ReportRows, retry_budget: f64) -> Self {
        let total = rows.outcomes.iter().find(|r| r.is_total);
        let workflows = total.map(|r| counts(&r.counts)).unwrap_or_default();
        let overall_rates = rates(&workflows);
        let all_layers = rows.amplification.iter().find(|r| r.layer.is_none());
        let w = &rows.waste;
        let tokens_total = (w.input_tokens + w.output_tokens) as f64;
        let tokens_wasted = (w.wasted_input_tokens + w.wasted_output_tokens) as f64;
        Report {
            workflows,
            rates: overall_rates,
            attempts: Attempts {
                total: w.attempts,
                wasted: w.wasted_attempts,
                per_workflow: all_layers.map_or(EMPTY_PER_WORKFLOW, per_workflow),
            },
            tokens: TokenTotals {
                total: TokenCounts {
                    input: w.input_tokens,
                    output: w.output_tokens,
                    cached_input: w.cached_input_tokens,
                    cache_write_input: w.cache_write_input_tokens,
                    reasoning_output: w.reasoning_output_tokens,
                    cache_write_1h_input: w.cache_write_1h_input_tokens,
                },
                wasted: TokenCounts {
                    input: w.wasted_input_tokens,
                    output: w.wasted_output_tokens,
                    cached_input: w.wasted_cached_input_tokens,
                    cache_write_input: w.wasted_cache_write_input_tokens,
                    reasoning_output: w.wasted_reasoning_output_tokens,
                    cache_write_1h_input: w.wasted_cache_write_1h_input_tokens,
                },
            },
            cost_usd: CostTotals {
                total: usd(w.cost_pusd),
                wasted: usd(w.wasted_cost_pusd),
                unknown_cost_attempts: w.unknown_cost_attempts,
                wasted_unknown_cost_attempts: w.wasted_unknown_cost_attempts,
                unknown_cost_reasons: UnknownCostReasons {
                    no_usage: w.no_usage,
                    other_currency: w.other_currency,
                    no_price: w.no_price,
                    no_tier_price: w.no_tier_price,
                    no_kind_price: w.no_kind_price,
                },
                region_unpriced_attempts: w.region_unpriced_attempts,
                web_search_requests: w.web_search_requests,
                wasted_web_search_requests: w.wasted_web_search_requests,
            },
            waste_share: WasteShare {
                attempts: share(w.wasted_attempts as f64, w.attempts as f64),
                tokens: share(tokens_wasted, tokens_total),
                input_tokens: share(w.wasted_input_tokens as f64, w.input_tokens as f64),
                output_tokens: share(w.wasted_output_tokens as f64, w.output_tokens as f64),
                cost: share(w.wasted_cost_pusd as f64, w.cost_pusd as f64),
            },
            by_served_provider: rows
                .served
                .iter()
                .filter(|r| r.served_model.is_none())
                .map(|r| ServedProvider {
                    served_provider: r.served_provider.clone(),
                    attempts: r.attempts,
                    rerouted_attempts: r.rerouted_attempts,
                    cost_usd: usd(r.cost_pusd),
                    wasted_cost_usd: usd(r.wasted_cost_pusd),
                    unknown_cost_attempts: r.unknown_cost_attempts,
                    prices_as_of: r.prices_as_of.clone(),
                })
                .collect(),
            by_served_model: rows
                .served
                .iter()
                .filter_map(|r| {
                    Some(ServedModel {
                        served_provider: r.served_provider.clone(),
                        served_model: r.served_model.clone()?,
                        attempts: r.attempts,
                        wasted_attempts: r.wasted_attempts,
                        rerouted_attempts: r.rerouted_attempts,
                        input_tokens: r.input_tokens,
                        output_tokens: r.output_tokens,
                        cached_input_tokens: r.cached_input_tokens,
                        cost_usd: usd(r.cost_pusd),
                        wasted_cost_usd: usd(r.wasted_cost_pusd),
                        unknown_cost_attempts: r.unknown_cost_attempts,
                        prices_as_of: r.prices_as_of.clone(),
                    })
                })
                .collect(),
            by_workflow: rows
                .outcomes
                .iter()
                .filter(|r| !r.is_total)
                .map(|r| WorkflowBreakdown {
                    workflow: r.workflow_name.clone(),
                    workflows: counts(&r.counts),
                    rates: rates(&counts(&r.counts)),
                    attempts: r.attempts,
                    wasted_attempts: r.wasted_attempts,
                    cost_usd: usd(r.cost_pusd),
                    wasted_cost_usd: usd(r.wasted_cost_pusd),
                })
                .collect(),
            amplification: rows
                .amplification
                .iter()
                .map(|r| LayerAmplification {
                    layer: r.layer,
                    attempts: r.attempts,
                    per_workflow: per_workflow(r),
                })
                .collect(),
            retry_budget: retry_budget_summary(&rows.minutes, retry_budget),
            recovery_time_ms: rows
                .recovery
                .iter()
                .map(|r| RecoveryTime {
                    outcome: r.outcome,
                    workflows: r.workflows,
                    total: r.total_ms,
                    mean: r.mean_ms,
                    p50: r.p50_ms,
                    p99: r.p99_ms,
                    max: r.max_ms,
                })
                .collect(),
            error_classes: rows
                .error_classes
                .iter()
                .map(|r| ErrorClassCount {
                    error_class: r.error_class,
                    limit_kind: r.limit_kind.clone(),
                    provider: r.provider.clone(),
                    attempts: r.attempts,
                    input_tokens: r.input_tokens,
                    output_tokens: r.output_tokens,
                    cost_usd: usd(r.cost_pusd),
                })
                .collect(),
            by_primary_route: rows
                .routes
                .iter()
                .map(|r| PrimaryRoute {
                    route_group: r.primary.route_group.clone(),
                    provider: r.primary.provider.clone(),
                    model: r.primary.model.clone(),
                    workflows: r.workflows,
                    terminal: r.terminal,
                    primary_success: r.primary_success,
                    retry_recovery: r.retry_recovery,
                    fallback_recovery: r.fallback_recovery,
                    degraded: r.degraded,
                    fail_closed: r.fail_closed,
                    primary_success_rate: share(r.primary_success as f64, r.terminal as f64),
                })
                .collect(),
            fallbacks: rows
                .fallbacks
                .iter()
                .map(|r| {
                    (
                        r,
                        rows.fallback_costs.iter().find(|c| {
                            c.primary == r.primary && c.fallback == r.fallback && c.reason == r.reason
                        }),
                    )
                })
                .map(|(r, cost)| FallbackActivation {
                    primary_route_group: r.primary.route_group.clone(),
                    primary_provider: r.primary.provider.clone(),
                    primary_model: r.primary.model.clone(),
                    fallback_route_group: r.fallback.route_group.clone(),
                    fallback_provider: r.fallback.provider.clone(),
                    fallback_model: r.fallback.model.clone(),
                    reason: r.reason,
                    workflows: r.workflows,
                    recovered: r.recovered,
                    limit_kinds: cost.map(|c| c.limit_kinds.clone()).unwrap_or_default(),
                    served_models: cost.map(|c| c.served_models.clone()).unwrap_or_default(),
                    fallback_cost_usd: cost.map(|c| usd(c.fallback_cost_pusd)),
                    primary_cost_usd: cost.and_then(|c| c.primary_cost_pusd.map(usd)),
                    breaker_open_workflows: cost.map(|c| c.breaker_open_workflows),
                })
                .collect(),
            rate_limits: rows
                .rate_limits
                .iter()
                .map(|r| RateLimitCount {
                    served_provider: r.served_provider.clone(),
                    served_model: r.served_model.clone(),
                    kind: r.kind.clone(),
                    attempts: r.attempts,
                })
                .collect(),
            headroom: rows.headroom.iter().map(Headroom::of).collect(),
            error_rates: rows
                .served_errors
                .iter()
                .map(|r| ServedErrorRate {
                    served_provider: r.served_provider.clone(),
                    served_model: r.served_model.clone(),
                    error_class: r.error_class,
                    failed: r.failed,
                    attempts: r.attempts,
                    rate: share(r.failed as f64, r.attempts as f64),
                })
                .collect(),
            latency: rows
                .latency
                .iter()
                .map(|r| LatencyPercentiles {
                    provider: r.provider.clone(),
                    model: r.model.clone(),
                    status: r.status.clone(),
                    metric: r.metric.clone(),
                    observations: r.observations,
                    p50_seconds: r.p50_seconds,
                    p90_seconds: r.p90_seconds,
                    p99_seconds: r.p99_seconds,
                    mean_seconds: r.mean_seconds,
                })
                .collect(),
            circuits: rows.circuits.iter().map(CircuitInterval::of).collect(),
            circuits_omitted: rows.circuits_omitted,
            groups: rows.groups.as_ref().map(|g| DimensionGroups {
                dimension: g.dimension.clone(),
                values: g.rows.iter().map(group_breakdown).collect(),
            }),
            audit: None,
            derivation: None,
            lake: None,
        }
    }
}

fn group_breakdown(r: &GroupRow) -> GroupBreakdown {
    let workflows = counts(&r.counts);
    GroupBreakdown {
        value: r.value.clone(),
        rates: rates(&workflows),
        workflows,
        attempts: r.attempts,
        wasted_attempts: r.wasted_attempts,
        cost_usd: usd(r.cost_pusd),
        wasted_cost_usd: usd(r.wasted_cost_pusd),
        unknown_cost_attempts: r.unknown_cost_attempts,
    }
}

impl PrimaryRoute {
    pub fn key(&self) -> attempt_core::request::RouteKey {
        attempt_core::request::RouteKey {
            route_group: self.route_group.clone(),
            provider: self.provider.clone(),
            model: self.model.clone(),
        }
    }
}

impl FallbackActivation {
    pub fn primary(&self) -> attempt_core::request::RouteKey {
        attempt_core::request::RouteKey {
            route_group: self.primary_route_group.clone(),
            provider: self.primary_provider.clone(),
            model: self.primary_model.clone(),
        }
    }

    pub fn fallback(&self) -> attempt_core::request::RouteKey {
        attempt_core::request::RouteKey {
            route_group: self.fallback_route_group.clone(),
            provider: self.fallback_provider.clone(),
            model: self.fallback_model.clone(),
        }
    }
}

const EMPTY_PER_WORKFLOW: PerWorkflow = PerWorkflow { mean: None, p50: None, p99: None, max: None };

fn per_workflow(r: &crate::store::queries::AmplificationRow) -> PerWorkflow {
    PerWorkflow { mean: r.mean, p50: r.p50, p99: r.p99, max: r.max }
}

fn counts(r: &OutcomeCounts) -> WorkflowCounts {
    WorkflowCounts {
        total: r.workflows,
        primary_success: r.primary_success,
        retry_recovery: r.retry_recovery,
        fallback_recovery: r.fallback_recovery,
        degraded: r.degraded,
        fail_closed: r.fail_closed,
        queued: r.queued,
        in_flight: r.in_flight,
    }
}

/// Rates over terminal workflows: queued and in-flight ones have no
/// outcome yet and are left out of the denominator.
fn rates(c: &WorkflowCounts) -> Rates {
    let terminal =
        (c.primary_success + c.retry_recovery + c.fallback_recovery + c.degraded + c.fail_closed) as f64;
    let rate = |n: i64| share(n as f64, terminal);
    Rates {
        primary_success: rate(c.primary_success),
        retry_recovery: rate(c.retry_recovery),
        fallback_recovery: rate(c.fallback_recovery),
        degraded: rate(c.degraded),
        fail_closed: rate(c.fail_closed),
    }
}

fn retry_budget_summary(minutes: &[MinuteRow], budget: f64) -> RetryBudget {
    let first_attempts: i64 = minutes.iter().map(|m| m.first_attempts).sum();
    let retries: i64 = minutes.iter().map(|m| m.retries).sum();
    let peak = minutes.iter().filter_map(|m| m.ratio.map(|r| (r, m.minute))).fold(
        None,
        |best: Option<(f64, DateTime<Utc>)>, cur| match best {
            Some(b) if b.0 >= cur.0 => Some(b),
            _ => Some(cur),
        },
    );
    let mut incidents: Vec<BudgetIncident> = Vec::new();
    let mut previous: Option<DateTime<Utc>> = None;
    for m in minutes.iter().filter(|m| m.over_budget) {
        let next_minute = m.minute + chrono::Duration::minutes(1);
        let extends = previous.is_some_and(|p| p + chrono::Duration::minutes(1) == m.minute);
        match incidents.last_mut() {
            Some(open) if extends => {
                open.end = minute_text(next_minute);
                open.minutes += 1;
                open.first_attempts += m.first_attempts;
                open.retries += m.retries;
                open.peak_ratio = match (open.peak_ratio, m.ratio) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
            }
            _ => incidents.push(BudgetIncident {
                start: minute_text(m.minute),
                end: minute_text(next_minute),
                minutes: 1,
                first_attempts: m.first_attempts,
                retries: m.retries,
                peak_ratio: m.ratio,
            }),
        }
        previous = Some(m.minute);
    }
    RetryBudget {
        budget,
        ratio: share(retries as f64, first_attempts as f64),
        first_attempts,
        retries,
        minutes: minutes.len() as i64,
        minutes_over_budget: minutes.iter().filter(|m| m.over_budget).count() as i64,
        peak_ratio: peak.map(|p| p.0),
        peak_minute: peak.map(|p| minute_text(p.1)),
        incidents,
    }
}

/// Enums leave the report in the record format's spelling.
/// Token sums are 128-bit (a sum of 64-bit counts cannot overflow), but
/// JSON readers and serde_json stop at 64 bits: a sum that fits is written
/// exactly, a larger one as the nearest double rather than failing the
/// whole report.
fn whole_number<S: serde::Serializer>(value: &i128, out: S) -> Result<S::Ok, S::Error> {
    match (i64::try_from(*value), u64::try_from(*value)) {
        (Ok(v), _) => out.serialize_i64(v),
        (_, Ok(v)) => out.serialize_u64(v),
        _ => out.serialize_f64(*value as f64),
    }
}

fn spelled<S: serde::Serializer, T: Copy + Into<&'static str>>(value: &T, out: S) -> Result<S::Ok, S::Error> {
    out.serialize_str(name(*value))
}

fn spelled_or_all<S: serde::Serializer, T: Copy + Into<&'static str>>(
    value: &Option<T>,
    out: S,
) -> Result<S::Ok, S::Error> {
    out.serialize_str(value.map_or("all", name))
}

fn spelled_or_none<S: serde::Serializer, T: Copy + Into<&'static str>>(
    value: &Option<T>,
    out: S,
) -> Result<S::Ok, S::Error> {
    out.serialize_str(value.map_or("none", name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_sums_beyond_64_bits_still_serialise() {
        let counts = TokenCounts {
            input: i128::from(u64::MAX) * 3,
            output: -5,
            cached_input: 7,
            cache_write_input: 0,
            cache_write_1h_input: 0,
            reasoning_output: 0,
        };
        let json = serde_json::to_value(&counts).unwrap();
        assert_eq!(json["output"], -5);
        assert_eq!(json["cached_input"], 7);
        assert_eq!(json["input"].as_f64(), Some(u64::MAX as f64 * 3.0));
        let exact = TokenCounts { input: i128::from(u64::MAX), ..counts };
        assert_eq!(serde_json::to_value(&exact).unwrap()["input"].as_u64(), Some(u64::MAX));
    }
}
