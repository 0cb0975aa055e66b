//! One export: the attempts derived since the last one, as Parquet files.
//!
//! Exactly once across crashes, and never over another writer's files:
//! 1. the database records the export (its write numbers, the offset that
//!    makes them lake numbers, an export id) before anything is written
//!    (`Store::begin_export`);
//! 2. the lake records it at its first number, exclusively
//!    (`Lake::begin_record`): numbers another export took are refused, and
//!    this export is planned again after them;
//! 3. each file is written locally (under a hidden temporary name beside
//!    its place in a folder lake), flushed, and put at its name only if no
//!    file has it (`storage.rs`: linked, or a create-if-absent upload); a
//!    file there already is replaced only if this same export wrote it (a
//!    crash came between);
//! 4. the lake's record, then the database's, say it finished.
//!
//! An export a crash interrupted is done again over the same numbers, with
//! the same export id, so it writes the same names.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::nodes::{Begun, Binding, ExportRecord, FileEntry};
use super::storage::Location;
use super::{Lake, LakeError, ROWS_PER_FILE, file_name};
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

/// The lake at `location` for `store`, created when missing, with the
/// columns `store` writes.
pub fn open_lake(store: &Store, location: &Location, buckets: Option<u32>) -> Result<Lake, LakeError> {
    let schema = store
        .lake_schema()?
        .into_iter()
        .map(|(name, data_type)| {
            let added = ADDED_LAKE_COLUMNS.contains(&name.as_str());
            super::Column { name, data_type, added }
        })
        .collect();
    Lake::open_or_create(location, buckets, schema)
}

/// Opens the lake at `root` and binds this database to `node` in it
/// (`Lake::bind`): what `export` and `serve --lake` do at start, so a node
/// id another database holds is refused before anything runs.
pub fn open_bound(
    store: &Store,
    location: &Location,
    buckets: Option<u32>,
    node: &str,
    replace: bool,
) -> Result<(Lake, Binding), LakeError> {
    let lake = open_lake(store, location, buckets)?;
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
    // Files bound for an object store are written here first.
    let scratch = tempfile::Builder::new()
        .prefix("attempt-ledger-export-")
        .tempdir()
        .map_err(|source| LakeError::Io { path: std::env::temp_dir().display().to_string(), source })?;
    let storage = lake.storage();
    let footer_export_id = |path: &Path| written_by(store, path);
    let (mut files, mut bytes, mut entries) = (0, 0, Vec::new());
    let mut dirs = BTreeSet::new();
    for partition in &slice.partitions {
        let dir = lake.partition_key(partition.day, partition.bucket);
        let parts = partition.rows.div_ceil(ROWS_PER_FILE);
        for part in 0..parts {
            let name = file_name(node, slice.lake_from(), slice.lake_through(), part);
            let key = format!("{dir}/{name}");
            let staged = storage.staging_path(&key, scratch.path())?;
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
            let size = storage.place(&key, &staged, &slice.export_id, footer_export_id)?;
            bytes += size;
            files += 1;
            let relative = key.strip_prefix("attempts/").unwrap_or(&key).to_string();
            entries.push(FileEntry { path: relative, rows, bytes: size });
        }
        dirs.insert(dir);
    }
    // The node's own prices, newest wins: replaced at every export.
    let key = lake.prices_key(node);
    let staged = storage.staging_path(&key, scratch.path())?;
    if let Err(error) =
        store.write_prices(prices, node, &staged, &metadata(slice.lake_from(), slice.lake_through()))
    {
        let _ = std::fs::remove_file(&staged);
        return Err(error.into());
    }
    storage.put_over(&key, &staged)?;
    dirs.insert("prices".to_string());
    storage.sync(&dirs.into_iter().collect::<Vec<_>>());
    Ok((files, bytes, entries))
}

/// The export id in the footer of the file at `path`, if it has one.
fn written_by(store: &Store, path: &Path) -> Option<String> {
    let mut footers = store.parquet_footers(&[PathBuf::from(path)]);
    footers.pop()?.ok()?.metadata.remove("export_id")
}
