//! File ingest: read inputs in chunks of lines, decode each chunk on the
//! cores the writer leaves, store them on another thread. The store
//! commits each chunk in one transaction, so an interrupted import keeps
//! every chunk it finished, and re-running it adds nothing that was already
//! stored. Once every input is stored, what they touched is derived
//! (`Store::catch_up`: one set-based pass for an import as large as what
//! was stored); killed before that, the next command to open the database
//! derives it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::thread;
use std::time::Duration;

use anyhow::{Context, anyhow};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::store::{AttemptRows, CatchUp, PreparedBatch, Store, WriteStats};
use attempt_core::ingest::format::Format;
use attempt_core::ingest::framing::{Framing, frame};
use attempt_core::ingest::source::{Framed, Source, for_each_chunk, frame_input};
use attempt_core::ingest::{Decoded, Rejection, Warning};

/// Lines per chunk: one DuckDB row group (122,880 rows), so a chunk's rows
/// are written straight to the database file as a whole row group rather
/// than through the WAL (measured: commits fall from ~300 ms to ~5 ms), and
/// no tail of a row group is left for the next checkpoint to compress again
/// (131,072-line chunks left 8,192 rows each). Three chunks in flight bound
/// memory at a few hundred megabytes.
const LINES_PER_CHUNK: usize = 122_880;

/// Threads that decode one chunk: the machine's cores but one, which the
/// writer (DuckDB's appends and commits) keeps busy; at most this many.
/// Measured on 2 cores, a second decode thread only took CPU from the
/// writer (1.17M records: 9.5 s to decode and write became 10.8 s).
const MAX_DECODE_THREADS: usize = 8;

/// Rejected and warned lines kept with their reasons; beyond these the
/// totals still count every one.
pub const MAX_LISTED_NOTES: usize = 1000;

#[derive(Debug, Default)]
pub struct IngestSummary {
    pub stored: WriteStats,
    /// The first `MAX_LISTED_NOTES` rejected lines, with their input.
    pub rejected: Vec<(String, Rejection)>,
    pub rejected_total: u64,
    /// Records the inputs held: kept by a decoder, or rejected.
    pub received: u64,
    /// The first `MAX_LISTED_NOTES` lines stored with a correction.
    pub warnings: Vec<(String, Warning)>,
    pub warnings_total: u64,
    /// Until every record was stored (what the import acknowledges).
    pub stored_in: Duration,
    /// Then, until every report reflects them.
    pub derived_in: Duration,
    pub derivation: CatchUp,
}

impl IngestSummary {
    /// Counts a chunk's notes (`rejected`, `warned`: all of them) and keeps
    /// the reasons while there is room.
    fn note(&mut self, source: &str, decoded: &mut Decoded) {
        let (rejections, warnings) =
            (std::mem::take(&mut decoded.rejections), std::mem::take(&mut decoded.warnings));
        self.rejected_total += decoded.rejected;
        self.received += decoded.received();
        self.warnings_total += decoded.warned;
        let room = MAX_LISTED_NOTES.saturating_sub(self.rejected.len());
        self.rejected.extend(rejections.into_iter().take(room).map(|r| (source.to_string(), r)));
        let room = MAX_LISTED_NOTES.saturating_sub(self.warnings.len());
        self.warnings.extend(warnings.into_iter().take(room).map(|w| (source.to_string(), w)));
    }
}

/// The fewest bytes a stored JSONL record takes: sizes the attempt-id
/// filter from an input's size before it is read (a filter sized too large
/// costs memory only; one too small grows a link).
const MIN_BYTES_PER_RECORD: u64 = 150;

/// Ingests every source in order into `store`, then derives what they
/// touched. Stops at the first input that cannot be read; everything
/// committed before stays committed (and is derived).
/// `format` `None` decides each input's format from its first record.
pub fn ingest_sources(
    store: &Store,
    sources: &[Source],
    format: Option<Format>,
    show_progress: bool,
) -> anyhow::Result<IngestSummary> {
    let mut summary = IngestSummary::default();
    let began = std::time::Instant::now();
    let input_bytes: u64 = sources.iter().filter_map(Source::size).sum();
    store.expect_records(input_bytes / MIN_BYTES_PER_RECORD)?;
    let result = sources
        .iter()
        .try_for_each(|source| ingest_source(store, source, format, show_progress, &mut summary));
    summary.stored_in = began.elapsed();
    summary.derivation = store.catch_up().context("deriving facts and rollups of the imported records")?;
    summary.derived_in = began.elapsed() - summary.stored_in;
    result.map(|_| summary)
}

fn ingest_source(
    store: &Store,
    source: &Source,
    format: Option<Format>,
    show_progress: bool,
    summary: &mut IngestSummary,
) -> anyhow::Result<()> {
    let name = source.display_name();
    let bytes_read = Arc::new(AtomicU64::new(0));
    let (reader, size) = source.open(bytes_read.clone()).with_context(|| format!("cannot read {name}"))?;
    let progress = progress_bar(&name, size, show_progress);

    // Decoding (JSON parsing, validation, hashing, the Arrow columns of the
    // rows) overlaps with DuckDB writes; the bounded channel keeps at most
    // two chunks in memory, as rows (the decoded records are dropped once
    // their rows exist).
    let (sender, receiver) = sync_channel::<(Decoded, AttemptRows)>(2);
    let aliases = store.aliases();
    let decode_threads =
        thread::available_parallelism().map_or(1, |n| n.get()).saturating_sub(1).clamp(1, MAX_DECODE_THREADS);
    let framed = frame_input(reader).with_context(|| format!("cannot read {name}"))?;
    let decoder = thread::spawn(move || {
        let send = |mut decoded: Decoded| {
            let rows = AttemptRows::new(&std::mem::take(&mut decoded.attempts), &aliases)
                .map_err(std::io::Error::other)?;
            // A closed channel means the writer failed; it reports why.
            sender.send((decoded, rows)).map_err(|_| std::io::Error::other("writer stopped"))
        };
        match framed {
            Framed::Lines(reader) => {
                let mut format = format;
                for_each_chunk(reader, LINES_PER_CHUNK, |chunk| {
                    let format = match format {
                        Some(format) => format,
                        None => {
                            let Some(first) = chunk.text.lines().find(|l| !l.trim().is_empty()) else {
                                chunk_rejections_only(chunk.rejections, &send)?;
                                return Ok(());
                            };
                            *format.insert(Format::detect(first).map_err(std::io::Error::other)?)
                        }
                    };
                    let mut decoded =
                        format.decode_lines_parallel(&chunk.text, chunk.first_line, decode_threads);
                    chunk.rejections.into_iter().for_each(|r| decoded.reject(r.line, r.reason));
                    send(decoded)
                })
            }
            Framed::Document(text) => {
                let document = frame(&text, Framing::Document);
                let format = document.format(format).map_err(std::io::Error::other)?;
                let records: Vec<(u64, &str)> = document.records().collect();
                records.chunks(LINES_PER_CHUNK).try_for_each(|chunk| {
                    let mut decoded = Decoded::default();
                    for (number, record) in chunk {
                        format.decode_record(record, *number, &mut decoded);
                    }
                    send(decoded)
                })
            }
        }
    });
    let mut write_error = None;
    for (mut decoded, rows) in receiver {
        let batch = PreparedBatch { rows: &rows, spans: &decoded.spans, circuits: &decoded.circuits };
        match store.store_prepared(&[batch]) {
            Ok(mut stored) => summary.stored += stored.stats.pop().unwrap_or_default(),
            Err(err) => {
                write_error = Some(err);
                break;
            }
        }
        summary.note(&name, &mut decoded);
        progress.set_position(bytes_read.load(Ordering::Relaxed));
        progress.set_message(format!("{} stored", summary.stored.inserted));
    }
    progress.finish_and_clear();
    let read_result = decoder.join().map_err(|_| anyhow!("decoder thread panicked on {name}"))?;
    if let Some(err) = write_error {
        return Err(err).with_context(|| format!("storing records from {name}"));
    }
    read_result.with_context(|| format!("reading {name}"))?;
    summary.rejected.sort_by(|a, b| (a.0.as_str(), a.1.line).cmp(&(b.0.as_str(), b.1.line)));
    summary.warnings.sort_by(|a, b| (a.0.as_str(), a.1.line).cmp(&(b.0.as_str(), b.1.line)));
    Ok(())
}

/// A chunk of blank or unreadable lines before the first record: its
/// rejections (a line that was not UTF-8) still count.
fn chunk_rejections_only(
    rejections: Vec<attempt_core::ingest::Rejection>,
    send: &impl Fn(Decoded) -> std::io::Result<()>,
) -> std::io::Result<()> {
    if rejections.is_empty() {
        return Ok(());
    }
    let mut decoded = Decoded::default();
    rejections.into_iter().for_each(|r| decoded.reject(r.line, r.reason));
    send(decoded)
}

fn progress_bar(name: &str, size: Option<u64>, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    // indicatif draws nothing when stderr is not a terminal.
    let bar = match size {
        Some(len) => ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr()).with_style(
            ProgressStyle::with_template("{prefix} [{bar:30}] {bytes}/{total_bytes} {msg} ({eta})")
                .expect("valid template")
                .progress_chars("=> "),
        ),
        None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(
            ProgressStyle::with_template("{prefix} {spinner} {bytes} {msg}").expect("valid template"),
        ),
    };
    bar.set_prefix(name.to_string());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
