//! OpenRouter generation records (docs/record-format.md, "OpenRouter"): what
//! `GET /api/v1/generation?id=...` answers, one per line, with or without its
//! `{"data": ...}` envelope.
//!
//! A generation is one workflow. Each entry of `provider_responses` is one
//! upstream attempt (provider, HTTP status, latency); the generation's tokens
//! and cost belong to the attempt that served (the last one with a 2xx).
//! Every attempt was asked of OpenRouter for the slug (`provider`
//! `openrouter`, `model` the slug) and answered by the upstream
//! (`served_provider`, `served_model`): OpenRouter bills the request, so its
//! cost lands in OpenRouter's reconciliation cells, while cost by who served
//! still names the upstream.
//! OpenRouter gives no start time per attempt: the first starts at
//! `created_at`, each next one when the previous one's latency ended.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Map, Value};

use super::numbers;
use super::{AttemptFields, Built, Decoded, build_attempt};
use crate::model::{Layer, PicoUsd, Status, Tokens};

pub fn decode_lines(text: &str, first_line: u64) -> Decoded {
    super::decode_json_lines(text, first_line, decode_value)
}

/// Whether a parsed record looks like a generation record.
pub fn looks_like(map: &Map<String, Value>) -> bool {
    let data = map.get("data").and_then(Value::as_object).unwrap_or(map);
    data.contains_key("provider_responses")
        || (data.contains_key("provider_name") && data.contains_key("native_tokens_prompt"))
}

pub(super) fn decode_value(value: Value) -> Result<Vec<Built>, String> {
    let Value::Object(mut map) = value else {
        return Err("expected a JSON object (an OpenRouter generation)".into());
    };
    if let Some(Value::Object(data)) = map.remove("data") {
        map = data;
    }
    let g = Generation(&map);
    let id = g.str("id").ok_or("missing required field `id`")?;
    let created = g.str("created_at").ok_or("missing required field `created_at`")?;
    let created = DateTime::parse_from_rfc3339(created)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("field `created_at`: `{created}` is not an RFC 3339 timestamp ({e})"))?;
    let slug = g.str("model").ok_or("missing required field `model`")?;
    let responses: Vec<&Map<String, Value>> = map
        .get("provider_responses")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default();
    let cancelled = map.get("cancelled").and_then(Value::as_bool).unwrap_or(false);
    let mut warnings = Vec::new();
    let tokens = Tokens {
        input: g.count("native_tokens_prompt", &mut warnings).or(g.count("tokens_prompt", &mut warnings)),
        output: g
            .count("native_tokens_completion", &mut warnings)
            .or(g.count("tokens_completion", &mut warnings)),
        cached_input: g.count("native_tokens_cached", &mut warnings).filter(|n| *n > 0),
        cache_write_input: None,
        reasoning_output: g.count("native_tokens_reasoning", &mut warnings).filter(|n| *n > 0),
        cache_write_1h_input: None,
    };
    let cost = match numbers::amount(map.get("total_cost"), "total_cost", &mut warnings) {
        Some(usd) => Some(PicoUsd::from_usd(usd).ok_or(format!("field `total_cost`: {usd} is not a cost"))?),
        None => None,
    };

    let attempts: Vec<Upstream> = if responses.is_empty() {
        let provider = g.str("provider_name").ok_or("no `provider_responses` and no `provider_name`")?;
        vec![Upstream {
            provider: provider.into(),
            permaslug: None,
            status: (!cancelled).then_some(200),
            latency_ms: g.float("latency", &mut warnings),
            upstream_id: g.str("upstream_id").map(String::from),
        }]
    } else {
        responses
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let r = Generation(r);
                let provider = r
                    .str("provider_name")
                    .ok_or(format!("provider_responses[{i}]: missing `provider_name`"))?;
                let field = |key: &str| format!("provider_responses[{i}].{key}");
                Ok(Upstream {
                    provider: provider.to_string(),
                    permaslug: r.str("model_permaslug").map(String::from),
                    status: numbers::count(r.0.get("status"), &field("status"), &mut warnings),
                    latency_ms: numbers::amount(r.0.get("latency"), &field("latency"), &mut warnings),
                    upstream_id: r.str("id").map(String::from),
                })
            })
            .collect::<Result<_, String>>()?
    };
    let served_index = attempts.iter().rposition(|a| a.status.is_some_and(|s| (200..300).contains(&s)));
    let mut started = created;
    let mut built = Vec::with_capacity(attempts.len());
    for (i, Upstream { provider, permaslug, status, latency_ms, upstream_id }) in
        attempts.into_iter().enumerate()
    {
        let ok = Some(i) == served_index;
        // The generation's own warnings go with its first attempt.
        let mut warnings = if i == 0 { std::mem::take(&mut warnings) } else { Vec::new() };
        let http_status = match status {
            Some(code @ 100..=599) => Some(code as i32),
            Some(code) => {
                warnings
                    .push(format!("provider_responses[{i}].status: {code} is not an HTTP status, dropped"));
                None
            }
            None => None,
        };
        let sent_as = permaslug.unwrap_or_else(|| slug.to_string());
        let fields = AttemptFields {
            workflow_id: id.to_string(),
            attempt_id: Some(format!("{id}:{i}")),
            attempt: Some(i as i64),
            started_at: started,
            duration_ms: latency_ms,
            provider: OPENROUTER.to_string(),
            model: sent_as.clone(),
            served_provider: Some(provider),
            // The slug names the model after its maker: `openai/gpt-4o`.
            served_model: Some(sent_as.rsplit('/').next().unwrap_or(&sent_as).to_string()),
            route_group: Some(sent_as.clone()),
            status: Some(if ok { Status::Ok } else { Status::Error }),
            layer: Some(Layer::Gateway),
            http_status,
            provider_request_id: upstream_id,
            tokens: if ok { tokens } else { Tokens::default() },
            cost: if ok { cost } else { None },
            warnings,
            ..AttemptFields::default()
        };
        built.push(build_attempt(fields)?);
        if let Some(ms) = latency_ms {
            started += Duration::microseconds((ms * 1000.0).round() as i64);
        }
    }
    Ok(built)
}

/// Who every attempt of a generation was asked of.
const OPENROUTER: &str = "openrouter";

/// One upstream attempt of a generation, as OpenRouter lists it.
struct Upstream {
    provider: String,
    /// The model slug it was sent as (`openai/gpt-4o`).
    permaslug: Option<String>,
    /// The provider's HTTP status.
    status: Option<i64>,
    latency_ms: Option<f64>,
    upstream_id: Option<String>,
}

struct Generation<'a>(&'a Map<String, Value>);

impl Generation<'_> {
    fn str(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
    }
    fn count(&self, key: &str, warnings: &mut Vec<String>) -> Option<i64> {
        numbers::count(self.0.get(key), key, warnings)
    }
    fn float(&self, key: &str, warnings: &mut Vec<String>) -> Option<f64> {
        numbers::amount(self.0.get(key), key, warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GENERATION: &str = r#"{"data":{"id":"gen-1","created_at":"2026-11-01T10:00:00Z","model":"openai/gpt-4o",
        "provider_name":"Azure","total_cost":0.0031,"native_tokens_prompt":1000,"native_tokens_completion":100,
        "native_tokens_cached":200,"native_tokens_reasoning":40,"upstream_id":"chatcmpl-7","cancelled":false,
        "provider_responses":[
          {"provider_name":"OpenAI","model_permaslug":"openai/gpt-4o","status":429,"latency":120},
          {"provider_name":"OpenAI","model_permaslug":"openai/gpt-4o","status":502,"latency":300},
          {"provider_name":"Azure","model_permaslug":"openai/gpt-4o","status":200,"latency":900,"id":"chatcmpl-7"}]}}"#;

    #[test]
    fn each_provider_response_is_an_attempt_and_the_last_2xx_served() {
        let decoded = decode_lines(&GENERATION.replace('\n', " "), 1);
        assert!(decoded.rejections.is_empty(), "{:?}", decoded.rejections);
        let a = &decoded.attempts;
        assert_eq!(a.len(), 3);
        assert_eq!(
            a.iter().map(|a| a.status).collect::<Vec<_>>(),
            [Status::Error, Status::Error, Status::Ok]
        );
        assert_eq!((a[0].http_status, a[1].http_status), (Some(429), Some(502)));
        assert!(a[..2].iter().all(|a| a.tokens.input.is_none() && a.cost.is_none()));
        assert_eq!((a[2].tokens.input, a[2].tokens.cached_input), (Some(1000), Some(200)));
        assert_eq!((a[2].tokens.output, a[2].tokens.reasoning_output), (Some(100), Some(40)));
        assert_eq!(a[2].cost, PicoUsd::from_usd(0.0031));
        assert_eq!((a[0].served_provider.as_str(), a[2].served_provider.as_str()), ("OpenAI", "Azure"));
        assert!(a.iter().all(|a| a.provider == "openrouter" && a.model == "openai/gpt-4o"));
        assert!(
            a.iter().all(|a| a.route_group.as_deref() == Some("openai/gpt-4o") && a.served_model == "gpt-4o")
        );
        assert_eq!((a[2].started_at - a[0].started_at).num_milliseconds(), 420, "starts follow latencies");
    }

    #[test]
    fn a_generation_without_responses_is_one_attempt() {
        let line = r#"{"id":"gen-2","created_at":"2026-11-01T10:00:00Z","model":"anthropic/claude-sonnet-4.5","provider_name":"Amazon Bedrock","native_tokens_prompt":5,"native_tokens_completion":1,"total_cost":0.001}"#;
        let decoded = decode_lines(line, 1);
        assert_eq!(decoded.attempts.len(), 1);
        assert_eq!(decoded.attempts[0].status, Status::Ok);
        assert!(looks_like(serde_json::from_str::<Value>(line).unwrap().as_object().unwrap()));
    }
}
