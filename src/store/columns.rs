//! The seam between a query's columns and Rust: a row struct declared with
//! `row_struct!` reads each field from the column of the same name, so a
//! column is spelled once in its `.sql` file and once as a field. A field
//! whose column needs more than `Row::get` (an enum's spelling, a
//! timestamp, a route key over three columns) names its reader after `=>`.

use chrono::{DateTime, Utc};
use duckdb::Row;
use duckdb::types::{TimeUnit, Value};

use attempt_core::request::RouteKey;

/// A value read from one query row.
pub trait FromRow: Sized {
    fn from_row(row: &Row<'_>) -> duckdb::Result<Self>;
}

/// Declares a struct and its `FromRow`: each field is read from the column
/// named like it, with `Row::get`, or with the reader after `=>`
/// (`fn(&Row, column: &str) -> duckdb::Result<T>`).
macro_rules! row_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$field_meta:meta])* $field_vis:vis $field:ident : $ty:ty $(=> $read:expr)? ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$field_meta])* $field_vis $field: $ty, )*
        }

        impl $crate::store::columns::FromRow for $name {
            fn from_row(row: &duckdb::Row<'_>) -> duckdb::Result<Self> {
                Ok($name {
                    $( $field: $crate::store::columns::column!(row, stringify!($field) $(, $read)?), )*
                })
            }
        }
    };
}

/// One field's read: `Row::get` by default.
macro_rules! column {
    ($row:expr, $column:expr) => {
        $row.get($column)?
    };
    ($row:expr, $column:expr, $read:expr) => {
        ($read)($row, $column)?
    };
}

pub(crate) use {column, row_struct};

/// The measures of a group of attempts: their count, tokens and the
/// emitter's cost.
pub(super) const SPEND_MEASURES: &[&str] = &[
    "attempts",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "emitter_cost_pusd",
    "reasoning_output_tokens",
    "cache_write_1h_input_tokens",
    "web_search_requests",
];

fn conversion(column: &str, kind: duckdb::types::Type, message: String) -> duckdb::Error {
    duckdb::Error::FromSqlConversionFailure(0, kind, format!("{column}: {message}").into())
}

/// A column holding an enum's spelling; anything else is a query bug,
/// reported as a conversion error.
pub fn spelled<T: std::str::FromStr>(row: &Row, column: &str) -> duckdb::Result<T> {
    let text: String = row.get(column)?;
    text.parse()
        .map_err(|_| conversion(column, duckdb::types::Type::Text, format!("`{text}` is not a known value")))
}

/// A nullable column holding an enum's spelling.
pub fn spelled_if_any<T: std::str::FromStr>(row: &Row, column: &str) -> duckdb::Result<Option<T>> {
    match row.get::<_, Option<String>>(column)? {
        Some(_) => spelled(row, column).map(Some),
        None => Ok(None),
    }
}

/// `spelled`, with `all` (the word the rollup rows use) as `None`.
pub fn spelled_or_all<T: std::str::FromStr>(row: &Row, column: &str) -> duckdb::Result<Option<T>> {
    spelled_or(row, column, "all")
}

/// `spelled`, with `none` (the word for "nothing failed first") as `None`.
pub fn spelled_or_none<T: std::str::FromStr>(row: &Row, column: &str) -> duckdb::Result<Option<T>> {
    spelled_or(row, column, "none")
}

fn spelled_or<T: std::str::FromStr>(row: &Row, column: &str, none: &str) -> duckdb::Result<Option<T>> {
    let text: String = row.get(column)?;
    if text == none { Ok(None) } else { spelled(row, column).map(Some) }
}

/// `{column}_route_group`, `{column}_provider`, `{column}_model`.
pub fn route_key(row: &Row, column: &str) -> duckdb::Result<RouteKey> {
    Ok(RouteKey {
        route_group: row.get(format!("{column}_route_group").as_str())?,
        provider: row.get(format!("{column}_provider").as_str())?,
        model: row.get(format!("{column}_model").as_str())?,
    })
}

/// A struct whose own fields are columns of the same row.
pub fn flattened<T: FromRow>(row: &Row, _column: &str) -> duckdb::Result<T> {
    T::from_row(row)
}

/// A TIMESTAMP column as UTC.
pub fn timestamp_column(row: &Row, column: &str) -> duckdb::Result<DateTime<Utc>> {
    timestamp(row.get(column)?)
}

/// A nullable TIMESTAMP column as UTC.
pub fn optional_timestamp(row: &Row, column: &str) -> duckdb::Result<Option<DateTime<Utc>>> {
    match row.get::<_, Value>(column)? {
        Value::Null => Ok(None),
        value => timestamp(value).map(Some),
    }
}

/// A TIMESTAMP value as UTC; any other type is a query bug, reported.
pub fn timestamp(value: Value) -> duckdb::Result<DateTime<Utc>> {
    let micros = match value {
        Value::Timestamp(TimeUnit::Second, v) => v.checked_mul(1_000_000),
        Value::Timestamp(TimeUnit::Millisecond, v) => v.checked_mul(1_000),
        Value::Timestamp(TimeUnit::Microsecond, v) => Some(v),
        Value::Timestamp(TimeUnit::Nanosecond, v) => Some(v / 1_000),
        other => {
            return Err(conversion(
                "timestamp",
                duckdb::types::Type::Timestamp,
                format!("expected a TIMESTAMP, got {other:?}"),
            ));
        }
    };
    micros
        .and_then(DateTime::from_timestamp_micros)
        .ok_or_else(|| conversion("timestamp", duckdb::types::Type::Timestamp, "out of range".into()))
}

/// A LIST column's items that `item` keeps.
pub fn list_of<T>(value: Value, item: impl Fn(Value) -> Option<T>) -> Vec<T> {
    match value {
        Value::List(items) => items.into_iter().filter_map(item).collect(),
        _ => Vec::new(),
    }
}

/// A LIST of VARCHAR column.
pub fn texts(row: &Row, column: &str) -> duckdb::Result<Vec<String>> {
    Ok(list_of(row.get(column)?, |v| match v {
        Value::Text(t) => Some(t),
        _ => None,
    }))
}

/// A LIST of BIGINT column.
pub fn counts(row: &Row, column: &str) -> duckdb::Result<Vec<i64>> {
    Ok(list_of(row.get(column)?, |v| match v {
        Value::BigInt(n) => Some(n),
        _ => None,
    }))
}
