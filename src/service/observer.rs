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

use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::deriver::Derivation;
use crate::alerts::evaluate::evaluate;
use crate::alerts::notify::Notifier;
use crate::alerts::{Tracker, Transition};
use crate::metrics::{Family, stored_families};
use crate::read::Reader;
use crate::store::Store;
use crate::telemetry::events::{AlertsEvaluated, LoopPanicked, RuleEvaluationFailed};
use attempt_core::alert_event::AlertEvent;
use attempt_core::alert_rules::RuleSet;

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
    pub(super) fn wait(&self, timeout: Duration) -> bool {
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
}

/// Runs one round of a background loop. A panic (a bug) is logged and
/// counted, and the loop goes on at its next round: a dead evaluator
/// would leave alerts silent while `/healthz` says ok.
pub(super) fn supervised(name: &str, round: impl FnOnce()) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(round)) {
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("(no message)");
        LoopPanicked { loop_name: name, message }.emit();
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
                supervised("metrics", || {
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
        let mut tracker = match reader.open_alerts() {
            Ok(open) => Tracker::resume(open),
            Err(err) => {
                tracing::error!(%err, "cannot read open alerts; starting with none");
                Tracker::default()
            }
        };
        loop {
            let began = Instant::now();
            supervised("alerts", || {
                let now = Utc::now();
                let results = evaluate(&reader, &rules.rules, now);
                for (rule, error) in
                    results.iter().filter_map(|r| r.outcome.as_ref().err().map(|e| (r.rule, e)))
                {
                    RuleEvaluationFailed { rule: &rules.rules[rule].name, error }.emit();
                }
                for (transition, event) in tracker.observe(&rules.rules, &results, now, rules.repeat_interval)
                {
                    tracing::info!(alert = %event.key, ?transition, summary = %event.summary);
                    if transition != Transition::Repeat
                        && let Err(err) = history.record_alert_event(&event)
                    {
                        tracing::error!(%err, alert = %event.key, "cannot record the alert event");
                    }
                    if let Some(rule) = rules.rules.iter().find(|r| r.name == event.rule) {
                        notifier.notify(
                            rule,
                            &event,
                            transition == Transition::Repeat,
                            rules.repeat_interval,
                        );
                    }
                }
                let active: Vec<(AlertEvent, bool)> =
                    tracker.active().map(|(e, firing)| (e.clone(), firing)).collect();
                let by_rule: Vec<(String, i64, i64)> = rules
                    .rules
                    .iter()
                    .map(|rule| {
                        let count = |firing: bool| {
                            active.iter().filter(|(e, f)| e.rule == rule.name && *f == firing).count() as i64
                        };
                        (rule.name.clone(), count(false), count(true))
                    })
                    .collect();
                if let Ok(mut slot) = observed.active_alerts.write() {
                    *slot = active;
                }
                AlertsEvaluated { seconds: began.elapsed().as_secs_f64(), active: &by_rule }.emit();
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
        let panics = || crate::telemetry::families().background_loop_panics.get();
        let before = panics();
        let mut rounds = 0;
        for round in 0..3 {
            supervised("test", || {
                rounds += 1;
                assert!(round != 1, "round 1 breaks");
            });
        }
        assert_eq!((rounds, panics() - before), (3, 1));
    }
}
