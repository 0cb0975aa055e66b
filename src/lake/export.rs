//! One export: the attempts derived since the last one, as Parquet files.
//!
//! Exactly once across crashes: the export's numbers are recorded before
//! any file is written (`Store::begin_export`); each file is written under
//! a hidden temporary name, flushed and renamed to its name, which the
//! export's numbers decide; the export is recorded finished only once all
//! its files are in place. An export a crash interrupted is done again
//! over the same numbers, so it renames the same names over what it had
//! already written, with the same content.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Lake, LakeError, ROWS_PER_FILE, file_name, io_error};
use crate::pricing::PriceTable;
use crate::store::Store;

/// What an export wrote.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exported {
    /// The lake now holds every attempt numbered up to this.
    pub through: i64,
    pub attempts: u64,
    pub files: u64,
    pub bytes: u64,
    pub elapsed: Duration,
}

/// The lake at `root` for `store`, created when missing, with the columns
/// `store` writes.
pub fn open_lake(store: &Store, root: &Path, buckets: Option<u32>) -> Result<Lake, LakeError> {
    let schema =
        store.lake_schema()?.into_iter().map(|(name, data_type)| super::Column { name, data_type }).collect();
    Lake::open_or_create(root, buckets, schema)
}

/// Exports what `lake` does not hold yet of `store` (node `node`), and the
/// node's prices; `None` when there was nothing to write.
pub fn export(
    store: &Store,
    lake: &Lake,
    node: &str,
    prices: &PriceTable,
) -> Result<Option<Exported>, LakeError> {
    let began = Instant::now();
    let lake_id = &lake.manifest().lake_id;
    let Some(slice) = store.begin_export(lake_id, |w| lake.bucket_of(w))? else { return Ok(None) };
    let mut files = 0;
    let mut bytes = 0;
    let mut dirs = BTreeSet::new();
    for partition in &slice.partitions {
        let dir = lake.partition_dir(partition.day, partition.bucket);
        std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
        let parts = partition.rows.div_ceil(ROWS_PER_FILE);
        for part in 0..parts {
            let name = file_name(node, slice.after + 1, slice.through, part);
            let path = dir.join(&name);
            let staged = dir.join(format!(".{name}.tmp"));
            store.write_partition(partition, part * ROWS_PER_FILE, ROWS_PER_FILE, node, &staged)?;
            bytes += put_in_place(&staged, &path)?;
            files += 1;
        }
        dirs.insert(dir);
    }
    let prices_path = lake.prices_path(node);
    if let Some(dir) = prices_path.parent() {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        dirs.insert(dir.to_path_buf());
    }
    let staged = prices_path.with_file_name(format!(".{node}.parquet.tmp"));
    store.write_prices(prices, node, &staged)?;
    put_in_place(&staged, &prices_path)?;
    for dir in &dirs {
        sync_dir(dir);
    }
    store.finish_export(lake_id, &slice, files, bytes)?;
    Ok(Some(Exported {
        through: slice.through,
        attempts: slice.attempts,
        files,
        bytes,
        elapsed: began.elapsed(),
    }))
}

/// Flushes `staged` to the disk and renames it to `path`; returns its size.
fn put_in_place(staged: &Path, path: &Path) -> Result<u64, LakeError> {
    let file = std::fs::File::open(staged).map_err(io_error(staged))?;
    file.sync_all().map_err(io_error(staged))?;
    let size = file.metadata().map_err(io_error(staged))?.len();
    std::fs::rename(staged, path).map_err(io_error(path))?;
    Ok(size)
}

/// Makes the renames into `dir` durable; a file system that cannot sync a
/// directory (some network mounts) has them durable already or never.
fn sync_dir(dir: &PathBuf) {
    if let Ok(handle) = std::fs::File::open(dir) {
        let _ = handle.sync_all();
    }
}
