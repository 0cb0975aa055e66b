//! `report --lake`: the report of a lake, by the product's own rules.
//!
//! The lake is surveyed first (`survey.rs`): a file no reader can use
//! refuses the read, naming each once, unless the caller skips them. The
//! good files' rows (inside the horizon around a window) are deduplicated
//! as every engine does (`queries/lake/dedup.sql`) into a scratch database
//! in a temporary folder, derived there like any write, and read with the
//! same `Reader` as a node's database: one report over every node.

use std::path::Path;
use std::sync::Arc;

use chrono::Duration;

use super::survey::survey;
use super::{Lake, LakeError};
use crate::read::{ReadError, Reader};
use crate::report::{LakeSource, Report, SkippedFile};
use crate::store::{Horizon, LakeFiles, Store};
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

/// The report of the lake at `root` for `filter`.
pub fn lake_report(
    root: &Path,
    filter: &ReportFilter,
    horizon: Duration,
    bad_files: BadFiles,
    prices: Arc<PriceTable>,
    policy: Arc<LoadedPolicy>,
    with_audit: bool,
) -> Result<Report, LakeReadError> {
    let lake = Lake::open(root)?;
    let scratch =
        tempfile::Builder::new().prefix("attempt-ledger-lake-").tempdir().map_err(LakeReadError::Scratch)?;
    let store = Store::open(&scratch.path().join("lake.duckdb"))?;
    let surveyed = survey(&lake, &store)?;
    // Nothing left to read once they are skipped: refused all the same.
    if !surveyed.bad.is_empty() && (bad_files == BadFiles::Refuse || surveyed.good.is_empty()) {
        return Err(LakeError::BadFiles { lake: root.display().to_string(), files: surveyed.bad }.into());
    }
    if surveyed.good.is_empty() {
        return Err(LakeError::Empty(root.display().to_string()).into());
    }
    let files =
        if surveyed.bad.is_empty() { LakeFiles::All(lake.root()) } else { LakeFiles::Only(&surveyed.good) };
    let windowed = filter.since.is_some() || filter.until.is_some();
    let read = Horizon { from: filter.since.map(|t| t - horizon), until: filter.until.map(|t| t + horizon) };
    let loaded = store.load_lake(files, read)?;
    store.catch_up()?;
    let outside =
        store.lake_outside_horizon(files, read, filter.since, filter.until, filter.workflow.as_deref())?;
    let mut report = Reader::new(&store, prices, policy).report(filter, with_audit)?;
    let (skipped_attempts, _) = surveyed.skipped();
    report.lake = Some(LakeSource {
        engine: "duckdb".to_string(),
        lake_id: lake.manifest().lake_id.clone(),
        copies_read: loaded.copies,
        attempts: loaded.attempts,
        horizon_hours: windowed.then(|| horizon.num_seconds() as f64 / 3600.0),
        attempts_outside_horizon: outside,
        skipped_files: surveyed
            .bad
            .into_iter()
            .map(|b| SkippedFile { path: b.path, reason: b.reason, attempts: b.attempts })
            .collect(),
        skipped_attempts,
    });
    Ok(report)
}
