//! The steps a replay takes one by one (`TuneScope::steps`): every attempt
//! of the retried workflows a limit of time, cost or retry budget reads, or
//! that a replay by shape sets apart (`queries/tune_steps.sql`).

use std::collections::HashMap;

use duckdb::Connection;
use duckdb::arrow::array::{
    Array, BooleanArray, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    UInt64Array,
};

use super::super::error::StoreError;
use super::scope::{Places, TuneScope, column, nth, set_enum_places};
use attempt_core::replay::{Step, Workflow};

const STEPS_SQL: &str = include_str!("../../../queries/tune_steps.sql");
const IN_STORED_ORDER: &str = "SELECT * EXCLUDE (sort_id) FROM temp.tune_step_rows";

impl TuneScope<'_> {
    /// Every step of the retried workflows in scope, workflow by workflow;
    /// with `apart`, only of those whose shape `set_plans` did not list
    /// (two shapes sharing a key, or a shape past `MAX_SHAPE_LENGTH`).
    pub fn steps(&self, with_budget: bool, apart: bool) -> Result<ReplayRows, StoreError> {
        replay_rows(self.conn, with_budget, apart)
    }
}

/// What a replay reads, in one snapshot with the report it is compared to.
#[derive(Debug, Default)]
pub struct ReplayRows {
    /// The workflows with more than one attempt.
    pub workflows: Vec<Workflow>,
    /// Route keys, by `Step::route`.
    pub routes: Vec<String>,
    /// Time to outcome of the workflows in scope with one attempt, each
    /// with how many took it (not read for the workflows apart from their
    /// shapes).
    pub single_outcome_ms: Vec<(f64, u64)>,
    /// First attempts by workflow name and epoch minute (the retry budget).
    pub first_attempts: HashMap<(Option<String>, i64), u64>,
}

fn replay_rows(conn: &Connection, with_budget: bool, apart: bool) -> Result<ReplayRows, StoreError> {
    let began = std::time::Instant::now();
    // A macro, not a condition on a flag: with nothing apart, no join may
    // interleave the workflows' rows.
    conn.execute_batch(if apart {
        "CREATE OR REPLACE TEMP MACRO tune_apart(key) AS key NOT IN (SELECT shape_key FROM temp.tune_plans);"
    } else {
        "CREATE OR REPLACE TEMP MACRO tune_apart(key) AS true;"
    })?;
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
    if !apart {
        out.single_outcome_ms = read_outcome_counts(
            conn,
            "SELECT outcome_ms, count(*)::UBIGINT AS workflows FROM workflow_facts
             WHERE in_window(first_at, workflow_name) AND attempts = 1 GROUP BY outcome_ms",
        )?;
    }
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

/// The (outcome_ms, workflows) rows of `sql`: times to outcome, counted.
fn read_outcome_counts(conn: &Connection, sql: &str) -> Result<Vec<(f64, u64)>, StoreError> {
    let mut out = Vec::new();
    let mut stmt = conn.prepare(sql)?;
    for batch in stmt.stream_arrow([])? {
        let batch = batch?;
        let outcome = column::<Float64Array>(&batch, "workflow_facts", "outcome_ms")?;
        let workflows = column::<UInt64Array>(&batch, "workflow_facts", "workflows")?;
        if outcome.null_count() > 0 {
            return Err(StoreError::Malformed {
                file: "workflow_facts",
                what: "a workflow with no outcome_ms",
            });
        }
        out.extend(outcome.values().iter().copied().zip(workflows.values().iter().copied()));
    }
    Ok(out)
}

/// Builds `tune_steps.sql`'s route table and view, enums as places in
/// lists of their names.
fn prepare_steps(conn: &Connection) -> Result<(), StoreError> {
    set_enum_places(conn)?;
    Ok(conn.execute_batch(STEPS_SQL)?)
}

/// The workflows of `sql`'s rows (`temp.tune_step_rows`' columns), or
/// `None` when a workflow's rows do not come together and in order.
fn read_steps(conn: &Connection, sql: &str) -> Result<Option<Vec<Workflow>>, StoreError> {
    let places = Places::new();
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
                let outcome = nth(&places.outcomes, columns.outcome, i).ok_or(StoreError::Malformed {
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
                layer: nth(&places.layers, columns.layer, i).unwrap_or_default(),
                route: columns.route.value(i) as u32,
                on_fallback: columns.on_fallback.value(i),
                failure: nth(&places.classes, columns.failure, i),
                deliverable: columns.deliverable.value(i),
                decision: nth(&places.decisions, columns.decision, i),
                commit: nth(&places.markers, columns.commit, i),
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
        const STEPS: &str = "tune_steps.sql";
        Ok(StepColumns {
            workflow_key: column(batch, STEPS, "workflow_key")?,
            seq: column(batch, STEPS, "seq")?,
            workflow_id: column(batch, STEPS, "workflow_id")?,
            workflow_name: column(batch, STEPS, "workflow_name")?,
            outcome: column(batch, STEPS, "outcome")?,
            outcome_ms: column(batch, STEPS, "outcome_ms")?,
            attempts: column(batch, STEPS, "attempts")?,
            start_us: column(batch, STEPS, "start_us")?,
            offset_ms: column(batch, STEPS, "offset_ms")?,
            duration_ms: column(batch, STEPS, "duration_ms")?,
            deliverable: column(batch, STEPS, "deliverable")?,
            layer: column(batch, STEPS, "layer")?,
            failure: column(batch, STEPS, "failure")?,
            decision: column(batch, STEPS, "decision")?,
            commit: column(batch, STEPS, "commit")?,
            route: column(batch, STEPS, "route")?,
            on_fallback: column(batch, STEPS, "on_fallback")?,
            tokens: column(batch, STEPS, "tokens")?,
            cost_pusd: column(batch, STEPS, "cost_pusd")?,
            cost_unknown: column(batch, STEPS, "cost_unknown")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::scope::Names;
    use super::*;
    use crate::simulate::Scenario;
    use crate::store::Store;
    use attempt_core::pricing::PriceTable;
    use attempt_core::request::ReportFilter;

    fn steps_of(store: &Store) -> ReplayRows {
        let prices = PriceTable::load(None).unwrap();
        store
            .tune_read(&ReportFilter::default(), &prices, Names::Every, |snapshot| {
                snapshot.steps(false, false)
            })
            .unwrap()
    }

    /// Writes keep each workflow's steps together, so a replay reads them
    /// without a sort; steps stored in another order (a file written
    /// before) are read sorted, to the same workflows.
    #[test]
    fn steps_are_stored_by_workflow_and_read_alike_in_any_stored_order() {
        let store = super::super::tests::simulated_store(Scenario::RateLimitFallback, 300, 3, 97);
        let stored = steps_of(&store);
        assert!(stored.workflows.len() > 50, "{}", stored.workflows.len());

        let prices = PriceTable::load(None).unwrap();
        let in_order = |store: &Store| {
            store.conn.execute_batch("BEGIN TRANSACTION").unwrap();
            super::super::queries::prepare_scope(&store.conn, &ReportFilter::default(), &prices).unwrap();
            store.conn.execute_batch("CREATE OR REPLACE TEMP MACRO tune_apart(key) AS true;").unwrap();
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
