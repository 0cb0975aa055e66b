//! attempt-ledger: an observability and cost ledger for LLM API call
//! attempts. See ARCHITECTURE.md for the map of this crate.

pub mod alerts;
pub mod classify;
pub mod cli;
pub mod dimensions;
pub mod ingest;
pub mod metrics;
pub mod model;
pub mod pipeline;
pub mod pricing;
pub mod providers;
pub mod report;
pub mod service;
pub mod simulate;
pub mod store;
