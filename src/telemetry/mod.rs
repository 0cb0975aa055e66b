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

/// Declares every family once: its field here is its name in `/metrics`
/// (under `PREFIX`; counters get `_total`), with its help.
macro_rules! families {
    ($( $name:ident: $metric:ty = $help:literal, )*) => {
        /// Every family an event counts in.
        pub(crate) struct Families {
            $( pub $name: $metric, )*
        }

        impl Families {
            fn new() -> Families {
                Families { $( $name: <$metric>::default(), )* }
            }

            fn register(&self, registry: &mut Registry) {
                $( registry.register(stringify!($name), $help, self.$name.clone()); )*
            }
        }
    };
}

families! {
    ingest_batches_committed: Counter = "Transactions the writer committed.",
    ingest_batches_failed: Counter =
        "Requests' batches the writer could not store (a full disk, a bug): each was answered retryable.",
    ingest_records: Family<Labels, Counter> = "Records received, by result.",
    ingest_requests: Family<Labels, Counter> = "Ingest requests, by receiver.",
    ingest_requests_refused: Counter =
        "Write requests refused for want of room (write slots, byte budget or writer queue): 503 or 413.",
    alert_evaluations: Counter = "Evaluations of the alert rules.",
    alert_evaluation_failures: Counter = "Rule evaluations that failed (the alert kept its state).",
    alert_evaluation_seconds: Gauge<f64, AtomicU64> = "Duration of the last evaluation of every rule.",
    alerts: Family<Labels, Gauge> = "Alerts pending or firing now, by rule.",
    background_loop_panics: Counter =
        "Rounds of the alert evaluator or metrics refresher that panicked (a bug: see the log); the loop went on.",
    derivation_rounds: Counter = "Derivation rounds committed.",
    derivation_round_failures: Counter =
        "Derivation rounds that failed on storage (or panicked) and were retried.",
    derivation_clamped_values: Counter =
        "Attempts whose duration, TTFT or retry-after (stored before the 30-day bound) was clamped to it.",
    lake_exports: Counter = "Exports to the attempt lake that completed (serve --lake).",
    lake_export_failures: Counter = "Exports to the attempt lake that failed (retried at the next check).",
    lake_exported_attempts: Counter = "Attempts written to the attempt lake.",
    lake_exported_bytes: Counter = "Bytes of Parquet written to the attempt lake.",
    bill_fetches: Counter = "Exports of a provider's bill fetched and imported (serve --reconcile-every).",
    bill_fetch_failures: Counter = "Fetches or imports of a provider's bill that failed (retried at the next run).",
    bill_drift_usd: Family<Labels, Gauge<f64, AtomicU64>> =
        "Ledger cost minus billed cost of each provider's last settled, compared day (USD; serve --reconcile-every).",
    bill_drift_ratio: Family<Labels, Gauge<f64, AtomicU64>> =
        "That drift over the billed cost (absent while the provider billed 0).",
    bill_drift_day_timestamp_seconds: Family<Labels, Gauge> = "The start of that day, Unix seconds.",
    notifications: Family<Labels, Counter> = "Alert notifications, by receiver and result.",
    notification_retries: Family<Labels, Counter> = "Failed deliveries that were retried.",
}

struct Telemetry {
    registry: Registry,
    families: Families,
}

static TELEMETRY: LazyLock<Telemetry> = LazyLock::new(|| {
    let families = Families::new();
    // Series that read 0 until something happens, so a rate over them
    // starts at the service's start.
    for receiver in events::Receiver::ALL {
        families.ingest_requests.get_or_create(&labels(&[("receiver", receiver.name())])).inc_by(0);
    }
    for result in ["accepted", "duplicate", "conflict", "rejected"] {
        families.ingest_records.get_or_create(&labels(&[("result", result)])).inc_by(0);
    }
    let mut registry = Registry::with_prefix(PREFIX);
    families.register(&mut registry);
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
