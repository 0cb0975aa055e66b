//! The shapes replays read (migrations/0017_shapes.sql): `shape_steps`,
//! every stored shape once (`queries/shapes.sql`), and `total_shapes`,
//! their attempts summed by position (`queries/shape_rollups.sql`). Like
//! the other derived tables, a pure function of the distinct attempts:
//! kept by every write inside its transaction and made again by a rebuild.

use duckdb::Connection;

use super::columns::SPEND_MEASURES;
use super::cost;
use super::error::StoreError;

pub(super) const SHAPE_ROLLUPS_SQL: &str = include_str!("../../queries/shape_rollups.sql");
const SHAPES_SQL: &str = include_str!("../../queries/shapes.sql");

/// After a write: adds its new shapes, its signed difference of sums
/// (`temp.rollup_steps_source`, new steps minus old), and drops the shapes
/// no workflow has any more. Needs `temp.new_steps` and `temp.old_steps`.
pub(super) fn refresh(conn: &Connection) -> Result<(), StoreError> {
    cost::run(conn, "shapes", SHAPES_SQL)?;
    sum_steps(conn)?;
    merge(conn)?;
    cost::run(
        conn,
        "shapes",
        "DELETE FROM shape_steps
         WHERE shape_key IN (SELECT shape_key FROM temp.old_steps)
           AND shape_key NOT IN (SELECT shape_key FROM total_shapes);",
    )?;
    Ok(())
}

/// Both tables again from every stored step (`temp.rollup_steps_source`
/// over all of them).
pub(super) fn rebuild(conn: &Connection) -> Result<(), StoreError> {
    sum_steps(conn)?;
    conn.execute_batch(
        "DELETE FROM total_shapes; INSERT INTO total_shapes BY NAME SELECT * FROM temp.r_shapes;
         DROP TABLE temp.r_shapes;
         DELETE FROM shape_steps; CREATE OR REPLACE TEMP VIEW new_steps AS SELECT * FROM workflow_steps;",
    )?;
    conn.execute_batch(SHAPES_SQL)?;
    conn.execute_batch("DROP VIEW temp.new_steps;")?;
    Ok(())
}

/// `temp.r_shapes`: the sums of `temp.rollup_steps_source`.
fn sum_steps(conn: &Connection) -> Result<(), StoreError> {
    conn.execute_batch(
        "CREATE OR REPLACE TEMP VIEW shape_steps_source AS SELECT * FROM temp.rollup_steps_source;",
    )?;
    cost::run(conn, "shapes", SHAPE_ROLLUPS_SQL)?;
    conn.execute_batch("DROP VIEW temp.shape_steps_source;")?;
    Ok(())
}

/// Adds `temp.r_shapes` to `total_shapes`. Unlike the other totals (a row
/// per label combination, rewritten whole), it holds a row per position of
/// every shape (a sixth of the steps of a storm), so a write merges its
/// difference in place; a row whose every measure comes to 0 goes.
fn merge(conn: &Connection) -> Result<(), StoreError> {
    let keys =
        ["shape_key", "seq", "served_provider", "served_model", "cost_kind", "price_key", "priced_kinds"];
    let on: Vec<String> = keys.iter().map(|k| format!("t.{k} IS NOT DISTINCT FROM d.{k}")).collect();
    let zero: Vec<String> = SPEND_MEASURES.iter().map(|m| format!("t.{m} + d.{m} = 0")).collect();
    let add: Vec<String> = SPEND_MEASURES.iter().map(|m| format!("{m} = t.{m} + d.{m}")).collect();
    cost::run(
        conn,
        "shapes",
        &format!(
            "MERGE INTO total_shapes t USING temp.r_shapes d
         ON t.workflow_name IS NOT DISTINCT FROM d.workflow_name AND {on}
         WHEN MATCHED AND {zero} THEN DELETE
         WHEN MATCHED THEN UPDATE SET {add}
         WHEN NOT MATCHED THEN INSERT BY NAME;
         DROP TABLE temp.r_shapes;",
            on = on.join(" AND "),
            zero = zero.join(" AND "),
            add = add.join(", "),
        ),
    )?;
    Ok(())
}
