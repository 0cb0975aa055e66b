//! OTLP logs (`POST /v1/logs`, gRPC `LogsService/Export`). A log record is
//! one of (docs/record-format.md, "OTLP logs"):
//! - a breaker state change, named `circuit.state_change` by its
//!   `event_name` (or, as older SDKs spell it, an `event.name` attribute),
//!   read like the span event of that name ("Breaker timelines");
//! - a GenAI exception event (`gen_ai.client.operation.exception`) about a
//!   span: kept beside the trace's spans, it completes the attempt of the
//!   span it names whichever arrives first (`SpanKind::Event`);
//! - an attempt record: a record that names no event and carries a model
//!   call's attributes (a gateway's access log: one upstream request per
//!   record), mapped like a model span whose start is the record's time;
//!   one with trace and span ids is kept as that span, so the same request
//!   sent as a span and as a log is one attempt.
//!
//! Every other record is counted as ignored, never an error: an SDK that
//! exports all of its logs here loses nothing it needs, and the export
//! succeeds.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::trace::v1::{Span, Status as SpanStatus, status::StatusCode};
use prost::Message;

use super::super::{Built, Decoded, build_attempt, circuit};
use super::wire::{ProtobufError, each_span};
use super::{
    call_fields, check_ids, circuit_change_of, facts_of, hex, is_model_call, kept, map_call, span_status,
    str_attr, timing, tokens,
};
use crate::model::{Attempt, CircuitChange, SpanFacts, SpanKind, SpanRecord, Status};

/// The GenAI exception event's name (semantic conventions, 2026).
pub const EXCEPTION_EVENT: &str = "gen_ai.client.operation.exception";

/// Of an exception event, what completes its attempt. The message is cut
/// to `MAX_MESSAGE_BYTES`: a provider's error text, never a prompt.
const EVENT_KEYS: [&str; 6] = [
    "error.type",
    "exception.type",
    "exception.message",
    "error.code",
    "http.response.status_code",
    "http.status_code",
];
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// OpenTelemetry's severity number from which a record is an error.
const SEVERITY_ERROR: i32 = 17;

/// What one export's log records came to.
#[derive(Debug, Default)]
pub struct DecodedLogs {
    /// What is kept (state changes, attempts, the spans access logs and
    /// events are kept as) and the records rejected (named by their
    /// position in the export, from 1).
    pub decoded: Decoded,
    /// Records that are none of the kinds kept: counted, not stored.
    pub ignored: u64,
    /// Bytes what is kept takes in memory, about: for the byte budget.
    pub held_bytes: usize,
}

/// The record's event name, where the SDK put it.
fn event_name(record: &LogRecord) -> Option<&str> {
    if !record.event_name.is_empty() {
        return Some(&record.event_name);
    }
    record.attributes.iter().find(|kv| kv.key == "event.name").and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(name) if !name.is_empty() => Some(name.as_str()),
            _ => None,
        }
    })
}

pub fn decode_request(request: &ExportLogsServiceRequest) -> DecodedLogs {
    let mut out = DecodedLogs::default();
    let records = request.resource_logs.iter().flat_map(|r| &r.scope_logs).flat_map(|s| &s.log_records);
    for record in records {
        out.push(record);
    }
    out
}

impl DecodedLogs {
    /// The next record of the export (positions count from 1).
    fn push(&mut self, record: &LogRecord) {
        let position = self.ignored + self.decoded.records + self.decoded.rejected + 1;
        // The time of the record, else when the SDK observed it.
        let time =
            if record.time_unix_nano != 0 { record.time_unix_nano } else { record.observed_time_unix_nano };
        match event_name(record) {
            Some(circuit::EVENT_NAME) => {
                let change = circuit_change_of(time, &record.attributes)
                    .map_err(|e| format!("log record {position}: {e}"));
                if let Ok(change) = &change {
                    self.held_bytes += circuit_held_bytes(change);
                }
                self.decoded.push_circuit(position, change);
            }
            Some(EXCEPTION_EVENT) => match exception_record(record, time) {
                Some(event) => {
                    self.held_bytes += event.held_bytes();
                    self.decoded.spans.push(event);
                    self.decoded.records += 1;
                }
                // An exception about no span completes nothing.
                None => self.ignored += 1,
            },
            Some(_) => self.ignored += 1,
            None => {
                let span = access_log_span(record, time);
                if !is_model_call(&span) {
                    self.ignored += 1;
                } else if check_ids(&span).is_ok() {
                    self.push_as_span(position, span);
                } else {
                    let built = access_log_attempt(&span).map_err(|e| format!("log record {position}: {e}"));
                    if let Ok(Built { attempt, .. }) = &built {
                        self.held_bytes += attempt_held_bytes(attempt);
                    }
                    self.decoded.push_built(position, built);
                }
            }
        }
    }

    /// An access log with trace and span ids: kept as the model span it
    /// describes, validated as one now.
    fn push_as_span(&mut self, position: u64, span: Span) {
        match map_call(&span, &[]) {
            Ok(built) => {
                self.decoded.records += 1;
                built.warnings.into_iter().for_each(|reason| self.decoded.warn(position, reason));
                let record = SpanRecord {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: None,
                    kind: SpanKind::Model,
                    span: Some(kept(&span).encode_to_vec()),
                    facts: facts_of(&span),
                };
                self.held_bytes += record.held_bytes();
                self.decoded.spans.push(record);
            }
            Err(reason) => self.decoded.reject(position, format!("log record {position}: {reason}")),
        }
    }
}

/// An access log read as the span of its request: its attributes, its
/// ids, its time as the start, `attempt.duration_ms` to its end, an
/// error when its severity says so.
fn access_log_span(record: &LogRecord, time: u64) -> Span {
    let duration_ms = record.attributes.iter().find(|kv| kv.key == "attempt.duration_ms").and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::DoubleValue(d) => Some(*d),
            any_value::Value::IntValue(i) => Some(*i as f64),
            any_value::Value::StringValue(s) => s.trim().parse().ok(),
            _ => None,
        }
    });
    let end = duration_ms
        .filter(|d| d.is_finite() && *d >= 0.0 && *d < 1e12)
        .map_or(time, |d| time.saturating_add((d * 1e6) as u64));
    let failed = record.severity_number >= SEVERITY_ERROR;
    Span {
        trace_id: record.trace_id.clone(),
        span_id: record.span_id.clone(),
        name: record.event_name.clone(),
        start_time_unix_nano: time,
        end_time_unix_nano: end,
        attributes: record.attributes.clone(),
        status: failed.then(|| SpanStatus { code: StatusCode::Error as i32, ..SpanStatus::default() }),
        ..Span::default()
    }
}

/// An access log without span ids: an attempt record of its own, its id
/// derived from its fields (a redelivery is the same attempt).
fn access_log_attempt(span: &Span) -> Result<Built, String> {
    if str_attr(span, &["attempt.workflow_id"]).is_none() && span.trace_id.iter().all(|&b| b == 0) {
        return Err("no trace_id and no attempt.workflow_id: the attempt would belong to no workflow".into());
    }
    let mut fields = call_fields(span, &[])?;
    // A record, not derived from a trace: nothing re-derives it.
    fields.source_trace = None;
    timing(&mut fields, span)?;
    fields.status = Some(span_status(span, fields.http_status));
    fields.tokens = tokens(span, &mut fields.warnings)?;
    build_attempt(fields)
}

/// An exception event kept as a record of its trace: under the span it
/// names, with what completes that span's attempt. Its id is the span's
/// and a hash of the event, so a redelivered export keeps it once.
fn exception_record(record: &LogRecord, time: u64) -> Option<SpanRecord> {
    let probe =
        Span { trace_id: record.trace_id.clone(), span_id: record.span_id.clone(), ..Span::default() };
    check_ids(&probe).ok()?;
    let attributes: Vec<KeyValue> = record
        .attributes
        .iter()
        .filter(|kv| EVENT_KEYS.contains(&kv.key.as_str()))
        .map(|kv| {
            let mut kv = kv.clone();
            if let Some(AnyValue { value: Some(any_value::Value::StringValue(s)) }) = kv.value.as_mut() {
                cut(s, MAX_MESSAGE_BYTES);
            }
            kv
        })
        .collect();
    let event = Span {
        trace_id: record.trace_id.clone(),
        span_id: record.span_id.clone(),
        name: EXCEPTION_EVENT.to_string(),
        start_time_unix_nano: time,
        end_time_unix_nano: time,
        attributes,
        ..Span::default()
    };
    let content = event.encode_to_vec();
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(&content);
    let span_id = hex(&record.span_id);
    Some(SpanRecord {
        trace_id: hex(&record.trace_id),
        span_id: format!("{span_id}~{}", hex(&digest[..8])),
        parent_span_id: Some(span_id),
        kind: SpanKind::Event,
        span: Some(content),
        facts: SpanFacts {
            name: EXCEPTION_EVENT.to_string(),
            start_ns: time,
            end_ns: time,
            ..SpanFacts::default()
        },
    })
}

fn cut(s: &mut String, bytes: usize) {
    if s.len() > bytes {
        let mut at = bytes;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
}

/// What an exception event says of the span it names, where the span does
/// not say it itself: its error type and HTTP status, and that it failed
/// (unless the span stated a status, or an HTTP status below 400: the
/// provider answered, and the exception came after).
pub(super) fn complete_with_event(target: &mut Span, event: &Span) {
    for kv in &event.attributes {
        if kv.key != "exception.message" && !target.attributes.iter().any(|t| t.key == kv.key) {
            target.attributes.push(kv.clone());
        }
    }
    let unset = target.status.as_ref().is_none_or(|s| s.code == StatusCode::Unset as i32);
    let answered = super::status_code(target, &mut Vec::new()).is_some_and(|code| code < 400);
    if unset && !answered {
        target.status = Some(SpanStatus { code: StatusCode::Error as i32, ..SpanStatus::default() });
    }
}

/// An exception's message, kept in the attempt's extra fields as
/// `error_message` (an emitter's own `error_message` wins).
pub(super) fn keep_error_message(attempt: &mut Attempt, message: &str) {
    if attempt.status != Status::Error {
        return;
    }
    let mut extra: serde_json::Map<String, serde_json::Value> =
        attempt.extra.as_deref().and_then(|e| serde_json::from_str(e).ok()).unwrap_or_default();
    extra.entry("error_message").or_insert_with(|| serde_json::Value::from(message));
    attempt.extra = Some(serde_json::Value::Object(extra).to_string());
}

fn attempt_held_bytes(attempt: &Attempt) -> usize {
    let text = |s: &String| s.capacity();
    let maybe = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
    std::mem::size_of::<Attempt>()
        + text(&attempt.attempt_id)
        + text(&attempt.workflow_id)
        + text(&attempt.provider)
        + text(&attempt.model)
        + text(&attempt.served_provider)
        + text(&attempt.served_model)
        + maybe(&attempt.workflow)
        + maybe(&attempt.route_group)
        + maybe(&attempt.provider_request_id)
        + maybe(&attempt.billing_account)
        + maybe(&attempt.service_tier)
        + maybe(&attempt.error_code)
        + maybe(&attempt.extra)
        + maybe(&attempt.source_trace)
}

fn circuit_held_bytes(change: &CircuitChange) -> usize {
    let maybe = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
    std::mem::size_of::<CircuitChange>()
        + change.provider.capacity()
        + maybe(&change.model)
        + maybe(&change.route_group)
        + maybe(&change.workflow)
        + maybe(&change.reason)
}

/// Kept bytes offered to `admit` at a time, as for traces.
const ADMIT_STEP: usize = 256 << 10;

/// A protobuf `ExportLogsServiceRequest`, one record decoded at a time (the
/// envelopes walked on the wire, as for traces): what it holds is what it
/// keeps, offered to `admit` as it grows (`admit(n)`: may the request hold
/// `n` bytes more?), never the whole request's records.
pub fn decode_protobuf(
    body: &[u8],
    admit: &mut dyn FnMut(usize) -> bool,
) -> Result<DecodedLogs, ProtobufError> {
    let mut out = DecodedLogs::default();
    let mut admitted = 0;
    let mut offer = |out: &DecodedLogs, at_least: usize| {
        let more = out.held_bytes.saturating_sub(admitted);
        if more == 0 || more < at_least {
            return Ok(());
        }
        if !admit(more) {
            return Err(ProtobufError::OverBudget);
        }
        admitted += more;
        Ok(())
    };
    each_span(body, &mut |bytes| {
        out.push(&LogRecord::decode(bytes)?);
        offer(&out, ADMIT_STEP)
    })?;
    offer(&out, 0)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
    use opentelemetry_proto::tonic::logs::v1::{ResourceLogs, ScopeLogs};

    fn text(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.to_string(),
            value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.to_string())) }),
            ..Default::default()
        }
    }

    fn export(records: Vec<LogRecord>) -> ExportLogsServiceRequest {
        ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                scope_logs: vec![ScopeLogs { log_records: records, ..Default::default() }],
                ..Default::default()
            }],
        }
    }

    const AT: u64 = 1_764_295_032_000_000_000;

    #[test]
    fn state_changes_are_kept_by_either_name_and_the_rest_ignored() {
        let route = || vec![text("attempt.provider", "openai"), text("attempt.model", "gpt-4o")];
        let named = LogRecord {
            time_unix_nano: AT,
            event_name: circuit::EVENT_NAME.to_string(),
            attributes: [route(), vec![text("attempt.state", "open")]].concat(),
            ..Default::default()
        };
        // Older SDKs: the name as an attribute, and only the observed time.
        let attributed = LogRecord {
            observed_time_unix_nano: AT + 1_000_000_000,
            attributes: [
                route(),
                vec![text("event.name", circuit::EVENT_NAME), text("attempt.state", "closed")],
            ]
            .concat(),
            ..Default::default()
        };
        let other = LogRecord {
            time_unix_nano: AT,
            event_name: "gen_ai.client.inference.operation.details".to_string(),
            ..Default::default()
        };
        let plain = LogRecord {
            body: Some(AnyValue { value: Some(any_value::Value::StringValue("hello".into())) }),
            ..Default::default()
        };
        let bytes = export(vec![named, other, attributed, plain]).encode_to_vec();
        let out = decode_protobuf(&bytes, &mut |_| true).unwrap();
        assert_eq!(out.ignored, 2);
        assert_eq!(out.decoded.rejected, 0);
        let states: Vec<_> = out.decoded.circuits.iter().map(|c| (c.at.timestamp(), c.state)).collect();
        assert_eq!(
            states,
            vec![
                (1_764_295_032, crate::model::Circuit::Open),
                (1_764_295_033, crate::model::Circuit::Closed)
            ]
        );
        assert_eq!(out.decoded.circuits[0].provider, "openai");
    }

    #[test]
    fn the_wire_walk_reads_what_a_whole_decode_reads() {
        let change = |state: &str| LogRecord {
            time_unix_nano: AT,
            event_name: circuit::EVENT_NAME.to_string(),
            attributes: vec![
                text("attempt.provider", "openai"),
                text("attempt.model", "m"),
                text("attempt.state", state),
            ],
            ..Default::default()
        };
        let mut request = export(vec![change("open"), LogRecord::default(), change("shut")]);
        request.resource_logs.push(ResourceLogs {
            scope_logs: vec![
                ScopeLogs { log_records: vec![change("closed")], ..Default::default() },
                ScopeLogs::default(),
            ],
            ..Default::default()
        });
        let whole = decode_request(&request);
        let walked = decode_protobuf(&request.encode_to_vec(), &mut |_| true).unwrap();
        assert_eq!((walked.ignored, walked.decoded.records, walked.decoded.rejected), (1, 2, 1));
        assert_eq!(walked.decoded.circuits, whole.decoded.circuits);
        assert_eq!(walked.decoded.rejections, whole.decoded.rejections);
        assert_eq!(walked.decoded.rejections[0].line, 3);
        // Cut short, it is refused as prost would refuse it.
        let bytes = request.encode_to_vec();
        assert!(decode_protobuf(&bytes[..bytes.len() - 3], &mut |_| true).is_err());
        assert!(ExportLogsServiceRequest::decode(&bytes[..bytes.len() - 3]).is_err());
    }

    #[test]
    fn a_bad_change_is_rejected_by_its_position_and_field() {
        let bad = LogRecord {
            time_unix_nano: AT,
            event_name: circuit::EVENT_NAME.to_string(),
            attributes: vec![
                text("attempt.provider", "openai"),
                text("attempt.model", "m"),
                text("attempt.state", "ajar"),
            ],
            ..Default::default()
        };
        let timeless = LogRecord {
            event_name: circuit::EVENT_NAME.to_string(),
            attributes: vec![text("attempt.route_group", "g"), text("attempt.state", "open")],
            ..Default::default()
        };
        let out = decode_request(&export(vec![LogRecord::default(), bad, timeless]));
        assert_eq!((out.ignored, out.decoded.rejected), (1, 2));
        let reasons: Vec<_> = out.decoded.rejections.iter().map(|r| (r.line, r.reason.as_str())).collect();
        assert_eq!(reasons[0].0, 2);
        assert!(reasons[0].1.starts_with("log record 2: circuit record: state"), "{reasons:?}");
        assert_eq!(reasons[1].0, 3);
        assert!(reasons[1].1.contains("at"), "{reasons:?}");
        assert!(matches!(decode_protobuf(b"\xff\xff", &mut |_| true), Err(ProtobufError::Undecodable(_))));
    }
}
