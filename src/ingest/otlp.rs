//! OpenTelemetry spans to attempts (spec section 8).
//!
//! A span is a model call when it carries `gen_ai.operation.name`,
//! `gen_ai.provider.name`, `gen_ai.system` or OpenInference's
//! `openinference.span.kind = LLM`. Other spans are ignored, not errors.
//! A model-call span with HTTP client children hides SDK retries: each child
//! is one attempt (`layer = sdk`), with provider and model from the parent and
//! the parent's tokens on the child that delivered.

use std::collections::HashMap;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{Span, status::StatusCode};

use super::{AttemptFields, Decoded, Rejection, build_attempt};
use crate::model::{Layer, PicoUsd, Status, Tokens};

/// Spans of a request, and how many of them were model calls.
#[derive(Debug, Default)]
pub struct DecodedSpans {
    pub decoded: Decoded,
    /// Spans that mapped to attempts or were rejected; other spans are not
    /// model calls and were ignored.
    pub model_spans: u64,
}

/// Maps every model-call span of `request`. A rejection's `line` is the
/// span's 1-based position in the request.
pub fn decode_request(request: &ExportTraceServiceRequest) -> DecodedSpans {
    let spans: Vec<&Span> =
        request.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).collect();
    // (1-based position in the request, span), for rejections to point at.
    let model_calls: Vec<(u64, &Span)> =
        spans.iter().enumerate().filter(|(_, s)| is_model_call(s)).map(|(i, s)| (i as u64 + 1, *s)).collect();
    let mut children: HashMap<(&[u8], &[u8]), Vec<&Span>> = HashMap::new();
    for span in &spans {
        if is_http_client(span) && !span.parent_span_id.is_empty() {
            children.entry((&span.trace_id, &span.parent_span_id)).or_default().push(span);
        }
    }
    let mut out = DecodedSpans::default();
    for (line, call) in model_calls {
        let mut http =
            children.remove(&(call.trace_id.as_slice(), call.span_id.as_slice())).unwrap_or_default();
        out.model_spans += 1;
        let result = if http.is_empty() {
            map_call(call).map(|a| vec![a])
        } else {
            http.sort_by_key(|s| {
                (int_attr(s, &["http.request.resend_count"]).unwrap_or(0), s.start_time_unix_nano)
            });
            map_hidden_retries(call, &http)
        };
        match result {
            Ok(attempts) => out.decoded.attempts.extend(attempts),
            Err(reason) => out
                .decoded
                .rejections
                .push(Rejection { line, reason: format!("span {}: {reason}", hex(&call.span_id)) }),
        }
    }
    out
}

/// Whether a JSON line is an OTLP trace export rather than an attempt record.
pub fn is_export_request_json(line: &str) -> bool {
    line.trim_start().starts_with('{') && line.contains("\"resourceSpans\"")
}

/// One OTLP/JSON `ExportTraceServiceRequest`.
pub fn decode_json(text: &str) -> Result<DecodedSpans, String> {
    let request: ExportTraceServiceRequest =
        serde_json::from_str(text).map_err(|e| format!("not an OTLP ExportTraceServiceRequest: {e}"))?;
    Ok(decode_request(&request))
}

fn is_model_call(span: &Span) -> bool {
    has_attr(span, "gen_ai.operation.name")
        || has_attr(span, "gen_ai.provider.name")
        || has_attr(span, "gen_ai.system")
        || str_attr(span, &["openinference.span.kind"]).is_some_and(|k| k.eq_ignore_ascii_case("llm"))
}

fn is_http_client(span: &Span) -> bool {
    has_attr(span, "http.request.method") || has_attr(span, "http.method")
}

fn map_call(span: &Span) -> Result<crate::model::Attempt, String> {
    let mut fields = call_fields(span)?;
    fields.attempt_id = Some(format!("{}{}", hex(&span.trace_id), hex(&span.span_id)));
    timing(&mut fields, span)?;
    fields.status = Some(span_status(span, fields.http_status));
    fields.tokens = tokens(span)?;
    build_attempt(fields)
}

fn map_hidden_retries(call: &Span, http: &[&Span]) -> Result<Vec<crate::model::Attempt>, String> {
    let base_index = int_attr(call, &["attempt.index"]);
    let mut attempts = Vec::with_capacity(http.len());
    let mut delivered = false;
    for (i, child) in http.iter().enumerate() {
        let mut fields = call_fields(call)?;
        fields.attempt_id = Some(format!("{}{}", hex(&child.trace_id), hex(&child.span_id)));
        fields.layer = Some(Layer::Sdk);
        fields.attempt = base_index.map(|b| b + i as i64);
        fields.http_status = status_code(child)?;
        fields.error_code = str_attr(child, &["error.type"]).map(String::from);
        fields.error_class = None;
        timing(&mut fields, child)?;
        let status = span_status(child, fields.http_status);
        fields.status = Some(status);
        let is_last = i + 1 == http.len();
        if !is_last {
            // The caller's decision applies to what came after the SDK gave up.
            fields.decision = None;
        }
        if status == Status::Ok && !delivered {
            fields.tokens = tokens(call)?;
            delivered = true;
        } else {
            fields.tokens = Tokens::default();
            fields.cost = None;
        }
        attempts.push(build_attempt(fields)?);
    }
    Ok(attempts)
}

/// Fields that come from the model-call span's attributes.
fn call_fields(span: &Span) -> Result<AttemptFields, String> {
    let provider = str_attr(span, &["gen_ai.provider.name", "gen_ai.system", "llm.provider"])
        .ok_or("no provider (gen_ai.provider.name, gen_ai.system or llm.provider)")?;
    let model = str_attr(span, &["gen_ai.request.model", "llm.model_name"])
        .ok_or("no model (gen_ai.request.model or llm.model_name)")?;
    Ok(AttemptFields {
        workflow_id: str_attr(span, &["attempt.workflow_id"])
            .map(String::from)
            .unwrap_or_else(|| hex(&span.trace_id)),
        provider: provider.to_string(),
        model: model.to_string(),
        served_model: str_attr(span, &["gen_ai.response.model"]).map(String::from),
        served_provider: str_attr(span, &["attempt.served_provider"]).map(String::from),
        attempt: int_attr(span, &["attempt.index"]),
        workflow: str_attr(span, &["attempt.workflow"]).map(String::from),
        layer: enum_attr(span, "attempt.layer")?,
        route: enum_attr(span, "attempt.route")?,
        decision: enum_attr(span, "attempt.decision")?,
        commit_state: enum_attr(span, "attempt.commit_state")?,
        error_class: enum_attr(span, "attempt.error_class")?,
        circuit: enum_attr(span, "attempt.circuit")?,
        visible_output: attr(span, "attempt.visible_output").and_then(|v| match v {
            any_value::Value::BoolValue(b) => Some(*b),
            _ => None,
        }),
        provider_request_id: str_attr(span, &["attempt.provider_request_id", "gen_ai.response.id"])
            .map(String::from),
        retry_after_ms: float_attr(span, &["attempt.retry_after_ms"]),
        http_status: status_code(span)?,
        error_code: str_attr(span, &["error.type"]).map(String::from),
        ttft_ms: float_attr(span, &["gen_ai.response.time_to_first_chunk"]).map(|s| s * 1000.0),
        cost: float_attr(span, &["attempt.cost_usd", "llm.cost.total"])
            .map(|usd| PicoUsd::from_usd(usd).ok_or(format!("cost {usd} is not a cost in dollars (>= 0)")))
            .transpose()?,
        ..AttemptFields::default()
    })
}

fn timing(fields: &mut AttemptFields, span: &Span) -> Result<(), String> {
    if span.start_time_unix_nano == 0 {
        return Err("span has no start time".into());
    }
    fields.started_at = nanos(span.start_time_unix_nano)?;
    if span.end_time_unix_nano >= span.start_time_unix_nano {
        fields.duration_ms = Some((span.end_time_unix_nano - span.start_time_unix_nano) as f64 / 1e6);
    }
    Ok(())
}

fn nanos(n: u64) -> Result<DateTime<Utc>, String> {
    i64::try_from(n)
        .ok()
        .map(DateTime::from_timestamp_nanos)
        .ok_or_else(|| format!("time {n} is out of range"))
}

/// ERROR status is a failure; so is an HTTP error status on a span that did
/// not set its status.
fn span_status(span: &Span, http_status: Option<i32>) -> Status {
    let code = span.status.as_ref().map(|s| s.code).unwrap_or(0);
    let http_failed = code == StatusCode::Unset as i32 && http_status.is_some_and(|s| s >= 400);
    if code == StatusCode::Error as i32 || http_failed { Status::Error } else { Status::Ok }
}

fn status_code(span: &Span) -> Result<Option<i32>, String> {
    match int_attr(span, &["http.response.status_code", "http.status_code"]) {
        Some(code @ 100..=599) => Ok(Some(code as i32)),
        Some(code) => Err(format!("http status {code} is not an HTTP status (100-599)")),
        None => Ok(None),
    }
}

fn tokens(span: &Span) -> Result<Tokens, String> {
    let count = |keys: &[&str]| -> Result<Option<i64>, String> {
        match int_attr(span, keys) {
            Some(n) if n < 0 => Err(format!("{} must be >= 0, got {n}", keys[0])),
            other => Ok(other),
        }
    };
    Ok(Tokens {
        input: count(&["gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"])?,
        output: count(&[
            "gen_ai.usage.output_tokens",
            "gen_ai.usage.completion_tokens",
            "llm.token_count.completion",
        ])?,
        cached_input: count(&[
            "gen_ai.usage.cache_read.input_tokens",
            "llm.token_count.prompt_details.cache_read",
        ])?,
    })
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a any_value::Value> {
    span.attributes
        .iter()
        .find(|kv: &&KeyValue| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

fn has_attr(span: &Span, key: &str) -> bool {
    attr(span, key).is_some()
}

/// The first of `keys` present as a non-empty string.
fn str_attr<'a>(span: &'a Span, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| match attr(span, k) {
        Some(any_value::Value::StringValue(s)) if !s.is_empty() => Some(s.as_str()),
        _ => None,
    })
}

fn int_attr(span: &Span, keys: &[&str]) -> Option<i64> {
    keys.iter().find_map(|k| match attr(span, k) {
        Some(any_value::Value::IntValue(n)) => Some(*n),
        Some(any_value::Value::DoubleValue(d)) if d.fract() == 0.0 => Some(*d as i64),
        Some(any_value::Value::StringValue(s)) => s.parse().ok(),
        _ => None,
    })
}

fn float_attr(span: &Span, keys: &[&str]) -> Option<f64> {
    keys.iter().find_map(|k| match attr(span, k) {
        Some(any_value::Value::DoubleValue(d)) => Some(*d),
        Some(any_value::Value::IntValue(n)) => Some(*n as f64),
        Some(any_value::Value::StringValue(s)) => s.parse().ok(),
        _ => None,
    })
}

fn enum_attr<T: FromStr + strum::VariantNames>(span: &Span, key: &str) -> Result<Option<T>, String> {
    match str_attr(span, &[key]) {
        None => Ok(None),
        Some(s) => T::from_str(s)
            .map(Some)
            .map_err(|_| format!("{key}: `{s}` is not one of {}", T::VARIANTS.join(", "))),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status as SpanStatus};

    fn kv(key: &str, value: Value) -> KeyValue {
        KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
    }
    fn s(v: &str) -> Value {
        Value::StringValue(v.into())
    }

    fn span(id: u8, parent: Option<u8>, start_s: u64, attrs: Vec<KeyValue>, error: bool) -> Span {
        Span {
            trace_id: vec![0xab; 16],
            span_id: vec![id; 8],
            parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
            name: "span".into(),
            start_time_unix_nano: 1_795_831_200_000_000_000 + start_s * 1_000_000_000,
            end_time_unix_nano: 1_795_831_200_000_000_000 + start_s * 1_000_000_000 + 250_000_000,
            attributes: attrs,
            status: Some(SpanStatus { code: if error { 2 } else { 1 }, message: String::new() }),
            ..Span::default()
        }
    }

    fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans { spans, ..ScopeSpans::default() }],
                ..ResourceSpans::default()
            }],
        }
    }

    fn genai(extra: Vec<KeyValue>) -> Vec<KeyValue> {
        let mut attrs = vec![
            kv("gen_ai.operation.name", s("chat")),
            kv("gen_ai.provider.name", s("openai")),
            kv("gen_ai.request.model", s("gpt-4o-mini")),
            kv("gen_ai.response.model", s("gpt-4o-mini-2024-07-18")),
            kv("gen_ai.usage.input_tokens", Value::IntValue(1000)),
            kv("gen_ai.usage.output_tokens", Value::IntValue(50)),
        ];
        attrs.extend(extra);
        attrs
    }

    #[test]
    fn a_genai_span_is_one_attempt_and_other_spans_are_ignored() {
        let req = request(vec![
            span(1, None, 0, genai(vec![kv("attempt.workflow_id", s("doc-1"))]), false),
            span(2, None, 0, vec![kv("db.system", s("postgresql"))], false),
        ]);
        let out = decode_request(&req);
        assert_eq!(out.model_spans, 1);
        let a = &out.decoded.attempts[0];
        assert_eq!(
            (a.workflow_id.as_str(), a.provider.as_str(), a.served_model.as_str()),
            ("doc-1", "openai", "gpt-4o-mini-2024-07-18")
        );
        assert_eq!(a.tokens.input, Some(1000));
        assert_eq!(a.duration_ms, Some(250.0));
        assert_eq!(a.attempt_id, format!("{}{}", "ab".repeat(16), "01".repeat(8)));
    }

    #[test]
    fn http_children_are_the_hidden_sdk_attempts() {
        let child = |id, start, status: i64, error| {
            span(
                id,
                Some(1),
                start,
                vec![
                    kv("http.request.method", s("POST")),
                    kv("http.response.status_code", Value::IntValue(status)),
                ],
                error,
            )
        };
        let req = request(vec![
            span(1, None, 0, genai(vec![kv("attempt.decision", s("return"))]), false),
            child(3, 2, 200, false),
            child(2, 0, 529, true),
        ]);
        let attempts = decode_request(&req).decoded.attempts;
        assert_eq!(attempts.len(), 2);
        assert_eq!(attempts[0].status, Status::Error);
        assert_eq!(attempts[0].http_status, Some(529));
        assert_eq!(attempts[0].tokens.input, None, "tokens go to the child that delivered");
        assert_eq!(attempts[1].tokens.input, Some(1000));
        assert!(attempts.iter().all(|a| a.layer == Layer::Sdk && a.model == "gpt-4o-mini"));
        assert_eq!(attempts[0].workflow_id, "ab".repeat(16), "the trace is the workflow");
    }

    #[test]
    fn older_and_openinference_spellings_are_accepted() {
        let req = request(vec![span(
            1,
            None,
            0,
            vec![
                kv("openinference.span.kind", s("LLM")),
                kv("llm.provider", s("anthropic")),
                kv("llm.model_name", s("claude-haiku-4-5")),
                kv("llm.token_count.prompt", Value::IntValue(7)),
                kv("llm.cost.total", Value::DoubleValue(0.25)),
            ],
            false,
        )]);
        let a = &decode_request(&req).decoded.attempts[0];
        assert_eq!(
            (a.provider.as_str(), a.tokens.input, a.cost),
            ("anthropic", Some(7), PicoUsd::from_usd(0.25))
        );
    }

    #[test]
    fn a_bad_model_span_is_rejected_by_position_and_reason() {
        let req = request(vec![
            span(9, None, 0, vec![kv("db.system", s("redis"))], false),
            span(1, None, 0, vec![kv("gen_ai.operation.name", s("chat"))], false),
            span(2, None, 0, genai(vec![kv("attempt.layer", s("proxy"))]), false),
        ]);
        let out = decode_request(&req);
        assert!(out.decoded.attempts.is_empty());
        let reasons: Vec<_> = out.decoded.rejections.iter().map(|r| (r.line, r.reason.as_str())).collect();
        assert_eq!(reasons[0].0, 2);
        assert!(
            reasons[0].1.ends_with("no provider (gen_ai.provider.name, gen_ai.system or llm.provider)"),
            "{reasons:?}"
        );
        assert!(reasons[1].1.contains("attempt.layer: `proxy` is not one of"), "{reasons:?}");
    }
}
