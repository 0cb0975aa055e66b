//! `attempt-ledger prune --before DATE`: retention. Deletes whole workflows
//! (by their first attempt) so no workflow is ever cut in two, with their
//! derived rows, then compacts the file: DuckDB reuses freed blocks but
//! never shrinks a file, so the live rows are copied into a new file that
//! replaces the old one (a rename: a crash leaves one or the other whole).

use std::process::ExitCode;

use anyhow::Context;
use chrono::Utc;

use super::DbArg;
use crate::store::Store;
use attempt_core::time_arg::parse_time;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    /// Delete workflows whose first attempt started before this: RFC 3339,
    /// a date (midnight UTC) or an age (`30d`).
    #[arg(long, value_name = "TIME")]
    before: String,
    /// Delete them even if the attempt lake this database exports to does
    /// not hold them all yet (they are then in neither).
    #[arg(long)]
    allow_unexported: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let before = parse_time(&args.before, Utc::now()).map_err(anyhow::Error::msg)?;
    let db = &args.db.db;
    let size_before = std::fs::metadata(db).map(|m| m.len()).ok();
    let store = Store::open(db)?;
    if let Some((lake, missing)) = store.unexported_before(before)?.filter(|(_, missing)| *missing > 0) {
        if !args.allow_unexported {
            anyhow::bail!(
                "refusing to prune: {missing} of the attempts to delete are not in the lake {lake} yet. Export \
                 first (`attempt-ledger export --db {} --lake LAKE`, or let `serve --lake` catch up), or pass \
                 --allow-unexported to delete them anyway",
                db.display()
            );
        }
        eprintln!(
            "warning: deleting {missing} attempts the lake {lake} does not hold: neither the database nor the \
             lake will have them, and the lake's reports will lack their workflows"
        );
    }
    let (workflows, attempts) = store.prune(before)?;
    println!(
        "deleted {workflows} workflows ({attempts} attempts) that started before {}",
        before.to_rfc3339()
    );
    if workflows == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    let mut compacted = db.as_os_str().to_owned();
    compacted.push(".compacting");
    let compacted = std::path::PathBuf::from(compacted);
    // Left over by a compaction that was killed: never the live database.
    let _ = std::fs::remove_file(&compacted);
    store.compact_into(&compacted).context("copying the live rows into a compacted file")?;
    drop(store);
    std::fs::rename(&compacted, db)
        .with_context(|| format!("replacing {} with {}", db.display(), compacted.display()))?;
    if let (Some(before), Ok(after)) = (size_before, std::fs::metadata(db)) {
        println!("compacted {}: {} -> {} bytes", db.display(), before, after.len());
    }
    Ok(ExitCode::SUCCESS)
}
