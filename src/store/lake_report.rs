//! `report --lake` by SQL alone: the lake's rows deduplicated and derived
//! in one pass into the shape the node's own report queries read
//! (`queries/lake/scope.sql`, priced by cost.sql's `costed_rows`), then those
//! queries. Nothing is stored, so a read costs a few scans and sorts of the
//! window's rows, not the write path's derivation into every derived table
//! (`load_lake`, which `report --lake --every-section` still takes).

use attempt_core::pricing::PriceTable;
use attempt_core::request::ReportFilter;

use super::error::StoreError;
use super::lake::{quoted, timestamp_sql};
use super::queries::{self, Query, ReportRows};
use super::{Horizon, LakeFiles, Store};

const LAKE_SCOPE_SQL: &str = include_str!("../../queries/lake/scope.sql");

/// The report sections a lake read derives by SQL: those Spark's and
/// ClickHouse's reports derive too (`queries/lake/spark/report.sql`).
pub const LAKE_QUERIES: [Query; 6] = [
    Query::Outcomes,
    Query::Waste,
    Query::CostByServed,
    Query::Amplification,
    Query::Routes,
    Query::Fallbacks,
];

/// What a lake read found, and the rows of `LAKE_QUERIES`.
#[derive(Debug, Clone)]
pub struct LakeReportRows {
    /// Rows read inside the horizon: every stored copy of an attempt.
    pub copies: u64,
    /// Attempts left once copies and superseded trace revisions are dropped.
    pub attempts: u64,
    /// Attempts of the reported workflows the lake holds outside the
    /// horizon (0 without a window: everything was read).
    pub outside: u64,
    pub rows: ReportRows,
}

impl Store {
    /// The report rows of the workflows `filter` selects among the lake's
    /// `files`, read inside `horizon`, priced by `prices`.
    pub fn lake_report_rows(
        &self,
        files: LakeFiles,
        horizon: Horizon,
        filter: &ReportFilter,
        prices: &PriceTable,
    ) -> Result<LakeReportRows, StoreError> {
        let absent = self.absent_added_columns(&files)?;
        let optional = |value: Option<String>| value.unwrap_or_else(|| "NULL".to_string());
        self.in_transaction(|conn| {
            conn.execute_batch(&format!(
                "SET preserve_insertion_order = false;
                 CREATE OR REPLACE TEMP VIEW lake_rows AS SELECT *{absent} FROM {files} WHERE {inside};
                 SET VARIABLE lake_since = {since}::TIMESTAMP;
                 SET VARIABLE lake_until = {until}::TIMESTAMP;
                 SET VARIABLE lake_workflow = {workflow}::VARCHAR;",
                files = files.sql(),
                inside = horizon.condition(),
                since = optional(filter.since.map(timestamp_sql)),
                until = optional(filter.until.map(timestamp_sql)),
                workflow = optional(filter.workflow.as_deref().map(quoted)),
            ))?;
            conn.execute_batch(LAKE_SCOPE_SQL)?;
            super::prices::create(conn)?;
            super::prices::price_keys(
                conn,
                prices,
                "SELECT DISTINCT served_provider, served_model, price_key FROM temp.lake_attempt_groups",
            )?;
            conn.execute_batch(
                "CREATE OR REPLACE TEMP TABLE scope_attempts AS SELECT * FROM costed_rows(lake_attempt_groups);",
            )?;
            let (copies, attempts): (i64, i64) = conn.query_row(
                "SELECT copies, attempts FROM temp.lake_counts",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let outside: i64 = if horizon.from.is_none() && horizon.until.is_none() {
                0
            } else {
                conn.query_row(
                    &format!(
                        "SELECT count(DISTINCT attempt_id) FROM {files}
                         WHERE NOT ({inside})
                           AND workflow_id IN (SELECT workflow_id FROM temp.scope_workflows)",
                        files = files.sql(),
                        inside = horizon.condition(),
                    ),
                    [],
                    |r| r.get(0),
                )?
            };
            let rows = queries::report_rows(conn, filter, &LAKE_QUERIES)?;
            conn.execute_batch(
                "DROP TABLE temp.lake_counts; DROP TABLE temp.lake_workflows;
                 DROP TABLE temp.lake_attempt_groups; DROP TABLE temp.scope_workflows; DROP TABLE temp.scope_attempts;
                 DROP VIEW temp.lake_rows;",
            )?;
            Ok(LakeReportRows { copies: copies as u64, attempts: attempts as u64, outside: outside as u64, rows })
        })
    }
}
