//! A replay by shape's reads (`TuneScope`'s): the window's shapes
//! (`queries/tune_shapes.sql`), the plans decided for them, the sums of
//! what each plan keeps (`queries/tune_replay.sql`), the times to outcome
//! of the workflows left as recorded, counted by time
//! (`queries/tune_outcome_counts.sql`), and those of the workflows a plan
//! changes, one by one.

use std::collections::HashMap;
use std::sync::Arc;

use duckdb::Connection;
use duckdb::arrow::array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, ListArray, RecordBatch, UInt64Array,
};

use super::super::columns::{FromRow, row_struct};
use super::super::error::StoreError;
use super::scope::{Places, TuneScope, column, nth, scope_everything, set_enum_places};
use attempt_core::model::Outcome;
use attempt_core::replay::shape::MAX_SHAPE_LENGTH;
use attempt_core::replay::{Step, Workflow};

const SHAPES_SQL: &str = include_str!("../../../queries/tune_shapes.sql");
const REPLAY_SQL: &str = include_str!("../../../queries/tune_replay.sql");
const OUTCOME_COUNTS_SQL: &str = include_str!("../../../queries/tune_outcome_counts.sql");
const SHAPES_IN_STORED_ORDER: &str = "SELECT * FROM temp.tune_shape_rows";

impl TuneScope<'_> {
    /// The shapes of the retried workflows in scope.
    pub fn shapes(&self) -> Result<Shapes, StoreError> {
        shapes(self.conn)
    }

    /// The route keys of the shapes in scope, by (shape key, route number).
    pub fn shape_routes(&self) -> Result<HashMap<(u64, u32), String>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT DISTINCT shape_key, route, route_key FROM shape_steps
             WHERE shape_key IN (SELECT shape_key FROM temp.tune_shape_sums)",
        )?;
        let rows = stmt.query_map([], |r| Ok(((r.get::<_, u64>(0)?, r.get::<_, u32>(1)?), r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The workflows of each shape in scope, by workflow name (as the
    /// rollups keep it: whole when every name is told apart).
    pub fn shape_counts(&self) -> Result<Vec<ShapeCount>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT workflow_name, shape_key, sum(attempts)::BIGINT AS workflows FROM temp.tune_shape_sums
             WHERE seq = 1 GROUP BY ALL HAVING sum(attempts) <> 0 ORDER BY workflow_name NULLS FIRST, shape_key",
        )?;
        let rows = stmt.query_map([], ShapeCount::from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records what each (section, shape) replay decided, for the reads below.
    pub fn set_plans(&self, plans: &[PlanRow]) -> Result<(), StoreError> {
        set_plans(self.conn, plans)
    }

    /// The sums of the attempts of the shapes a plan changes, split by
    /// what the plan keeps (`queries/tune_replay.sql`).
    pub fn replay_sums(&self) -> Result<Vec<ReplaySum>, StoreError> {
        let began = std::time::Instant::now();
        let mut stmt = self.conn.prepare(REPLAY_SQL)?;
        let rows = stmt.query_map([], ReplaySum::from_row)?.collect::<Result<Vec<_>, _>>()?;
        tracing::debug!(
            query = "tune_replay.sql",
            rows = rows.len(),
            elapsed_ms = began.elapsed().as_millis() as u64
        );
        Ok(rows)
    }

    /// Calls `each` with every workflow in scope whose (section, shape)
    /// plan changes it: the plan's place in `set_plans`' rows, its recorded
    /// time to outcome and its attempts' offsets and durations in order.
    /// Returns how many it read.
    pub fn for_each_changed(
        &self,
        each: impl FnMut(ChangedWorkflow) -> Result<(), StoreError>,
    ) -> Result<u64, StoreError> {
        for_each_changed(self.conn, each)
    }

    /// The workflows in scope by what the plans do to them
    /// (`queries/tune_outcome_counts.sql`).
    pub fn outcome_counts(&self) -> Result<OutcomeCounts, StoreError> {
        outcome_counts(self.conn)
    }

    /// The `limit` lowest ids of the workflows whose (section, shape) plan
    /// loses their delivery.
    pub fn lost_examples(&self, limit: usize) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT workflow_id FROM workflow_times f
             WHERE in_window(first_at, workflow_name)
               AND shape_key IN (SELECT shape_key FROM temp.tune_plans WHERE lost)
               AND EXISTS (SELECT 1 FROM temp.tune_plans p
                           WHERE p.lost AND p.shape_key = f.shape_key AND p.section = tune_section(f.workflow_name))
             ORDER BY workflow_id LIMIT ?",
        )?;
        let ids = stmt.query_map([limit as i64], |r| r.get(0))?.collect::<Result<Vec<String>, _>>()?;
        Ok(ids)
    }
}

row_struct! {
    /// The workflows of one shape under one name.
    #[derive(Debug, Clone, PartialEq)]
    pub struct ShapeCount {
        pub workflow_name: Option<String>,
        pub shape_key: u64,
        pub workflows: i64,
    }
}

row_struct! {
    /// One row of `queries/tune_replay.sql`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct ReplaySum {
        pub section: i32,
        /// Places in `Outcome::VARIANTS`.
        pub recorded_outcome: i32,
        pub outcome: i32,
        pub moved: bool,
        pub first: bool,
        pub kept: bool,
        pub delivers: bool,
        pub delivered: bool,
        pub attempts: i64,
        pub tokens: i128,
        pub cost_pusd: i128,
        pub unknown_cost_attempts: i64,
    }
}

/// The shapes of the retried workflows in scope.
#[derive(Debug, Default)]
pub struct Shapes {
    /// Each shape as the replay reads a workflow (`name` `None`): its steps
    /// carry the decision inputs, `route` its route's number in the shape.
    pub shapes: Vec<Workflow>,
    /// Each shape's key, in `shapes`' order.
    pub keys: Vec<u64>,
    /// Keys whose workflows are replayed one by one (`TuneScope::steps`):
    /// two shapes share them, or they are longer than `MAX_SHAPE_LENGTH`.
    pub apart: Vec<u64>,
}

/// What a replay decided for the workflows of one (section, shape).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanRow {
    /// The policy's `[[workflow]]` section from 1, 0 for `[default]`.
    pub section: i32,
    pub shape_key: u64,
    /// An attempt removed or the outcome changed.
    pub changed: bool,
    /// Delivered as recorded, not in the replay.
    pub lost: bool,
    pub moved: bool,
    /// Kept positions: bit n-1 for position n.
    pub kept: u64,
    /// The position (from 0) that delivers, replayed and recorded.
    pub delivered: Option<i32>,
    pub recorded_delivered: Option<i32>,
    /// Places in `Outcome::VARIANTS`.
    pub recorded_outcome: i32,
    pub outcome: i32,
}

/// One workflow a plan changes, as `for_each_changed` reads it.
pub struct ChangedWorkflow<'a> {
    /// Its plan's place in the rows `set_plans` was given.
    pub plan: usize,
    pub outcome_ms: f64,
    pub offsets_ms: &'a [f64],
    pub durations_ms: &'a [f64],
}

/// The workflows in scope by what the plans do to them.
#[derive(Debug, Default)]
pub struct OutcomeCounts {
    /// Times to outcome of the workflows left as recorded (one attempt, or
    /// a plan that keeps every attempt and the outcome), each with how many
    /// workflows took it.
    pub unchanged_ms: Vec<(f64, u64)>,
    /// Workflows a plan changes (`for_each_changed` reads them).
    pub changed: u64,
    /// Workflows of a shape with no plan: set apart (`Shapes::apart`).
    pub undecided: u64,
}

/// The plans of a replay by shape (`PlanRow`).
const PLANS_TABLE: &str = "CREATE OR REPLACE TEMP TABLE tune_plans (
    plan INTEGER NOT NULL, section INTEGER NOT NULL, shape_key UBIGINT NOT NULL, changed BOOLEAN NOT NULL, lost BOOLEAN NOT NULL,
    moved BOOLEAN NOT NULL, kept UBIGINT NOT NULL, delivered INTEGER, recorded_delivered INTEGER,
    recorded_outcome INTEGER NOT NULL, outcome INTEGER NOT NULL);";

fn shapes(conn: &Connection) -> Result<Shapes, StoreError> {
    let began = std::time::Instant::now();
    // A window sums its own steps; with no time bound the totals answer,
    // and with no name either every stored shape is in scope: read in
    // stored order, without a join (a macro, not a condition on a flag).
    let everything = scope_everything(conn)?;
    let every_name: bool =
        conn.query_row("SELECT getvariable('scope_workflow') IS NULL", [], |r| r.get(0))?;
    if everything {
        conn.execute_batch("CREATE OR REPLACE TEMP TABLE r_shapes AS SELECT * FROM total_shapes LIMIT 0;")?;
    } else {
        conn.execute_batch(
            "CREATE OR REPLACE TEMP VIEW shape_steps_source AS
             SELECT 1::BIGINT AS sign, * FROM workflow_steps WHERE in_window(first_at, workflow_name);",
        )?;
        conn.execute_batch(super::super::shapes::SHAPE_ROLLUPS_SQL)?;
        conn.execute_batch("DROP VIEW temp.shape_steps_source;")?;
    }
    conn.execute_batch(if everything && every_name {
        "CREATE OR REPLACE TEMP MACRO tune_every_shape() AS true;"
    } else {
        "CREATE OR REPLACE TEMP MACRO tune_every_shape() AS false;"
    })?;
    set_enum_places(conn)?;
    conn.execute_batch(SHAPES_SQL)?;
    let summed = began.elapsed();
    let shapes = match read_shapes(conn, SHAPES_IN_STORED_ORDER)? {
        Some(shapes) => shapes,
        None => {
            tracing::debug!("shapes not stored together: read sorted");
            read_shapes(conn, &format!("{SHAPES_IN_STORED_ORDER} ORDER BY shape_key, seq"))?.ok_or(
                StoreError::Malformed { file: "tune_shapes.sql", what: "a shape's rows not together" },
            )?
        }
    };
    conn.execute_batch("DROP VIEW temp.tune_shape_rows;")?;
    tracing::debug!(
        query = "tune_shapes.sql",
        shapes = shapes.shapes.len(),
        apart = shapes.apart.len(),
        sums_ms = summed.as_millis() as u64,
        elapsed_ms = began.elapsed().as_millis() as u64
    );
    Ok(shapes)
}

/// The shapes of `sql`'s rows (`temp.tune_shape_rows`' columns), or `None`
/// when a key's rows do not come together.
fn read_shapes(conn: &Connection, sql: &str) -> Result<Option<Shapes>, StoreError> {
    let places = Places::new();
    let malformed = |what| StoreError::Malformed { file: "tune_shapes.sql", what };
    let mut out = Shapes::default();
    // The shape being read: its key, its length, and whether it is whole so
    // far (a second row at a position, or a wrong count, sets it apart).
    let mut current: Option<(u64, i64, bool)> = None;
    let finish = |out: &mut Shapes, current: Option<(u64, i64, bool)>| {
        if let Some((key, length, whole)) = current {
            let steps = out.shapes.last().map_or(0, |w| w.steps.len()) as i64;
            let fits = length as usize <= MAX_SHAPE_LENGTH;
            if !(whole && steps == length && fits) {
                out.shapes.pop();
                out.keys.pop();
                out.apart.push(key);
            }
        }
    };
    let mut seen_keys: std::collections::HashSet<u64> = std::collections::HashSet::new();
    let mut stmt = conn.prepare(sql)?;
    for batch in stmt.stream_arrow([])? {
        let batch = batch?;
        let key = column::<UInt64Array>(&batch, "tune_shapes.sql", "shape_key")?;
        let seq = column::<Int64Array>(&batch, "tune_shapes.sql", "seq")?;
        let length = column::<Int64Array>(&batch, "tune_shapes.sql", "length")?;
        let outcome = column::<Int32Array>(&batch, "tune_shapes.sql", "outcome")?;
        let step = column::<Int64Array>(&batch, "tune_shapes.sql", "step")?;
        for i in 0..batch.num_rows() {
            let (k, n) = (key.value(i), seq.value(i));
            match current {
                Some((current_key, _, ref mut whole)) if current_key == k => {
                    let expected = out.shapes.last().map_or(0, |w| w.steps.len()) as i64 + 1;
                    if n != expected {
                        *whole = false;
                        continue;
                    }
                }
                _ => {
                    finish(&mut out, current.take());
                    if !seen_keys.insert(k) {
                        // This key's rows came apart: read them sorted.
                        return Ok(None);
                    }
                    // A key whose first row is not its first position is set apart.
                    let recorded = match n {
                        1 => nth(&places.outcomes, outcome, i)
                            .ok_or(malformed("an outcome not in the list"))?,
                        _ => Outcome::FailClosed,
                    };
                    let length = if length.is_valid(i) { length.value(i) } else { -1 };
                    out.shapes.push(Workflow {
                        id: format!("shape {k:016x}"),
                        name: None,
                        outcome: recorded,
                        outcome_ms: 0.0,
                        steps: Vec::with_capacity(usize::try_from(length).unwrap_or(0).min(MAX_SHAPE_LENGTH)),
                    });
                    out.keys.push(k);
                    current = Some((k, length, n == 1));
                    if n != 1 {
                        continue;
                    }
                }
            }
            if let Some(shape) = out.shapes.last_mut() {
                shape.steps.push(unpack(step.value(i), &places));
            }
        }
    }
    finish(&mut out, current.take());
    Ok(Some(out))
}

/// One position of a shape from `tune_shapes.sql`'s packed `step` (its
/// header gives the bits); the places index this build's enum lists.
fn unpack(step: i64, places: &Places) -> Step {
    let bits = |from: u32, width: u32| ((step >> from) & ((1 << width) - 1)) as usize;
    let place = |bits: usize| bits.checked_sub(1);
    Step {
        start_us: 0,
        offset_ms: 0.0,
        duration_ms: 0.0,
        layer: places.layers.get(bits(0, 3)).copied().unwrap_or_default(),
        route: u32::try_from(step >> 16).unwrap_or(u32::MAX),
        on_fallback: bits(3, 1) == 1,
        failure: place(bits(5, 5)).and_then(|i| places.classes.get(i)).copied(),
        deliverable: bits(4, 1) == 1,
        decision: place(bits(10, 3)).and_then(|i| places.decisions.get(i)).copied(),
        commit: place(bits(13, 3)).and_then(|i| places.markers.get(i)).copied(),
        tokens: 0,
        cost_pusd: 0,
        cost_unknown: false,
    }
}

fn set_plans(conn: &Connection, plans: &[PlanRow]) -> Result<(), StoreError> {
    conn.execute_batch(PLANS_TABLE)?;
    let array = |values: ArrayRef| values;
    let places = i32::try_from(plans.len()).map_err(|_| StoreError::Malformed {
        file: "tune_plans",
        what: "more plans than a 32-bit place counts",
    })?;
    let batch = RecordBatch::try_from_iter([
        ("plan", array(Arc::new(Int32Array::from_iter_values(0..places)))),
        ("section", array(Arc::new(Int32Array::from_iter_values(plans.iter().map(|p| p.section))))),
        ("shape_key", array(Arc::new(UInt64Array::from_iter_values(plans.iter().map(|p| p.shape_key))))),
        ("changed", array(Arc::new(BooleanArray::from_iter(plans.iter().map(|p| Some(p.changed)))))),
        ("lost", array(Arc::new(BooleanArray::from_iter(plans.iter().map(|p| Some(p.lost)))))),
        ("moved", array(Arc::new(BooleanArray::from_iter(plans.iter().map(|p| Some(p.moved)))))),
        ("kept", array(Arc::new(UInt64Array::from_iter_values(plans.iter().map(|p| p.kept))))),
        ("delivered", array(Arc::new(Int32Array::from_iter(plans.iter().map(|p| p.delivered))))),
        (
            "recorded_delivered",
            array(Arc::new(Int32Array::from_iter(plans.iter().map(|p| p.recorded_delivered)))),
        ),
        (
            "recorded_outcome",
            array(Arc::new(Int32Array::from_iter_values(plans.iter().map(|p| p.recorded_outcome)))),
        ),
        ("outcome", array(Arc::new(Int32Array::from_iter_values(plans.iter().map(|p| p.outcome))))),
    ])?;
    let mut appender = conn.appender_to_catalog_and_db("tune_plans", "temp", "main")?;
    appender.append_record_batch(batch)?;
    appender.flush()?;
    Ok(())
}

fn for_each_changed(
    conn: &Connection,
    mut each: impl FnMut(ChangedWorkflow) -> Result<(), StoreError>,
) -> Result<u64, StoreError> {
    let began = std::time::Instant::now();
    let mut stmt = conn.prepare(
        "SELECT p.plan, t.outcome_ms, t.step_offsets_ms, t.step_durations_ms
         FROM workflow_times t
         JOIN temp.tune_plans p ON p.shape_key = t.shape_key AND p.section = tune_section(t.workflow_name)
         WHERE p.changed AND in_window(t.first_at, t.workflow_name)",
    )?;
    const TIMES: &str = "workflow_times";
    let malformed = |what| StoreError::Malformed { file: TIMES, what };
    let mut workflows = 0u64;
    for batch in stmt.stream_arrow([])? {
        let batch = batch?;
        let plan = column::<Int32Array>(&batch, TIMES, "plan")?;
        let outcome = column::<Float64Array>(&batch, TIMES, "outcome_ms")?;
        let lists = |name| -> Result<(&ListArray, &Float64Array), StoreError> {
            let list = column::<ListArray>(&batch, TIMES, name)?;
            let values = list.values().as_any().downcast_ref::<Float64Array>().ok_or(malformed(name))?;
            Ok((list, values))
        };
        let (offsets, offset_values) = lists("step_offsets_ms")?;
        let (durations, duration_values) = lists("step_durations_ms")?;
        let (offset_at, duration_at) = (offsets.value_offsets(), durations.value_offsets());
        for i in 0..batch.num_rows() {
            let span = |at: &[i32]| at[i] as usize..at[i + 1] as usize;
            each(ChangedWorkflow {
                plan: usize::try_from(plan.value(i)).map_err(|_| malformed("a negative plan place"))?,
                outcome_ms: outcome.value(i),
                offsets_ms: &offset_values.values()[span(offset_at)],
                durations_ms: &duration_values.values()[span(duration_at)],
            })?;
        }
        workflows += batch.num_rows() as u64;
    }
    tracing::debug!(
        workflows,
        elapsed_ms = began.elapsed().as_millis() as u64,
        "changed workflows' times read"
    );
    Ok(workflows)
}

fn outcome_counts(conn: &Connection) -> Result<OutcomeCounts, StoreError> {
    const FILE: &str = "tune_outcome_counts.sql";
    let began = std::time::Instant::now();
    let mut out = OutcomeCounts::default();
    let mut stmt = conn.prepare(OUTCOME_COUNTS_SQL)?;
    for batch in stmt.stream_arrow([])? {
        let batch = batch?;
        let outcome = column::<Float64Array>(&batch, FILE, "outcome_ms")?;
        let plan = column::<Int32Array>(&batch, FILE, "plan")?;
        let workflows = column::<UInt64Array>(&batch, FILE, "workflows")?;
        for i in 0..batch.num_rows() {
            let n = workflows.value(i);
            match plan.value(i) {
                0 if outcome.is_valid(i) => out.unchanged_ms.push((outcome.value(i), n)),
                1 => out.changed += n,
                2 => out.undecided += n,
                _ => return Err(StoreError::Malformed { file: FILE, what: "a row of no known plan" }),
            }
        }
    }
    tracing::debug!(
        query = FILE,
        distinct_times = out.unchanged_ms.len(),
        changed = out.changed,
        undecided = out.undecided,
        elapsed_ms = began.elapsed().as_millis() as u64
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::scope::Names;
    use crate::simulate::Scenario;
    use crate::store::Store;
    use attempt_core::pricing::PriceTable;
    use attempt_core::request::ReportFilter;

    /// Two shapes sharing a key (a 64-bit hash collision, made here by
    /// giving one shape's workflows another's key, of the same length and
    /// outcome) are told apart by the shape each rollup row keeps: their
    /// workflows are replayed one by one, to the same answer.
    #[test]
    fn shapes_sharing_a_key_are_replayed_workflow_by_workflow() {
        let store = super::super::tests::simulated_store(Scenario::Overnight529Storm, 400, 5, usize::MAX);
        store.catch_up().unwrap();
        let prices = std::sync::Arc::new(PriceTable::load(None).unwrap());
        let set = ["max_retries.sdk=1".to_string(), "no_retry_on=quota".to_string()];
        let candidate = crate::read::Candidate::from_flags(None, &set).unwrap();
        let replay = |store: &Store| {
            crate::read::Reader::new(store, prices.clone(), Default::default())
                .tune(&ReportFilter::default(), candidate.as_ref())
                .unwrap()
        };
        let apart = replay(&store);
        let shared_keys = |store: &Store| {
            store
                .tune_read(&ReportFilter::default(), &prices, Names::Every, |snapshot| snapshot.shapes())
                .unwrap()
                .apart
        };
        assert!(shared_keys(&store).is_empty());

        let (a, b): (u64, u64) = store
            .conn
            .query_row(
                "WITH s AS (SELECT DISTINCT shape_key, length, outcome FROM shape_steps)
                 SELECT x.shape_key, y.shape_key FROM s x JOIN s y
                   ON x.length = y.length AND x.outcome = y.outcome AND x.shape_key < y.shape_key
                 ORDER BY x.length DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        for table in ["workflow_steps", "workflow_facts", "workflow_times", "total_shapes", "shape_steps"] {
            store
                .conn
                .execute(&format!("UPDATE {table} SET shape_key = ? WHERE shape_key = ?"), [a, b])
                .unwrap();
        }
        assert_eq!(shared_keys(&store), vec![a]);
        let changed = apart.replay.as_ref().unwrap().changed_workflows;
        assert!(changed > 50, "{changed}");
        assert_eq!(replay(&store), apart);
    }

    /// In any scope (every workflow, a window off whole minutes, a window
    /// and a name), each workflow is counted once by what its plan does to
    /// it, and the changed ones read for their times are those counted.
    #[test]
    fn every_workflow_in_scope_is_timed_once() {
        use std::collections::HashSet;
        let store = super::super::tests::simulated_store(Scenario::RateLimitFallback, 600, 5, usize::MAX);
        store.catch_up().unwrap();
        let prices = PriceTable::load(None).unwrap();
        let facts: Vec<(i64, Option<String>, Option<u64>)> = store
            .conn
            .prepare("SELECT epoch_us(first_at), workflow_name, shape_key FROM workflow_facts")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let (first, last) = facts.iter().fold((i64::MAX, i64::MIN), |(lo, hi), f| (lo.min(f.0), hi.max(f.0)));
        let at = |us: i64| chrono::DateTime::from_timestamp_micros(us).unwrap();
        let (since, until) = (first + (last - first) / 3 + 7_000_123, last - (last - first) / 3);
        let name = facts.iter().find_map(|f| f.1.clone());
        let window =
            ReportFilter { since: Some(at(since)), until: Some(at(until)), ..ReportFilter::default() };
        let named = ReportFilter { workflow: name.clone(), ..window.clone() };
        for filter in [ReportFilter::default(), window, named] {
            let (counts, streamed, changed_keys) = store
                .tune_read(&filter, &prices, Names::Every, |snapshot| {
                    let shapes = snapshot.shapes()?;
                    assert!(shapes.apart.is_empty());
                    let plans: Vec<super::PlanRow> = shapes
                        .keys
                        .iter()
                        .enumerate()
                        .map(|(i, &shape_key)| super::PlanRow {
                            section: 0,
                            shape_key,
                            changed: i % 3 != 0,
                            lost: false,
                            moved: false,
                            kept: 1,
                            delivered: None,
                            recorded_delivered: None,
                            recorded_outcome: 0,
                            outcome: 0,
                        })
                        .collect();
                    snapshot.set_plans(&plans)?;
                    let counts = snapshot.outcome_counts()?;
                    let streamed = snapshot.for_each_changed(|w| {
                        assert!(plans[w.plan].changed);
                        Ok(())
                    })?;
                    let changed: HashSet<u64> =
                        plans.iter().filter(|p| p.changed).map(|p| p.shape_key).collect();
                    Ok((counts, streamed, changed))
                })
                .unwrap();
            let in_scope: Vec<_> = facts
                .iter()
                .filter(|f| filter.since.is_none_or(|s| f.0 >= s.timestamp_micros()))
                .filter(|f| filter.until.is_none_or(|u| f.0 < u.timestamp_micros()))
                .filter(|f| filter.workflow.is_none() || f.1 == filter.workflow)
                .collect();
            let changed =
                in_scope.iter().filter(|f| f.2.is_some_and(|k| changed_keys.contains(&k))).count() as u64;
            let unchanged: u64 = counts.unchanged_ms.iter().map(|(_, n)| n).sum();
            assert!(changed > 0 && unchanged > changed, "{filter:?}: {changed} changed, {unchanged} not");
            assert_eq!(
                (unchanged, counts.changed, counts.undecided),
                (in_scope.len() as u64 - changed, changed, 0)
            );
            assert_eq!(streamed, changed);
        }
    }
}
