//! What every read of a `tune` answer shares: the scope it reads in (inside
//! one `store::Snapshot`), which names it tells apart, and how enum places
//! are read back.

use duckdb::Connection;
use duckdb::arrow::array::{Array, Int32Array};
use duckdb::arrow::record_batch::RecordBatch;
use strum::VariantNames;

use crate::store::error::StoreError;
use attempt_core::model::{Decision, ErrorClass, Layer, Outcome};
use attempt_core::policy::CommitMarker;
use attempt_core::request::ReportFilter;

/// Which workflow names a `tune` answer tells apart (`Store::tune_read`).
#[derive(Debug, Clone, Copy)]
pub enum Names<'a> {
    /// The candidate policy's `[[workflow]]` sections, in order: a replay
    /// decides per section.
    Sections(&'a [String]),
    /// Every name (`tune --suggest` suggests per name).
    Every,
}

/// The reads of one `tune` answer over its scope, inside one `Snapshot`
/// (`Snapshot::tune`).
pub struct TuneScope<'a> {
    pub(in crate::store) conn: &'a Connection,
    pub(in crate::store) filter: &'a ReportFilter,
}

/// No time bound: the totals answer (window.sql's `scope_everything`).
pub(super) fn scope_everything(conn: &Connection) -> Result<bool, StoreError> {
    Ok(conn.query_row("SELECT getvariable('scope_everything')", [], |r| r.get(0))?)
}

/// The enums' names in this build's order, as variables the queries turn
/// values into places with (a place reads as a number: a fifth of what a
/// name costs).
pub(super) fn set_enum_places(conn: &Connection) -> Result<(), StoreError> {
    let list = |names: &[&str]| {
        let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
        format!("[{}]::VARCHAR[]", quoted.join(", "))
    };
    conn.execute_batch(&format!(
        "SET VARIABLE tune_layers = {}; SET VARIABLE tune_classes = {}; SET VARIABLE tune_decisions = {};
         SET VARIABLE tune_markers = {}; SET VARIABLE tune_outcomes = {};",
        list(Layer::VARIANTS),
        list(ErrorClass::VARIANTS),
        list(Decision::VARIANTS),
        list(CommitMarker::VARIANTS),
        list(Outcome::VARIANTS),
    ))?;
    Ok(())
}

/// The enums' values in the order `set_enum_places` lists their names: a
/// place read is an index, not a parse.
pub(super) struct Places {
    pub outcomes: Vec<Outcome>,
    pub layers: Vec<Layer>,
    pub classes: Vec<ErrorClass>,
    pub decisions: Vec<Decision>,
    pub markers: Vec<CommitMarker>,
}

impl Places {
    pub(super) fn new() -> Places {
        fn values<T: std::str::FromStr>(names: &[&str]) -> Vec<T> {
            names.iter().filter_map(|n| n.parse().ok()).collect()
        }
        Places {
            outcomes: values(Outcome::VARIANTS),
            layers: values(Layer::VARIANTS),
            classes: values(ErrorClass::VARIANTS),
            decisions: values(Decision::VARIANTS),
            markers: values(CommitMarker::VARIANTS),
        }
    }
}

/// The value at `places[i]`.
pub(super) fn nth<T: Copy>(values: &[T], places: &Int32Array, i: usize) -> Option<T> {
    if !places.is_valid(i) {
        return None;
    }
    values.get(usize::try_from(places.value(i)).ok()?).copied()
}

/// The column `name` of a batch of `query` as a `T`; a column missing or
/// of another type is a bug in the query, named in the error.
pub(super) fn column<'a, T: 'static>(
    batch: &'a RecordBatch,
    query: &'static str,
    name: &'static str,
) -> Result<&'a T, StoreError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or(StoreError::Malformed { file: query, what: name })
}
