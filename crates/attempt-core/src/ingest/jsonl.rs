//! JSONL attempt records (docs/record-format.md, "Fields") to domain `Attempt`s.
//!
//! Decoding never fails a whole input: each line is either an attempt or a
//! rejection naming the field and what was wrong with it.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::{AttemptFields, Built, Decoded, build_attempt};
use crate::model::{PicoUsd, Status, Tokens};

/// Decodes a request body of attempt records: JSONL, or a JSON array of
/// records (which HTTP clients often send) when it starts with `[`.
pub fn decode_body(body: &str) -> Decoded {
    let trimmed = body.trim_start();
    if trimmed.starts_with('[') {
        return decode_array(trimmed);
    }
    decode_lines(body, 1)
}

/// Decodes JSONL attempt records. Blank lines are skipped; `first_line`
/// numbers the lines of a chunk that started mid-file.
pub fn decode_lines(body: &str, first_line: u64) -> Decoded {
    super::decode_json_lines(body, first_line, |value| decode_value(value).map(|built| vec![built]))
}

/// A JSON array body: "line" in a rejection is the 1-based element index.
fn decode_array(body: &str) -> Decoded {
    let mut decoded = Decoded::default();
    match serde_json::from_str::<Vec<Value>>(body) {
        Ok(elements) => {
            for (index, element) in elements.into_iter().enumerate() {
                decoded.push_built(index as u64 + 1, decode_value(element));
            }
        }
        Err(err) => decoded.reject(err.line() as u64, format!("not a JSON array of records: {err}")),
    }
    decoded
}

/// Decodes one non-blank line (warnings dropped: for tests and tools).
pub fn decode_line(line: &str) -> Result<crate::model::Attempt, String> {
    decode_line_built(line).map(|built| built.attempt)
}

fn decode_line_built(line: &str) -> Result<Built, String> {
    let value: Value = serde_json::from_str(line).map_err(|err| format!("not valid JSON: {err}"))?;
    decode_value(value)
}

/// One parsed attempt record.
pub fn decode_value(value: Value) -> Result<Built, String> {
    let Value::Object(map) = value else {
        return Err(format!("expected a JSON object, got {}", kind(&value)));
    };
    let mut record = Record { map, warnings: Vec::new() };
    let http_status = record.http_status()?;
    let mut fields = AttemptFields {
        workflow_id: record.required_string("workflow_id")?,
        started_at: record.required("started_at", parse_started_at)?,
        provider: record.required_string("provider")?,
        model: record.required_string("model")?,
        status: Some(record.required("status", parse_enum::<Status>)?),
        attempt_id: record.string("attempt_id")?,
        attempt: record.optional("attempt", non_negative_integer)?,
        workflow: record.string("workflow")?,
        layer: record.optional("layer", parse_enum)?,
        route: record.optional("route", parse_enum)?,
        route_group: record.string("route_group")?,
        served_provider: record.string("served_provider")?,
        served_model: record.string("served_model")?,
        provider_request_id: record.string("provider_request_id")?,
        duration_ms: record.optional("duration_ms", non_negative_number)?,
        ttft_ms: record.optional("ttft_ms", non_negative_number)?,
        http_status,
        error_class: record.optional("error_class", parse_enum)?,
        error_code: record.string("error_code")?,
        retry_after_ms: record.optional("retry_after_ms", non_negative_number)?,
        tokens: Tokens {
            input: record.optional("input_tokens", non_negative_integer)?,
            output: record.optional("output_tokens", non_negative_integer)?,
            cached_input: record.optional("cached_input_tokens", non_negative_integer)?,
            cache_write_input: record.optional("cache_write_input_tokens", non_negative_integer)?,
        },
        cost: record.optional("cost_usd", cost_usd)?,
        commit_state: record.optional("commit_state", parse_enum)?,
        visible_output: record.optional("visible_output", boolean)?,
        decision: record.optional("decision", parse_enum)?,
        circuit: record.optional("circuit", parse_enum)?,
        ..AttemptFields::default()
    };
    fields.extra = record.rest();
    fields.warnings = std::mem::take(&mut record.warnings);
    build_attempt(fields)
}

/// The fields of one record not yet consumed; what is left at the end are
/// the unknown extras, kept rather than rejected.
struct Record {
    map: Map<String, Value>,
    warnings: Vec<String>,
}

impl Record {
    /// `null` and `""` are absent: many emitters write every key, some with
    /// an empty string for "none".
    fn take(&mut self, field: &str) -> Option<Value> {
        self.map.remove(field).filter(|value| match value {
            Value::Null => false,
            Value::String(s) => !s.trim().is_empty(),
            _ => true,
        })
    }

    /// Some clients log 0 (or -1) for "no response": that is no status, not
    /// a bad record.
    fn http_status(&mut self) -> Result<Option<i32>, String> {
        match self.optional("http_status", integer)? {
            Some(code @ 100..=599) => Ok(Some(code as i32)),
            Some(code) => {
                self.warnings
                    .push(format!("field `http_status`: {code} is not an HTTP status (100-599), dropped"));
                Ok(None)
            }
            None => Ok(None),
        }
    }

    fn required<T>(
        &mut self,
        field: &str,
        parse: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Result<T, String> {
        let value = self.take(field).ok_or_else(|| format!("missing required field `{field}`"))?;
        parse(&value).map_err(|why| format!("field `{field}`: {why}"))
    }

    fn optional<T>(
        &mut self,
        field: &str,
        parse: impl FnOnce(&Value) -> Result<T, String>,
    ) -> Result<Option<T>, String> {
        self.take(field)
            .map(|value| parse(&value).map_err(|why| format!("field `{field}`: {why}")))
            .transpose()
    }

    fn required_string(&mut self, field: &str) -> Result<String, String> {
        self.required(field, non_empty_string)
    }

    fn string(&mut self, field: &str) -> Result<Option<String>, String> {
        self.optional(field, non_empty_string)
    }

    /// The unknown fields, as a JSON object: message text dropped, and the
    /// whole dropped (with a warning) past `MAX_EXTRA_BYTES`.
    fn rest(&mut self) -> Option<String> {
        let content: Vec<String> = self.map.keys().filter(|k| is_content_key(k)).cloned().collect();
        for key in content {
            self.map.remove(&key);
        }
        if self.map.is_empty() {
            return None;
        }
        let text = Value::Object(std::mem::take(&mut self.map)).to_string();
        if text.len() > MAX_EXTRA_BYTES {
            self.warnings.push(format!(
                "unknown fields take {} bytes, over the {MAX_EXTRA_BYTES}-byte limit: not kept",
                text.len()
            ));
            return None;
        }
        Some(text)
    }
}

/// Unknown fields are kept up to this size per record (as JSON text).
pub const MAX_EXTRA_BYTES: usize = 16 * 1024;

/// Prompt and completion text is never stored, whatever the emitter calls it.
fn is_content_key(key: &str) -> bool {
    const CONTENT: [&str; 10] = [
        "messages",
        "response",
        "prompt",
        "completion",
        "input",
        "output",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "input.value",
        "output.value",
    ];
    CONTENT.contains(&key) || key.starts_with("llm.input_messages") || key.starts_with("llm.output_messages")
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

fn non_empty_string(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
        Value::String(_) => Err("must not be empty".into()),
        other => Err(format!("expected a string, got {}", kind(other))),
    }
}

fn parse_enum<T: FromStr + strum::VariantNames>(value: &Value) -> Result<T, String> {
    let Value::String(s) = value else {
        return Err(format!("expected a string, got {}", kind(value)));
    };
    T::from_str(s).map_err(|_| format!("`{s}` is not one of {}", T::VARIANTS.join(", ")))
}

fn non_negative_integer(value: &Value) -> Result<i64, String> {
    match value.as_i64() {
        Some(n) if n >= 0 => Ok(n),
        Some(n) => Err(format!("must be >= 0, got {n}")),
        None if value.is_u64() => Err(format!("{value} is out of range")),
        None => Err(format!("expected an integer >= 0, got {}", describe(value))),
    }
}

fn non_negative_number(value: &Value) -> Result<f64, String> {
    match value.as_f64() {
        Some(n) if n >= 0.0 && n.is_finite() => Ok(n),
        Some(n) => Err(format!("must be >= 0, got {n}")),
        None => Err(format!("expected a number, got {}", kind(value))),
    }
}

fn integer(value: &Value) -> Result<i64, String> {
    value.as_i64().ok_or_else(|| format!("expected an integer, got {}", describe(value)))
}

fn cost_usd(value: &Value) -> Result<PicoUsd, String> {
    let usd = value.as_f64().ok_or_else(|| format!("expected a number, got {}", kind(value)))?;
    PicoUsd::from_usd(usd).ok_or_else(|| format!("{usd} is not a cost in dollars (>= 0)"))
}

fn boolean(value: &Value) -> Result<bool, String> {
    value.as_bool().ok_or_else(|| format!("expected true or false, got {}", kind(value)))
}

/// A number is shown as itself, so "got 1.5" says what is wrong with it.
fn describe(value: &Value) -> String {
    match value {
        Value::Number(n) => n.to_string(),
        other => kind(other).to_string(),
    }
}

/// RFC 3339 text or integer Unix milliseconds.
fn parse_started_at(value: &Value) -> Result<DateTime<Utc>, String> {
    match value {
        Value::String(text) => DateTime::parse_from_rfc3339(text)
            .map(|t| t.with_timezone(&Utc))
            .map_err(|err| format!("`{text}` is not an RFC 3339 timestamp ({err})")),
        Value::Number(n) => n
            .as_i64()
            .and_then(DateTime::from_timestamp_millis)
            .ok_or_else(|| format!("{n} is not integer Unix milliseconds")),
        other => {
            Err(format!("expected an RFC 3339 string or integer Unix milliseconds, got {}", kind(other)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ErrorClass, Layer};

    const MINIMAL: &str = r#"{"workflow_id":"w1","started_at":"2026-01-01T00:00:00Z","provider":"openai","model":"gpt-4o","status":"ok"}"#;

    #[test]
    fn minimal_record_gets_the_spec_defaults() {
        let a = decode_line(MINIMAL).unwrap();
        assert_eq!(a.layer, Layer::App);
        assert_eq!(a.served_provider, "openai");
        assert_eq!(a.served_model, "gpt-4o");
        assert_eq!(a.error_class, None);
        assert_eq!(a.attempt_id.len(), 32);
        assert_eq!(a.extra, None);
    }

    #[test]
    fn each_required_field_is_named_when_missing() {
        for field in ["workflow_id", "started_at", "provider", "model", "status"] {
            let mut map: Map<String, Value> = serde_json::from_str(MINIMAL).unwrap();
            map.remove(field);
            let err = decode_line(&Value::Object(map).to_string()).unwrap_err();
            assert_eq!(err, format!("missing required field `{field}`"));
        }
    }

    #[test]
    fn wrong_types_are_rejected_with_the_field_name() {
        let cases = [
            (r#""attempt":-1"#, "field `attempt`: must be >= 0, got -1"),
            (r#""attempt":1.5"#, "field `attempt`: expected an integer >= 0, got 1.5"),
            (r#""layer":"proxy""#, "field `layer`: `proxy` is not one of sdk, gateway, app, queue"),
            (r#""input_tokens":"12""#, "field `input_tokens`: expected an integer >= 0, got a string"),
            (r#""visible_output":1"#, "field `visible_output`: expected true or false, got a number"),
            (r#""http_status":"429""#, "field `http_status`: expected an integer, got a string"),
        ];
        for (extra, want) in cases {
            let line = MINIMAL.replace("\"status\":\"ok\"", &format!("\"status\":\"ok\",{extra}"));
            assert_eq!(decode_line(&line).unwrap_err(), want);
        }
    }

    #[test]
    fn started_at_accepts_rfc3339_and_unix_millis_as_the_same_instant() {
        let a = decode_line(MINIMAL).unwrap();
        let b = decode_line(&MINIMAL.replace(r#""2026-01-01T00:00:00Z""#, "1767225600000")).unwrap();
        let c = decode_line(&MINIMAL.replace("00:00:00Z", "01:00:00+01:00")).unwrap();
        assert_eq!(a.started_at, b.started_at);
        assert_eq!(a.attempt_id, b.attempt_id, "derived ids agree across spellings");
        assert_eq!(a.attempt_id, c.attempt_id);
        assert!(decode_line(&MINIMAL.replace(r#""2026-01-01T00:00:00Z""#, "1.5")).is_err());
    }

    #[test]
    fn unknown_fields_are_kept_and_nulls_are_absent() {
        let line = MINIMAL.replace("\"status\":\"ok\"", r#""status":"ok","team":"search","route":null"#);
        let a = decode_line(&line).unwrap();
        assert_eq!(a.extra.as_deref(), Some(r#"{"team":"search"}"#));
        assert_eq!(a.route, None);
    }

    #[test]
    fn lenient_values_are_corrected_with_a_warning_not_rejected() {
        let line = MINIMAL.replace(
            "\"status\":\"ok\"",
            r#""status":"error","http_status":0,"error_code":"","route_group":"","input_tokens":5,"cached_input_tokens":20"#,
        );
        let decoded = decode_lines(&line, 7);
        assert!(decoded.rejections.is_empty(), "{:?}", decoded.rejections);
        let a = &decoded.attempts[0];
        assert_eq!((a.http_status, a.error_code.as_deref(), a.route_group.as_deref()), (None, None, None));
        assert_eq!(a.tokens.input, Some(25), "input counted apart from cache reads is raised");
        let lines: Vec<u64> = decoded.warnings.iter().map(|w| w.line).collect();
        assert_eq!(lines, [7, 7], "{:?}", decoded.warnings);
        assert!(decoded.warnings[0].reason.contains("0 is not an HTTP status"));
    }

    #[test]
    fn route_group_and_cache_writes_are_read() {
        let line = MINIMAL.replace(
            "\"status\":\"ok\"",
            r#""status":"ok","route_group":"gpt-4o-pool","input_tokens":100,"cache_write_input_tokens":60"#,
        );
        let a = decode_line(&line).unwrap();
        assert_eq!(a.route_group.as_deref(), Some("gpt-4o-pool"));
        assert_eq!(a.tokens.cache_write_input, Some(60));
    }

    #[test]
    fn message_text_is_never_kept_and_extras_are_bounded() {
        let line = MINIMAL.replace(
            "\"status\":\"ok\"",
            r#""status":"ok","team":"search","messages":[{"role":"user","content":"secret"}],"response":"secret""#,
        );
        assert_eq!(decode_line(&line).unwrap().extra.as_deref(), Some(r#"{"team":"search"}"#));
        let big = MINIMAL
            .replace("\"status\":\"ok\"", &format!(r#""status":"ok","note":"{}""#, "x".repeat(20_000)));
        let decoded = decode_lines(&big, 1);
        assert_eq!(decoded.attempts[0].extra, None);
        assert!(decoded.warnings[0].reason.contains("16384-byte limit"), "{:?}", decoded.warnings);
    }

    #[test]
    fn failed_attempt_without_class_is_derived() {
        let line = MINIMAL.replace(
            "\"status\":\"ok\"",
            r#""status":"error","http_status":429,"error_code":"insufficient_quota""#,
        );
        assert_eq!(decode_line(&line).unwrap().error_class, Some(ErrorClass::Quota));
    }

    #[test]
    fn body_decoding_numbers_lines_and_skips_blanks() {
        let body = format!("{MINIMAL}\n\nnot json\n{MINIMAL}\n");
        let decoded = decode_lines(&body, 1);
        assert_eq!(decoded.attempts.len(), 2);
        assert_eq!(decoded.rejections.len(), 1);
        assert_eq!(decoded.rejections[0].line, 3);
        assert!(decoded.rejections[0].reason.starts_with("not valid JSON"));
    }

    #[test]
    fn json_array_bodies_are_accepted() {
        let body = format!("[{MINIMAL}, 7]");
        let decoded = decode_body(&body);
        assert_eq!(decoded.attempts.len(), 1);
        assert_eq!(decoded.rejections[0].line, 2);
    }
}
