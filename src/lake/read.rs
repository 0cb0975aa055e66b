//! `report --lake`: the report of a lake, by the product's own rules.
//!
//! The lake is surveyed first (`survey.rs`): a file no reader can use
//! refuses the read, naming each once, unless the caller skips them. The
//! good files' rows (inside the horizon around a window) are then read one
//! of two ways, in a scratch database in a temporary folder (where DuckDB
//! spills what does not fit in memory):
//! - `Sections::Lake` (the default): deduplicated and derived by SQL in one
//!   pass (`queries/lake/scope.sql`) into what the node's own report
//!   queries read, for the sections every lake engine derives
//!   (`store::LAKE_QUERIES`): a few scans and sorts of the rows.
//! - `Sections::Every`: deduplicated as every engine does
//!   (`queries/lake/dedup.sql`), derived like any write, and read with the
//!   same `Reader` as a node's database: every section and the audit, at
//!   the write path's cost per attempt.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Duration;

use super::iceberg::TableConfig;
use super::storage::Location;
use super::survey::{Survey, survey};
use super::{Lake, LakeError};
use crate::read::{ReadError, Reader};
use crate::report::{LAKE_SECTIONS, LakeSource, Report, SkippedFile};
use crate::store::{Horizon, Job, LakeFiles, MemoryLimit, Store};
use attempt_core::policy::LoadedPolicy;
use attempt_core::pricing::PriceTable;
use attempt_core::request::ReportFilter;

/// How far around a window the lake is read by default: a workflow's
/// attempts seldom span more than two days.
pub const DEFAULT_HORIZON: Duration = Duration::hours(48);

#[derive(Debug, thiserror::Error)]
pub enum LakeReadError {
    #[error(transparent)]
    Lake(#[from] LakeError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error("cannot make a scratch database: {0}")]
    Scratch(std::io::Error),
}

/// How a read of a lake treats files no reader can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BadFiles {
    /// Refuse the read, naming them.
    #[default]
    Refuse,
    /// Read the others, and say what was left out.
    Skip,
}

/// Which sections a lake report derives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sections {
    /// Those every lake engine derives, by SQL over the rows.
    Lake,
    /// Every section, the audit too when `with_audit`, by the write path's
    /// derivation into a scratch database.
    Every { with_audit: bool },
}

/// The lake at `location` as its readers read it, from a folder: its own,
/// or for a lake in an object store a copy of its files in `scratch` (every
/// file but the staged ones; each streamed to the disk).
pub fn readable(location: &Location, scratch: &Path) -> Result<(Lake, PathBuf), LakeError> {
    let lake = Lake::open(location)?;
    if let Some(root) = lake.root() {
        let root = root.to_path_buf();
        return Ok((lake, root));
    }
    let copy = scratch.join("lake");
    let began = std::time::Instant::now();
    let (files, bytes) = lake.storage().copy_into(&copy)?;
    tracing::info!(lake = %location, files, bytes, seconds = began.elapsed().as_secs_f64(), "lake copied to read");
    // Everything is read from the copy: its records and files are of one
    // moment, whatever the store's writers do meanwhile.
    let copied = Lake::open_folder(&copy)?;
    Ok((copied, copy))
}

/// A lake to read: its files, or with `table` its Iceberg table's current
/// snapshot.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub location: &'a Location,
    pub table: Option<&'a TableConfig>,
}

/// The report of the lake `source` for `filter`.
pub fn lake_report(
    source: Source<'_>,
    filter: &ReportFilter,
    horizon: Duration,
    bad_files: BadFiles,
    prices: Arc<PriceTable>,
    policy: Arc<LoadedPolicy>,
    sections: Sections,
) -> Result<Report, LakeReadError> {
    let Source { location, table } = source;
    let scratch =
        tempfile::Builder::new().prefix("attempt-ledger-lake-").tempdir().map_err(LakeReadError::Scratch)?;
    // The table's snapshot is taken before the lake is copied: every file
    // it names was in the store before the copy began.
    let snapshot = match table {
        Some(config) => Some(snapshot_files(location, config)?),
        None => None,
    };
    let (lake, root) = readable(location, scratch.path())?;
    // Reading a whole lake is a bulk job (docs/ingest.md): under
    // serve's ceiling its window's rows spill to disk.
    let store = Store::open_for_job(&scratch.path().join("lake.duckdb"), &MemoryLimit::for_job(Job::Bulk))?;
    let surveyed = match &snapshot {
        // The catalog says which files hold the table: exactly those.
        Some((snapshot_id, keys)) => {
            if snapshot_id.is_none() {
                return Err(LakeError::Empty(location.to_string()).into());
            }
            let good: Vec<PathBuf> = keys.iter().map(|key| root.join(key)).collect();
            Survey::of_files(&lake.manifest().lake_id, good)
        }
        None => survey(&lake, &root, &store)?,
    };
    // Nothing left to read once they are skipped: refused all the same.
    if !surveyed.bad.is_empty() && (bad_files == BadFiles::Refuse || surveyed.good.is_empty()) {
        return Err(LakeError::BadFiles { lake: location.to_string(), files: surveyed.bad }.into());
    }
    if surveyed.good.is_empty() {
        return Err(LakeError::Empty(location.to_string()).into());
    }
    // The whole folder, unless some of its files are to be left out.
    let files = if surveyed.bad.is_empty() && snapshot.is_none() && surveyed.expired_files_left_out == 0 {
        LakeFiles::All(&root)
    } else {
        LakeFiles::Only(&surveyed.good)
    };
    let windowed = filter.since.is_some() || filter.until.is_some();
    let read = Horizon { from: filter.since.map(|t| t - horizon), until: filter.until.map(|t| t + horizon) };
    let (mut report, copies, attempts, outside, derived) = match sections {
        Sections::Lake => {
            let read = store.lake_report_rows(files, read, filter, &prices)?;
            let report = Report::from_rows(&read.rows, filter.retry_budget);
            (report, read.copies, read.attempts, read.outside, Some(LAKE_SECTIONS.map(String::from).to_vec()))
        }
        Sections::Every { with_audit } => {
            let loaded = store.load_lake(files, read)?;
            store.catch_up()?;
            let outside = store.lake_outside_horizon(
                files,
                read,
                filter.since,
                filter.until,
                filter.workflow.as_deref(),
            )?;
            let report = Reader::new(&store, prices, policy).report(filter, with_audit)?;
            (report, loaded.copies, loaded.attempts, outside, None)
        }
    };
    let (skipped_attempts, _) = surveyed.skipped();
    report.lake = Some(LakeSource {
        engine: "duckdb".to_string(),
        lake_id: lake.manifest().lake_id.clone(),
        sections: derived,
        copies_read: copies,
        attempts,
        horizon_hours: windowed.then(|| horizon.num_seconds() as f64 / 3600.0),
        attempts_outside_horizon: outside,
        skipped_files: surveyed
            .bad
            .into_iter()
            .map(|b| SkippedFile { path: b.path, reason: b.reason, attempts: b.attempts })
            .collect(),
        skipped_attempts,
        iceberg_snapshot_id: snapshot.and_then(|(id, _)| id),
    });
    Ok(report)
}

/// The current snapshot of the lake's Iceberg table, and its data files as
/// keys of the lake.
fn snapshot_files(
    location: &Location,
    config: &TableConfig,
) -> Result<(Option<i64>, Vec<String>), LakeError> {
    let lake = Lake::open(location)?;
    let table = super::iceberg::connect_table(config, &lake)?;
    let current = table.current_files()?;
    let prefix = lake.storage().uri("");
    let keys = current
        .files
        .into_iter()
        .map(|(uri, _)| match uri.strip_prefix(&prefix) {
            Some(key) if key.starts_with("attempts/") => Ok(key.to_string()),
            _ => Err(LakeError::Damaged {
                path: uri.clone(),
                detail: format!(
                    "the Iceberg table {} holds a file that is not one of the lake's attempts files under {prefix} \
                     (rewritten by another engine's compaction?); this attempt-ledger reads only the lake's own",
                    config.table
                ),
            }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((current.snapshot_id, keys))
}
