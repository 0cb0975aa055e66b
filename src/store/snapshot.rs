//! One read of the stored data: every query of one answer in one
//! transaction (`Store::snapshot`), so a dashboard page's report and its
//! chart, or a report and its audit, come from the same commit while the
//! writer goes on committing; the prices are loaded once for all of them.

use std::cell::Cell;

use duckdb::Connection;

use super::error::StoreError;
use super::queries::{self, AuditRow, MetricRow, Query, ReportRows, SeriesRow};
use super::{derived, tune};
use attempt_core::pricing::PriceTable;
use attempt_core::request::{AuditFilter, ReportFilter, SeriesRange};

pub struct Snapshot<'a> {
    conn: &'a Connection,
    prices: &'a PriceTable,
    priced: Cell<bool>,
}

impl<'a> Snapshot<'a> {
    /// A snapshot on `conn`, which is inside a transaction (`in_transaction`).
    pub(super) fn new(conn: &'a Connection, prices: &'a PriceTable) -> Snapshot<'a> {
        Snapshot { conn, prices, priced: Cell::new(false) }
    }

    /// Loads the prices of the served models into `temp.prices`, once.
    pub(super) fn priced(&self) -> Result<(), StoreError> {
        if !self.priced.get() {
            super::prices::load(self.conn, self.prices)?;
            self.priced.set(true);
        }
        Ok(())
    }

    /// The report `queries` of the workflows `filter` selects (the rows of
    /// the others empty), grouped by its dimension when it names one.
    pub fn report_rows(&self, filter: &ReportFilter, queries: &[Query]) -> Result<ReportRows, StoreError> {
        let group = match &filter.group_by {
            Some(name) => Some(dimension_slot(self.conn, name)?),
            None => None,
        };
        self.priced()?;
        queries::scope_of(self.conn, filter, "false")?;
        queries::price_primaries(self.conn, queries, self.prices)?;
        let mut rows = queries::report_rows(self.conn, filter, queries)?;
        if let Some((slot, dimension)) = group {
            rows.groups = Some(queries::Groups { rows: queries::group_rows(self.conn, slot)?, dimension });
        }
        Ok(rows)
    }

    /// The recovery findings of the workflows `filter` selects
    /// (`queries/audit.sql`).
    pub fn audit_rows(&self, filter: &AuditFilter) -> Result<Vec<AuditRow>, StoreError> {
        self.priced()?;
        queries::audit_rows(self.conn, filter, self.prices)
    }

    /// Workflows by outcome, and attempts and cost by served provider, per
    /// bucket of `range` (`queries/timeseries.sql`).
    pub fn series_rows(&self, range: &SeriesRange) -> Result<Vec<SeriesRow>, StoreError> {
        self.priced()?;
        queries::series_rows(self.conn, range)
    }

    /// Runs `work` over the scope of `filter` for the reads of one `tune`
    /// answer (`tune::TuneScope`). `names` says which workflow names the
    /// answer tells apart: a name the rollups fold past the label limit
    /// makes every read take the workflows from their own rows, names whole.
    pub fn tune<T>(
        &self,
        filter: &ReportFilter,
        names: tune::Names,
        work: impl FnOnce(&tune::TuneScope) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let sections = match names {
            tune::Names::Sections(sections) => sections,
            tune::Names::Every => &[],
        };
        tune::set_sections(self.conn, sections)?;
        let folded =
            "(SELECT count(*) FROM label_values WHERE label = 'workflow') >= getvariable('label_limit')";
        let unfold = match names {
            tune::Names::Every => folded.to_string(),
            tune::Names::Sections(_) => format!(
                "{folded} AND EXISTS (SELECT 1 FROM temp.tune_sections s
                                      WHERE s.name = 'other'
                                         OR s.name NOT IN (SELECT value FROM label_values WHERE label = 'workflow'))"
            ),
        };
        self.priced()?;
        queries::scope_of(self.conn, filter, &unfold)?;
        let answer = work(&tune::TuneScope { conn: self.conn, filter })?;
        self.conn.execute_batch(
            "DROP TABLE temp.tune_sections; DROP TABLE IF EXISTS temp.tune_plans;
             DROP VIEW IF EXISTS temp.tune_shape_sums; DROP TABLE IF EXISTS temp.r_shapes;",
        )?;
        Ok(answer)
    }

    /// The stored-data samples of `/metrics` over every stored workflow
    /// (histogram bounds: `model::LATENCY_BUCKETS`).
    pub fn metric_rows(&self) -> Result<Vec<MetricRow>, StoreError> {
        self.priced()?;
        queries::scope_of(self.conn, &ReportFilter::default(), "false")?;
        queries::metric_rows(self.conn)
    }
}

/// The slot of the dimension called `name`, and its name.
fn dimension_slot(conn: &Connection, name: &str) -> Result<(usize, String), StoreError> {
    let configured = derived::load_dimensions(conn)?;
    configured.iter().find(|(_, d)| d.name == name).map(|(slot, d)| (*slot, d.name.clone())).ok_or_else(
        || {
            let names: Vec<&str> = configured.iter().map(|(_, d)| d.name.as_str()).collect();
            StoreError::UnknownDimension {
                name: name.to_string(),
                configured: if names.is_empty() { "none".to_string() } else { names.join(", ") },
            }
        },
    )
}
