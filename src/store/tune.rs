//! The rows `tune` reads: the curve (`queries/tune_curve.sql`) and, for a
//! replay, every step of the window's retried workflows
//! (`queries/tune_steps.sql`) as `attempt_core::replay` takes them.

use std::collections::HashMap;

use duckdb::Connection;

use super::StoreError;
use super::columns::{FromRow, row_struct, spelled_if_any};
use crate::model::{Decision, ErrorClass, Layer, Outcome};
use crate::policy::CommitMarker;
use crate::replay::{Step, Workflow};

const CURVE_SQL: &str = include_str!("../../queries/tune_curve.sql");
const STEPS_SQL: &str = include_str!("../../queries/tune_steps.sql");

row_struct! {
    /// One row of `queries/tune_curve.sql`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct CurveRow {
        pub step: String,
        pub position: Option<i64>,
        pub and_later: bool,
        pub layer: String,
        pub after_class: String,
        pub primary_route: String,
        pub undelivered_before: i64,
        pub delivered: i64,
        pub attempts: i64,
        pub tokens: i128,
        pub cost_pusd: i128,
        pub unknown_cost_attempts: i64,
        pub elapsed_ms: f64,
    }
}

/// What a replay reads, in one snapshot with the report it is compared to.
#[derive(Debug, Default)]
pub struct ReplayRows {
    /// The workflows with more than one attempt.
    pub workflows: Vec<Workflow>,
    /// Route keys, by `Step::route`.
    pub routes: Vec<String>,
    /// Time to outcome of each workflow in scope with one attempt.
    pub single_outcome_ms: Vec<f64>,
    /// First attempts by workflow name and epoch minute (the retry budget).
    pub first_attempts: HashMap<(Option<String>, i64), u64>,
}

pub(super) fn curve_rows(conn: &Connection) -> Result<Vec<CurveRow>, StoreError> {
    let began = std::time::Instant::now();
    conn.execute_batch(CURVE_SQL)?;
    let mut stmt = conn.prepare(
        "SELECT * FROM temp.tune_curve
         ORDER BY step DESC, position, layer <> 'all', after_class <> 'all', primary_route <> 'all',
                  layer, after_class, primary_route",
    )?;
    let rows = stmt.query_map([], CurveRow::from_row)?.collect::<Result<Vec<_>, _>>()?;
    conn.execute_batch("DROP TABLE temp.tune_curve;")?;
    tracing::debug!(
        query = "tune_curve.sql",
        rows = rows.len(),
        elapsed_ms = began.elapsed().as_millis() as u64
    );
    Ok(rows)
}

pub(super) fn replay_rows(conn: &Connection, with_budget: bool) -> Result<ReplayRows, StoreError> {
    let began = std::time::Instant::now();
    let mut out = ReplayRows::default();
    let mut route_ids: HashMap<String, u32> = HashMap::new();
    {
        let mut stmt = conn.prepare(STEPS_SQL)?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let id: String = row.get("workflow_id")?;
            if out.workflows.last().is_none_or(|w| w.id != id) {
                out.workflows.push(Workflow {
                    id,
                    name: row.get("workflow_name")?,
                    outcome: super::columns::spelled::<Outcome>(row, "outcome")?,
                    outcome_ms: row.get("outcome_ms")?,
                    steps: Vec::new(),
                });
            }
            let route: String = row.get("route_key")?;
            let next_id = route_ids.len() as u32;
            let route = *route_ids.entry(route).or_insert(next_id);
            let effective: String = row.get("effective_route")?;
            let step = Step {
                start_us: row.get("start_us")?,
                offset_ms: row.get("offset_ms")?,
                duration_ms: row.get("duration_ms")?,
                layer: super::columns::spelled::<Layer>(row, "layer")?,
                route,
                on_fallback: effective == "fallback",
                failure: spelled_if_any::<ErrorClass>(row, "error_class")?,
                deliverable: row.get("deliverable")?,
                decision: spelled_if_any::<Decision>(row, "decision")?,
                commit: spelled_if_any::<CommitMarker>(row, "commit_marker")?,
                tokens: row.get("tokens")?,
                cost_pusd: row.get("cost_pusd")?,
                cost_unknown: row.get("cost_unknown")?,
            };
            if let Some(workflow) = out.workflows.last_mut() {
                workflow.steps.push(step);
            }
        }
    }
    out.routes = vec![String::new(); route_ids.len()];
    for (route, id) in route_ids {
        out.routes[id as usize] = route;
    }
    out.single_outcome_ms = conn
        .prepare(
            "SELECT outcome_ms FROM workflow_facts
             WHERE in_window(first_at, workflow_name) AND attempts = 1",
        )?
        .query_map([], |r| r.get::<_, f64>(0))?
        .collect::<Result<_, _>>()?;
    if with_budget {
        let mut stmt = conn.prepare(
            "SELECT workflow_name, epoch_us(attempt_minute) // 60000000 AS minute, sum(attempts)::BIGINT AS first
             FROM workflow_spend
             WHERE in_window(first_at, workflow_name) AND NOT retry
             GROUP BY ALL",
        )?;
        let rows = stmt.query_map([], |r| Ok(((r.get(0)?, r.get(1)?), r.get::<_, i64>(2)? as u64)))?;
        for row in rows {
            let (key, first) = row?;
            out.first_attempts.insert(key, first);
        }
    }
    tracing::debug!(
        query = "tune_steps.sql",
        workflows = out.workflows.len(),
        elapsed_ms = began.elapsed().as_millis() as u64
    );
    Ok(out)
}
