//! `attempt-ledger lake check DIR`: what a lake holds, as its readers see
//! it: the files none can use and why, and each node's writers, exports,
//! gaps in its numbers and unfinished exports (`crate::lake::survey`).

use std::process::ExitCode;

use super::exit;
use crate::lake::read::readable;
use crate::lake::storage::Location;
use crate::lake::survey::{Survey, survey};
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
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// The attempt lake: a folder, or an object store's URL (s3://, gs://,
    /// az://), which is copied to a temporary folder to be read.
    #[arg(value_name = "LAKE", value_parser = Location::parse)]
    lake: Location,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    Table,
    Json,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Command::Check(args) = args.command;
    let scratch = tempfile::Builder::new().prefix("attempt-ledger-lake-").tempdir()?;
    let (lake, root) = readable(&args.lake, scratch.path())?;
    let store = Store::open_in_memory()?;
    let surveyed = survey(&lake, &root, &store)?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&surveyed)?),
        Format::Table => print!("{}", table(&args.lake, &surveyed)),
    }
    Ok(if surveyed.has_problems() { ExitCode::from(exit::LAKE_PROBLEMS) } else { ExitCode::SUCCESS })
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
    for bad in &surveyed.bad {
        let held = bad.attempts.map_or("no record lists it".to_string(), |n| format!("{n} attempts"));
        out.push_str(&format!("bad: {}: {} ({held})\n", bad.path, bad.reason));
    }
    if !surveyed.has_problems() {
        out.push_str("every file is readable and belongs to this lake; no node's numbers have a gap\n");
    }
    out
}
