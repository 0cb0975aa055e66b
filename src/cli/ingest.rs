//! `attempt-ledger ingest`: JSONL files (or stdin, or .gz) into the database:
//! attempt records, OTLP exports, LiteLLM payloads or OpenRouter generations.

use std::process::ExitCode;

use anyhow::Context;

use super::{DbArg, ProvidersArg, exit};
use crate::pipeline::{IngestSummary, ingest_sources};
use crate::store::{Job, MemoryLimit, Store};
use attempt_core::ingest::format::Format;
use attempt_core::ingest::source::Source;

/// Rejections and warnings printed in full; the rest are counted.
const SHOWN_NOTES: usize = 50;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: DbArg,
    #[command(flatten)]
    providers: ProvidersArg,
    /// The inputs' format; by default decided for each input from its first
    /// record (an input that fits none, or several, is refused).
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Do not draw a progress bar.
    #[arg(long)]
    no_progress: bool,
    /// JSONL files; `-` reads standard input, `*.gz` is read as gzip.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let limit = MemoryLimit::for_job(Job::Bulk);
    eprintln!("{limit}");
    let store = Store::open_for_job(&args.db.db, &limit)?.with_aliases(args.providers.load()?);
    let sources: Vec<Source> = args.files.iter().map(|f| Source::parse(f)).collect();
    let summary = ingest_sources(&store, &sources, args.format, !args.no_progress)
        .with_context(|| format!("ingest into {}", args.db.db.display()))?;
    print_summary(&summary);
    let refused = summary.stored.spans_refused;
    Ok(if summary.rejected_total == 0 && refused == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::REJECTED_LINES)
    })
}

pub fn print_summary(summary: &IngestSummary) {
    let stored = &summary.stored;
    // Every record received is one of accepted, duplicate, conflict or
    // rejected (a model-call span its full trace refused among the last).
    println!(
        "accepted {} records, {} duplicates of records already stored, {} conflicts, {} warnings, {} rejected \
         (of {} received)",
        stored.inserted,
        stored.duplicates,
        stored.conflicts,
        summary.warnings_total,
        summary.rejected_total + stored.records_refused,
        summary.received
    );
    let derivation = &summary.derivation;
    eprintln!(
        "stored in {:.2} s, then derived {} workflows in {:.2} s{}",
        summary.stored_in.as_secs_f64(),
        derivation.workflows,
        summary.derived_in.as_secs_f64(),
        if derivation.rebuilt { " (one pass over every workflow)" } else { "" }
    );
    if derivation.quarantined > 0 {
        eprintln!(
            "{} workflows could not be derived and were set aside (`attempt-ledger quarantine` lists them and why; \
             `attempt-ledger rebuild` tries them again)",
            derivation.quarantined
        );
    }
    for id in stored.conflict_ids.iter().take(SHOWN_NOTES) {
        eprintln!(
            "conflict: attempt_id {id} was stored before with different content; the first copy is kept"
        );
    }
    for (source, warning) in summary.warnings.iter().take(SHOWN_NOTES) {
        eprintln!("warning {source}:{}: {}", warning.line, warning.reason);
    }
    if summary.warnings_total > SHOWN_NOTES as u64 {
        eprintln!("... and {} more warnings", summary.warnings_total - SHOWN_NOTES as u64);
    }
    for (source, rejection) in summary.rejected.iter().take(SHOWN_NOTES) {
        eprintln!("rejected {source}:{}: {}", rejection.line, rejection.reason);
    }
    if summary.rejected_total > SHOWN_NOTES as u64 {
        eprintln!("... and {} more rejected lines", summary.rejected_total - SHOWN_NOTES as u64);
    }
    if stored.spans_refused > 0 {
        eprintln!(
            "rejected {} spans: their trace already holds {} spans, the most one trace may store",
            stored.spans_refused,
            crate::store::MAX_SPANS_PER_TRACE
        );
    }
}
