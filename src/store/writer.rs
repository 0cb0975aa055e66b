//! The acknowledged write: in one transaction per group of batches,
//! 1. keep the OTLP spans not stored yet (at most `MAX_SPANS_PER_TRACE` a
//!    trace), and note each trace's write numbers in `trace_spans`;
//! 2. drop attempt ids repeated within the group (first wins), look up which
//!    of the rest are stored already (a redelivery with a different
//!    fingerprint is a conflict: counted, not merged);
//! 3. append the new attempts as one Arrow record batch, with canonical
//!    provider names from the alias table beside the received spellings.
//!
//! Every row carries the write's number (`ingest_seq`): that is the
//! derivation queue (`deriver.rs` derives what a write touched later, in its
//! own transaction), committed with the rows themselves. Nothing here
//! derives, so a write costs what storing costs.
//!
//! Lookups stay in proportion to the group: the attempt-id filter says which
//! ids can be stored at all, and the rest are looked for near their own
//! start times first (DuckDB's zone maps skip the other row groups); a
//! trace's stored spans are read between its first and last write number.
//!
//! A group is stored whole or not at all, and an attempt is stored once
//! however many times it is delivered.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};

use duckdb::Connection;
use duckdb::arrow::array::{
    Array, ArrayRef, BooleanArray, BooleanBuilder, Float64Builder, Int32Builder, Int64Array, Int64Builder,
    RecordBatch, StringArray, StringBuilder, TimestampMicrosecondArray, TimestampMicrosecondBuilder,
    UInt64Array, UInt64Builder,
};
use duckdb::arrow::compute::{concat_batches, filter_record_batch};
use duckdb::params;

use super::derived::set_time_variable;
use super::error::StoreError;
use super::known::IdFilter;
use super::temp;
use attempt_core::model::{Attempt, CircuitChange, SpanKind, SpanRecord, name};
use attempt_core::providers::ProviderAliases;
use attempt_core::ratelimit;

/// At most this many conflicting ids are listed per answer; the count is
/// exact.
pub const MAX_LISTED_CONFLICTS: usize = 100;

/// The most spans one trace may store. A trace's attempts are derived from
/// its stored spans, so without a bound a client feeding one endless trace
/// would make its derivation cost more each time. Spans beyond it are
/// refused (counted, reported as OTLP partial success).
pub const MAX_SPANS_PER_TRACE: usize = 10_000;

/// One request's (or one file chunk's) records.
#[derive(Debug, Clone, Copy, Default)]
pub struct Batch<'a> {
    pub attempts: &'a [Attempt],
    pub spans: &'a [SpanRecord],
    pub circuits: &'a [CircuitChange],
}

/// Attempt records as the rows the writer appends: Arrow columns in
/// `COLUMNS`' order but the last (`ingest_seq`, which the write adds), with
/// canonical provider names beside the received spellings. Built where the
/// records were decoded (a decoder thread, a request's task), so the one
/// writer thread only deduplicates, appends and commits; the `Attempt`s can
/// be dropped once these exist.
#[derive(Debug, Clone)]
pub struct AttemptRows {
    batch: RecordBatch,
}

impl AttemptRows {
    pub fn new(attempts: &[Attempt], aliases: &ProviderAliases) -> Result<Self, StoreError> {
        let refs: Vec<&Attempt> = attempts.iter().collect();
        Ok(Self { batch: to_record_batch(&refs, aliases)? })
    }

    pub fn len(&self) -> usize {
        self.batch.num_rows()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn column<T: 'static>(&self, name: &str) -> &T {
        let at = COLUMNS.iter().position(|c| *c == name).expect("a column of COLUMNS");
        self.batch.column(at).as_any().downcast_ref::<T>().expect("built by to_record_batch")
    }
}

/// A batch whose attempts are already rows.
#[derive(Debug, Clone, Copy)]
pub struct PreparedBatch<'a> {
    pub rows: &'a AttemptRows,
    pub spans: &'a [SpanRecord],
    pub circuits: &'a [CircuitChange],
}

/// What one batch did to the store.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteStats {
    /// Records stored for the first time: attempt records, model-call
    /// spans (whose attempts are derived from their trace), and breaker
    /// state changes.
    pub inserted: u64,
    /// Records already stored, or repeated within the batch, with the same
    /// content: attempts by id, model-call spans by trace and span id,
    /// state changes by content.
    pub duplicates: u64,
    /// Attempts whose id was stored (or came earlier in the batch) with
    /// other content: not merged, the first copy wins. Not duplicates:
    /// `inserted + duplicates + conflicts` (+ `records_refused`) is every
    /// record written.
    pub conflicts: u64,
    /// The first `MAX_LISTED_CONFLICTS` conflicting ids.
    pub conflict_ids: Vec<String>,
    /// OTLP spans stored for the first time.
    pub spans_stored: u64,
    /// New spans not stored: their trace already held `MAX_SPANS_PER_TRACE`.
    pub spans_refused: u64,
    /// Of those, model-call spans: records refused.
    pub records_refused: u64,
}

impl std::ops::AddAssign for WriteStats {
    fn add_assign(&mut self, other: Self) {
        self.inserted += other.inserted;
        self.duplicates += other.duplicates;
        self.conflicts += other.conflicts;
        self.spans_stored += other.spans_stored;
        self.spans_refused += other.spans_refused;
        self.records_refused += other.records_refused;
        let room = MAX_LISTED_CONFLICTS.saturating_sub(self.conflict_ids.len());
        self.conflict_ids.extend(other.conflict_ids.into_iter().take(room));
    }
}

/// The columns the writer fills, in `to_record_batch`'s order;
/// `ingested_at` takes its default.
pub(super) const COLUMNS: [&str; 54] = [
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
    "billing_account",
    "service_tier",
    "ratelimit_remaining_requests",
    "ratelimit_limit_requests",
    "ratelimit_reset_requests_ms",
    "ratelimit_remaining_tokens",
    "ratelimit_limit_tokens",
    "ratelimit_reset_tokens_ms",
    "ratelimit_remaining_input_tokens",
    "ratelimit_limit_input_tokens",
    "ratelimit_reset_input_tokens_ms",
    "ratelimit_remaining_output_tokens",
    "ratelimit_limit_output_tokens",
    "ratelimit_reset_output_tokens_ms",
    "reasoning_output_tokens",
    "cost_currency",
    "batch",
    "cache_write_1h_input_tokens",
    "web_search_requests",
    "ingest_seq",
];

pub(super) fn create_scratch(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS batch_ids (attempt_id VARCHAR);
         CREATE TEMP TABLE IF NOT EXISTS batch_traces (trace_id VARCHAR);
         CREATE TEMP TABLE IF NOT EXISTS trace_span_ids (trace_id VARCHAR, span_id VARCHAR);
         CREATE TEMP TABLE IF NOT EXISTS trace_attempt_ids (attempt_id VARCHAR);",
    )?;
    Ok(())
}

/// How far around its own start time a redelivered attempt is looked for
/// first; one stored at another time (a conflicting copy) is found by a
/// scan of every id.
const REDELIVERY_MARGIN: Duration = Duration::hours(1);

/// What the writer needs besides the batches.
pub(super) struct WriteContext<'a> {
    /// Attempt ids the store may hold.
    pub known: &'a mut IdFilter,
    /// This write's number: above every stored row's.
    pub seq: i64,
    /// Canonical provider names for state changes (attempts carry theirs
    /// in their rows already).
    pub aliases: &'a ProviderAliases,
}

/// Writes several batches (one per request, say) in one transaction and
/// tells each what it stored: an id is new for the first batch that has it.
/// Also returns the rows it stored (attempts and spans).
pub(super) fn write_batches(
    conn: &Connection,
    context: &mut WriteContext,
    batches: &[PreparedBatch],
) -> Result<(Vec<WriteStats>, u64), StoreError> {
    if batches.iter().all(|b| b.rows.is_empty() && b.spans.is_empty() && b.circuits.is_empty()) {
        return Ok((vec![WriteStats::default(); batches.len()], 0));
    }
    conn.execute_batch("BEGIN TRANSACTION")?;
    match write_in_transaction(conn, context, batches) {
        Ok(stored) => {
            let began = std::time::Instant::now();
            conn.execute_batch("COMMIT")?;
            tracing::debug!(commit_ms = began.elapsed().as_millis() as u64, "batch committed");
            Ok(stored)
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
    batches: &[PreparedBatch],
) -> Result<(Vec<WriteStats>, u64), StoreError> {
    let began = std::time::Instant::now();
    let mut stats: Vec<WriteStats> = vec![WriteStats::default(); batches.len()];

    // 1. Spans.
    let span_batches: Vec<&[SpanRecord]> = batches.iter().map(|b| b.spans).collect();
    let spans = store_spans(conn, &span_batches, context.seq, &mut stats)?;
    // Not rows of the derivation queue: nothing is derived from a change.
    store_circuits(conn, batches, context, &mut stats)?;

    // 2. Records: first occurrence of each id in the group.
    let total: usize = batches.iter().map(|b| b.rows.len()).sum();
    let mut first_seen: HashMap<&str, u64> = HashMap::with_capacity(total);
    // (batch, row, id, start)
    let mut unique: Vec<(usize, usize, &str, i64)> = Vec::with_capacity(total);
    // Later copies within the group: (batch, id, fingerprint).
    let mut repeats: Vec<(usize, &str, u64)> = Vec::new();
    for (b, batch) in batches.iter().enumerate() {
        let ids: &StringArray = batch.rows.column("attempt_id");
        let starts: &TimestampMicrosecondArray = batch.rows.column("started_at");
        let fingerprints: &UInt64Array = batch.rows.column("fingerprint");
        for row in 0..batch.rows.len() {
            let (id, fingerprint) = (ids.value(row), fingerprints.value(row));
            if first_seen.contains_key(id) {
                repeats.push((b, id, fingerprint));
            } else {
                first_seen.insert(id, fingerprint);
                unique.push((b, row, id, starts.value(row)));
            }
        }
    }
    let lookups: Vec<(&str, i64)> = unique.iter().map(|(_, _, id, start)| (*id, *start)).collect();
    let stored = stored_fingerprints(conn, context.known, &lookups)?;
    // A later copy is measured against the copy that wins: the stored one
    // if there is one, else the group's first.
    for (b, id, fingerprint) in repeats {
        let winner = match stored.get(id) {
            Some(stored) => *stored,
            None => first_seen.get(id).copied(),
        };
        if winner.is_some_and(|w| w != fingerprint) {
            note_conflict(&mut stats[b], id);
        } else {
            stats[b].duplicates += 1;
        }
    }
    let mut keep: Vec<Vec<bool>> = batches.iter().map(|b| vec![false; b.rows.len()]).collect();
    let mut new: Vec<&str> = Vec::with_capacity(unique.len());
    for (b, row, id, _) in unique {
        match stored.get(id) {
            None => {
                stats[b].inserted += 1;
                keep[b][row] = true;
                new.push(id);
            }
            Some(stored_fingerprint) if stored_fingerprint.is_some_and(|f| f != first_seen[id]) => {
                note_conflict(&mut stats[b], id)
            }
            Some(_) => stats[b].duplicates += 1,
        }
    }
    let looked_up = began.elapsed();
    // One append for the whole group: each append converts its batch into
    // DuckDB's vectors at a fixed cost (about 0.25 ms), which per request
    // was most of a commit of one-record requests.
    let kept: Vec<RecordBatch> = batches
        .iter()
        .zip(keep)
        .filter(|(_, keep)| keep.contains(&true))
        .map(|(batch, keep)| {
            if keep.iter().all(|k| *k) {
                Ok(batch.rows.batch.clone())
            } else {
                filter_record_batch(&batch.rows.batch, &BooleanArray::from(keep))
            }
        })
        .collect::<Result<_, _>>()?;
    if let Some(first) = kept.first() {
        let rows = if kept.len() == 1 { first.clone() } else { concat_batches(&first.schema(), &kept)? };
        let mut appender = conn.appender_with_columns("attempts", &COLUMNS)?;
        appender.append_record_batch(numbered(rows, context.seq)?)?;
        // Errors surface at flush; Drop would swallow them.
        appender.flush()?;
    }
    // Before the commit: should it fail, the filter only holds a few ids
    // too many, which costs lookups, never answers.
    for id in &new {
        context.known.insert(id);
    }
    tracing::debug!(
        batch = total,
        appended = new.len(),
        lookup_ms = looked_up.as_millis() as u64,
        append_ms = (began.elapsed() - looked_up).as_millis() as u64,
        "batch written"
    );
    Ok((stats, spans + new.len() as u64))
}

/// Stores the state changes not stored yet; a change is its content, so a
/// redelivery is a duplicate and never a conflict. Changes are few (a
/// breaker's transitions, not its traffic): one statement each.
fn store_circuits(
    conn: &Connection,
    batches: &[PreparedBatch],
    context: &WriteContext,
    stats: &mut [WriteStats],
) -> Result<(), StoreError> {
    if batches.iter().all(|b| b.circuits.is_empty()) {
        return Ok(());
    }
    let mut insert = conn.prepare_cached(
        "INSERT INTO circuit_changes
             (change_id, changed_at, provider, provider_received, model, route_group, workflow_name, state, reason, ingest_seq)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT DO NOTHING",
    )?;
    for (b, batch) in batches.iter().enumerate() {
        for change in batch.circuits {
            let inserted = insert.execute(params![
                change.id(),
                duckdb::types::Value::Timestamp(
                    duckdb::types::TimeUnit::Microsecond,
                    change.at.timestamp_micros()
                ),
                context.aliases.canonical(&change.provider),
                change.provider,
                change.model,
                change.route_group,
                change.workflow,
                name(change.state),
                change.reason,
                context.seq,
            ])?;
            if inserted > 0 {
                stats[b].inserted += 1;
            } else {
                stats[b].duplicates += 1;
            }
        }
    }
    Ok(())
}

/// `rows` with the write's number as the last column.
fn numbered(rows: RecordBatch, seq: i64) -> Result<RecordBatch, StoreError> {
    let seq: ArrayRef = Arc::new(Int64Array::from_value(seq, rows.num_rows()));
    let mut columns = rows.columns().to_vec();
    columns.push(seq);
    Ok(RecordBatch::try_from_iter(COLUMNS.into_iter().zip(columns))?)
}

/// Appends `attempts` as one Arrow record batch numbered `seq` (the
/// attempts a derivation round derived from traces).
pub(super) fn append_attempts(
    conn: &Connection,
    attempts: &[&Attempt],
    aliases: &ProviderAliases,
    seq: i64,
) -> Result<(), StoreError> {
    if attempts.is_empty() {
        return Ok(());
    }
    let mut appender = conn.appender_with_columns("attempts", &COLUMNS)?;
    appender.append_record_batch(numbered(to_record_batch(attempts, aliases)?, seq)?)?;
    appender.flush()?;
    Ok(())
}

fn note_conflict(stats: &mut WriteStats, id: &str) {
    stats.conflicts += 1;
    if stats.conflict_ids.len() < MAX_LISTED_CONFLICTS {
        stats.conflict_ids.push(id.to_string());
    }
}

/// Stores the spans not stored yet (each trace up to
/// `MAX_SPANS_PER_TRACE`), numbered `seq`, and keeps `trace_spans` up to
/// date for the traces that got one; returns how many it stored.
fn store_spans(
    conn: &Connection,
    batches: &[&[SpanRecord]],
    seq: i64,
    stats: &mut [WriteStats],
) -> Result<u64, StoreError> {
    if batches.iter().all(|spans| spans.is_empty()) {
        return Ok(0);
    }
    let traces: HashSet<&str> =
        batches.iter().flat_map(|spans| spans.iter()).map(|s| s.trace_id.as_str()).collect();
    temp::fill_column(conn, "batch_traces", "trace_id", traces.iter().copied())?;
    // What each trace holds already, and between which write numbers.
    let held: HashMap<String, (i64, i64)> = conn
        .prepare(
            "SELECT trace_id, first_seq, spans FROM trace_spans
             WHERE trace_id IN (SELECT trace_id FROM temp.batch_traces)",
        )?
        .query_map([], |row| Ok((row.get::<_, String>(0)?, (row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))))?
        .collect::<Result<_, _>>()?;
    let mut stored: HashSet<(String, String)> = HashSet::new();
    if let Some(from) = held.values().map(|(first, _)| *first).min() {
        stored = conn
            .prepare(
                "SELECT trace_id, span_id FROM spans
                 WHERE ingest_seq >= ? AND trace_id IN (SELECT trace_id FROM temp.batch_traces)",
            )?
            .query_map([from], |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)))?
            .collect::<Result<_, _>>()?;
    }
    conn.execute_batch("DELETE FROM temp.batch_traces")?;
    let mut per_trace: HashMap<&str, i64> =
        held.iter().map(|(trace, (_, spans))| (trace.as_str(), *spans)).collect();
    let mut new_spans: Vec<&SpanRecord> = Vec::new();
    for (i, spans) in batches.iter().enumerate() {
        for span in spans.iter() {
            let key = (span.trace_id.clone(), span.span_id.clone());
            let call = span.kind == SpanKind::Model;
            if stored.contains(&key) {
                stats[i].duplicates += u64::from(call);
                continue;
            }
            let count = per_trace.entry(span.trace_id.as_str()).or_default();
            if *count >= MAX_SPANS_PER_TRACE as i64 {
                stats[i].spans_refused += 1;
                stats[i].records_refused += u64::from(call);
                continue;
            }
            *count += 1;
            stored.insert(key);
            stats[i].spans_stored += 1;
            // A model span is one call: its attempts are derived with its
            // trace, but the record it stands for is accepted now.
            stats[i].inserted += u64::from(call);
            new_spans.push(span);
        }
    }
    if new_spans.is_empty() {
        return Ok(0);
    }
    {
        let mut appender = conn.appender_with_columns(
            "spans",
            &["trace_id", "span_id", "parent_span_id", "kind", "span", "ingest_seq", "facts"],
        )?;
        for span in &new_spans {
            let kind: &str = span.kind.into();
            // Never fails for this struct; without facts the deriver reads the span.
            let facts =
                (span.kind != SpanKind::Link).then(|| serde_json::to_string(&span.facts).ok()).flatten();
            appender.append_row(params![
                span.trace_id,
                span.span_id,
                span.parent_span_id,
                kind,
                span.span.as_deref(),
                seq,
                facts
            ])?;
        }
        appender.flush()?;
    }
    let grown: HashSet<&str> = new_spans.iter().map(|s| s.trace_id.as_str()).collect();
    temp::fill_column(conn, "batch_traces", "trace_id", grown.iter().copied())?;
    conn.execute_batch(
        "DELETE FROM trace_spans WHERE trace_id IN (SELECT trace_id FROM temp.batch_traces);
         DELETE FROM temp.batch_traces;",
    )?;
    let mut appender = conn.appender("trace_spans")?;
    for trace in grown {
        let first = held.get(trace).map_or(seq, |(first, _)| *first);
        appender.append_row(params![trace, first, seq, per_trace[trace]])?;
    }
    appender.flush()?;
    Ok(new_spans.len() as u64)
}

/// The ids of `ids` (with their start times) that `attempts` already
/// holds, with their fingerprints (`None` for rows stored before
/// fingerprints existed). Only ids `known` may hold are looked up: near
/// their start time first, then, for any not found there, in every row.
fn stored_fingerprints(
    conn: &Connection,
    known: &IdFilter,
    ids: &[(&str, i64)],
) -> Result<HashMap<String, Option<u64>>, StoreError> {
    let maybe: Vec<&(&str, i64)> = ids.iter().filter(|(id, _)| known.may_hold(id)).collect();
    let at = |micros: Option<i64>| micros.and_then(DateTime::<Utc>::from_timestamp_micros);
    let (Some(earliest), Some(latest)) =
        (at(maybe.iter().map(|(_, t)| *t).min()), at(maybe.iter().map(|(_, t)| *t).max()))
    else {
        return Ok(HashMap::new());
    };
    temp::fill_column(conn, "batch_ids", "attempt_id", maybe.iter().map(|(id, _)| *id))?;
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
        temp::fill_column(
            conn,
            "batch_ids",
            "attempt_id",
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
    conn.execute(
        "UPDATE circuit_changes SET provider = canonical(provider_received)
         WHERE provider IS DISTINCT FROM canonical(provider_received)",
        [],
    )?;
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

/// The rows of `attempts` in `COLUMNS`' order, but the write's number.
fn to_record_batch(attempts: &[&Attempt], aliases: &ProviderAliases) -> Result<RecordBatch, StoreError> {
    let n = attempts.len();
    let strings = |f: &dyn Fn(&Attempt) -> Option<&str>| {
        let mut b = StringBuilder::with_capacity(n, n * 16);
        for a in attempts {
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
        for a in attempts {
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
        for a in attempts {
            b.append_option(f(a));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let ints = |f: &dyn Fn(&Attempt) -> Option<i64>| {
        let mut b = Int64Builder::with_capacity(n);
        for a in attempts {
            b.append_option(f(a));
        }
        Arc::new(b.finish()) as ArrayRef
    };
    let mut started_at = TimestampMicrosecondBuilder::with_capacity(n);
    let mut http_status = Int32Builder::with_capacity(n);
    let mut visible_output = BooleanBuilder::with_capacity(n);
    let mut fingerprint = UInt64Builder::with_capacity(n);
    for a in attempts {
        started_at.append_value(a.started_at.timestamp_micros());
        http_status.append_option(a.http_status);
        visible_output.append_option(a.visible_output);
        fingerprint.append_value(a.fingerprint);
    }
    let mut columns: Vec<ArrayRef> = vec![
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
        strings(&|a| a.billing_account.as_deref()),
        strings(&|a| a.service_tier.as_deref()),
    ];
    for (_, kind, part) in ratelimit::FIELDS {
        columns.push(ints(&|a| a.headroom.get(kind, part)));
    }
    columns.push(ints(&|a| a.tokens.reasoning_output));
    columns.push(strings(&|a| a.cost_currency.as_deref()));
    let mut batch = BooleanBuilder::with_capacity(n);
    for a in attempts {
        batch.append_option(a.batch);
    }
    columns.push(Arc::new(batch.finish()));
    columns.push(ints(&|a| a.tokens.cache_write_1h_input));
    columns.push(ints(&|a| a.web_search_requests));
    Ok(RecordBatch::try_from_iter(COLUMNS.into_iter().zip(columns))?)
}
