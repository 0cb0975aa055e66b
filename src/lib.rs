//! attempt-ledger: an observability and cost ledger for LLM API call
//! attempts. See ARCHITECTURE.md for the map of this crate.

pub mod admin_api;
pub mod alerts;
pub mod cli;
pub mod dashboard;
pub mod lake;
pub mod metrics;
pub mod pipeline;
pub mod read;
pub mod report;
pub mod service;
pub mod simulate;
pub mod store;
pub mod telemetry;
