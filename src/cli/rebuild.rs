//! `attempt-ledger rebuild`: re-apply the provider alias table to what is
//! stored. Records keep the provider spelling they arrived with, so an
//! edited alias table (a new alias, an alias moved to another provider)
//! reaches old data without re-ingesting anything.

use std::process::ExitCode;

use super::{DbArg, ProvidersArg};
use crate::store::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    providers: ProvidersArg,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = Store::open(&args.db.db)?.with_aliases(args.providers.load()?);
    let rows = store.reapply_aliases()?;
    println!("re-applied provider aliases to {rows} stored attempts");
    Ok(ExitCode::SUCCESS)
}
