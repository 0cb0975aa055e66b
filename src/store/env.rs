//! The settings the store reads from the environment, by name (the
//! store's errors name them too, so they sit below both).

/// The environment variable that sets DuckDB's memory limit for a database
/// file (DuckDB's syntax: `512MB`, `2GB`); in-memory databases have none.
pub const MEMORY_LIMIT_ENV: &str = "ATTEMPT_LEDGER_MEMORY_LIMIT";

/// The environment variable that sets K, how many values of each label
/// (workflow names, providers, models, route groups, each dimension) keep
/// rollup rows and `/metrics` series of their own; later values are summed
/// under `other`.
pub const LABEL_LIMIT_ENV: &str = "ATTEMPT_LEDGER_LABEL_LIMIT";
pub const DEFAULT_LABEL_LIMIT: u64 = 1000;
