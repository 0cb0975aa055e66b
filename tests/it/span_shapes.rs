//! The span shapes real emitters send (docs/record-format.md, "Attempts
//! found by the call"): OpenLLMetry's model span beside the SDK's HTTP
//! spans, two instrumentations of one call, a resend count without attempt
//! spans, the Vercel AI SDK's API-suffixed provider ids and step spans, an
//! attempt span whose model span was lost. Each gives the same report stored
//! in one export, split in two in either order, and one span per export
//! forwards and backwards; the derived tables equal a rebuild.

use attempt_core::ingest::otlp;
use attempt_core::pricing::PriceTable;
use attempt_core::request::ReportFilter;
use attempt_ledger::store::{Batch, Store};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value as AttrValue};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status as SpanStatus};
use serde_json::{Value, json};

use crate::report_of;

const EPOCH_NS: u64 = 1_795_831_200_000_000_000;

fn kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(AttrValue::StringValue(value.into())) }),
        ..KeyValue::default()
    }
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(AttrValue::IntValue(value)) }),
        ..KeyValue::default()
    }
}

/// A span of trace `trace` over [from_ms, to_ms]; `error` sets ERROR.
fn span(
    trace: u8,
    id: u8,
    parent: Option<u8>,
    name: &str,
    (from_ms, to_ms): (u64, u64),
    attributes: Vec<KeyValue>,
    error: bool,
) -> Span {
    Span {
        trace_id: vec![trace; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: name.into(),
        start_time_unix_nano: EPOCH_NS + from_ms * 1_000_000,
        end_time_unix_nano: EPOCH_NS + to_ms * 1_000_000,
        attributes,
        status: Some(SpanStatus { code: if error { 2 } else { 1 }, message: String::new() }),
        ..Span::default()
    }
}

fn http(trace: u8, id: u8, parent: u8, at_ms: u64, status: i64) -> Span {
    let attributes = vec![kv("http.request.method", "POST"), int("http.response.status_code", status)];
    span(trace, id, Some(parent), "POST", (at_ms, at_ms + 200), attributes, status >= 400)
}

fn anthropic(extra: Vec<KeyValue>) -> Vec<KeyValue> {
    let mut attributes = vec![
        kv("gen_ai.operation.name", "chat"),
        kv("gen_ai.provider.name", "anthropic"),
        kv("gen_ai.request.model", "claude-sonnet-4-5"),
    ];
    attributes.extend(extra);
    attributes
}

fn usage(input: i64, output: i64) -> Vec<KeyValue> {
    vec![int("gen_ai.usage.input_tokens", input), int("gen_ai.usage.output_tokens", output)]
}

fn stored(exports: &[Vec<Span>]) -> Store {
    let store = Store::open_in_memory().unwrap();
    for spans in exports {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans { spans: spans.clone(), ..ScopeSpans::default() }],
                ..ResourceSpans::default()
            }],
        };
        let decoded = otlp::decode_request(&request).decoded;
        assert!(decoded.rejections.is_empty(), "{:?}", decoded.rejections);
        store.write_batches(&[Batch { spans: &decoded.spans, ..Batch::default() }]).unwrap();
    }
    store
}

fn summary(store: &Store) -> Value {
    let report = serde_json::to_value(report_of(store, &ReportFilter::default())).unwrap();
    let gaps = |family: &str| {
        let rows = store.metric_rows(&PriceTable::load(None).unwrap()).unwrap();
        rows.iter().filter(|r| r.family == family).map(|r| r.value as i64).sum::<i64>()
    };
    json!({
        "attempts": report["attempts"]["total"],
        "outcomes": report["workflows"],
        "tokens": report["tokens"]["total"],
        "cost": report["cost_usd"],
        "served": report["by_served_provider"],
        "amplification": report["amplification"],
        "orphan_attempt_spans": gaps("orphan_attempt_spans"),
        "ambiguous_calls": gaps("ambiguous_calls"),
    })
}

/// The summary of `spans`, after checking that every way of splitting
/// them across exports gives it, and that a rebuild leaves it as it was.
fn summary_of(spans: &[Span]) -> Value {
    let whole = stored(&[spans.to_vec()]);
    let expected = summary(&whole);
    let digest = whole.derived_digest().unwrap();
    whole.rebuild_derived().unwrap();
    assert_eq!(whole.derived_digest().unwrap(), digest, "a rebuild derives what the rounds derived");
    let half = spans.len() / 2;
    let (a, b) = (spans[..half].to_vec(), spans[half..].to_vec());
    let ways = [
        ("halves", vec![a.clone(), b.clone()]),
        ("halves reversed", vec![b, a]),
        ("one span an export", spans.iter().map(|s| vec![s.clone()]).collect()),
        ("one span an export, reversed", spans.iter().rev().map(|s| vec![s.clone()]).collect()),
    ];
    for (way, exports) in ways {
        assert_eq!(summary(&stored(&exports)), expected, "{way}");
    }
    expected
}

fn outcome(summary: &Value, name: &str) -> u64 {
    summary["outcomes"][name].as_u64().unwrap_or_else(|| panic!("{name} in {summary:#}"))
}

#[test]
fn openllmetry_http_spans_beside_its_model_span_are_its_attempts() {
    // The caller's span (1); anthropic.chat (2) never made current, so the
    // SDK's httpx spans are its siblings: 529, 529, 200. A second call (6)
    // after it: 200.
    let t = 0x21;
    let spans = vec![
        span(t, 1, None, "handle", (0, 5000), vec![], false),
        span(t, 2, Some(1), "anthropic.chat", (0, 1900), anthropic(usage(2000, 300)), false),
        http(t, 3, 1, 10, 529),
        http(t, 4, 1, 600, 529),
        http(t, 5, 1, 1500, 200),
        span(t, 6, Some(1), "anthropic.chat", (3000, 3900), anthropic(usage(1000, 100)), false),
        http(t, 7, 1, 3010, 200),
    ];
    let s = summary_of(&spans);
    assert_eq!(s["attempts"], 4, "{s:#}");
    assert_eq!(outcome(&s, "retry_recovery"), 1, "the trace is the workflow");
    assert_eq!(s["tokens"]["input"], 3000, "each call's tokens once");
    let sdk = s["amplification"].as_array().unwrap().iter().find(|l| l["layer"] == "sdk").cloned();
    assert_eq!(sdk.map(|l| l["attempts"].clone()), Some(json!(4)));
    assert_eq!(s["ambiguous_calls"], 0);
}

#[test]
fn the_sdk_s_own_span_beside_openllmetry_s_is_one_call() {
    // anthropic.messages.create (2: current, httpx children 4-6, resend
    // count 2) and anthropic.chat (3: OpenLLMetry, not current) describe
    // one call: same response id, same tokens.
    let t = 0x22;
    let same = |extra: Vec<KeyValue>| {
        let mut attributes = anthropic(usage(2500, 300));
        attributes
            .extend([kv("gen_ai.response.id", "msg_01"), int("gen_ai.usage.cache_read.input_tokens", 500)]);
        attributes.extend(extra);
        attributes
    };
    let sdk = same(vec![int("http.request.resend_count", 2), kv("http.request.method", "POST")]);
    let spans = vec![
        span(t, 1, None, "handle", (0, 3000), vec![], false),
        span(t, 2, Some(1), "anthropic.messages.create", (5, 1990), sdk.clone(), false),
        span(t, 3, Some(1), "anthropic.chat", (0, 2000), same(vec![]), false),
        http(t, 4, 2, 10, 529),
        http(t, 5, 2, 600, 529),
        http(t, 6, 2, 1500, 200),
    ];
    let s = summary_of(&spans);
    assert_eq!(s["attempts"], 3, "{s:#}");
    assert_eq!(outcome(&s, "retry_recovery"), 1);
    assert_eq!(
        (s["tokens"]["input"].as_i64(), s["tokens"]["cached_input"].as_i64()),
        (Some(2500), Some(500))
    );

    // Without the httpx spans the resend count says it: 2 failed, then one.
    let without_http = &spans[..3];
    let s = summary_of(without_http);
    assert_eq!(s["attempts"], 3, "{s:#}");
    assert_eq!(outcome(&s, "retry_recovery"), 1);
    assert_eq!(s["tokens"]["input"], 2500);

    // A call that failed has no response id: the spans nest in time.
    let failed = |extra: Vec<KeyValue>| {
        let mut attributes = anthropic(extra);
        attributes.push(kv("error.type", "overloaded_error"));
        attributes
    };
    let spans = vec![
        span(t, 1, None, "handle", (0, 3000), vec![], false),
        span(
            t,
            2,
            Some(1),
            "anthropic.messages.create",
            (5, 1990),
            failed(vec![int("http.request.resend_count", 2)]),
            true,
        ),
        span(t, 3, Some(1), "anthropic.chat", (0, 2000), failed(vec![]), true),
    ];
    let s = summary_of(&spans);
    assert_eq!(s["attempts"], 3, "{s:#}");
    assert_eq!(outcome(&s, "fail_closed"), 1);
}

#[test]
fn ai_sdk_provider_ids_with_an_api_suffix_are_the_provider() {
    // Legacy mode: ai.generateText (1, no GenAI attributes) over
    // ai.generateText.doGenerate (2) with the fetch under it (3).
    let t = 0x23;
    let call = vec![
        kv("gen_ai.system", "openai.chat"),
        kv("gen_ai.request.model", "gpt-4o-mini"),
        kv("ai.model.provider", "openai.chat"),
        int("ai.usage.inputTokens", 1000),
        int("ai.usage.outputTokens", 50),
        int("ai.usage.cachedInputTokens", 400),
    ];
    let spans = vec![
        span(t, 1, None, "ai.generateText", (0, 1000), vec![kv("ai.model.provider", "openai.chat")], false),
        span(t, 2, Some(1), "ai.generateText.doGenerate", (5, 990), call, false),
        http(t, 3, 2, 10, 200),
    ];
    let s = summary_of(&spans);
    assert_eq!(s["served"][0]["served_provider"], "openai", "{s:#}");
    // gpt-4o-mini: 600 input at $0.15/M, 400 cached at $0.075/M, 50 output at $0.60/M.
    let expected = (600.0 * 0.15 + 400.0 * 0.075 + 50.0 * 0.60) / 1e6;
    assert!((s["cost"]["total"].as_f64().unwrap() - expected).abs() < 1e-12, "{s:#}");
    assert_eq!(s["cost"]["unknown_cost_attempts"], 0);
}

#[test]
fn ai_sdk_step_spans_are_not_model_calls_and_lost_attempt_spans_are_counted() {
    // GenAI mode: a step span (2: agent_step, no provider, no model) over
    // the chat span (3) and its fetch (4). A retry's chat span (5) was lost:
    // its fetch (6) arrives alone.
    let t = 0x24;
    let chat = vec![
        kv("gen_ai.operation.name", "chat"),
        kv("gen_ai.provider.name", "openai"),
        kv("gen_ai.request.model", "gpt-4o-mini"),
        int("gen_ai.usage.input_tokens", 100),
        int("gen_ai.usage.output_tokens", 10),
    ];
    let spans = vec![
        span(t, 1, None, "invoke_agent", (0, 3000), vec![kv("gen_ai.operation.name", "invoke_agent")], false),
        span(t, 2, Some(1), "step 0", (0, 3000), vec![kv("gen_ai.operation.name", "agent_step")], false),
        http(t, 6, 5, 5, 500),
        span(t, 3, Some(2), "chat gpt-4o-mini", (1000, 2000), chat, false),
        http(t, 4, 3, 1010, 200),
    ];
    let s = summary_of(&spans);
    assert_eq!(s["attempts"], 1, "{s:#}");
    assert_eq!(s["orphan_attempt_spans"], 1);
    assert_eq!(outcome(&s, "primary_success"), 1);
}
