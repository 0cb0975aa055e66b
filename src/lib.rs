//! attempt-ledger: an observability and cost ledger for LLM API call
//! attempts. See ARCHITECTURE.md for the map of this crate.

pub mod alerts;
pub mod cli;
pub mod dashboard;
pub mod metrics;
pub mod pipeline;
pub mod report;
pub mod service;
pub mod simulate;
pub mod store;

// The database-free half lives in crates/attempt-core; its modules keep
// their paths here.
pub use attempt_core::{classify, dimensions, ingest, model, policy, pricing, providers};
