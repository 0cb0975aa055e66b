//! `serve --lake`: exports to the attempt lake in the background, on a
//! connection of its own (`crate::lake::export`).
//!
//! An export runs once attempts have waited `interval`, or as soon as they
//! would take `max_bytes` in the lake (estimated from the bytes per attempt
//! of the exports so far), and once more at shutdown, after the last
//! derivation round. A failed export is retried at the next check; the
//! database keeps everything meanwhile, and `prune` refuses to delete
//! what the lake does not hold.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::observer::{Stop, supervised};
use crate::lake::Lake;
use crate::lake::export::export;
use crate::lake::nodes::Binding;
use crate::store::Store;
use crate::telemetry::events::{LakeExportFailed, LakeExported};
use attempt_core::pricing::PriceTable;

/// How often the loop looks at what waits.
const CHECK_EVERY: Duration = Duration::from_secs(5);

/// Bytes per attempt assumed before the first export measured it: zstd
/// Parquet of simulated traffic takes 22 to 33 (`scripts/bench.sh`);
/// records with long ids and `extra` fields take more, and a guess too
/// high only exports the first time a little early.
const FIRST_BYTES_PER_ATTEMPT: f64 = 120.0;

pub struct LakeExporter {
    pub store: Store,
    pub lake: Lake,
    pub binding: Binding,
    pub prices: Arc<PriceTable>,
    pub interval: Duration,
    pub max_bytes: u64,
}

impl LakeExporter {
    /// Exports if something is due (everything waiting when `force`).
    fn check(&self, since_last: &mut Instant, force: bool) {
        let (waiting, per_attempt) = match self.store.unexported(&self.lake.manifest().lake_id) {
            Ok(found) => found,
            Err(error) => return LakeExportFailed { error: &error }.emit(),
        };
        let estimate = waiting as f64 * per_attempt.unwrap_or(FIRST_BYTES_PER_ATTEMPT);
        let due = force || since_last.elapsed() >= self.interval || estimate >= self.max_bytes as f64;
        if waiting == 0 || !due {
            return;
        }
        match export(&self.store, &self.lake, &self.binding, &self.prices) {
            Ok(Some(done)) => {
                *since_last = Instant::now();
                if let Some(note) = done.rebase_note(&self.binding.node) {
                    tracing::warn!("{note}");
                }
                LakeExported {
                    through: done.through,
                    attempts: done.attempts,
                    files: done.files,
                    bytes: done.bytes,
                    seconds: done.elapsed.as_secs_f64(),
                }
                .emit();
            }
            Ok(None) => *since_last = Instant::now(),
            Err(error) => LakeExportFailed { error: &error }.emit(),
        }
    }

    pub fn spawn(self, stop: Arc<Stop>) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new().name("lake".into()).spawn(move || {
            let mut since_last = Instant::now();
            loop {
                let stopping = stop.wait(CHECK_EVERY.min(self.interval));
                supervised("lake", || self.check(&mut since_last, stopping));
                if stopping {
                    return;
                }
            }
        })
    }
}
