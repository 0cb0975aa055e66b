//! The service's two background loops, each on its own thread with its own
//! read connection, so neither a slow query nor a down receiver touches
//! ingest:
//!
//! - the metrics refresher recomputes the stored-data half of `/metrics`
//!   (`queries/metrics.sql`) when a derivation round has committed since
//!   the last time, at most once per refresh interval: a scrape never runs a query;
//! - the alert evaluator runs every rule each evaluation interval, records
//!   firing / resolved transitions in the history and hands notifications
//!   to the notifier's queues.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::deriver::Derivation;
use crate::alerts::evaluate::evaluate;
use crate::alerts::notify::{DeliveryStats, Notifier};
use crate::alerts::{AlertEvent, RuleSet, Tracker, Transition};
use crate::metrics::{Family, stored_families};
use crate::read::Reader;
use crate::store::Store;

/// A stop flag the loops sleep on, so shutdown does not wait out an interval.
#[derive(Default)]
pub struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Stop {
    pub fn stop(&self) {
        if let Ok(mut stopped) = self.stopped.lock() {
            *stopped = true;
        }
        self.wake.notify_all();
    }

    /// Sleeps up to `timeout`; true once stopped.
    fn wait(&self, timeout: Duration) -> bool {
        let Ok(guard) = self.stopped.lock() else { return true };
        match self.wake.wait_timeout_while(guard, timeout, |stopped| !*stopped) {
            Ok((stopped, _)) => *stopped,
            Err(_) => true,
        }
    }
}

/// The stored-data families as last computed.
#[derive(Debug, Clone)]
pub struct StoredMetrics {
    pub families: Vec<Family>,
    pub computed_at: Instant,
    pub compute_seconds: f64,
}

/// What the loops publish for the HTTP handlers.
#[derive(Default)]
pub struct Observed {
    pub stored_metrics: RwLock<Option<Arc<StoredMetrics>>>,
    /// Alerts pending (false) or firing (true) after the last evaluation.
    pub active_alerts: RwLock<Vec<(AlertEvent, bool)>>,
    /// Rule names, for per-rule gauges that read 0 when nothing is active.
    pub rule_names: RwLock<Vec<String>>,
    pub evaluations: AtomicU64,
    pub evaluation_failures: AtomicU64,
    /// f64 bits of the last evaluation's duration.
    pub last_evaluation_seconds: AtomicU64,
    pub delivery: RwLock<Vec<(String, Arc<DeliveryStats>)>>,
    /// Rounds of a loop that panicked; the loop went on at its next round.
    pub loop_panics: AtomicU64,
}

/// Runs one round of a background loop. A panic (a bug) is logged and
/// counted, and the loop goes on at its next round: a dead evaluator
/// would leave alerts silent while `/healthz` says ok.
fn supervised(name: &str, observed: &Observed, round: impl FnOnce()) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(round)) {
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        observed.loop_panics.fetch_add(1, Ordering::Relaxed);
        tracing::error!(loop_name = name, panic = message, "a background loop round panicked; it goes on");
    }
}

pub fn spawn_metrics_refresher(
    reader: Reader,
    derivation: Arc<Derivation>,
    every: Duration,
    observed: Arc<Observed>,
    stop: Arc<Stop>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("metrics".into()).spawn(move || {
        let mut computed_for: Option<u64> = None;
        loop {
            // The stored-data families read derived tables: they change
            // with each derivation round.
            let batches = derivation.rounds.load(Ordering::Acquire);
            if computed_for != Some(batches) {
                supervised("metrics", &observed, || {
                    let began = Instant::now();
                    match reader.metric_rows() {
                        Ok(rows) => {
                            let snapshot = StoredMetrics {
                                families: stored_families(&rows),
                                computed_at: Instant::now(),
                                compute_seconds: began.elapsed().as_secs_f64(),
                            };
                            if let Ok(mut slot) = observed.stored_metrics.write() {
                                *slot = Some(Arc::new(snapshot));
                            }
                            computed_for = Some(batches);
                        }
                        Err(err) => tracing::error!(%err, "cannot compute the stored metrics"),
                    }
                });
            }
            if stop.wait(every) {
                return;
            }
        }
    })
}

pub fn spawn_alert_evaluator(
    reader: Reader,
    history: Store,
    rules: RuleSet,
    observed: Arc<Observed>,
    stop: Arc<Stop>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name("alerts".into()).spawn(move || {
        let notifier = Notifier::start(&rules.receivers);
        if let Ok(mut delivery) = observed.delivery.write() {
            *delivery = notifier.stats();
        }
        if let Ok(mut names) = observed.rule_names.write() {
            *names = rules.rules.iter().map(|r| r.name.clone()).collect();
        }
        let mut tracker = match reader.open_alerts() {
            Ok(open) => Tracker::resume(open),
            Err(err) => {
                tracing::error!(%err, "cannot read open alerts; starting with none");
                Tracker::default()
            }
        };
        loop {
            let began = Instant::now();
            supervised("alerts", &observed, || {
            let now = Utc::now();
            let results = evaluate(&reader, &rules.rules, now);
            for failed in results.iter().filter_map(|r| r.outcome.as_ref().err().map(|e| (r.rule, e))) {
                observed.evaluation_failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(rule = %rules.rules[failed.0].name, error = %failed.1, "rule evaluation failed");
            }
            for (transition, event) in tracker.observe(&rules.rules, &results, now, rules.repeat_interval) {
                tracing::info!(alert = %event.key, ?transition, summary = %event.summary);
                if transition != Transition::Repeat
                    && let Err(err) = history.record_alert_event(&event)
                {
                    tracing::error!(%err, alert = %event.key, "cannot record the alert event");
                }
                if let Some(rule) = rules.rules.iter().find(|r| r.name == event.rule) {
                    notifier.notify(rule, &event, transition == Transition::Repeat, rules.repeat_interval);
                }
            }
            if let Ok(mut active) = observed.active_alerts.write() {
                *active = tracker.active().map(|(e, firing)| (e.clone(), firing)).collect();
            }
            observed.evaluations.fetch_add(1, Ordering::Relaxed);
            observed.last_evaluation_seconds.store(began.elapsed().as_secs_f64().to_bits(), Ordering::Relaxed);
            });
            if stop.wait(rules.interval.saturating_sub(began.elapsed())) {
                return;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_round_is_counted_and_the_next_round_runs() {
        let observed = Observed::default();
        let mut rounds = 0;
        for round in 0..3 {
            supervised("test", &observed, || {
                rounds += 1;
                assert!(round != 1, "round 1 breaks");
            });
        }
        assert_eq!((rounds, observed.loop_panics.load(Ordering::Relaxed)), (3, 1));
    }
}
