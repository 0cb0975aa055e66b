//! Bulk writes. In one transaction per group of batches:
//! 1. keep the OTLP spans not stored yet, and derive again the attempts of
//!    every trace that got one (the trace's earlier attempts are replaced);
//! 2. drop attempt ids repeated within the group (first wins), look up which
//!    of the rest are stored already (a redelivery with a different
//!    fingerprint is a conflict: counted, not merged);
//! 3. append the new attempts as one Arrow record batch, with canonical
//!    provider names from the alias table beside the received spellings;
//! 4. derive again the facts, rollups and totals of the workflows the group
//!    touched (`derived`), unless a bulk import defers that to one pass.
//!
//! Lookups stay in proportion to the group: `known` says which ids can be
//! stored at all, and the rest are looked for near their own start times
//! first (DuckDB's zone maps skip the other row groups).
//!
//! A group is stored whole or not at all, and an attempt is stored once
//! however many times it is delivered.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use duckdb::Connection;
use duckdb::arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder,
    TimestampMicrosecondBuilder, UInt64Builder,
};
use duckdb::params;

use super::StoreError;
use super::derived::{self, Touched, set_time_variable};
use super::known::KnownIds;
use crate::model::{Attempt, SpanKind, SpanRecord, name};
use crate::providers::ProviderAliases;

/// At most this many conflicting ids are listed per answer; the count is
/// exact.
pub const MAX_LISTED_CONFLICTS: usize = 100;

/// The most spans one trace may store. Each new span derives its trace
/// again from all of its stored spans, so without a bound a client feeding
/// one endless trace would make every export cost more than the last.
/// Spans beyond it are refused (counted, reported as OTLP partial success).
pub const MAX_SPANS_PER_TRACE: usize = 10_000;

/// One request's (or one file chunk's) records.
#[derive(Debug, Clone, Copy, Default)]
pub struct Batch<'a> {
    pub attempts: &'a [Attempt],
    pub spans: &'a [SpanRecord],
}

/// Maps all stored spans of one trace to its attempts (`ingest::otlp`).
pub type TraceDeriver<'a> = &'a dyn Fn(&[SpanRecord]) -> Vec<Attempt>;

/// What one batch did to the store.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteStats {
    /// Attempts stored for the first time.
    pub inserted: u64,
    /// Attempts whose id was already stored, or repeated within the batch.
    pub duplicates: u64,
    /// Duplicates whose content differs from the stored copy (first wins).
    pub conflicts: u64,
    /// The first `MAX_LISTED_CONFLICTS` conflicting ids.
    pub conflict_ids: Vec<String>,
    /// OTLP spans stored for the first time.
    pub spans_stored: u64,
    /// New spans not stored: their trace already held `MAX_SPANS_PER_TRACE`.
    pub spans_refused: u64,
}

impl std::ops::AddAssign for WriteStats {
    fn add_assign(&mut self, other: Self) {
        self.inserted += other.inserted;
        self.duplicates += other.duplicates;
        self.conflicts += other.conflicts;
        self.spans_stored += other.spans_stored;
        self.spans_refused += other.spans_refused;
        let room = MAX_LISTED_CONFLICTS.saturating_sub(self.conflict_ids.len());
        self.conflict_ids.extend(other.conflict_ids.into_iter().take(room));
    }
}

/// The columns the writer fills, in `to_record_batch`'s order;
/// `ingested_at` takes its default.
const COLUMNS: [&str; 34] = [
    "attempt_id",
    "workflow_id",
    "started_at",
    "provider",
    "model",
    "status",
    "attempt",
    "workflow",
    "layer",
    "route",
    "served_provider",
    "served_model",
    "provider_request_id",
    "duration_ms",
    "ttft_ms",
    "http_status",
    "error_class",
    "error_code",
    "retry_after_ms",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cost_pusd",
    "commit_state",
    "visible_output",
    "decision",
    "circuit",
    "extra",
    "provider_received",
    "served_provider_received",
    "route_group",
    "cache_write_input_tokens",
    "fingerprint",
    "source_trace",
];

pub(super) fn create_scratch(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS batch_ids (attempt_id VARCHAR);
         CREATE TEMP TABLE IF NOT EXISTS batch_traces (trace_id VARCHAR);",
    )?;
    Ok(())
}

/// How far around its own start time a redelivered attempt is looked for
/// first; one stored at another time (a conflicting copy) is found by a
/// scan of every id.
const REDELIVERY_MARGIN: Duration = Duration::hours(1);

/// What the writer needs besides the batches.
pub(super) struct WriteContext<'a> {
    pub aliases: &'a ProviderAliases,
    pub known: &'a mut KnownIds,
    /// Leave the derived tables stale (marked so) for one rebuild at the
    /// end of a bulk import.
    pub defer_derived: bool,
}

/// Writes several batches (one per request, say) in one transaction and
/// tells each what it stored: an id is new for the first batch that has it.
pub(super) fn write_batches(
    conn: &Connection,
    context: &mut WriteContext,
    batches: &[Batch],
    derive: TraceDeriver,
) -> Result<Vec<WriteStats>, StoreError> {
    if batches.iter().all(|b| b.attempts.is_empty() && b.spans.is_empty()) {
        return Ok(vec![WriteStats::default(); batches.len()]);
    }
    conn.execute_batch("BEGIN TRANSACTION")?;
    match write_in_transaction(conn, context, batches, derive) {
        Ok(stats) => {
            let began = std::time::Instant::now();
            conn.execute_batch("COMMIT")?;
            tracing::debug!(commit_ms = began.elapsed().as_millis() as u64, "batch committed");
            Ok(stats)
        }
        Err(err) => {
            // The scratch rows vanish with the rollback too.
            let _ = conn.execute_batch("ROLLBACK");
            Err(err)
        }
    }
}

fn write_in_transaction(
    conn: &Connection,
    context: &mut WriteContext,
    batches: &[Batch],
    derive: TraceDeriver,
) -> Result<Vec<WriteStats>, StoreError> {
    let began = std::time::Instant::now();
    let mut stats: Vec<WriteStats> = vec![WriteStats::default(); batches.len()];

    // 1. Spans, and the attempts of the traces that got new ones.
    let (derived, derived_owner) = store_spans_and_derive(conn, batches, derive, &mut stats)?;

    // 2. Records: first occurrence of each id in the group.
    let total: usize = batches.iter().map(|b| b.attempts.len()).sum();
    let mut first_seen: HashMap<&str, u64> = HashMap::with_capacity(total);
    let mut unique: Vec<(usize, &Attempt)> = Vec::with_capacity(total);
    for (batch, attempt) in
        batches.iter().enumerate().flat_map(|(i, b)| b.attempts.iter().map(move |a| (i, a)))
    {
        let fingerprint = attempt.fingerprint;
        match first_seen.get(attempt.attempt_id.as_str()) {
            None => {
                first_seen.insert(&attempt.attempt_id, fingerprint);
                unique.push((batch, attempt));
            }
            Some(first) => {
                stats[batch].duplicates += 1;
                if *first != fingerprint {
                    note_conflict(&mut stats[batch], &attempt.attempt_id);
                }
            }
        }
    }
    let ids: Vec<(&str, DateTime<Utc>)> =
        unique.iter().map(|(_, a)| (a.attempt_id.as_str(), a.started_at)).collect();
    let stored = stored_fingerprints(conn, context.known, &ids)?;
    let mut new: Vec<(&Attempt, u64)> = Vec::with_capacity(unique.len() + derived.len());
    for (batch, attempt) in unique {
        let fingerprint = first_seen[attempt.attempt_id.as_str()];
        match stored.get(&attempt.attempt_id) {
            None => {
                stats[batch].inserted += 1;
                new.push((attempt, fingerprint));
            }
            Some(stored_fingerprint) => {
                stats[batch].duplicates += 1;
                if stored_fingerprint.is_some_and(|f| f != fingerprint) {
                    note_conflict(&mut stats[batch], &attempt.attempt_id);
                }
            }
        }
    }
    // Derived attempts replaced their trace's earlier ones: new only if
    // the id was not there before.
    let derived_ids: Vec<(&str, DateTime<Utc>)> =
        derived.iter().map(|a| (a.attempt_id.as_str(), a.started_at)).collect();
    let existed = stored_fingerprints(conn, context.known, &derived_ids)?;
    // The workflows of a trace's earlier attempts change too, even when its
    // new attempts name other workflows.
    let mut emptied: Vec<String> = Vec::new();
    if !derived_owner.is_empty() {
        emptied = conn
            .prepare(
                "SELECT DISTINCT workflow_id FROM attempts
                 WHERE source_trace IN (SELECT trace_id FROM temp.batch_traces)",
            )?
            .query_map([], |row| row.get::<_, String>(0))?
            .collect::<Result<_, _>>()?;
        conn.execute_batch(
            "DELETE FROM attempts WHERE source_trace IN (SELECT trace_id FROM temp.batch_traces);
             DELETE FROM temp.batch_traces;",
        )?;
    }
    for attempt in &derived {
        if !existed.contains_key(&attempt.attempt_id)
            && let Some(owner) = attempt.source_trace.as_deref().and_then(|t| derived_owner.get(t))
        {
            stats[*owner].inserted += 1;
        }
        new.push((attempt, attempt.fingerprint));
    }
    let looked_up = began.elapsed();
    if !new.is_empty() {
        let mut appender = conn.appender_with_columns("attempts", &COLUMNS)?;
        appender.append_record_batch(to_record_batch(&new, context.aliases)?)?;
        // Errors surface at flush; Drop would swallow them.
        appender.flush()?;
    }
    let appended = began.elapsed();

    let mut touched = Touched::default();
    let mut seen: HashSet<&str> = HashSet::with_capacity(new.len());
    for (attempt, _) in &new {
        if seen.insert(&attempt.workflow_id) {
            touched.add(&attempt.workflow_id, attempt.started_at);
        } else {
            touched.widen(attempt.started_at);
        }
    }
    for id in &emptied {
        if seen.insert(id) {
            touched.ids.push(id);
        }
    }
    let (maybe_known, new_workflows): (Vec<&str>, Vec<&str>) =
        touched.ids.iter().copied().partition(|id| context.known.may_hold_workflow(id));
    touched.maybe_known = maybe_known;
    let refreshed = if context.defer_derived {
        if !touched.ids.is_empty() {
            conn.execute_batch("UPDATE derived_state SET stale = true;")?;
        }
        Default::default()
    } else {
        derived::refresh(conn, &touched)?
    };
    // Before the commit: should it fail, the filters only hold a few ids
    // too many, which costs lookups, never answers.
    context.known.insert(new.iter().map(|(a, _)| a.attempt_id.as_str()), new_workflows.into_iter());
    tracing::debug!(
        batch = total,
        appended = new.len(),
        workflows = refreshed.workflows,
        full_lookups = refreshed.full_lookups,
        lookup_ms = looked_up.as_millis() as u64,
        append_ms = (appended - looked_up).as_millis() as u64,
        derive_ms = (began.elapsed() - appended).as_millis() as u64,
        "batch written"
    );
    Ok(stats)
}

fn note_conflict(stats: &mut WriteStats, id: &str) {
    stats.conflicts += 1;
    if stats.conflict_ids.len() < MAX_LISTED_CONFLICTS {
        stats.conflict_ids.push(id.to_string());
    }
}

/// Stores the spans not stored yet and returns the attempts of every trace
/// that got a new span, with the batch each trace is counted for. Leaves
/// those traces in `temp.batch_traces`.
fn store_spans_and_derive(
    conn: &Connection,
    batches: &[Batch],
    derive: TraceDeriver,
    stats: &mut [WriteStats],
) -> Result<(Vec<Attempt>, HashMap<String, usize>), StoreError> {
    if batches.iter().all(|b| b.spans.is_empty()) {
        return Ok((Vec::new(), HashMap::new()));
    }
    let mut owner: HashMap<String, usize> = HashMap::new();
    for (i, batch) in batches.iter().enumerate() {
        for span in batch.spans {
            owner.entry(span.trace_id.clone()).or_insert(i);
        }
    }
    fill_scratch(conn, "batch_traces", owner.keys().map(String::as_str))?;
    let mut stored: HashSet<(String, String)> = conn
        .prepare(
            "SELECT trace_id, span_id FROM spans
             WHERE trace_id IN (SELECT trace_id FROM temp.batch_traces)",
        )?
        .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut per_trace: HashMap<String, usize> = HashMap::new();
    for (trace, _) in &stored {
        *per_trace.entry(trace.clone()).or_default() += 1;
    }
    let mut new_spans: Vec<&SpanRecord> = Vec::new();
    let mut touched: HashSet<&str> = HashSet::new();
    for (i, batch) in batches.iter().enumerate() {
        for span in batch.spans {
            if stored.contains(&(span.trace_id.clone(), span.span_id.clone())) {
                continue;
            }
            let held = per_trace.entry(span.trace_id.clone()).or_default();
            if *held >= MAX_SPANS_PER_TRACE {
                stats[i].spans_refused += 1;
                continue;
            }
            *held += 1;
            stored.insert((span.trace_id.clone(), span.span_id.clone()));
            stats[i].spans_stored += 1;
            touched.insert(&span.trace_id);
            new_spans.push(span);
        }
    }
    conn.execute_batch("DELETE FROM temp.batch_traces")?;
    if new_spans.is_empty() {
        return Ok((Vec::new(), HashMap::new()));
    }
    {
        let mut appender =
            conn.appender_with_columns("spans", &["trace_id", "span_id", "parent_span_id", "kind", "span"])?;
        for span in &new_spans {
            let kind: &str = span.kind.into();
            appender.append_row(params![
                span.trace_id,
                span.span_id,
                span.parent_span_id,
                kind,
                span.span.as_deref()
            ])?;
        }
        appender.flush()?;
    }
    fill_scratch(conn, "batch_traces", touched.iter().copied())?;
    let mut by_trace: HashMap<String, Vec<SpanRecord>> = HashMap::new();
    let rows = conn
        .prepare(
            "SELECT trace_id, span_id, parent_span_id, kind, span FROM spans
             WHERE trace_id IN (SELECT trace_id FROM temp.batch_traces)",
        )?
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Option<String>>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, Option<Vec<u8>>>(4)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    for (trace_id, span_id, parent_span_id, kind, span) in rows {
        // A kind this binary does not know is kept for ancestry only.
        let kind = kind.parse().unwrap_or(SpanKind::Link);
        by_trace.entry(trace_id.clone()).or_default().push(SpanRecord {
            trace_id,
            span_id,
            parent_span_id,
            kind,
            span,
        });
    }
    let mut traces: Vec<(String, Vec<SpanRecord>)> = by_trace.into_iter().collect();
    traces.sort_by(|a, b| a.0.cmp(&b.0));
    let derived = traces.iter().flat_map(|(_, spans)| derive(spans)).collect();
    owner.retain(|trace, _| touched.contains(trace.as_str()));
    Ok((derived, owner))
}

fn fill_scratch<'a>(
    conn: &Connection,
    table: &str,
    values: impl Iterator<Item = &'a str>,
) -> Result<(), StoreError> {
    let mut column = StringBuilder::new();
    for value in values {
        column.append_value(value);
    }
    let column_name = if table == "batch_ids" { "attempt_id" } else { "trace_id" };
    let batch = RecordBatch::try_from_iter([(column_name, Arc::new(column.finish()) as ArrayRef)])?;
    let mut appender = conn.appender_to_catalog_and_db(table, "temp", "main")?;
    appender.append_record_batch(batch)?;
    appender.flush()?;
    Ok(())
}

/// The ids of `ids` (with their start times) that `attempts` already
/// holds, with their fingerprints (`None` for rows stored before
/// fingerprints existed). Only ids `known` may hold are looked up: near
/// their start time first, then, for any not found there, in every row.
fn stored_fingerprints(
    conn: &Connection,
    known: &KnownIds,
    ids: &[(&str, DateTime<Utc>)],
) -> Result<HashMap<String, Option<u64>>, StoreError> {
    let maybe: Vec<&(&str, DateTime<Utc>)> =
        ids.iter().filter(|(id, _)| known.may_hold_attempt(id)).collect();
    let (Some(earliest), Some(latest)) =
        (maybe.iter().map(|(_, t)| *t).min(), maybe.iter().map(|(_, t)| *t).max())
    else {
        return Ok(HashMap::new());
    };
    fill_scratch(conn, "batch_ids", maybe.iter().map(|(id, _)| *id))?;
    set_time_variable(conn, "redelivery_from", Some(earliest - REDELIVERY_MARGIN))?;
    set_time_variable(conn, "redelivery_until", Some(latest + REDELIVERY_MARGIN))?;
    let read = |sql: &str| -> Result<HashMap<String, Option<u64>>, StoreError> {
        Ok(conn
            .prepare(sql)?
            .query_map([], |row| Ok((row.get::<_, String>(0)?, row.get::<_, Option<u64>>(1)?)))?
            .collect::<Result<HashMap<_, _>, _>>()?)
    };
    let mut stored = read(
        "SELECT attempt_id, fingerprint FROM attempts
         WHERE started_at >= getvariable('redelivery_from') AND started_at <= getvariable('redelivery_until')
           AND attempt_id IN (SELECT attempt_id FROM temp.batch_ids)",
    )?;
    if stored.len() < maybe.len() {
        conn.execute_batch("DELETE FROM temp.batch_ids")?;
        fill_scratch(
            conn,
            "batch_ids",
            maybe.iter().map(|(id, _)| *id).filter(|id| !stored.contains_key(*id)),
        )?;
        let elsewhere = read(
            "SELECT attempt_id, fingerprint FROM attempts
             WHERE attempt_id IN (SELECT attempt_id FROM temp.batch_ids)",
        )?;
        tracing::debug!(
            looked_up = maybe.len() - stored.len(),
            found = elsewhere.len(),
            "ids looked up in every row"
        );
        stored.extend(elsewhere);
    }
    conn.execute_batch("DELETE FROM temp.batch_ids")?;
    Ok(stored)
}

/// Re-applies `aliases` to every stored row (after the alias table changed,
/// or right after the migration that introduced canonical names); returns
/// the rows whose names changed.
pub(super) fn reapply_aliases(conn: &Connection, aliases: &ProviderAliases) -> Result<u64, StoreError> {
    conn.execute_batch("CREATE OR REPLACE TEMP TABLE alias_map (alias VARCHAR, canonical VARCHAR);")?;
    {
        let mut appender = conn.appender_to_catalog_and_db("alias_map", "temp", "main")?;
        for (alias, canonical) in aliases.pairs() {
            appender.append_row(params![alias, canonical])?;
        }
        appender.flush()?;
    }
    // A NULL received spelling means "the canonical name itself": pin it
    // before the names move, so no spelling is ever lost.
    conn.execute_batch(
        "UPDATE attempts SET provider_received = coalesce(provider_received, provider),
                             served_provider_received = coalesce(served_provider_received, served_provider)
         WHERE provider_received IS NULL OR served_provider_received IS NULL;
         CREATE OR REPLACE TEMP MACRO canonical(received) AS
             coalesce((SELECT m.canonical FROM temp.alias_map m WHERE m.alias = lower(trim(received))),
                      lower(trim(received)));",
    )?;
    // Only rows whose names move are written (and counted): an unchanged
    // table changes nothing, and derives nothing again.
    let changed = conn.execute(
        "UPDATE attempts SET
             provider = canonical(attempts.provider_received),
             served_provider = canonical(attempts.served_provider_received)
         WHERE provider IS DISTINCT FROM canonical(attempts.provider_received)
            OR served_provider IS DISTINCT FROM canonical(attempts.served_provider_received)",
        [],
    )?;
    conn.execute_batch("DROP TABLE temp.alias_map;")?;
    Ok(changed as u64)
}

fn to_record_batch(
    attempts: &[(&Attempt, u64)],
    aliases: &ProviderAliases,
) -> Result<RecordBatch, StoreError> {
    let n = attempts.len();
    let strings = |f: &dyn Fn(&Attempt) -> Option<&str>| {
        let mut b = StringBuilder::with_capacity(n, n * 16);
        for (a, _) in attempts {
            b.append_option(f(a));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    // The canonical name, and the received spelling only where it differs
    // (most records already use the canonical name: NULL is cheaper to
    // append and store). A batch holds few distinct spellings: each is
    // looked up once.
    let canonical = |spelling: &dyn Fn(&Attempt) -> &str| {
        let mut memo: HashMap<&str, String> = HashMap::new();
        let mut names = StringBuilder::with_capacity(n, n * 12);
        let mut received = StringBuilder::with_capacity(n, 0);
        for &(a, _) in attempts {
            let spelled = spelling(a);
            let name = memo.entry(spelled).or_insert_with(|| aliases.canonical(spelled));
            names.append_value(&*name);
            received.append_option((spelled != name.as_str()).then_some(spelled));
        }
        (Arc::new(names.finish()) as ArrayRef, Arc::new(received.finish()) as ArrayRef)
    };
    let (provider, provider_received) = canonical(&|a| &a.provider);
    let (served_provider, served_provider_received) = canonical(&|a| &a.served_provider);
    let floats = |f: &dyn Fn(&Attempt) -> Option<f64>| {
        let mut b = Float64Builder::with_capacity(n);
        for (a, _) in attempts {
            b.append_option(f(a));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let ints = |f: &dyn Fn(&Attempt) -> Option<i64>| {
        let mut b = Int64Builder::with_capacity(n);
        for (a, _) in attempts {
            b.append_option(f(a));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let mut started_at = TimestampMicrosecondBuilder::with_capacity(n);
    let mut http_status = Int32Builder::with_capacity(n);
    let mut visible_output = BooleanBuilder::with_capacity(n);
    let mut fingerprint = UInt64Builder::with_capacity(n);
    for (a, f) in attempts {
        started_at.append_value(a.started_at.timestamp_micros());
        http_status.append_option(a.http_status);
        visible_output.append_option(a.visible_output);
        fingerprint.append_value(*f);
    }
    let columns: [ArrayRef; 34] = [
        strings(&|a| Some(&a.attempt_id)),
        strings(&|a| Some(&a.workflow_id)),
        Arc::new(started_at.finish()),
        provider,
        strings(&|a| Some(&a.model)),
        strings(&|a| Some(name(a.status))),
        ints(&|a| a.attempt),
        strings(&|a| a.workflow.as_deref()),
        strings(&|a| Some(name(a.layer))),
        strings(&|a| a.route.map(name)),
        served_provider,
        strings(&|a| Some(&a.served_model)),
        strings(&|a| a.provider_request_id.as_deref()),
        floats(&|a| a.duration_ms),
        floats(&|a| a.ttft_ms),
        Arc::new(http_status.finish()),
        strings(&|a| a.error_class.map(name)),
        strings(&|a| a.error_code.as_deref()),
        floats(&|a| a.retry_after_ms),
        ints(&|a| a.tokens.input),
        ints(&|a| a.tokens.output),
        ints(&|a| a.tokens.cached_input),
        ints(&|a| a.cost.map(|c| c.0)),
        strings(&|a| Some(name(a.commit_state))),
        Arc::new(visible_output.finish()),
        strings(&|a| a.decision.map(name)),
        strings(&|a| a.circuit.map(name)),
        strings(&|a| a.extra.as_deref()),
        provider_received,
        served_provider_received,
        strings(&|a| a.route_group.as_deref()),
        ints(&|a| a.tokens.cache_write_input),
        Arc::new(fingerprint.finish()),
        strings(&|a| a.source_trace.as_deref()),
    ];
    Ok(RecordBatch::try_from_iter(COLUMNS.into_iter().zip(columns))?)
}
