//! The part of attempt-ledger that needs no database: the attempt record
//! (`model`), how errors are classified, the wire-format decoders, the
//! price and provider tables, and the parsers of every file or argument a
//! user writes (alert rules, dimensions, times). The `attempt-ledger` crate
//! re-exports each module under its old path, so callers do not see the split.
//!
//! Kept apart so the decoders can be fuzzed with sanitizers without
//! rebuilding DuckDB, and tested in seconds.

pub mod alert_event;
pub mod alert_rules;
pub mod bill;
pub mod classify;
pub mod dimensions;
pub mod files;
pub mod finding;
pub mod fuzzing;
pub mod ingest;
pub mod lake_names;
pub mod model;
pub mod policy;
pub mod pricing;
pub mod providers;
pub mod ratelimit;
pub mod reconcile;
pub mod replay;
pub mod request;
pub mod sql_rules;
pub mod time_arg;
