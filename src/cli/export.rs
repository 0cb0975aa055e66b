//! `attempt-ledger export --db D --lake LAKE`: writes to the attempt lake
//! what it does not hold yet of the database, and exits (`serve --lake`
//! does the same continuously).

use std::path::PathBuf;
use std::process::ExitCode;

use super::DbArg;
use crate::lake::export::{export, open_bound};
use crate::lake::iceberg::{CatalogUri, DEFAULT_TABLE, TableConfig, TableName};
use crate::store::{Job, MemoryLimit, Store};
use attempt_core::pricing::PriceTable;

/// Where `--node-id` may come from instead.
pub const NODE_ID_ENV: &str = "ATTEMPT_LEDGER_NODE_ID";

/// The lake a node writes to, and who the node is.
#[derive(Debug, clap::Args)]
pub struct LakeArgs {
    /// This database's id in the lake (stored in the database the first
    /// time; default: the stored one, else a random one).
    #[arg(long, value_name = "ID", value_parser = attempt_core::lake_names::node_id, env = NODE_ID_ENV)]
    pub node_id: Option<String>,
    /// Buckets of workflow ids per day, for a new lake (default 16; an
    /// existing lake keeps its own).
    #[arg(long, value_name = "N", value_parser = attempt_core::lake_names::lake_buckets, requires = "lake")]
    pub lake_buckets: Option<u32>,
    /// Take the node id over from the database the lake binds it to: this
    /// database replaces that one (its disk was lost, or it was rebuilt
    /// under the same id). Its exports continue after the lake's highest
    /// number for the node, never over them.
    #[arg(long, requires = "lake")]
    pub replace_node: bool,
    /// `iceberg`: also commit each export to an Apache Iceberg table
    /// through --catalog, as one append snapshot (docs/lake.md).
    #[arg(long, value_enum, default_value_t = TableFormat::Files, requires = "lake")]
    pub table_format: TableFormat,
    #[command(flatten)]
    pub table: TableArgs,
}

/// How a lake is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableFormat {
    /// Parquet files and the lake's own records.
    Files,
    /// The same files, committed to an Iceberg table too.
    Iceberg,
}

/// The Iceberg table of a lake.
#[derive(Debug, clap::Args)]
pub struct TableArgs {
    /// The Iceberg catalog: rest://HOST/PATH (HTTPS; rest+http:// on a
    /// trusted network; ?warehouse=NAME), postgres://USER:PASSWORD@HOST/DB
    /// (the JDBC catalog's tables, as Spark and pyiceberg keep them).
    #[arg(long, value_name = "URI", value_parser = CatalogUri::parse, env = CATALOG_ENV, hide_env_values = true)]
    pub catalog: Option<CatalogUri>,
    /// The table, NAMESPACE.TABLE.
    #[arg(long, value_name = "NAMESPACE.TABLE", value_parser = TableName::parse, default_value = DEFAULT_TABLE)]
    pub iceberg_table: TableName,
}

/// Where `--catalog` may come from instead (it may hold a password).
pub const CATALOG_ENV: &str = "ATTEMPT_LEDGER_CATALOG";

impl LakeArgs {
    /// The table each export commits to, if any; the flags checked together.
    pub fn table_config(&self) -> anyhow::Result<Option<TableConfig>> {
        match (self.table_format, &self.table.catalog) {
            (TableFormat::Files, None) => Ok(None),
            (TableFormat::Iceberg, Some(catalog)) => {
                Ok(Some(TableConfig { catalog: catalog.clone(), table: self.table.iceberg_table.clone() }))
            }
            (TableFormat::Iceberg, None) => {
                anyhow::bail!(
                    "--table-format iceberg commits through a catalog: give --catalog (or {CATALOG_ENV})"
                )
            }
            // From the environment it may be meant for a reader.
            (TableFormat::Files, Some(_)) if std::env::var_os(CATALOG_ENV).is_some() => Ok(None),
            (TableFormat::Files, Some(_)) => {
                anyhow::bail!(
                    "--catalog names the catalog of --table-format iceberg: add it, or leave --catalog out"
                )
            }
        }
    }
}

impl TableArgs {
    /// The table a reader reads, if --catalog names one.
    pub fn config(&self) -> Option<TableConfig> {
        self.catalog.clone().map(|catalog| TableConfig { catalog, table: self.iceberg_table.clone() })
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    /// The attempt lake (created when missing): a folder, or an object
    /// store's URL, s3://BUCKET/PREFIX (gs://, az://), configured by the
    /// store's standard variables (AWS_ENDPOINT_URL, AWS_REGION, ...).
    #[arg(long, value_name = "LAKE", value_parser = crate::lake::storage::Location::parse)]
    lake: crate::lake::storage::Location,
    #[command(flatten)]
    node: LakeArgs,
    /// A price file that overrides or extends the built-in table: the
    /// lake's prices/<node>.parquet is resolved from it.
    #[arg(long, env = "ATTEMPT_LEDGER_PRICES")]
    prices: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let db = &args.db.db;
    super::existing_db(db)?;
    let prices = PriceTable::load(args.prices.as_deref())?;
    let limit = MemoryLimit::for_job(Job::Bulk);
    eprintln!("{limit}");
    let store = Store::open_for_job(db, &limit)?;
    let node = store.node_id(args.node.node_id.as_deref())?;
    let table = args.node.table_config()?;
    let (lake, binding) = open_bound(
        &store,
        &args.lake,
        args.node.lake_buckets,
        &node,
        args.node.replace_node,
        table.as_ref(),
    )?;
    if let Some(old) = &binding.replaced {
        eprintln!(
            "node {node} of {} was bound to database {}; it is now bound to this one ({})",
            args.lake, old.database_id, binding.database_id
        );
    }
    match export(&store, &lake, &binding, &prices)? {
        Some(done) => {
            if let Some(note) = done.rebase_note(&node) {
                eprintln!("{note}");
            }
            println!(
                "exported {} attempts (writes through {}) to {} as node {node}: {} files, {} bytes, in {:.2} s",
                done.attempts,
                done.through,
                args.lake,
                done.files,
                done.bytes,
                done.elapsed.as_secs_f64()
            )
        }
        None => println!("the lake {} already holds every attempt of {}", args.lake, db.display()),
    }
    Ok(ExitCode::SUCCESS)
}
