//! The domain: one network attempt to an LLM provider, as defined in
//! `docs/record-format.md`. No I/O and no wire formats live here; the
//! decoders in `ingest` build these values and the `store` persists them.

use chrono::{DateTime, Utc};
use strum::{EnumString, IntoStaticStr, VariantNames};

/// Whether the attempt returned a usable result (docs/record-format.md, "Fields").
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum Status {
    Ok,
    Error,
}

/// Which layer issued the attempt: SDK-internal retries, gateway retries,
/// application calls and queue redeliveries each count (docs/record-format.md, "Words").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum Layer {
    Sdk,
    Gateway,
    #[default]
    App,
    Queue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum Route {
    Primary,
    Fallback,
}

/// "Who owns the failure" (docs/record-format.md, "Error classes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum ErrorClass {
    Transient,
    RateLimit,
    Quota,
    Request,
    Auth,
    Policy,
    Timeout,
    StreamInterrupted,
    Truncated,
    InvalidOutput,
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum CommitState {
    #[default]
    None,
    Committed,
    Unknown,
}

/// What the caller did after this attempt. `retry` and `fallback` mean the
/// answer (if any) was not delivered, which is why they matter to outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum Decision {
    Retry,
    Fallback,
    Queue,
    Degrade,
    FailClosed,
    Return,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum Circuit {
    Closed,
    Open,
    HalfOpen,
}

/// One breaker state change a gateway or caller reported (docs/record-format.md,
/// "Breaker timelines"): from `at`, the breaker of one route (`route_group`
/// when given, else provider and model) is in `state`, for the callers named
/// `workflow` (all callers when `None`), until the route's next change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitChange {
    pub at: DateTime<Utc>,
    pub provider: String,
    pub model: Option<String>,
    pub route_group: Option<String>,
    pub workflow: Option<String>,
    pub state: Circuit,
    pub reason: Option<String>,
}

impl CircuitChange {
    /// What identifies a change, so a redelivered export is stored once:
    /// a hash of every field, `at` as an instant, length-prefixed.
    pub fn id(&self) -> String {
        use sha2::{Digest, Sha256};
        let instant =
            self.at.timestamp_nanos_opt().map(|n| n.to_string()).unwrap_or_else(|| self.at.to_rfc3339());
        let mut hasher = Sha256::new();
        let parts = [
            Some(instant.as_str()),
            Some(self.provider.as_str()),
            self.model.as_deref(),
            self.route_group.as_deref(),
            self.workflow.as_deref(),
            Some(name(self.state)),
            self.reason.as_deref(),
        ];
        for part in parts {
            match part {
                // Absent and empty differ: a marker no length can be.
                None => hasher.update(u64::MAX.to_le_bytes()),
                Some(part) => {
                    hasher.update((part.len() as u64).to_le_bytes());
                    hasher.update(part.as_bytes());
                }
            }
        }
        hasher.finalize()[..16].iter().map(|byte| format!("{byte:02x}")).collect()
    }
}

/// Upper bounds (seconds) of the latency and time-to-first-token histograms the
/// store keeps and `/metrics` exposes:
/// from a cached short answer to a long generation that hits a deadline.
pub const LATENCY_BUCKETS: [f64; 13] =
    [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0];

/// Money is kept in integer pico-dollars (1e-12 USD) so that sums are exact
/// and independent of the order rows are added in: a report must not change
/// in its last digit when the same records arrive shuffled. One token of the
/// cheapest cached input priced today (fractions of a cent per million) is
/// still a whole number of pico-dollars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct PicoUsd(pub i64);

impl PicoUsd {
    pub const PER_USD: f64 = 1e12;

    /// Converts a dollar amount; `None` for a value that is negative, not
    /// finite, or too large to be a single call's cost.
    pub fn from_usd(usd: f64) -> Option<Self> {
        let pico = (usd * Self::PER_USD).round();
        (usd.is_finite() && usd >= 0.0 && pico < i64::MAX as f64).then_some(Self(pico as i64))
    }

    pub fn to_usd(self) -> f64 {
        self.0 as f64 / Self::PER_USD
    }
}

/// Token counts as billed or reported for one attempt. `input` includes the
/// cached part and the cache-written part (the OpenTelemetry GenAI
/// convention).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tokens {
    pub input: Option<i64>,
    pub output: Option<i64>,
    pub cached_input: Option<i64>,
    pub cache_write_input: Option<i64>,
    /// The part of `output` the model spent reasoning (billed as output
    /// unless the price table prices it apart).
    pub reasoning_output: Option<i64>,
    /// The part of `cache_write_input` written to a one-hour cache (the rest
    /// went to the five-minute cache).
    pub cache_write_1h_input: Option<i64>,
}

impl Tokens {
    pub fn is_empty(&self) -> bool {
        self.input.is_none()
            && self.output.is_none()
            && self.cached_input.is_none()
            && self.cache_write_input.is_none()
            && self.reasoning_output.is_none()
            && self.cache_write_1h_input.is_none()
    }
}

/// One network attempt, validated and normalised: defaults applied, the
/// error class derived, the id present.
///
/// `provider` and `served_provider` are the spellings the emitter sent
/// (trimmed): the store maps them to canonical names through the alias
/// table when it writes them, and keeps these beside the canonical ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub attempt_id: String,
    pub workflow_id: String,
    pub started_at: DateTime<Utc>,
    pub provider: String,
    pub model: String,
    pub status: Status,
    pub attempt: Option<i64>,
    pub workflow: Option<String>,
    pub layer: Layer,
    pub route: Option<Route>,
    /// The logical model a gateway balanced over deployments; routes compare
    /// by it when present.
    pub route_group: Option<String>,
    pub served_provider: String,
    pub served_model: String,
    pub provider_request_id: Option<String>,
    /// The provider's project, workspace or API key the attempt was billed
    /// to: a reconciliation cell's account.
    pub billing_account: Option<String>,
    /// The provider's service tier (`default`, `flex`, `priority`, `batch`,
    /// ...), as the provider spells it.
    pub service_tier: Option<String>,
    /// Sent through the provider's batch API (billed at its batch price).
    pub batch: Option<bool>,
    /// Server-side searches or grounding queries billed per request.
    pub web_search_requests: Option<i64>,
    /// The rate-limit windows the provider stated on this attempt's response.
    pub headroom: crate::ratelimit::Headroom,
    pub duration_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub http_status: Option<i32>,
    pub error_class: Option<ErrorClass>,
    pub error_code: Option<String>,
    pub retry_after_ms: Option<f64>,
    pub tokens: Tokens,
    pub cost: Option<PicoUsd>,
    /// The currency of a cost the emitter stated in other than USD: never
    /// converted, so the attempt's cost is unknown.
    pub cost_currency: Option<String>,
    pub commit_state: CommitState,
    pub visible_output: Option<bool>,
    pub decision: Option<Decision>,
    pub circuit: Option<Circuit>,
    /// Fields the record format does not define, kept verbatim as a JSON object.
    pub extra: Option<String>,
    /// The OTLP trace this attempt was derived from (its attempts are
    /// re-derived when the trace gets new spans); `None` for records.
    pub source_trace: Option<String>,
    /// `compute_fingerprint`, computed once when the attempt is built (on
    /// the decoding thread, not the writer's).
    pub fingerprint: u64,
}

impl Attempt {
    /// A hash of the mapped fields: two deliveries of one `attempt_id` with
    /// different fingerprints are a conflict. `extra`, `source_trace` and
    /// arrival time are not part of it; provider spellings are compared
    /// lower-cased. Stable across versions (it is stored): SHA-256 over
    /// length-prefixed fields, the first 8 bytes.
    pub fn compute_fingerprint(&self) -> u64 {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        let mut put = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        let none: &[u8] = b"";
        let opt_i = |v: Option<i64>| v.map(i64::to_le_bytes);
        let opt_f = |v: Option<f64>| v.map(|f| f.to_bits().to_le_bytes());
        put(self.workflow_id.as_bytes());
        put(&self.started_at.timestamp_micros().to_le_bytes());
        put(self.provider.to_lowercase().as_bytes());
        put(self.model.as_bytes());
        put(name(self.status).as_bytes());
        put(opt_i(self.attempt).as_ref().map_or(none, |b| b.as_slice()));
        put(self.workflow.as_deref().unwrap_or_default().as_bytes());
        put(name(self.layer).as_bytes());
        put(self.route.map_or("", name).as_bytes());
        put(self.route_group.as_deref().unwrap_or_default().as_bytes());
        put(self.served_provider.to_lowercase().as_bytes());
        put(self.served_model.as_bytes());
        put(self.provider_request_id.as_deref().unwrap_or_default().as_bytes());
        put(opt_f(self.duration_ms).as_ref().map_or(none, |b| b.as_slice()));
        put(opt_f(self.ttft_ms).as_ref().map_or(none, |b| b.as_slice()));
        put(opt_i(self.http_status.map(i64::from)).as_ref().map_or(none, |b| b.as_slice()));
        put(self.error_class.map_or("", name).as_bytes());
        put(self.error_code.as_deref().unwrap_or_default().as_bytes());
        put(opt_f(self.retry_after_ms).as_ref().map_or(none, |b| b.as_slice()));
        put(opt_i(self.tokens.input).as_ref().map_or(none, |b| b.as_slice()));
        put(opt_i(self.tokens.output).as_ref().map_or(none, |b| b.as_slice()));
        put(opt_i(self.tokens.cached_input).as_ref().map_or(none, |b| b.as_slice()));
        put(opt_i(self.tokens.cache_write_input).as_ref().map_or(none, |b| b.as_slice()));
        put(opt_i(self.cost.map(|c| c.0)).as_ref().map_or(none, |b| b.as_slice()));
        put(name(self.commit_state).as_bytes());
        put(self.visible_output.map_or("", |v| if v { "true" } else { "false" }).as_bytes());
        put(self.decision.map_or("", name).as_bytes());
        put(self.circuit.map_or("", name).as_bytes());
        // Fields added later hash only when present, so that every attempt
        // stored before them keeps its fingerprint.
        let added: [(&str, &Option<String>); 3] = [
            ("billing_account", &self.billing_account),
            ("service_tier", &self.service_tier),
            ("cost_currency", &self.cost_currency),
        ];
        for (tag, value) in added {
            if let Some(value) = value {
                put(tag.as_bytes());
                put(value.as_bytes());
            }
        }
        let added_counts = [
            ("reasoning_output_tokens", self.tokens.reasoning_output),
            ("cache_write_1h_input_tokens", self.tokens.cache_write_1h_input),
            ("web_search_requests", self.web_search_requests),
        ];
        for (tag, value) in added_counts {
            if let Some(value) = value {
                put(tag.as_bytes());
                put(&value.to_le_bytes());
            }
        }
        if let Some(batch) = self.batch {
            put(b"batch");
            put(if batch { b"true" } else { b"false" });
        }
        for (tag, value) in self.headroom.fields() {
            if let Some(value) = value {
                put(tag.as_bytes());
                put(&value.to_le_bytes());
            }
        }
        let digest = hasher.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(first)
    }
}

/// What a stored OTLP span is to the derivation of its trace's attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum SpanKind {
    /// An inference call (chat, completion, embeddings, ...).
    Model,
    /// An HTTP client span: one network attempt when its parent is a model
    /// span (the SDK's own retries).
    Http,
    /// Any other span of a trace that has model spans: kept for its parent
    /// link only, so a model span under a model span is recognised as
    /// wrapped however deep.
    Link,
    /// A GenAI event about a span (`gen_ai.client.operation.exception`, an
    /// OTLP log record): its parent is the span it describes, whose attempt
    /// it completes whenever either arrives (docs/record-format.md, "OTLP
    /// logs"). Never part of the trace's parentage.
    Event,
}

/// A received OTLP span as kept for derivation: ids in hex, and for model
/// and HTTP spans the span itself (protobuf, with only the attributes the
/// mapping reads: never message text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanRecord {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub kind: SpanKind,
    pub span: Option<Vec<u8>>,
    /// What grouping the trace's spans into calls reads of a model or HTTP
    /// span; default for the others.
    pub facts: SpanFacts,
}

impl SpanRecord {
    /// The bytes this record takes in memory, its heap allocations at their
    /// capacity included (not the allocator's own overhead).
    pub fn held_bytes(&self) -> usize {
        let text = |s: &String| s.capacity();
        let maybe = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
        std::mem::size_of::<Self>()
            + text(&self.trace_id)
            + text(&self.span_id)
            + maybe(&self.parent_span_id)
            + self.span.as_ref().map_or(0, Vec::capacity)
            + text(&self.facts.name)
            + maybe(&self.facts.host)
            + maybe(&self.facts.call_id)
            + maybe(&self.facts.model)
    }
}

/// What grouping a trace's spans into calls reads of a model or HTTP span
/// besides its parent link (docs/record-format.md, "Attempts found by the
/// call"): its interval, host, call id, requested model and resend count.
/// Stored beside the span, so a trace's shape is read without decoding a
/// single span.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpanFacts {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default)]
    pub start_ns: u64,
    #[serde(default)]
    pub end_ns: u64,
    /// `server.address`, lower-cased.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The provider's id of the call (`gen_ai.response.id`, a provider
    /// request id): two model spans with the same one describe one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `http.request.resend_count` of a model span: the requests its SDK
    /// sent again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resends: u32,
    /// The call's token counts, when the span states them: two model spans
    /// of one call agree on them, two calls seldom do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How a workflow ended (docs/record-format.md, "Outcomes"), as
/// `queries/facts.sql` derives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum Outcome {
    PrimarySuccess,
    RetryRecovery,
    FallbackRecovery,
    Degraded,
    Queued,
    InFlight,
    FailClosed,
}

/// Renders an enum the way the record format and the store spell it.
pub fn name<T: Into<&'static str>>(value: T) -> &'static str {
    value.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn enums_use_the_spec_spelling() {
        assert_eq!(name(ErrorClass::StreamInterrupted), "stream_interrupted");
        assert_eq!(name(Decision::FailClosed), "fail_closed");
        assert_eq!(Circuit::from_str("half_open").unwrap(), Circuit::HalfOpen);
        assert!(Layer::from_str("App").is_err(), "spellings are exact");
    }

    #[test]
    fn pico_usd_round_trips_typical_costs() {
        for usd in [0.0, 0.1, 0.000_000_037_5, 12.345_678_901_2] {
            let pico = PicoUsd::from_usd(usd).unwrap();
            assert!((pico.to_usd() - usd).abs() < 1e-12, "{usd}");
        }
        assert_eq!(PicoUsd::from_usd(0.1), Some(PicoUsd(100_000_000_000)));
        assert_eq!(PicoUsd::from_usd(-0.01), None);
        assert_eq!(PicoUsd::from_usd(f64::NAN), None);
        assert_eq!(PicoUsd::from_usd(1e30), None);
    }
}
