//! One export: the attempts derived since the last one, as Parquet files.
//!
//! Exactly once across crashes, and never over another writer's files:
//! 1. the database records the export (its write numbers, the offset that
//!    makes them lake numbers, an export id) before anything is written
//!    (`Store::begin_export`);
//! 2. the lake records it at its first number, exclusively
//!    (`Lake::begin_record`): numbers another export took are refused, and
//!    this export is planned again after them;
//! 3. each file is written under a hidden temporary name, flushed, and
//!    linked to its name only if no file has it; a file there already is
//!    replaced only if this same export wrote it (a crash came between);
//! 4. the lake's record, then the database's, say it finished.
//!
//! An export a crash interrupted is done again over the same numbers, with
//! the same export id, so it writes the same names.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::nodes::{Begun, Binding, ExportRecord, FileEntry};
use super::{Lake, LakeError, ROWS_PER_FILE, file_name, io_error};
use crate::store::{ADDED_LAKE_COLUMNS, ExportSlice, Store};
use attempt_core::pricing::PriceTable;

/// What an export wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    /// The database's write numbers this export holds, `first_write` to
    /// `through`: the lake now holds every attempt numbered up to `through`.
    pub first_write: i64,
    pub through: i64,
    /// The lake numbers of this export.
    pub lake_from: i64,
    pub lake_through: i64,
    pub attempts: u64,
    pub files: u64,
    pub bytes: u64,
    pub elapsed: Duration,
    /// Set when the lake held numbers of this node that this database had
    /// not exported: the highest of them, which this export followed.
    pub rebased_over: Option<i64>,
}

impl Exported {
    /// Why this export's lake numbers do not follow the database's own, in
    /// words, when they do not.
    pub fn rebase_note(&self, node: &str) -> Option<String> {
        self.rebased_over.map(|high| {
            format!(
                "the lake's exports of node {node} reach number {high}, past what this database exported \
                 (a restored backup, or a node rebuilt under its id): its writes from {} on are numbered \
                 from {} in the lake, after them",
                self.first_write, self.lake_from
            )
        })
    }
}

/// The lake at `root` for `store`, created when missing, with the columns
/// `store` writes.
pub fn open_lake(store: &Store, root: &Path, buckets: Option<u32>) -> Result<Lake, LakeError> {
    let schema = store
        .lake_schema()?
        .into_iter()
        .map(|(name, data_type)| {
            let added = ADDED_LAKE_COLUMNS.contains(&name.as_str());
            super::Column { name, data_type, added }
        })
        .collect();
    Lake::open_or_create(root, buckets, schema)
}

/// Opens the lake at `root` and binds this database to `node` in it
/// (`Lake::bind`): what `export` and `serve --lake` do at start, so a node
/// id another database holds is refused before anything runs.
pub fn open_bound(
    store: &Store,
    root: &Path,
    buckets: Option<u32>,
    node: &str,
    replace: bool,
) -> Result<(Lake, Binding), LakeError> {
    let lake = open_lake(store, root, buckets)?;
    let binding = lake.bind(node, &store.database_id()?, replace)?;
    Ok((lake, binding))
}

/// How often an export planned over numbers another writer took is planned
/// again before it gives up.
const REPLANS: usize = 4;

/// Exports what `lake` does not hold yet of `store` (bound as `binding`),
/// and the node's prices; `None` when there was nothing to write.
pub fn export(
    store: &Store,
    lake: &Lake,
    binding: &Binding,
    prices: &PriceTable,
) -> Result<Option<Exported>, LakeError> {
    let began = Instant::now();
    let lake_id = &lake.manifest().lake_id;
    let node = binding.node.as_str();
    // A long-running `serve --lake` stops writing as a node another
    // database took over (`--replace-node`) since it started.
    lake.bind(node, &binding.database_id, false)?;
    for _ in 0..REPLANS {
        let high = lake.high(node)?;
        let Some(slice) = store.begin_export(lake_id, high, |w| lake.bucket_of(w))? else { return Ok(None) };
        let record = ExportRecord::begun(
            node,
            &binding.database_id,
            &slice.export_id,
            slice.lake_from(),
            slice.lake_through(),
        );
        match lake.begin_record(&record) {
            Ok(Begun::New | Begun::Again) => {}
            Err(LakeError::NumbersTaken { .. }) => {
                // Another database writing as this node (a restored copy
                // running beside its original) took these numbers first.
                store.abandon_export(lake_id, &slice)?;
                continue;
            }
            Err(other) => return Err(other),
        }
        let (files, bytes, entries) = write_files(store, lake, binding, &slice, prices)?;
        lake.finish_record(&record.finished(slice.attempts, entries))?;
        store.finish_export(lake_id, &slice, files, bytes)?;
        return Ok(Some(Exported {
            first_write: slice.after + 1,
            through: slice.through,
            lake_from: slice.lake_from(),
            lake_through: slice.lake_through(),
            attempts: slice.attempts,
            files,
            bytes,
            elapsed: began.elapsed(),
            rebased_over: slice.rebased_over,
        }));
    }
    Err(LakeError::Contended { what: format!("the numbers of node {node}'s next export") })
}

/// Writes the slice's files and the node's prices; returns the files, bytes
/// and the record's list of them.
fn write_files(
    store: &Store,
    lake: &Lake,
    binding: &Binding,
    slice: &ExportSlice,
    prices: &PriceTable,
) -> Result<(u64, u64, Vec<FileEntry>), LakeError> {
    let node = binding.node.as_str();
    let metadata = |part_from: i64, part_through: i64| {
        vec![
            ("lake_id", lake.manifest().lake_id.clone()),
            ("node", node.to_string()),
            ("database_id", binding.database_id.clone()),
            ("export_id", slice.export_id.clone()),
            ("seq_from", part_from.to_string()),
            ("seq_through", part_through.to_string()),
        ]
    };
    let (mut files, mut bytes, mut entries) = (0, 0, Vec::new());
    let mut dirs = BTreeSet::new();
    let attempts_dir = lake.root().join("attempts");
    for partition in &slice.partitions {
        let dir = lake.partition_dir(partition.day, partition.bucket);
        std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
        let parts = partition.rows.div_ceil(ROWS_PER_FILE);
        for part in 0..parts {
            let name = file_name(node, slice.lake_from(), slice.lake_through(), part);
            let path = dir.join(&name);
            let staged = dir.join(format!(".{name}.tmp"));
            let rows = (partition.rows - part * ROWS_PER_FILE).min(ROWS_PER_FILE);
            let written = store.write_partition(
                partition,
                part * ROWS_PER_FILE,
                ROWS_PER_FILE,
                node,
                &staged,
                &metadata(slice.lake_from(), slice.lake_through()),
            );
            if let Err(error) = written {
                let _ = std::fs::remove_file(&staged);
                return Err(error.into());
            }
            let size = place(store, &staged, &path, &slice.export_id)?;
            bytes += size;
            files += 1;
            let relative = path.strip_prefix(&attempts_dir).unwrap_or(&path).display().to_string();
            entries.push(FileEntry { path: relative, rows, bytes: size });
        }
        dirs.insert(dir);
    }
    let prices_path = lake.prices_path(node);
    if let Some(dir) = prices_path.parent() {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        dirs.insert(dir.to_path_buf());
    }
    // The node's own prices, newest wins: replaced at every export.
    let staged = prices_path.with_file_name(format!(".{node}.parquet.tmp"));
    if let Err(error) =
        store.write_prices(prices, node, &staged, &metadata(slice.lake_from(), slice.lake_through()))
    {
        let _ = std::fs::remove_file(&staged);
        return Err(error.into());
    }
    flush(&staged)?;
    std::fs::rename(&staged, &prices_path).map_err(io_error(&prices_path))?;
    for dir in &dirs {
        super::sync_dir(Some(dir));
    }
    Ok((files, bytes, entries))
}

/// Flushes `staged` to the disk and puts it at `path` unless another export
/// wrote a file there: linked when the name is free, renamed over a file
/// this same export (`export_id`) wrote before a crash. Returns its size.
fn place(store: &Store, staged: &Path, path: &Path, export_id: &str) -> Result<u64, LakeError> {
    let size = flush(staged)?;
    let linked = std::fs::hard_link(staged, path);
    let result = match linked {
        Ok(()) => Ok(()),
        // A file system without hard links: a rename, after the same check.
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists && !path.exists() => {
            std::fs::rename(staged, path).map_err(io_error(path))
        }
        Err(_) => match written_by(store, path) {
            Some(id) if id == export_id => std::fs::rename(staged, path).map_err(io_error(path)),
            other => Err(LakeError::FileTaken {
                path: path.display().to_string(),
                by: other.unwrap_or_else(|| "no attempt-ledger export (it has no export id)".to_string()),
            }),
        },
    };
    let _ = std::fs::remove_file(staged);
    result.map(|()| size)
}

/// The export id in the footer of the file at `path`, if it has one.
fn written_by(store: &Store, path: &Path) -> Option<String> {
    let mut footers = store.parquet_footers(&[PathBuf::from(path)]);
    footers.pop()?.ok()?.metadata.remove("export_id")
}

/// Flushes `path` to the disk; returns its size.
fn flush(path: &Path) -> Result<u64, LakeError> {
    let file = std::fs::File::open(path).map_err(io_error(path))?;
    file.sync_all().map_err(io_error(path))?;
    Ok(file.metadata().map_err(io_error(path))?.len())
}
