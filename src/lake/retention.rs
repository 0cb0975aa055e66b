//! Retention: `lake expire LAKE --before DAY` takes every day before DAY
//! out of the lake, whole.
//!
//! 1. `_expired.json` records the horizon first (moved later, never
//!    earlier), so from then on every reader of the lake's records leaves
//!    those days out and no file of them counts as missing;
//! 2. with `--catalog`, the table loses them in one delete snapshot, its
//!    snapshots past retention are expired, and what only they reached is
//!    deleted (`iceberg/expire.rs`);
//! 3. the files of those days are deleted from the lake, except the ones a
//!    snapshot the table keeps still reaches (they go at a later run, once
//!    their snapshots are past retention).
//!
//! An attempt of an expired day exported later (a late arrival) is written
//! as any other, left out by the lake's readers, and removed by the next
//! run.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use super::iceberg::{TableConfig, TableExpiry, connect_table};
use super::storage::{Location, Storage, Stored};
use super::{Lake, LakeError, to_json_bytes};

/// The lake's record of its horizon.
pub const EXPIRED: &str = "_expired.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Horizon {
    /// Every day before it is out of the lake.
    pub before: NaiveDate,
    /// When it last moved (RFC 3339).
    pub moved_at: String,
}

/// What `lake expire` did.
#[derive(Debug, Clone, Serialize)]
pub struct Expiry {
    /// The lake's horizon now: the one asked for, or a later one it had.
    pub before: NaiveDate,
    /// Files of expired days deleted from the lake, and their bytes.
    pub deleted_files: u64,
    /// Files of expired days a snapshot the table keeps still reaches.
    pub kept_for_snapshots: u64,
    pub iceberg: Option<TableExpiry>,
}

impl Lake {
    /// The day before which the lake holds nothing, if it expired any.
    pub fn horizon(&self) -> Result<Option<NaiveDate>, LakeError> {
        read_horizon(self.storage())
    }
}

fn read_horizon(storage: &Storage) -> Result<Option<NaiveDate>, LakeError> {
    storage.read(EXPIRED)?.map(|stored| parse_horizon(storage, &stored)).transpose()
}

fn parse_horizon(storage: &Storage, stored: &Stored) -> Result<NaiveDate, LakeError> {
    let horizon: Horizon = serde_json::from_str(&stored.text)
        .map_err(|e| LakeError::Damaged { path: storage.describe(EXPIRED), detail: e.to_string() })?;
    Ok(horizon.before)
}

/// The day of a file under `attempts/` (`day=YYYY-MM-DD/...`).
pub fn day_of_path(path: &str) -> Option<NaiveDate> {
    let path = path.strip_prefix("attempts/").unwrap_or(path);
    path.split('/').next()?.strip_prefix("day=")?.parse().ok()
}

/// Whether the file at `path` (under `attempts/`, or relative to it) is of
/// a day before `horizon`: out of the lake.
pub fn is_expired(horizon: Option<NaiveDate>, path: &str) -> bool {
    horizon.is_some_and(|h| day_of_path(path).is_some_and(|day| day < h))
}

/// Moves the lake's horizon to `before` unless it is there or later
/// already; returns the horizon it has then.
fn move_horizon(storage: &Storage, before: NaiveDate) -> Result<NaiveDate, LakeError> {
    for _ in 0..8 {
        let seen = storage.read(EXPIRED)?;
        let found = seen.as_ref().map(|stored| parse_horizon(storage, stored)).transpose()?;
        if found.is_some_and(|found| found >= before) {
            return Ok(found.unwrap_or(before));
        }
        let horizon = Horizon {
            before,
            moved_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        };
        let written = match &seen {
            Some(stored) => storage.replace(EXPIRED, to_json_bytes(&horizon), stored),
            None => storage.create(EXPIRED, to_json_bytes(&horizon)),
        };
        match written {
            Ok(()) => return Ok(before),
            // Another run moved it meanwhile: read it again.
            Err(LakeError::Changed(_) | LakeError::Exists(_)) => continue,
            Err(other) => return Err(other),
        }
    }
    Err(LakeError::Contended { what: format!("{} of {}", EXPIRED, storage.name()) })
}

/// Expires every day before `before` from the lake at `location` and, with
/// `table`, from its Iceberg table. `today` bounds `before`: the day being
/// written is never expired.
pub fn expire(
    location: &Location,
    before: NaiveDate,
    today: NaiveDate,
    table: Option<&TableConfig>,
) -> Result<Expiry, LakeError> {
    if before > today {
        return Err(LakeError::Retention(format!(
            "--before {before} is after today ({today}, UTC): the days being written are never expired"
        )));
    }
    let lake = Lake::open(location)?;
    let storage = lake.storage();
    if table.is_none() && storage.folders("")?.iter().any(|f| f == "metadata") {
        return Err(LakeError::Retention(format!(
            "the lake {} has an Iceberg table's metadata/ folder: give --catalog (and --iceberg-table), \
             so the table loses the same days and its readers never meet a deleted file",
            lake.name()
        )));
    }
    let before = move_horizon(storage, before)?;
    let iceberg = match table {
        Some(config) => Some(connect_table(config, &lake)?.expire_days(before)?),
        None => None,
    };
    let (mut deleted_files, mut kept_for_snapshots) = (0, 0);
    for day_folder in storage.folders("attempts")? {
        if day_of_path(&day_folder).is_none_or(|day| day >= before) {
            continue;
        }
        let day_key = format!("attempts/{day_folder}");
        for bucket in storage.folders(&day_key)? {
            let bucket_key = format!("{day_key}/{bucket}");
            for name in storage.files(&bucket_key)? {
                let key = format!("{bucket_key}/{name}");
                if iceberg.as_ref().is_some_and(|t| t.reached.contains(&storage.uri(&key))) {
                    kept_for_snapshots += 1;
                    continue;
                }
                storage.remove(&key)?;
                deleted_files += 1;
            }
            storage.remove_folder(&bucket_key);
        }
        storage.remove_folder(&day_key);
    }
    Ok(Expiry { before, deleted_files, kept_for_snapshots, iceberg })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_day_is_read_from_its_folder() {
        let day = NaiveDate::from_ymd_opt(2026, 11, 30);
        assert_eq!(day_of_path("attempts/day=2026-11-30/bucket=03/a-1-2.parquet"), day);
        assert_eq!(day_of_path("day=2026-11-30/bucket=03/a-1-2.parquet"), day);
        assert_eq!(day_of_path("attempts/day=2026-13-01/bucket=03/x.parquet"), None);
        assert_eq!(day_of_path("prices/a.parquet"), None);
        let horizon = NaiveDate::from_ymd_opt(2026, 12, 1);
        assert!(is_expired(horizon, "attempts/day=2026-11-30/bucket=03/a-1-2.parquet"));
        assert!(!is_expired(horizon, "day=2026-12-01/bucket=03/a-1-2.parquet"), "the horizon's day is kept");
        assert!(!is_expired(None, "day=2026-11-30/bucket=03/a-1-2.parquet"), "no horizon, nothing expired");
        assert!(!is_expired(horizon, "misplaced.parquet"), "a file of no day is no expired file");
    }

    #[test]
    fn the_horizon_moves_later_and_never_earlier() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::Folder(dir.path().to_path_buf());
        let day = |d: u32| NaiveDate::from_ymd_opt(2026, 11, d).unwrap();
        assert_eq!(read_horizon(&storage).unwrap(), None);
        assert_eq!(move_horizon(&storage, day(10)).unwrap(), day(10));
        assert_eq!(
            move_horizon(&storage, day(5)).unwrap(),
            day(10),
            "an earlier day keeps the later horizon"
        );
        assert_eq!(move_horizon(&storage, day(20)).unwrap(), day(20));
        assert_eq!(read_horizon(&storage).unwrap(), Some(day(20)));
        std::fs::write(dir.path().join(EXPIRED), "{").unwrap();
        assert!(matches!(read_horizon(&storage), Err(LakeError::Damaged { .. })));
    }
}
