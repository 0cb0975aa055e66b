//! Scalar functions the SQL calls that DuckDB's bundled build lacks
//! (the JSON extension is not compiled in, and autoloading it would reach
//! the network).

use std::sync::Arc;

use duckdb::Connection;
use duckdb::arrow::array::{Array, RecordBatch, StringArray, StringBuilder};
use duckdb::arrow::datatypes::DataType;
use duckdb::vscalar::{ArrowFunctionSignature, VArrowScalar};

use super::error::StoreError;

/// `extra_value(extra, key)`: the value under `key` at the top level of a
/// record's `extra` JSON object, as text (numbers and booleans spelled as
/// JSON spells them); NULL when the key is absent, its value is null, an
/// object or an array, or `extra` is not an object. Dimensions read it.
struct ExtraValue;

impl VArrowScalar for ExtraValue {
    type State = ();

    fn invoke(_: &(), input: RecordBatch) -> Result<Arc<dyn Array>, Box<dyn std::error::Error>> {
        let text = |i: usize| {
            input
                .column(i)
                .as_any()
                .downcast_ref::<StringArray>()
                .ok_or("extra_value takes (VARCHAR, VARCHAR)")
        };
        let (extras, keys) = (text(0)?, text(1)?);
        let mut out = StringBuilder::with_capacity(extras.len(), 16 * extras.len());
        for row in 0..extras.len() {
            if extras.is_null(row) || keys.is_null(row) {
                out.append_null();
                continue;
            }
            out.append_option(value_of(extras.value(row), keys.value(row)));
        }
        Ok(Arc::new(out.finish()))
    }

    fn signatures() -> Vec<ArrowFunctionSignature> {
        vec![ArrowFunctionSignature::exact(vec![DataType::Utf8, DataType::Utf8], DataType::Utf8)]
    }
}

fn value_of(extra: &str, key: &str) -> Option<String> {
    let serde_json::Value::Object(map) = serde_json::from_str(extra).ok()? else {
        return None;
    };
    match map.get(key)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

pub(super) fn register(conn: &Connection) -> Result<(), StoreError> {
    conn.register_scalar_function::<ExtraValue>("extra_value")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_top_level_scalars_only() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn).unwrap();
        let read = |extra: Option<&str>, key: &str| -> Option<String> {
            conn.query_row("SELECT extra_value(?, ?)", duckdb::params![extra, key], |r| r.get(0)).unwrap()
        };
        let extra = r#"{"team":"search","n":42,"ok":true,"nested":{"team":"x"},"none":null}"#;
        assert_eq!(read(Some(extra), "team").as_deref(), Some("search"));
        assert_eq!(read(Some(extra), "n").as_deref(), Some("42"));
        assert_eq!(read(Some(extra), "ok").as_deref(), Some("true"));
        assert_eq!(read(Some(extra), "nested"), None);
        assert_eq!(read(Some(extra), "none"), None);
        assert_eq!(read(Some(extra), "absent"), None);
        assert_eq!(read(Some("not json"), "team"), None);
        assert_eq!(read(None, "team"), None);
    }
}
