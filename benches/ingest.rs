//! Ingest and report throughput on simulated traffic.
//!
//!     cargo bench --bench ingest [-- RECORDS]        (default 1,000,000)
//!
//! Prints records/s for: decoding alone (the peer: JSON parsing and
//! validation, no storage), a full ingest into a fresh database, a re-ingest
//! of the same file (every record a duplicate), and the time of one full
//! report. Figures, not assertions: compare ratios across changes.

// A harness, not a product path: it unwraps what it set up, and scan.rs
// reads a database file as DuckDB's own client would.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter};
use std::time::Instant;

use attempt_core::ingest::jsonl;
use attempt_core::ingest::source::Source;
use attempt_core::pricing::PriceTable;
use attempt_core::request::ReportFilter;
use attempt_ledger::pipeline::ingest_sources;
use attempt_ledger::read::Reader;
use attempt_ledger::simulate::{Scenario, SimOptions, default_start, simulate};
use attempt_ledger::store::Store;

fn main() -> anyhow::Result<()> {
    let target: u64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(1_000_000);
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("bench.jsonl");

    // The storm averages a little over 1.5 attempts per document; scale the
    // workflow count so the file has about `target` records.
    let began = Instant::now();
    let options = SimOptions {
        scenario: Scenario::Overnight529Storm,
        workflows: Some(target * 10 / 16),
        seed: 1,
        start: default_start(),
        span: None,
    };
    let records = simulate(&options, &mut BufWriter::new(File::create(&file)?))?;
    let bytes = std::fs::metadata(&file)?.len();
    let secs = began.elapsed().as_secs_f64();
    println!(
        "simulate   {records} records, {:.0} MB in {secs:.2} s: {:.0} records/s",
        bytes as f64 / 1e6,
        records as f64 / secs
    );

    let began = Instant::now();
    let mut decoded = 0usize;
    let mut chunk = String::new();
    for line in BufReader::new(File::open(&file)?).lines() {
        chunk.push_str(&line?);
        chunk.push('\n');
        if chunk.len() > 8 << 20 {
            decoded += jsonl::decode_lines(&chunk, 1).attempts.len();
            chunk.clear();
        }
    }
    decoded += jsonl::decode_lines(&chunk, 1).attempts.len();
    let decode_rate = decoded as f64 / began.elapsed().as_secs_f64();
    println!("decode     {decoded} records: {decode_rate:.0} records/s (peer: parsing and validation only)");

    let store = Store::open(&dir.path().join("bench.duckdb"))?;
    let sources = [Source::File(file.clone())];
    let began = Instant::now();
    let summary = ingest_sources(&store, &sources, None, false)?;
    let ingest_secs = began.elapsed().as_secs_f64();
    let ingest_rate = summary.stored.inserted as f64 / ingest_secs;
    println!(
        "ingest     {} records in {ingest_secs:.2} s: {ingest_rate:.0} records/s = {:.2} x decode",
        summary.stored.inserted,
        ingest_rate / decode_rate
    );

    let began = Instant::now();
    let again = ingest_sources(&store, &sources, None, false)?;
    let secs = began.elapsed().as_secs_f64();
    println!(
        "re-ingest  {} duplicates in {secs:.2} s: {:.0} records/s",
        again.stored.duplicates,
        again.stored.duplicates as f64 / secs
    );

    let reader = Reader::new(&store, std::sync::Arc::new(PriceTable::load(None)?), Default::default());
    for run in 1..=2 {
        let began = Instant::now();
        let report = reader.report(&ReportFilter::default(), false)?;
        println!(
            "report     run {run}: {} workflows, {} attempts in {:.2} s",
            report.workflows.total,
            report.attempts.total,
            began.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
