//! What the store's callers can be told went wrong, below every file of
//! the store (each names it here, not through the store's roof).

use std::path::Path;

use super::env::{LABEL_LIMIT_ENV, MEMORY_LIMIT_ENV};

/// The exit status of any command that stops on `StoreError::DamagedWal`
/// (sysexits' EX_DATAERR): retrying cannot help, a person has to act.
pub const EXIT_DAMAGED_WAL: u8 = 65;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open database {path}: {}", first_sentence(source))]
    Open { path: String, source: duckdb::Error },
    #[error(
        "the database {path} is in use by {holder}: one process at a time may open a database file \
         for writing, and `serve` keeps its file open. While it runs, `report`, `audit` and `alerts` \
         ask it for the same answers themselves (as GET /api/v1/report, /api/v1/audit, /api/v1/alerts \
         do); for anything else, stop it and run this again."
    )]
    Locked { path: String, holder: String },
    #[error(
        "{path} is not an attempt-ledger database: it is {what}. Pass --db with a DuckDB file (or a new path)"
    )]
    NotDuckDb { path: String, what: &'static str },
    #[error(
        "{path} is read-only and {why}: open it once with write access (any command) so it is brought \
         up to date, then it can be read from a read-only copy"
    )]
    ReadOnlyStale { path: String, why: String },
    #[error(
        "database schema version {found} is newer than this attempt-ledger supports ({supported}); \
         upgrade attempt-ledger"
    )]
    SchemaTooNew { found: i64, supported: i64 },
    #[error("schema migration {version} failed: {source}")]
    Migration { version: i64, source: duckdb::Error },
    #[error("database error: {0}")]
    DuckDb(#[from] duckdb::Error),
    #[error("{MEMORY_LIMIT_ENV}={value} is not a memory limit DuckDB accepts (say 512MB or 2GB): {source}")]
    MemoryLimit { value: String, source: duckdb::Error },
    #[error("cannot build a record batch: {0}")]
    Arrow(#[from] duckdb::arrow::error::ArrowError),
    #[error("{0}")]
    Dimension(String),
    /// A query file or its rows are not what its reader expects: a bug.
    #[error("{file}: {what} (a bug in this build: please report it)")]
    Malformed { file: &'static str, what: &'static str },
    #[error(
        "no dimension named `{name}` (configured: {configured}); add one with \
         `attempt-ledger dimensions --set {name}=extra.{name}`"
    )]
    UnknownDimension { name: String, configured: String },
    #[error("{LABEL_LIMIT_ENV}={0} is not a count of label values (a whole number from 1)")]
    LabelLimit(String),
    #[error(
        "the write-ahead log {wal} is damaged, so {db} cannot be opened ({detail}).\n\
         The database file holds everything up to its last checkpoint. To open it, move the log aside:\n\
         \n    mv {wal} {wal}.damaged\n\n\
         The transactions after the last checkpoint are then not in the database: send those records \
         again from their source (writes are idempotent: records already stored count as duplicates). \
         Keep the moved file for a bug report. Exit status {EXIT_DAMAGED_WAL}: a supervisor should not \
         restart on it (systemd: RestartPreventExitStatus={EXIT_DAMAGED_WAL})."
    )]
    DamagedWal { db: String, wal: String, detail: String },
    #[error(
        "this database is lake node `{stored}`, not `{asked}`: a database keeps the node id it was first \
         given (every row it exported carries it); drop --node-id or pass --node-id {stored}"
    )]
    NodeId { stored: String, asked: String },
}

/// DuckDB reports a log it cannot replay as a "Data Corruption Error"
/// naming the WAL; that one gets instructions, any other its own text.
pub(super) fn open_error(path: &Path, source: duckdb::Error) -> StoreError {
    let text = source.to_string();
    if text.contains("Failure while replaying WAL") || text.contains("Corrupt WAL") {
        // DuckDB repeats its message; the part from "Corrupt WAL" to the
        // first repeat says where the log broke.
        let detail = text
            .find("Corrupt WAL")
            .map(|at| {
                let rest = &text[at..];
                rest[..rest.find(": Data Corruption").unwrap_or(rest.len())].to_string()
            })
            .unwrap_or_else(|| "it cannot be replayed".to_string());
        let mut wal = path.as_os_str().to_owned();
        wal.push(".wal");
        return StoreError::DamagedWal {
            db: path.display().to_string(),
            wal: Path::new(&wal).display().to_string(),
            detail,
        };
    }
    if let Some(at) = text.find("Conflicting lock is held in ") {
        let rest = &text[at + "Conflicting lock is held in ".len()..];
        let holder = rest.find(')').map_or(rest, |end| &rest[..=end]).to_string();
        return StoreError::Locked { path: path.display().to_string(), holder };
    }
    StoreError::Open { path: path.display().to_string(), source }
}

/// DuckDB's messages repeat themselves (`msg: msg: Error code 1`): the
/// first statement of it is the whole of it.
fn first_sentence(error: &duckdb::Error) -> String {
    let text = error.to_string();
    let half = text.len() / 2;
    match text.get(..half).and_then(|head| head.rfind(": ").map(|cut| &text[..cut])) {
        Some(head) if text[head.len() + 2..].starts_with(head) => head.to_string(),
        _ => text.trim_end_matches(": Error code 1: Unknown error code").to_string(),
    }
}
