//! OTLP log records beside spans: GenAI exception events completing the
//! attempt of the span they name, whichever arrives first; access logs as
//! attempts.

use super::logs::{EXCEPTION_EVENT, decode_protobuf};
use super::*;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status as SpanStatus};
use proptest::prelude::*;

const TRACE: [u8; 16] = [0xcd; 16];
const T0: u64 = 1_795_831_200_000_000_000;

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}
fn s(v: &str) -> Value {
    Value::StringValue(v.into())
}

fn span(id: u8, parent: Option<u8>, start_ms: u64, attributes: Vec<KeyValue>, status: i32) -> Span {
    Span {
        trace_id: TRACE.to_vec(),
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: "span".into(),
        start_time_unix_nano: T0 + start_ms * 1_000_000,
        end_time_unix_nano: T0 + (start_ms + 200) * 1_000_000,
        attributes,
        status: Some(SpanStatus { code: status, message: String::new() }),
        ..Span::default()
    }
}

/// A 2026-conventions GenAI span covering the whole call: no status set,
/// its tries in HTTP child spans (or none).
fn call_span(id: u8) -> Span {
    let mut call = span(
        id,
        None,
        0,
        vec![
            kv("gen_ai.operation.name", s("chat")),
            kv("gen_ai.provider.name", s("openai")),
            kv("gen_ai.request.model", s("gpt-4o-mini")),
        ],
        0,
    );
    call.end_time_unix_nano = T0 + 5_000_000_000;
    call
}

fn http(id: u8, parent: u8, start_ms: u64, status: i64) -> Span {
    span(
        id,
        Some(parent),
        start_ms,
        vec![kv("http.request.method", s("POST")), kv("http.response.status_code", Value::IntValue(status))],
        0,
    )
}

fn exception(span_id: u8, at_ms: u64, error_type: &str, message: &str) -> LogRecord {
    LogRecord {
        time_unix_nano: T0 + at_ms * 1_000_000,
        severity_number: 13,
        event_name: EXCEPTION_EVENT.into(),
        trace_id: TRACE.to_vec(),
        span_id: vec![span_id; 8],
        attributes: vec![
            kv("error.type", s(error_type)),
            kv("exception.type", s("openai.APIConnectionError")),
            kv("exception.message", s(message)),
        ],
        ..LogRecord::default()
    }
}

fn logs(records: Vec<LogRecord>) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            scope_logs: vec![ScopeLogs { log_records: records, ..ScopeLogs::default() }],
            ..ResourceLogs::default()
        }],
    }
}

enum Export {
    Spans(Vec<Span>),
    Logs(Vec<LogRecord>),
}

/// The trace's attempts after `exports`, stored in that order (each
/// record once, as the store keeps them).
fn derived(exports: Vec<Export>) -> Vec<Attempt> {
    let mut stored: Vec<SpanRecord> = Vec::new();
    for export in exports {
        let records = match export {
            Export::Spans(spans) => {
                let request = ExportTraceServiceRequest {
                    resource_spans: vec![ResourceSpans {
                        scope_spans: vec![ScopeSpans { spans, ..ScopeSpans::default() }],
                        ..ResourceSpans::default()
                    }],
                };
                decode_request(&request).decoded.spans
            }
            Export::Logs(records) => logs::decode_request(&logs(records)).decoded.spans,
        };
        for record in records {
            if !stored.iter().any(|r| r.span_id == record.span_id) {
                stored.push(record);
            }
        }
    }
    let mut attempts = derive_trace(&stored);
    attempts.sort_by_key(|a| a.started_at);
    attempts
}

fn message_of(attempt: &Attempt) -> Option<String> {
    let extra: serde_json::Value = serde_json::from_str(attempt.extra.as_deref()?).ok()?;
    extra.get("error_message")?.as_str().map(String::from)
}

#[test]
fn an_exception_event_completes_the_last_try_of_the_call_it_names_before_or_after_its_spans() {
    // A call covering its tries (429, then a connection that never
    // answered), its span's status unset: only the event says it failed.
    let spans = || {
        vec![
            call_span(1),
            http(2, 1, 0, 429),
            span(3, Some(1), 1_000, vec![kv("http.request.method", s("POST"))], 0),
        ]
    };
    let event = || exception(1, 1_500, "APIConnectionError", "Connection error.");
    let after = derived(vec![Export::Spans(spans()), Export::Logs(vec![event()])]);
    let before = derived(vec![Export::Logs(vec![event()]), Export::Spans(spans())]);
    let without = derived(vec![Export::Spans(spans())]);
    assert_eq!(after, before);
    assert_eq!(after.len(), 2);
    assert_eq!((after[0].status, after[0].http_status), (Status::Error, Some(429)));
    assert_eq!(after[0].error_class, Some(crate::model::ErrorClass::RateLimit));
    assert_eq!(message_of(&after[0]), None);
    let last = &after[1];
    assert_eq!(last.status, Status::Error);
    assert_eq!(last.error_code.as_deref(), Some("APIConnectionError"));
    assert_eq!(message_of(last).as_deref(), Some("Connection error."));
    // Without the event the last try looked like an answer.
    assert_eq!(without[1].status, Status::Ok);
    // Redelivered, the event is one record: the same attempts.
    let twice =
        derived(vec![Export::Logs(vec![event()]), Export::Spans(spans()), Export::Logs(vec![event()])]);
    assert_eq!(twice, after);
}

#[test]
fn an_event_naming_an_http_span_completes_that_try_and_a_span_s_own_facts_win() {
    let mut stated = http(3, 1, 1_000, 500);
    stated.attributes.push(kv("error.type", s("500")));
    stated.status = Some(SpanStatus { code: 2, message: String::new() });
    let spans = vec![call_span(1), http(2, 1, 0, 503), stated];
    let events =
        vec![exception(2, 100, "ServiceUnavailable", "overloaded"), exception(3, 1_100, "Timeout", "late")];
    let attempts = derived(vec![Export::Logs(events), Export::Spans(spans)]);
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].error_code.as_deref(), Some("ServiceUnavailable"));
    assert_eq!(message_of(&attempts[0]).as_deref(), Some("overloaded"));
    // The span said 500 itself: the event's type does not replace it.
    assert_eq!(attempts[1].http_status, Some(500));
    assert_eq!(message_of(&attempts[1]).as_deref(), Some("late"));
}

#[test]
fn an_event_about_an_answered_try_keeps_it_answered() {
    // The provider answered 200; the exception came after (a parse error).
    let spans = vec![call_span(1), http(2, 1, 0, 200)];
    let attempts = derived(vec![
        Export::Spans(spans),
        Export::Logs(vec![exception(1, 300, "ValidationError", "bad json")]),
    ]);
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].status, Status::Ok);
    assert_eq!(message_of(&attempts[0]), None);
}

#[test]
fn a_call_without_http_spans_takes_the_event_itself() {
    let attempts = derived(vec![
        Export::Logs(vec![exception(1, 300, "RateLimitError", "slow down")]),
        Export::Spans(vec![call_span(1)]),
    ]);
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].status, Status::Error);
    assert_eq!(attempts[0].error_class, Some(crate::model::ErrorClass::RateLimit));
}

#[test]
fn events_naming_no_span_or_no_call_change_nothing_and_others_are_ignored() {
    let mut anonymous = exception(1, 0, "X", "y");
    anonymous.span_id.clear();
    let details = LogRecord {
        event_name: "gen_ai.client.inference.operation.details".into(),
        attributes: vec![kv("gen_ai.provider.name", s("openai")), kv("gen_ai.request.model", s("m"))],
        ..LogRecord::default()
    };
    let old_style = LogRecord {
        attributes: vec![kv("event.name", s("gen_ai.choice")), kv("gen_ai.system", s("openai"))],
        ..LogRecord::default()
    };
    let plain =
        LogRecord { body: Some(AnyValue { value: Some(s("GET /health 200")) }), ..LogRecord::default() };
    let out = logs::decode_request(&logs(vec![anonymous, details, old_style, plain]));
    assert_eq!((out.ignored, out.decoded.records, out.decoded.rejected), (4, 0, 0));
    // An event about a span of no call (here, a tool span) derives nothing.
    let tool = span(5, None, 0, vec![kv("gen_ai.operation.name", s("execute_tool"))], 0);
    assert!(
        derived(vec![Export::Spans(vec![tool]), Export::Logs(vec![exception(5, 0, "E", "m")])]).is_empty()
    );
}

fn access_log(ids: bool, status: i64, extra: Vec<KeyValue>) -> LogRecord {
    let mut attributes = vec![
        kv("gen_ai.operation.name", s("chat")),
        kv("gen_ai.provider.name", s("openai")),
        kv("gen_ai.request.model", s("gpt-4o-mini")),
        kv("gen_ai.response.model", s("gpt-4o-mini-2024-07-18")),
        kv("gen_ai.usage.input_tokens", Value::IntValue(120)),
        kv("gen_ai.usage.output_tokens", Value::IntValue(8)),
        kv("http.response.status_code", Value::IntValue(status)),
        kv("attempt.duration_ms", Value::DoubleValue(350.0)),
    ];
    attributes.extend(extra);
    LogRecord {
        time_unix_nano: T0,
        trace_id: if ids { TRACE.to_vec() } else { Vec::new() },
        span_id: if ids { vec![9; 8] } else { Vec::new() },
        attributes,
        ..LogRecord::default()
    }
}

#[test]
fn an_access_log_with_span_ids_is_that_span_and_one_without_is_a_record() {
    let with_ids = logs::decode_request(&logs(vec![access_log(true, 200, vec![])]));
    assert_eq!((with_ids.decoded.records, with_ids.decoded.spans.len()), (1, 1));
    assert_eq!(with_ids.decoded.spans[0].kind, SpanKind::Model);
    let attempts = derive_trace(&with_ids.decoded.spans);
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].workflow_id, hex(&TRACE));
    assert_eq!(attempts[0].duration_ms, Some(350.0));
    assert_eq!(attempts[0].tokens.input, Some(120));
    // The same request sent as a span is the same record: one attempt.
    let as_span = span(9, None, 0, vec![], 0);
    assert_eq!(with_ids.decoded.spans[0].span_id, hex(&as_span.span_id));

    let workflow = kv("attempt.workflow_id", s("job-7"));
    let out = logs::decode_request(&logs(vec![
        access_log(false, 429, vec![workflow.clone()]),
        access_log(false, 200, vec![workflow, kv("attempt.index", Value::IntValue(1))]),
        access_log(false, 200, vec![]),
    ]));
    assert_eq!((out.decoded.records, out.decoded.rejected), (2, 1));
    assert_eq!(out.decoded.attempts[0].status, Status::Error);
    assert_eq!(out.decoded.attempts[0].error_class, Some(crate::model::ErrorClass::RateLimit));
    assert_eq!(out.decoded.attempts[1].status, Status::Ok);
    assert_eq!(out.decoded.attempts[0].workflow_id, "job-7");
    assert_ne!(out.decoded.attempts[0].attempt_id, out.decoded.attempts[1].attempt_id);
    assert_eq!(out.decoded.rejections[0].line, 3);
    assert!(out.decoded.rejections[0].reason.contains("no workflow"), "{:?}", out.decoded.rejections);
    // An error severity fails a record whose status says nothing.
    let mut severe = access_log(false, 200, vec![kv("attempt.workflow_id", s("w"))]);
    severe.attributes.retain(|kv| kv.key != "http.response.status_code");
    severe.severity_number = 17;
    let out = logs::decode_request(&logs(vec![severe]));
    assert_eq!(out.decoded.attempts[0].status, Status::Error);
}

#[test]
fn the_wire_walk_keeps_what_a_whole_decode_keeps_and_offers_it_to_the_budget() {
    let mut records = vec![exception(1, 0, "E", "m"), access_log(true, 200, vec![]), LogRecord::default()];
    records.extend(
        (0..2_000).map(|i| access_log(false, 200, vec![kv("attempt.workflow_id", s(&format!("w{i}")))])),
    );
    let request = logs(records);
    let bytes = request.encode_to_vec();
    let whole = logs::decode_request(&request);
    let mut offered = 0;
    let walked = decode_protobuf(&bytes, &mut |n| {
        offered += n;
        true
    })
    .unwrap();
    assert_eq!(walked.decoded.spans, whole.decoded.spans);
    assert_eq!(walked.decoded.attempts, whole.decoded.attempts);
    assert_eq!((walked.ignored, walked.decoded.records), (1, 2_002));
    assert_eq!(offered, walked.held_bytes);
    // A budget that runs out refuses the request.
    assert!(matches!(decode_protobuf(&bytes, &mut |_| false), Err(ProtobufError::OverBudget)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Wherever the event falls among the exports (before, between or
    /// after the call's spans, which may themselves be split), the
    /// attempts are the same.
    #[test]
    fn where_an_event_arrives_never_changes_the_attempts(
        tries in 1usize..4,
        named in 0usize..4,
        event_at in 0usize..4,
        split in 0usize..4,
    ) {
        let mut spans = vec![call_span(1)];
        for k in 0..tries {
            let status = if k + 1 == tries { 200 } else { 429 };
            spans.push(http(10 + k as u8, 1, 1_000 * k as u64, status));
        }
        // Named: the call, or one of its tries.
        let target = if named == 0 || named > tries { 1 } else { 9 + named as u8 };
        let event = exception(target, 10, "RateLimitError", "limit");
        let cut = split.min(spans.len());
        let (first, second) = spans.split_at(cut);
        let mut exports = vec![Export::Spans(first.to_vec()), Export::Spans(second.to_vec())];
        exports.insert(event_at.min(2), Export::Logs(vec![event.clone()]));
        let reference = derived(vec![Export::Spans(spans.clone()), Export::Logs(vec![event])]);
        prop_assert_eq!(derived(exports), reference);
    }
}
