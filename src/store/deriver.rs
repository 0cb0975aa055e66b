//! Derivation rounds: the traces and workflows that acknowledged writes
//! touched, derived in transactions of their own.
//!
//! A write numbers its rows (`ingest_seq`, `writer.rs`); `derived_state`
//! says through which number the derived tables reflect the rows. A round
//! takes the pending numbers in order, up to a bound on the rows they hold
//! (so one burst cannot make a round without end), and in one transaction:
//! 1. derives again the calls whose shape the new spans of a trace changed
//!    (a trace's attempts are a function of its stored spans), replacing
//!    their old attempts;
//! 2. derives again every workflow that got attempts, or lost some in 1
//!    (`derived::refresh`: old facts out, new facts in, rollups by signed
//!    difference);
//! 3. moves `derived_seq` to the round's last number.
//!
//! A round that fails on a value no rule can handle is done again in
//! halves until the failure is one workflow; that workflow goes to
//! `quarantine` with the error (its rows leave the derived tables) and the
//! others are derived. A storage failure (a full disk) fails the round: it
//! is retried as it was, since nothing of it was committed.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use duckdb::types::Value;
use duckdb::{Connection, params};

use super::derived::{self, Touched};
use super::error::StoreError;
use super::known::IdFilter;
use super::writer::append_attempts;
use super::{in_transaction, temp};
use attempt_core::ingest::otlp::{
    CallSpans, SpanLink, TraceCalls, derive_call, facts_of_stored, trace_calls,
};
use attempt_core::model::{Attempt, SpanFacts, SpanKind, SpanRecord};
use attempt_core::providers::ProviderAliases;

/// Rows (attempts and spans) a round takes at most, unless one write alone
/// holds more: at the default memory limit a round of this size derives in
/// one to three seconds on two cores while writes go on, and a burst of
/// writes is worked off in rounds that each commit.
pub const ROUND_ROWS: u64 = 100_000;

/// What the acknowledged writes hold that is not derived yet.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// Writes with rows not derived yet.
    pub commits: u64,
    pub attempts: u64,
    pub spans: u64,
    /// The derived tables reflect every write numbered up to this.
    pub derived_through: i64,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.commits == 0
    }
}

/// What one round did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Round {
    /// The derived tables now reflect every write numbered up to this.
    pub derived_through: i64,
    pub commits: u64,
    pub traces: u64,
    pub workflows: u64,
    /// Workflows set aside in this round.
    pub quarantined: u64,
    /// Durations past the decode bound (rows stored before it), clamped.
    pub clamped: u64,
}

/// What a round needs besides the connection.
pub(super) struct DeriveContext<'a> {
    pub aliases: &'a ProviderAliases,
    /// Workflow ids that may have derived facts.
    pub workflows: &'a mut IdFilter,
}

pub(super) fn derived_seq(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row("SELECT max(derived_seq) FROM derived_state", [], |r| r.get(0))?)
}

/// Rows by pending write number, in order.
fn pending_writes(conn: &Connection, after: i64) -> Result<Vec<(i64, u64, u64)>, StoreError> {
    let rows = conn
        .prepare(
            "SELECT ingest_seq, sum(attempts)::BIGINT, sum(spans)::BIGINT FROM (
                 SELECT ingest_seq, count(*) AS attempts, 0 AS spans FROM attempts
                 WHERE ingest_seq > ? GROUP BY ingest_seq
                 UNION ALL
                 SELECT ingest_seq, 0, count(*) FROM spans WHERE ingest_seq > ? GROUP BY ingest_seq)
             GROUP BY ingest_seq ORDER BY ingest_seq",
        )?
        .query_map([after, after], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as u64, r.get::<_, i64>(2)? as u64))
        })?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

pub(super) fn pending(conn: &Connection) -> Result<Pending, StoreError> {
    let derived_through = derived_seq(conn)?;
    let writes = pending_writes(conn, derived_through)?;
    Ok(Pending {
        commits: writes.len() as u64,
        attempts: writes.iter().map(|w| w.1).sum(),
        spans: writes.iter().map(|w| w.2).sum(),
        derived_through,
    })
}

/// The newest write number given out (0 for an empty store): of the
/// stored rows, and of what derivation and the lake have reached, since
/// `prune` may have deleted every row numbered up to them; a number below
/// would be taken as derived, or exported, already.
pub(super) fn newest_seq(conn: &Connection) -> Result<i64, StoreError> {
    Ok(conn.query_row(
        "SELECT greatest(coalesce((SELECT max(ingest_seq) FROM attempts), 0),
                         coalesce((SELECT max(ingest_seq) FROM spans), 0),
                         coalesce((SELECT max(derived_seq) FROM derived_state), 0),
                         coalesce((SELECT max(through_seq) FROM lake_exports), 0))",
        [],
        |r| r.get(0),
    )?)
}

/// Whether `err` comes from a value in the data (a cast that overflows, a
/// timestamp out of range), which deriving the same rows again would meet
/// again: those are isolated, anything else is retried.
pub(super) fn is_data_error(err: &StoreError) -> bool {
    const DATA: [&str; 5] =
        ["Conversion Error", "Out of Range Error", "Invalid Input Error", "Constraint Error", "Overflow"];
    matches!(err, StoreError::DuckDb(_)) && DATA.iter().any(|kind| err.to_string().contains(kind))
}

/// Derives the pending writes after `derived_seq`, up to about `max_rows`
/// rows (at least one write); `None` when nothing is pending.
pub(super) fn derive_round(
    conn: &Connection,
    context: &mut DeriveContext,
    max_rows: u64,
) -> Result<Option<Round>, StoreError> {
    let from = derived_seq(conn)?;
    let writes = pending_writes(conn, from)?;
    let Some(first) = writes.first() else { return Ok(None) };
    let mut upper = first.0;
    let mut rows = 0;
    let mut commits = 0;
    for (seq, attempts, spans) in &writes {
        if commits > 0 && rows + attempts + spans > max_rows {
            break;
        }
        rows += attempts + spans;
        upper = *seq;
        commits += 1;
    }
    let began = std::time::Instant::now();
    let attempt = in_transaction(conn, |conn| {
        let (traces, emptied) = derive_traces(conn, context.aliases, from, upper)?;
        let touched = touched_workflows(conn, context.workflows, from, upper, emptied)?;
        let workflows = touched.ids.len() as u64;
        let refreshed = derived::refresh(conn, &touched)?;
        advance(conn, upper)?;
        Ok((traces, workflows, touched, refreshed.clamped))
    });
    let round = match attempt {
        Ok((traces, workflows, touched, clamped)) => {
            touched.ids.iter().for_each(|id| context.workflows.insert(id));
            Round { derived_through: upper, commits, traces, workflows, quarantined: 0, clamped }
        }
        Err(err) if is_data_error(&err) => {
            tracing::warn!(error = %err, from, upper, "a derivation round failed on its data; isolating the workflow");
            let mut round = derive_isolating(conn, context, from, upper)?;
            round.commits = commits;
            round
        }
        Err(err) => return Err(err),
    };
    tracing::debug!(
        through = upper,
        commits,
        rows,
        traces = round.traces,
        workflows = round.workflows,
        elapsed_ms = began.elapsed().as_millis() as u64,
        "derivation round"
    );
    Ok(Some(round))
}

fn advance(conn: &Connection, upper: i64) -> Result<(), StoreError> {
    conn.execute("UPDATE derived_state SET derived_seq = ?", [upper])?;
    Ok(())
}

/// The round again, piece by piece: the traces, then the workflows in
/// halves, each piece its own commit, until every failure is one workflow
/// (quarantined); last, `derived_seq` moves. Killed half-way, the round is
/// simply done again: each piece derives its workflows from their attempts.
fn derive_isolating(
    conn: &Connection,
    context: &mut DeriveContext,
    from: i64,
    upper: i64,
) -> Result<Round, StoreError> {
    let (traces, emptied) = in_transaction(conn, |conn| derive_traces(conn, context.aliases, from, upper))?;
    let all = in_transaction(conn, |conn| touched_rows(conn, from, upper, &emptied))?;
    let mut round = Round { derived_through: upper, traces, workflows: all.len() as u64, ..Round::default() };
    let mut groups = vec![all];
    while let Some(group) = groups.pop() {
        let touched = touched_of(&group, context.workflows);
        match in_transaction(conn, |conn| derived::refresh(conn, &touched)) {
            Ok(refreshed) => {
                round.clamped += refreshed.clamped;
                touched.ids.iter().for_each(|id| context.workflows.insert(id));
            }
            Err(err) if is_data_error(&err) && group.len() > 1 => {
                let half = group.len() / 2;
                let mut group = group;
                let second = group.split_off(half);
                groups.push(group);
                groups.push(second);
            }
            Err(err) if is_data_error(&err) => {
                let (id, ..) = &group[0];
                tracing::warn!(workflow_id = %id, error = %err, "workflow quarantined");
                // Derived without its attempts (and without their times,
                // which may be what failed): its old rows leave the tables.
                let emptied = Touched {
                    ids: touched.ids.clone(),
                    maybe_known: touched.maybe_known.clone(),
                    ..Touched::default()
                };
                in_transaction(conn, |conn| {
                    quarantine(conn, id, &err.to_string())?;
                    derived::refresh(conn, &emptied)
                })?;
                round.quarantined += 1;
            }
            Err(err) => return Err(err),
        }
    }
    in_transaction(conn, |conn| advance(conn, upper))?;
    Ok(round)
}

/// Quarantine messages are kept to this many bytes (DuckDB's can repeat a
/// whole statement).
const MAX_QUARANTINE_ERROR_BYTES: usize = 2000;

pub(super) fn quarantine(conn: &Connection, workflow_id: &str, error: &str) -> Result<(), StoreError> {
    let mut error = error.to_string();
    if error.len() > MAX_QUARANTINE_ERROR_BYTES {
        let mut cut = MAX_QUARANTINE_ERROR_BYTES;
        while !error.is_char_boundary(cut) {
            cut -= 1;
        }
        error.truncate(cut);
    }
    conn.execute(
        "INSERT INTO quarantine (workflow_id, error, attempts)
         SELECT ?, ?, count(*) FROM attempts WHERE workflow_id = ?
           AND NOT EXISTS (SELECT 1 FROM quarantine WHERE workflow_id = ?)",
        duckdb::params![workflow_id, error, workflow_id, workflow_id],
    )?;
    Ok(())
}

/// A workflow id with the earliest and latest start of its new attempts
/// (`None` for a workflow that only lost attempts).
type TouchedRow = (String, Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// The workflows with attempts numbered in (from, upper], plus `emptied`
/// (workflows whose trace attempts were replaced), leaving out quarantined
/// ones. A workflow with an attempt whose start this build cannot read as
/// an instant (a row written past the decode bounds) is quarantined here,
/// inside the round's transaction, and derived as empty.
fn touched_rows(
    conn: &Connection,
    from: i64,
    upper: i64,
    emptied: &[String],
) -> Result<Vec<TouchedRow>, StoreError> {
    let mut rows: Vec<TouchedRow> = Vec::new();
    let mut unreadable: Vec<String> = Vec::new();
    let mut stmt = conn.prepare(
        "SELECT workflow_id, epoch_us(min(started_at)), epoch_us(max(started_at)) FROM attempts
         WHERE ingest_seq > ? AND ingest_seq <= ?
           AND workflow_id NOT IN (SELECT workflow_id FROM quarantine)
         GROUP BY workflow_id",
    )?;
    let found = stmt.query_map([from, upper], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
    })?;
    let mut seen: HashSet<String> = HashSet::new();
    for row in found {
        let (id, earliest, latest) = row?;
        seen.insert(id.clone());
        match (DateTime::from_timestamp_micros(earliest), DateTime::from_timestamp_micros(latest)) {
            (Some(earliest), Some(latest)) => rows.push((id, Some(earliest), Some(latest))),
            _ => unreadable.push(id),
        }
    }
    for id in unreadable {
        tracing::warn!(workflow_id = %id, "workflow quarantined: an attempt starts outside the instants this build reads");
        quarantine(
            conn,
            &id,
            "an attempt's started_at is outside the instants attempt-ledger can read (years -262143 to 262142)",
        )?;
        rows.push((id, None, None));
    }
    let quarantined: HashSet<String> = if emptied.is_empty() {
        HashSet::new()
    } else {
        conn.prepare("SELECT workflow_id FROM quarantine")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?
    };
    for id in emptied {
        if !seen.contains(id) && !quarantined.contains(id) {
            seen.insert(id.clone());
            rows.push((id.clone(), None, None));
        }
    }
    Ok(rows)
}

fn touched_of(rows: &[TouchedRow], workflows: &IdFilter) -> Touched {
    let mut touched = Touched::default();
    for (id, earliest, latest) in rows {
        touched.ids.push(id.clone());
        if workflows.may_hold(id) {
            touched.maybe_known.push(id.clone());
        }
        for t in [earliest, latest].into_iter().flatten() {
            touched.widen(*t);
        }
    }
    touched
}

fn touched_workflows(
    conn: &Connection,
    workflows: &IdFilter,
    from: i64,
    upper: i64,
    emptied: Vec<String>,
) -> Result<Touched, StoreError> {
    Ok(touched_of(&touched_rows(conn, from, upper, &emptied)?, workflows))
}

/// Derives again the calls of every trace with spans numbered in
/// (from, upper] that those spans change, and replaces their attempts (the
/// new ones are numbered `upper`, so step 2 of the round finds their
/// workflows). A trace's shape (ids, parents, kinds) is read whole, which
/// is cheap; span contents are decoded only for the calls whose shape the
/// new spans changed, so a trace grown export by export costs about what
/// the same spans cost at once. Returns the traces, and the workflows of
/// the replaced attempts.
pub(super) fn derive_traces(
    conn: &Connection,
    aliases: &ProviderAliases,
    from: i64,
    upper: i64,
) -> Result<(u64, Vec<String>), StoreError> {
    let traces: Vec<String> = conn
        .prepare("SELECT DISTINCT trace_id FROM spans WHERE ingest_seq > ? AND ingest_seq <= ? ORDER BY 1")?
        .query_map([from, upper], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    if traces.is_empty() {
        return Ok((0, Vec::new()));
    }
    conn.execute_batch(
        "DELETE FROM temp.batch_traces; DELETE FROM temp.trace_span_ids; DELETE FROM temp.trace_attempt_ids;",
    )?;
    temp::fill_column(conn, "batch_traces", "trace_id", traces.iter().map(String::as_str))?;
    // Every span of these traces, and every attempt derived from them, is
    // numbered at or after the trace's first write.
    let first: i64 = conn.query_row(
        "SELECT coalesce(min(first_seq), 0) FROM trace_spans WHERE trace_id IN (SELECT trace_id FROM temp.batch_traces)",
        [],
        |r| r.get(0),
    )?;
    let shapes = links_before_and_after(conn, first, from, upper)?;
    // The calls whose shape changed: their old attempts go (and any left by
    // an earlier try of this round), their new ones come.
    let mut changed: Vec<(String, String, CallSpans)> = Vec::new();
    let mut replaced: Vec<String> = Vec::new();
    let mut gaps: Vec<(String, u64, u64)> = Vec::new();
    for (trace, (before, after)) in &shapes {
        let after = trace_calls(after);
        if after.orphan_attempt_spans + after.ambiguous_calls > 0 {
            gaps.push((trace.clone(), after.orphan_attempt_spans, after.ambiguous_calls));
        }
        let changes = TraceCalls::changes(trace, &trace_calls(before), &after);
        replaced.extend(changes.retired_attempt_ids);
        changed.extend(changes.derive.into_iter().map(|(call, spans)| (trace.clone(), call, spans)));
    }
    temp::fill_column(conn, "trace_attempt_ids", "attempt_id", replaced.iter().map(String::as_str))?;
    let replaced_where = "ingest_seq >= ? AND source_trace IN (SELECT trace_id FROM temp.batch_traces)
                          AND attempt_id IN (SELECT attempt_id FROM temp.trace_attempt_ids)";
    let emptied: Vec<String> = conn
        .prepare(&format!("SELECT DISTINCT workflow_id FROM attempts WHERE {replaced_where}"))?
        .query_map([first], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    conn.execute(&format!("DELETE FROM attempts WHERE {replaced_where}"), [first])?;
    // A trace's attempts are one revision, numbered by the write of its
    // newest spans: the lake keeps each trace's newest revision whole
    // (docs/lake.md), so the calls that did not change are renumbered too.
    conn.execute(
        "UPDATE attempts SET ingest_seq = ?
         WHERE ingest_seq >= ? AND ingest_seq < ? AND source_trace IN (SELECT trace_id FROM temp.batch_traces)",
        [upper, first, upper],
    )?;
    // What each trace's shape could not account for, as of its spans now.
    conn.execute_batch(
        "DELETE FROM trace_gaps WHERE trace_id IN (SELECT trace_id FROM temp.batch_traces);
         DELETE FROM temp.batch_traces; DELETE FROM temp.trace_attempt_ids;",
    )?;
    store_trace_gaps(conn, &gaps)?;
    let mut derived = 0;
    for calls in by_span_count(&changed, DERIVE_CHUNK_SPANS) {
        derived += derive_calls(conn, calls, aliases, first, upper)?;
    }
    tracing::debug!(traces = traces.len(), calls = changed.len(), attempts = derived, "traces derived");
    Ok((traces.len() as u64, emptied))
}

/// Each trace's links before a round's spans, and after them.
type LinksByTrace = HashMap<String, (Vec<SpanLink>, Vec<SpanLink>)>;

/// The links of each trace of `temp.batch_traces` before this round's
/// spans (numbered up to `from`) and after them (up to `upper`); every span
/// of them is numbered at or after `first`. Spans stored before their facts
/// were (migration 0012) have them read from their content.
fn links_before_and_after(
    conn: &Connection,
    first: i64,
    from: i64,
    upper: i64,
) -> Result<LinksByTrace, StoreError> {
    let links = conn
        .prepare(
            "SELECT trace_id, span_id, parent_span_id, kind, ingest_seq, facts,
                    CASE WHEN facts IS NULL AND kind <> 'link' THEN span END
             FROM spans
             WHERE ingest_seq >= ? AND ingest_seq <= ? AND trace_id IN (SELECT trace_id FROM temp.batch_traces)",
        )?
        .query_map([first, upper], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Option<String>>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, i64>(4)?,
                row.get::<_, Option<String>>(5)?,
                row.get::<_, Option<Vec<u8>>>(6)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut shapes = LinksByTrace::new();
    for (trace_id, span_id, parent_span_id, kind, seq, facts, content) in links {
        let facts = match (facts, content) {
            (Some(json), _) => serde_json::from_str(&json).unwrap_or_default(),
            (None, Some(content)) => facts_of_stored(&content).unwrap_or_default(),
            (None, None) => SpanFacts::default(),
        };
        // A kind this binary does not know is kept for ancestry only.
        let link = SpanLink { span_id, parent_span_id, kind: kind.parse().unwrap_or(SpanKind::Link), facts };
        let (before, after) = shapes.entry(trace_id).or_default();
        if seq <= from {
            before.push(link.clone());
        }
        after.push(link);
    }
    Ok(shapes)
}

/// What each trace's shape could not account for, as of its spans now.
fn store_trace_gaps(conn: &Connection, gaps: &[(String, u64, u64)]) -> Result<(), StoreError> {
    let mut appender = conn.appender("trace_gaps")?;
    for (trace, orphans, ambiguous) in gaps {
        appender.append_row(params![trace, *orphans as i64, *ambiguous as i64])?;
    }
    appender.flush()?;
    Ok(())
}

/// Spans whose calls a derivation round derives at a time: what is read
/// of them, the attempts they become and their rows stay in the tens of
/// megabytes however many spans a round holds.
const DERIVE_CHUNK_SPANS: usize = 20_000;

/// `calls` in consecutive runs of about `spans` spans (at least one call a run).
fn by_span_count(
    calls: &[(String, String, CallSpans)],
    spans: usize,
) -> impl Iterator<Item = &[(String, String, CallSpans)]> {
    let mut rest = calls;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (mut end, mut held) = (0, 0);
        while end < rest.len() && (end == 0 || held + rest[end].2.spans(&rest[end].1).count() <= spans) {
            held += rest[end].2.spans(&rest[end].1).count();
            end += 1;
        }
        let (run, after) = rest.split_at(end);
        rest = after;
        Some(run)
    })
}

/// Derives `calls` from their stored spans (numbered `first` to `upper`)
/// and stores their attempts; returns how many.
fn derive_calls(
    conn: &Connection,
    calls: &[(String, String, CallSpans)],
    aliases: &ProviderAliases,
    first: i64,
    upper: i64,
) -> Result<usize, StoreError> {
    let needed: Vec<Vec<&str>> = calls
        .iter()
        .flat_map(|(trace, call, shape)| shape.spans(call).map(move |span| vec![trace.as_str(), span]))
        .collect();
    temp::fill(conn, "trace_span_ids", &["trace_id", "span_id"], needed)?;
    let records: Vec<SpanRecord> = conn
        .prepare(
            "SELECT s.trace_id, s.span_id, s.parent_span_id, s.kind, s.span FROM spans s
             SEMI JOIN temp.trace_span_ids n ON s.trace_id = n.trace_id AND s.span_id = n.span_id
             WHERE s.ingest_seq >= ? AND s.ingest_seq <= ?",
        )?
        .query_map([first, upper], |row| {
            Ok(SpanRecord {
                trace_id: row.get(0)?,
                span_id: row.get(1)?,
                parent_span_id: row.get(2)?,
                kind: row.get::<_, String>(3)?.parse().unwrap_or(SpanKind::Link),
                span: row.get(4)?,
                // The calls are already grouped: only the contents are read.
                facts: SpanFacts::default(),
            })
        })?
        .collect::<Result<_, _>>()?;
    conn.execute_batch("DELETE FROM temp.trace_span_ids;")?;
    let mut by_trace: HashMap<&str, HashMap<&str, &SpanRecord>> = HashMap::new();
    for record in &records {
        by_trace.entry(record.trace_id.as_str()).or_default().insert(record.span_id.as_str(), record);
    }
    let no_spans = HashMap::new();
    let derived: Vec<Attempt> = calls
        .iter()
        .flat_map(|(trace, call, shape)| {
            derive_call(call, shape, by_trace.get(trace.as_str()).unwrap_or(&no_spans))
        })
        .collect();
    let refs: Vec<&Attempt> = derived.iter().collect();
    append_attempts(conn, &refs, aliases, upper)?;
    Ok(derived.len())
}

/// The quarantined workflows: id, error, attempts, when.
pub type QuarantineRow = (String, String, u64, DateTime<Utc>);

pub(super) fn quarantined(conn: &Connection) -> Result<Vec<QuarantineRow>, StoreError> {
    let rows = conn
        .prepare("SELECT workflow_id, error, attempts, quarantined_at FROM quarantine ORDER BY quarantined_at, workflow_id")?
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, Value>(3)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(|(id, error, attempts, at)| Ok((id, error, attempts as u64, super::columns::timestamp(at)?)))
        .collect()
}

pub(super) fn quarantined_count(conn: &Connection) -> Result<u64, StoreError> {
    Ok(conn.query_row("SELECT count(*) FROM quarantine", [], |r| r.get::<_, i64>(0))? as u64)
}
