//! The rows `tune` reads, in one snapshot (`TuneScope`): the report, the
//! curve (`queries/tune_curve.sql`) and, for a replay, the window's shapes
//! (`queries/tune_shapes.sql`), the sums of what each shape's plan keeps
//! (`queries/tune_replay.sql`) and the times of the workflows a plan
//! changes, or every step of the retried workflows a replay must take one
//! by one (`queries/tune_steps.sql`), as `attempt_core::replay` reads them.

use duckdb::Connection;

use super::columns::{FromRow, row_struct};
use super::error::StoreError;
use super::queries::{self, Query, ReportRows};

mod scope;
mod shapes;
mod steps;

pub use scope::{Names, TuneScope};
pub use shapes::{ChangedWorkflow, OutcomeCounts, PlanRow, ReplaySum, ShapeCount, Shapes};
pub use steps::ReplayRows;

const CURVE_SQL: &str = include_str!("../../queries/tune_curve.sql");

/// The report queries a `tune` answer is set beside: the workflows by
/// outcome (by name, for `--suggest`) and the waste totals.
const REPORT_QUERIES: [Query; 2] = [Query::Outcomes, Query::Waste];

impl TuneScope<'_> {
    /// The report rows of the workflows in scope that a replay is compared
    /// with (`REPORT_QUERIES`; the others are empty).
    pub fn report_rows(&self) -> Result<ReportRows, StoreError> {
        queries::report_rows(self.conn, self.filter, &REPORT_QUERIES)
    }

    pub fn curve_rows(&self) -> Result<Vec<CurveRow>, StoreError> {
        curve_rows(self.conn)
    }

    /// Numbers the policy sections by name (1, 2, ...: `PlanRow::section`);
    /// any other name replays under section 0.
    pub fn set_sections(&self, names: &[String]) -> Result<(), StoreError> {
        set_sections(self.conn, names)
    }
}

row_struct! {
    /// One row of `queries/tune_curve.sql`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct CurveRow {
        pub step: String,
        pub position: Option<i64>,
        pub and_later: bool,
        pub layer: String,
        pub after_class: String,
        pub primary_route: String,
        pub undelivered_before: i64,
        pub delivered: i64,
        pub attempts: i64,
        pub tokens: i128,
        pub cost_pusd: i128,
        pub unknown_cost_attempts: i64,
        pub elapsed_ms: f64,
    }
}

pub(super) fn curve_rows(conn: &Connection) -> Result<Vec<CurveRow>, StoreError> {
    let began = std::time::Instant::now();
    super::queries::sum_edges(conn, super::derived::STEP_ROLLUPS_SQL, &[("r_steps", "rollup_steps")])?;
    let edges = began.elapsed();
    conn.execute_batch(CURVE_SQL)?;
    let mut stmt = conn.prepare(
        "SELECT * FROM temp.tune_curve
         ORDER BY step DESC, position, layer <> 'all', after_class <> 'all', primary_route <> 'all',
                  layer, after_class, primary_route",
    )?;
    let rows = stmt.query_map([], CurveRow::from_row)?.collect::<Result<Vec<_>, _>>()?;
    conn.execute_batch("DROP TABLE temp.tune_curve; DROP TABLE temp.r_steps;")?;
    tracing::debug!(
        query = "tune_curve.sql",
        rows = rows.len(),
        edges_ms = edges.as_millis() as u64,
        elapsed_ms = began.elapsed().as_millis() as u64
    );
    Ok(rows)
}

pub(super) fn set_sections(conn: &Connection, names: &[String]) -> Result<(), StoreError> {
    conn.execute_batch("CREATE OR REPLACE TEMP TABLE tune_sections (name VARCHAR);")?;
    super::temp::fill_column(conn, "tune_sections", "name", names.iter().map(String::as_str))?;
    // A section's number is its place (the appender keeps the order).
    conn.execute_batch(if names.is_empty() {
        "CREATE OR REPLACE TEMP MACRO tune_section(workflow_name) AS 0;"
    } else {
        "CREATE OR REPLACE TEMP TABLE tune_sections AS
         SELECT name, (row_number() OVER (ORDER BY rowid))::INTEGER AS section FROM temp.tune_sections;
         CREATE OR REPLACE TEMP MACRO tune_section(workflow_name) AS
             coalesce((SELECT s.section FROM temp.tune_sections s WHERE s.name = workflow_name), 0);"
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A store holding `workflows` simulated workflows of `scenario`, written
    /// `batch` lines at a time.
    pub(super) fn simulated_store(
        scenario: crate::simulate::Scenario,
        workflows: u64,
        seed: u64,
        batch: usize,
    ) -> crate::store::Store {
        use crate::simulate::{SimOptions, default_start, simulate_with_truth};
        let options =
            SimOptions { scenario, workflows: Some(workflows), seed, start: default_start(), span: None };
        let mut out = Vec::new();
        simulate_with_truth(&options, &mut out).unwrap();
        let store = crate::store::Store::open_in_memory().unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for chunk in lines.chunks(batch) {
            store
                .write_batch(&attempt_core::ingest::jsonl::decode_lines(&chunk.join("\n"), 1).attempts)
                .unwrap();
        }
        store
    }
}
