//! LiteLLM's StandardLoggingPayload (docs/record-format.md, "LiteLLM"): one
//! JSON object per call to a provider, success and failure alike, as its
//! custom loggers, its generic API logger and its bucket loggers write it.
//!
//! Every payload is one attempt. `trace_id` groups the calls LiteLLM made
//! for one request (its retries and fallbacks), so it is the workflow.
//! Message and response text is never read into the record.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::numbers;
use super::{AttemptFields, Built, Decoded, build_attempt};
use crate::model::{Layer, PicoUsd, Status, Tokens};
use crate::ratelimit::{self, Headroom};

/// Payload fields kept in `extra`: small identifiers that help find the call
/// in LiteLLM's own logs. Everything else (messages, response, metadata) is
/// dropped.
const KEPT_EXTRA: [&str; 6] = ["id", "call_type", "api_base", "model_id", "cache_hit", "stream"];

/// JSONL of payloads; `first_line` numbers a chunk that started mid-file.
pub fn decode_lines(text: &str, first_line: u64) -> Decoded {
    super::decode_json_lines(text, first_line, |value| decode_value(value).map(|b| vec![b]))
}

/// Whether a parsed record looks like a StandardLoggingPayload.
pub fn looks_like(map: &Map<String, Value>) -> bool {
    map.contains_key("call_type")
        && (map.contains_key("litellm_call_id") || map.contains_key("custom_llm_provider"))
        && map.contains_key("startTime")
}

pub(super) fn decode_value(value: Value) -> Result<Built, String> {
    let Value::Object(map) = value else {
        return Err("expected a JSON object (a StandardLoggingPayload)".into());
    };
    let p = Payload(&map);
    let status = match p.str("status") {
        Some("success") => Status::Ok,
        Some("failure") => Status::Error,
        Some(other) => return Err(format!("field `status`: `{other}` is not success or failure")),
        None => return Err("missing required field `status`".into()),
    };
    let started = p.epoch("startTime")?.ok_or("missing required field `startTime`")?;
    let ended = p.epoch("endTime")?;
    let first_chunk = p.epoch("completionStartTime")?;
    let error = map.get("error_information").and_then(Value::as_object);
    let error_str =
        |key: &str| error.and_then(|e| e.get(key)).and_then(Value::as_str).filter(|s| !s.is_empty());
    let mut warnings = Vec::new();
    // `error_code` is the HTTP status when LiteLLM knew it, else the
    // provider's own code (`server_error`).
    let (http_status, provider_code) = match error_str("error_code").map(|c| (c, c.trim().parse::<i64>())) {
        Some((_, Ok(code @ 100..=599))) => (Some(code as i32), None),
        Some((_, Ok(code))) => {
            warnings.push(format!("error_information.error_code: {code} is not an HTTP status, dropped"));
            (None, None)
        }
        Some((code, Err(_))) => (None, Some(code)),
        None => (None, None),
    };
    let hidden = map.get("hidden_params").and_then(Value::as_object);
    let headroom = headroom_of(hidden, ended.unwrap_or(started), &mut warnings);
    // `hidden_params.usage_object` is often `null` beside the metadata's.
    let usage = hidden
        .and_then(|h| h.get("usage_object"))
        .and_then(Value::as_object)
        .or_else(|| map.get("metadata").and_then(|m| m.get("usage_object")).and_then(Value::as_object));
    let provider = p
        .str("custom_llm_provider")
        .or_else(|| error_str("llm_provider"))
        .ok_or("missing required field `custom_llm_provider`")?;
    let model = p.str("model").ok_or("missing required field `model`")?;
    // LiteLLM names deployments `provider/model`; the route's model is the
    // part after the provider.
    let model = model.strip_prefix(provider).and_then(|m| m.strip_prefix('/')).unwrap_or(model);
    let response_model = map.get("response").and_then(|r| r.get("model")).and_then(Value::as_str);
    let upstream = hidden.and_then(|h| h.get("upstream_provider")).and_then(Value::as_str);
    let streamed = map.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let fields = AttemptFields {
        workflow_id: p
            .str("trace_id")
            .or_else(|| p.str("litellm_call_id"))
            .or_else(|| p.str("id"))
            .ok_or("missing required field `trace_id`")?
            .to_string(),
        // The proxy gives every try of one request one `litellm_call_id`
        // (its Logging object): with the try's start the id is one try's,
        // and the same on a redelivered payload.
        attempt_id: p
            .str("litellm_call_id")
            .or_else(|| p.str("id"))
            .map(|call| format!("{call}@{}", started.timestamp_nanos_opt().unwrap_or_default())),
        started_at: started,
        duration_ms: ended.and_then(|end| millis_between(started, end)),
        ttft_ms: first_chunk.filter(|_| streamed).and_then(|first| millis_between(started, first)),
        provider: provider.to_string(),
        model: model.to_string(),
        served_provider: upstream.filter(|u| !u.is_empty()).map(String::from),
        served_model: response_model.filter(|m| !m.is_empty()).map(String::from),
        route_group: p.str("model_group").map(String::from),
        status: Some(status),
        layer: Some(Layer::Gateway),
        http_status,
        error_code: provider_code.or_else(|| error_str("error_class")).map(String::from),
        provider_request_id: error_str("error_provider_request_id")
            .or_else(|| map.get("response").and_then(|r| r.get("id")).and_then(Value::as_str))
            .map(String::from),
        service_tier: service_tier(&map, usage),
        // LiteLLM logs a batch by the call that retrieved its results.
        batch: p.str("call_type").filter(|call| call.contains("batch")).map(|_| true),
        web_search_requests: usage.and_then(|u| web_search_requests(u, &mut warnings)),
        total_tokens: p.count("total_tokens")?,
        tool_use_prompt_tokens: usage.and_then(|u| u.get("prompt_tokens_details")).and_then(|d| {
            numbers::count(d.get("tool_use_tokens"), "prompt_tokens_details.tool_use_tokens", &mut warnings)
        }),
        headroom,
        tokens: Tokens {
            input: p.count("prompt_tokens")?,
            output: p.count("completion_tokens")?,
            cached_input: usage.and_then(|u| cached_tokens(u, &mut warnings)),
            cache_write_input: usage
                .and_then(|u| {
                    numbers::count(
                        u.get("cache_creation_input_tokens"),
                        "cache_creation_input_tokens",
                        &mut warnings,
                    )
                })
                .filter(|n| *n > 0),
            reasoning_output: usage.and_then(|u| reasoning_tokens(u, &mut warnings)),
            cache_write_1h_input: usage.and_then(|u| one_hour_cache_writes(u, &mut warnings)),
        },
        cost: match numbers::amount(map.get("response_cost"), "response_cost", &mut warnings) {
            Some(usd) => {
                Some(PicoUsd::from_usd(usd).ok_or(format!("field `response_cost`: {usd} is not a cost"))?)
            }
            None => None,
        },
        extra: extra(&map),
        warnings,
        ..AttemptFields::default()
    };
    build_attempt(fields)
}

struct Payload<'a>(&'a Map<String, Value>);

impl Payload<'_> {
    fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
    }

    /// Epoch seconds (a float), as LiteLLM writes its times.
    fn epoch(&self, key: &str) -> Result<Option<DateTime<Utc>>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_f64()
                .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e11)
                .and_then(|s| DateTime::from_timestamp_micros((s * 1e6).round() as i64))
                .map(Some)
                .ok_or_else(|| format!("field `{key}`: {n} is not epoch seconds")),
            Some(other) => Err(format!("field `{key}`: expected epoch seconds, got {other}")),
        }
    }

    fn count(&self, key: &str) -> Result<Option<i64>, String> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) if n >= 0 => Ok(Some(n)),
                _ => Err(format!("field `{key}`: expected a token count >= 0, got {v}")),
            },
        }
    }
}

/// The provider's rate-limit headers LiteLLM passes on in
/// `hidden_params.additional_headers`, under their own names and as
/// `llm_provider-<name>` (strings or numbers).
fn headroom_of(
    hidden: Option<&Map<String, Value>>,
    ended: DateTime<Utc>,
    warnings: &mut Vec<String>,
) -> Headroom {
    let Some(headers) = hidden.and_then(|h| h.get("additional_headers")).and_then(Value::as_object) else {
        return Headroom::default();
    };
    let texts: Vec<(&str, String)> = headers
        .iter()
        .filter(|(name, _)| name.contains("ratelimit"))
        .filter_map(|(name, value)| match value {
            Value::String(s) => Some((name.as_str(), s.clone())),
            Value::Number(n) => Some((name.as_str(), n.to_string())),
            _ => None,
        })
        .collect();
    ratelimit::from_headers(texts.iter().map(|(name, value)| (*name, value.as_str())), ended, warnings)
}

fn millis_between(from: DateTime<Utc>, to: DateTime<Utc>) -> Option<f64> {
    let micros = (to - from).num_microseconds()?;
    (micros >= 0).then(|| micros as f64 / 1000.0)
}

/// OpenAI-style `prompt_tokens_details.cached_tokens`, or Anthropic-style
/// `cache_read_input_tokens`.
fn cached_tokens(usage: &Map<String, Value>, warnings: &mut Vec<String>) -> Option<i64> {
    let openai = usage.get("prompt_tokens_details").and_then(|d| d.get("cached_tokens"));
    match openai.filter(|v| !v.is_null()) {
        Some(v) => numbers::count(Some(v), "prompt_tokens_details.cached_tokens", warnings),
        None => numbers::count(usage.get("cache_read_input_tokens"), "cache_read_input_tokens", warnings),
    }
    .filter(|n| *n > 0)
}

/// The tier that served: the one the provider answered with (OpenAI echoes
/// it in the response, Anthropic in its usage), else the one LiteLLM
/// priced the call at (`cost_breakdown`), else the one asked for.
fn service_tier(map: &Map<String, Value>, usage: Option<&Map<String, Value>>) -> Option<String> {
    fn tier(value: Option<&Value>) -> Option<&str> {
        value.and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty())
    }
    tier(map.get("response").and_then(|r| r.get("service_tier")))
        .or_else(|| tier(usage.and_then(|u| u.get("service_tier"))))
        .or_else(|| tier(map.get("cost_breakdown").and_then(|c| c.get("service_tier"))))
        .or_else(|| tier(map.get("model_parameters").and_then(|m| m.get("service_tier"))))
        .map(String::from)
}

/// Anthropic's one-hour cache writes, as LiteLLM's usage object carries
/// them (`prompt_tokens_details.cache_creation_token_details`, or the same
/// object at the top).
fn one_hour_cache_writes(usage: &Map<String, Value>, warnings: &mut Vec<String>) -> Option<i64> {
    let details = usage
        .get("prompt_tokens_details")
        .and_then(|d| d.get("cache_creation_token_details"))
        .filter(|d| !d.is_null())
        .or_else(|| usage.get("cache_creation_token_details").filter(|d| !d.is_null()))?;
    numbers::count(
        details.get("ephemeral_1h_input_tokens"),
        "cache_creation_token_details.ephemeral_1h_input_tokens",
        warnings,
    )
}

/// Server-side web searches: `server_tool_use.web_search_requests`
/// (Anthropic, OpenAI-compatible providers), else the count LiteLLM keeps
/// in `prompt_tokens_details`.
fn web_search_requests(usage: &Map<String, Value>, warnings: &mut Vec<String>) -> Option<i64> {
    let server =
        usage.get("server_tool_use").and_then(|s| s.get("web_search_requests")).filter(|v| !v.is_null());
    match server {
        Some(v) => numbers::count(Some(v), "server_tool_use.web_search_requests", warnings),
        None => numbers::count(
            usage.get("prompt_tokens_details").and_then(|d| d.get("web_search_requests")),
            "prompt_tokens_details.web_search_requests",
            warnings,
        ),
    }
}

/// OpenAI's `completion_tokens_details.reasoning_tokens`, as LiteLLM's
/// usage object copies it (a part of `completion_tokens`).
fn reasoning_tokens(usage: &Map<String, Value>, warnings: &mut Vec<String>) -> Option<i64> {
    let details = usage.get("completion_tokens_details").filter(|d| !d.is_null())?;
    numbers::count(details.get("reasoning_tokens"), "completion_tokens_details.reasoning_tokens", warnings)
        .filter(|n| *n > 0)
}

/// The response headers LiteLLM's Router adds that count the tries a
/// payload does not show (the proxy logs a request's first failure and its
/// answer only): kept as `litellm.attempted_retries` and
/// `litellm.attempted_fallbacks`.
const COUNTED_TRIES: [(&str, &str); 2] = [
    ("x-litellm-attempted-retries", "attempted_retries"),
    ("x-litellm-attempted-fallbacks", "attempted_fallbacks"),
];

fn extra(map: &Map<String, Value>) -> Option<String> {
    let mut kept: Map<String, Value> = KEPT_EXTRA
        .iter()
        .filter_map(|k| map.get(*k).filter(|v| !v.is_null()).map(|v| (format!("litellm.{k}"), v.clone())))
        .collect();
    let headers = map.get("hidden_params").and_then(|h| h.get("additional_headers"));
    for (header, key) in COUNTED_TRIES {
        let count = headers.and_then(|h| h.get(header)).and_then(|v| match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        });
        if let Some(count) = count {
            kept.insert(format!("litellm.{key}"), Value::from(count));
        }
    }
    (!kept.is_empty()).then(|| Value::Object(kept).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ErrorClass;

    fn payload(status: &str, extra: &str) -> String {
        format!(
            r#"{{"id":"c1","litellm_call_id":"c1","trace_id":"t1","call_type":"acompletion","status":"{status}",
            "custom_llm_provider":"azure","model":"gpt-4o","model_group":"gpt-4o-pool","api_base":"http://x",
            "startTime":1795831200.25,"endTime":1795831201.0,"completionStartTime":1795831201.0,
            "prompt_tokens":100,"completion_tokens":20,"response_cost":0.0012,
            "messages":[{{"role":"user","content":"secret"}}],"response":{{"model":"gpt-4o-2024-08-06","id":"chatcmpl-9"}}
            {extra}}}"#
        )
        .replace('\n', " ")
    }

    #[test]
    fn the_tries_of_one_proxy_request_sharing_a_call_id_are_two_attempts() {
        let first = payload("failure", "").replace("1795831200.25", "1795831199.5");
        let decoded = decode_lines(&format!("{first}\n{}", payload("success", "")), 1);
        let ids: Vec<&str> = decoded.attempts.iter().map(|a| a.attempt_id.as_str()).collect();
        assert_eq!(ids, ["c1@1795831199500000000", "c1@1795831200250000000"]);
    }

    #[test]
    fn the_metadata_s_usage_is_read_when_the_hidden_one_is_null() {
        let usage = r#","hidden_params":{"usage_object":null},"metadata":{"usage_object":{"completion_tokens":30,
            "prompt_tokens":120,"completion_tokens_details":{"reasoning_tokens":12},
            "prompt_tokens_details":{"cached_tokens":20}}}"#;
        let a = &decode_lines(&payload("success", &usage.replace('\n', " ")), 1).attempts[0];
        assert_eq!((a.tokens.cached_input, a.tokens.reasoning_output), (Some(20), Some(12)));
    }

    #[test]
    fn one_hour_cache_writes_searches_tiers_and_batches_are_read() {
        let usage = r#","call_type":"aretrieve_batch","cost_breakdown":{"service_tier":"priority"},
            "hidden_params":{"usage_object":{"prompt_tokens":100,"completion_tokens":20,
            "cache_creation_input_tokens":60,"server_tool_use":{"web_search_requests":4},
            "prompt_tokens_details":{"cached_tokens":0,"cache_creation_token_details":
            {"ephemeral_5m_input_tokens":10,"ephemeral_1h_input_tokens":50}}}}"#;
        let text = payload("success", &usage.replace('\n', " ")).replace(r#""call_type":"acompletion","#, "");
        let a = &decode_lines(&text, 1).attempts[0];
        assert_eq!((a.tokens.cache_write_input, a.tokens.cache_write_1h_input), (Some(60), Some(50)));
        assert_eq!(
            (a.web_search_requests, a.batch, a.service_tier.as_deref()),
            (Some(4), Some(true), Some("priority"))
        );
        // The tier the response states wins over the one LiteLLM priced.
        let answered = text.replace(r#""id":"chatcmpl-9""#, r#""id":"chatcmpl-9","service_tier":"flex""#);
        assert_eq!(decode_lines(&answered, 1).attempts[0].service_tier.as_deref(), Some("flex"));
        let plain = &decode_lines(&payload("success", ""), 1).attempts[0];
        assert_eq!(
            (plain.batch, plain.web_search_requests, plain.service_tier.as_deref()),
            (None, None, None)
        );
    }

    #[test]
    fn gemini_tool_use_prompt_tokens_are_counted_once_as_the_total_says() {
        // Prompt 100 + tool use 30 + completion 20 = 150: the tool use is apart.
        let usage = r#","total_tokens":150,"hidden_params":{"usage_object":{"prompt_tokens":100,"completion_tokens":20,
            "prompt_tokens_details":{"tool_use_tokens":30}}}"#;
        let decoded = decode_lines(&payload("success", &usage.replace('\n', " ")), 1);
        assert_eq!(decoded.attempts[0].tokens.input, Some(130));
        assert_eq!(decoded.warnings.len(), 1, "{:?}", decoded.warnings);
        // A total of 120 says the tool use was counted in.
        let counted_in = usage.replace("150", "120");
        let decoded = decode_lines(&payload("success", &counted_in.replace('\n', " ")), 1);
        assert_eq!((decoded.attempts[0].tokens.input, decoded.warnings.len()), (Some(100), 0));
    }

    #[test]
    fn the_router_s_counts_of_tries_are_kept() {
        let counted = r#","hidden_params":{"additional_headers":{"x-litellm-attempted-retries":2,"x-litellm-attempted-fallbacks":"1"}}"#;
        let decoded = decode_lines(&payload("success", counted), 1);
        let extra: Value = serde_json::from_str(decoded.attempts[0].extra.as_deref().unwrap()).unwrap();
        assert_eq!(
            (extra["litellm.attempted_retries"].as_u64(), extra["litellm.attempted_fallbacks"].as_u64()),
            (Some(2), Some(1))
        );
    }

    #[test]
    fn the_providers_rate_limit_headers_are_headroom_in_either_spelling() {
        use crate::ratelimit::{LimitKind, Window};
        let headers = r#","hidden_params":{"additional_headers":{
            "x-ratelimit-remaining-requests":"9","x-ratelimit-limit-requests":10,
            "llm_provider-x-ratelimit-remaining-requests":"8","llm_provider-x-ratelimit-reset-requests":"6m0s",
            "llm_provider-anthropic-ratelimit-output-tokens-remaining":"0",
            "llm_provider-anthropic-ratelimit-output-tokens-reset":"2026-11-28T02:00:31Z",
            "llm_provider-x-ratelimit-limit-tokens":"n/a"}}"#;
        let decoded = decode_lines(&payload("success", &headers.replace('\n', " ")), 1);
        let a = &decoded.attempts[0];
        assert_eq!(
            *a.headroom.window(LimitKind::Requests),
            Window { remaining: Some(8), limit: Some(10), reset_ms: Some(360_000) },
            "the provider's own copy wins"
        );
        let output = a.headroom.window(LimitKind::OutputTokens);
        assert_eq!((output.remaining, output.reset_ms), (Some(0), Some(30_000)), "reset read from endTime");
        assert_eq!(a.headroom.window(LimitKind::Tokens).limit, None);
        assert!(
            decoded.warnings.iter().any(|w| w.reason.contains("x-ratelimit-limit-tokens")),
            "{:?}",
            decoded.warnings
        );
    }

    #[test]
    fn a_success_payload_is_one_gateway_attempt() {
        let decoded = decode_lines(&payload("success", ""), 1);
        assert!(decoded.rejections.is_empty(), "{:?}", decoded.rejections);
        let a = &decoded.attempts[0];
        assert_eq!((a.workflow_id.as_str(), a.attempt_id.as_str()), ("t1", "c1@1795831200250000000"));
        assert_eq!((a.provider.as_str(), a.route_group.as_deref()), ("azure", Some("gpt-4o-pool")));
        assert_eq!(a.served_model, "gpt-4o-2024-08-06");
        assert_eq!(a.duration_ms, Some(750.0));
        assert_eq!(a.ttft_ms, None, "completionStartTime means first token only when streaming");
        assert_eq!(a.cost, PicoUsd::from_usd(0.0012));
        assert_eq!(a.layer, Layer::Gateway);
        let extra = a.extra.as_deref().unwrap();
        assert!(!extra.contains("secret"), "message text is dropped: {extra}");
        assert!(extra.contains("litellm.api_base"));
    }

    #[test]
    fn a_failure_payload_carries_status_and_class() {
        let line = payload(
            "failure",
            r#","error_information":{"error_code":"429","error_class":"RateLimitError","llm_provider":"azure"}"#,
        );
        let a = &decode_lines(&line, 1).attempts[0];
        assert_eq!((a.status, a.http_status), (Status::Error, Some(429)));
        assert_eq!(a.error_code.as_deref(), Some("RateLimitError"));
        assert_eq!(a.error_class, Some(ErrorClass::RateLimit));
    }

    #[test]
    fn the_generic_api_loggers_three_formats_are_read() {
        use crate::ingest::format::Format;
        use crate::ingest::framing::{Framing, decode_body};
        let one = payload("success", "");
        let decoded = |body: &str| decode_body(body, Framing::Document, Some(Format::Litellm)).unwrap();
        assert_eq!(decoded(&format!("[{one},{one}]")).attempts.len(), 2);
        assert_eq!(decoded(&format!("{one}\n{one}\n")).attempts.len(), 2);
        assert_eq!(decoded(&one).attempts.len(), 1);
    }

    #[test]
    fn a_bad_payload_is_rejected_by_line_and_field() {
        let decoded = decode_lines(&format!("{}\n{{\"status\":\"success\"}}", payload("maybe", "")), 10);
        let reasons: Vec<_> = decoded.rejections.iter().map(|r| (r.line, r.reason.clone())).collect();
        assert_eq!(reasons[0], (10, "field `status`: `maybe` is not success or failure".to_string()));
        assert_eq!(reasons[1], (11, "missing required field `startTime`".to_string()));
    }
}
