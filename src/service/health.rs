//! The gauges of `/metrics` that are read at scrape time, from the state
//! they describe: the writer's queue, how far derivation lags, how old the
//! stored-data families are. Everything the service counts is in the
//! telemetry registry instead (`crate::telemetry`).

use super::state::AppState;
use crate::metrics::{Family, Kind};

pub fn live_gauges(state: &AppState) -> Vec<Family> {
    let n = |v: u64| v as f64;
    let fresh = state.derivation.current();
    let mut out = vec![
        Family::new("ingest_queue_depth", "Write requests waiting for the writer.", Kind::Gauge)
            .sample(&[], n(state.writer.queue_depth() as u64)),
        Family::new(
            "ingest_queue_capacity",
            "Write requests that may wait before new ones get 503.",
            Kind::Gauge,
        )
        .sample(&[], n(state.writer.capacity() as u64)),
        Family::new(
            "derivation_lag_seconds",
            "How long the oldest acknowledged write not derived yet has waited (0: reports are current).",
            Kind::Gauge,
        )
        .sample(&[], fresh.lag_seconds),
        Family::new("derivation_pending_commits", "Acknowledged writes not derived yet.", Kind::Gauge)
            .sample(&[], n(fresh.pending_commits)),
        Family::new(
            "quarantined_workflows",
            "Workflows set aside because their derivation failed (attempt-ledger quarantine lists them).",
            Kind::Gauge,
        )
        .sample(&[], n(state.derivation.quarantined.load(std::sync::atomic::Ordering::Relaxed))),
    ];
    if let Ok(Some(stored)) = state.observed.stored_metrics.read().map(|s| s.clone()) {
        out.push(
            Family::new("stored_metrics_age_seconds", "Age of the stored-data metrics below.", Kind::Gauge)
                .sample(&[], stored.computed_at.elapsed().as_secs_f64()),
        );
        out.push(
            Family::new(
                "stored_metrics_compute_seconds",
                "Time the last stored-data refresh took.",
                Kind::Gauge,
            )
            .sample(&[], stored.compute_seconds),
        );
    }
    out
}
