//! The rows `tune` reads: the curve (`queries/tune_curve.sql`) and, for a
//! replay, every step of the window's retried workflows
//! (`queries/tune_steps.sql`) as `attempt_core::replay` takes them.

use std::collections::HashMap;

use duckdb::Connection;
use duckdb::arrow::array::{
    Array, BooleanArray, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    UInt64Array,
};
use strum::VariantNames;

use super::StoreError;
use super::columns::{FromRow, row_struct};
use crate::model::{Decision, ErrorClass, Layer, Outcome};
use crate::policy::CommitMarker;
use crate::replay::{Step, Workflow};

const CURVE_SQL: &str = include_str!("../../queries/tune_curve.sql");
const STEPS_SQL: &str = include_str!("../../queries/tune_steps.sql");
const IN_STORED_ORDER: &str = "SELECT * EXCLUDE (sort_id) FROM temp.tune_step_rows";

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
    conn.execute_batch(super::derived::STEP_ROLLUPS_SQL)?;
    conn.execute_batch(CURVE_SQL)?;
    let mut stmt = conn.prepare(
        "SELECT * FROM temp.tune_curve
         ORDER BY step DESC, position, layer <> 'all', after_class <> 'all', primary_route <> 'all',
                  layer, after_class, primary_route",
    )?;
    let rows = stmt.query_map([], CurveRow::from_row)?.collect::<Result<Vec<_>, _>>()?;
    conn.execute_batch("DROP TABLE temp.tune_curve; DROP TABLE temp.r_steps;")?;
    tracing::debug!(
        query = "tune_curve.sql",
        rows = rows.len(),
        elapsed_ms = began.elapsed().as_millis() as u64
    );
    Ok(rows)
}

pub(super) fn replay_rows(conn: &Connection, with_budget: bool) -> Result<ReplayRows, StoreError> {
    let began = std::time::Instant::now();
    prepare_steps(conn)?;
    // In stored order first; a file whose steps were appended before they
    // were kept by workflow is read sorted.
    let workflows = match read_steps(conn, IN_STORED_ORDER)? {
        Some(workflows) => workflows,
        None => {
            tracing::debug!("steps not stored by workflow: read sorted");
            read_steps(conn, &format!("{IN_STORED_ORDER} ORDER BY sort_id, seq"))?.ok_or(
                StoreError::Malformed {
                    file: "tune_steps.sql",
                    what: "a workflow's steps not together when sorted",
                },
            )?
        }
    };
    let mut out = ReplayRows { workflows, ..ReplayRows::default() };
    out.routes = conn
        .prepare("SELECT route_key FROM temp.tune_routes ORDER BY route")?
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    conn.execute_batch("DROP VIEW temp.tune_step_rows; DROP TABLE temp.tune_routes;")?;
    let steps_read = began.elapsed();
    let mut stmt = conn.prepare(
        "SELECT outcome_ms FROM workflow_facts WHERE in_window(first_at, workflow_name) AND attempts = 1",
    )?;
    for batch in stmt.query_arrow([])? {
        let column = batch
            .column(0)
            .as_any()
            .downcast_ref::<Float64Array>()
            .ok_or(StoreError::Malformed { file: "tune.rs", what: "outcome_ms not a DOUBLE" })?;
        out.single_outcome_ms.extend(column.iter().flatten());
    }
    drop(stmt);
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
        steps_ms = steps_read.as_millis() as u64,
        elapsed_ms = began.elapsed().as_millis() as u64
    );
    Ok(out)
}

/// Builds `tune_steps.sql`'s route table and view, enums as places in
/// lists of their names.
fn prepare_steps(conn: &Connection) -> Result<(), StoreError> {
    let list = |names: &[&str]| {
        let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
        format!("[{}]::VARCHAR[]", quoted.join(", "))
    };
    conn.execute_batch(&format!(
        "SET VARIABLE tune_layers = {}; SET VARIABLE tune_classes = {}; SET VARIABLE tune_decisions = {};
         SET VARIABLE tune_markers = {}; SET VARIABLE tune_outcomes = {};",
        list(Layer::VARIANTS),
        list(ErrorClass::VARIANTS),
        list(Decision::VARIANTS),
        list(CommitMarker::VARIANTS),
        list(Outcome::VARIANTS),
    ))?;
    Ok(conn.execute_batch(STEPS_SQL)?)
}

/// The workflows of `sql`'s rows (`temp.tune_step_rows`' columns), or
/// `None` when a workflow's rows do not come together and in order.
fn read_steps(conn: &Connection, sql: &str) -> Result<Option<Vec<Workflow>>, StoreError> {
    let (outcomes, layers, classes, decisions, markers) = (
        values::<Outcome>(Outcome::VARIANTS),
        values::<Layer>(Layer::VARIANTS),
        values::<ErrorClass>(ErrorClass::VARIANTS),
        values::<Decision>(Decision::VARIANTS),
        values::<CommitMarker>(CommitMarker::VARIANTS),
    );
    let mut workflows: Vec<Workflow> = Vec::new();
    // The workflow being read: its key and the seq its next row must have.
    // A row of another workflow, or out of order, breaks it (a workflow's
    // rows apart would show as a row that is not its workflow's next).
    let mut current: Option<(u64, i64)> = None;
    let mut stmt = conn.prepare(sql)?;
    // Column by column (Arrow): row by row, reading the values cost four
    // times the query. Streamed: the rows are not held twice.
    for batch in stmt.stream_arrow([])? {
        let batch = batch?;
        let columns = StepColumns::of(&batch)?;
        for i in 0..batch.num_rows() {
            let (key, seq) = (columns.workflow_key.value(i), columns.seq.value(i));
            if seq == 1 {
                let outcome = nth(&outcomes, columns.outcome, i).ok_or(StoreError::Malformed {
                    file: "tune_steps.sql",
                    what: "an outcome not in the list",
                })?;
                workflows.push(Workflow {
                    id: columns.workflow_id.value(i).to_string(),
                    name: columns
                        .workflow_name
                        .is_valid(i)
                        .then(|| columns.workflow_name.value(i).to_string()),
                    outcome,
                    outcome_ms: columns.outcome_ms.value(i),
                    steps: Vec::with_capacity(columns.attempts.value(i).try_into().unwrap_or(0)),
                });
            } else if current != Some((key, seq)) {
                return Ok(None);
            }
            current = Some((key, seq + 1));
            let step = Step {
                start_us: columns.start_us.value(i),
                offset_ms: columns.offset_ms.value(i),
                duration_ms: columns.duration_ms.value(i),
                layer: nth(&layers, columns.layer, i).unwrap_or_default(),
                route: columns.route.value(i) as u32,
                on_fallback: columns.on_fallback.value(i),
                failure: nth(&classes, columns.failure, i),
                deliverable: columns.deliverable.value(i),
                decision: nth(&decisions, columns.decision, i),
                commit: nth(&markers, columns.commit, i),
                tokens: i128::from(columns.tokens.value(i)),
                cost_pusd: columns.cost_pusd.value(i),
                cost_unknown: columns.cost_unknown.value(i),
            };
            if let Some(workflow) = workflows.last_mut() {
                workflow.steps.push(step);
            }
        }
    }
    Ok(Some(workflows))
}

/// The columns of one batch of `tune_steps.sql`, typed.
struct StepColumns<'a> {
    workflow_key: &'a UInt64Array,
    seq: &'a Int64Array,
    workflow_id: &'a StringArray,
    workflow_name: &'a StringArray,
    outcome: &'a Int32Array,
    outcome_ms: &'a Float64Array,
    attempts: &'a Int64Array,
    start_us: &'a Int64Array,
    offset_ms: &'a Float64Array,
    duration_ms: &'a Float64Array,
    deliverable: &'a BooleanArray,
    layer: &'a Int32Array,
    failure: &'a Int32Array,
    decision: &'a Int32Array,
    commit: &'a Int32Array,
    route: &'a Int32Array,
    on_fallback: &'a BooleanArray,
    tokens: &'a Int64Array,
    cost_pusd: &'a Decimal128Array,
    cost_unknown: &'a BooleanArray,
}

impl<'a> StepColumns<'a> {
    fn of(batch: &'a RecordBatch) -> Result<StepColumns<'a>, StoreError> {
        fn column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> Result<&'a T, StoreError> {
            batch
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<T>())
                .ok_or(StoreError::Malformed { file: "tune_steps.sql", what: "a column of another type" })
        }
        Ok(StepColumns {
            workflow_key: column(batch, "workflow_key")?,
            seq: column(batch, "seq")?,
            workflow_id: column(batch, "workflow_id")?,
            workflow_name: column(batch, "workflow_name")?,
            outcome: column(batch, "outcome")?,
            outcome_ms: column(batch, "outcome_ms")?,
            attempts: column(batch, "attempts")?,
            start_us: column(batch, "start_us")?,
            offset_ms: column(batch, "offset_ms")?,
            duration_ms: column(batch, "duration_ms")?,
            deliverable: column(batch, "deliverable")?,
            layer: column(batch, "layer")?,
            failure: column(batch, "failure")?,
            decision: column(batch, "decision")?,
            commit: column(batch, "commit")?,
            route: column(batch, "route")?,
            on_fallback: column(batch, "on_fallback")?,
            tokens: column(batch, "tokens")?,
            cost_pusd: column(batch, "cost_pusd")?,
            cost_unknown: column(batch, "cost_unknown")?,
        })
    }
}

/// An enum's values in the order of the list of its names the query was
/// given: a place read is an index, not a parse.
fn values<T: std::str::FromStr>(names: &[&str]) -> Vec<T> {
    names.iter().filter_map(|n| n.parse().ok()).collect()
}

/// The value at `places[i]`.
fn nth<T: Copy>(values: &[T], places: &Int32Array, i: usize) -> Option<T> {
    if !places.is_valid(i) {
        return None;
    }
    values.get(usize::try_from(places.value(i)).ok()?).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pricing::PriceTable;
    use crate::request::ReportFilter;
    use crate::simulate::{Scenario, SimOptions, default_start, simulate_with_truth};
    use crate::store::Store;

    fn steps_of(store: &Store) -> ReplayRows {
        let prices = PriceTable::load(None).unwrap();
        store.tune_rows(&ReportFilter::default(), &prices, Some(false)).unwrap().2.unwrap()
    }

    /// Writes keep each workflow's steps together, so a replay reads them
    /// without a sort; steps stored in another order (a file written
    /// before) are read sorted, to the same workflows.
    #[test]
    fn steps_are_stored_by_workflow_and_read_alike_in_any_stored_order() {
        let options = SimOptions {
            scenario: Scenario::RateLimitFallback,
            workflows: Some(300),
            seed: 3,
            start: default_start(),
            span: None,
        };
        let mut out = Vec::new();
        simulate_with_truth(&options, &mut out).unwrap();
        let store = Store::open_in_memory().unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for chunk in lines.chunks(97) {
            store.write_batch(&crate::ingest::jsonl::decode_lines(&chunk.join("\n"), 1).attempts).unwrap();
        }
        let stored = steps_of(&store);
        assert!(stored.workflows.len() > 50, "{}", stored.workflows.len());

        let prices = PriceTable::load(None).unwrap();
        let in_order = |store: &Store| {
            store.conn.execute_batch("BEGIN TRANSACTION").unwrap();
            super::super::queries::prepare_scope(&store.conn, &ReportFilter::default(), &prices).unwrap();
            prepare_steps(&store.conn).unwrap();
            let read = read_steps(&store.conn, IN_STORED_ORDER).unwrap();
            store.conn.execute_batch("ROLLBACK").unwrap();
            read.is_some()
        };
        assert!(in_order(&store), "the writes kept each workflow's steps together");
        store
            .conn
            .execute_batch(
                "CREATE TEMP TABLE shuffled AS SELECT * FROM workflow_steps;
                 DELETE FROM workflow_steps;
                 INSERT INTO workflow_steps SELECT * FROM temp.shuffled ORDER BY hash(workflow_id, seq);",
            )
            .unwrap();
        assert!(!in_order(&store), "the steps are apart now");
        let sorted = steps_of(&store);
        assert_eq!(sorted.workflows, stored.workflows);
        assert_eq!(sorted.routes, stored.routes);
    }
}
