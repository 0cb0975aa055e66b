//! What each derived table costs on the write path. Every statement of a
//! derivation runs through `run` or `run_script`, timed and logged at debug
//! level under the target `attempt_ledger::derivation_cost` with the family
//! of derived tables it feeds; `scripts/bench.sh` sums them per attempt, so
//! a new table's cost shows in the numbers of the change that adds it.

use std::time::Instant;

use duckdb::Connection;

use super::error::StoreError;

/// Runs one statement (or a batch that feeds one family) and logs its time.
pub(super) fn run(conn: &Connection, family: &'static str, sql: &str) -> Result<(), StoreError> {
    timed(conn, family, "", sql)
}

fn timed(conn: &Connection, family: &'static str, statement: &str, sql: &str) -> Result<(), StoreError> {
    let began = Instant::now();
    conn.execute_batch(sql)?;
    let us = began.elapsed().as_micros() as u64;
    tracing::debug!(target: "attempt_ledger::derivation_cost", family, statement, us);
    Ok(())
}

/// Runs a query file statement by statement (each begins with `CREATE` at
/// the start of a line, as every derivation file's do), each logged under
/// the family of what it creates.
pub(super) fn run_script(conn: &Connection, sql: &str) -> Result<(), StoreError> {
    for statement in statements(sql) {
        let name = created(statement).unwrap_or_default();
        timed(conn, family_of(name), name, statement)?;
    }
    Ok(())
}

/// `sql` cut before each line that starts with `CREATE`, but the first
/// (what comes before a statement, comments, goes with it).
fn statements(sql: &str) -> Vec<&str> {
    let mut creates = sql.match_indices("\nCREATE ").map(|(at, _)| at + 1);
    if !sql.starts_with("CREATE ") {
        creates.next();
    }
    let starts: Vec<usize> = std::iter::once(0).chain(creates).collect();
    let ends = starts.iter().skip(1).copied().chain([sql.len()]);
    starts.iter().zip(ends).map(|(&from, until)| &sql[from..until]).collect()
}

/// The name a `CREATE [OR REPLACE] [TEMP] TABLE|VIEW|MACRO name` statement
/// creates.
fn created(statement: &str) -> Option<&str> {
    let line = statement.lines().find(|l| l.starts_with("CREATE "))?;
    let mut words = line.split_whitespace().skip_while(|w| !matches!(*w, "TABLE" | "VIEW" | "MACRO"));
    words.next()?;
    words.next().map(|name| name.split('(').next().unwrap_or(name))
}

/// The family of derived tables a scratch or stored table belongs to: the
/// derived tables' own (`derived_tables.rs`), or the scratch that feeds
/// them.
pub(super) fn family_of(table: &str) -> &'static str {
    let table = table.trim_start_matches("temp.");
    match table {
        "fact_ordered" | "fact_attempts" => "attempt order (shared)",
        "fact_workflows" => "facts",
        "label_values" => "labels",
        "finding_rows" => "finding rollups",
        _ => super::derived_tables::family_of(table).unwrap_or("other"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_is_cut_at_each_create_and_named_by_what_it_creates() {
        let sql = "-- header\nCREATE OR REPLACE TEMP MACRO m(x) AS x;\n\n-- why\nCREATE OR REPLACE TEMP TABLE new_steps AS\nSELECT 1;\nCREATE TEMP VIEW fact_attempts AS SELECT 2;\n";
        let cut = statements(sql);
        assert_eq!(cut.len(), 3, "{cut:?}");
        assert_eq!(cut.concat(), sql, "nothing lost");
        let names: Vec<_> = cut.iter().map(|s| created(s)).collect();
        assert_eq!(names, [Some("m"), Some("new_steps"), Some("fact_attempts")]);
        assert_eq!(statements("CREATE TABLE a AS SELECT 1;"), ["CREATE TABLE a AS SELECT 1;"]);
    }

    /// Every statement of the derivation files creates something with a family.
    #[test]
    fn every_statement_of_the_derivation_files_is_named() {
        use super::super::derived::{FACTS_SQL, FINDING_ROLLUPS_SQL, ROLLUPS_SQL, STEP_ROLLUPS_SQL};
        for script in [FACTS_SQL, ROLLUPS_SQL, FINDING_ROLLUPS_SQL, STEP_ROLLUPS_SQL] {
            for statement in statements(script) {
                let name = created(statement).unwrap_or_else(|| panic!("no CREATE in {statement}"));
                let macro_ = statement.contains("MACRO");
                assert!(macro_ || family_of(name) != "other", "{name}");
            }
        }
    }
}
