//! Parentage that lies: the HTTP spans of a call, and the model spans that
//! describe it, wherever an instrumentation that never makes its spans
//! current leaves them (docs/record-format.md, "Attempts found by the
//! call").

use super::*;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status as SpanStatus};
use proptest::prelude::*;

const EPOCH_NS: u64 = 1_795_831_200_000_000_000;

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}

fn text(v: &str) -> Value {
    Value::StringValue(v.into())
}

/// Span `id` of the one trace, under `parent`, over [from_ms, to_ms].
fn span(id: u16, parent: Option<u16>, name: &str, from_ms: u64, to_ms: u64, attrs: Vec<KeyValue>) -> Span {
    let error = attrs.iter().any(|a| {
        a.key == "http.response.status_code"
            && matches!(a.value.as_ref().and_then(|v| v.value.as_ref()), Some(Value::IntValue(n)) if *n >= 400)
    });
    Span {
        trace_id: vec![0xcd; 16],
        span_id: u64::from(id).to_be_bytes().to_vec(),
        parent_span_id: parent.map(|p| u64::from(p).to_be_bytes().to_vec()).unwrap_or_default(),
        name: name.into(),
        start_time_unix_nano: EPOCH_NS + from_ms * 1_000_000,
        end_time_unix_nano: EPOCH_NS + to_ms * 1_000_000,
        attributes: attrs,
        status: Some(SpanStatus { code: if error { 2 } else { 1 }, message: String::new() }),
        ..Span::default()
    }
}

/// An OpenInference LLM span (a framework's, or the SDK instrumentation's),
/// with the call's tokens when it delivered.
fn llm(tokens: Option<(i64, i64)>, model: &str) -> Vec<KeyValue> {
    let mut attrs = vec![
        kv("openinference.span.kind", text("LLM")),
        kv("llm.provider", text("openai")),
        kv("llm.model_name", text(model)),
    ];
    if let Some((input, output)) = tokens {
        attrs.push(kv("llm.token_count.prompt", Value::IntValue(input)));
        attrs.push(kv("llm.token_count.completion", Value::IntValue(output)));
    }
    attrs
}

fn chain() -> Vec<KeyValue> {
    vec![kv("openinference.span.kind", text("CHAIN"))]
}

fn post(status: i64) -> Vec<KeyValue> {
    vec![
        kv("http.request.method", text("POST")),
        kv("url.full", text("https://api.openai.com/v1/chat/completions")),
        kv("http.response.status_code", Value::IntValue(status)),
    ]
}

/// The attempts of `exports` of one trace, stored in that order, as
/// (attempt id, HTTP status, input tokens, output tokens) by start.
/// An attempt as these tests compare it: id, HTTP status, input and output tokens.
type Seen = (String, Option<i32>, Option<i64>, Option<i64>);

fn attempts(exports: Vec<Vec<Span>>) -> Vec<Seen> {
    let mut stored: Vec<SpanRecord> = Vec::new();
    for spans in exports {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans { spans, ..ScopeSpans::default() }],
                ..ResourceSpans::default()
            }],
        };
        for record in decode_request(&request).decoded.spans {
            if !stored.iter().any(|r| r.span_id == record.span_id) {
                stored.push(record);
            }
        }
    }
    let mut attempts = derive_trace(&stored);
    attempts.sort_by(|a, b| (a.started_at, &a.attempt_id).cmp(&(b.started_at, &b.attempt_id)));
    attempts.into_iter().map(|a| (a.attempt_id, a.http_status, a.tokens.input, a.tokens.output)).collect()
}

fn shape(spans: &[Span]) -> TraceCalls {
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans: spans.to_vec(), ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    };
    let links: Vec<SpanLink> = decode_request(&request).decoded.spans.iter().map(SpanLink::of).collect();
    trace_calls(&links)
}

/// Which HTTP statuses the attempts have, in order, and the tokens counted.
fn statuses_and_tokens(got: &[Seen]) -> (Vec<i32>, i64, i64) {
    let statuses = got.iter().filter_map(|a| a.1).collect();
    let input = got.iter().filter_map(|a| a.2).sum();
    let output = got.iter().filter_map(|a| a.3).sum();
    (statuses, input, output)
}

/// The framework shape the issue measured: app span (1) -> chain (2) ->
/// framework LLM span (3), never current; the SDK's HTTP spans are children
/// of the app span. With `sdk`, the SDK instrumentation's own span (4), which
/// is current, sits beside the chain under the app span, inside the
/// framework span's interval, and the HTTP spans are its children.
fn framework_call(sdk: bool, at_ms: u64, base: u16, statuses: &[i64]) -> Vec<Span> {
    let ok = statuses.last() == Some(&200);
    let tokens = ok.then_some((120, 8));
    let end = at_ms + 1000;
    let mut spans = vec![
        span(base + 2, Some(1), "RunnableSequence", at_ms, end, chain()),
        span(base + 3, Some(base + 2), "ChatOpenAI", at_ms + 1, end - 1, llm(tokens, "gpt-4o-mini")),
    ];
    let http_parent = if sdk {
        spans.push(span(base + 4, Some(1), "ChatCompletion", at_ms + 2, end - 2, llm(tokens, "gpt-4o-mini")));
        base + 4
    } else {
        1
    };
    for (n, status) in statuses.iter().enumerate() {
        let from = at_ms + 10 + 300 * n as u64;
        spans.push(span(base + 10 + n as u16, Some(http_parent), "POST", from, from + 200, post(*status)));
    }
    spans
}

#[test]
fn http_spans_under_the_application_span_belong_to_the_framework_call_inside_it() {
    for sdk in [false, true] {
        let spans = [
            vec![span(1, None, "handle", 0, 5000, vec![])],
            framework_call(sdk, 0, 100, &[429, 500, 200]),
            framework_call(sdk, 2000, 200, &[200]),
            framework_call(sdk, 3500, 300, &[500, 500, 500]),
        ]
        .concat();
        let got = attempts(vec![spans.clone()]);
        assert_eq!(
            statuses_and_tokens(&got),
            (vec![429, 500, 200, 200, 500, 500, 500], 240, 16),
            "sdk instrumentation beside: {sdk}: {got:#?}"
        );
        assert_eq!(shape(&spans).ambiguous_calls, 0);
        // The application span last (it ends last), the rest span by span
        // in reverse: the same attempts once all have arrived.
        let mut exports: Vec<Vec<Span>> = spans[1..].iter().rev().map(|s| vec![s.clone()]).collect();
        exports.push(vec![spans[0].clone()]);
        assert_eq!(attempts(exports), got, "sdk {sdk}, in reverse");
    }
}

#[test]
fn http_spans_under_a_parent_never_exported_still_find_their_call() {
    // The application span (1) never arrives: the chain and the HTTP spans
    // are related only through its id.
    let spans = framework_call(false, 0, 100, &[529, 200]);
    assert_eq!(statuses_and_tokens(&attempts(vec![spans])).0, vec![529, 200]);
}

/// Two branches (2 and 3) of one request, each running a framework call
/// in a step of its own at the same time; each branch's HTTP spans sit
/// under the branch span.
fn two_branches() -> Vec<Span> {
    let mut spans = vec![span(1, None, "handle", 0, 3000, vec![])];
    for (branch, statuses) in [(2u16, &[500, 200][..]), (3, &[200][..])] {
        spans.push(span(branch, Some(1), "branch", 0, 2500, vec![]));
        let base = branch * 100;
        spans.push(span(base + 50, Some(branch), "step", 0, 2400, vec![]));
        spans.push(span(base, Some(base + 50), "RunnableSequence", 0, 2000, chain()));
        spans.push(span(base + 1, Some(base), "ChatOpenAI", 1, 1999, llm(Some((100, 5)), "gpt-4o-mini")));
        for (n, status) in statuses.iter().enumerate() {
            let from = 10 + 400 * n as u64 + u64::from(branch);
            spans.push(span(base + 10 + n as u16, Some(branch), "POST", from, from + 300, post(*status)));
        }
    }
    spans
}

fn decoded(spans: Vec<Span>) -> DecodedSpans {
    decode_request(&ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans, ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    })
}

#[test]
fn enclosing_spans_exported_after_their_calls_are_loose_links_that_keep_the_branches_apart() {
    // The branch and application spans end last: a batching exporter sends
    // them in a later export, which holds no call of their trace.
    let (enclosing, calls): (Vec<Span>, Vec<Span>) =
        two_branches().into_iter().partition(|s| ["handle", "branch", "step"].contains(&s.name.as_str()));
    let later = decoded(enclosing);
    assert!(later.decoded.spans.is_empty(), "no call here: nothing kept by the request alone");
    assert_eq!(later.loose_links.len(), 5);
    let first = decoded(calls);
    assert!(first.loose_links.is_empty());
    let without: Vec<SpanLink> = first.decoded.spans.iter().map(SpanLink::of).collect();
    assert_eq!(trace_calls(&without).ambiguous_calls, 2, "cut ancestry: the branches look alike");
    // A receiver that saw the calls' trace keeps the later links.
    let whole: Vec<SpanLink> =
        first.decoded.spans.iter().chain(&later.loose_links).map(SpanLink::of).collect();
    let calls = trace_calls(&whole);
    assert_eq!(calls.ambiguous_calls, 0, "{calls:#?}");
    assert_eq!(calls.calls.values().map(|c| c.http.len()).collect::<Vec<_>>(), [2, 1]);
}

#[test]
fn http_spans_belong_to_the_calls_below_the_span_they_hang_off() {
    let mut spans = two_branches();
    let calls = shape(&spans);
    assert_eq!(calls.ambiguous_calls, 0, "{calls:#?}");
    let owned: Vec<usize> = calls.calls.values().map(|c| c.http.len()).collect();
    assert_eq!(owned, [2, 1]);
    // Under the shared application span instead, nothing tells them apart.
    for s in spans.iter_mut().filter(|s| s.name == "POST") {
        s.parent_span_id = 1u64.to_be_bytes().to_vec();
    }
    let calls = shape(&spans);
    assert_eq!(calls.ambiguous_calls, 2);
    assert!(calls.calls.values().all(|c| c.http.is_empty()), "never a guess: {calls:#?}");
}

#[test]
fn a_framework_s_own_retries_around_the_sdk_are_one_call_in_the_order_sent() {
    // LlamaIndex's retry decorator calls the SDK again after the SDK gave
    // up: two SDK spans (with their HTTP children) inside one framework span.
    let mut spans = vec![
        span(1, None, "handle", 0, 9000, vec![]),
        span(2, Some(1), "OpenAI.chat", 1, 8999, llm(Some((120, 8)), "gpt-4o-mini")),
        span(3, Some(1), "ChatCompletion", 10, 3000, llm(None, "gpt-4o-mini")),
        span(4, Some(1), "ChatCompletion", 4000, 5000, llm(Some((120, 8)), "gpt-4o-mini")),
    ];
    for (n, status) in [500, 500, 500].iter().enumerate() {
        let from = 20 + 900 * n as u64;
        spans.push(span(10 + n as u16, Some(3), "POST", from, from + 100, post(*status)));
    }
    spans.push(span(20, Some(4), "POST", 4010, 4900, post(200)));
    let got = attempts(vec![spans.clone()]);
    assert_eq!(statuses_and_tokens(&got), (vec![500, 500, 500, 200], 120, 8), "{got:#?}");
    assert_eq!(shape(&spans).calls.len(), 1, "one call: the framework's");
}

#[test]
fn http_spans_of_sdk_spans_never_exported_go_to_the_framework_call_around_them() {
    // LangChain.js retries around the SDK; OpenInference's JS openai
    // instrumentation never ends a failed call's span, so only the last
    // try's SDK span (11) arrives: the failed tries' HTTP spans name parents
    // (20, 21) that never do.
    let spans = vec![
        span(1, None, "handle", 0, 9000, vec![]),
        span(2, Some(1), "RunnableSequence", 0, 8000, chain()),
        span(3, Some(2), "ChatOpenAI", 1, 7999, llm(Some((120, 30)), "gpt-4o-mini")),
        span(30, Some(20), "POST", 10, 30, post(429)),
        span(31, Some(21), "POST", 1200, 1210, post(500)),
        span(11, Some(1), "OpenAI Chat Completions", 7000, 7990, llm(Some((120, 30)), "gpt-4o-mini")),
        span(32, Some(11), "POST", 7005, 7980, post(200)),
    ];
    let got = attempts(vec![spans.clone()]);
    assert_eq!(statuses_and_tokens(&got), (vec![429, 500, 200], 120, 30), "{got:#?}");
    assert_eq!(shape(&spans).orphan_attempt_spans, 0);
    // Without the framework's span around them they stay orphans.
    let without: Vec<Span> = spans.into_iter().filter(|s| s.name != "ChatOpenAI").collect();
    assert_eq!(shape(&without).orphan_attempt_spans, 2);
    assert_eq!(statuses_and_tokens(&attempts(vec![without])).0, vec![200]);
}

#[test]
fn one_request_seen_by_two_http_instrumentations_is_one_attempt() {
    let spans = vec![
        span(1, None, "handle", 0, 2000, vec![]),
        span(2, Some(1), "ChatOpenAI", 0, 1000, llm(Some((120, 8)), "gpt-4o-mini")),
        span(3, Some(1), "POST", 10, 900, post(200)),
        span(4, Some(3), "POST", 11, 899, post(200)),
    ];
    assert_eq!(statuses_and_tokens(&attempts(vec![spans])), (vec![200], 120, 8));
}

#[test]
fn model_spans_that_state_other_tokens_are_other_calls() {
    // A framework span and, inside it, another instrumentation's span of
    // another call (a nested tool's), same model, away from its siblings.
    let spans = vec![
        span(1, None, "handle", 0, 2000, vec![]),
        span(2, Some(1), "agent", 0, 2000, chain()),
        span(3, Some(2), "ChatOpenAI", 0, 1000, llm(Some((120, 8)), "gpt-4o-mini")),
        span(4, Some(1), "ChatCompletion", 100, 900, llm(Some((300, 20)), "gpt-4o-mini")),
    ];
    assert_eq!(shape(&spans).calls.len(), 2);
    assert_eq!(statuses_and_tokens(&attempts(vec![spans])).1, 420, "both calls' tokens");
}

#[test]
fn a_model_span_as_likely_one_call_with_two_others_joins_both_and_is_counted() {
    // Two SDK spans at the same time, failed (no tokens to tell them
    // apart), inside one framework span with no HTTP of its own: each
    // request stays one attempt, and the framework span none of its own.
    let mut spans = vec![
        span(1, None, "handle", 0, 2000, vec![]),
        span(2, Some(1), "chain", 0, 2000, chain()),
        span(3, Some(2), "ChatOpenAI", 0, 1500, llm(None, "gpt-4o-mini")),
        span(4, Some(1), "ChatCompletion", 10, 1000, llm(None, "gpt-4o-mini")),
        span(5, Some(1), "ChatCompletion", 20, 1100, llm(None, "gpt-4o-mini")),
    ];
    spans.push(span(10, Some(4), "POST", 30, 900, post(500)));
    spans.push(span(11, Some(5), "POST", 40, 1000, post(500)));
    let calls = shape(&spans);
    assert_eq!(calls.ambiguous_calls, 1, "{calls:#?}");
    assert_eq!(calls.calls.len(), 1);
    assert_eq!(statuses_and_tokens(&attempts(vec![spans])).0, vec![500, 500]);
}

/// One call of a generated trace: which spans describe it and what the
/// provider answered to each of its requests.
#[derive(Debug, Clone)]
struct PlannedCall {
    framework: bool,
    sdk: bool,
    statuses: Vec<i64>,
    tokens: (i64, i64),
    branch: u16,
    /// How far the framework's chain spans nest it below its branch.
    chain_depth: u16,
    /// The framework retries around an SDK that does not (LangChain.js):
    /// an SDK span per request.
    sdk_per_try: bool,
}

fn planned_call() -> impl Strategy<Value = PlannedCall> {
    (
        0u8..3,
        prop::collection::vec(prop::sample::select(vec![429i64, 500, 503, 529]), 0..3),
        any::<bool>(),
        1i64..5000,
        1i64..500,
        0u16..3,
        0u16..3,
        any::<bool>(),
    )
        .prop_map(|(which, failures, ok, input, output, branch, chain_depth, sdk_per_try)| {
            let mut statuses = failures;
            statuses.push(if ok { 200 } else { 500 });
            PlannedCall {
                framework: which != 1,
                sdk: which != 0,
                statuses,
                tokens: (input, output),
                branch,
                chain_depth,
                sdk_per_try,
            }
        })
}

/// The spans of `calls` (sequential within a branch, the branches
/// concurrent) as the instrumentations would export them: with every span
/// made current (`attached`), or with the framework's spans never current,
/// so the SDK's spans (or, without one, the HTTP spans) go under the branch;
/// with `lose_failed_sdk`, an SDK span that failed inside a framework's is
/// never exported (OpenInference's JS openai instrumentation never ends it).
fn planned_trace(calls: &[PlannedCall], attached: bool, lose_failed_sdk: bool) -> Vec<Span> {
    let mut spans = vec![span(1, None, "handle", 0, 1_000_000, vec![])];
    let mut next_at = [0u64; 3];
    let id = std::cell::Cell::new(100u16);
    let fresh = || {
        id.set(id.get() + 1);
        id.get()
    };
    for branch in 0..3u16 {
        spans.push(span(10 + branch, Some(1), "branch", 0, 1_000_000, vec![]));
    }
    for call in calls {
        let branch_span = 10 + call.branch;
        let at = next_at[call.branch as usize] + u64::from(call.branch) * 7;
        let end = at + 1000 + 400 * call.statuses.len() as u64;
        next_at[call.branch as usize] = end + 50;
        let ok = call.statuses.last() == Some(&200);
        let tokens = ok.then_some(call.tokens);
        let mut parent = branch_span;
        for _ in 0..call.chain_depth {
            let chain_span = fresh();
            spans.push(span(chain_span, Some(parent), "RunnableSequence", at, end, chain()));
            parent = chain_span;
        }
        let mut http_parent = branch_span;
        if call.framework {
            let framework = fresh();
            spans.push(span(
                framework,
                Some(parent),
                "ChatOpenAI",
                at + 1,
                end - 1,
                llm(tokens, "gpt-4o-mini"),
            ));
            if attached {
                http_parent = framework;
            }
        }
        let sdk_parent = if attached { http_parent } else { branch_span };
        let sdk_span = |spans: &mut Vec<Span>, from: u64, to: u64, tokens: Option<(i64, i64)>| {
            let sdk = fresh();
            let lost = lose_failed_sdk && !attached && call.framework && tokens.is_none();
            if !lost {
                spans.push(span(
                    sdk,
                    Some(sdk_parent),
                    "ChatCompletion",
                    from,
                    to,
                    llm(tokens, "gpt-4o-mini"),
                ));
            }
            sdk
        };
        if call.sdk && !call.sdk_per_try {
            http_parent = sdk_span(&mut spans, at + 2, end - 2, tokens);
        }
        for (n, status) in call.statuses.iter().enumerate() {
            let from = at + 10 + 400 * n as u64;
            let mut parent = http_parent;
            if call.sdk && call.sdk_per_try {
                let delivered = (*status == 200).then_some(call.tokens);
                parent = sdk_span(&mut spans, from - 1, from + 301, delivered);
            }
            spans.push(span(fresh(), Some(parent), "POST", from, from + 300, post(*status)));
        }
    }
    spans
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The same calls made with context attached and with it dropped give
    /// the same attempts: one per request the provider saw, each call's
    /// tokens once, on the attempt that delivered.
    #[test]
    fn dropped_context_gives_the_attempts_attached_context_gives(
        calls in prop::collection::vec(planned_call(), 1..8),
        split in 0usize..64,
        lose_failed_sdk in any::<bool>(),
    ) {
        // A lost SDK span's HTTP spans carry nothing but their time: among
        // concurrent calls they are anybody's (counted, never guessed), so
        // its calls run one after another.
        let mut calls = calls;
        if lose_failed_sdk {
            calls.iter_mut().for_each(|call| call.branch = 0);
        }
        let attached = planned_trace(&calls, true, false);
        let dropped = planned_trace(&calls, false, lose_failed_sdk);
        let want = attempts(vec![attached]);
        let sent: usize = calls.iter().map(|c| c.statuses.len()).sum();
        prop_assert_eq!(want.len(), sent, "attached: {:#?}", want);
        let delivered: i64 = calls.iter().filter(|c| c.statuses.last() == Some(&200)).map(|c| c.tokens.0).sum();
        prop_assert_eq!(statuses_and_tokens(&want).1, delivered);
        prop_assert_eq!(attempts(vec![dropped.clone()]), want.clone());
        prop_assert_eq!(shape(&dropped).ambiguous_calls, 0);
        // Exported in two parts, the later part first. A part with no model
        // or HTTP span of the trace is not stored, so the spans above the
        // calls may be lost and their ancestry cut; then only time tells
        // concurrent calls' HTTP spans apart, which it cannot: split so,
        // the calls run one after another.
        calls.iter_mut().for_each(|call| call.branch = 0);
        let (attached, dropped) = (planned_trace(&calls, true, false), planned_trace(&calls, false, lose_failed_sdk));
        let want = attempts(vec![attached]);
        let at = split % (dropped.len() + 1);
        let (first, second) = dropped.split_at(at);
        prop_assert_eq!(attempts(vec![second.to_vec(), first.to_vec()]), want.clone());
        prop_assert_eq!(attempts(vec![first.to_vec(), second.to_vec()]), want);
    }
}

#[test]
fn langchain_js_names_its_provider_only_in_its_metadata_and_only_that_is_kept() {
    let attrs = vec![
        kv("openinference.span.kind", text("LLM")),
        kv("llm.model_name", text("gpt-4o-mini")),
        kv("metadata", text(r#"{"ls_provider":"openai","ls_model_name":"gpt-4o-mini","user_secret":"x"}"#)),
    ];
    let spans = vec![span(1, None, "ChatOpenAI", 0, 100, attrs)];
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans: spans.clone(), ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    };
    let decoded = decode_request(&request);
    assert!(decoded.decoded.rejections.is_empty(), "{:?}", decoded.decoded.rejections);
    let stored = Span::decode(decoded.decoded.spans[0].span.as_deref().unwrap()).unwrap();
    let metadata = stored.attributes.iter().find(|a| a.key == "metadata").unwrap();
    assert_eq!(metadata.value, Some(AnyValue { value: Some(text(r#"{"ls_provider":"openai"}"#)) }));
    assert_eq!(derive_trace(&decoded.decoded.spans)[0].provider, "openai");
    // Without it, the span claims a call and names no provider: refused.
    let bare = vec![span(1, None, "ChatOpenAI", 0, 100, llm(None, "gpt-4o-mini")[..1].to_vec())];
    let request = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans: bare, ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    };
    assert!(decode_request(&request).decoded.rejections[0].reason.contains("ls_provider"));
}
