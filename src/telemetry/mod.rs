//! The service's own telemetry, in the manner of Vector's internal events:
//! each notable thing the service does is an event (`events.rs`) whose
//! `emit` logs it and counts it here, in one registry. `/metrics` writes
//! this registry as it stands, then the gauges read at scrape time and the
//! stored-data families (`metrics::exposition`).
//!
//! The registry is the process's: a service runs once per process, and an
//! event can be emitted from any thread without a handle passed down to it.
//! Its label sets are bounded: receivers (3), results (3), the alert
//! receivers and rules of the rules file, and nothing a client sends.

pub mod events;

use std::sync::LazyLock;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Prefix of every family: `attempt_ledger_attempts_total`, ...
pub const PREFIX: &str = "attempt_ledger";

type Labels = Vec<(&'static str, String)>;

/// Every family an event counts in.
pub(crate) struct Families {
    pub ingest_requests: Family<Labels, Counter>,
    pub ingest_records: Family<Labels, Counter>,
    pub ingest_batches_committed: Counter,
    pub ingest_requests_refused: Counter,
    pub alert_evaluations: Counter,
    pub alert_evaluation_failures: Counter,
    pub alert_evaluation_seconds: Gauge<f64, AtomicU64>,
    pub alerts: Family<Labels, Gauge>,
    pub background_loop_panics: Counter,
    pub derivation_rounds: Counter,
    pub derivation_round_failures: Counter,
    pub derivation_clamped_values: Counter,
    pub notifications: Family<Labels, Counter>,
    pub notification_retries: Family<Labels, Counter>,
}

struct Telemetry {
    registry: Registry,
    families: Families,
}

static TELEMETRY: LazyLock<Telemetry> = LazyLock::new(|| {
    let families = Families {
        ingest_requests: Family::default(),
        ingest_records: Family::default(),
        ingest_batches_committed: Counter::default(),
        ingest_requests_refused: Counter::default(),
        alert_evaluations: Counter::default(),
        alert_evaluation_failures: Counter::default(),
        alert_evaluation_seconds: Gauge::default(),
        alerts: Family::default(),
        background_loop_panics: Counter::default(),
        derivation_rounds: Counter::default(),
        derivation_round_failures: Counter::default(),
        derivation_clamped_values: Counter::default(),
        notifications: Family::default(),
        notification_retries: Family::default(),
    };
    // Series that read 0 until something happens, so a rate over them
    // starts at the service's start.
    for receiver in events::Receiver::ALL {
        families.ingest_requests.get_or_create(&labels(&[("receiver", receiver.name())])).inc_by(0);
    }
    for result in ["accepted", "duplicate", "rejected"] {
        families.ingest_records.get_or_create(&labels(&[("result", result)])).inc_by(0);
    }
    let mut registry = Registry::with_prefix(PREFIX);
    let f = &families;
    registry.register(
        "ingest_batches_committed",
        "Transactions the writer committed.",
        f.ingest_batches_committed.clone(),
    );
    registry.register("ingest_records", "Records received, by result.", f.ingest_records.clone());
    registry.register("ingest_requests", "Ingest requests, by receiver.", f.ingest_requests.clone());
    registry.register(
        "ingest_requests_refused",
        "Requests refused because the writer queue was full.",
        f.ingest_requests_refused.clone(),
    );
    registry.register("alert_evaluations", "Evaluations of the alert rules.", f.alert_evaluations.clone());
    registry.register(
        "alert_evaluation_failures",
        "Rule evaluations that failed (the alert kept its state).",
        f.alert_evaluation_failures.clone(),
    );
    registry.register(
        "alert_evaluation_seconds",
        "Duration of the last evaluation of every rule.",
        f.alert_evaluation_seconds.clone(),
    );
    registry.register("alerts", "Alerts pending or firing now, by rule.", f.alerts.clone());
    registry.register(
        "background_loop_panics",
        "Rounds of the alert evaluator or metrics refresher that panicked (a bug: see the log); the loop went on.",
        f.background_loop_panics.clone(),
    );
    registry.register("derivation_rounds", "Derivation rounds committed.", f.derivation_rounds.clone());
    registry.register(
        "derivation_round_failures",
        "Derivation rounds that failed on storage (or panicked) and were retried.",
        f.derivation_round_failures.clone(),
    );
    registry.register(
        "derivation_clamped_values",
        "Attempts whose duration, TTFT or retry-after (stored before the 30-day bound) was clamped to it.",
        f.derivation_clamped_values.clone(),
    );
    registry.register(
        "notifications",
        "Alert notifications, by receiver and result.",
        f.notifications.clone(),
    );
    registry.register(
        "notification_retries",
        "Failed deliveries that were retried.",
        f.notification_retries.clone(),
    );
    Telemetry { registry, families }
});

pub(crate) fn families() -> &'static Families {
    &TELEMETRY.families
}

/// The registry every event counts in.
pub fn registry() -> &'static Registry {
    &TELEMETRY.registry
}

/// A label set; values escaped for the text format, which
/// `prometheus-client` writes as given (a receiver or rule name is the
/// user's).
pub(crate) fn labels(pairs: &[(&'static str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (*k, escape(v))).collect()
}

/// A label value escaped for the OpenMetrics text format.
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}
