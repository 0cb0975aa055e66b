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

use super::iceberg::{NewFile, TableConfig};
use super::nodes::{Begun, Binding, ExportRecord, ExportState, FileEntry};
use super::retention::is_expired;
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
    /// This export and `next`, which followed it, as one.
    fn followed_by(self, next: Exported) -> Exported {
        Exported {
            first_write: self.first_write,
            through: next.through,
            lake_from: self.lake_from,
            lake_through: next.lake_through,
            attempts: self.attempts + next.attempts,
            files: self.files + next.files,
            bytes: self.bytes + next.bytes,
            elapsed: self.elapsed + next.elapsed,
            rebased_over: next.rebased_over.or(self.rebased_over),
        }
    }

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
/// With `table`, the lake's Iceberg table is connected (created when
/// missing) before the node is bound, so a catalog that cannot be reached
/// refuses the start.
pub fn open_bound(
    store: &Store,
    location: &Location,
    buckets: Option<u32>,
    node: &str,
    replace: bool,
    table: Option<&TableConfig>,
) -> Result<(Lake, Binding), LakeError> {
    let mut lake = open_lake(store, location, buckets)?;
    if let Some(table) = table {
        lake = lake.with_table(table)?;
    }
    let binding = lake.bind(node, &store.database_id()?, replace)?;
    Ok((lake, binding))
}

/// How often an export planned over numbers another writer took is planned
/// again before it gives up.
const REPLANS: usize = 4;

/// Exports what `lake` does not hold yet of `store` (bound as `binding`),
/// and the node's prices; `None` when there was nothing to write.
///
/// An export a crash interrupted covers only the writes it was planned
/// over: once it is done again, the writes that came after it are exported
/// too, so the lake holds every attempt when this returns.
pub fn export(
    store: &Store,
    lake: &Lake,
    binding: &Binding,
    prices: &PriceTable,
) -> Result<Option<Exported>, LakeError> {
    let began = Instant::now();
    let mut done: Option<Exported> = None;
    // One resumed export at most: the store keeps one unfinished at a time.
    for _ in 0..2 {
        let Some((next, resumed)) = export_slice(store, lake, binding, prices)? else { break };
        done = Some(match done {
            Some(first) => first.followed_by(next),
            None => next,
        });
        if !resumed {
            break;
        }
    }
    Ok(done.map(|done| Exported { elapsed: began.elapsed(), ..done }))
}

/// One export: an interrupted one done again (then `true`), or the writes
/// not yet exported.
fn export_slice(
    store: &Store,
    lake: &Lake,
    binding: &Binding,
    prices: &PriceTable,
) -> Result<Option<(Exported, bool)>, LakeError> {
    let began = Instant::now();
    let lake_id = &lake.manifest().lake_id;
    let node = binding.node.as_str();
    // A long-running `serve --lake` stops writing as a node another
    // database took over (`--replace-node`) since it started.
    lake.bind(node, &binding.database_id, false)?;
    for _ in 0..REPLANS {
        let high = lake.high(node)?;
        let Some(slice) = store.begin_export(lake_id, high, |w| lake.bucket_of(w))? else {
            commit_earlier(lake, node, high)?;
            return Ok(None);
        };
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
        let planned = plan_files(lake, node, &slice);
        // A run a crash stopped between the table's commit and the lake's
        // record committed these files: they stay as committed.
        let watermark = match lake.table() {
            Some(table) => table.watermark(node)?.unwrap_or(0),
            None => 0,
        };
        let committed = lake.table().is_some() && watermark >= slice.lake_through();
        let written = if committed {
            sizes_of(lake, &planned)?
        } else {
            write_files(store, lake, binding, &slice, &planned, prices)?
        };
        let (files, bytes) = (written.len() as u64, written.iter().map(|w| w.bytes).sum());
        if let Some(table) = lake.table().filter(|_| !committed) {
            // Exports made before the lake had a table (or before this node
            // committed to it) go in with this one, so the table holds every
            // number of the node up to its watermark.
            let mut new_files = earlier_files(lake, node, watermark, slice.lake_from())?;
            // Late attempts of days the lake expired are written, as every
            // attempt is, and kept out of the table as the lake's readers
            // keep them out (`lake expire` removes them).
            let horizon = lake.horizon()?;
            let kept = |plan: &&PlannedFile| horizon.is_none_or(|h| plan.day >= h);
            new_files.extend(planned.iter().zip(&written).filter(|(plan, _)| kept(plan)).map(
                |(plan, entry)| NewFile {
                    uri: lake.storage().uri(&plan.key),
                    day: plan.day,
                    bucket: plan.bucket,
                    rows: plan.rows,
                    bytes: entry.bytes,
                },
            ));
            let done = table.commit_export(
                node,
                &slice.export_id,
                watermark + 1,
                slice.lake_through(),
                &new_files,
            )?;
            tracing::info!(node, export_id = %slice.export_id, ?done, "committed to the Iceberg table");
        }
        lake.finish_record(&record.finished(slice.attempts, written))?;
        store.finish_export(lake_id, &slice, files, bytes)?;
        let exported = Exported {
            first_write: slice.after + 1,
            through: slice.through,
            lake_from: slice.lake_from(),
            lake_through: slice.lake_through(),
            attempts: slice.attempts,
            files,
            bytes,
            elapsed: began.elapsed(),
            rebased_over: slice.rebased_over,
        };
        return Ok(Some((exported, slice.again)));
    }
    Err(LakeError::Contended { what: format!("the numbers of node {node}'s next export") })
}

/// One file an export writes: its key, partition and rows.
struct PlannedFile {
    key: String,
    day: chrono::NaiveDate,
    bucket: u32,
    partition: usize,
    offset: u64,
    rows: u64,
}

/// The files of `slice`, named as every run of this export names them.
fn plan_files(lake: &Lake, node: &str, slice: &ExportSlice) -> Vec<PlannedFile> {
    let mut planned = Vec::new();
    for (index, partition) in slice.partitions.iter().enumerate() {
        let dir = lake.partition_key(partition.day, partition.bucket);
        for part in 0..partition.rows.div_ceil(ROWS_PER_FILE) {
            let name = file_name(node, slice.lake_from(), slice.lake_through(), part);
            planned.push(PlannedFile {
                key: format!("{dir}/{name}"),
                day: partition.day,
                bucket: partition.bucket,
                partition: index,
                offset: part * ROWS_PER_FILE,
                rows: (partition.rows - part * ROWS_PER_FILE).min(ROWS_PER_FILE),
            });
        }
    }
    planned
}

/// Commits to the lake's table the finished exports of `node` through
/// `high` that it lacks (exported before the lake had a table, or by a run
/// without `--table-format iceberg`), when there is nothing new to export.
fn commit_earlier(lake: &Lake, node: &str, high: i64) -> Result<(), LakeError> {
    let Some(table) = lake.table() else { return Ok(()) };
    let watermark = table.watermark(node)?.unwrap_or(0);
    let records = lake.export_records(node)?;
    let Some(last) = records.iter().rev().find(|r| r.state == ExportState::Finished && r.through <= high)
    else {
        return Ok(());
    };
    if last.through <= watermark {
        return Ok(());
    }
    let files = earlier_files(lake, node, watermark, last.through + 1)?;
    let done = table.commit_export(node, &last.export_id, watermark + 1, last.through, &files)?;
    tracing::info!(node, export_id = %last.export_id, ?done, "committed earlier exports to the Iceberg table");
    Ok(())
}

/// The files of `node`'s finished exports past the table's `watermark` and
/// before `before`: those of exports made before it committed to a table.
fn earlier_files(lake: &Lake, node: &str, watermark: i64, before: i64) -> Result<Vec<NewFile>, LakeError> {
    if watermark + 1 >= before {
        return Ok(Vec::new());
    }
    let mut files = Vec::new();
    // Files of expired days are not the lake's any more (`lake expire`).
    let horizon = lake.horizon()?;
    for record in lake.export_records(node)? {
        if record.state != ExportState::Finished || record.through <= watermark || record.from >= before {
            continue;
        }
        for file in record.files.iter().filter(|file| !is_expired(horizon, &file.path)) {
            let key = format!("attempts/{}", file.path);
            let (day, bucket) = partition_of(&file.path).ok_or_else(|| LakeError::Damaged {
                path: lake.storage().describe(&key),
                detail: format!("export {} lists it outside any day=/bucket= folder", record.export_id),
            })?;
            files.push(NewFile {
                uri: lake.storage().uri(&key),
                day,
                bucket,
                rows: file.rows,
                bytes: file.bytes,
            });
        }
    }
    if !files.is_empty() {
        tracing::info!(
            node,
            files = files.len(),
            "committing the node's earlier exports to the Iceberg table"
        );
    }
    Ok(files)
}

/// The day and bucket of a file's path under `attempts/`
/// (`day=YYYY-MM-DD/bucket=NN/name`).
fn partition_of(path: &str) -> Option<(chrono::NaiveDate, u32)> {
    let mut parts = path.split('/');
    let day = parts.next()?.strip_prefix("day=")?.parse().ok()?;
    let bucket = parts.next()?.strip_prefix("bucket=")?.parse().ok()?;
    Some((day, bucket))
}

/// The record's entry of a planned file: its path under `attempts/`.
fn entry(plan: &PlannedFile, bytes: u64) -> FileEntry {
    let path = plan.key.strip_prefix("attempts/").unwrap_or(&plan.key).to_string();
    FileEntry { path, rows: plan.rows, bytes }
}

/// The entries of files an earlier run wrote and committed.
fn sizes_of(lake: &Lake, planned: &[PlannedFile]) -> Result<Vec<FileEntry>, LakeError> {
    planned
        .iter()
        .map(|plan| match lake.storage().size(&plan.key)? {
            Some(bytes) => Ok(entry(plan, bytes)),
            None => Err(LakeError::Damaged {
                path: lake.storage().describe(&plan.key),
                detail: "the Iceberg table holds this file, and it is gone".into(),
            }),
        })
        .collect()
}

/// Writes the planned files and the node's prices; the record's list of
/// the files.
fn write_files(
    store: &Store,
    lake: &Lake,
    binding: &Binding,
    slice: &ExportSlice,
    planned: &[PlannedFile],
    prices: &PriceTable,
) -> Result<Vec<FileEntry>, LakeError> {
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
    let field_ids = field_ids(store, lake)?;
    let mut entries = Vec::with_capacity(planned.len());
    let mut dirs = BTreeSet::new();
    for plan in planned {
        let staged = storage.staging_path(&plan.key, scratch.path())?;
        let written = store.write_partition(
            &slice.partitions[plan.partition],
            plan.offset..plan.offset + plan.rows,
            node,
            &staged,
            &metadata(slice.lake_from(), slice.lake_through()),
            &field_ids,
        );
        if let Err(error) = written {
            let _ = std::fs::remove_file(&staged);
            return Err(error.into());
        }
        let size = storage.place(&plan.key, &staged, &slice.export_id, footer_export_id)?;
        entries.push(entry(plan, size));
        if let Some((dir, _)) = plan.key.rsplit_once('/') {
            dirs.insert(dir.to_string());
        }
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
    Ok(entries)
}

/// Each column's Iceberg field id, its position in the lake's schema from
/// 1: every file carries them, so engines that read by id (Iceberg's rule)
/// find each column after the schema grows.
/// (This database's columns are the lake's or the first of them.)
fn field_ids(store: &Store, lake: &Lake) -> Result<Vec<(String, i32)>, LakeError> {
    let schema = &lake.manifest().schema;
    Ok(store
        .lake_schema()?
        .into_iter()
        .filter_map(|(name, _)| {
            let position = schema.iter().position(|column| column.name == name)?;
            Some((name, position as i32 + 1))
        })
        .collect())
}

/// The export id in the footer of the file at `path`, if it has one.
fn written_by(store: &Store, path: &Path) -> Option<String> {
    let mut footers = store.parquet_footers(&[PathBuf::from(path)]);
    footers.pop()?.ok()?.metadata.remove("export_id")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_partition_is_read_from_its_path() {
        let day = chrono::NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        assert_eq!(partition_of("day=2026-12-01/bucket=03/a-1-3.parquet"), Some((day, 3)));
        for bad in ["a-1-3.parquet", "day=2026-13-01/bucket=03/a.parquet", "day=2026-12-01/b=3/a.parquet"] {
            assert_eq!(partition_of(bad), None, "{bad}");
        }
    }
}
