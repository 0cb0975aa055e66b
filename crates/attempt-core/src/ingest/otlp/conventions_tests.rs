//! The 2026 GenAI conventions and gateway spellings: finish reasons that
//! fail an answered call, the model a gateway was asked for, an emitter's
//! cost with its currency and source, and usage counts no field reads.

use super::*;
use crate::model::ErrorClass;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status as SpanStatus};

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}
fn s(v: &str) -> Value {
    Value::StringValue(v.into())
}
fn reasons(values: &[&str]) -> Value {
    Value::ArrayValue(ArrayValue { values: values.iter().map(|v| AnyValue { value: Some(s(v)) }).collect() })
}

fn span(id: u8, parent: Option<u8>, start_ms: u64, attributes: Vec<KeyValue>, status: i32) -> Span {
    Span {
        trace_id: vec![0xef; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: "chat".into(),
        start_time_unix_nano: 1_795_831_200_000_000_000 + start_ms * 1_000_000,
        end_time_unix_nano: 1_795_831_200_000_000_000 + (start_ms + 500) * 1_000_000,
        attributes,
        status: Some(SpanStatus { code: status, message: String::new() }),
        ..Span::default()
    }
}

fn call(extra: Vec<KeyValue>, status: i32) -> Span {
    let mut attributes = vec![
        kv("gen_ai.operation.name", s("chat")),
        kv("gen_ai.provider.name", s("openai")),
        kv("gen_ai.request.model", s("gpt-4o-mini")),
        kv("gen_ai.usage.input_tokens", Value::IntValue(100)),
        kv("gen_ai.usage.output_tokens", Value::IntValue(4096)),
    ];
    attributes.extend(extra);
    span(1, None, 0, attributes, status)
}

fn attempts(spans: Vec<Span>) -> Vec<Attempt> {
    let mut out = attempts_of_request(&ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans, ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    });
    out.sort_by_key(|a| a.started_at);
    out
}

fn extra(attempt: &Attempt) -> serde_json::Value {
    attempt.extra.as_deref().map_or(serde_json::Value::Null, |e| serde_json::from_str(e).unwrap_or_default())
}

#[test]
fn a_length_finish_is_a_truncated_failure_that_keeps_its_billed_tokens() {
    let cut = attempts(vec![call(vec![kv("gen_ai.response.finish_reasons", reasons(&["length"]))], 0)]);
    assert_eq!((cut[0].status, cut[0].error_class), (Status::Error, Some(ErrorClass::Truncated)));
    assert_eq!(cut[0].tokens.output, Some(4096));
    // `error` fails the attempt; the span's own error type still names it.
    let failed = attempts(vec![call(
        vec![
            kv("gen_ai.response.finish_reasons", reasons(&["stop", "error"])),
            kv("error.type", s("server_error")),
        ],
        0,
    )]);
    assert_eq!(failed[0].status, Status::Error);
    assert_eq!(failed[0].error_code.as_deref(), Some("server_error"));
    // A status of OK stated by the instrumentation wins; `stop` is an answer.
    let stated = attempts(vec![call(vec![kv("gen_ai.response.finish_reasons", reasons(&["length"]))], 1)]);
    assert_eq!(stated[0].status, Status::Ok);
    let stopped = attempts(vec![call(vec![kv("gen_ai.response.finish_reasons", reasons(&["stop"]))], 0)]);
    assert_eq!(stopped[0].status, Status::Ok);
}

#[test]
fn a_finish_reason_fails_the_try_that_answered_not_the_ones_before() {
    let http = |id: u8, at: u64, code: i64| {
        span(
            id,
            Some(1),
            at,
            vec![
                kv("http.request.method", s("POST")),
                kv("http.response.status_code", Value::IntValue(code)),
            ],
            0,
        )
    };
    let out = attempts(vec![
        call(vec![kv("gen_ai.response.finish_reasons", reasons(&["max_tokens"]))], 0),
        http(2, 0, 429),
        http(3, 1_000, 200),
    ]);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].error_class, Some(ErrorClass::RateLimit));
    assert_eq!(
        (out[1].status, out[1].error_class, out[1].http_status),
        (Status::Error, Some(ErrorClass::Truncated), Some(200))
    );
    assert_eq!(out[1].tokens.output, Some(4096));
}

#[test]
fn a_gateway_s_original_model_is_the_route_asked_for() {
    let out = attempts(vec![call(
        vec![
            kv("gen_ai.original.model", s("gpt-4o")),
            kv("gen_ai.response.model", s("gpt-4o-mini-2024-07-18")),
        ],
        0,
    )]);
    assert_eq!((out[0].model.as_str(), out[0].served_model.as_str()), ("gpt-4o", "gpt-4o-mini-2024-07-18"));
}

#[test]
fn an_emitter_cost_counts_in_usd_and_another_currency_is_kept_never_converted() {
    let usd = attempts(vec![call(
        vec![
            kv("gen_ai.usage.cost.amount", Value::DoubleValue(0.0125)),
            kv("gen_ai.usage.cost.currency", s("usd")),
            kv("gen_ai.usage.cost.source", s("provider")),
        ],
        0,
    )]);
    assert_eq!(usd[0].cost, PicoUsd::from_usd(0.0125));
    assert_eq!(extra(&usd[0]), serde_json::json!({"cost_source": "provider"}));
    let unstated = attempts(vec![call(vec![kv("gen_ai.usage.cost.amount", Value::DoubleValue(0.5))], 0)]);
    assert_eq!(unstated[0].cost, PicoUsd::from_usd(0.5));

    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![call(
                    vec![
                        kv("gen_ai.usage.cost.amount", Value::DoubleValue(0.0115)),
                        kv("gen_ai.usage.cost.currency", s("EUR")),
                    ],
                    0,
                )],
                ..ScopeSpans::default()
            }],
            ..ResourceSpans::default()
        }],
    };
    let decoded = decode_request(&request);
    assert_eq!(decoded.decoded.warned, 1);
    assert!(
        decoded.decoded.warnings[0].reason.contains("EUR is not in USD"),
        "{:?}",
        decoded.decoded.warnings
    );
    let eur = attempts_of_request(&request);
    assert_eq!(eur[0].cost, None, "never converted");
    assert_eq!(eur[0].cost_currency.as_deref(), Some("EUR"), "so its cost is unknown");
    assert_eq!(extra(&eur[0]), serde_json::json!({"cost_amount": 0.0115, "cost_currency": "EUR"}));
}

#[test]
fn usage_counts_no_field_reads_are_kept_as_extra() {
    let out = attempts(vec![call(
        vec![
            kv("gen_ai.usage.input_tokens.audio", Value::IntValue(30)),
            kv("gen_ai.usage.output_tokens.image", Value::IntValue(2)),
            kv("gen_ai.usage.total_tokens", Value::IntValue(4196)),
            kv("gen_ai.usage.cache_read.input_tokens", Value::IntValue(10)),
            kv("gen_ai.usage.reasoning.output_tokens", Value::IntValue(1024)),
        ],
        0,
    )]);
    assert_eq!(
        extra(&out[0]),
        serde_json::json!({"usage.input_tokens.audio": 30, "usage.output_tokens.image": 2})
    );
    assert_eq!(out[0].tokens.cached_input, Some(10));
    assert_eq!(out[0].tokens.reasoning_output, Some(1024));
}

#[test]
fn reasoning_tokens_are_read_in_every_spelling_and_stay_part_of_output() {
    for key in REASONING_KEYS {
        let out = attempts(vec![call(vec![kv(key, Value::IntValue(256))], 0)]);
        assert_eq!(out[0].tokens.reasoning_output, Some(256), "{key}");
        assert_eq!(out[0].tokens.output, Some(4096), "{key}: a part of output, not added to it");
    }
}

#[test]
fn each_stored_span_keeps_the_schema_url_it_was_exported_under() {
    let scope = |url: &str, id: u8| ScopeSpans {
        spans: vec![Span { span_id: vec![id; 8], ..call(vec![], 0) }],
        schema_url: url.into(),
        ..ScopeSpans::default()
    };
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![scope("https://opentelemetry.io/schemas/1.42.0", 1), scope("", 2)],
            schema_url: "https://opentelemetry.io/schemas/1.37.0".into(),
            ..ResourceSpans::default()
        }],
    };
    let schema_of = |record: &SpanRecord| {
        let span = Span::decode(record.span.as_deref().unwrap()).unwrap();
        str_attr(&span, &[SCHEMA_URL_KEY]).map(String::from)
    };
    let whole = decode_request(&request).decoded.spans;
    let bytes = request.encode_to_vec();
    let walked = decode_protobuf(&bytes, &mut |_| true).unwrap().decoded.spans;
    assert_eq!(whole, walked);
    let urls: Vec<_> = whole.iter().map(schema_of).collect();
    assert_eq!(
        urls,
        vec![
            Some("https://opentelemetry.io/schemas/1.42.0".to_string()),
            Some("https://opentelemetry.io/schemas/1.37.0".to_string())
        ]
    );
    assert!(kept_bytes_at_most(&bytes).unwrap() >= whole.iter().map(SpanRecord::held_bytes).sum::<usize>());
}

#[test]
fn what_prices_a_call_is_read_in_every_spelling() {
    for key in CACHE_WRITE_1H_KEYS {
        let out = attempts(vec![call(
            vec![
                kv("gen_ai.usage.cache_creation.input_tokens", Value::IntValue(80)),
                kv(key, Value::IntValue(60)),
            ],
            0,
        )]);
        assert_eq!(
            (out[0].tokens.cache_write_input, out[0].tokens.cache_write_1h_input),
            (Some(80), Some(60)),
            "{key}"
        );
    }
    for key in WEB_SEARCH_KEYS {
        let out = attempts(vec![call(vec![kv(key, s("3"))], 0)]);
        assert_eq!(out[0].web_search_requests, Some(3), "{key}");
    }
    for (value, batch) in
        [(Value::BoolValue(true), Some(true)), (s("false"), Some(false)), (s("maybe"), None)]
    {
        let out = attempts(vec![call(vec![kv("attempt.batch", value)], 0)]);
        assert_eq!(out[0].batch, batch);
    }
    let plain = attempts(vec![call(vec![], 0)]);
    assert_eq!(
        (plain[0].batch, plain[0].web_search_requests, plain[0].tokens.cache_write_1h_input),
        (None, None, None)
    );
}

#[test]
fn a_total_settles_thoughts_counted_apart_from_the_output() {
    // Gemini's usage copied as is: 100 prompt, 4096 candidates, 512 thoughts.
    for key in TOTAL_TOKEN_KEYS {
        let out = attempts(vec![call(
            vec![
                kv("gen_ai.usage.reasoning.output_tokens", Value::IntValue(512)),
                kv(key, Value::IntValue(4708)),
            ],
            0,
        )]);
        assert_eq!(out[0].tokens.output, Some(4608), "{key}");
    }
    let counted_in = attempts(vec![call(
        vec![
            kv("gen_ai.usage.reasoning.output_tokens", Value::IntValue(512)),
            kv("gen_ai.usage.total_tokens", Value::IntValue(4196)),
        ],
        0,
    )]);
    assert_eq!(counted_in[0].tokens.output, Some(4096));
}
