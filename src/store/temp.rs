//! Filling a connection's scratch tables (the `temp` schema) with text
//! columns from Rust, through one Arrow batch and an appender.

use std::sync::Arc;

use duckdb::Connection;
use duckdb::arrow::array::{ArrayRef, RecordBatch, StringBuilder};

use super::error::StoreError;

/// Appends `rows` (each one value per column) to `temp.<table>`.
pub(super) fn fill<'a>(
    conn: &Connection,
    table: &str,
    columns: &[&str],
    rows: impl IntoIterator<Item = Vec<&'a str>>,
) -> Result<(), StoreError> {
    let mut builders: Vec<StringBuilder> = columns.iter().map(|_| StringBuilder::new()).collect();
    for row in rows {
        for (builder, value) in builders.iter_mut().zip(row) {
            builder.append_value(value);
        }
    }
    let arrays = columns.iter().zip(builders.iter_mut()).map(|(c, b)| (*c, Arc::new(b.finish()) as ArrayRef));
    let batch = RecordBatch::try_from_iter(arrays)?;
    let mut appender = conn.appender_to_catalog_and_db(table, "temp", "main")?;
    appender.append_record_batch(batch)?;
    appender.flush()?;
    Ok(())
}

/// Appends `values` to the one-column `temp.<table>`.
pub(super) fn fill_column<'a>(
    conn: &Connection,
    table: &str,
    column: &str,
    values: impl IntoIterator<Item = &'a str>,
) -> Result<(), StoreError> {
    fill(conn, table, &[column], values.into_iter().map(|v| vec![v]))
}
