//! The table behind a catalog: created, grown, committed to, read.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDate;
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, Literal, NestedField, PrimitiveType, Schema, Struct,
    Transform, Type, UnboundPartitionField, UnboundPartitionSpec,
};
use iceberg::table::Table;
use iceberg::transaction::{ApplyTransactionAction, Transaction};
use iceberg::{Catalog, CatalogBuilder, ErrorKind, NamespaceIdent, TableCreation, TableIdent};
use rand::{Rng, SeedableRng};

use super::{
    CatalogUri, Committed, CurrentFiles, History, IcebergError, NewFile, SQL_CATALOG_NAME, TableExpiry,
    TableName, commit, expire, io, watermark_property,
};

/// How many times a commit that lost a race to another node is tried again,
/// after a jittered wait that doubles from `FIRST_WAIT` up to `LONGEST_WAIT`.
pub const COMMIT_TRIES: u32 = 12;
const FIRST_WAIT: Duration = Duration::from_millis(50);
const LONGEST_WAIT: Duration = Duration::from_secs(4);

fn ident(name: &TableName) -> Result<TableIdent, IcebergError> {
    let namespace = NamespaceIdent::from_strs(&name.namespace)
        .map_err(|e| IcebergError::Table { table: name.to_string(), detail: e.to_string() })?;
    Ok(TableIdent::new(namespace, name.name.clone()))
}

/// Where the table's metadata is written: beside the lake's files.
pub enum TableIo {
    Folder,
    Objects(io::ObjectStorage),
}

/// A column of the lake's files, with its DuckDB type; its Iceberg field id
/// is its position from 1, which the files carry (`FIELD_IDS`).
pub struct Column<'a> {
    pub name: &'a str,
    pub data_type: &'a str,
}

/// The table, through its catalog, on a runtime of its own (the lake's
/// writers are synchronous).
pub struct IcebergTable {
    runtime: tokio::runtime::Runtime,
    catalog: Arc<dyn Catalog>,
    /// For the commits iceberg-rust cannot make (`commit.rs`).
    catalog_uri: CatalogUri,
    catalog_name: String,
    ident: TableIdent,
    table_name: String,
}

impl std::fmt::Debug for IcebergTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IcebergTable")
            .field("catalog", &self.catalog_name)
            .field("table", &self.table_name)
            .finish()
    }
}

impl IcebergTable {
    /// Connects to `catalog`, whose table `table` has its files at
    /// `location` (the lake's root, as a URI).
    pub fn connect(
        catalog: &CatalogUri,
        table: &TableName,
        location: &str,
        io: TableIo,
    ) -> Result<Self, IcebergError> {
        let catalog_name = catalog.to_string();
        let catalog_uri = catalog.clone();
        let failed = |detail: String| IcebergError::Catalog { catalog: catalog_name.clone(), detail };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("iceberg")
            .enable_all()
            .build()
            .map_err(|e| failed(format!("cannot start its runtime: {e}")))?;
        let factory: Arc<dyn iceberg::io::StorageFactory> = match io {
            TableIo::Folder => Arc::new(iceberg::io::LocalFsStorageFactory),
            TableIo::Objects(storage) => Arc::new(io::ObjectStorageFactory(storage)),
        };
        // The REST catalog's HTTP client has rustls without a provider of
        // its own: ring, as for the lake's stores and the listeners.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let handle = iceberg::Runtime::new(&runtime);
        let mut tries = 0;
        let catalog = loop {
            tries += 1;
            match run(&runtime, load_catalog(catalog, location, factory.clone(), handle.clone())) {
                Ok(loaded) => break loaded,
                // A SQL catalog creates its two tables if they are missing;
                // PostgreSQL's CREATE TABLE IF NOT EXISTS fails one of two
                // nodes making them at once, which then finds them made.
                Err(e) if tries < CONNECT_TRIES && is_creation_race(&e) => {
                    std::thread::sleep(Duration::from_millis(50 * tries));
                }
                Err(e) => return Err(failed(e.to_string())),
            }
        };
        Ok(Self {
            runtime,
            catalog,
            catalog_uri,
            catalog_name,
            ident: ident(table)?,
            table_name: table.to_string(),
        })
    }

    fn table_error(&self, error: impl std::fmt::Display) -> IcebergError {
        IcebergError::Table { table: self.table_name.clone(), detail: error.to_string() }
    }

    /// The table, created with `columns` partitioned by the day of
    /// `started_at` and `bucket[buckets]` of `workflow_id` when it does not
    /// exist, and grown by the columns it lacks at the end of `columns`.
    /// Several nodes may create it at once: one wins, every one uses it.
    pub fn open_or_create(
        &self,
        location: &str,
        columns: &[Column],
        buckets: u32,
        lake_id: &str,
    ) -> Result<(), IcebergError> {
        let schema = iceberg_schema(columns)?;
        let field = |name: &str| {
            schema
                .field_id_by_name(name)
                .ok_or_else(|| self.table_error(format!("the lake has no column {name}")))
        };
        let (started_at, workflow_id) = (field("started_at")?, field("workflow_id")?);
        // Partition field ids given, as the spec allows them to be left out
        // but not every REST catalog does: Iceberg's own first ids.
        let field = |source_id, field_id, name: &str, transform| UnboundPartitionField {
            source_id,
            field_id: Some(field_id),
            name: name.to_string(),
            transform,
        };
        let spec = UnboundPartitionSpec::builder()
            .with_spec_id(0)
            .add_partition_fields([
                field(started_at, 1000, "started_at_day", Transform::Day),
                field(workflow_id, 1001, "workflow_id_bucket", Transform::Bucket(buckets)),
            ])
            .map_err(|e| self.table_error(e))?
            .build();
        let creation = |location: Option<String>| {
            TableCreation::builder()
                .name(self.ident.name().to_string())
                .location_opt(location)
                .schema(schema.clone())
                .partition_spec(spec.clone())
                .properties([
                    ("attempt-ledger.lake-id".to_string(), lake_id.to_string()),
                    ("write.parquet.compression-codec".to_string(), "zstd".to_string()),
                    // Conflicts are retried here, with jitter (commit_export).
                    ("commit.retry.num-retries".to_string(), "0".to_string()),
                ])
                .build()
        };
        let table = run(&self.runtime, async {
            let namespace = self.ident.namespace();
            // Looked up with GET, which every REST catalog answers (not all
            // answer HEAD). Of nodes creating them at once, one wins; the
            // others' errors depend on the catalog, so they look again.
            if !self.namespace_exists().await?
                && let Err(e) = self.catalog.create_namespace(namespace, HashMap::new()).await
                && !self.namespace_exists().await?
            {
                return Err(e);
            }
            if let Some(table) = self.existing_table().await? {
                return Ok(table);
            }
            let refused = match self.catalog.create_table(namespace, creation(Some(location.to_string()))).await {
                Ok(table) => return Ok(table),
                Err(e) => match self.existing_table().await? {
                    Some(table) => return Ok(table),
                    None => e,
                },
            };
            // Catalogs that assign each table's location (managed tables)
            // refuse one given: the table's metadata then lives where the
            // catalog says, and its data files stay in the lake, by their
            // full paths.
            match self.catalog.create_table(namespace, creation(None)).await {
                Ok(table) => {
                    tracing::warn!(
                        table = %self.table_name,
                        location = table.metadata().location(),
                        first_refusal = %refused,
                        "the catalog assigns the table's location: its metadata is there, its files in the lake"
                    );
                    Ok(table)
                }
                Err(second) => self.existing_table().await?.ok_or(if refused.kind() == second.kind() { second } else { refused }),
            }
        })
        .map_err(|e| self.table_error(e))?;
        // Each file's partition values are its folder's: a table
        // partitioned otherwise would file them under wrong values.
        let theirs: Vec<(i32, Transform)> = table
            .metadata()
            .default_partition_spec()
            .fields()
            .iter()
            .map(|f| (f.source_id, f.transform))
            .collect();
        let ours = [(started_at, Transform::Day), (workflow_id, Transform::Bucket(buckets))];
        if theirs != ours {
            return Err(self.table_error(format!(
                "it is partitioned by {theirs:?} (source field id, transform), not the lake's day(started_at) and \
                 bucket[{buckets}](workflow_id): export to a new table"
            )));
        }
        self.grow(table, &schema)
    }

    async fn namespace_exists(&self) -> iceberg::Result<bool> {
        match self.catalog.get_namespace(self.ident.namespace()).await {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NamespaceNotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn existing_table(&self) -> iceberg::Result<Option<Table>> {
        match self.catalog.load_table(&self.ident).await {
            Ok(table) => Ok(Some(table)),
            Err(e) if e.kind() == ErrorKind::TableNotFound || e.kind() == ErrorKind::NamespaceNotFound => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Adds the columns `ours` has after the table's, keeping ids equal to
    /// positions; refuses any other difference.
    fn grow(&self, table: Table, ours: &Schema) -> Result<(), IcebergError> {
        let mut table = table;
        for _ in 0..COMMIT_TRIES {
            let theirs = table.metadata().current_schema();
            let their_fields = theirs.as_struct().fields();
            let our_fields = ours.as_struct().fields();
            let common = their_fields.len().min(our_fields.len());
            for (t, o) in their_fields.iter().zip(our_fields.iter()).take(common) {
                if t.id != o.id || t.name != o.name || t.field_type != o.field_type {
                    return Err(self.table_error(format!(
                        "its column {} (id {}, {}) is not the lake's {} (id {}, {}): export to a new table",
                        t.name, t.id, t.field_type, o.name, o.id, o.field_type
                    )));
                }
            }
            if our_fields.len() <= their_fields.len() {
                return Ok(());
            }
            let tx = Transaction::new(&table);
            let mut update = tx.update_schema();
            for field in &our_fields[their_fields.len()..] {
                update = update.add_column(iceberg::transaction::AddColumn::optional(
                    &field.name,
                    (*field.field_type).clone(),
                ));
            }
            let committed = run(&self.runtime, async {
                let tx = update.apply(tx)?;
                tx.commit(self.catalog.as_ref()).await
            });
            match committed {
                Ok(grown) => {
                    tracing::info!(table = %self.table_name, columns = our_fields.len(), "Iceberg schema grown");
                    table = grown;
                }
                Err(e) if e.kind() == ErrorKind::CatalogCommitConflicts => {
                    table = run(&self.runtime, self.catalog.load_table(&self.ident))
                        .map_err(|e| self.table_error(e))?;
                }
                Err(e) => return Err(self.table_error(e)),
            }
        }
        Err(self.table_error("its schema kept changing while this node grew it"))
    }

    /// The last lake number of `node` the table holds.
    pub fn watermark(&self, node: &str) -> Result<Option<i64>, IcebergError> {
        let table =
            run(&self.runtime, self.catalog.load_table(&self.ident)).map_err(|e| self.table_error(e))?;
        Ok(watermark_of(&table, node))
    }

    /// Commits `files`, export `export_id` of `node` (lake numbers
    /// `from..=through`), as one append snapshot that also moves the node's
    /// watermark to `through`. A lost race is tried again on the new table
    /// after a jittered wait, up to `COMMIT_TRIES`; an export the table
    /// holds already is not committed twice.
    pub fn commit_export(
        &self,
        node: &str,
        export_id: &str,
        from: i64,
        through: i64,
        files: &[NewFile],
    ) -> Result<Committed, IcebergError> {
        let mut rng = rand::rngs::SmallRng::from_os_rng();
        let mut wait = FIRST_WAIT;
        for retries in 0..COMMIT_TRIES {
            let table =
                run(&self.runtime, self.catalog.load_table(&self.ident)).map_err(|e| self.table_error(e))?;
            match watermark_of(&table, node) {
                Some(found) if found >= through => return Ok(Committed::Already),
                Some(found) if found >= from => {
                    return Err(IcebergError::Watermark {
                        table: self.table_name.clone(),
                        node: node.to_string(),
                        found,
                        from,
                        through,
                        detail: "a part of this export is committed, which no export of this node does"
                            .into(),
                    });
                }
                _ => {}
            }
            let spec_id = table.metadata().default_partition_spec_id();
            // Days `lake expire` took out, as the table says on this try:
            // the commit lands on this very version or not at all, so no
            // file of an expired day enters the table after its expiry.
            let horizon: Option<NaiveDate> = table
                .metadata()
                .properties()
                .get(expire::EXPIRED_BEFORE_PROPERTY)
                .and_then(|day| day.parse().ok());
            let data_files = files
                .iter()
                .filter(|file| horizon.is_none_or(|h| file.day >= h))
                .map(|file| data_file(file, spec_id))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.table_error(e))?;
            let summary = HashMap::from([
                ("attempt-ledger.node".to_string(), node.to_string()),
                ("attempt-ledger.export-id".to_string(), export_id.to_string()),
                ("attempt-ledger.lake-from".to_string(), from.to_string()),
                ("attempt-ledger.lake-through".to_string(), through.to_string()),
            ]);
            let committed = run(&self.runtime, async {
                let tx = Transaction::new(&table);
                // The watermark says what is committed: the append need not
                // read every manifest to look for its files.
                let append = tx
                    .fast_append()
                    .with_check_duplicate(false)
                    .set_snapshot_properties(summary)
                    .add_data_files(data_files);
                let tx = append.apply(tx)?;
                let watermark =
                    tx.update_table_properties().set(watermark_property(node), through.to_string());
                let tx = watermark.apply(tx)?;
                tx.commit(self.catalog.as_ref()).await
            });
            match committed {
                Ok(table) => {
                    let id = table.metadata().current_snapshot_id().unwrap_or_default();
                    return Ok(Committed::Snapshot { id, retries });
                }
                Err(e) if e.kind() == ErrorKind::CatalogCommitConflicts || e.retryable() => {
                    let jittered = wait.mul_f64(rng.random_range(0.5..1.5));
                    tracing::debug!(
                        node,
                        export_id,
                        retries,
                        wait_ms = jittered.as_millis() as u64,
                        "Iceberg commit lost a race; again"
                    );
                    std::thread::sleep(jittered);
                    wait = (wait * 2).min(LONGEST_WAIT);
                }
                Err(e) => return Err(self.table_error(e)),
            }
        }
        Err(IcebergError::Contended {
            table: self.table_name.clone(),
            node: node.to_string(),
            export_id: export_id.to_string(),
            tries: COMMIT_TRIES,
        })
    }

    /// The data files of the table's current snapshot.
    pub fn current_files(&self) -> Result<CurrentFiles, IcebergError> {
        run(&self.runtime, async {
            let table = self.catalog.load_table(&self.ident).await?;
            let metadata = table.metadata();
            let Some(snapshot) = metadata.current_snapshot() else {
                return Ok(CurrentFiles { snapshot_id: None, files: Vec::new() });
            };
            let list = table.manifest_list_reader(snapshot).load().await?;
            let mut files = Vec::new();
            for manifest in list.entries() {
                let manifest = manifest.load_manifest(table.file_io()).await?;
                for entry in manifest.entries() {
                    if entry.is_alive() && entry.content_type() == DataContentType::Data {
                        files.push((entry.file_path().to_string(), entry.record_count()));
                    }
                }
            }
            files.sort();
            Ok(CurrentFiles { snapshot_id: Some(snapshot.snapshot_id()), files })
        })
        .map_err(|e: iceberg::Error| self.table_error(e))
    }
}

impl IcebergTable {
    /// Takes every data file of a day before `before` out of the table (a
    /// delete snapshot), expires the snapshots past the table's retention,
    /// and deletes the files no snapshot left reaches. A lost race is
    /// tried again on the new table, as a commit of an export is.
    pub fn expire_days(&self, before: NaiveDate) -> Result<TableExpiry, IcebergError> {
        let removed = self.with_retries("expire", || {
            let table = self.load()?;
            let Some(delete) =
                run(&self.runtime, expire::delete_days(&table, before)).map_err(|e| self.table_error(e))?
            else {
                return Ok(Some(expire::Removed::default()));
            };
            let removed = delete.removed.clone();
            let committed = run(
                &self.runtime,
                commit::commit(&self.catalog_uri, &self.ident, &table, delete.updates, delete.requirements),
            );
            self.landed(committed).map(|landed| landed.then_some(removed))
        })?;
        let mut expired_snapshots = 0;
        let kept = self.with_retries("expire", || {
            let table = self.load()?;
            let properties = table.metadata().properties();
            let setting =
                |key: &str, default: i64| properties.get(key).and_then(|v| v.parse().ok()).unwrap_or(default);
            let max_age_ms = setting("history.expire.max-snapshot-age-ms", DEFAULT_MAX_SNAPSHOT_AGE_MS);
            let keep = setting("history.expire.min-snapshots-to-keep", 1).max(1) as usize;
            let now_ms = chrono::Utc::now().timestamp_millis();
            let expiring = expire::past_retention(&table, now_ms, max_age_ms, keep);
            let staying: Vec<i64> = table
                .metadata()
                .snapshots()
                .map(|s| s.snapshot_id())
                .filter(|id| !expiring.contains(id))
                .collect();
            let kept = run(&self.runtime, expire::reached(&table, &staying, false))
                .map_err(|e| self.table_error(e))?;
            if expiring.is_empty() {
                return Ok(Some((kept, expire::Reached::default())));
            }
            let gone = run(&self.runtime, expire::reached(&table, &expiring, true))
                .map_err(|e| self.table_error(e))?;
            let current = table.metadata().current_snapshot_id();
            let updates = vec![iceberg::TableUpdate::RemoveSnapshots { snapshot_ids: expiring.clone() }];
            let requirements = vec![
                iceberg::TableRequirement::UuidMatch { uuid: table.metadata().uuid() },
                iceberg::TableRequirement::RefSnapshotIdMatch {
                    r#ref: iceberg::spec::MAIN_BRANCH.to_string(),
                    snapshot_id: current,
                },
            ];
            let committed = run(
                &self.runtime,
                commit::commit(&self.catalog_uri, &self.ident, &table, updates, requirements),
            );
            expired_snapshots = expiring.len();
            self.landed(committed).map(|landed| landed.then_some((kept, gone)))
        })?;
        let (kept, gone) = kept;
        // What only the expired snapshots reached: their manifest lists,
        // manifests and data files.
        let unreached: Vec<String> = gone
            .lists
            .difference(&kept.lists)
            .chain(gone.manifests.difference(&kept.manifests))
            .chain(gone.data_files.difference(&kept.data_files))
            .cloned()
            .collect();
        let table = self.load()?;
        let mut deleted_files = 0;
        for path in &unreached {
            run(&self.runtime, table.file_io().delete(path)).map_err(|e| self.table_error(e))?;
            deleted_files += 1;
        }
        Ok(TableExpiry {
            before,
            files: removed.files,
            rows: removed.rows,
            bytes: removed.bytes,
            expired_snapshots: expired_snapshots as u64,
            deleted_files,
            reached: kept.data_files.into_iter().collect(),
        })
    }

    fn load(&self) -> Result<Table, IcebergError> {
        run(&self.runtime, self.catalog.load_table(&self.ident)).map_err(|e| self.table_error(e))
    }

    /// `Ok(true)` when a commit landed, `Ok(false)` when it lost a race.
    fn landed(&self, committed: Result<(), commit::CommitError>) -> Result<bool, IcebergError> {
        match committed {
            Ok(()) => Ok(true),
            Err(commit::CommitError::Conflict) => Ok(false),
            Err(commit::CommitError::Failed(detail)) => Err(self.table_error(detail)),
        }
    }

    /// `attempt` until it gives `Some` (its commit landed), after a
    /// jittered wait each time it gives `None` (lost a race), up to
    /// `COMMIT_TRIES`.
    fn with_retries<T>(
        &self,
        what: &str,
        mut attempt: impl FnMut() -> Result<Option<T>, IcebergError>,
    ) -> Result<T, IcebergError> {
        let mut rng = rand::rngs::SmallRng::from_os_rng();
        let mut wait = FIRST_WAIT;
        for _ in 0..COMMIT_TRIES {
            if let Some(done) = attempt()? {
                return Ok(done);
            }
            std::thread::sleep(wait.mul_f64(rng.random_range(0.5..1.5)));
            wait = (wait * 2).min(LONGEST_WAIT);
        }
        Err(self.table_error(format!(
            "gave up the {what} after {COMMIT_TRIES} tries: other commits kept landing first"
        )))
    }

    /// The table's snapshots, and its snapshot retention.
    pub fn history(&self) -> Result<History, IcebergError> {
        let table =
            run(&self.runtime, self.catalog.load_table(&self.ident)).map_err(|e| self.table_error(e))?;
        let metadata = table.metadata();
        let mut snapshots: Vec<(i64, i64)> =
            metadata.snapshots().map(|s| (s.snapshot_id(), s.timestamp_ms())).collect();
        snapshots.sort_by_key(|(_, at)| *at);
        let max_age_ms = metadata
            .properties()
            .get("history.expire.max-snapshot-age-ms")
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_MAX_SNAPSHOT_AGE_MS);
        Ok(History {
            snapshots,
            max_age_ms,
            metadata_location: table.metadata_location().map(str::to_string),
        })
    }
}

/// Iceberg's default snapshot retention: five days.
pub const DEFAULT_MAX_SNAPSHOT_AGE_MS: i64 = 5 * 24 * 3600 * 1000;

/// How many times a catalog's connection is tried when its tables were
/// being created by another node at the same moment.
const CONNECT_TRIES: u64 = 5;

/// A catalog of `uri` whose metadata goes through `factory`.
async fn load_catalog(
    catalog: &CatalogUri,
    location: &str,
    factory: Arc<dyn iceberg::io::StorageFactory>,
    handle: iceberg::Runtime,
) -> Result<Arc<dyn Catalog>, iceberg::Error> {
    Ok(match catalog {
        CatalogUri::Rest { url, properties } => {
            let mut props: HashMap<String, String> = properties.iter().cloned().collect();
            props.insert("uri".to_string(), url.clone());
            Arc::new(
                iceberg_catalog_rest::RestCatalogBuilder::default()
                    .with_storage_factory(factory)
                    .with_runtime(handle)
                    .load(SQL_CATALOG_NAME, props)
                    .await?,
            ) as Arc<dyn Catalog>
        }
        CatalogUri::Postgres(uri) | CatalogUri::Sqlite(uri) => {
            let style = if matches!(catalog, CatalogUri::Postgres(_)) {
                iceberg_catalog_sql::SqlBindStyle::DollarNumeric
            } else {
                iceberg_catalog_sql::SqlBindStyle::QMark
            };
            Arc::new(
                iceberg_catalog_sql::SqlCatalogBuilder::default()
                    .uri(uri.clone())
                    .warehouse_location(location.to_string())
                    .sql_bind_style(style)
                    .with_storage_factory(factory)
                    .with_runtime(handle)
                    .load(SQL_CATALOG_NAME, HashMap::new())
                    .await?,
            ) as Arc<dyn Catalog>
        }
    })
}

/// PostgreSQL's answer to two `CREATE TABLE IF NOT EXISTS` of one table at
/// once (a unique violation in its own catalog, SQLSTATE 23505 or 42P07).
fn is_creation_race(error: &iceberg::Error) -> bool {
    let text = format!("{error:#}");
    text.contains("duplicate key value violates unique constraint") || text.contains("already exists")
}

fn watermark_of(table: &Table, node: &str) -> Option<i64> {
    table.metadata().properties().get(&watermark_property(node)).and_then(|v| v.parse().ok())
}

/// Runs `future` on `runtime`, from a thread of another runtime too.
fn run<F>(runtime: &tokio::runtime::Runtime, future: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_err() {
        return runtime.block_on(future);
    }
    std::thread::scope(|scope| match scope.spawn(|| runtime.block_on(future)).join() {
        Ok(output) => output,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

fn data_file(file: &NewFile, spec_id: i32) -> Result<iceberg::spec::DataFile, String> {
    let days = (file.day - NaiveDate::default()).num_days();
    let days = i32::try_from(days).map_err(|_| format!("{}: day {} is out of range", file.uri, file.day))?;
    let bucket = i32::try_from(file.bucket)
        .map_err(|_| format!("{}: bucket {} is out of range", file.uri, file.bucket))?;
    DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(file.uri.clone())
        .file_format(DataFileFormat::Parquet)
        .partition(Struct::from_iter([Some(Literal::date(days)), Some(Literal::int(bucket))]))
        .partition_spec_id(spec_id)
        .record_count(file.rows)
        .file_size_in_bytes(file.bytes)
        .build()
        .map_err(|e| format!("{}: {e}", file.uri))
}

/// The table's schema: one optional field per lake column, its id its
/// position from 1.
pub fn iceberg_schema(columns: &[Column]) -> Result<Schema, IcebergError> {
    let fields = columns
        .iter()
        .enumerate()
        .map(|(index, column)| {
            let field_type = iceberg_type(column.data_type).ok_or_else(|| IcebergError::Type {
                column: column.name.to_string(),
                data_type: column.data_type.to_string(),
            })?;
            Ok(Arc::new(NestedField::optional(index as i32 + 1, column.name, field_type)))
        })
        .collect::<Result<Vec<_>, IcebergError>>()?;
    Schema::builder()
        .with_fields(fields)
        .build()
        .map_err(|e| IcebergError::Table { table: "(new)".into(), detail: e.to_string() })
}

/// The Iceberg type a DuckDB type is written as in Parquet.
fn iceberg_type(duckdb: &str) -> Option<Type> {
    let primitive = match duckdb {
        "VARCHAR" => PrimitiveType::String,
        "BIGINT" => PrimitiveType::Long,
        "INTEGER" | "SMALLINT" | "TINYINT" => PrimitiveType::Int,
        "DOUBLE" => PrimitiveType::Double,
        "FLOAT" => PrimitiveType::Float,
        "BOOLEAN" => PrimitiveType::Boolean,
        "DATE" => PrimitiveType::Date,
        "TIMESTAMP" => PrimitiveType::Timestamp,
        "TIMESTAMP WITH TIME ZONE" => PrimitiveType::Timestamptz,
        other => {
            let inner = other.strip_prefix("DECIMAL(")?.strip_suffix(')')?;
            let (precision, scale) = inner.split_once(',')?;
            PrimitiveType::Decimal {
                precision: precision.trim().parse().ok()?,
                scale: scale.trim().parse().ok()?,
            }
        }
    };
    Some(Type::Primitive(primitive))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_ids_are_positions_and_types_map() {
        let columns = [
            Column { name: "ingest_node", data_type: "VARCHAR" },
            Column { name: "started_at", data_type: "TIMESTAMP" },
            Column { name: "cost", data_type: "DECIMAL(18,6)" },
        ];
        let schema = iceberg_schema(&columns).unwrap();
        assert_eq!(schema.field_id_by_name("started_at"), Some(2));
        assert_eq!(schema.field_id_by_name("cost"), Some(3));
        let bad = [Column { name: "tags", data_type: "MAP(VARCHAR, VARCHAR)" }];
        assert!(matches!(iceberg_schema(&bad), Err(IcebergError::Type { .. })));
    }
}
