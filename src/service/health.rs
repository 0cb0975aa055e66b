//! The service's own health for `/metrics`: ingest queue, writer, receivers
//! and the alert loops, read from live counters at scrape time.

use std::sync::atomic::Ordering::Relaxed;

use super::state::AppState;
use crate::metrics::{Family, Kind};

pub fn families(state: &AppState) -> Vec<Family> {
    let w = &state.writer.stats;
    let s = &state.stats;
    let o = &state.observed;
    let n = |v: u64| v as f64;
    let mut out = vec![
        Family::new("ingest_queue_depth", "Write requests waiting for the writer.", Kind::Gauge)
            .sample(&[], n(state.writer.queue_depth() as u64)),
        Family::new(
            "ingest_queue_capacity",
            "Write requests that may wait before new ones get 503.",
            Kind::Gauge,
        )
        .sample(&[], n(state.writer.capacity() as u64)),
        Family::new("ingest_batches_committed", "Transactions the writer committed.", Kind::Counter)
            .sample(&[], n(w.batches_committed.load(Relaxed))),
        Family::new("ingest_records", "Records received, by result.", Kind::Counter)
            .sample(&[("result", "accepted")], n(w.attempts_inserted.load(Relaxed)))
            .sample(&[("result", "duplicate")], n(w.attempts_duplicate.load(Relaxed)))
            .sample(&[("result", "rejected")], n(s.rejected_records.load(Relaxed))),
        Family::new("ingest_requests", "Ingest requests, by receiver.", Kind::Counter)
            .sample(&[("receiver", "attempts")], n(s.attempts_requests.load(Relaxed)))
            .sample(&[("receiver", "otlp_http")], n(s.otlp_http_requests.load(Relaxed)))
            .sample(&[("receiver", "otlp_grpc")], n(s.otlp_grpc_requests.load(Relaxed))),
        Family::new(
            "ingest_requests_refused",
            "Requests refused because the writer queue was full.",
            Kind::Counter,
        )
        .sample(&[], n(w.requests_refused.load(Relaxed))),
        Family::new("alert_evaluations", "Evaluations of the alert rules.", Kind::Counter)
            .sample(&[], n(o.evaluations.load(Relaxed))),
        Family::new(
            "alert_evaluation_failures",
            "Rule evaluations that failed (the alert kept its state).",
            Kind::Counter,
        )
        .sample(&[], n(o.evaluation_failures.load(Relaxed))),
        Family::new(
            "alert_evaluation_seconds",
            "Duration of the last evaluation of every rule.",
            Kind::Gauge,
        )
        .sample(&[], f64::from_bits(o.last_evaluation_seconds.load(Relaxed))),
        Family::new(
            "background_loop_panics",
            "Rounds of the alert evaluator or metrics refresher that panicked (a bug: see the log); the loop went on.",
            Kind::Counter,
        )
        .sample(&[], n(o.loop_panics.load(Relaxed))),
    ];
    let d = &state.derivation;
    let fresh = d.current();
    out.extend([
        Family::new(
            "derivation_lag_seconds",
            "How long the oldest acknowledged write not derived yet has waited (0: reports are current).",
            Kind::Gauge,
        )
        .sample(&[], fresh.lag_seconds),
        Family::new("derivation_pending_commits", "Acknowledged writes not derived yet.", Kind::Gauge)
            .sample(&[], n(fresh.pending_commits)),
        Family::new("derivation_rounds", "Derivation rounds committed.", Kind::Counter)
            .sample(&[], n(d.rounds.load(Relaxed))),
        Family::new(
            "derivation_round_failures",
            "Derivation rounds that failed on storage (or panicked) and were retried.",
            Kind::Counter,
        )
        .sample(&[], n(d.round_failures.load(Relaxed))),
        Family::new(
            "quarantined_workflows",
            "Workflows set aside because their derivation failed (attempt-ledger quarantine lists them).",
            Kind::Gauge,
        )
        .sample(&[], n(d.quarantined.load(Relaxed))),
        Family::new(
            "derivation_clamped_values",
            "Attempts whose duration, TTFT or retry-after (stored before the 30-day bound) was clamped to it.",
            Kind::Counter,
        )
        .sample(&[], n(d.clamped.load(Relaxed))),
    ]);

    let mut alerts = Family::new("alerts", "Alerts pending or firing now, by rule.", Kind::Gauge);
    let active = o.active_alerts.read().map(|a| a.clone()).unwrap_or_default();
    for rule in o.rule_names.read().map(|r| r.clone()).unwrap_or_default() {
        for (state_name, firing) in [("pending", false), ("firing", true)] {
            let count = active.iter().filter(|(e, f)| e.rule == rule && *f == firing).count();
            alerts = alerts.sample(&[("rule", &rule), ("state", state_name)], count as f64);
        }
    }
    out.push(alerts);

    let mut sent =
        Family::new("notifications", "Alert notifications, by receiver and result.", Kind::Counter);
    let mut retries =
        Family::new("notification_retries", "Failed deliveries that were retried.", Kind::Counter);
    for (receiver, d) in o.delivery.read().map(|d| d.clone()).unwrap_or_default() {
        sent = sent
            .sample(&[("receiver", &receiver), ("result", "sent")], n(d.sent.load(Relaxed)))
            .sample(&[("receiver", &receiver), ("result", "failed")], n(d.failed.load(Relaxed)))
            .sample(&[("receiver", &receiver), ("result", "dropped")], n(d.dropped.load(Relaxed)));
        retries = retries.sample(&[("receiver", &receiver)], n(d.retries.load(Relaxed)));
    }
    out.extend([sent, retries]);

    if let Ok(Some(stored)) = o.stored_metrics.read().map(|s| s.clone()) {
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
