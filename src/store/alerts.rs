//! Alert history: state changes written by the evaluator, read by
//! `attempt-ledger alerts` and `GET /api/v1/alerts`.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use duckdb::types::{TimeUnit, Value};
use duckdb::{Connection, Row, params};

use super::columns::timestamp;
use super::error::StoreError;
use attempt_core::alert_event::{AlertEvent, AlertState};

fn micros(t: DateTime<Utc>) -> Value {
    Value::Timestamp(TimeUnit::Microsecond, t.timestamp_micros())
}

pub(super) fn record(conn: &Connection, e: &AlertEvent) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO alert_events (changed_at, alert_key, rule, kind, severity, labels, state, active_since, value,
                                   threshold, summary, details)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        params![
            micros(e.at),
            e.key,
            e.rule,
            e.kind,
            e.severity,
            serde_json::to_string(&e.labels).unwrap_or_else(|_| "{}".into()),
            <&str>::from(e.state),
            micros(e.active_since),
            e.value,
            e.threshold,
            e.summary,
            e.details.to_string(),
        ],
    )?;
    Ok(())
}

const COLUMNS: &str = "changed_at, alert_key, rule, kind, severity, labels, state, active_since, value, threshold, summary, details";

fn event(r: &Row<'_>) -> duckdb::Result<AlertEvent> {
    let text = |i: usize| -> duckdb::Result<String> { r.get(i) };
    let bad = |i: usize, what: String| {
        duckdb::Error::FromSqlConversionFailure(i, duckdb::types::Type::Text, what.into())
    };
    let state = text(6)?;
    Ok(AlertEvent {
        at: timestamp(r.get(0)?)?,
        key: text(1)?,
        rule: text(2)?,
        kind: text(3)?,
        severity: text(4)?,
        labels: serde_json::from_str(&text(5)?).map_err(|e| bad(5, e.to_string()))?,
        state: AlertState::from_str(&state).map_err(|_| bad(6, format!("unknown alert state {state:?}")))?,
        active_since: timestamp(r.get(7)?)?,
        value: r.get(8)?,
        threshold: r.get(9)?,
        summary: text(10)?,
        details: serde_json::from_str(&text(11)?).map_err(|e| bad(11, e.to_string()))?,
    })
}

/// The newest `limit` events, newest first.
pub(super) fn history(conn: &Connection, limit: usize) -> Result<Vec<AlertEvent>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM alert_events ORDER BY changed_at DESC, alert_key LIMIT ?");
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params![limit as i64], event)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Alerts whose last recorded state is `firing`.
pub(super) fn open(conn: &Connection) -> Result<Vec<AlertEvent>, StoreError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM alert_events
         QUALIFY row_number() OVER (PARTITION BY alert_key ORDER BY changed_at DESC, state = 'firing') = 1
             AND state = 'firing'
         ORDER BY alert_key"
    );
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map([], event)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// First and last `started_at` of every stored attempt.
pub(super) fn attempt_bounds(conn: &Connection) -> Result<Option<super::TimeBounds>, StoreError> {
    let (first, last): (Value, Value) =
        conn.query_row("SELECT min(started_at), max(started_at) FROM attempts", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    match (first, last) {
        (Value::Null, _) | (_, Value::Null) => Ok(None),
        (first, last) => Ok(Some((timestamp(first)?, timestamp(last)?))),
    }
}
