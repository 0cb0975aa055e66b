//! `lake check --catalog`: the lake's Iceberg table against the lake's
//! files, as a reader of either would find them.

use std::collections::BTreeSet;
use std::path::Path;

use super::Lake;
use super::iceberg::{IcebergError, TableConfig, connect_table};
use super::retention::is_expired;
use super::survey::Survey;

/// What `lake check --catalog` finds of the lake's table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TableCheck {
    pub table: String,
    pub snapshot_id: Option<i64>,
    /// Data files of the current snapshot, and the rows they hold.
    pub files: u64,
    pub rows: u64,
    /// Good files of finished exports that the table does not hold: its
    /// readers do not see them (the node's next export commits them).
    pub not_in_table: Vec<String>,
    /// Files the table holds that the lake does not have: its readers fail.
    pub missing: Vec<String>,
    /// Files of days the lake expired that the table still holds (an
    /// expiry whose commit to the table failed): `lake expire` again
    /// takes them out.
    pub expired_in_table: Vec<String>,
    pub snapshots: u64,
    /// Snapshots older than the table's retention
    /// (`history.expire.max-snapshot-age-ms`, five days unless set), the
    /// current one aside: due to be expired by the warehouse's engine.
    pub snapshots_past_retention: u64,
    /// Metadata files beside the table's as new as the one its catalog
    /// points at, or newer: left by a commit that lost its race or was
    /// killed. Readers through the catalog never see them; a reader
    /// without one (ClickHouse's `icebergLocal`) takes the newest and
    /// would read what was never committed. Delete them.
    pub newer_metadata: Vec<String>,
}

impl TableCheck {
    /// Anything a reader of the table would miss or fail on.
    pub fn has_problems(&self) -> bool {
        !self.not_in_table.is_empty() || !self.missing.is_empty() || !self.newer_metadata.is_empty()
    }
}

/// The table of `lake` against what `surveyed` (read from `root`) found in
/// the lake's files.
pub fn check_table(
    config: &TableConfig,
    lake: &Lake,
    root: &Path,
    surveyed: &Survey,
) -> Result<TableCheck, IcebergError> {
    let table = connect_table(config, lake)?;
    let current = table.current_files()?;
    let history = table.history()?;
    let prefix = lake.storage().uri("");
    let in_table: BTreeSet<String> =
        current.files.iter().map(|(uri, _)| uri.strip_prefix(&prefix).unwrap_or(uri).to_string()).collect();
    let in_flight: BTreeSet<&String> = surveyed.nodes.iter().flat_map(|n| &n.unlisted).collect();
    let in_lake: BTreeSet<String> = surveyed
        .good
        .iter()
        .filter_map(|path| path.strip_prefix(root).ok())
        .map(|key| key.to_string_lossy().replace('\\', "/"))
        .collect();
    let not_in_table = in_lake
        .iter()
        .filter(|key| !in_table.contains(*key) && !in_flight.iter().any(|p| key.ends_with(p.as_str())))
        .cloned()
        .collect();
    let (expired_in_table, held): (Vec<String>, Vec<String>) =
        in_table.iter().cloned().partition(|key| is_expired(surveyed.expired_before, key));
    let missing = held.into_iter().filter(|key| !in_lake.contains(key)).collect();
    let now_ms = chrono::Utc::now().timestamp_millis();
    let snapshots_past_retention = history
        .snapshots
        .iter()
        .filter(|(id, at)| Some(*id) != current.snapshot_id && now_ms - at > history.max_age_ms)
        .count() as u64;
    let newer_metadata = newer_metadata(lake, &prefix, history.metadata_location.as_deref())?;
    Ok(TableCheck {
        table: config.table.to_string(),
        snapshot_id: current.snapshot_id,
        files: current.files.len() as u64,
        rows: current.files.iter().map(|(_, rows)| rows).sum(),
        not_in_table,
        missing,
        expired_in_table,
        snapshots: history.snapshots.len() as u64,
        snapshots_past_retention,
        newer_metadata,
    })
}

/// The metadata files in the lake's `metadata/` other than `current` whose
/// version (the number their names start with) is `current`'s or later,
/// when the table's metadata is in the lake.
fn newer_metadata(lake: &Lake, prefix: &str, current: Option<&str>) -> Result<Vec<String>, IcebergError> {
    let version = |name: &str| name.split('-').next().and_then(|v| v.parse::<u64>().ok());
    let Some(current) =
        current.and_then(|c| c.strip_prefix(prefix)).and_then(|key| key.strip_prefix("metadata/"))
    else {
        return Ok(Vec::new());
    };
    let Some(current_version) = version(current) else { return Ok(Vec::new()) };
    let names = lake
        .storage()
        .files("metadata")
        .map_err(|e| IcebergError::Table { table: lake.name(), detail: e.to_string() })?;
    Ok(names
        .into_iter()
        .filter(|name| {
            // One of the same version as the catalog's is a rival of it.
            name.ends_with(".metadata.json")
                && name != current
                && version(name).is_some_and(|v| v >= current_version)
        })
        .map(|name| format!("metadata/{name}"))
        .collect())
}
