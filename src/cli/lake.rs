//! `attempt-ledger lake check DIR`: what a lake holds, as its readers see
//! it: the files none can use and why, and each node's writers, exports,
//! gaps in its numbers and unfinished exports (`crate::lake::survey`).
//! `attempt-ledger lake expire DIR --before DAY`: retention, whole days
//! (`crate::lake::retention`).

use std::process::ExitCode;

use super::exit;
use crate::lake::Lake;
use crate::lake::read::readable;
use crate::lake::retention;
use crate::lake::storage::Location;
use crate::lake::survey::{Survey, survey};
use crate::lake::table_check::{TableCheck, check_table};
use crate::store::Store;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Walk the lake: name each file no reader can use, and each node's gaps
    /// and unfinished exports. Exit status 4 when anything needs acting on.
    Check(CheckArgs),
    /// Take every day before --before out of the lake, whole: its files
    /// deleted, and with --catalog out of the Iceberg table too (one delete
    /// snapshot), the table's snapshots past its retention expired and the
    /// files only they reached deleted. Run it daily for a rolling window.
    Expire(ExpireArgs),
}

#[derive(Debug, clap::Args)]
struct ExpireArgs {
    /// The attempt lake: a folder, or an object store's URL.
    #[arg(value_name = "LAKE", value_parser = Location::parse)]
    lake: Location,
    /// The first day kept (UTC, YYYY-MM-DD): every day before it is
    /// expired. Today at the latest.
    #[arg(long, value_name = "DAY")]
    before: chrono::NaiveDate,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// The lake's Iceberg table, which loses the same days.
    #[command(flatten)]
    table: super::export::TableArgs,
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// The attempt lake: a folder, or an object store's URL (s3://, gs://,
    /// az://), which is copied to a temporary folder to be read.
    #[arg(value_name = "LAKE", value_parser = Location::parse)]
    lake: Location,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Check the lake's Iceberg table too, through this catalog: files of
    /// finished exports it does not hold, files it holds that the lake
    /// lacks, and snapshots past its retention.
    #[command(flatten)]
    table: super::export::TableArgs,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    Table,
    Json,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Command::Check(args) => check(args),
        Command::Expire(args) => expire(args),
    }
}

fn expire(args: ExpireArgs) -> anyhow::Result<ExitCode> {
    let today = chrono::Utc::now().date_naive();
    let done = retention::expire(&args.lake, args.before, today, args.table.config().as_ref())?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&done)?),
        Format::Table => {
            let mut out = format!(
                "the lake {} holds no day before {}: {} files of those days deleted",
                args.lake, done.before, done.deleted_files
            );
            if done.kept_for_snapshots > 0 {
                out.push_str(&format!(
                    ", {} kept while table snapshots within its retention reach them (a later run deletes \
                     them)",
                    done.kept_for_snapshots
                ));
            }
            println!("{out}");
            if let Some(table) = &done.iceberg {
                let taken = if table.files == 0 {
                    "held no file of those days".to_string()
                } else {
                    format!(
                        "{} files ({} rows, {} bytes) taken out in one delete snapshot",
                        table.files, table.rows, table.bytes
                    )
                };
                println!(
                    "Iceberg table {}: {taken}; {} snapshots past its retention expired, {} files only they \
                     reached deleted",
                    args.table.iceberg_table, table.expired_snapshots, table.deleted_files
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let scratch = tempfile::Builder::new().prefix("attempt-ledger-lake-").tempdir()?;
    let (lake, root) = readable(&args.lake, scratch.path())?;
    let store = Store::open_in_memory()?;
    let surveyed = survey(&lake, &root, &store)?;
    let checked = match args.table.config() {
        // The table names the files by the store's own URIs, not the copy's.
        Some(config) => Some(check_table(&config, &Lake::open(&args.lake)?, &root, &surveyed)?),
        None => None,
    };
    match args.format {
        Format::Json => {
            let mut json = serde_json::to_value(&surveyed)?;
            if let (Some(checked), Some(object)) = (&checked, json.as_object_mut()) {
                object.insert("iceberg".to_string(), serde_json::to_value(checked)?);
            }
            println!("{}", serde_json::to_string_pretty(&json)?)
        }
        Format::Table => {
            print!("{}", table(&args.lake, &surveyed));
            if let Some(checked) = &checked {
                print!("{}", table_lines(checked));
            }
        }
    }
    let problems = surveyed.has_problems() || checked.as_ref().is_some_and(TableCheck::has_problems);
    Ok(if problems { ExitCode::from(exit::LAKE_PROBLEMS) } else { ExitCode::SUCCESS })
}

fn table_lines(checked: &TableCheck) -> String {
    let mut out = format!(
        "Iceberg table {}: snapshot {}, {} files, {} rows; {} snapshots, {} past retention\n",
        checked.table,
        checked.snapshot_id.map_or("none".to_string(), |id| id.to_string()),
        checked.files,
        checked.rows,
        checked.snapshots,
        checked.snapshots_past_retention,
    );
    for key in &checked.not_in_table {
        out.push_str(&format!("  not in the table: {key} (its node's next export commits it)\n"));
    }
    for key in &checked.newer_metadata {
        out.push_str(&format!(
            "  newer than the catalog's: {key}, a commit that never landed; readers without the catalog \
             (ClickHouse's icebergLocal) would take it: delete it\n"
        ));
    }
    for key in &checked.missing {
        out.push_str(&format!("  missing: the table holds {key}, and the lake does not\n"));
    }
    for key in &checked.expired_in_table {
        out.push_str(&format!(
            "  expired: the table still holds {key}, of a day the lake expired (`lake expire` again takes it \
             out)\n"
        ));
    }
    if checked.snapshots_past_retention > 0 {
        out.push_str(
            "  expire the old snapshots: `attempt-ledger lake expire` with --catalog does (or the warehouse's \
             engine: Spark's or Trino's expire_snapshots)\n",
        );
    }
    out
}

fn table(lake: &Location, surveyed: &Survey) -> String {
    let mut out = format!(
        "lake {} at {}: {} attempts files, {} bad\n",
        surveyed.lake_id,
        lake,
        surveyed.files,
        surveyed.bad.len()
    );
    for node in &surveyed.nodes {
        let holder = node.claims.last().map_or("nothing".to_string(), |c| {
            format!("database {} (claim {}, made {})", c.database_id, c.generation, c.claimed_at)
        });
        out.push_str(&format!(
            "node {}: bound to {holder}; {} exports, {} attempts, numbers 1 to {}\n",
            node.node, node.exports, node.attempts, node.high
        ));
        for (from, through) in &node.gaps {
            out.push_str(&format!("  gap: numbers {from} to {through} are in no export's record (lost)\n"));
        }
        for (from, through, export_id) in &node.unfinished {
            out.push_str(&format!(
                "  unfinished: export {export_id} ({from} to {through}), in progress or interrupted; \
                 the node's next export does it again\n"
            ));
        }
        for path in &node.unlisted {
            out.push_str(&format!("  not in a finished export yet: {path}\n"));
        }
    }
    if let Some(before) = surveyed.expired_before {
        out.push_str(&format!("expired: every day before {before} (lake expire)\n"));
    }
    for bad in &surveyed.bad {
        let held = bad.attempts.map_or("no record lists it".to_string(), |n| format!("{n} attempts"));
        out.push_str(&format!("bad: {}: {} ({held})\n", bad.path, bad.reason));
    }
    if !surveyed.has_problems() {
        out.push_str("every file is readable and belongs to this lake; no node's numbers have a gap\n");
    }
    out
}
