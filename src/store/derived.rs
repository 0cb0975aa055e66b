//! The derived tables: `workflow_facts`, `rollup_*` and `total_*`
//! (migrations/0004_facts.sql). They are a pure function of the stored
//! attempts: `queries/facts.sql` derives a workflow's facts from all of its
//! attempts, `queries/rollups.sql` sums facts by minute. This module only
//! decides which rows to derive again and swaps them in, inside the
//! caller's transaction, so a reader never sees attempts without their
//! facts.
//!
//! After a write touches some workflows:
//! 1. their old facts are looked up (by id, pruned by time: see `refresh`);
//! 2. their attempts are read (pruned to the span the old facts and the new
//!    attempts cover) and their facts derived again;
//! 3. the minutes either version of them started in are summed again from
//!    the facts (cost: the workflows of those minutes, not the history);
//! 4. the all-time totals take the difference, new minus old.
//!
//! Label values a client can grow without end (workflow names, routes,
//! dimension values) keep rollup rows of their own for the first K seen
//! (`label_values`, admitted by `queries/admit.sql` as facts are derived);
//! later ones are summed under `other` (`queries/labels.sql`).

use chrono::{DateTime, Duration, Utc};
use duckdb::Connection;
use duckdb::types::{TimeUnit, Value};

use super::TimeBounds;
use super::cost;
use super::derived_tables::{PER_WORKFLOW, ROLLUPS, Rollup, RollupInput};
use super::derived_tables::{
    define_rollup_sources, drop_new, drop_old, drop_rollup_sources, touched_minutes_sql,
};
use super::error::StoreError;
use attempt_core::dimensions::{Dimension, MAX_DIMENSIONS};

pub(super) const FACTS_SQL: &str = include_str!("../../queries/facts.sql");
/// The scratch tables `facts.sql` leaves, dropped once read.
pub(super) const DROP_FACT_SCRATCH: &str =
    "DROP VIEW temp.fact_attempts; DROP TABLE temp.fact_ordered; DROP TABLE temp.fact_workflows;";
pub(super) const ROLLUPS_SQL: &str = include_str!("../../queries/rollups.sql");
pub(super) const FINDING_ROLLUPS_SQL: &str = include_str!("../../queries/finding_rollups.sql");
pub(super) const STEP_ROLLUPS_SQL: &str = include_str!("../../queries/step_rollups.sql");
const LABELS_SQL: &str = include_str!("../../queries/labels.sql");
const BOUNDS_SQL: &str = include_str!("../../queries/bounds.sql");
const ATTEMPT_FINDINGS_SQL: &str = include_str!("../../queries/attempt_findings.sql");
const ADMIT_SQL: &str = include_str!("../../queries/admit.sql");
const OLD_FACTS_SQL: &str = include_str!("../../queries/derive/old_facts.sql");
const OLD_FACTS_ELSEWHERE_SQL: &str = include_str!("../../queries/derive/old_facts_elsewhere.sql");
const FACT_INPUT_SQL: &str = include_str!("../../queries/derive/fact_input.sql");
const WORKFLOW_SPAN_SQL: &str = include_str!("../../queries/derive/workflow_span.sql");
const SLAB_BOUNDS_SQL: &str = include_str!("../../queries/derive/slab_bounds.sql");
const SLAB_WORKFLOWS_SQL: &str = include_str!("../../queries/derive/slab_workflows.sql");
const PASS_INPUT_SQL: &str = include_str!("../../queries/derive/pass_input.sql");
const PRUNED_SQL: &str = include_str!("../../queries/derive/pruned.sql");
const PRUNE_ATTEMPTS_SQL: &str = include_str!("../../queries/derive/prune_attempts.sql");
const PRUNE_SPANS_SQL: &str = include_str!("../../queries/derive/prune_spans.sql");

/// The recovery-time histogram's bucket bounds, milliseconds (`rollups.sql`
/// counts recovered workflows by the first bound at or above their time; a
/// reported percentile is its bucket's bound): 1-2-5 steps from 1 ms to a
/// minute, then 2, 5, 10 and 30 minutes, 1 and 6 hours, a day, a week, and
/// 30 days (the longest an attempt may say it lasted).
pub const RECOVERY_BUCKETS_MS: [i64; 25] = [
    1,
    2,
    5,
    10,
    20,
    50,
    100,
    200,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    30_000,
    60_000,
    120_000,
    300_000,
    600_000,
    1_800_000,
    3_600_000,
    21_600_000,
    86_400_000,
    604_800_000,
    2_592_000_000,
];

/// Attempts per pass of a rebuild: at the default memory limit one pass of
/// 1.2M attempts took 13 s, and one of 10M ran out of memory.
pub(super) const REBUILD_PART_ATTEMPTS: u64 = 500_000;

/// How far around a batch's own start times its workflows' facts are looked
/// for first; a workflow that started further away is found by a scan of
/// the facts' ids (counted in `RefreshStats::full_lookups`).
const LOOKUP_MARGIN: Duration = Duration::hours(6);

/// The workflows a derivation round touched, with the start times of the
/// attempts they got.
#[derive(Debug, Default)]
pub(super) struct Touched {
    pub ids: Vec<String>,
    /// Of those, the ids that may have derived facts already (the rest are
    /// new for sure: the workflow-id filter has never seen them).
    pub maybe_known: Vec<String>,
    pub earliest: Option<DateTime<Utc>>,
    pub latest: Option<DateTime<Utc>>,
}

impl Touched {
    /// Another new attempt's start.
    pub fn widen(&mut self, started_at: DateTime<Utc>) {
        self.earliest = Some(self.earliest.map_or(started_at, |e| e.min(started_at)));
        self.latest = Some(self.latest.map_or(started_at, |l| l.max(started_at)));
    }
}

/// What a refresh did, for the write's debug log.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RefreshStats {
    pub workflows: u64,
    /// Attempts with a duration past the decode bound (stored before it
    /// existed), clamped to it.
    pub clamped: u64,
    /// Workflows whose old facts were not near the batch in time: found by
    /// scanning every stored workflow id.
    pub full_lookups: u64,
}

pub(super) fn create_scratch(conn: &Connection, label_limit: u64) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS touched (workflow_id VARCHAR);
         CREATE TEMP TABLE IF NOT EXISTS touched_known (workflow_id VARCHAR);
",
    )?;
    conn.execute_batch(&format!(
        "SET VARIABLE label_limit = {label_limit}::BIGINT; SET VARIABLE fold_labels = true;"
    ))?;
    define_macros(conn)?;
    define_kept_label(conn)?;
    define_attempt_dims(conn)?;
    // A list literal of f64s that DuckDB reads back exactly.
    let bounds: Vec<String> = attempt_core::model::LATENCY_BUCKETS.iter().map(|b| format!("{b:?}")).collect();
    conn.execute_batch(&format!("SET VARIABLE latency_buckets = [{}]::DOUBLE[];", bounds.join(", ")))?;
    let bounds: Vec<String> = RECOVERY_BUCKETS_MS.iter().map(|ms| (ms * 1000).to_string()).collect();
    conn.execute_batch(&format!("SET VARIABLE recovery_buckets = [{}]::BIGINT[];", bounds.join(", ")))?;
    Ok(())
}

/// Defines the macros writers and readers share: `int64_of`
/// (`queries/bounds.sql`), which every sum the derived tables store per
/// workflow or per minute passes through, and `attempt_findings`
/// (`queries/attempt_findings.sql`), the steps read as findings of kind
/// `attempt` by the finding rollups and the audit.
pub(super) fn define_macros(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(BOUNDS_SQL)?;
    Ok(conn.execute_batch(ATTEMPT_FINDINGS_SQL)?)
}

/// Defines the macro `kept_label` for the labels that hold K values now
/// (`queries/labels.sql`); while none does, it is the identity. Called
/// when a connection opens, after each admission, and before each report
/// (another connection may have filled a label since).
pub(super) fn define_kept_label(conn: &Connection) -> Result<(), StoreError> {
    let full: Vec<String> = conn
        .prepare(
            "SELECT label FROM label_values GROUP BY label
             HAVING count(*) >= getvariable('label_limit') ORDER BY label",
        )?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    if full.is_empty() {
        conn.execute_batch("CREATE OR REPLACE TEMP MACRO kept_label(label_name, v) AS v;")?;
        return Ok(());
    }
    // Label names come from admit.sql's fixed set, never from a client.
    let list: Vec<String> = full.iter().map(|l| format!("'{}'", l.replace('\'', "''"))).collect();
    conn.execute_batch(&format!("SET VARIABLE full_labels = [{}]::VARCHAR[];", list.join(", ")))?;
    conn.execute_batch(LABELS_SQL)?;
    Ok(())
}

/// The configured dimensions, by slot (1-based).
pub(super) fn load_dimensions(conn: &Connection) -> Result<Vec<(usize, Dimension)>, StoreError> {
    let rows: Vec<(i32, String, String)> = conn
        .prepare("SELECT slot, name, source FROM dimensions ORDER BY slot")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    rows.into_iter()
        .map(|(slot, name, source)| {
            let source =
                source.parse().map_err(|e| StoreError::Dimension(format!("stored dimension {name}: {e}")))?;
            Ok((slot as usize, Dimension { name, source }))
        })
        .collect()
}

/// `temp.attempt_dims`: the stored attempts with the values of the
/// configured dimensions as dim1..dim3 (NULL in an unused slot); what
/// `facts.sql` reads. A view, so filters on it still prune by zone maps.
pub(super) fn define_attempt_dims(conn: &Connection) -> Result<(), StoreError> {
    let mut columns = [(); MAX_DIMENSIONS].map(|_| "NULL::VARCHAR".to_string());
    for (slot, dimension) in load_dimensions(conn)? {
        if let Some(column) = slot.checked_sub(1).and_then(|i| columns.get_mut(i)) {
            *column = dimension.source.sql();
        }
    }
    let select: Vec<String> =
        columns.iter().enumerate().map(|(i, sql)| format!("{sql} AS dim{}", i + 1)).collect();
    conn.execute_batch(&format!(
        "CREATE OR REPLACE TEMP VIEW attempt_dims AS SELECT *, {} FROM attempts;",
        select.join(", ")
    ))?;
    Ok(())
}

fn micros(t: DateTime<Utc>) -> Value {
    Value::Timestamp(TimeUnit::Microsecond, t.timestamp_micros())
}

pub(super) fn set_time_variable(
    conn: &Connection,
    name: &str,
    value: Option<DateTime<Utc>>,
) -> Result<(), StoreError> {
    // SET VARIABLE takes no bound parameters; microseconds since the epoch
    // name every instant chrono holds exactly (a printed date does not
    // parse back past the year 9999).
    let literal = match value {
        Some(t) => format!("make_timestamp({}::BIGINT)", t.timestamp_micros()),
        None => "NULL::TIMESTAMP".to_string(),
    };
    conn.execute_batch(&format!("SET VARIABLE {name} = {literal};"))?;
    Ok(())
}

fn fill_ids(conn: &Connection, table: &str, ids: &[String]) -> Result<(), StoreError> {
    conn.execute_batch(&format!("DELETE FROM temp.{table};"))?;
    super::temp::fill_column(conn, table, "workflow_id", ids.iter().map(String::as_str))
}

/// The lowest and highest instant of something; `None` when it is empty.
type TimeRange = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// `min(column)` and `max(column)` of a query, as UTC instants.
fn time_range(conn: &Connection, sql: &str) -> Result<TimeRange, StoreError> {
    let (low, high): (Value, Value) = conn.query_row(sql, [], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let at = |v: Value| match v {
        Value::Null => Ok(None),
        v => super::columns::timestamp(v).map(Some),
    };
    Ok((at(low)?, at(high)?))
}

/// Attempts `facts.sql` clamped (`temp.fact_ordered.clamped`).
fn clamped(conn: &Connection) -> Result<u64, StoreError> {
    Ok(conn.query_row("SELECT count(*) FILTER (WHERE clamped) FROM temp.fact_ordered", [], |r| {
        r.get::<_, i64>(0)
    })? as u64)
}

/// Derives again the facts of the `touched` workflows, and the rollups and
/// totals they feed. Runs inside the caller's transaction, after the
/// attempts were written.
pub(super) fn refresh(conn: &Connection, touched: &Touched) -> Result<RefreshStats, StoreError> {
    if touched.ids.is_empty() {
        return Ok(RefreshStats::default());
    }
    // No span: the write only removed attempts (a trace derived again to
    // nothing); the old facts bound where to look.
    let span = touched.earliest.zip(touched.latest);
    let mut laps = Laps::new();
    fill_ids(conn, "touched", &touched.ids)?;
    fill_ids(conn, "touched_known", &touched.maybe_known)?;
    let full_lookups = look_up_old_facts(conn, span)?;
    laps.mark("lookup");
    let clamped = derive_new_facts(conn, span)?;
    laps.mark("facts");
    swap_per_workflow_rows(conn)?;
    laps.mark("swap");
    cost::run(conn, "labels", ADMIT_SQL)?;
    define_kept_label(conn)?;
    laps.mark("admit");
    sum_the_difference(conn, &mut laps)?;
    conn.execute_batch(&format!(
        "{}{}{} DROP VIEW temp.fact_input; DELETE FROM temp.touched; DELETE FROM temp.touched_known;",
        drop_new(),
        drop_rollup_sources(),
        drop_old()
    ))?;
    let stats = RefreshStats { workflows: touched.ids.len() as u64, clamped, full_lookups };
    tracing::debug!(workflows = stats.workflows, full_lookups = stats.full_lookups, %laps, "derived tables refreshed");
    Ok(stats)
}

/// Step 1, the stored facts of the touched workflows (`temp.old_facts`):
/// near the write first, then a scan of the ids for the few known
/// workflows not found there. Returns how many needed the scan.
fn look_up_old_facts(conn: &Connection, span: Option<TimeBounds>) -> Result<u64, StoreError> {
    set_time_variable(conn, "look_from", span.map(|(e, _)| e - LOOKUP_MARGIN))?;
    set_time_variable(conn, "look_until", span.map(|(_, l)| l + LOOKUP_MARGIN))?;
    cost::run(conn, "lookup of old rows", OLD_FACTS_SQL)?;
    let missing: i64 = conn.query_row(
        "SELECT count(*) FROM temp.touched_known
         WHERE workflow_id NOT IN (SELECT workflow_id FROM temp.old_facts)",
        [],
        |r| r.get(0),
    )?;
    if missing > 0 {
        conn.execute_batch(OLD_FACTS_ELSEWHERE_SQL)?;
        tracing::debug!(missing, "workflows looked up by a scan of every stored id");
    }
    Ok(missing as u64)
}

/// Step 2, the touched workflows' facts derived again from all of their
/// attempts (`temp.new_*`, `facts.sql`). Returns the values clamped.
fn derive_new_facts(conn: &Connection, span: Option<TimeBounds>) -> Result<u64, StoreError> {
    let (old_from, old_until) =
        time_range(conn, "SELECT min(earliest_at), max(last_at) FROM temp.old_facts")?;
    let from = [old_from, span.map(|s| s.0)].into_iter().flatten().min();
    let until = [old_until, span.map(|s| s.1)].into_iter().flatten().max();
    set_time_variable(conn, "fact_from", from)?;
    set_time_variable(conn, "fact_until", until)?;
    conn.execute_batch(FACT_INPUT_SQL)?;
    cost::run_script(conn, FACTS_SQL)?;
    let clamped = clamped(conn)?;
    conn.execute_batch(DROP_FACT_SCRATCH)?;
    Ok(clamped)
}

/// Step 3, each per-workflow table's old rows kept (`temp.old_*`, for the
/// difference) and replaced by the new ones. Every per-workflow row carries
/// its workflow's first_at: the old facts' bounds prune them all.
fn swap_per_workflow_rows(conn: &Connection) -> Result<(), StoreError> {
    let (old_first, old_last) = time_range(conn, "SELECT min(first_at), max(first_at) FROM temp.old_facts")?;
    set_time_variable(conn, "old_first", old_first)?;
    set_time_variable(conn, "old_last", old_last)?;
    let of_old_workflows = "first_at >= getvariable('old_first') AND first_at <= getvariable('old_last')
                            AND workflow_id IN (SELECT workflow_id FROM temp.old_facts)";
    // The facts themselves are temp.old_facts already.
    for t in &PER_WORKFLOW[1..] {
        let old = format!(
            "CREATE OR REPLACE TEMP TABLE old_{} AS SELECT * FROM {} WHERE {of_old_workflows};",
            t.rows, t.table
        );
        cost::run(conn, "lookup of old rows", &old)?;
    }
    for t in &PER_WORKFLOW {
        let swap = format!(
            "DELETE FROM {table} WHERE {of_old_workflows};
             INSERT INTO {table} BY NAME SELECT * FROM temp.new_{rows} ORDER BY {order};",
            table = t.table,
            rows = t.rows,
            order = t.order,
        );
        cost::run(conn, t.family, &swap)?;
    }
    Ok(())
}

/// Step 4, one signed difference, new rows minus old, summed by minute:
/// added to the minutes it touches, to the all-time totals and to the
/// shapes.
fn sum_the_difference(conn: &Connection, laps: &mut Laps) -> Result<(), StoreError> {
    let differences = define_rollup_sources(RollupInput::Difference);
    conn.execute_batch(&format!("{differences} SET VARIABLE fold_labels = true;"))?;
    cost::run_script(conn, ROLLUPS_SQL)?;
    cost::run_script(conn, FINDING_ROLLUPS_SQL)?;
    cost::run_script(conn, STEP_ROLLUPS_SQL)?;
    laps.mark("sum");
    let (aff_from, aff_until) = time_range(conn, &touched_minutes_sql())?;
    set_time_variable(conn, "aff_from", aff_from)?;
    set_time_variable(conn, "aff_until", aff_until)?;
    merge(conn, Target::Minutes)?;
    laps.mark("minutes");
    merge(conn, Target::Totals)?;
    laps.mark("totals");
    super::shapes::refresh(conn)?;
    laps.mark("shapes");
    Ok(())
}

/// How long each step of a refresh took, for the debug log.
struct Laps {
    began: std::time::Instant,
    last: std::time::Duration,
    steps: Vec<(&'static str, std::time::Duration)>,
}

impl Laps {
    fn new() -> Laps {
        Laps { began: std::time::Instant::now(), last: std::time::Duration::ZERO, steps: Vec::new() }
    }

    fn mark(&mut self, step: &'static str) {
        let now = self.began.elapsed();
        self.steps.push((step, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for Laps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (step, took)) in self.steps.iter().enumerate() {
            write!(f, "{}{step} {} ms", if i > 0 { ", " } else { "" }, took.as_millis())?;
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Target {
    /// `rollup_*`: only the minutes in [aff_from, aff_until] are read and
    /// rewritten (zone maps prune the rest).
    Minutes,
    /// `total_*`: small (one row per label combination), rewritten whole.
    Totals,
}

/// The measures that count rows (workflows, attempts, observations): BIGINT
/// in the totals too.
const COUNTS: [&str; 6] =
    ["workflows", "attempts", "observations", "workflow_attempts", "reached", "delivered"];

/// Adds `temp.r_*` to the minute rollups or to the totals; rows whose every
/// measure comes to 0 are dropped.
fn merge(conn: &Connection, target: Target) -> Result<(), StoreError> {
    for Rollup { minutes, totals, delta, measures, family } in ROLLUPS {
        let measures: Vec<&str> = measures.concat();
        // A minute's sums are BIGINT, checked (queries/bounds.sql); the
        // all-time totals keep 128 bits for money and tokens.
        let sums: Vec<String> = measures
            .iter()
            .map(|m| match target {
                Target::Minutes => format!("int64_of(sum({m}), '{minutes}.{m}') AS {m}"),
                Target::Totals if COUNTS.contains(m) => format!("sum({m})::BIGINT AS {m}"),
                Target::Totals => format!("sum({m})::HUGEINT AS {m}"),
            })
            .collect();
        let nonzero: Vec<String> = measures.iter().map(|m| format!("sum({m}) <> 0")).collect();
        let (table, current, delta_rows, clear) = match target {
            Target::Minutes => {
                let within = "minute >= getvariable('aff_from') AND minute <= getvariable('aff_until')";
                (
                    minutes,
                    format!(
                        "SELECT * FROM {minutes} WHERE {within}
                           AND minute IN (SELECT DISTINCT minute FROM {delta})"
                    ),
                    format!("SELECT * FROM {delta}"),
                    format!(
                        "DELETE FROM {minutes} WHERE {within}
                           AND minute IN (SELECT DISTINCT minute FROM {delta})"
                    ),
                )
            }
            Target::Totals => {
                let Some(totals) = totals else { continue };
                let minute_keys =
                    if minutes == "rollup_attempts" { "minute, attempt_minute" } else { "minute" };
                (
                    totals,
                    format!("SELECT * FROM {totals}"),
                    format!("SELECT * EXCLUDE ({minute_keys}) FROM {delta}"),
                    format!("DELETE FROM {totals}"),
                )
            }
        };
        let merge = format!(
            "CREATE OR REPLACE TEMP TABLE merged AS
             SELECT * EXCLUDE ({measures}), {sums}
             FROM ({current} UNION ALL BY NAME {delta_rows})
             GROUP BY ALL
             HAVING {nonzero};
             {clear};
             INSERT INTO {table} BY NAME SELECT * FROM temp.merged;
             DROP TABLE temp.merged;",
            measures = measures.join(", "),
            sums = sums.join(", "),
            nonzero = nonzero.join(" OR "),
        );
        cost::run(conn, family, &merge)?;
    }
    Ok(())
}

/// The slabs a rebuild derives one by one: each holds the workflows whose
/// earliest attempt lies in [from, until) (`None`: unbounded), about
/// `attempts_per_part` attempts of them in all. A workflow is derived in
/// its own slab only, from all of its attempts, so each pass sorts a
/// bounded share of the attempts within the memory limit, nothing is
/// derived twice, and the facts are appended in time order, as writes
/// append them: zone maps on first_at keep pruning lookups and window
/// edges.
pub(super) type Slab = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// Builds `temp.workflow_span` (every workflow outside quarantine: its
/// earliest and latest attempt and how many it has) and cuts it into slabs.
pub(super) fn rebuild_slabs(conn: &Connection, attempts_per_part: u64) -> Result<Vec<Slab>, StoreError> {
    conn.execute_batch(&format!(
        "SET VARIABLE readable_from_us = {}::BIGINT; SET VARIABLE readable_until_us = {}::BIGINT;
         SET VARIABLE slab_attempts = {}::BIGINT;",
        DateTime::<Utc>::MIN_UTC.timestamp_micros(),
        DateTime::<Utc>::MAX_UTC.timestamp_micros(),
        attempts_per_part.clamp(1, i64::MAX as u64),
    ))?;
    conn.execute_batch(WORKFLOW_SPAN_SQL)?;
    let mut stmt = conn.prepare(SLAB_BOUNDS_SQL)?;
    let mut bounds: Vec<Option<DateTime<Utc>>> = vec![None];
    for row in stmt.query_map([], |r| r.get::<_, Value>(0))?.skip(1) {
        let bound = super::columns::timestamp(row?)?;
        if bounds.last().is_none_or(|last| *last != Some(bound)) {
            bounds.push(Some(bound));
        }
    }
    bounds.push(None);
    Ok(bounds.windows(2).map(|w| (w[0], w[1])).collect())
}

/// Builds `temp.pass_workflows`: the workflows of `slab`.
fn select_slab(conn: &Connection, slab: Slab) -> Result<(), StoreError> {
    set_time_variable(conn, "slab_from", slab.0)?;
    set_time_variable(conn, "slab_until", slab.1)?;
    Ok(conn.execute_batch(SLAB_WORKFLOWS_SQL)?)
}

/// The workflows of `slab`, by id, in order of their earliest attempt.
pub(super) fn slab_workflows(conn: &Connection, slab: Slab) -> Result<Vec<String>, StoreError> {
    select_slab(conn, slab)?;
    let ids = conn
        .prepare("SELECT workflow_id FROM temp.pass_workflows ORDER BY earliest, workflow_id")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    conn.execute_batch("DROP TABLE temp.pass_workflows;")?;
    Ok(ids)
}

/// Which workflows one rebuild pass derives.
pub(super) enum PassOf<'a> {
    /// Those whose earliest attempt lies in the slab.
    Slab(Slab),
    /// These (a slab cut smaller, to isolate a failure).
    Ids(&'a [String]),
}

/// Derives the facts of one pass's workflows and appends them; returns
/// how many. The caller commits after each pass: a table replaced inside a
/// transaction keeps its memory until the commit, and 10M attempts in one
/// transaction ran out of it.
pub(super) fn rebuild_pass(conn: &Connection, pass: PassOf) -> Result<u64, StoreError> {
    match pass {
        PassOf::Slab(slab) => select_slab(conn, slab)?,
        PassOf::Ids(ids) => {
            conn.execute_batch("CREATE OR REPLACE TEMP TABLE pass_ids (workflow_id VARCHAR);")?;
            let mut appender = conn.appender_to_catalog_and_db("pass_ids", "temp", "main")?;
            for id in ids {
                appender.append_row([id])?;
            }
            appender.flush()?;
            drop(appender);
            conn.execute_batch(
                "CREATE OR REPLACE TEMP TABLE pass_workflows AS
                 SELECT workflow_id, earliest, last FROM temp.workflow_span
                 WHERE workflow_id IN (SELECT workflow_id FROM temp.pass_ids);
                 DROP TABLE temp.pass_ids;",
            )?;
        }
    }
    let began = std::time::Instant::now();
    conn.execute_batch(PASS_INPUT_SQL)?;
    cost::run_script(conn, FACTS_SQL)?;
    let facts_at = began.elapsed();
    let clamped = clamped(conn)?;
    if clamped > 0 {
        tracing::warn!(clamped, "durations past 30 days (stored before the bound) clamped to it");
    }
    conn.execute_batch(DROP_FACT_SCRATCH)?;
    cost::run(conn, "labels", ADMIT_SQL)?;
    define_kept_label(conn)?;
    let admitted_at = began.elapsed();
    let derived: i64 = conn.query_row("SELECT count(*) FROM temp.new_facts", [], |r| r.get(0))?;
    for t in &PER_WORKFLOW {
        let store = format!(
            "INSERT INTO {} BY NAME SELECT * FROM temp.new_{} ORDER BY {};",
            t.table, t.rows, t.order
        );
        cost::run(conn, t.family, &store)?;
    }
    conn.execute_batch(&drop_new())?;
    conn.execute_batch("DROP TABLE temp.pass_workflows; DROP VIEW temp.fact_input;")?;
    tracing::debug!(
        workflows = derived,
        facts_ms = facts_at.as_millis() as u64,
        admit_ms = (admitted_at - facts_at).as_millis() as u64,
        store_ms = (began.elapsed() - admitted_at).as_millis() as u64,
        "rebuild pass derived"
    );
    Ok(derived as u64)
}

/// The label values of what is kept, admitted again as if only it had
/// ever been written: the first K of each label in time order. Values of
/// pruned workflows give their room back, and values that arrived once a
/// label was full get rows of their own if there is room for them now.
fn readmit_labels(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(
        "DELETE FROM label_values;
         CREATE OR REPLACE TEMP VIEW new_facts AS SELECT * FROM workflow_facts;
         CREATE OR REPLACE TEMP VIEW new_spend AS SELECT * FROM workflow_spend;",
    )?;
    conn.execute_batch(ADMIT_SQL)?;
    conn.execute_batch("DROP VIEW temp.new_facts; DROP VIEW temp.new_spend;")?;
    define_kept_label(conn)
}

/// Sums every rollup and total again from the facts.
pub(super) fn rebuild_rollups(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(&format!(
        "{} SET VARIABLE fold_labels = true;",
        define_rollup_sources(RollupInput::Stored)
    ))?;
    cost::run_script(conn, ROLLUPS_SQL)?;
    cost::run_script(conn, FINDING_ROLLUPS_SQL)?;
    cost::run_script(conn, STEP_ROLLUPS_SQL)?;
    super::shapes::rebuild(conn)?;
    for Rollup { minutes, totals, delta, family, .. } in ROLLUPS {
        let replace = format!(
            "DELETE FROM {minutes}; INSERT INTO {minutes} BY NAME SELECT * FROM {delta} ORDER BY minute;"
        );
        cost::run(conn, family, &replace)?;
        if let Some(totals) = totals {
            conn.execute_batch(&format!("DELETE FROM {totals};"))?;
        }
    }
    merge(conn, Target::Totals)?;
    conn.execute_batch(&drop_rollup_sources())?;
    Ok(())
}

/// Deletes the workflows whose first attempt started before `before`, with
/// their attempts, spans received before it that no attempt needs any
/// more, and breaker changes but the last before it; sums the rollups again. Returns (workflows, attempts) deleted.
pub(super) fn prune(conn: &Connection, before: DateTime<Utc>) -> Result<(u64, u64), StoreError> {
    set_time_variable(conn, "prune_before", Some(before))?;
    conn.execute_batch(PRUNED_SQL)?;
    let workflows: i64 = conn.query_row("SELECT count(*) FROM temp.pruned", [], |r| r.get(0))?;
    let attempts = conn.execute(PRUNE_ATTEMPTS_SQL, [])?;
    for t in &PER_WORKFLOW {
        conn.execute(&format!("DELETE FROM {} WHERE first_at < ?", t.table), [micros(before)])?;
    }
    conn.execute_batch(PRUNE_SPANS_SQL)?;
    // A breaker's state at `before` is its last change before it: that one
    // stays, so a timeline read after pruning starts in the right state.
    conn.execute(
        "DELETE FROM circuit_changes c
         WHERE c.changed_at < (SELECT max(d.changed_at) FROM circuit_changes d
                       WHERE d.changed_at < ? AND d.provider = c.provider
                         AND d.model IS NOT DISTINCT FROM c.model
                         AND d.route_group IS NOT DISTINCT FROM c.route_group
                         AND d.workflow_name IS NOT DISTINCT FROM c.workflow_name)",
        [micros(before)],
    )?;
    readmit_labels(conn)?;
    rebuild_rollups(conn)?;
    Ok((workflows as u64, attempts as u64))
}
