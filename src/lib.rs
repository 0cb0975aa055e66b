//! attempt-ledger: an observability and cost ledger for LLM API call
//! attempts. See ARCHITECTURE.md for the map of this crate.

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

// The database-free half lives in crates/attempt-core; its modules keep
// their paths here.
pub use attempt_core::{
    alert_event, classify, dimensions, files, finding, ingest, model, policy, pricing, providers, replay,
    request,
};
