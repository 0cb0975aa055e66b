//! Runs `queries/*.sql` and maps their rows to plain structs. The SQL holds
//! the rules (outcomes, waste, cost); this file only binds parameters and
//! reads columns by name.

use chrono::{DateTime, Utc};
use duckdb::types::{TimeUnit, Value};
use duckdb::{Connection, Row, params};

use super::columns::{
    FromRow, counts, flattened, optional_timestamp, route_key, row_struct, spelled, spelled_if_any,
    spelled_or_all, spelled_or_none, texts, timestamp_column,
};
use super::error::StoreError;
use attempt_core::finding::FindingKind;
use attempt_core::model::{ErrorClass, Layer, Outcome};
use attempt_core::pricing::PriceTable;

const WINDOW_SQL: &str = include_str!("../../queries/window.sql");
const ROLLUPS_SQL: &str = include_str!("../../queries/rollups.sql");
const SCOPE_SQL: &str = include_str!("../../queries/scope.sql");
const CIRCUIT_TIMELINE_SQL: &str = include_str!("../../queries/circuit_timeline.sql");

use attempt_core::request::{AuditFilter, ReportFilter, RouteKey, SeriesRange};

/// The report queries, one per file in `queries/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Query {
    Outcomes,
    Waste,
    CostByServed,
    Amplification,
    RetryBudget,
    RecoveryTime,
    ErrorClasses,
    Routes,
    Fallbacks,
    RateLimits,
    Headroom,
    ServedErrors,
    Circuits,
    FallbackCosts,
    Latency,
}

impl Query {
    pub const ALL: [Query; 15] = [
        Query::Outcomes,
        Query::Waste,
        Query::CostByServed,
        Query::Amplification,
        Query::RetryBudget,
        Query::RecoveryTime,
        Query::ErrorClasses,
        Query::Routes,
        Query::Fallbacks,
        Query::RateLimits,
        Query::Headroom,
        Query::ServedErrors,
        Query::Circuits,
        Query::FallbackCosts,
        Query::Latency,
    ];

    pub fn file_name(self) -> &'static str {
        match self {
            Query::Outcomes => "outcomes.sql",
            Query::Waste => "waste.sql",
            Query::CostByServed => "cost_by_served.sql",
            Query::Amplification => "amplification.sql",
            Query::RetryBudget => "retry_budget.sql",
            Query::RecoveryTime => "recovery_time.sql",
            Query::ErrorClasses => "error_classes.sql",
            Query::Routes => "routes.sql",
            Query::Fallbacks => "fallbacks.sql",
            Query::RateLimits => "rate_limits.sql",
            Query::Headroom => "headroom.sql",
            Query::ServedErrors => "served_errors.sql",
            Query::Circuits => "circuits.sql",
            Query::FallbackCosts => "fallback_costs.sql",
            Query::Latency => "latency.sql",
        }
    }

    fn sql(self) -> &'static str {
        match self {
            Query::Outcomes => include_str!("../../queries/outcomes.sql"),
            Query::Waste => include_str!("../../queries/waste.sql"),
            Query::CostByServed => include_str!("../../queries/cost_by_served.sql"),
            Query::Amplification => include_str!("../../queries/amplification.sql"),
            Query::RetryBudget => include_str!("../../queries/retry_budget.sql"),
            Query::RecoveryTime => include_str!("../../queries/recovery_time.sql"),
            Query::ErrorClasses => include_str!("../../queries/error_classes.sql"),
            Query::Routes => include_str!("../../queries/routes.sql"),
            Query::Fallbacks => include_str!("../../queries/fallbacks.sql"),
            Query::RateLimits => include_str!("../../queries/rate_limits.sql"),
            Query::Headroom => include_str!("../../queries/headroom.sql"),
            Query::ServedErrors => include_str!("../../queries/served_errors.sql"),
            Query::Circuits => include_str!("../../queries/circuits.sql"),
            Query::FallbackCosts => include_str!("../../queries/fallback_costs.sql"),
            Query::Latency => include_str!("../../queries/latency.sql"),
        }
    }
}

/// Splits a window into the rollups' whole minutes and the per-workflow
/// edges (`window.sql`) and sums the edges (`rollups.sql`). `unfold` is a
/// fixed SQL condition: true reads every workflow from its own rows.
fn split_window(
    conn: &Connection,
    since: Option<DateTime<Utc>>,
    until: Option<DateTime<Utc>>,
    workflow: Option<&str>,
    unfold: &str,
) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE OR REPLACE TEMP TABLE scope_filter (
             since TIMESTAMP, until TIMESTAMP, workflow VARCHAR, unfold BOOLEAN);",
    )?;
    let micros =
        |t: Option<DateTime<Utc>>| t.map(|t| Value::Timestamp(TimeUnit::Microsecond, t.timestamp_micros()));
    conn.execute(
        &format!("INSERT INTO temp.scope_filter SELECT ?, ?, ?, {unfold}"),
        params![micros(since), micros(until), workflow],
    )?;
    let began = std::time::Instant::now();
    super::derived::define_kept_label(conn)?;
    let labels = began.elapsed();
    conn.execute_batch(WINDOW_SQL)?;
    let window = began.elapsed();
    sum_edges(
        conn,
        ROLLUPS_SQL,
        &[
            ("r_workflows", "rollup_workflows"),
            ("r_attempts", "rollup_attempts"),
            ("r_latency", "rollup_latency"),
            ("r_recovery", "rollup_recovery"),
        ],
    )?;
    tracing::trace!(
        labels_ms = labels.as_millis() as u64,
        window_ms = (window - labels).as_millis() as u64,
        edges_ms = (began.elapsed() - window).as_millis() as u64,
        "window split"
    );
    Ok(())
}

/// Sums the window's edge workflows with a rollups script (`window.sql`'s
/// views feed it), or, when the window has none (`scope_has_edges`: no
/// time bound, or bounds on whole minutes), gives each table it builds the
/// empty shape of the rollup table it mirrors (each script's header says
/// its columns are that table's), without the scans that would find nothing.
pub(super) fn sum_edges(conn: &Connection, script: &str, tables: &[(&str, &str)]) -> Result<(), StoreError> {
    let has_edges: bool = conn.query_row("SELECT getvariable('scope_has_edges')", [], |r| r.get(0))?;
    if has_edges {
        conn.execute_batch(script)?;
    } else {
        let empty: String = tables
            .iter()
            .map(|(built, mirrored)| {
                format!("CREATE OR REPLACE TEMP TABLE {built} AS SELECT * FROM {mirrored} LIMIT 0;")
            })
            .collect();
        conn.execute_batch(&empty)?;
    }
    Ok(())
}

/// Loads the prices of the stored attempts' keys into `temp.prices`
/// (`store::prices`), then `scope_of`.
pub(super) fn prepare_scope(
    conn: &Connection,
    filter: &ReportFilter,
    prices: &PriceTable,
) -> Result<(), StoreError> {
    super::prices::load(conn, prices)?;
    scope_of(conn, filter, "false")
}

/// Builds the `temp.scope_*` tables for `filter`, the prices already in
/// `temp.prices`: whole minutes from the rollups, the window's edges from
/// the per-workflow facts (`window.sql`, `rollups.sql`, `scope.sql`); every
/// workflow from its own rows when the SQL condition `unfold` holds (a
/// question about a name the rollups fold).
pub(super) fn scope_of(conn: &Connection, filter: &ReportFilter, unfold: &str) -> Result<(), StoreError> {
    let began = std::time::Instant::now();
    split_window(conn, filter.since, filter.until, filter.workflow.as_deref(), unfold)?;
    let split = began.elapsed();
    conn.execute_batch(SCOPE_SQL)?;
    conn.execute_batch(CIRCUIT_TIMELINE_SQL)?;
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    tracing::debug!(
        query = "scope.sql",
        window_ms = ms(split),
        scope_ms = ms(began.elapsed() - split),
        elapsed_ms = ms(began.elapsed())
    );
    Ok(())
}

pub(super) fn pretty(conn: &Connection, query: Query, filter: &ReportFilter) -> Result<String, StoreError> {
    let mut stmt = conn.prepare(query.sql())?;
    let batches: Vec<_> = match query {
        Query::RetryBudget => stmt.query_arrow(params![filter.retry_budget])?.collect(),
        _ => stmt.query_arrow([])?.collect(),
    };
    Ok(duckdb::arrow::util::pretty::pretty_format_batches(&batches)
        .map(|table| table.to_string())
        .unwrap_or_else(|err| format!("cannot print: {err}")))
}

row_struct! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct OutcomeRow {
        pub is_total: bool,
        pub workflow_name: Option<String>,
        pub counts: OutcomeCounts => flattened,
        pub attempts: i64,
        pub wasted_attempts: i64,
        pub cost_pusd: i128,
        pub wasted_cost_pusd: i128,
    }
}

row_struct! {
    /// Workflows by outcome, as `outcomes.sql` and `groups.sql` count them.
    #[derive(Debug, Clone, PartialEq, Default)]
    pub struct OutcomeCounts {
        pub workflows: i64,
        pub primary_success: i64,
        pub retry_recovery: i64,
        pub fallback_recovery: i64,
        pub degraded: i64,
        pub fail_closed: i64,
        pub queued: i64,
        pub in_flight: i64,
    }
}

row_struct! {
    #[derive(Debug, Clone, PartialEq, Default)]
    pub struct WasteRow {
        pub attempts: i64,
        pub wasted_attempts: i64,
        pub input_tokens: i128,
        pub output_tokens: i128,
        pub cached_input_tokens: i128,
        pub cache_write_input_tokens: i128,
        pub wasted_input_tokens: i128,
        pub wasted_output_tokens: i128,
        pub wasted_cached_input_tokens: i128,
        pub wasted_cache_write_input_tokens: i128,
        pub reasoning_output_tokens: i128,
        pub wasted_reasoning_output_tokens: i128,
        pub cost_pusd: i128,
        pub wasted_cost_pusd: i128,
        pub unknown_cost_attempts: i64,
        pub wasted_unknown_cost_attempts: i64,
        pub no_usage: i64,
        pub other_currency: i64,
        pub no_price: i64,
        pub no_tier_price: i64,
        pub no_kind_price: i64,
        pub region_unpriced_attempts: i64,
        pub cache_write_1h_input_tokens: i128,
        pub wasted_cache_write_1h_input_tokens: i128,
        pub web_search_requests: i128,
        pub wasted_web_search_requests: i128,
    }
}

row_struct! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct ServedRow {
        pub served_provider: String,
        /// `None` on the provider's subtotal row.
        pub served_model: Option<String>,
        pub attempts: i64,
        pub wasted_attempts: i64,
        pub rerouted_attempts: i64,
        pub input_tokens: i128,
        pub output_tokens: i128,
        pub cached_input_tokens: i128,
        pub cost_pusd: i128,
        pub wasted_cost_pusd: i128,
        pub unknown_cost_attempts: i64,
        /// The oldest as-of day (YYYY-MM-DD) of the prices that priced them.
        pub prices_as_of: Option<String>,
    }
}

row_struct! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct AmplificationRow {
        /// `None` on the row over every layer.
        pub layer: Option<Layer> => spelled_or_all,
        pub attempts: i64,
        pub workflows: i64,
        pub mean: Option<f64>,
        pub p50: Option<i64>,
        pub p99: Option<i64>,
        pub max: Option<i64>,
    }
}

row_struct! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct MinuteRow {
        pub minute: DateTime<Utc> => timestamp_column,
        pub first_attempts: i64,
        pub retries: i64,
        pub ratio: Option<f64>,
        pub over_budget: bool,
    }
}

row_struct! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct RecoveryRow {
        /// `None` on the row over both recovered outcomes.
        pub outcome: Option<Outcome> => spelled_or_all,
        pub workflows: i64,
        pub total_ms: Option<f64>,
        pub mean_ms: Option<f64>,
        pub p50_ms: Option<f64>,
        pub p99_ms: Option<f64>,
        pub max_ms: Option<f64>,
    }
}

row_struct! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct ErrorClassRow {
        pub error_class: ErrorClass => spelled,
        /// Of class rate_limit, the limit its attempts hit.
        pub limit_kind: Option<String>,
        pub provider: String,
        pub attempts: i64,
        pub input_tokens: i128,
        pub output_tokens: i128,
        pub cost_pusd: i128,
    }
}

row_struct! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct RouteRow {
        pub primary: RouteKey => route_key,
        pub workflows: i64,
        pub terminal: i64,
        pub primary_success: i64,
        pub retry_recovery: i64,
        pub fallback_recovery: i64,
        pub degraded: i64,
        pub fail_closed: i64,
    }
}

row_struct! {
    #[derive(Debug, Clone, PartialEq)]
    pub struct FallbackRow {
        pub primary: RouteKey => route_key,
        pub fallback: RouteKey => route_key,
        /// The error class just before the fallback; `None` when nothing had
        /// failed (an open circuit, a policy).
        pub reason: Option<ErrorClass> => spelled_or_none,
        pub workflows: i64,
        pub recovered: i64,
    }
}

row_struct! {
    /// What one fallback activation was and cost (`fallback_costs.sql`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct FallbackCostRow {
        pub primary: RouteKey => route_key,
        pub fallback: RouteKey => route_key,
        pub reason: Option<ErrorClass> => spelled_or_none,
        pub workflows: i64,
        pub limit_kinds: Vec<String> => texts,
        pub served_models: Vec<String> => texts,
        pub fallback_cost_pusd: i128,
        pub primary_cost_pusd: Option<i128>,
        pub unknown_cost_attempts: i64,
        pub breaker_open_workflows: i64,
    }
}

row_struct! {
    /// Duration or time-to-first-token percentiles of one requested route
    /// and status (`latency.sql`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct LatencyRow {
        pub provider: String,
        pub model: String,
        pub status: String,
        pub metric: String,
        pub observations: i64,
        pub p50_seconds: Option<f64>,
        pub p90_seconds: Option<f64>,
        pub p99_seconds: Option<f64>,
        pub mean_seconds: f64,
    }
}

row_struct! {
    /// Rate-limited attempts by the limit they hit (`rate_limits.sql`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct RateLimitRow {
        pub served_provider: String,
        pub served_model: String,
        pub kind: String,
        pub attempts: i64,
    }
}

row_struct! {
    /// One error class of one served route, and the route's attempts
    /// (`served_errors.sql`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct ServedErrorRow {
        pub served_provider: String,
        pub served_model: String,
        pub error_class: ErrorClass => spelled,
        pub failed: i64,
        pub attempts: i64,
    }
}

row_struct! {
    /// The headroom one served route and account stated for one kind
    /// (`headroom.sql`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct HeadroomRow {
        pub served_provider: String,
        pub served_model: String,
        pub billing_account: Option<String>,
        pub kind: String,
        pub remaining: Option<i64>,
        pub limit: Option<i64>,
        pub min_ratio: Option<f64>,
        pub min_at: Option<DateTime<Utc>> => optional_timestamp,
        pub attempts_below_10pct: i64,
        pub first_below_10pct_at: Option<DateTime<Utc>> => optional_timestamp,
        pub rate_limited: i64,
        pub first_429_at: Option<DateTime<Utc>> => optional_timestamp,
    }
}

row_struct! {
    /// One open or half-open interval of a route's breaker (`circuits.sql`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct CircuitRow {
        pub provider: Option<String>,
        pub model: Option<String>,
        pub route_group: Option<String>,
        pub workflow: Option<String>,
        pub state: String,
        pub from: DateTime<Utc> => timestamp_column,
        pub until: Option<DateTime<Utc>> => optional_timestamp,
        pub counts: OutcomeCounts => flattened,
        pub fallback_cost_pusd: i128,
        pub primary_cost_pusd: Option<i128>,
        pub unknown_cost_attempts: i64,
        pub probes: i64,
        pub probes_succeeded: i64,
    }
}

row_struct! {
    /// One value of the dimension a report is grouped by.
    #[derive(Debug, Clone, PartialEq)]
    pub struct GroupRow {
        /// `None` for workflows that carried no value.
        pub value: Option<String>,
        pub counts: OutcomeCounts => flattened,
        pub attempts: i64,
        pub wasted_attempts: i64,
        pub cost_pusd: i128,
        pub wasted_cost_pusd: i128,
        pub unknown_cost_attempts: i64,
    }
}

/// The rows of `groups.sql`, with the dimension they group by.
#[derive(Debug, Clone, PartialEq)]
pub struct Groups {
    pub dimension: String,
    pub rows: Vec<GroupRow>,
}

const GROUPS_SQL: &str = include_str!("../../queries/groups.sql");

/// Runs `groups.sql` for the dimension in `slot` (1-based).
pub(super) fn group_rows(conn: &Connection, slot: usize) -> Result<Vec<GroupRow>, StoreError> {
    conn.execute_batch(&format!("SET VARIABLE group_slot = {slot};"))?;
    let mut stmt = conn.prepare(GROUPS_SQL)?;
    let rows = stmt.query_map([], GroupRow::from_row)?.collect::<Result<_, _>>()?;
    Ok(rows)
}

/// Every report query's rows.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportRows {
    pub outcomes: Vec<OutcomeRow>,
    pub waste: WasteRow,
    pub served: Vec<ServedRow>,
    pub amplification: Vec<AmplificationRow>,
    pub minutes: Vec<MinuteRow>,
    pub recovery: Vec<RecoveryRow>,
    pub error_classes: Vec<ErrorClassRow>,
    pub routes: Vec<RouteRow>,
    pub fallbacks: Vec<FallbackRow>,
    pub fallback_costs: Vec<FallbackCostRow>,
    pub latency: Vec<LatencyRow>,
    pub rate_limits: Vec<RateLimitRow>,
    pub headroom: Vec<HeadroomRow>,
    pub served_errors: Vec<ServedErrorRow>,
    pub circuits: Vec<CircuitRow>,
    /// Intervals `fold_lists` left out of `circuits` (the oldest).
    pub circuits_omitted: u64,
    /// Present when the filter asked for a `group_by`.
    pub groups: Option<Groups>,
}

/// Runs the `queries` among the report's; the others' rows are left empty.
pub(super) fn report_rows(
    conn: &Connection,
    filter: &ReportFilter,
    wanted: &[Query],
) -> Result<ReportRows, StoreError> {
    Ok(ReportRows {
        outcomes: rows(conn, wanted, Query::Outcomes, [])?,
        waste: rows(conn, wanted, Query::Waste, [])?.pop().unwrap_or_default(),
        served: rows(conn, wanted, Query::CostByServed, [])?,
        amplification: rows(conn, wanted, Query::Amplification, [])?,
        minutes: rows(conn, wanted, Query::RetryBudget, params![filter.retry_budget])?,
        recovery: rows(conn, wanted, Query::RecoveryTime, [])?,
        error_classes: rows(conn, wanted, Query::ErrorClasses, [])?,
        routes: rows(conn, wanted, Query::Routes, [])?,
        fallbacks: rows(conn, wanted, Query::Fallbacks, [])?,
        fallback_costs: rows(conn, wanted, Query::FallbackCosts, [])?,
        latency: rows(conn, wanted, Query::Latency, [])?,
        rate_limits: rows(conn, wanted, Query::RateLimits, [])?,
        headroom: rows(conn, wanted, Query::Headroom, [])?,
        served_errors: rows(conn, wanted, Query::ServedErrors, [])?,
        circuits: rows(conn, wanted, Query::Circuits, [])?,
        circuits_omitted: 0,
        groups: None,
    })
}

const OFF_PRIMARY_ROWS_SQL: &str = include_str!("../../queries/off_primary_rows.sql");
const OFF_PRIMARY_SPEND_SQL: &str = include_str!("../../queries/off_primary_spend.sql");

/// Prices, once for both queries that read them, the window's attempts off
/// their primary route, as served and at the primary's price
/// (`temp.off_primary_spend`), when `wanted` has fallback_costs.sql or
/// circuits.sql. Needs the window (`scope_of`).
pub(super) fn price_primaries(
    conn: &Connection,
    wanted: &[Query],
    prices: &PriceTable,
) -> Result<(), StoreError> {
    if wanted.iter().any(|q| matches!(q, Query::FallbackCosts | Query::Circuits)) {
        conn.execute_batch(OFF_PRIMARY_ROWS_SQL)?;
        let rows: i64 = conn.query_row("SELECT count(*) FROM temp.off_primary_rows", [], |r| r.get(0))?;
        if rows == 0 {
            conn.execute_batch("DROP TABLE temp.off_primary_rows;")?;
            return Ok(());
        }
        super::prices::price_keys(
            conn,
            prices,
            "SELECT DISTINCT primary_provider AS served_provider, primary_model AS served_model, price_key
             FROM temp.off_primary_rows WHERE primary_provider IS NOT NULL",
        )?;
        conn.execute_batch(OFF_PRIMARY_SPEND_SQL)?;
    }
    Ok(())
}

const METRICS_SQL: &str = include_str!("../../queries/metrics.sql");

/// The label columns of `queries/metrics.sql`, in order.
pub const METRIC_LABEL_COLUMNS: [&str; 14] = [
    "workflow",
    "layer",
    "provider",
    "model",
    "served_provider",
    "status",
    "error_class",
    "outcome",
    "fallback_provider",
    "fallback_model",
    "token_type",
    "reason",
    "limit_kind",
    "route_group",
];

/// One sample of `queries/metrics.sql`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRow {
    pub family: String,
    /// Values of `METRIC_LABEL_COLUMNS`, in that order.
    pub labels: [Option<String>; 14],
    pub le: Option<f64>,
    pub value: i128,
    pub seconds: Option<f64>,
}

/// Runs `queries/metrics.sql` over the scope already prepared (every
/// stored workflow).
pub(super) fn metric_rows(conn: &Connection) -> Result<Vec<MetricRow>, StoreError> {
    let began = std::time::Instant::now();
    let mut stmt = conn.prepare(METRICS_SQL)?;
    let rows = stmt
        .query_map([], |r| {
            let mut labels: [Option<String>; 14] = Default::default();
            for (slot, column) in labels.iter_mut().zip(METRIC_LABEL_COLUMNS) {
                *slot = r.get(column)?;
            }
            Ok(MetricRow {
                family: r.get("family")?,
                labels,
                le: r.get("le")?,
                value: r.get("value")?,
                seconds: r.get("seconds")?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    tracing::debug!(
        query = "metrics.sql",
        rows = rows.len(),
        elapsed_ms = began.elapsed().as_millis() as u64
    );
    Ok(rows)
}

fn rows<T: FromRow, P: duckdb::Params>(
    conn: &Connection,
    wanted: &[Query],
    query: Query,
    params: P,
) -> Result<Vec<T>, StoreError> {
    if !wanted.contains(&query) {
        return Ok(Vec::new());
    }
    let began = std::time::Instant::now();
    let mut stmt = conn.prepare(query.sql())?;
    let mapped = stmt.query_map(params, T::from_row)?;
    let rows = mapped.collect::<Result<Vec<_>, _>>()?;
    tracing::debug!(
        query = query.file_name(),
        rows = rows.len(),
        elapsed_ms = began.elapsed().as_millis() as u64
    );
    Ok(rows)
}

const WORKFLOW_SQL: &str = include_str!("../../queries/workflow.sql");

row_struct! {
    /// One attempt of a workflow as `queries/workflow.sql` gives it.
    #[derive(Debug, Clone, PartialEq)]
    pub struct WorkflowAttemptRow {
        pub seq: i64,
        pub attempt_id: String,
        pub started_at: DateTime<Utc> => |r: &Row, _| micros_at(r, "started_us"),
        pub layer: Layer => spelled,
        pub provider: String,
        pub model: String,
        pub route_group: Option<String>,
        pub effective_route: String,
        pub served_provider: String,
        pub served_model: String,
        pub status: String,
        pub http_status: Option<i32>,
        pub error_class: Option<ErrorClass> => spelled_if_any,
        pub error_code: Option<String>,
        pub duration_ms: Option<f64>,
        pub ttft_ms: Option<f64>,
        pub retry_after_ms: Option<f64>,
        pub decision: Option<String>,
        pub commit_state: String,
        pub visible_output: Option<bool>,
        pub circuit: Option<String>,
        pub wait_ms: Option<f64>,
        pub delivered: bool,
        pub input_tokens: Option<i64>,
        pub output_tokens: Option<i64>,
        pub cached_input_tokens: Option<i64>,
        pub cache_write_input_tokens: Option<i64>,
        pub cost_kind: String,
        /// `None`: unknown (no usage reported, or no price for the served model).
        pub cost_pusd: Option<i128>,
        pub workflow_name: Option<String>,
        pub outcome: Outcome => spelled,
        pub primary_provider: Option<String>,
        pub primary_model: Option<String>,
        pub primary_route_group: Option<String>,
        pub fallback_reason: Option<String>,
    }
}

/// A BIGINT column of epoch microseconds as UTC.
fn micros_at(row: &Row, column: &str) -> duckdb::Result<DateTime<Utc>> {
    Ok(DateTime::from_timestamp_micros(row.get(column)?).unwrap_or_default())
}

/// `workflow.sql` over the workflow `facts.sql` has just derived on this
/// connection (`Store::workflow_attempts`).
pub(super) fn workflow_rows(conn: &Connection) -> Result<Vec<WorkflowAttemptRow>, StoreError> {
    let mut statement = conn.prepare(WORKFLOW_SQL)?;
    let rows = statement.query_map([], WorkflowAttemptRow::from_row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

const WORKFLOW_CIRCUITS_SQL: &str = include_str!("../../queries/workflow_circuits.sql");

row_struct! {
    /// A breaker interval one workflow met (`queries/workflow_circuits.sql`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct WorkflowCircuitRow {
        pub provider: Option<String>,
        pub model: Option<String>,
        pub route_group: Option<String>,
        pub workflow_name: Option<String>,
        pub state: String,
        pub from: DateTime<Utc> => |r: &Row, _| micros_at(r, "from_us"),
        pub until: Option<DateTime<Utc>> => |r: &Row, _| {
            Ok::<_, duckdb::Error>(r.get::<_, Option<i64>>("until_us")?.and_then(DateTime::from_timestamp_micros))
        },
        pub attempts: i64,
    }
}

/// `workflow_circuits.sql` over the workflow `facts.sql` has just derived.
pub(super) fn workflow_circuit_rows(conn: &Connection) -> Result<Vec<WorkflowCircuitRow>, StoreError> {
    conn.execute_batch(CIRCUIT_TIMELINE_SQL)?;
    let mut statement = conn.prepare(WORKFLOW_CIRCUITS_SQL)?;
    let rows = statement.query_map([], WorkflowCircuitRow::from_row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

const TIMESERIES_SQL: &str = include_str!("../../queries/timeseries.sql");

/// One row of `queries/timeseries.sql`.
#[derive(Debug, Clone, PartialEq)]
pub enum SeriesRow {
    Outcome {
        bucket: DateTime<Utc>,
        outcome: Outcome,
        workflows: i64,
    },
    Spend {
        bucket: DateTime<Utc>,
        provider: String,
        served_provider: String,
        served_model: String,
        layer: Layer,
        attempts: i64,
        wasted_attempts: i64,
        cost_pusd: i128,
        wasted_cost_pusd: i128,
        wasted_tokens: i128,
        unknown_cost_attempts: i64,
    },
    /// By the minute each attempt started.
    Retry {
        bucket: DateTime<Utc>,
        first_attempts: i64,
        retries: i64,
    },
    Latency {
        bucket: DateTime<Utc>,
        metric: String,
        /// Upper bound in seconds; `None` above the last bound.
        le: Option<f64>,
        observations: i64,
    },
    /// The lowest headroom a response stated, by the minute each attempt
    /// started.
    Headroom {
        bucket: DateTime<Utc>,
        served_provider: String,
        served_model: String,
        min_ratio: f64,
    },
    /// 429s by the limit they hit, by the minute each started.
    RateLimit {
        bucket: DateTime<Utc>,
        kind: String,
        attempts: i64,
    },
}

pub(super) fn series_rows(conn: &Connection, range: &SeriesRange) -> Result<Vec<SeriesRow>, StoreError> {
    super::derived::set_time_variable(conn, "ts_from", Some(range.from))?;
    super::derived::set_time_variable(conn, "ts_until", Some(range.until))?;
    conn.execute_batch(&format!("SET VARIABLE ts_step = to_minutes({}::BIGINT);", range.step_minutes))?;
    // Through a table: a prepared statement cannot bind SET VARIABLE.
    conn.execute_batch("CREATE OR REPLACE TEMP TABLE ts_filter (workflow VARCHAR, route VARCHAR);")?;
    conn.execute("INSERT INTO temp.ts_filter VALUES (?, ?)", params![range.workflow, range.route])?;
    conn.execute_batch(
        "SET VARIABLE ts_workflow = (SELECT workflow FROM temp.ts_filter);
         SET VARIABLE ts_route = (SELECT route FROM temp.ts_filter);",
    )?;
    let mut statement = conn.prepare(TIMESERIES_SQL)?;
    let rows = statement
        .query_map([], |r| {
            let bucket = DateTime::from_timestamp_micros(r.get("bucket_us")?).unwrap_or_default();
            let kind: String = r.get("kind")?;
            Ok(match kind.as_str() {
                "outcome" => {
                    SeriesRow::Outcome { bucket, outcome: spelled(r, "key")?, workflows: r.get("workflows")? }
                }
                "spend" => SeriesRow::Spend {
                    bucket,
                    provider: r.get("provider")?,
                    served_provider: r.get("key")?,
                    served_model: r.get("served_model")?,
                    layer: spelled(r, "layer")?,
                    attempts: r.get("attempts")?,
                    wasted_attempts: r.get("wasted_attempts")?,
                    cost_pusd: r.get("cost_pusd")?,
                    wasted_cost_pusd: r.get("wasted_cost_pusd")?,
                    wasted_tokens: r.get("wasted_tokens")?,
                    unknown_cost_attempts: r.get("unknown_cost_attempts")?,
                },
                "retry" => SeriesRow::Retry {
                    bucket,
                    first_attempts: r.get("first_attempts")?,
                    retries: r.get("retries")?,
                },
                "headroom" => SeriesRow::Headroom {
                    bucket,
                    served_provider: r.get("key")?,
                    served_model: r.get("served_model")?,
                    min_ratio: r.get("min_ratio")?,
                },
                "rate_limit" => {
                    SeriesRow::RateLimit { bucket, kind: r.get("key")?, attempts: r.get("attempts")? }
                }
                _ => SeriesRow::Latency {
                    bucket,
                    metric: r.get("key")?,
                    le: r.get("le")?,
                    observations: r.get("observations")?,
                },
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

const AUDIT_SQL: &str = include_str!("../../queries/audit.sql");

row_struct! {
    /// One row of `queries/audit.sql`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct AuditRow {
        pub finding: FindingKind => spelled,
        /// `None` for the retry budget, which counts minutes.
        pub workflows: Option<i64>,
        /// The retry budget's (workflow name, minute) pairs over it.
        pub minutes: Option<i64>,
        /// Stacked retries: every attempt of their workflows.
        pub workflow_attempts: Option<i64>,
        pub attempts: i64,
        pub input_tokens: i128,
        pub output_tokens: i128,
        pub cost_pusd: i128,
        pub unknown_cost_attempts: i64,
        /// Attempts by the error class or commit state behind them.
        pub by_class: Vec<(String, i64)> => |r: &Row, _| Ok::<_, duckdb::Error>(
            texts(r, "classes")?.into_iter().zip(counts(r, "class_attempts")?).collect()
        ),
        pub examples: Vec<String> => texts,
    }
}

/// Reads `temp.prices` (the caller loads them: `load_prices`).
pub(super) fn audit_rows(
    conn: &Connection,
    filter: &AuditFilter,
    prices: &PriceTable,
) -> Result<Vec<AuditRow>, StoreError> {
    conn.execute_batch(&format!(
        "SET VARIABLE audit_examples = {}::BIGINT;
         CREATE OR REPLACE TEMP TABLE audit_policy (
             workflow_name VARCHAR, retryable VARCHAR, fail_closed_on VARCHAR, fail_closed_on_commit VARCHAR,
             approved_fallbacks VARCHAR, max_total_attempts BIGINT, max_elapsed_ms DOUBLE,
             max_extra_cost_pusd VARCHAR, queue_allowed BOOLEAN, retry_budget DOUBLE, retry_budget_floor BIGINT,
             max_retries_sdk BIGINT, max_retries_gateway BIGINT, max_retries_app BIGINT, max_retries_queue BIGINT,
             max_route_attempts BIGINT, fallback BOOLEAN, fallback_on VARCHAR, pinned BOOLEAN,
             no_costlier_fallback BOOLEAN);",
        filter.examples
    ))?;
    // Every value bound, lists joined by a character the policy file may
    // not hold (policy::LIST_SEPARATOR).
    let joined = |items: Vec<&str>| items.join(&attempt_core::policy::LIST_SEPARATOR.to_string());
    let count = |n: Option<u64>| n.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    let named = filter.policy.workflows.iter().map(|(name, policy)| (Some(name.as_str()), policy));
    for (name, policy) in std::iter::once((None, &filter.policy.default)).chain(named) {
        conn.execute(
            "INSERT INTO temp.audit_policy VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            params![
                name,
                joined(policy.retryable.iter().map(|c| <&'static str>::from(*c)).collect()),
                joined(policy.fail_closed_on.iter().map(|c| <&'static str>::from(*c)).collect()),
                joined(policy.fail_closed_on_commit.iter().map(|c| <&'static str>::from(*c)).collect()),
                policy
                    .approved_fallbacks
                    .as_ref()
                    .map(|routes| joined(routes.iter().map(String::as_str).collect())),
                policy.max_total_attempts.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
                policy.max_elapsed_ms,
                policy.max_extra_cost_pusd.map(|p| p.to_string()),
                policy.queue_allowed,
                policy.retry_budget,
                i64::try_from(policy.retry_budget_floor).unwrap_or(i64::MAX),
                count(policy.max_retries[0]),
                count(policy.max_retries[1]),
                count(policy.max_retries[2]),
                count(policy.max_retries[3]),
                count(policy.max_route_attempts),
                policy.fallback,
                policy
                    .fallback_on
                    .as_ref()
                    .map(|classes| joined(classes.iter().map(|c| <&'static str>::from(*c)).collect())),
                policy.pinned,
                policy.no_costlier_fallback,
            ],
        )?;
    }
    // The rollups sum the workflow names past the first K under 'other':
    // a policy for one of those reads every workflow from its own rows.
    split_window(
        conn,
        filter.window.since,
        filter.window.until,
        filter.window.workflow.as_deref(),
        "(SELECT count(*) FROM label_values WHERE label = 'workflow') >= getvariable('label_limit')
         AND EXISTS (SELECT 1 FROM temp.audit_policy p
                     WHERE p.workflow_name = 'other'
                        OR p.workflow_name NOT IN (SELECT value FROM label_values WHERE label = 'workflow'))",
    )?;
    sum_edges(
        conn,
        super::derived::FINDING_ROLLUPS_SQL,
        &[("r_findings", "rollup_findings"), ("r_finding_sets", "rollup_finding_sets")],
    )?;
    let policies =
        std::iter::once(&filter.policy.default).chain(filter.policy.workflows.iter().map(|(_, p)| p));
    if policies.into_iter().any(|p| p.no_costlier_fallback) {
        // The first attempt's served model at each fallback attempt's key:
        // what costlier_fallback compares.
        super::prices::price_keys(
            conn,
            prices,
            "SELECT DISTINCT f.served_provider, f.served_model, s.price_key
             FROM workflow_steps s JOIN workflow_steps f ON f.workflow_id = s.workflow_id AND f.seq = 1
             WHERE s.effective_route = 'fallback' AND in_window(s.first_at, s.workflow_name)",
        )?;
    }
    conn.execute_batch(AUDIT_SQL)?;
    let mut statement = conn.prepare("SELECT * FROM temp.audit_findings ORDER BY finding")?;
    let rows = statement.query_map([], AuditRow::from_row)?.collect::<Result<Vec<_>, _>>()?;
    drop(statement);
    conn.execute_batch(AUDIT_SCRATCH_DROP)?;
    Ok(rows)
}

/// What `audit.sql` and the window's rollups leave behind; the budget rows
/// can be large.
const AUDIT_SCRATCH_DROP: &str = "DROP TABLE temp.audit_rules; DROP TABLE temp.audit_named;
     DROP TABLE temp.audit_sets; DROP TABLE temp.audit_attempts; DROP TABLE temp.audit_retry_minutes;
     DROP TABLE temp.audit_budget_rows; DROP TABLE temp.audit_budget_classes; DROP TABLE temp.audit_step_rows;
     DROP TABLE temp.audit_budget_workflows; DROP TABLE temp.audit_cutoffs; DROP TABLE temp.audit_examples;
     DROP TABLE temp.audit_findings; DROP TABLE temp.r_findings; DROP TABLE temp.r_finding_sets;
     DROP VIEW temp.audit_steps;";
