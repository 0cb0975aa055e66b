//! The report's lists of client strings, bounded: past a documented number
//! of rows, the rest of a list is summed into `other` rows, so an answer's
//! size does not grow with the names clients send while every total stays
//! exact (the `other` rows hold exactly what they fold, summed in the
//! rows' integer units before any is shaped). The label fold that the
//! rollups apply (`ATTEMPT_LEDGER_LABEL_LIMIT`) already bounds each name to
//! 1,000 values; this bounds the lists the report prints of them, and of
//! their combinations (a route is a provider and a model).
//!
//! Alert rules read the unfolded rows (`Report::from_unfolded_rows`): a
//! rule may name a route that is not among the listed ones.

use crate::store::queries::{
    ErrorClassRow, FallbackRow, GroupRow, HeadroomRow, OutcomeCounts, OutcomeRow, RateLimitRow, ReportRows,
    RouteRow, ServedErrorRow,
};
use attempt_core::request::RouteKey;

/// What a folded name reads.
pub const OTHER: &str = "other";
/// Workflow names listed in `by_workflow`, by workflows.
pub const WORKFLOWS: usize = 100;
/// Rows of `error_classes` (class and requested provider), by attempts;
/// the rest summed per class under provider `other`.
pub const ERROR_CLASS_ROWS: usize = 100;
/// Primary routes listed, by workflows.
pub const ROUTES: usize = 50;
/// Fallback activations (primary route, fallback route, reason) listed, by
/// workflows; the rest summed per reason with both routes `other`.
pub const FALLBACKS: usize = 50;
/// Values of a `--group-by` dimension listed, by workflows.
pub const GROUP_VALUES: usize = 100;
/// Rows of `rate_limits` (served route and limit kind), by attempts; the
/// rest summed per kind under served provider and model `other`.
pub const RATE_LIMIT_ROWS: usize = 100;
/// Rows of `headroom` (served route, account and kind), lowest headroom
/// first; the rest per kind under `other`, with the lowest share, the
/// counts and the earliest times of what they fold (no last value: theirs
/// are of different limits).
pub const HEADROOM_ROWS: usize = 100;
/// Rows of `error_rates` (served route and class), by failed attempts; the
/// rest summed per class under served provider and model `other` (a route
/// has one row per class, so the folded routes' attempts add up too).
pub const ERROR_RATE_ROWS: usize = 100;

/// Breaker intervals listed: the latest; a flapping breaker's older
/// intervals are counted in `circuits_omitted`.
pub const CIRCUIT_ROWS: usize = 200;

/// Latency rows listed (route, status and metric), most observed first; a
/// percentile of several routes' buckets is not theirs, so the rest are
/// left out rather than merged.
pub const LATENCY_ROWS: usize = 200;

/// `rows` with every list folded to its bound.
pub fn fold_lists(rows: &ReportRows) -> ReportRows {
    let mut rows = rows.clone();
    let over = rows.circuits.len().saturating_sub(CIRCUIT_ROWS);
    rows.circuits.drain(..over);
    rows.circuits_omitted += over as u64;
    rows.latency.truncate(LATENCY_ROWS);
    let (totals, mut by_name): (Vec<OutcomeRow>, Vec<OutcomeRow>) =
        std::mem::take(&mut rows.outcomes).into_iter().partition(|r| r.is_total);
    fold(
        &mut by_name,
        WORKFLOWS,
        |r| r.workflow_name.clone(),
        |r| OutcomeRow { workflow_name: Some(OTHER.into()), ..r.clone() },
        |into, r| {
            add_counts(&mut into.counts, &r.counts);
            sum!(into, r; attempts, wasted_attempts, cost_pusd, wasted_cost_pusd);
        },
    );
    rows.outcomes = totals.into_iter().chain(by_name).collect();
    fold(
        &mut rows.error_classes,
        ERROR_CLASS_ROWS,
        |r| (r.error_class, r.limit_kind.clone(), r.provider.clone()),
        |r| ErrorClassRow { provider: OTHER.into(), ..r.clone() },
        |into, r| {
            sum!(into, r; attempts, input_tokens, output_tokens, cost_pusd);
        },
    );
    fold(
        &mut rows.rate_limits,
        RATE_LIMIT_ROWS,
        |r| (r.served_provider.clone(), r.served_model.clone(), r.kind.clone()),
        |r| RateLimitRow { served_provider: OTHER.into(), served_model: OTHER.into(), ..r.clone() },
        |into, r| {
            sum!(into, r; attempts);
        },
    );
    fold(
        &mut rows.served_errors,
        ERROR_RATE_ROWS,
        |r| (r.served_provider.clone(), r.served_model.clone(), r.error_class),
        |r| ServedErrorRow { served_provider: OTHER.into(), served_model: OTHER.into(), ..r.clone() },
        |into, r| {
            sum!(into, r; failed, attempts);
        },
    );
    fold(
        &mut rows.headroom,
        HEADROOM_ROWS,
        |r| (r.served_provider.clone(), r.served_model.clone(), r.billing_account.clone(), r.kind.clone()),
        |r| HeadroomRow {
            served_provider: OTHER.into(),
            served_model: OTHER.into(),
            billing_account: None,
            remaining: None,
            limit: None,
            ..r.clone()
        },
        |into, r| {
            sum!(into, r; attempts_below_10pct, rate_limited);
            if r.min_ratio.is_some_and(|m| into.min_ratio.is_none_or(|i| m < i)) {
                into.min_ratio = r.min_ratio;
                into.min_at = r.min_at;
            }
            into.first_below_10pct_at = earliest(into.first_below_10pct_at, r.first_below_10pct_at);
            into.first_429_at = earliest(into.first_429_at, r.first_429_at);
        },
    );
    fold(
        &mut rows.routes,
        ROUTES,
        |r| r.primary.clone(),
        |r| RouteRow { primary: other_route(), ..r.clone() },
        |into, r| {
            sum!(into, r; workflows, terminal, primary_success, retry_recovery, fallback_recovery, degraded, fail_closed);
        },
    );
    fold(
        &mut rows.fallbacks,
        FALLBACKS,
        |r| (r.primary.clone(), r.fallback.clone(), r.reason),
        |r| FallbackRow { primary: other_route(), fallback: other_route(), ..r.clone() },
        |into, r| {
            sum!(into, r; workflows, recovered);
        },
    );
    if let Some(groups) = &mut rows.groups {
        fold(
            &mut groups.rows,
            GROUP_VALUES,
            |r| r.value.clone(),
            |r| GroupRow { value: Some(OTHER.into()), ..r.clone() },
            |into, r| {
                add_counts(&mut into.counts, &r.counts);
                sum!(into, r; attempts, wasted_attempts, cost_pusd, wasted_cost_pusd, unknown_cost_attempts);
            },
        );
    }
    rows
}

fn earliest<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn other_route() -> RouteKey {
    RouteKey { route_group: None, provider: Some(OTHER.into()), model: Some(OTHER.into()) }
}

/// Adds each named field of `from` into `into`'s.
macro_rules! sum {
    ($into:expr, $from:expr; $($field:ident),+) => {
        $( $into.$field += $from.$field; )+
    };
}
use sum;

fn add_counts(into: &mut OutcomeCounts, c: &OutcomeCounts) {
    sum!(into, c; workflows, primary_success, retry_recovery, fallback_recovery, degraded, fail_closed, queued, in_flight);
}

/// Keeps the first `keep` of `rows` (the query's ranking) and adds each
/// other row into the `other` row `renamed` gives it: a kept row of that
/// key (a name the label fold already read `other`), else a new row at
/// the end.
fn fold<T, K: PartialEq>(
    rows: &mut Vec<T>,
    keep: usize,
    key: impl Fn(&T) -> K,
    renamed: impl Fn(&T) -> T,
    add: impl Fn(&mut T, &T),
) {
    if rows.len() <= keep {
        return;
    }
    let rest = rows.split_off(keep);
    for row in &rest {
        let other = renamed(row);
        let wanted = key(&other);
        match rows.iter_mut().find(|kept| key(kept) == wanted) {
            Some(into) => add(into, row),
            None => rows.push(other),
        }
    }
}
