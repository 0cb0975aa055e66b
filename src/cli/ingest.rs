//! `attempt-ledger ingest`: JSONL files (or stdin, or .gz) into the database.

use std::process::ExitCode;

use anyhow::Context;

use super::{DbArg, exit};
use crate::ingest::source::Source;
use crate::pipeline::{IngestSummary, ingest_sources};
use crate::store::Store;

/// Rejections printed in full; the rest are counted.
const SHOWN_REJECTIONS: usize = 50;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    /// Do not draw a progress bar.
    #[arg(long)]
    no_progress: bool,
    /// JSONL files; `-` reads standard input, `*.gz` is read as gzip.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let store = Store::open(&args.db.db)?;
    let sources: Vec<Source> = args.files.iter().map(|f| Source::parse(f)).collect();
    let summary = ingest_sources(&store, &sources, !args.no_progress)
        .with_context(|| format!("ingest into {}", args.db.db.display()))?;
    print_summary(&summary);
    Ok(if summary.rejected.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(exit::REJECTED_LINES) })
}

pub fn print_summary(summary: &IngestSummary) {
    println!(
        "accepted {} records, {} duplicates of records already stored, {} rejected",
        summary.stored.inserted,
        summary.stored.duplicates,
        summary.rejected.len()
    );
    for (source, rejection) in summary.rejected.iter().take(SHOWN_REJECTIONS) {
        eprintln!("rejected {source}:{}: {}", rejection.line, rejection.reason);
    }
    if summary.rejected.len() > SHOWN_REJECTIONS {
        eprintln!("... and {} more rejected lines", summary.rejected.len() - SHOWN_REJECTIONS);
    }
}
