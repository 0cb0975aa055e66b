//! `attempt-ledger prune --before DATE`: retention. Deletes whole workflows
//! (by their first attempt) so no workflow is ever cut in two, with their
//! derived rows, then compacts the file.

use std::process::ExitCode;

use chrono::Utc;

use super::DbArg;
use crate::report::parse_time;
use crate::store::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    /// Delete workflows whose first attempt started before this: RFC 3339,
    /// a date (midnight UTC) or an age (`30d`).
    #[arg(long, value_name = "TIME")]
    before: String,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let before = parse_time(&args.before, Utc::now()).map_err(anyhow::Error::msg)?;
    let store = Store::open(&args.db.db)?;
    let (workflows, attempts) = store.prune(before)?;
    println!(
        "deleted {workflows} workflows ({attempts} attempts) that started before {}",
        before.to_rfc3339()
    );
    Ok(ExitCode::SUCCESS)
}
