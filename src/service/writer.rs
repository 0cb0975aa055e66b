//! The single owner of the DuckDB write connection.
//!
//! Requests hand their attempts over a bounded channel and wait. The writer
//! thread takes the first job, drains whatever else has queued up meanwhile
//! (up to `max_batch` records), stores them all in one transaction (group
//! commit) and only then answers each request: an acknowledgement means the
//! records are committed. Deriving what they touched is the deriver's
//! (`deriver.rs`), told of each write before its answer goes out. A full
//! channel is refused at once (`Saturated`), never queued without bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use tokio::sync::{mpsc, oneshot};

use super::deriver::Derivation;
use crate::store::{AttemptRows, PreparedBatch, Store, StoreError, WriteStats};
use crate::telemetry::events::{BatchFailed, BatchesCommitted, RecordsStored, Refusal, WriteRefused};
use attempt_core::model::{Attempt, CircuitChange, SpanRecord};
use attempt_core::providers::ProviderAliases;

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("the writer is saturated; retry later")]
    Saturated,
    #[error("the writer has stopped")]
    Stopped,
    #[error("storing the batch failed: {0}")]
    Store(#[from] StoreError),
    /// A bug unwound the write; its transaction was rolled back.
    #[error("the write panicked: {0}")]
    Panicked(String),
}

struct Job {
    rows: AttemptRows,
    spans: Vec<SpanRecord>,
    circuits: Vec<CircuitChange>,
    reply: oneshot::Sender<Result<WriteStats, WriteError>>,
}

/// The writer's state, for `/readyz` (what it counts is telemetry:
/// `crate::telemetry::events`).
#[derive(Debug, Default)]
pub struct WriterStats {
    /// The writer thread is running (false once it stopped, or died).
    pub alive: AtomicBool,
    /// The last transaction the writer tried failed (a full disk, an
    /// unwritable file); cleared by the next one that commits.
    pub last_write_failed: AtomicBool,
}

#[derive(Clone)]
pub struct WriterHandle {
    sender: mpsc::Sender<Job>,
    capacity: usize,
    /// The store's alias table: a request's rows are built on its own task,
    /// not on the writer thread.
    aliases: Arc<ProviderAliases>,
    pub stats: Arc<WriterStats>,
}

/// Above this many attempts, a request's rows are built on the blocking
/// pool rather than on its async task.
const INLINE_ROWS: usize = 1_000;

impl WriterHandle {
    /// Stores `attempts`, `spans` (whose traces' attempts are derived
    /// again) and breaker state changes; returns once they are committed.
    pub async fn write(
        &self,
        attempts: Vec<Attempt>,
        spans: Vec<SpanRecord>,
        circuits: Vec<CircuitChange>,
    ) -> Result<WriteStats, WriteError> {
        if attempts.is_empty() && spans.is_empty() && circuits.is_empty() {
            return Ok(WriteStats::default());
        }
        let rows = if attempts.len() <= INLINE_ROWS {
            AttemptRows::new(&attempts, &self.aliases)
        } else {
            let aliases = self.aliases.clone();
            tokio::task::spawn_blocking(move || AttemptRows::new(&attempts, &aliases))
                .await
                .map_err(|e| WriteError::Panicked(e.to_string()))?
        }?;
        let (reply, answer) = oneshot::channel();
        self.sender.try_send(Job { rows, spans, circuits, reply }).map_err(|err| match err {
            mpsc::error::TrySendError::Full(_) => {
                WriteRefused { by: Refusal::Queue }.emit();
                WriteError::Saturated
            }
            mpsc::error::TrySendError::Closed(_) => WriteError::Stopped,
        })?;
        answer.await.map_err(|_| WriteError::Stopped)?
    }

    /// Jobs waiting for the writer.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn queue_depth(&self) -> usize {
        self.capacity - self.sender.capacity()
    }
}

/// Starts the writer thread. It stops after every handle is dropped and the
/// queue is drained.
pub fn spawn(
    store: Store,
    queue: usize,
    max_batch: usize,
    derivation: Arc<Derivation>,
) -> (WriterHandle, JoinHandle<()>) {
    let (sender, receiver) = mpsc::channel(queue);
    let aliases = store.aliases();
    // Alive from here, not from the thread's first instruction: a `/readyz`
    // that arrives before the thread is scheduled must not read "stopped".
    let stats = Arc::new(WriterStats { alive: AtomicBool::new(true), ..WriterStats::default() });
    let handle = WriterHandle { sender, capacity: queue, aliases, stats: stats.clone() };
    let thread = std::thread::Builder::new()
        .name("attempt-writer".into())
        .spawn(move || run(store, receiver, max_batch, &stats, &derivation))
        .expect("spawning the writer thread");
    (handle, thread)
}

/// Marks the writer dead when its thread ends, by return or by panic.
struct AliveGuard<'a>(&'a AtomicBool);

impl Drop for AliveGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// One group commit. A panic inside it (a bug) fails this group like a
/// storage error, which rolls the transaction back, instead of ending the
/// writer thread and with it every later write.
fn write_guarded(
    store: &Store,
    batches: &[PreparedBatch],
    derivation: &Derivation,
) -> Result<Vec<WriteStats>, WriteError> {
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.store_prepared(batches)));
    match attempt {
        Ok(Ok(stored)) => {
            if let Some(seq) = stored.seq {
                derivation.acknowledged(seq, stored.rows);
            }
            Ok(stored.stats)
        }
        Ok(Err(err)) => Err(WriteError::Store(err)),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            // DuckDB rolls back a transaction left open by an unwound write
            // at the next BEGIN; make it now so the next group starts clean.
            let _ = store.rollback_open_transaction();
            Err(WriteError::Panicked(message.unwrap_or_else(|| "(no message)".into())))
        }
    }
}

/// After a failed commit, how often an idle writer tries a probe write.
pub const PROBE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// The next job. After a failed commit, while no job comes, a probe write
/// every `PROBE_INTERVAL` finds out when the database can be written again
/// (space freed on a full disk), so `/readyz` turns ready without waiting
/// for clients that a load balancer keeps away while it says not ready.
fn next_job(store: &Store, receiver: &mut mpsc::Receiver<Job>, stats: &WriterStats) -> Option<Job> {
    let mut last_probe = std::time::Instant::now();
    while stats.last_write_failed.load(Ordering::Relaxed) {
        match receiver.try_recv() {
            Ok(job) => return Some(job),
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
            Err(mpsc::error::TryRecvError::Empty) => {}
        }
        if last_probe.elapsed() >= PROBE_INTERVAL {
            last_probe = std::time::Instant::now();
            match store.probe_write() {
                Ok(()) => {
                    tracing::info!("the database can be written again");
                    stats.last_write_failed.store(false, Ordering::Relaxed);
                }
                Err(err) => tracing::debug!(error = %err, "probe write failed"),
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    receiver.blocking_recv()
}

fn run(
    store: Store,
    mut receiver: mpsc::Receiver<Job>,
    max_batch: usize,
    stats: &WriterStats,
    derivation: &Derivation,
) {
    let _alive = AliveGuard(&stats.alive);
    while let Some(first) = next_job(&store, &mut receiver, stats) {
        // Flow control: while derivation is behind, requests queue up here
        // (and are committed together once it caught up).
        derivation.wait_for_room();
        let mut size = first.rows.len() + first.spans.len() + first.circuits.len();
        let mut jobs = vec![first];
        while size < max_batch {
            match receiver.try_recv() {
                Ok(job) => {
                    size += job.rows.len() + job.spans.len() + job.circuits.len();
                    jobs.push(job);
                }
                Err(_) => break,
            }
        }
        let batches: Vec<PreparedBatch> = jobs
            .iter()
            .map(|j| PreparedBatch { rows: &j.rows, spans: &j.spans, circuits: &j.circuits })
            .collect();
        let results: Vec<Result<Vec<WriteStats>, WriteError>> = match write_guarded(
            &store, &batches, derivation,
        ) {
            Ok(results) => {
                BatchesCommitted { transactions: 1 }.emit();
                results.into_iter().map(|r| Ok(vec![r])).collect()
            }
            // One request must not fail the others it was grouped with:
            // each is tried again alone (the group's transaction rolled
            // back, so nothing of it is stored twice).
            Err(err) if jobs.len() > 1 => {
                tracing::warn!(error = %err, jobs = jobs.len(), "group commit failed; storing each request alone");
                let alone: Vec<_> = batches
                    .iter()
                    .map(|b| write_guarded(&store, std::slice::from_ref(b), derivation))
                    .collect();
                let committed = alone.iter().filter(|r| r.is_ok()).count() as u64;
                BatchesCommitted { transactions: committed }.emit();
                alone
            }
            Err(err) => vec![Err(err)],
        };
        drop(batches);
        for (job, result) in jobs.into_iter().zip(results) {
            let answer = match result {
                Ok(mut per_batch) => {
                    let result = per_batch.pop().unwrap_or_default();
                    RecordsStored {
                        inserted: result.inserted,
                        duplicates: result.duplicates,
                        conflicts: result.conflicts,
                    }
                    .emit();
                    stats.last_write_failed.store(false, Ordering::Relaxed);
                    Ok(result)
                }
                Err(err) => {
                    BatchFailed { error: &err }.emit();
                    stats.last_write_failed.store(true, Ordering::Relaxed);
                    Err(err)
                }
            };
            // A caller that went away no longer needs the answer.
            let _ = job.reply.send(answer);
        }
    }
    tracing::info!("writer drained and stopped");
}
