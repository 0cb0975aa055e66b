//! `attempt-ledger dimensions`: show or set the attributes reports can group
//! by (`report --group-by NAME`).

use std::process::ExitCode;

use anyhow::bail;

use super::DbArg;
use crate::store::Store;
use attempt_core::dimensions::Dimension;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    /// Replace the dimensions with these, each NAME=SOURCE: SOURCE is a key
    /// of the records' extra fields (extra.team) or a record field
    /// (route_group, provider, model, served_provider, served_model, layer,
    /// workflow). At most 3. Facts and rollups are derived again.
    #[arg(long = "set", value_name = "NAME=SOURCE")]
    set: Vec<Dimension>,
    /// Remove every dimension.
    #[arg(long, conflicts_with = "set")]
    clear: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !args.db.db.exists() && !args.clear && args.set.is_empty() {
        bail!("no database at {}: run `attempt-ledger ingest` first, or pass --db", args.db.db.display());
    }
    let store = Store::open(&args.db.db)?;
    if args.clear || !args.set.is_empty() {
        store.set_dimensions(&args.set)?;
    }
    let dimensions = store.dimensions()?;
    if dimensions.is_empty() {
        println!("no dimensions (add one with --set team=extra.team)");
    }
    for d in dimensions {
        println!("{}\t{}", d.name, d.source);
    }
    Ok(ExitCode::SUCCESS)
}
