//! Breaker state-change records (docs/record-format.md, "Breaker
//! timelines"): a JSONL line of `"type": "circuit"`, or an OTLP span event
//! named `circuit.state_change`. Both end in `build`, so the rules and the
//! messages are one.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use strum::VariantNames;

use crate::model::{Circuit, CircuitChange};

/// The `type` of a JSONL state-change record, and the name of its OTLP event.
pub const RECORD_TYPE: &str = "circuit";
pub const EVENT_NAME: &str = "circuit.state_change";

/// The longest name a change may carry (provider, model, group, workflow,
/// reason): they become label values and report keys.
const MAX_NAME_BYTES: usize = 256;

/// A change's fields as the wire gave them, before the rules.
#[derive(Debug, Default)]
pub struct CircuitFields<'a> {
    pub at: Option<DateTime<Utc>>,
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
    pub route_group: Option<&'a str>,
    pub workflow: Option<&'a str>,
    pub state: Option<&'a str>,
    pub reason: Option<&'a str>,
}

/// Whether a JSON line is a state-change record rather than an attempt: it
/// says `"type": "circuit"`. Only lines that mention a `type` key are parsed
/// for it, so attempt lines pay a substring search.
pub fn is_circuit_line(line: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Tag<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    line.contains("\"type\"")
        && serde_json::from_str::<Tag>(line).is_ok_and(|tag| tag.kind.as_deref() == Some(RECORD_TYPE))
}

/// One JSONL state-change record.
pub fn decode_line(line: &str) -> Result<CircuitChange, String> {
    let value: Value = serde_json::from_str(line).map_err(|err| format!("not valid JSON: {err}"))?;
    let Value::Object(map) = value else { return Err("expected a JSON object".to_string()) };
    decode_map(&map)
}

fn decode_map(map: &Map<String, Value>) -> Result<CircuitChange, String> {
    let at = match map.get("at") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(
            DateTime::parse_from_rfc3339(s)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|err| format!("circuit record: at: `{s}` is not an RFC 3339 timestamp ({err})"))?,
        ),
        Some(Value::Number(n)) => Some(
            n.as_i64()
                .and_then(DateTime::from_timestamp_millis)
                .ok_or_else(|| format!("circuit record: at: {n} is not integer Unix milliseconds"))?,
        ),
        Some(other) => {
            return Err(format!(
                "circuit record: at: expected an RFC 3339 string or integer Unix milliseconds, got {}",
                kind(other)
            ));
        }
    };
    build(CircuitFields::read(at, |key| text(map, key))?)
}

fn text<'m>(map: &'m Map<String, Value>, key: &str) -> Result<Option<&'m str>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(format!("circuit record: {key}: expected a string, got {}", kind(other))),
    }
}

impl<'a> CircuitFields<'a> {
    /// The fields by name from `text` (a record's keys, an event's
    /// `attempt.*` attributes), each a string or absent.
    pub fn read(
        at: Option<DateTime<Utc>>,
        text: impl Fn(&str) -> Result<Option<&'a str>, String>,
    ) -> Result<Self, String> {
        Ok(CircuitFields {
            at,
            provider: text("provider")?,
            model: text("model")?,
            route_group: text("route_group")?,
            workflow: text("workflow")?,
            state: text("state")?,
            reason: text("reason")?,
        })
    }
}

/// The rules every wire's change passes: `at`, `provider` and `state` are
/// required, and `model` or `route_group` (the route); names are non-empty
/// and bounded.
pub fn build(fields: CircuitFields) -> Result<CircuitChange, String> {
    let at = fields.at.ok_or("circuit record: at is required (when the breaker changed state)")?;
    let named = |key: &str, value: Option<&str>| -> Result<Option<String>, String> {
        match value {
            None => Ok(None),
            Some("") => Err(format!("circuit record: {key} is empty")),
            Some(v) if v.len() > MAX_NAME_BYTES => {
                Err(format!("circuit record: {key} is {} bytes, over {MAX_NAME_BYTES}", v.len()))
            }
            Some(v) => Ok(Some(v.to_string())),
        }
    };
    let provider = named("provider", fields.provider)?.ok_or("circuit record: provider is required")?;
    let model = named("model", fields.model)?;
    let route_group = named("route_group", fields.route_group)?;
    if model.is_none() && route_group.is_none() {
        return Err(
            "circuit record: model or route_group is required (the route whose breaker changed)".into()
        );
    }
    let state = fields.state.ok_or("circuit record: state is required")?;
    let state = Circuit::from_str(state).map_err(|_| {
        format!("circuit record: state: `{state}` is not one of {}", Circuit::VARIANTS.join(", "))
    })?;
    Ok(CircuitChange {
        at,
        provider,
        model,
        route_group,
        workflow: named("workflow", fields.workflow)?,
        state,
        reason: named("reason", fields.reason)?,
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENED: &str = r#"{"type":"circuit","at":"2026-01-01T02:00:00Z","provider":"openai","model":"gpt-4o","state":"open","reason":"5 consecutive 529s"}"#;

    #[test]
    fn a_state_change_line_is_told_from_an_attempt() {
        assert!(is_circuit_line(OPENED));
        assert!(is_circuit_line(r#"{"state":"open", "type" : "circuit"}"#));
        // An attempt's own `type` in its extra fields, or `circuit` as a
        // value, is not a state change.
        assert!(!is_circuit_line(r#"{"workflow_id":"w","type":"chat","circuit":"open"}"#));
        assert!(!is_circuit_line(r#"{"workflow_id":"w","circuit":"open"}"#));
        assert!(!is_circuit_line(r#"{"type":"circuit""#), "not JSON: left to the attempt decoder's message");
    }

    #[test]
    fn a_change_keeps_its_route_scope_and_reason() {
        let change = decode_line(OPENED).unwrap();
        assert_eq!(change.at.to_rfc3339(), "2026-01-01T02:00:00+00:00");
        assert_eq!((change.provider.as_str(), change.model.as_deref()), ("openai", Some("gpt-4o")));
        assert_eq!((change.route_group, change.workflow), (None, None));
        assert_eq!(change.state, Circuit::Open);
        assert_eq!(change.reason.as_deref(), Some("5 consecutive 529s"));
        let millis = decode_line(
            r#"{"type":"circuit","at":1767232800000,"provider":"p","route_group":"g","workflow":"nightly","state":"half_open"}"#,
        )
        .unwrap();
        assert_eq!(millis.at, change.at);
        assert_eq!((millis.route_group.as_deref(), millis.workflow.as_deref()), (Some("g"), Some("nightly")));
        assert_eq!(millis.state, Circuit::HalfOpen);
    }

    #[test]
    fn each_wrong_field_is_named() {
        let cases = [
            (r#"{"type":"circuit","provider":"p","model":"m","state":"open"}"#, "at is required"),
            (
                r#"{"type":"circuit","at":"yesterday","provider":"p","model":"m","state":"open"}"#,
                "at: `yesterday`",
            ),
            (r#"{"type":"circuit","at":1.5,"provider":"p","model":"m","state":"open"}"#, "at: 1.5"),
            (
                r#"{"type":"circuit","at":"2026-01-01T00:00:00Z","model":"m","state":"open"}"#,
                "provider is required",
            ),
            (
                r#"{"type":"circuit","at":"2026-01-01T00:00:00Z","provider":"p","state":"open"}"#,
                "model or route_group",
            ),
            (
                r#"{"type":"circuit","at":"2026-01-01T00:00:00Z","provider":"p","model":"m"}"#,
                "state is required",
            ),
            (
                r#"{"type":"circuit","at":"2026-01-01T00:00:00Z","provider":"p","model":"m","state":"tripped"}"#,
                "state: `tripped` is not one of closed, open, half_open",
            ),
            (
                r#"{"type":"circuit","at":"2026-01-01T00:00:00Z","provider":"p","model":5,"state":"open"}"#,
                "model: expected a string, got a number",
            ),
            (
                r#"{"type":"circuit","at":"2026-01-01T00:00:00Z","provider":"","model":"m","state":"open"}"#,
                "provider is empty",
            ),
        ];
        for (line, expected) in cases {
            let err = decode_line(line).unwrap_err();
            assert!(err.contains(expected), "{line}: {err}");
        }
        let long = format!(
            r#"{{"type":"circuit","at":"2026-01-01T00:00:00Z","provider":"p","model":"m","state":"open","reason":"{}"}}"#,
            "x".repeat(MAX_NAME_BYTES + 1)
        );
        assert!(decode_line(&long).unwrap_err().contains("reason is 257 bytes"));
    }

    #[test]
    fn the_id_is_the_content() {
        let a = decode_line(OPENED).unwrap();
        let same = decode_line(&OPENED.replace("02:00:00Z", "03:00:00+01:00")).unwrap();
        assert_eq!(a.id(), same.id(), "one instant, two spellings");
        let scoped = CircuitChange { workflow: Some(String::new()), ..a.clone() };
        assert_ne!(a.id(), scoped.id(), "absent and empty differ");
        assert_ne!(a.id(), CircuitChange { state: Circuit::HalfOpen, ..a.clone() }.id());
    }
}
