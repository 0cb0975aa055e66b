//! The attempt lake: the attempts of one or many nodes as Parquet files
//! that Spark, ClickHouse and DuckDB read (docs/lake.md).
//!
//! ```text
//! LAKE/_lake.json                      format version, lake id, bucket count, schema
//! LAKE/_nodes/<node>/...               who writes as each node, and what each export wrote
//! LAKE/prices/<node>.parquet           each node's resolved prices, rewritten at each export
//! LAKE/attempts/day=YYYY-MM-DD/bucket=NN/<node>-<from>-<through>[-k].parquet
//! ```
//!
//! The DuckDB file stays the truth: an export writes the attempts derived
//! since the last one (`export.rs`) as the node it is bound to
//! (`nodes.rs`); `survey.rs` tells good files from bad ones and each
//! node's numbers from their gaps; `read.rs` answers a report from the
//! good files with the product's own rules.

pub mod export;
pub mod nodes;
pub mod read;
pub mod survey;

use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use attempt_core::lake_names::MAX_LAKE_BUCKETS;

use crate::store::StoreError;

/// The layout and column set this binary writes and reads. Version 1 had no
/// `_nodes/` and no metadata in its files.
pub const FORMAT_VERSION: u32 = 2;
/// Buckets of a new lake: Iceberg's `bucket[16]` of `workflow_id`.
pub const DEFAULT_BUCKETS: u32 = 16;
/// Rows of one partition in one file at most; an export with more writes
/// `-1`, `-2`, ... beside it (a few tens of MiB each).
pub const ROWS_PER_FILE: u64 = 1_000_000;

const MANIFEST: &str = "_lake.json";

#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("lake {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path} is not an attempt lake's manifest: {detail}")]
    Manifest { path: String, detail: String },
    #[error(
        "{path} is lake format version {found}; this attempt-ledger writes and reads version {FORMAT_VERSION}{}",
        if *found < FORMAT_VERSION {
            " (an older lake, whose files do not say who wrote them): move it aside and export each node \
             to a new lake; each database still holds every attempt it has not pruned"
        } else {
            ": upgrade attempt-ledger"
        }
    )]
    Version { path: String, found: u32 },
    #[error("the lake {path} has {found} buckets; --lake-buckets {asked} applies only to a new lake")]
    Buckets { path: String, found: u32, asked: u32 },
    #[error(
        "the lake's columns ({path}) are not what this attempt-ledger writes, nor a schema it grows by \
         added columns: {detail}. Export to a new lake"
    )]
    Schema { path: String, detail: String },
    #[error("no attempt lake at {0}: its _lake.json is missing (export to it first)")]
    Missing(String),
    #[error("the attempt lake {0} holds no attempts yet: export to it first")]
    Empty(String),
    #[error(
        "node id `{node}` of the lake {lake} is bound to another database ({holder}, claimed at {claimed_at}); \
         this database is {database}. If this database replaces that one (its disk was lost, or it was \
         rebuilt under the same host name), run again with --replace-node: its exports then continue \
         after the lake's highest number for `{node}`, never over them. Otherwise give this database a \
         node id of its own (--node-id)",
        lake = .0.lake, node = .0.node, holder = .0.holder, claimed_at = .0.claimed_at, database = .0.database
    )]
    NodeTaken(Box<NodeTaken>),
    #[error("gave up on {what}: other writers kept taking it first; run again")]
    Contended { what: String },
    #[error("{0} exists already")]
    Exists(String),
    #[error(
        "the lake numbers from {from} of node `{node}` are taken by export {export_id} of database {database_id}"
    )]
    NumbersTaken { node: String, from: i64, export_id: String, database_id: String },
    #[error("{path} is damaged ({detail}): `attempt-ledger lake check` shows what the lake holds")]
    Damaged { path: String, detail: String },
    #[error(
        "{path} exists and was written by {by}, not by this export: an export never replaces a file it \
         did not write. Move it aside (`attempt-ledger lake check` says what it is) and export again"
    )]
    FileTaken { path: String, by: String },
    #[error("--lake {0} is a file, not a folder")]
    NotAFolder(String),
    #[error("{path} is larger than {limit} bytes, more than any file of a lake's own holds")]
    TooLarge { path: String, limit: u64 },
    #[error("{}", survey::refusal(lake, files))]
    BadFiles { lake: String, files: Vec<survey::BadFile> },
}

/// A node id bound to another database than the one asking.
#[derive(Debug)]
pub struct NodeTaken {
    pub lake: String,
    pub node: String,
    /// The database the lake binds it to, since `claimed_at`.
    pub holder: String,
    pub claimed_at: String,
    /// The database that asked.
    pub database: String,
}

/// The most a lake's own JSON file (the manifest, a claim, an export's
/// record) may take; past it the file is not the lake's.
pub const MAX_JSON_BYTES: u64 = 64 << 20;

/// A lake's own JSON file as text, refused past `MAX_JSON_BYTES` (a
/// replaced or linked file is never read whole into memory).
pub(crate) fn read_small(path: &Path) -> Result<String, LakeError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(io_error(path))?;
    let mut text = String::new();
    file.take(MAX_JSON_BYTES + 1).read_to_string(&mut text).map_err(io_error(path))?;
    if text.len() as u64 > MAX_JSON_BYTES {
        return Err(LakeError::TooLarge { path: path.display().to_string(), limit: MAX_JSON_BYTES });
    }
    Ok(text)
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LakeError + '_ {
    move |source| LakeError::Io { path: path.display().to_string(), source }
}

/// `_lake.json`: what a reader needs to know before it reads a file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub format_version: u32,
    /// Random, made when the lake is: a database's exports are recorded
    /// per lake, so a new (empty) lake at an old path gets everything.
    pub lake_id: String,
    pub created_at: String,
    pub buckets: u32,
    /// How rows are partitioned and ordered in their files.
    pub partitioning: Partitioning,
    /// The columns of every attempts file, with their DuckDB types.
    pub schema: Vec<Column>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Partitioning {
    pub day: String,
    pub bucket: String,
    pub sort: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub data_type: String,
    /// Added to the lake after its first files: a file written before it
    /// lacks it (and every column after it), and reads as NULL there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub added: bool,
}

impl Manifest {
    /// How many leading columns every attempts file must have: the schema
    /// without its trailing added columns.
    pub fn required_columns(&self) -> usize {
        self.schema.iter().rposition(|c| !c.added).map_or(0, |last| last + 1)
    }
}

/// A lake directory whose manifest has been read (or written).
#[derive(Debug, Clone)]
pub struct Lake {
    root: PathBuf,
    manifest: Manifest,
}

impl Lake {
    /// The lake at `root`, created with `buckets` (default 16) when it has
    /// no manifest yet. Several nodes may create one lake at once: the
    /// manifest is linked into place only if none is there, and every node
    /// then reads the one that won.
    pub fn open_or_create(root: &Path, buckets: Option<u32>, schema: Vec<Column>) -> Result<Self, LakeError> {
        check_folder(root)?;
        let path = root.join(MANIFEST);
        if !path.exists() {
            std::fs::create_dir_all(root).map_err(io_error(root))?;
            let manifest = Manifest {
                format_version: FORMAT_VERSION,
                lake_id: random_id("lake"),
                created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                buckets: buckets.unwrap_or(DEFAULT_BUCKETS),
                partitioning: Partitioning {
                    day: "the UTC date of started_at".into(),
                    bucket: "Iceberg bucket[N] of workflow_id: (murmur3_x86_32(UTF-8 bytes, seed 0) & \
                             2147483647) % N"
                        .into(),
                    sort: ["workflow_id", "started_at", "attempt_id"].map(String::from).to_vec(),
                },
                schema: schema.clone(),
            };
            let text = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
            // Of several nodes creating the lake at once, one manifest wins
            // and every node reads it.
            match create_exclusive(&path, text.as_bytes()) {
                Ok(()) | Err(LakeError::Exists(_)) => {}
                Err(other) => return Err(other),
            }
        }
        let mut lake = Self::open(root)?;
        if lake.manifest.schema != schema {
            lake = lake.evolve(schema)?;
        }
        if let Some(asked) = buckets.filter(|b| *b != lake.manifest.buckets) {
            return Err(LakeError::Buckets {
                path: root.display().to_string(),
                found: lake.manifest.buckets,
                asked,
            });
        }
        Ok(lake)
    }

    /// This lake, its manifest grown to `ours` where `ours` is its schema
    /// with added columns after it (a lake an older version made); as it
    /// is where its schema is `ours` with added columns after (a newer
    /// version's: this one writes files without them, which the lake
    /// allows). Any other difference is refused before a file is written.
    /// Nodes growing one manifest at once all write the same one.
    fn evolve(self, ours: Vec<Column>) -> Result<Self, LakeError> {
        let theirs = &self.manifest.schema;
        let (shorter, longer) = if theirs.len() <= ours.len() { (theirs, &ours) } else { (&ours, theirs) };
        let extends = longer.starts_with(shorter) && longer[shorter.len()..].iter().all(|c| c.added);
        if !extends {
            let found: Vec<(String, String)> =
                theirs.iter().map(|c| (c.name.clone(), c.data_type.clone())).collect();
            let written: Vec<(String, String)> =
                ours.iter().map(|c| (c.name.clone(), c.data_type.clone())).collect();
            return Err(LakeError::Schema {
                path: self.root.join(MANIFEST).display().to_string(),
                detail: survey::schema_difference(&written, &found),
            });
        }
        if theirs.len() >= ours.len() {
            return Ok(self);
        }
        let path = self.root.join(MANIFEST);
        let manifest = Manifest { schema: ours, ..self.manifest };
        let staged =
            path.with_file_name(format!(".{MANIFEST}.{}.{}.tmp", std::process::id(), random_id("s")));
        let text = serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n";
        write_synced(&staged, text.as_bytes())?;
        std::fs::rename(&staged, &path).map_err(io_error(&path))?;
        sync_dir(Some(&self.root));
        tracing::info!(lake = %self.root.display(), columns = manifest.schema.len(), "lake schema grown");
        Self::open(&self.root)
    }

    /// The existing lake at `root`.
    pub fn open(root: &Path) -> Result<Self, LakeError> {
        check_folder(root)?;
        let path = root.join(MANIFEST);
        let text = match read_small(&path) {
            Ok(text) => text,
            Err(LakeError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Err(LakeError::Missing(root.display().to_string()));
            }
            Err(other) => return Err(other),
        };
        let bad = |detail: String| LakeError::Manifest { path: path.display().to_string(), detail };
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let found = value.get("format_version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        if found != FORMAT_VERSION {
            return Err(LakeError::Version { path: path.display().to_string(), found });
        }
        let manifest: Manifest = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        if !(1..=MAX_LAKE_BUCKETS).contains(&manifest.buckets) {
            return Err(bad(format!("buckets is {}, not 1 to {MAX_LAKE_BUCKETS}", manifest.buckets)));
        }
        Ok(Self { root: root.to_path_buf(), manifest })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The bucket of a workflow id in this lake.
    pub fn bucket_of(&self, workflow_id: &str) -> u32 {
        iceberg_bucket(workflow_id, self.manifest.buckets)
    }

    /// The folder of one day and bucket.
    pub fn partition_dir(&self, day: NaiveDate, bucket: u32) -> PathBuf {
        self.root.join("attempts").join(format!("day={day}")).join(format!("bucket={bucket:02}"))
    }

    /// Whether any attempts file is in place (a reader's glob matches none
    /// in a lake only just created).
    pub fn has_attempts(&self) -> bool {
        let Ok(days) = std::fs::read_dir(self.root.join("attempts")) else { return false };
        days.flatten().any(|day| {
            std::fs::read_dir(day.path()).into_iter().flatten().flatten().any(|bucket| {
                std::fs::read_dir(bucket.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|f| f.file_name().to_string_lossy().ends_with(".parquet"))
            })
        })
    }

    pub fn prices_path(&self, node: &str) -> PathBuf {
        self.root.join("prices").join(format!("{node}.parquet"))
    }
}

/// The name of part `k` of what one export of `node`, covering the writes
/// numbered `from..=through`, holds of one partition: the same export
/// always writes the same names.
pub fn file_name(node: &str, from: i64, through: i64, part: u64) -> String {
    match part {
        0 => format!("{node}-{from}-{through}.parquet"),
        k => format!("{node}-{from}-{through}-{k}.parquet"),
    }
}

/// Iceberg's bucket transform of a string (the table spec's "Bucket
/// Transform Details"): murmur3_x86_32 of its UTF-8 bytes with seed 0,
/// made non-negative, modulo the bucket count.
pub fn iceberg_bucket(value: &str, buckets: u32) -> u32 {
    let hash = murmur3::murmur3_32(&mut std::io::Cursor::new(value.as_bytes()), 0).unwrap_or(0);
    ((hash as i32 & i32::MAX) as u32) % buckets.max(1)
}

fn random_id(prefix: &str) -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        bytes = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0).to_le_bytes();
    }
    format!("{prefix}-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// A lake's root is a folder (or nothing yet).
fn check_folder(root: &Path) -> Result<(), LakeError> {
    match std::fs::metadata(root) {
        Ok(meta) if !meta.is_dir() => Err(LakeError::NotAFolder(root.display().to_string())),
        _ => Ok(()),
    }
}

/// Removes what writers of `path` killed between staging it and placing it
/// left beside it (`.NAME.*.tmp`). Called once `path` is in place, when
/// every such copy is useless: a writer still alive whose staged copy is
/// gone fails to place it the way it would have anyway (the name exists).
pub(crate) fn remove_staged_copies(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return };
    let prefix = format!(".{}.", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let file = file.to_string_lossy();
        if file.starts_with(&prefix) && file.ends_with(".tmp") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Creates `path` holding `bytes`, whole, unless a file is there already
/// (`LakeError::Exists`): written under a staged name, flushed, then
/// hard-linked to its name, which fails when the name exists. Where the
/// file system has no hard links, a create-new open does the same (a
/// crash can then leave the file partly written, which its reader names).
pub(crate) fn create_exclusive(path: &Path, bytes: &[u8]) -> Result<(), LakeError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let staged = dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), random_id("s")));
    write_synced(&staged, bytes)?;
    let linked = std::fs::hard_link(&staged, path);
    let _ = std::fs::remove_file(&staged);
    match linked {
        Ok(()) => remove_staged_copies(path),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            remove_staged_copies(path);
            return Err(LakeError::Exists(path.display().to_string()));
        }
        Err(_) => {
            let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(LakeError::Exists(path.display().to_string()));
                }
                Err(e) => return Err(io_error(path)(e)),
            };
            file.write_all(bytes).and_then(|_| file.sync_all()).map_err(io_error(path))?;
        }
    }
    sync_dir(Some(dir));
    Ok(())
}

/// Makes the entries of `dir` durable; a file system that cannot sync a
/// directory (some network mounts) has them durable already or never.
pub(crate) fn sync_dir(dir: Option<&Path>) {
    if let Some(handle) = dir.and_then(|d| std::fs::File::open(d).ok()) {
        let _ = handle.sync_all();
    }
}

/// Writes `bytes` to `path` and flushes them to the disk.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), LakeError> {
    let mut file = std::fs::File::create(path).map_err(io_error(path))?;
    file.write_all(bytes).and_then(|_| file.sync_all()).map_err(io_error(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer killed between staging a file and placing it leaves its
    /// staged copy; the next writer of that name, placing it or finding it
    /// placed, removes every such copy, and no other file.
    #[test]
    fn a_killed_writers_staged_copies_go_once_the_file_is_placed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("_lake.json");
        let leftovers = ["._lake.json.4562.s-1.tmp", "._lake.json.77.s-2.tmp"].map(|n| dir.path().join(n));
        let other = dir.path().join(".claim-000001.json.4562.s-3.tmp");
        for file in leftovers.iter().chain([&other]) {
            std::fs::write(file, b"half").unwrap();
        }
        create_exclusive(&path, b"{}").unwrap();
        assert!(leftovers.iter().all(|f| !f.exists()));
        assert!(other.exists(), "a staged copy of another name is not this writer's to remove");
        std::fs::write(&leftovers[0], b"half").unwrap();
        assert!(matches!(create_exclusive(&path, b"{}"), Err(LakeError::Exists(_))));
        assert!(!leftovers[0].exists());
        assert_eq!(std::fs::read(&path).unwrap(), b"{}");
    }

    /// The Iceberg table spec's test vectors for the bucket hash (appendix
    /// B): a lake written with them can be registered as an Iceberg table.
    #[test]
    fn buckets_are_icebergs() {
        let hash = |s: &str| murmur3::murmur3_32(&mut std::io::Cursor::new(s.as_bytes()), 0).unwrap();
        assert_eq!(hash("iceberg") as i32, 1210000089);
        assert_eq!(iceberg_bucket("iceberg", 16), 1210000089 % 16);
        // A negative hash is made non-negative by masking, not abs().
        let negative = (0..1000).map(|i| format!("wf-{i}")).find(|s| (hash(s) as i32) < 0).unwrap();
        assert_eq!(iceberg_bucket(&negative, 16), ((hash(&negative) as i32) & i32::MAX) as u32 % 16);
    }

    #[test]
    fn file_names_number_their_parts() {
        assert_eq!(file_name("n1", 0, 7, 0), "n1-0-7.parquet");
        assert_eq!(file_name("n1", 0, 7, 2), "n1-0-7-2.parquet");
    }
}
