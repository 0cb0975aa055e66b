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

/// `span` over [from_ms, to_ms] after the tests' epoch, named `name`.
fn during(mut span: Span, name: &str, from_ms: u64, to_ms: u64) -> Span {
    let epoch = 1_795_831_200_000_000_000;
    span.name = name.into();
    span.start_time_unix_nano = epoch + from_ms * 1_000_000;
    span.end_time_unix_nano = epoch + to_ms * 1_000_000;
    span
}

fn anthropic(extra: Vec<KeyValue>) -> Vec<KeyValue> {
    let mut attrs = vec![
        kv("gen_ai.operation.name", s("chat")),
        kv("gen_ai.provider.name", s("anthropic")),
        kv("gen_ai.request.model", s("claude-sonnet-4-5")),
    ];
    attrs.extend(extra);
    attrs
}

fn usage() -> Vec<KeyValue> {
    vec![
        kv("gen_ai.usage.input_tokens", Value::IntValue(2000)),
        kv("gen_ai.usage.output_tokens", Value::IntValue(300)),
    ]
}

fn shape(spans: Vec<Span>) -> TraceCalls {
    let links: Vec<SpanLink> =
        decode_request(&request(spans)).decoded.spans.iter().map(SpanLink::of).collect();
    trace_calls(&links)
}

/// OpenLLMetry's span never made current: the SDK's HTTP spans sit beside
/// it under the caller's span.
fn openllmetry_call(call: u8, caller: u8, at_ms: u64, statuses: &[i64]) -> Vec<Span> {
    let last_ok = statuses.last() == Some(&200);
    let mut spans = vec![during(
        span(call, Some(caller), 0, anthropic(if last_ok { usage() } else { vec![] }), !last_ok),
        "anthropic.chat",
        at_ms,
        at_ms + 1000,
    )];
    for (n, status) in statuses.iter().enumerate() {
        let from = at_ms + 10 + n as u64 * 300;
        spans.push(during(
            http_child(call + 1 + n as u8, caller, 0, *status, *status >= 400),
            "POST",
            from,
            from + 200,
        ));
    }
    spans
}

#[test]
fn http_spans_beside_a_call_that_never_became_current_are_its_attempts() {
    let caller = span(1, None, 0, vec![], false);
    let spans =
        [vec![caller], openllmetry_call(10, 1, 0, &[529, 529, 200]), openllmetry_call(20, 1, 2000, &[200])]
            .concat();
    let attempts = derive_after(vec![spans.clone()]);
    assert_eq!(attempts.len(), 4, "{attempts:#?}");
    assert!(attempts.iter().all(|a| a.layer == Layer::Sdk));
    assert_eq!(attempts.iter().filter(|a| a.status == Status::Error).count(), 2);
    let delivered_tokens: i64 = attempts.iter().filter_map(|a| a.tokens.input).sum();
    assert_eq!(delivered_tokens, 4000, "each call's tokens once, on the attempt that delivered");
    assert_eq!(shape(spans.clone()).ambiguous_calls, 0);
    // Split and reversed: the same attempts.
    let (a, b) = spans.split_at(3);
    assert_eq!(derive_after(vec![b.to_vec(), a.to_vec()]), attempts);
    assert_eq!(derive_after(spans.iter().rev().map(|s| vec![s.clone()]).collect()), attempts);
}

#[test]
fn http_spans_two_overlapping_calls_could_own_are_nobody_s() {
    let caller = span(1, None, 0, vec![], false);
    // Two concurrent calls: an HTTP span inside both is no call's attempt.
    let spans =
        [vec![caller], openllmetry_call(10, 1, 0, &[200]), openllmetry_call(20, 1, 0, &[200])].concat();
    let calls = shape(spans.clone());
    assert_eq!(calls.ambiguous_calls, 2);
    assert!(calls.calls.values().all(|c| c.http.is_empty()));
    assert_eq!(derive_after(vec![spans]).len(), 2, "one attempt per model span");
    // A host that differs decides it.
    let host = |mut s: Span, h: &str| {
        s.attributes.push(kv("server.address", s_(h)));
        s
    };
    let mut a = openllmetry_call(10, 1, 0, &[200]);
    let mut b = openllmetry_call(20, 1, 0, &[200]);
    a[0] = host(a[0].clone(), "api.anthropic.com");
    a[1] = host(a[1].clone(), "api.anthropic.com");
    b[0] = host(b[0].clone(), "eu.anthropic.example");
    b[1] = host(b[1].clone(), "EU.anthropic.example");
    let calls = shape([a, b].concat());
    assert_eq!(calls.ambiguous_calls, 0);
    assert!(calls.calls.values().all(|c| c.http.len() == 1), "{calls:?}");
}

fn s_(v: &str) -> Value {
    s(v)
}

/// The Anthropic SDK's own span (current, with httpx children and a resend
/// count) beside OpenLLMetry's (not current), for one call.
fn sdk_and_openllmetry(response_id: Option<&str>, httpx: bool, ok: bool) -> Vec<Span> {
    let mut sdk_attrs = anthropic(vec![
        kv("http.request.method", s("POST")),
        kv("server.address", s("127.0.0.1")),
        kv("http.request.resend_count", Value::IntValue(2)),
    ]);
    let mut llm_attrs = anthropic(vec![]);
    if ok {
        sdk_attrs.push(kv("gen_ai.usage.cache_read.input_tokens", Value::IntValue(500)));
        sdk_attrs.extend(usage());
        llm_attrs.extend(usage());
    }
    if let Some(id) = response_id {
        sdk_attrs.push(kv("gen_ai.response.id", s(id)));
        llm_attrs.push(kv("gen_ai.response.id", s(id)));
    }
    let mut spans = vec![
        span(1, None, 0, vec![], false),
        during(span(2, Some(1), 0, sdk_attrs, !ok), "anthropic.messages.create", 5, 1990),
        during(span(3, Some(1), 0, llm_attrs, !ok), "anthropic.chat", 0, 2000),
    ];
    if httpx {
        for (n, status) in [529, 529, if ok { 200 } else { 529 }].iter().enumerate() {
            let from = 10 + n as u64 * 600;
            spans.push(during(
                http_child(4 + n as u8, 2, 0, *status, *status >= 400),
                "POST",
                from,
                from + 300,
            ));
        }
    }
    spans
}

#[test]
fn two_instrumentations_of_one_call_are_one_call() {
    for (id, httpx, ok) in [(Some("msg_1"), true, true), (Some("msg_1"), false, true), (None, false, false)] {
        let spans = sdk_and_openllmetry(id, httpx, ok);
        let attempts = derive_after(vec![spans.clone()]);
        assert_eq!(attempts.len(), 3, "{id:?} {httpx} {ok}: {attempts:#?}");
        assert_eq!(attempts.iter().filter(|a| a.status == Status::Error).count(), if ok { 2 } else { 3 });
        assert_eq!(attempts.iter().filter_map(|a| a.tokens.input).sum::<i64>(), if ok { 2000 } else { 0 });
        assert_eq!(
            attempts.iter().filter_map(|a| a.tokens.cached_input).sum::<i64>(),
            if ok { 500 } else { 0 }
        );
        assert!(attempts.iter().all(|a| a.layer == Layer::Sdk));
        let calls = shape(spans.clone());
        assert_eq!(calls.calls.len(), 1);
        assert_eq!(calls.calls.values().next().unwrap().same, vec!["03".repeat(8)]);
        let (a, b) = spans.split_at(2);
        assert_eq!(derive_after(vec![b.to_vec(), a.to_vec()]), attempts, "split, reversed");
    }
    // Two calls of one instrumentation that nest in time stay two calls.
    let inner = during(span(2, Some(1), 0, anthropic(usage()), false), "anthropic.chat", 100, 200);
    let outer = during(span(3, Some(1), 0, anthropic(usage()), false), "anthropic.chat", 0, 1000);
    assert_eq!(derive_after(vec![vec![span(1, None, 0, vec![], false), inner, outer]]).len(), 2);
}

#[test]
fn a_resend_count_without_attempt_spans_is_that_many_failed_attempts_first() {
    let spans = sdk_and_openllmetry(Some("msg_9"), false, true)[..2].to_vec();
    let mut attempts = derive_after(vec![spans]);
    assert_eq!(attempts.len(), 3);
    attempts.sort_by_key(|a| (a.started_at, <&str>::from(a.status), a.attempt_id.clone()));
    let trace = "ab".repeat(16);
    let call = "02".repeat(8);
    assert_eq!(attempts[0].attempt_id, format!("{trace}-{call}-001"));
    assert_eq!(attempts[1].attempt_id, format!("{trace}-{call}-002"));
    assert_eq!(attempts[2].attempt_id, format!("{trace}{call}"));
    assert!(
        attempts[..2]
            .iter()
            .all(|a| a.status == Status::Error && a.http_status.is_none() && a.tokens.input.is_none())
    );
    assert_eq!(attempts[2].tokens.input, Some(2000));
    assert!(attempts[0].attempt_id < attempts[2].attempt_id, "resent attempts sort first at equal start");
}

#[test]
fn spans_that_claim_no_model_call_are_neither_calls_nor_rejections() {
    let step = vec![kv("gen_ai.operation.name", s("agent_step"))];
    let chat_without_provider =
        vec![kv("gen_ai.operation.name", s("chat")), kv("gen_ai.request.model", s("gpt-4o"))];
    let req = request(vec![span(1, None, 0, step, false), span(2, Some(1), 0, genai(vec![]), false)]);
    let out = decode_request(&req);
    assert!(out.decoded.rejections.is_empty(), "{:?}", out.decoded.rejections);
    assert_eq!(out.model_spans, 1);
    assert_eq!(attempts_of_request(&req).len(), 1);
    let out = decode_request(&request(vec![span(3, None, 0, chat_without_provider, false)]));
    assert_eq!(out.decoded.rejections.len(), 1, "a span that claims a model call and lacks the provider");
}

#[test]
fn the_ai_sdk_usage_and_first_chunk_spellings_are_read() {
    let attrs = vec![
        kv("gen_ai.system", s("openai.chat")),
        kv("gen_ai.request.model", s("gpt-4o-mini")),
        kv("ai.usage.inputTokens", Value::IntValue(1000)),
        kv("ai.usage.outputTokens", Value::IntValue(40)),
        kv("ai.usage.inputTokenDetails.cacheReadTokens", Value::IntValue(600)),
        kv("ai.usage.inputTokenDetails.cacheWriteTokens", Value::IntValue(100)),
        kv("ai.response.msToFirstChunk", Value::DoubleValue(180.0)),
    ];
    let a = &attempts_of_request(&request(vec![span(1, None, 0, attrs, false)]))[0];
    assert_eq!(a.provider, "openai.chat", "the spelling received; the store applies the aliases");
    assert_eq!(
        (a.tokens.input, a.tokens.output, a.tokens.cached_input, a.tokens.cache_write_input),
        (Some(1000), Some(40), Some(600), Some(100))
    );
    assert_eq!(a.ttft_ms, Some(180.0));
    let seconds = vec![
        kv("gen_ai.provider.name", s("openai")),
        kv("gen_ai.request.model", s("gpt-4o-mini")),
        kv("gen_ai.client.operation.time_to_first_chunk", Value::DoubleValue(0.25)),
    ];
    assert_eq!(attempts_of_request(&request(vec![span(1, None, 0, seconds, false)]))[0].ttft_ms, Some(250.0));
}

#[test]
fn an_http_span_whose_model_span_never_arrives_is_an_orphan() {
    let spans = vec![
        span(1, None, 0, vec![], false),
        during(span(2, Some(1), 0, genai(vec![]), false), "chat", 0, 1000),
        during(http_child(3, 2, 0, 200, false), "POST", 10, 900),
        // The failed attempt's own chat span (id 4) was lost.
        during(http_child(5, 4, 0, 500, true), "POST", 0, 5),
    ];
    let calls = shape(spans.clone());
    assert_eq!(calls.orphan_attempt_spans, 1);
    assert_eq!(derive_after(vec![spans]).len(), 1);
}

#[test]
fn openlit_s_zero_cost_beside_tokens_is_no_price() {
    let with_cost = |cost: f64, tokens: i64| {
        let attrs = vec![
            kv("gen_ai.operation.name", s("chat")),
            kv("gen_ai.provider.name", s("openai")),
            kv("gen_ai.request.model", s("gpt-4o-mini")),
            kv("gen_ai.usage.input_tokens", Value::IntValue(tokens)),
            kv("gen_ai.usage.cost", Value::DoubleValue(cost)),
        ];
        attempts_of_request(&request(vec![span(1, None, 0, attrs, false)]))[0].cost
    };
    assert_eq!(with_cost(0.0, 120), None, "priced from the table instead");
    assert_eq!(with_cost(0.0, 0), Some(PicoUsd::from_usd(0.0).unwrap()), "no tokens: free");
    assert_eq!(with_cost(0.5, 120), PicoUsd::from_usd(0.5));
}

#[test]
fn many_sequential_calls_beside_their_http_spans_each_own_theirs() {
    // An agent's 300 OpenLLMetry calls under one span, one after another,
    // each with one HTTP span beside it: every call owns exactly its own.
    let mut spans = vec![span(1, None, 0, vec![], false)];
    let mut trace = Vec::new();
    for n in 0..300u64 {
        let (call, http) = (2 * n + 2, 2 * n + 3);
        let mut model = span(0, Some(1), 0, anthropic(usage()), false);
        model.span_id = call.to_be_bytes().to_vec();
        let mut get = during(http_child(0, 1, 0, 200, false), "POST", n * 100 + 10, n * 100 + 60);
        get.span_id = http.to_be_bytes().to_vec();
        trace.push(during(model, "anthropic.chat", n * 100, n * 100 + 80));
        trace.push(get);
    }
    spans.extend(trace);
    let calls = shape(spans);
    assert_eq!(calls.calls.len(), 300);
    assert_eq!(calls.ambiguous_calls, 0);
    assert!(calls.calls.values().all(|c| c.http.len() == 1));
}

#[test]
fn spans_with_ids_of_the_wrong_length_are_refused_with_the_reason_never_dropped() {
    let mut empty = span(1, None, 0, genai(vec![]), false);
    empty.span_id.clear();
    let mut short_trace = span(2, None, 0, genai(vec![]), false);
    short_trace.trace_id = vec![0xaa, 0xbb, 0xcc];
    let mut zeros = span(3, None, 0, genai(vec![]), false);
    zeros.trace_id = vec![0; 16];
    let mut long_parent = http_child(5, 4, 0, 200, false);
    long_parent.parent_span_id = vec![4; 9];
    let decoded = decode_request(&request(vec![empty, short_trace, zeros, long_parent])).decoded;
    assert_eq!(decoded.rejected, 4);
    assert!(decoded.spans.is_empty());
    let reasons: Vec<&str> = decoded.rejections.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "span (no span_id): span_id is 0 bytes, OTLP requires 8",
            "span 0202020202020202: trace_id is 3 bytes, OTLP requires 16",
            "span 0303030303030303: trace_id is all zeros, which OTLP reserves for \"no id\"",
            "span 0505050505050505: parent_span_id is 9 bytes, OTLP requires 8",
        ]
    );
}

#[test]
fn attempt_ids_name_one_pair_of_ids_whatever_their_lengths() {
    // Spans stored before ids were checked may have any length: a pair
    // never shares its attempt id with another pair.
    assert_eq!(
        span_attempt_id(&"ab".repeat(16), &"01".repeat(8)),
        format!("{}{}", "ab".repeat(16), "01".repeat(8))
    );
    assert_ne!(span_attempt_id("aabbcc", "ddeeff0011"), span_attempt_id("aabbccdd", "eeff0011"));
    assert!(resent_attempt_id("aabbcc", "dd", 1) < span_attempt_id("aabbcc", "dd"));
}

fn warned_or_refused(decoded: &Decoded, key: &str) -> bool {
    decoded.rejected > 0 || decoded.warnings.iter().any(|w| w.reason.starts_with(key))
}

/// What an attribute value must read as, as an integer count: `None` when
/// it is not one.
fn exact_integer(value: &Value) -> Option<i64> {
    match value {
        Value::IntValue(n) => Some(*n),
        Value::DoubleValue(d) if d.fract() == 0.0 && d.abs() < 9.0e15 => Some(*d as i64),
        Value::StringValue(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn any_attribute_value() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    prop_oneof![
        any::<i64>().prop_map(Value::IntValue),
        (-1e20f64..1e20).prop_map(Value::DoubleValue),
        prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(12.5), Just(12.0), Just(-0.0)]
            .prop_map(Value::DoubleValue),
        "[ 0-9a-z.e+-]{0,24}".prop_map(Value::StringValue),
        any::<i64>().prop_map(|n| Value::StringValue(n.to_string())),
        any::<bool>().prop_map(Value::BoolValue),
        Just(Value::BytesValue(vec![1, 2])),
    ]
}

proptest::proptest! {
    /// Every value of a token count, a status or a duration is stored as
    /// read, ignored with a warning that names its key, or the span is
    /// refused with a reason: none silently becomes something else.
    #[test]
    fn numbers_are_read_exactly_warned_about_or_refused(value in any_attribute_value(), key in 0usize..4) {
        let key = ["gen_ai.usage.input_tokens", "gen_ai.usage.cache_read.input_tokens",
                   "http.response.status_code", "attempt.retry_after_ms"][key];
        let mut attrs: Vec<KeyValue> = genai(vec![]).into_iter().filter(|a| a.key != key).collect();
        attrs.push(kv(key, value.clone()));
        let req = request(vec![span(1, None, 0, attrs, false)]);
        let decoded = decode_request(&req).decoded;
        let attempts = attempts_of_request(&req);
        let blank = matches!(&value, Value::StringValue(s) if s.trim().is_empty());
        if decoded.rejected > 0 {
            proptest::prop_assert!(attempts.is_empty());
            proptest::prop_assert!(!decoded.rejections[0].reason.is_empty());
        } else {
            let a = &attempts[0];
            let stored: Option<f64> = match key {
                "gen_ai.usage.input_tokens" => a.tokens.input.map(|n| n as f64),
                "gen_ai.usage.cache_read.input_tokens" => a.tokens.cached_input.map(|n| n as f64),
                "http.response.status_code" => a.http_status.map(f64::from),
                _ => a.retry_after_ms,
            };
            let expected: Option<f64> = if key == "attempt.retry_after_ms" {
                match &value {
                    Value::IntValue(n) => Some(*n as f64),
                    Value::DoubleValue(d) => Some(*d).filter(|d| d.is_finite()),
                    Value::StringValue(s) => s.trim().parse::<f64>().ok().filter(|d| d.is_finite()),
                    _ => None,
                }
            } else {
                exact_integer(&value).map(|n| n as f64)
            };
            match (stored, expected) {
                (Some(got), Some(want)) if got == want => {}
                // Cached tokens above the input raise the input (a counted
                // warning); a status outside 100-599 is dropped with one.
                (_, _) if warned_or_refused(&decoded, key) || blank
                    || (key == "gen_ai.usage.cache_read.input_tokens" && decoded.warned > 0) => {}
                (got, want) => proptest::prop_assert!(false, "{key} = {value:?}: stored {got:?}, read {want:?}, no warning"),
            }
        }
    }
}

/// A request of several resources and scopes: model spans with HTTP
/// children, a span with bad ids, and traces without any call.
fn mixed_request() -> ExportTraceServiceRequest {
    let mut other_trace = span(9, None, 0, vec![], false);
    other_trace.trace_id = vec![0xcd; 16];
    let mut bad_ids = span(7, None, 0, genai(vec![]), false);
    bad_ids.span_id = vec![7; 5];
    let call = span(1, Some(8), 0, genai(vec![kv("gen_ai.usage.cache_read.input_tokens", s("abc"))]), false);
    let scope = |spans| ScopeSpans {
        spans,
        schema_url: "https://opentelemetry.io/schemas/1.26.0".into(),
        ..ScopeSpans::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![
            ResourceSpans {
                scope_spans: vec![scope(vec![call, bad_ids]), scope(vec![other_trace])],
                ..ResourceSpans::default()
            },
            ResourceSpans {
                scope_spans: vec![scope(vec![
                    http_child(2, 1, 0, 529, true),
                    span(8, None, 0, vec![], false),
                ])],
                ..ResourceSpans::default()
            },
        ],
    }
}

fn same_decoding(one: &DecodedSpans, other: &DecodedSpans) -> bool {
    one.model_spans == other.model_spans
        && one.decoded.spans == other.decoded.spans
        && one.decoded.rejections == other.decoded.rejections
        && one.decoded.warnings == other.decoded.warnings
}

#[test]
fn a_protobuf_body_decoded_span_by_span_sorts_as_the_whole_request() {
    let req = mixed_request();
    let whole = decode_request(&req);
    let mut offered = 0;
    let by_span = decode_protobuf(&req.encode_to_vec(), &mut |n| {
        offered += n;
        true
    })
    .unwrap();
    assert!(same_decoding(&by_span, &whole), "{by_span:?}\n{whole:?}");
    assert_eq!(by_span.decoded.spans.len(), 3, "the call, its HTTP child and the root above it");
    assert_eq!((by_span.decoded.rejected, by_span.decoded.warned), (1, 1));
    let kept: usize =
        by_span.decoded.spans.iter().filter(|s| s.kind != SpanKind::Link).map(SpanRecord::held_bytes).sum();
    assert!(offered >= kept, "offered {offered} bytes for {kept} kept");
    assert!(offered <= kept_bytes_at_most(&req.encode_to_vec()).unwrap());
}

#[test]
fn a_request_that_outgrows_what_it_is_admitted_is_refused() {
    let spans: Vec<Span> = (1..=200u8).map(|i| span(i, None, 0, genai(vec![]), false)).collect();
    let body = request(spans).encode_to_vec();
    let mut granted = 0;
    let refused = decode_protobuf(&body, &mut |n| {
        granted += n;
        granted <= 8 * 1024
    });
    assert_eq!(refused.unwrap_err(), ProtobufError::OverBudget);
    assert!(decode_protobuf(&body, &mut |_| true).is_ok());
}

proptest::proptest! {
    /// A body is refused span by span exactly when prost refuses the whole
    /// request: cut anywhere, or with any byte changed.
    #[test]
    fn protobuf_bodies_are_refused_exactly_when_prost_refuses_them(cut in 0usize..2000, at in 0usize..2000, byte: u8) {
        let mut body = mixed_request().encode_to_vec();
        if at < body.len() {
            body[at] = byte;
        }
        body.truncate(cut.min(body.len()));
        let whole = ExportTraceServiceRequest::decode(body.as_slice());
        let mut offered = 0;
        let by_span = decode_protobuf(&body, &mut |n| {
            offered += n;
            true
        });
        match (&whole, &by_span) {
            (Ok(req), Ok(got)) => {
                proptest::prop_assert!(same_decoding(got, &decode_request(req)));
                let bound = kept_bytes_at_most(&body).unwrap();
                proptest::prop_assert!(offered <= bound, "offered {offered}, bound {bound}");
            }
            (Err(_), Err(ProtobufError::Undecodable(_))) => {}
            _ => proptest::prop_assert!(false, "prost: {whole:?}, span by span: {by_span:?}"),
        }
    }
}

/// OTLP ignores unknown keys, so an attempt record sent as OTLP read as an
/// empty export and vanished, uncounted: it is refused, and an empty
/// export stays an empty export.
#[test]
fn an_object_of_other_keys_only_is_no_export() {
    let err = decode_json(r#"{"workflow_id":"w1","status":"ok"}"#).unwrap_err();
    assert!(err.contains("no resourceSpans (keys: status, workflow_id)"), "{err}");
    let empty = decode_json("{}").unwrap();
    assert_eq!((empty.model_spans, empty.decoded.received()), (0, 0));
    assert!(decode_json(r#"{"resourceSpans":[]}"#).is_ok());
}

mod changes {
    use super::*;

    fn id(n: u8) -> String {
        format!("{n:02x}").repeat(8)
    }

    fn trace() -> String {
        "ab".repeat(16)
    }

    fn calls_of(changes: &CallChanges) -> Vec<&str> {
        changes.derive.iter().map(|(call, _)| call.as_str()).collect()
    }

    fn sorted(mut ids: Vec<String>) -> Vec<String> {
        ids.sort();
        ids.dedup();
        ids
    }

    #[test]
    fn a_call_that_gains_an_attempt_is_derived_again_and_its_old_attempts_retired() {
        let full = vec![
            span(3, None, 0, genai(vec![]), false),
            http_child(4, 3, 0, 503, true),
            http_child(5, 3, 1, 200, false),
        ];
        let (before, after) = (shape(full[..2].to_vec()), shape(full.clone()));
        let changes = TraceCalls::changes(&trace(), &before, &after);
        assert_eq!(calls_of(&changes), [id(3)]);
        assert_eq!(changes.derive[0].1.http, [id(4), id(5)]);
        let expected = [4, 5].map(|n| span_attempt_id(&trace(), &id(n))).to_vec();
        assert_eq!(sorted(changes.retired_attempt_ids), expected);
    }

    #[test]
    fn a_call_whose_spans_did_not_change_is_left_as_stored() {
        let caller = span(1, None, 0, vec![], false);
        let first = openllmetry_call(10, 1, 0, &[529, 200]);
        let second = openllmetry_call(20, 1, 2000, &[200]);
        let before = shape([vec![caller.clone()], first.clone()].concat());
        let after = shape([vec![caller], first, second].concat());
        let changes = TraceCalls::changes(&trace(), &before, &after);
        assert_eq!(calls_of(&changes), [id(20)]);
        assert_eq!(changes.retired_attempt_ids, [span_attempt_id(&trace(), &id(21))]);
        assert_eq!(TraceCalls::changes(&trace(), &after, &after), CallChanges::default());
    }

    #[test]
    fn a_call_that_becomes_a_wrapper_is_retired_and_the_call_inside_it_derived() {
        let wrapper = vec![
            kv("openinference.span.kind", s("LLM")),
            kv("llm.provider", s("openai")),
            kv("llm.model_name", s("gpt-4o-mini")),
        ];
        let outer = span(1, None, 0, wrapper, false);
        let inner = span(3, Some(1), 0, genai(vec![]), false);
        let before = shape(vec![outer.clone()]);
        let after = shape(vec![outer, inner]);
        let changes = TraceCalls::changes(&trace(), &before, &after);
        assert_eq!(calls_of(&changes), [id(3)]);
        let expected = [1, 3].map(|n| span_attempt_id(&trace(), &id(n))).to_vec();
        assert_eq!(sorted(changes.retired_attempt_ids), expected);
    }

    #[test]
    fn a_call_whose_spans_leave_it_is_retired_without_being_derived() {
        let call = openllmetry_call(10, 1, 0, &[200]);
        let before = shape([vec![span(1, None, 0, vec![], false)], call].concat());
        let changes = TraceCalls::changes(&trace(), &before, &TraceCalls::default());
        assert!(changes.derive.is_empty());
        assert_eq!(changes.retired_attempt_ids, [span_attempt_id(&trace(), &id(11))]);
    }
}

#[test]
fn billing_account_and_service_tier_are_read_in_every_spelling() {
    let tier_of = |attrs: Vec<KeyValue>| {
        let attempts = attempts_of_request(&request(vec![span(1, None, 0, genai(attrs), false)]));
        (attempts[0].billing_account.clone(), attempts[0].service_tier.clone())
    };
    assert_eq!(tier_of(vec![]), (None, None));
    assert_eq!(
        tier_of(vec![
            kv("attempt.billing_account", s("proj_A")),
            kv("openai.response.service_tier", s("flex"))
        ]),
        (Some("proj_A".into()), Some("flex".into()))
    );
    // The tier that served wins over the one asked for, in either spelling.
    assert_eq!(
        tier_of(vec![
            kv("openai.request.service_tier", s("auto")),
            kv("gen_ai.openai.response.service_tier", s("default"))
        ])
        .1,
        Some("default".into())
    );
    assert_eq!(
        tier_of(vec![kv("gen_ai.openai.request.service_tier", s("priority"))]).1,
        Some("priority".into())
    );
    assert_eq!(
        tier_of(vec![
            kv("attempt.service_tier", s("batch")),
            kv("openai.response.service_tier", s("default"))
        ])
        .1,
        Some("batch".into())
    );
}

#[test]
fn rate_limit_headers_and_attributes_are_each_attempts_headroom() {
    use crate::ratelimit::{LimitKind, Window};
    use opentelemetry_proto::tonic::common::v1::ArrayValue;
    let header = |name: &str, value: &str| {
        kv(
            &format!("http.response.header.{name}"),
            Value::ArrayValue(ArrayValue { values: vec![AnyValue { value: Some(s(value)) }] }),
        )
    };
    let mut refused = http_child(2, 1, 0, 429, true);
    refused.attributes.extend([
        header("x-ratelimit-remaining-requests", "0"),
        header("x-ratelimit-limit-requests", "500"),
        header("x-ratelimit-reset-requests", "1s"),
    ]);
    let mut served = http_child(3, 1, 2, 200, false);
    served.attributes.extend([
        header("x-ratelimit-remaining-tokens", "29000"),
        header("x-ratelimit-limit-tokens", "30000"),
    ]);
    let call = span(
        1,
        None,
        0,
        genai(vec![
            kv("attempt.ratelimit.remaining_requests", Value::IntValue(499)),
            kv("attempt.ratelimit.limit_requests", Value::IntValue(500)),
        ]),
        false,
    );
    // Stored and derived: the headers survive what a stored span keeps.
    let mut attempts = derive_after(vec![vec![call, refused, served]]);
    attempts.sort_by_key(|a| a.started_at);
    assert_eq!(
        *attempts[0].headroom.window(LimitKind::Requests),
        Window { remaining: Some(0), limit: Some(500), reset_ms: Some(1000) }
    );
    assert_eq!(attempts[0].headroom.window(LimitKind::Tokens).remaining, None, "absent is absent");
    assert_eq!(attempts[1].headroom.window(LimitKind::Tokens).remaining, Some(29000));
    assert_eq!(
        attempts[1].headroom.window(LimitKind::Requests).remaining,
        Some(499),
        "the call's own attributes are its last try's"
    );

    // Anthropic's headers as plain strings on the model span; an unreadable
    // one is a warning, not a 0.
    let anthropic = span(
        1,
        None,
        0,
        genai(vec![
            kv("http.response.header.anthropic-ratelimit-tokens-remaining", s("12")),
            kv("http.response.header.anthropic-ratelimit-tokens-limit", s("many")),
        ]),
        false,
    );
    let req = request(vec![anthropic]);
    let attempts = attempts_of_request(&req);
    let tokens = attempts[0].headroom.window(LimitKind::Tokens);
    assert_eq!((tokens.remaining, tokens.limit), (Some(12), None));
    assert!(
        decode_request(&req)
            .decoded
            .warnings
            .iter()
            .any(|w| w.reason.contains("anthropic-ratelimit-tokens-limit")),
        "{:?}",
        decode_request(&req).decoded.warnings
    );
}

#[test]
fn the_ratelimit_attributes_name_the_record_fields_in_order() {
    for (attribute, (field, _, _)) in RATELIMIT_ATTRIBUTES.iter().zip(crate::ratelimit::FIELDS) {
        assert_eq!(attribute.strip_prefix("attempt.").unwrap().replacen('.', "_", 1), field);
    }
}
