//! `attempt-ledger export --db D --lake DIR`: writes to the attempt lake
//! what it does not hold yet of the database, and exits (`serve --lake`
//! does the same continuously).

use std::path::PathBuf;
use std::process::ExitCode;

use super::DbArg;
use crate::lake::export::{export, open_lake};
use crate::pricing::PriceTable;
use crate::store::Store;

/// The lake a node writes to, and who the node is.
#[derive(Debug, clap::Args)]
pub struct LakeArgs {
    /// This database's id in the lake (stored in the database the first
    /// time; default: the stored one, else a random one).
    #[arg(long, value_name = "ID", value_parser = crate::lake::check_node_id, env = "ATTEMPT_LEDGER_NODE_ID")]
    pub node_id: Option<String>,
    /// Buckets of workflow ids per day, for a new lake (default 16; an
    /// existing lake keeps its own).
    #[arg(long, value_name = "N", value_parser = crate::lake::check_buckets)]
    pub lake_buckets: Option<u32>,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    /// The attempt lake's folder (created when missing).
    #[arg(long, value_name = "DIR")]
    lake: PathBuf,
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
    let store = Store::open(db)?;
    let node = store.node_id(args.node.node_id.as_deref())?;
    let lake = open_lake(&store, &args.lake, args.node.lake_buckets)?;
    match export(&store, &lake, &node, &prices)? {
        Some(done) => println!(
            "exported {} attempts (writes through {}) to {} as node {node}: {} files, {} bytes, in {:.2} s",
            done.attempts,
            done.through,
            args.lake.display(),
            done.files,
            done.bytes,
            done.elapsed.as_secs_f64()
        ),
        None => println!("the lake {} already holds every attempt of {}", args.lake.display(), db.display()),
    }
    Ok(ExitCode::SUCCESS)
}
