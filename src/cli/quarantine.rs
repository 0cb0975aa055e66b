//! `attempt-ledger quarantine`: the workflows whose derivation failed and
//! were set aside (with the error), so everyone else's was not held up.
//! Their attempts stay stored; `attempt-ledger rebuild` tries them again.

use std::process::ExitCode;

use anyhow::bail;
use serde_json::json;

use super::DbArg;
use crate::report::Format;
use crate::store::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !args.db.db.exists() {
        bail!("no database at {}: run `attempt-ledger ingest` first, or pass --db", args.db.db.display());
    }
    let store = Store::open(&args.db.db)?;
    let rows = store.quarantined()?;
    match args.format {
        Format::Json => {
            let list: Vec<_> = rows
                .iter()
                .map(|(id, error, attempts, at)| {
                    json!({"workflow_id": id, "attempts": attempts, "quarantined_at": at.to_rfc3339(), "error": error})
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&json!({"quarantined": list}))?);
        }
        Format::Csv => {
            let mut out = csv::Writer::from_writer(std::io::stdout());
            out.write_record(["workflow_id", "attempts", "quarantined_at", "error"])?;
            for (id, error, attempts, at) in &rows {
                out.write_record([id.as_str(), &attempts.to_string(), &at.to_rfc3339(), error.as_str()])?;
            }
            out.flush()?;
        }
        Format::Table if rows.is_empty() => println!("no quarantined workflows"),
        Format::Table => {
            println!(
                "{} quarantined workflows (their attempts are stored; `attempt-ledger rebuild` tries them again):",
                rows.len()
            );
            for (id, error, attempts, at) in &rows {
                println!("{id}  {attempts} attempts  since {}  {error}", at.to_rfc3339());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
