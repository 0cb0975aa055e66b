//! Bulk writes. A batch is appended to a connection-local staging table with
//! DuckDB's Appender, then moved into `attempts` minus the ids already
//! stored or repeated earlier in the batch, all in one transaction: a batch
//! is stored whole or not at all, and an attempt is stored once however many
//! times it is delivered.

use duckdb::types::{TimeUnit, Value};
use duckdb::{Connection, ToSql};

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

const COLUMNS: &str = "attempt_id, workflow_id, started_at, provider, model, status, attempt, \
    workflow, layer, route, served_provider, served_model, provider_request_id, duration_ms, \
    ttft_ms, http_status, error_class, error_code, retry_after_ms, input_tokens, output_tokens, \
    cached_input_tokens, cost_pusd, commit_state, visible_output, decision, circuit, extra";

pub(super) fn create_staging(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(&format!(
        "CREATE TEMP TABLE IF NOT EXISTS staging AS
             SELECT {COLUMNS}, 0::BIGINT AS arrival FROM attempts LIMIT 0;"
    ))?;
    Ok(())
}

pub(super) fn write_batch(conn: &Connection, attempts: &[Attempt]) -> Result<WriteStats, StoreError> {
    if attempts.is_empty() {
        return Ok(WriteStats::default());
    }
    conn.execute_batch("BEGIN TRANSACTION")?;
    match stage_and_merge(conn, attempts) {
        Ok(inserted) => {
            conn.execute_batch("COMMIT")?;
            let inserted = inserted as u64;
            Ok(WriteStats { inserted, duplicates: attempts.len() as u64 - inserted })
        }
        Err(err) => {
            // The staging rows vanish with the rollback too.
            let _ = conn.execute_batch("ROLLBACK");
            Err(err)
        }
    }
}

fn stage_and_merge(conn: &Connection, attempts: &[Attempt]) -> Result<usize, StoreError> {
    {
        let mut appender = conn.appender_to_catalog_and_db("staging", "temp", "main")?;
        for (arrival, a) in attempts.iter().enumerate() {
            let row: [&dyn ToSql; 29] = [
                &a.attempt_id,
                &a.workflow_id,
                &Value::Timestamp(TimeUnit::Microsecond, a.started_at.timestamp_micros()),
                &a.provider,
                &a.model,
                &name(a.status),
                &a.attempt,
                &a.workflow,
                &name(a.layer),
                &a.route.map(name),
                &a.served_provider,
                &a.served_model,
                &a.provider_request_id,
                &a.duration_ms,
                &a.ttft_ms,
                &a.http_status,
                &a.error_class.map(name),
                &a.error_code,
                &a.retry_after_ms,
                &a.tokens.input,
                &a.tokens.output,
                &a.tokens.cached_input,
                &a.cost.map(|c| c.0),
                &name(a.commit_state),
                &a.visible_output,
                &a.decision.map(name),
                &a.circuit.map(name),
                &a.extra,
                &(arrival as i64),
            ];
            appender.append_row(row.as_slice())?;
        }
        // Errors surface at flush; Drop would swallow them.
        appender.flush()?;
    }
    let inserted = conn.execute(
        &format!(
            "INSERT INTO attempts ({COLUMNS})
             SELECT {COLUMNS} FROM temp.staging s
             WHERE NOT EXISTS (SELECT 1 FROM attempts a WHERE a.attempt_id = s.attempt_id)
             QUALIFY row_number() OVER (PARTITION BY attempt_id ORDER BY arrival) = 1"
        ),
        [],
    )?;
    conn.execute_batch("DELETE FROM temp.staging")?;
    Ok(inserted)
}
