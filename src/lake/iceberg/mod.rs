//! The lake as an Apache Iceberg table (`--table-format iceberg`): every
//! export commits its files to the table as one append snapshot, through a
//! catalog (REST, or the JDBC schema in PostgreSQL or SQLite), so Spark,
//! Trino, Snowflake, ClickHouse, DuckDB and pyiceberg attach to it as to any
//! table.
//!
//! The lake's own records (`_lake.json`, `_nodes/`) stay what makes an export
//! exactly once; the table is where readers look. The node's watermark (the
//! last lake number it committed) is a table property set in the same
//! commit as the files, so a node that crashed after committing and before
//! recording it finds the commit and does not make it twice.

#[cfg(feature = "iceberg")]
mod commit;
#[cfg(feature = "iceberg")]
pub mod expire;
#[cfg(feature = "iceberg")]
pub mod io;
#[cfg(feature = "iceberg")]
pub mod table;

#[cfg(feature = "iceberg")]
pub use table::IcebergTable;
#[cfg(not(feature = "iceberg"))]
pub use unbuilt::IcebergTable;

/// The catalog name the SQL catalogs' rows carry: Spark, pyiceberg and
/// Trino configure theirs under the same name to see the table.
pub const SQL_CATALOG_NAME: &str = "attempt_ledger";
/// The table an export commits to unless `--iceberg-table` names another.
pub const DEFAULT_TABLE: &str = "attempt_ledger.attempts";
/// The table property that holds a node's watermark.
pub fn watermark_property(node: &str) -> String {
    format!("attempt-ledger.watermark.{node}")
}

#[derive(Debug, thiserror::Error)]
pub enum IcebergError {
    #[error(
        "this attempt-ledger was built without Iceberg tables: build it with `cargo build --release --features \
         iceberg` (docs/lake.md)"
    )]
    NotBuilt,
    #[error("the Iceberg catalog {catalog}: {detail}")]
    Catalog { catalog: String, detail: String },
    #[error("the Iceberg table {table}: {detail}")]
    Table { table: String, detail: String },
    #[error(
        "the lake column `{column}` is of DuckDB type {data_type}, which this attempt-ledger does not map to \
         an Iceberg type"
    )]
    Type { column: String, data_type: String },
    #[error(
        "gave up committing export {export_id} of node {node} to {table} after {tries} tries: other nodes kept \
         committing first. The export is done again, whole, at the next run"
    )]
    Contended { table: String, node: String, export_id: String, tries: u32 },
    #[error(
        "the Iceberg table {table} says node {node} committed through lake number {found}, inside export \
         {from}..={through}: the table and the lake's records disagree ({detail})"
    )]
    Watermark { table: String, node: String, found: i64, from: i64, through: i64, detail: String },
}

/// A catalog, as `--catalog` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogUri {
    /// An Iceberg REST catalog (Polaris, Lakekeeper, Nessie, Unity, Glue,
    /// S3 Tables): `rest+http://`, `rest+https://`, or `rest://` for HTTPS.
    /// Its query parameters are the catalog's properties (`warehouse`,
    /// `prefix`, `token`, `credential`, `scope`, `oauth2-server-uri`).
    Rest { url: String, properties: Vec<(String, String)> },
    /// The JDBC catalog's tables in PostgreSQL.
    Postgres(String),
    /// The JDBC catalog's tables in a SQLite file (`iceberg-sqlite` builds).
    Sqlite(String),
}

impl CatalogUri {
    /// `--catalog`'s value, checked when the flags are read.
    pub fn parse(text: &str) -> Result<Self, String> {
        let url = url::Url::parse(text).map_err(|e| format!("`{text}` is not a URL: {e}"))?;
        let rest = |scheme: &str| {
            let mut http = url.clone();
            let properties: Vec<(String, String)> = url.query_pairs().into_owned().collect();
            if let Some((key, _)) =
                properties.iter().find(|(key, _)| !REST_PROPERTIES.contains(&key.as_str()))
            {
                return Err(format!(
                    "`{key}` is not a REST catalog property this attempt-ledger passes on: {}",
                    REST_PROPERTIES.join(", ")
                ));
            }
            http.set_query(None);
            let mut text = http.as_str().replacen(url.scheme(), scheme, 1);
            if text.ends_with('/') {
                text.pop();
            }
            if url.host_str().is_none_or(str::is_empty) {
                return Err(format!("`{}`: a REST catalog's URL names its host", url.as_str()));
            }
            Ok(CatalogUri::Rest { url: text, properties })
        };
        match url.scheme() {
            "rest" | "rest+https" => rest("https"),
            "rest+http" => rest("http"),
            "postgres" | "postgresql" => {
                if url.host_str().is_none_or(str::is_empty) {
                    return Err(format!("`{}`: a PostgreSQL catalog's URL names its host", redacted(&url)));
                }
                Ok(CatalogUri::Postgres(text.to_string()))
            }
            "sqlite" => {
                if cfg!(feature = "iceberg-sqlite") {
                    Ok(CatalogUri::Sqlite(text.to_string()))
                } else {
                    Err("a SQLite catalog needs a build with the `iceberg-sqlite` feature".to_string())
                }
            }
            other => Err(format!(
                "`{other}://` is not a catalog this attempt-ledger speaks: rest://, rest+http://, postgres:// \
                 or sqlite://"
            )),
        }
    }
}

impl std::fmt::Display for CatalogUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatalogUri::Rest { url, properties } => {
                write!(f, "{url}")?;
                for (index, (key, value)) in properties.iter().enumerate() {
                    let shown =
                        if SECRET_PROPERTIES.contains(&key.as_str()) { "***" } else { value.as_str() };
                    write!(f, "{}{key}={shown}", if index == 0 { '?' } else { '&' })?;
                }
                Ok(())
            }
            CatalogUri::Postgres(uri) | CatalogUri::Sqlite(uri) => match url::Url::parse(uri) {
                Ok(url) => write!(f, "{}", redacted(&url)),
                Err(_) => write!(f, "{uri}"),
            },
        }
    }
}

/// The REST catalog properties `--catalog` may set as query parameters.
pub const REST_PROPERTIES: [&str; 6] =
    ["warehouse", "prefix", "token", "credential", "scope", "oauth2-server-uri"];
/// Those that are secrets, printed as `***`.
const SECRET_PROPERTIES: [&str; 2] = ["token", "credential"];

/// A URL without its password, for messages.
fn redacted(url: &url::Url) -> String {
    let mut url = url.clone();
    if url.password().is_some() {
        let _ = url.set_password(Some("***"));
    }
    url.to_string()
}

/// `NAMESPACE.TABLE`, as `--iceberg-table` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName {
    pub namespace: Vec<String>,
    pub name: String,
}

impl TableName {
    pub fn parse(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.split('.').collect();
        let valid =
            |part: &&str| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if parts.len() < 2 || !parts.iter().all(valid) {
            return Err(format!(
                "`{text}` is not NAMESPACE.TABLE (letters, digits and _, parts joined by dots)"
            ));
        }
        let (name, namespace) = parts
            .split_last()
            .map(|(n, ns)| (n.to_string(), ns))
            .ok_or_else(|| format!("`{text}` is not NAMESPACE.TABLE"))?;
        Ok(Self { namespace: namespace.iter().map(|s| s.to_string()).collect(), name })
    }
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.namespace.join("."), self.name)
    }
}

/// `--table-format iceberg` and the flags that go with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    pub catalog: CatalogUri,
    pub table: TableName,
}

/// One file an export wrote, as the table records it.
#[derive(Debug, Clone)]
pub struct NewFile {
    /// Absolute: `/folder/...` as `file:///folder/...`, or `s3://bucket/...`.
    pub uri: String,
    pub day: chrono::NaiveDate,
    pub bucket: u32,
    pub rows: u64,
    pub bytes: u64,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq)]
pub enum Committed {
    /// A new snapshot, after `retries` lost races.
    Snapshot { id: i64, retries: u32 },
    /// The table held this export already (a run a crash interrupted
    /// committed it).
    Already,
}

/// The data files of the table's current snapshot.
#[derive(Debug, Clone)]
pub struct CurrentFiles {
    pub snapshot_id: Option<i64>,
    /// Absolute paths, with the rows each holds.
    pub files: Vec<(String, u64)>,
}

/// The table's snapshots and how long it keeps them.
#[derive(Debug, Clone)]
pub struct History {
    /// Each snapshot's id and when it was made (ms since the epoch), oldest
    /// first.
    pub snapshots: Vec<(i64, i64)>,
    /// `history.expire.max-snapshot-age-ms`: older snapshots are due to
    /// be expired.
    pub max_age_ms: i64,
    /// The metadata file the catalog points at.
    pub metadata_location: Option<String>,
}

/// What `lake expire` did to the table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TableExpiry {
    /// Every day before it is out of the table.
    pub before: chrono::NaiveDate,
    /// Data files the delete snapshot took out, their rows and bytes.
    pub files: u64,
    pub rows: u64,
    pub bytes: u64,
    /// Snapshots past the table's retention, expired.
    pub expired_snapshots: u64,
    /// Files only they reached (manifest lists, manifests, data files),
    /// deleted.
    pub deleted_files: u64,
    /// The data files the snapshots left still reach (absolute paths):
    /// the lake keeps these.
    #[serde(skip)]
    pub reached: std::collections::BTreeSet<String>,
}

/// The Iceberg table of `lake` named by `config`, to read: connected, not
/// created.
pub fn connect_table(config: &TableConfig, lake: &super::Lake) -> Result<IcebergTable, IcebergError> {
    #[cfg(feature = "iceberg")]
    {
        let storage = lake.storage();
        let location = storage.uri("").trim_end_matches('/').to_string();
        let io = match storage.bucket_store() {
            None => table::TableIo::Folder,
            Some((store, base)) => table::TableIo::Objects(io::ObjectStorage::new(store, base)),
        };
        IcebergTable::connect(&config.catalog, &config.table, &location, io)
    }
    #[cfg(not(feature = "iceberg"))]
    {
        let _ = (config, lake);
        Err(IcebergError::NotBuilt)
    }
}

/// The Iceberg table of `lake` named by `config`: connected, created when
/// missing (partitioned as the lake's files are), its schema grown to the
/// lake's.
pub fn open_table(config: &TableConfig, lake: &super::Lake) -> Result<IcebergTable, IcebergError> {
    #[cfg(feature = "iceberg")]
    {
        let location = lake.storage().uri("").trim_end_matches('/').to_string();
        let table = connect_table(config, lake)?;
        let manifest = lake.manifest();
        let columns: Vec<table::Column> = manifest
            .schema
            .iter()
            .map(|c| table::Column { name: &c.name, data_type: &c.data_type })
            .collect();
        table.open_or_create(&location, &columns, manifest.buckets, &manifest.lake_id)?;
        Ok(table)
    }
    #[cfg(not(feature = "iceberg"))]
    {
        let _ = (config, lake);
        Err(IcebergError::NotBuilt)
    }
}

/// A build without the `iceberg` feature: no table is ever made, and
/// asking for one says how to get a build that makes them.
#[cfg(not(feature = "iceberg"))]
mod unbuilt {
    use super::{Committed, CurrentFiles, History, IcebergError, NewFile, TableExpiry};

    #[derive(Debug)]
    pub enum IcebergTable {}

    impl IcebergTable {
        pub fn watermark(&self, _node: &str) -> Result<Option<i64>, IcebergError> {
            match *self {}
        }

        pub fn commit_export(
            &self,
            _node: &str,
            _export_id: &str,
            _from: i64,
            _through: i64,
            _files: &[NewFile],
        ) -> Result<Committed, IcebergError> {
            match *self {}
        }

        pub fn current_files(&self) -> Result<CurrentFiles, IcebergError> {
            match *self {}
        }

        pub fn history(&self) -> Result<History, IcebergError> {
            match *self {}
        }

        pub fn expire_days(&self, _before: chrono::NaiveDate) -> Result<TableExpiry, IcebergError> {
            match *self {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogs_are_read_from_their_urls() {
        let lake =
            |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(
            CatalogUri::parse("rest+http://127.0.0.1:8181/catalog?warehouse=lake").unwrap(),
            CatalogUri::Rest {
                url: "http://127.0.0.1:8181/catalog".into(),
                properties: lake(&[("warehouse", "lake")])
            }
        );
        assert_eq!(
            CatalogUri::parse("rest://polaris.example.com/api/catalog").unwrap(),
            CatalogUri::Rest {
                url: "https://polaris.example.com/api/catalog".into(),
                properties: Vec::new()
            }
        );
        let with_token = CatalogUri::parse("rest+https://h/c?prefix=dev&token=s3cret").unwrap();
        assert_eq!(with_token.to_string(), "https://h/c?prefix=dev&token=***");
        assert!(CatalogUri::parse("rest://h/c?tokn=x").unwrap_err().contains("`tokn`"));
        let pg = CatalogUri::parse("postgres://ledger:secret@db:5432/catalog").unwrap();
        assert!(matches!(pg, CatalogUri::Postgres(_)));
        assert!(!pg.to_string().contains("secret"), "{pg}");
        for bad in ["ftp://x/y", "rest+http:///nohost", "postgres:///db", "not a url"] {
            assert!(CatalogUri::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn table_names_have_a_namespace() {
        let name = TableName::parse("analytics.llm.attempts").unwrap();
        assert_eq!(name.namespace, ["analytics", "llm"]);
        assert_eq!(name.name, "attempts");
        for bad in ["attempts", "a..b", "a.b-c", ".a", "a."] {
            assert!(TableName::parse(bad).is_err(), "{bad}");
        }
    }
}
