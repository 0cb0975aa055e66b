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
pub mod iceberg;
pub mod nodes;
pub mod read;
pub mod retention;
pub mod storage;
pub mod survey;
pub mod table_check;

use std::path::Path;
use std::sync::Arc;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use attempt_core::lake_names::MAX_LAKE_BUCKETS;

use crate::store::StoreError;
use storage::{Location, Storage};

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
    #[error("the lake's store {store} cannot be used: {detail}")]
    Unusable { store: String, detail: String },
    #[error("lake {path}: {source}")]
    Object { path: String, source: Box<object_store::Error> },
    #[error("{0} changed while this export was writing it: another writer took it; run again")]
    Changed(String),
    #[error(
        "the lake's store {store} does not enforce conditional writes, which keep two writers from \
         replacing each other's claims and records: {detail}. Use a store that refuses a write to a name \
         that exists (If-None-Match) and an update of a changed object (If-Match): AWS S3, Google Cloud \
         Storage, Azure Blob Storage, MinIO; for an S3-compatible store that has them, leave \
         AWS_CONDITIONAL_PUT unset (etag)"
    )]
    Unconditional { store: String, detail: String },
    #[error(transparent)]
    Iceberg(#[from] iceberg::IcebergError),
    #[error("{0}")]
    Retention(String),
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

pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LakeError + '_ {
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

/// A lake whose manifest has been read (or written), in a folder or an
/// object store.
#[derive(Debug, Clone)]
pub struct Lake {
    storage: Storage,
    manifest: Manifest,
    /// The Iceberg table each export also commits to (`--table-format
    /// iceberg`).
    table: Option<Arc<iceberg::IcebergTable>>,
}

impl Lake {
    /// The lake at `location`, created with `buckets` (default 16) when it
    /// has no manifest yet, once its store proved it enforces the
    /// conditional writes the lake's records need (`Storage::prove`).
    /// Several nodes may create one lake at once: the manifest is created
    /// only if none is there, and every node then reads the one that won.
    pub fn open_or_create(
        location: &Location,
        buckets: Option<u32>,
        schema: Vec<Column>,
    ) -> Result<Self, LakeError> {
        let storage = Storage::at(location)?;
        storage.prove()?;
        if storage.read(MANIFEST)?.is_none() {
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
            // Of several nodes creating the lake at once, one manifest wins
            // and every node reads it.
            match storage.create(MANIFEST, to_json_bytes(&manifest)) {
                Ok(()) | Err(LakeError::Exists(_)) => {}
                Err(other) => return Err(other),
            }
        }
        // Nodes growing one manifest at once: the loser reads the winner's
        // and finds nothing left to grow.
        for _ in 0..8 {
            let (lake, seen) = Self::open_storage(storage.clone())?;
            let lake = if lake.manifest.schema != schema {
                match lake.evolve(schema.clone(), &seen) {
                    Err(LakeError::Changed(_)) => continue,
                    other => other?,
                }
            } else {
                lake
            };
            if let Some(asked) = buckets.filter(|b| *b != lake.manifest.buckets) {
                return Err(LakeError::Buckets { path: lake.name(), found: lake.manifest.buckets, asked });
            }
            return Ok(lake);
        }
        Err(LakeError::Contended { what: format!("the manifest of {}", storage.name()) })
    }

    /// This lake, its manifest grown to `ours` where `ours` is its schema
    /// with added columns after it (a lake an older version made); as it
    /// is where its schema is `ours` with added columns after (a newer
    /// version's: this one writes files without them, which the lake
    /// allows). Any other difference is refused before a file is written.
    /// Nodes growing one manifest at once all write the same one.
    fn evolve(self, ours: Vec<Column>, seen: &storage::Stored) -> Result<Self, LakeError> {
        let theirs = &self.manifest.schema;
        let (shorter, longer) = if theirs.len() <= ours.len() { (theirs, &ours) } else { (&ours, theirs) };
        let extends = longer.starts_with(shorter) && longer[shorter.len()..].iter().all(|c| c.added);
        if !extends {
            let found: Vec<(String, String)> =
                theirs.iter().map(|c| (c.name.clone(), c.data_type.clone())).collect();
            let written: Vec<(String, String)> =
                ours.iter().map(|c| (c.name.clone(), c.data_type.clone())).collect();
            return Err(LakeError::Schema {
                path: self.storage.describe(MANIFEST),
                detail: survey::schema_difference(&written, &found),
            });
        }
        if theirs.len() >= ours.len() {
            return Ok(self);
        }
        let manifest = Manifest { schema: ours, ..self.manifest };
        self.storage.replace(MANIFEST, to_json_bytes(&manifest), seen)?;
        tracing::info!(lake = %self.storage.name(), columns = manifest.schema.len(), "lake schema grown");
        Ok(Self::open_storage(self.storage)?.0)
    }

    /// The existing lake at `location`.
    pub fn open(location: &Location) -> Result<Self, LakeError> {
        Ok(Self::open_storage(Storage::at(location)?)?.0)
    }

    /// The existing lake of a folder.
    pub fn open_folder(root: &Path) -> Result<Self, LakeError> {
        Self::open(&Location::Folder(root.to_path_buf()))
    }

    fn open_storage(storage: Storage) -> Result<(Self, storage::Stored), LakeError> {
        storage.check()?;
        let path = storage.describe(MANIFEST);
        let Some(seen) = storage.read(MANIFEST)? else { return Err(LakeError::Missing(storage.name())) };
        let bad = |detail: String| LakeError::Manifest { path: path.clone(), detail };
        let value: serde_json::Value = serde_json::from_str(&seen.text).map_err(|e| bad(e.to_string()))?;
        let found = value.get("format_version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        if found != FORMAT_VERSION {
            return Err(LakeError::Version { path, found });
        }
        let manifest: Manifest = serde_json::from_value(value).map_err(|e| bad(e.to_string()))?;
        if !(1..=MAX_LAKE_BUCKETS).contains(&manifest.buckets) {
            return Err(bad(format!("buckets is {}, not 1 to {MAX_LAKE_BUCKETS}", manifest.buckets)));
        }
        Ok((Self { storage, manifest, table: None }, seen))
    }

    /// The lake's folder; `None` for a lake in an object store, which its
    /// readers copy into a folder first (`read::readable`).
    pub fn root(&self) -> Option<&Path> {
        match &self.storage {
            Storage::Folder(root) => Some(root),
            Storage::Objects(_) => None,
        }
    }

    /// How messages name the lake: its folder or its URL.
    pub fn name(&self) -> String {
        self.storage.name()
    }

    pub(crate) fn storage(&self) -> &Storage {
        &self.storage
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// This lake, committing each export to the Iceberg table `config`
    /// names too (created when missing).
    pub fn with_table(mut self, config: &iceberg::TableConfig) -> Result<Self, LakeError> {
        let table = iceberg::open_table(config, &self)?;
        self.table = Some(Arc::new(table));
        Ok(self)
    }

    /// The Iceberg table exports commit to, if any.
    pub fn table(&self) -> Option<&iceberg::IcebergTable> {
        self.table.as_deref()
    }

    /// The bucket of a workflow id in this lake.
    pub fn bucket_of(&self, workflow_id: &str) -> u32 {
        iceberg_bucket(workflow_id, self.manifest.buckets)
    }

    /// The folder of one day and bucket, relative to the lake's root.
    pub fn partition_key(&self, day: NaiveDate, bucket: u32) -> String {
        format!("attempts/day={day}/bucket={bucket:02}")
    }

    /// A node's prices file, relative to the lake's root.
    pub fn prices_key(&self, node: &str) -> String {
        format!("prices/{node}.parquet")
    }
}

fn to_json_bytes<T: Serialize>(value: &T) -> Vec<u8> {
    // A struct of strings and numbers always serializes.
    let mut text = serde_json::to_vec_pretty(value).unwrap_or_default();
    text.push(b'\n');
    text
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

pub(crate) fn random_id(prefix: &str) -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        bytes = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0).to_le_bytes();
    }
    format!("{prefix}-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;

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
