//! The only module that talks to DuckDB: schema, bulk writes, report queries.
//!
//! `Store` wraps one connection. DuckDB's `Connection` is `Send` but not
//! `Sync`, so a process holds one `Store` per thread; `try_clone` opens
//! another connection to the same database (readers beside one writer).

mod alerts;
mod migrate;
pub mod queries;
mod writer;

use std::path::Path;

use duckdb::Connection;

pub use migrate::{MIGRATIONS, schema_version};
pub use queries::{Query, ReportFilter, ReportRows};
pub use writer::{Batch, MAX_LISTED_CONFLICTS, MAX_SPANS_PER_TRACE, TraceDeriver, WriteStats};

use chrono::{DateTime, Utc};

use crate::alerts::AlertEvent;
use crate::model::Attempt;
use crate::pricing::PriceTable;
use crate::providers::ProviderAliases;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open database {path}: {source}")]
    Open { path: String, source: duckdb::Error },
    #[error(
        "database schema version {found} is newer than this attempt-ledger supports ({supported}); \
         upgrade attempt-ledger"
    )]
    SchemaTooNew { found: i64, supported: i64 },
    #[error("schema migration {version} failed: {source}")]
    Migration { version: i64, source: duckdb::Error },
    #[error("database error: {0}")]
    DuckDb(#[from] duckdb::Error),
    #[error("cannot build a record batch: {0}")]
    Arrow(#[from] duckdb::arrow::error::ArrowError),
}

/// First and last instant of something stored.
pub type Span = (DateTime<Utc>, DateTime<Utc>);

pub struct Store {
    conn: Connection,
    /// Maps received provider spellings to canonical names on write.
    aliases: std::sync::Arc<ProviderAliases>,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and brings its
    /// schema up to date.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = Connection::open(path)
            .map_err(|source| StoreError::Open { path: path.display().to_string(), source })?;
        Self::init(conn)
    }

    pub fn open_in_memory() -> Result<Self, StoreError> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> Result<Self, StoreError> {
        let applied = migrate::migrate(&conn, MIGRATIONS)?;
        writer::create_scratch(&conn)?;
        let store = Self { conn, aliases: std::sync::Arc::new(ProviderAliases::builtin()) };
        if applied.contains(&migrate::CANONICAL_PROVIDERS_VERSION) {
            // Rows stored before canonical names existed get them now.
            store.reapply_aliases()?;
        }
        Ok(store)
    }

    /// Another connection to the same database, for a reader or writer on
    /// another thread.
    pub fn try_clone(&self) -> Result<Self, StoreError> {
        let conn = self.conn.try_clone()?;
        writer::create_scratch(&conn)?;
        Ok(Self { conn, aliases: self.aliases.clone() })
    }

    /// Writes map provider spellings through `aliases` from now on (the
    /// shipped table is the default).
    pub fn with_aliases(mut self, aliases: ProviderAliases) -> Self {
        self.aliases = std::sync::Arc::new(aliases);
        self
    }

    /// Maps every stored row's received provider spellings through the
    /// alias table again; returns the rows visited.
    pub fn reapply_aliases(&self) -> Result<u64, StoreError> {
        self.conn.execute_batch("BEGIN TRANSACTION")?;
        let result = writer::reapply_aliases(&self.conn, &self.aliases);
        self.conn.execute_batch(if result.is_ok() { "COMMIT" } else { "ROLLBACK" })?;
        result
    }

    /// Stores attempt records in one transaction, skipping those already
    /// stored.
    pub fn write_batch(&self, attempts: &[Attempt]) -> Result<WriteStats, StoreError> {
        let batch = Batch { attempts, spans: &[] };
        let no_spans: TraceDeriver = &|_| Vec::new();
        Ok(writer::write_batches(&self.conn, &self.aliases, &[batch], no_spans)?.pop().unwrap_or_default())
    }

    /// Stores several batches in one transaction (group commit); each gets
    /// its own counts, an id being new for the first batch that has it.
    /// Traces that get new spans have their attempts derived again by
    /// `derive` from all their stored spans.
    pub fn write_batches(
        &self,
        batches: &[Batch],
        derive: TraceDeriver,
    ) -> Result<Vec<WriteStats>, StoreError> {
        writer::write_batches(&self.conn, &self.aliases, batches, derive)
    }

    /// Runs every report query over the workflows `filter` selects.
    pub fn report_rows(&self, filter: &ReportFilter, prices: &PriceTable) -> Result<ReportRows, StoreError> {
        self.report_rows_of(filter, prices, &Query::ALL)
    }

    /// Runs the report `queries` only; the rows of the others are empty.
    pub fn report_rows_of(
        &self,
        filter: &ReportFilter,
        prices: &PriceTable,
        queries: &[Query],
    ) -> Result<ReportRows, StoreError> {
        // One transaction: every query sees the same snapshot while the
        // writer goes on committing.
        self.conn.execute_batch("BEGIN TRANSACTION")?;
        let rows = queries::prepare_scope(&self.conn, filter, prices)
            .and_then(|_| queries::report_rows(&self.conn, filter, queries));
        self.conn.execute_batch(if rows.is_ok() { "COMMIT" } else { "ROLLBACK" })?;
        rows
    }

    /// The stored-data samples of `/metrics` over every stored workflow, in
    /// one transaction; `buckets` are the histogram upper bounds (seconds).
    pub fn metric_rows(
        &self,
        prices: &PriceTable,
        buckets: &[f64],
    ) -> Result<Vec<queries::MetricRow>, StoreError> {
        self.conn.execute_batch("BEGIN TRANSACTION")?;
        let rows = queries::prepare_scope(&self.conn, &ReportFilter::default(), prices)
            .and_then(|_| queries::metric_rows(&self.conn, buckets));
        self.conn.execute_batch(if rows.is_ok() { "COMMIT" } else { "ROLLBACK" })?;
        rows
    }

    /// One report query's result as an aligned text table, for snapshots
    /// and debugging.
    pub fn query_table(
        &self,
        query: Query,
        filter: &ReportFilter,
        prices: &PriceTable,
    ) -> Result<String, StoreError> {
        queries::prepare_scope(&self.conn, filter, prices)?;
        queries::pretty(&self.conn, query, filter)
    }

    /// Appends one alert state change to the history.
    pub fn record_alert_event(&self, event: &AlertEvent) -> Result<(), StoreError> {
        alerts::record(&self.conn, event)
    }

    /// The newest `limit` alert events, newest first.
    pub fn alert_history(&self, limit: usize) -> Result<Vec<AlertEvent>, StoreError> {
        alerts::history(&self.conn, limit)
    }

    /// Alerts whose last recorded state is firing (to resume after a restart).
    pub fn open_alerts(&self) -> Result<Vec<AlertEvent>, StoreError> {
        alerts::open(&self.conn)
    }

    /// First and last `started_at` stored; `None` when there is no attempt.
    pub fn attempt_span(&self) -> Result<Option<Span>, StoreError> {
        alerts::attempt_span(&self.conn)
    }

    pub fn attempt_count(&self) -> Result<u64, StoreError> {
        Ok(self.conn.query_row("SELECT count(*) FROM attempts", [], |row| row.get::<_, i64>(0))? as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database written before canonical provider names gets them when
    /// it is opened, and keeps the spelling it had.
    #[test]
    fn opening_an_older_database_canonicalises_its_providers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.duckdb");
        {
            let conn = Connection::open(&path).unwrap();
            migrate::migrate(&conn, &MIGRATIONS[..2]).unwrap();
            conn.execute_batch(
                "INSERT INTO attempts (attempt_id, workflow_id, started_at, provider, model, status, layer,
                                       served_provider, served_model, commit_state)
                 VALUES ('a', 'w', TIMESTAMP '2026-11-28 02:00:00', 'azure', 'gpt-4o', 'ok', 'app',
                         'bedrock', 'claude-sonnet-4-5', 'none')",
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let row: (String, String, String, String) = store
            .conn
            .query_row(
                "SELECT provider, served_provider, provider_received, served_provider_received FROM attempts",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!(row, ("azure.ai.openai".into(), "aws.bedrock".into(), "azure".into(), "bedrock".into()));
    }
}
