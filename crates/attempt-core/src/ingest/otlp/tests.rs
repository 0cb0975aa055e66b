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

fn http_child(id: u8, parent: u8, start: u64, status: i64, error: bool) -> Span {
    span(
        id,
        Some(parent),
        start,
        vec![kv("http.request.method", s("POST")), kv("http.response.status_code", Value::IntValue(status))],
        error,
    )
}

/// The attempts of several exports of one trace, stored in that order.
fn derive_after(exports: Vec<Vec<Span>>) -> Vec<Attempt> {
    let mut stored: Vec<SpanRecord> = Vec::new();
    for spans in exports {
        for record in decode_request(&request(spans)).decoded.spans {
            if !stored.iter().any(|r| r.span_id == record.span_id) {
                stored.push(record);
            }
        }
    }
    let mut attempts = derive_trace(&stored);
    attempts.sort_by(|a, b| a.attempt_id.cmp(&b.attempt_id));
    attempts
}

#[test]
fn a_genai_span_is_one_attempt_and_other_spans_are_ignored() {
    let req = request(vec![
        span(1, None, 0, genai(vec![kv("attempt.workflow_id", s("doc-1"))]), false),
        span(2, None, 0, vec![kv("db.system", s("postgresql"))], false),
    ]);
    assert_eq!(decode_request(&req).model_spans, 1);
    let attempts = attempts_of_request(&req);
    let a = &attempts[0];
    assert_eq!(
        (a.workflow_id.as_str(), a.provider.as_str(), a.served_model.as_str()),
        ("doc-1", "openai", "gpt-4o-mini-2024-07-18")
    );
    assert_eq!(a.tokens.input, Some(1000));
    assert_eq!(a.duration_ms, Some(250.0));
    assert_eq!(a.attempt_id, format!("{}{}", "ab".repeat(16), "01".repeat(8)));
    assert_eq!(a.source_trace.as_deref(), Some("ab".repeat(16).as_str()));
}

#[test]
fn http_children_are_the_hidden_sdk_attempts() {
    let req = request(vec![
        span(1, None, 0, genai(vec![kv("attempt.decision", s("return"))]), false),
        http_child(3, 1, 2, 200, false),
        http_child(2, 1, 0, 529, true),
    ]);
    let mut attempts = attempts_of_request(&req);
    attempts.sort_by_key(|a| a.started_at);
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].status, Status::Error);
    assert_eq!(attempts[0].http_status, Some(529));
    assert_eq!(attempts[0].tokens.input, None, "tokens go to the child that delivered");
    assert_eq!(attempts[1].tokens.input, Some(1000));
    assert!(attempts.iter().all(|a| a.layer == Layer::Sdk && a.model == "gpt-4o-mini"));
    assert_eq!(attempts[0].workflow_id, "ab".repeat(16), "the trace is the workflow");
}

#[test]
fn a_split_export_gives_the_same_attempts_in_either_order() {
    let parent = || span(1, None, 0, genai(vec![]), false);
    let children = || {
        vec![http_child(2, 1, 0, 529, true), http_child(3, 1, 1, 529, true), http_child(4, 1, 2, 200, false)]
    };
    let together = derive_after(vec![[vec![parent()], children()].concat()]);
    assert_eq!(together.len(), 3, "three SDK attempts");
    assert_eq!(derive_after(vec![vec![parent()], children()]), together, "parent first");
    assert_eq!(derive_after(vec![children(), vec![parent()]]), together, "children first");
    let alone = derive_after(vec![vec![parent()]]);
    assert_eq!(alone.len(), 1, "a parent stored alone is one attempt until its children arrive");
    assert!(derive_after(vec![children()]).is_empty(), "children alone are not model calls");
}

#[test]
fn litellm_strings_and_error_code_are_read() {
    let attrs = vec![
        kv("gen_ai.system", s("azure")),
        kv("gen_ai.request.model", s("gpt-4o")),
        kv("litellm.model_group", s("gpt-4o-pool")),
        kv("http.response.status_code", s("429")),
        kv("error.code", s("429")),
        kv("error.type", s("RateLimitError")),
        kv("gen_ai.usage.input_tokens", s("1200")),
        kv("gen_ai.usage.output_tokens", s("0")),
        kv("gen_ai.cost.total_cost", Value::DoubleValue(0.0)),
        kv("gen_ai.input.messages", s("[{\"role\":\"user\",\"content\":\"secret prompt\"}]")),
    ];
    let req = request(vec![span(1, None, 0, attrs, true)]);
    let a = &attempts_of_request(&req)[0];
    assert_eq!(a.http_status, Some(429));
    assert_eq!(a.error_code.as_deref(), Some("RateLimitError"));
    assert_eq!(a.error_class, Some(crate::model::ErrorClass::RateLimit));
    assert_eq!(a.tokens.input, Some(1200));
    assert_eq!(a.route_group.as_deref(), Some("gpt-4o-pool"));
    assert_eq!(a.cost, Some(PicoUsd(0)));
    let stored = &decode_request(&req).decoded.spans[0];
    let bytes = stored.span.as_deref().unwrap();
    assert!(!String::from_utf8_lossy(bytes).contains("secret prompt"), "message text is never stored");
}

#[test]
fn only_inference_operations_are_model_calls() {
    let tool = vec![kv("gen_ai.operation.name", s("execute_tool")), kv("gen_ai.provider.name", s("openai"))];
    let agent = vec![kv("gen_ai.operation.name", s("invoke_agent")), kv("gen_ai.system", s("openai"))];
    let oi_chain = vec![kv("openinference.span.kind", s("CHAIN")), kv("llm.provider", s("openai"))];
    let req = request(vec![
        span(1, None, 0, tool, false),
        span(2, None, 0, agent, false),
        span(3, None, 0, oi_chain, false),
    ]);
    let out = decode_request(&req);
    assert_eq!(out.model_spans, 0);
    assert!(out.decoded.rejections.is_empty());
    assert!(attempts_of_request(&req).is_empty());
    let embeddings = vec![
        kv("gen_ai.operation.name", s("embeddings")),
        kv("gen_ai.provider.name", s("openai")),
        kv("gen_ai.request.model", s("text-embedding-3-small")),
    ];
    assert_eq!(attempts_of_request(&request(vec![span(1, None, 0, embeddings, false)])).len(), 1);
}

#[test]
fn a_wrapper_around_an_sdk_span_is_not_a_second_attempt() {
    // framework LLM span (1) -> chain span (2) -> SDK GenAI span (3) -> HTTP (4, 5)
    let wrapper = vec![
        kv("openinference.span.kind", s("LLM")),
        kv("llm.provider", s("openai")),
        kv("llm.model_name", s("gpt-4o-mini")),
        kv("attempt.workflow", s("summary-interactive")),
    ];
    let spans = vec![
        span(1, None, 0, wrapper, false),
        span(2, Some(1), 0, vec![kv("openinference.span.kind", s("CHAIN"))], false),
        span(3, Some(2), 0, genai(vec![]), false),
        http_child(4, 3, 0, 503, true),
        http_child(5, 3, 1, 200, false),
    ];
    let attempts = derive_after(vec![spans.clone()]);
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    assert!(attempts.iter().all(|a| a.workflow.as_deref() == Some("summary-interactive")), "inherited");
    // The same when the wrapper arrives last, in its own export.
    let (wrapper_only, rest) = spans.split_at(1);
    assert_eq!(derive_after(vec![rest.to_vec(), wrapper_only.to_vec()]), attempts);
}

#[test]
fn openinference_asks_for_the_invocation_model_and_reports_the_served_one() {
    let attrs = vec![
        kv("openinference.span.kind", s("LLM")),
        kv("llm.system", s("openai")),
        kv("llm.model_name", s("gpt-4o-mini-2024-07-18")),
        kv("llm.invocation_parameters", s(r#"{"model": "gpt-4o-mini", "temperature": 0}"#)),
        kv("llm.token_count.prompt", s("12")),
        kv("llm.token_count.prompt_details.cache_write", Value::IntValue(4)),
    ];
    let a = &attempts_of_request(&request(vec![span(1, None, 0, attrs, false)]))[0];
    assert_eq!((a.model.as_str(), a.served_model.as_str()), ("gpt-4o-mini", "gpt-4o-mini-2024-07-18"));
    assert_eq!((a.tokens.input, a.tokens.cache_write_input), (Some(12), Some(4)));
}

#[test]
fn cloudflare_provider_and_numeric_error_type_are_read() {
    let attrs = vec![
        kv("gen_ai.model.provider", s("workers-ai")),
        kv("gen_ai.request.model", s("@cf/meta/llama-3.1-8b-instruct")),
        kv("error.type", s("503")),
    ];
    let a = &attempts_of_request(&request(vec![span(1, None, 0, attrs, true)]))[0];
    assert_eq!(
        (a.provider.as_str(), a.http_status, a.error_code.as_deref()),
        ("workers-ai", Some(503), None)
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
    let reasons: Vec<_> = out.decoded.rejections.iter().map(|r| (r.line, r.reason.as_str())).collect();
    assert_eq!(reasons[0].0, 2);
    assert!(reasons[0].1.contains("no provider (gen_ai.provider.name"), "{reasons:?}");
    assert!(reasons[1].1.contains("attempt.layer: `proxy` is not one of"), "{reasons:?}");
    assert!(attempts_of_request(&req).is_empty());
}

#[test]
fn an_out_of_range_status_is_a_warning_not_a_rejection() {
    let req = request(vec![span(
        1,
        None,
        0,
        genai(vec![kv("http.response.status_code", Value::IntValue(0))]),
        true,
    )]);
    let out = decode_request(&req);
    assert!(out.decoded.rejections.is_empty());
    assert_eq!(out.decoded.warnings.len(), 1, "{:?}", out.decoded.warnings);
    assert_eq!(attempts_of_request(&req)[0].http_status, None);
}

/// `attempt.extra.*` attributes of a model call reach the attempt's extra
/// fields and survive storing the spans and deriving the trace again.
#[test]
fn attempt_extra_attributes_become_extra_fields() {
    let parent = span(1, None, 0, vec![kv("attempt.extra.team", s("not-a-model-span"))], false);
    let call = span(
        2,
        Some(1),
        0,
        genai(vec![
            kv("attempt.extra.team", s("search")),
            kv("attempt.extra.priority", Value::IntValue(3)),
            kv("attempt.extra.", s("no key")),
            kv("team", s("not prefixed")),
        ]),
        false,
    );
    let attempts = derive_after(vec![vec![parent, call]]);
    assert_eq!(attempts.len(), 1);
    let extra: serde_json::Value = serde_json::from_str(attempts[0].extra.as_deref().unwrap()).unwrap();
    assert_eq!(extra, serde_json::json!({"team": "search", "priority": 3}));
}
