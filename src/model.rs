//! The domain: one network attempt to an LLM provider, as defined by
//! `shared/spec/attempt-record.md`. No I/O and no wire formats live here; the
//! decoders in `ingest` build these values and the `store` persists them.

use chrono::{DateTime, Utc};
use strum::{EnumString, IntoStaticStr, VariantNames};

/// Whether the attempt returned a usable result (spec section 2, `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, EnumString, IntoStaticStr, VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum Status {
    Ok,
    Error,
}

/// Which layer issued the attempt: SDK-internal retries, gateway retries,
/// application calls and queue redeliveries each count (spec section 1).
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

/// "Who owns the failure" (spec section 3).
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
/// cached part (the OpenTelemetry GenAI convention).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tokens {
    pub input: Option<i64>,
    pub output: Option<i64>,
    pub cached_input: Option<i64>,
}

/// One network attempt, validated and normalised: defaults applied, the
/// error class derived, the id present.
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
    pub served_provider: String,
    pub served_model: String,
    pub provider_request_id: Option<String>,
    pub duration_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub http_status: Option<i32>,
    pub error_class: Option<ErrorClass>,
    pub error_code: Option<String>,
    pub retry_after_ms: Option<f64>,
    pub tokens: Tokens,
    pub cost: Option<PicoUsd>,
    pub commit_state: CommitState,
    pub visible_output: Option<bool>,
    pub decision: Option<Decision>,
    pub circuit: Option<Circuit>,
    /// Fields the spec does not define, kept verbatim as a JSON object.
    pub extra: Option<String>,
}

/// Renders an enum the way the spec and the store spell it.
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
