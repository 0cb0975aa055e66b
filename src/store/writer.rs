//! Bulk writes. In one transaction per batch: drop ids repeated within the
//! batch (first wins), look up which of the remaining ids are already
//! stored, and append only the new attempts, as one Arrow record batch, to
//! `attempts`. A batch is stored whole or not at all, and an attempt is
//! stored once however many times it is delivered.

use std::collections::HashSet;
use std::sync::Arc;

use duckdb::Connection;
use duckdb::arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder,
    TimestampMicrosecondBuilder,
};

use super::StoreError;
use crate::model::{Attempt, name};

/// What one batch did to the store.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WriteStats {
    /// Attempts stored for the first time.
    pub inserted: u64,
    /// Attempts whose id was already stored, or repeated within the batch.
    pub duplicates: u64,
}

impl std::ops::AddAssign for WriteStats {
    fn add_assign(&mut self, other: Self) {
        self.inserted += other.inserted;
        self.duplicates += other.duplicates;
    }
}

/// The columns the writer fills, in `to_record_batch`'s order;
/// `ingested_at` takes its default.
const COLUMNS: [&str; 28] = [
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
];

pub(super) fn create_scratch(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch("CREATE TEMP TABLE IF NOT EXISTS batch_ids (attempt_id VARCHAR);")?;
    Ok(())
}

/// Writes several batches (one per request, say) in one transaction and
/// tells each what it stored: an id is new for the first batch that has it.
pub(super) fn write_batches(
    conn: &Connection,
    batches: &[&[Attempt]],
) -> Result<Vec<WriteStats>, StoreError> {
    if batches.iter().all(|b| b.is_empty()) {
        return Ok(vec![WriteStats::default(); batches.len()]);
    }
    conn.execute_batch("BEGIN TRANSACTION")?;
    match append_new(conn, batches) {
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

fn append_new(conn: &Connection, batches: &[&[Attempt]]) -> Result<Vec<WriteStats>, StoreError> {
    let began = std::time::Instant::now();
    let total: usize = batches.iter().map(|b| b.len()).sum();
    let mut seen = HashSet::with_capacity(total);
    // (batch index, attempt) for each id's first occurrence.
    let unique: Vec<(usize, &Attempt)> = batches
        .iter()
        .enumerate()
        .flat_map(|(i, b)| b.iter().map(move |a| (i, a)))
        .filter(|(_, a)| seen.insert(a.attempt_id.as_str()))
        .collect();

    let candidates: Vec<&Attempt> = unique.iter().map(|(_, a)| *a).collect();
    let stored = already_stored(conn, &candidates)?;
    let mut stats: Vec<WriteStats> =
        batches.iter().map(|b| WriteStats { inserted: 0, duplicates: b.len() as u64 }).collect();
    let mut new = Vec::with_capacity(unique.len());
    for (batch, attempt) in unique {
        if !stored.contains(&attempt.attempt_id) {
            stats[batch].inserted += 1;
            stats[batch].duplicates -= 1;
            new.push(attempt);
        }
    }
    let looked_up = began.elapsed();
    if !new.is_empty() {
        let mut appender = conn.appender_with_columns("attempts", &COLUMNS)?;
        appender.append_record_batch(to_record_batch(&new)?)?;
        // Errors surface at flush; Drop would swallow them.
        appender.flush()?;
    }
    tracing::debug!(
        batch = total,
        inserted = new.len(),
        lookup_ms = looked_up.as_millis() as u64,
        append_ms = (began.elapsed() - looked_up).as_millis() as u64,
        "batch written"
    );
    Ok(stats)
}

/// The ids of `batch` that `attempts` already holds.
fn already_stored(conn: &Connection, batch: &[&Attempt]) -> Result<HashSet<String>, StoreError> {
    let mut ids = StringBuilder::with_capacity(batch.len(), batch.len() * 32);
    for a in batch {
        ids.append_value(&a.attempt_id);
    }
    let ids = RecordBatch::try_from_iter([("attempt_id", Arc::new(ids.finish()) as ArrayRef)])?;
    {
        let mut appender = conn.appender_to_catalog_and_db("batch_ids", "temp", "main")?;
        appender.append_record_batch(ids)?;
        appender.flush()?;
    }
    let stored = conn
        .prepare(
            "SELECT attempt_id FROM attempts
             WHERE attempt_id IN (SELECT attempt_id FROM temp.batch_ids)",
        )?
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<Result<HashSet<_>, _>>()?;
    conn.execute_batch("DELETE FROM temp.batch_ids")?;
    Ok(stored)
}

fn to_record_batch(attempts: &[&Attempt]) -> Result<RecordBatch, StoreError> {
    let n = attempts.len();
    let strings = |f: &dyn Fn(&Attempt) -> Option<&str>| {
        let mut b = StringBuilder::with_capacity(n, n * 16);
        for a in attempts {
            b.append_option(f(a));
        }
        Arc::new(b.finish()) as ArrayRef
    };
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
    for a in attempts {
        started_at.append_value(a.started_at.timestamp_micros());
        http_status.append_option(a.http_status);
        visible_output.append_option(a.visible_output);
    }
    let columns: [ArrayRef; 28] = [
        strings(&|a| Some(&a.attempt_id)),
        strings(&|a| Some(&a.workflow_id)),
        Arc::new(started_at.finish()),
        strings(&|a| Some(&a.provider)),
        strings(&|a| Some(&a.model)),
        strings(&|a| Some(name(a.status))),
        ints(&|a| a.attempt),
        strings(&|a| a.workflow.as_deref()),
        strings(&|a| Some(name(a.layer))),
        strings(&|a| a.route.map(name)),
        strings(&|a| Some(&a.served_provider)),
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
    ];
    Ok(RecordBatch::try_from_iter(COLUMNS.into_iter().zip(columns))?)
}
