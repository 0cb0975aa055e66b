//! OpenTelemetry spans to attempts (docs/record-format.md, "From
//! OpenTelemetry spans" and "Gateways").
//!
//! Two steps, so that results never depend on how a trace's spans were split
//! across export requests:
//! 1. `decode_request` sorts a request's spans into what is kept
//!    (`SpanRecord`s): inference spans (validated one by one, so a bad span is
//!    rejected at once with its position), HTTP client spans, and the parent
//!    links of the other spans of those traces. Nothing is derived yet.
//! 2. `derive_trace` maps every stored span of one trace to its attempts. The
//!    store calls it each time a trace gets new spans, and replaces the
//!    trace's attempts with the result: a model span stored alone is one
//!    attempt until its HTTP children arrive, then it becomes them.
//!
//! Which spans of a trace are one call, and which HTTP spans are its
//! attempts, is the trace's shape (`shape`). A call with attempt spans hides
//! the SDK's own retries, each being one attempt (`layer = sdk`) with
//! provider and model from the call and the call's tokens and cost on the
//! one that delivered; a call known to have resent its request only by a
//! count gets that many failed attempts before its own.

mod calls;
pub mod logs;
pub mod metrics;
mod wire;

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use chrono::{DateTime, Utc};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::span::Event;
use opentelemetry_proto::tonic::trace::v1::{Span, status::StatusCode};
use prost::Message;

use super::{AttemptFields, Built, Decoded, build_attempt, circuit};
use crate::model::{Attempt, CircuitChange, Layer, PicoUsd, SpanFacts, SpanKind, SpanRecord, Status, Tokens};
use crate::ratelimit::{self, Headroom};
pub use calls::{
    CallChanges, CallSpans, SpanLink, TraceCalls, resent_attempt_id, span_attempt_id, trace_calls,
};
pub use wire::{ProtobufError, decode_protobuf, kept_bytes_at_most};

/// Spans of a request, and how many of them were model calls.
#[derive(Debug, Default)]
pub struct DecodedSpans {
    pub decoded: Decoded,
    /// Inference spans kept or rejected; other spans are not model calls.
    pub model_spans: u64,
    /// Parent links of the spans of traces this request holds no call of
    /// (an application's or a framework's spans, which end after the calls
    /// inside them and so often come in a later export): not in `decoded`,
    /// for a receiver that saw a call of their trace recently to keep.
    pub loose_links: Vec<SpanRecord>,
}

/// `gen_ai.operation.name` values that are not a call to a model, though
/// their spans carry GenAI attributes: agent and tool steps, retrieval. Any
/// other operation is inference: the conventions' `chat`,
/// `text_completion`, `generate_content`, `embeddings`, and the call types
/// LiteLLM writes there (`acompletion`, `aembedding`, ...).
const NON_INFERENCE_OPERATIONS: [&str; 8] = [
    "execute_tool",
    "invoke_agent",
    "create_agent",
    "retrieval",
    "retrieve",
    "search",
    "invoke_workflow",
    "tokenize",
];

/// `gen_ai.operation.name` values that say "this span is a call to a
/// model", with or without a model or provider attribute: a span named so
/// that lacks them is refused, not skipped. Any other operation name is a
/// model call only when the span carries a model or provider attribute (a
/// framework's step span, such as the Vercel AI SDK's `agent_step`, has
/// neither).
const INFERENCE_OPERATIONS: [&str; 12] = [
    "chat",
    "text_completion",
    "generate_content",
    "embeddings",
    "completion",
    "acompletion",
    "embedding",
    "aembedding",
    "responses",
    "aresponses",
    "text_completion_streaming",
    "atext_completion",
];

/// Attributes that name the model a span asks for.
const MODEL_KEYS: [&str; 4] =
    ["gen_ai.request.model", "llm.model_name", "embedding.model_name", "gen_ai.response.model"];

/// Where a span states its input and output tokens, first spelling first.
const INPUT_TOKEN_KEYS: [&str; 5] = [
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
    "ai.usage.inputTokens",
    "ai.usage.promptTokens",
];
const OUTPUT_TOKEN_KEYS: [&str; 5] = [
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
    "ai.usage.outputTokens",
    "ai.usage.completionTokens",
];

/// A span's resend count above this is a bad value, not retries: no SDK
/// resends a request a hundred times. Counted up to it, with a warning.
pub const MAX_RESENDS: u32 = 100;

/// OpenInference span kinds that are a call to a model.
const OPENINFERENCE_MODEL_KINDS: [&str; 2] = ["llm", "embedding"];

/// Attributes that only say "this is a GenAI span" (with no operation name,
/// a span carrying one of them is an inference call).
const PROVIDER_KEYS: [&str; 5] =
    ["gen_ai.provider.name", "gen_ai.system", "gen_ai.model.provider", "llm.provider", "llm.system"];

/// Attributes an inner model span takes from the wrapper around it when it
/// lacks them: what the application or gateway knew about the workflow.
const INHERITED_KEYS: [&str; 5] = [
    "attempt.workflow_id",
    "attempt.workflow",
    "attempt.route_group",
    "litellm.model_group",
    "attempt.billing_account",
];

/// The attributes the mapping reads; everything else (message text above
/// all) is dropped before a span is stored. `attempt.*`, `gen_ai.usage.*`
/// and the token counts (`is_token_key`) are kept too.
const KEPT_KEYS: &[&str] = &[
    "openai.response.service_tier",
    "gen_ai.openai.response.service_tier",
    "openai.request.service_tier",
    "gen_ai.openai.request.service_tier",
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.system",
    "gen_ai.model.provider",
    "llm.provider",
    "llm.system",
    "openinference.span.kind",
    "gen_ai.original.model",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.response.finish_reasons",
    "llm.model_name",
    "llm.invocation_parameters",
    "embedding.model_name",
    "embedding.invocation_parameters",
    "gen_ai.response.id",
    "http.response.status_code",
    "http.status_code",
    "http.request.method",
    "http.method",
    "http.request.resend_count",
    "error.type",
    "error.code",
    "anthropic.request.id",
    "ai.response.id",
    "gen_ai.response.time_to_first_chunk",
    "gen_ai.client.operation.time_to_first_chunk",
    "gen_ai.server.time_to_first_token",
    "ai.response.msToFirstChunk",
    "ai.stream.msToFirstChunk",
    "llm.cost.total",
    "gen_ai.cost.total_cost",
    "litellm.cost.total",
    "gen_ai.usage.cost",
    "gen_ai.usage.cost.amount",
    "gen_ai.usage.cost.currency",
    "gen_ai.usage.cost.source",
    "litellm.model_group",
    "litellm.call_id",
    "server.address",
    "url.full",
    "http.url",
];

/// A kept attribute's string value is cut to this many bytes: the mapping
/// reads names, numbers and a small JSON of invocation parameters.
const MAX_KEPT_VALUE_BYTES: usize = 4096;

/// Sorts the spans of `request` into what is kept. A rejection's `line` is
/// the span's 1-based position in the request.
pub fn decode_request(request: &ExportTraceServiceRequest) -> DecodedSpans {
    let mut sorter = SpanSorter::default();
    for resource in &request.resource_spans {
        for scope in &resource.scope_spans {
            sorter.enter_scope(if scope.schema_url.is_empty() {
                &resource.schema_url
            } else {
                &scope.schema_url
            });
            scope.spans.iter().for_each(|span| sorter.push(span));
        }
    }
    sorter.finish()
}

/// Sorts spans one at a time, as they are decoded, so a request's spans
/// never need to be in memory at once (`wire::decode_protobuf`): what is
/// kept of a model or HTTP span is built at once, other spans keep their
/// ids only until the end tells whether their trace had a call.
#[derive(Default)]
pub struct SpanSorter {
    out: DecodedSpans,
    sorted: Vec<Sorted>,
    traces_with_calls: HashSet<[u8; 16]>,
    /// What `sorted` holds, by `SpanRecord::held_bytes`.
    held_bytes: usize,
    pushed: u64,
    /// The schema URL the spans now pushed were exported under.
    schema_url: String,
}

/// What a span's record holds besides its content and facts (parts of the
/// span): the record and its ids in hex. All a link span's record holds.
const LINK_RECORD_BYTES: usize = std::mem::size_of::<SpanRecord>() + 32 + 16 + 16;

enum Sorted {
    Kept(Box<SpanRecord>),
    /// A span that is neither, kept for its parent link if its trace has a
    /// call.
    Link(SpanIds),
}

/// A span's ids, of the lengths OTLP requires.
struct SpanIds {
    trace: [u8; 16],
    span: [u8; 8],
    parent: Option<[u8; 8]>,
}

impl SpanSorter {
    /// What a span's record holds beside parts of the span's bytes (see
    /// `wire::kept_bytes_at_most`).
    pub const MOST_HELD_PER_SPAN: usize = std::mem::size_of::<Sorted>() + LINK_RECORD_BYTES;
    /// What the schema URL's attribute adds to a kept span beside the URL.
    pub const SCHEMA_ATTRIBUTE_BYTES: usize = SCHEMA_URL_KEY.len() + 16;

    /// The spans pushed next were exported under `schema_url` (their
    /// scope's, else their resource's).
    pub fn enter_scope(&mut self, schema_url: &str) {
        if self.schema_url != schema_url {
            self.schema_url = schema_url.to_string();
        }
    }

    /// Sorts the next span of the request.
    pub fn push(&mut self, span: &Span) {
        self.pushed += 1;
        let line = self.pushed;
        for event in span.events.iter().filter(|e| e.name == circuit::EVENT_NAME) {
            self.out.decoded.push_circuit(
                line,
                circuit_event(event).map_err(|e| format!("span {}: {e}", hex(&span.span_id))),
            );
        }
        let Some(ids) = self.checked_ids(span, line) else { return };
        let kind = if is_model_call(span) {
            self.out.model_spans += 1;
            // Validated alone, so a bad span is rejected now, by position;
            // the trace's derivation later only sees spans that map.
            match map_call(span, &[]) {
                Ok(built) => {
                    // One record: a call, whose attempts its trace derives.
                    self.out.decoded.records += 1;
                    built.warnings.into_iter().for_each(|reason| self.out.decoded.warn(line, reason));
                    let mut unread = Vec::new();
                    let resends = checked_int(span, &["http.request.resend_count"], &mut unread);
                    unread.into_iter().for_each(|reason| self.out.decoded.warn(line, reason));
                    if let Some(n) = resends.filter(|&n| n > i64::from(MAX_RESENDS)) {
                        self.out.decoded.warn(
                            line,
                            format!("http.request.resend_count: {n} is over {MAX_RESENDS}, counted as {MAX_RESENDS}"),
                        );
                    }
                    Some(SpanKind::Model)
                }
                Err(reason) => {
                    self.out.decoded.reject(line, format!("span {}: {reason}", hex(&span.span_id)));
                    None
                }
            }
        } else if is_http_client(span) && !span.parent_span_id.is_empty() {
            Some(SpanKind::Http)
        } else {
            None
        };
        let sorted = match kind {
            Some(kind) => {
                self.traces_with_calls.insert(ids.trace);
                let record = SpanRecord {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty()).then(|| hex(&span.parent_span_id)),
                    kind,
                    span: Some(kept_in_scope(span, &self.schema_url).encode_to_vec()),
                    facts: facts_of(span),
                };
                self.held_bytes += std::mem::size_of::<Sorted>() + record.held_bytes();
                Sorted::Kept(Box::new(record))
            }
            None => {
                // Charged as the record it becomes if its trace has a call,
                // which only the end of the request tells.
                self.held_bytes += std::mem::size_of::<Sorted>() + LINK_RECORD_BYTES;
                Sorted::Link(ids)
            }
        };
        self.sorted.push(sorted);
    }

    /// The span's ids, or None with the span rejected.
    fn checked_ids(&mut self, span: &Span, line: u64) -> Option<SpanIds> {
        let checked = check_ids(span).and_then(|()| {
            let trace = span.trace_id.as_slice().try_into().map_err(|_| String::new())?;
            let id = span.span_id.as_slice().try_into().map_err(|_| String::new())?;
            let parent = match span.parent_span_id.as_slice() {
                [] => None,
                parent => Some(parent.try_into().map_err(|_| String::new())?),
            };
            Ok(SpanIds { trace, span: id, parent })
        });
        checked.map_err(|reason| self.out.decoded.reject(line, reason)).ok()
    }

    /// Bytes what is kept so far takes in memory, about: what the request
    /// costs once decoded, for the service's byte budget. A span kept for
    /// its parent link counts as kept until `finish` knows it is not.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    pub fn finish(self) -> DecodedSpans {
        let SpanSorter { mut out, sorted, traces_with_calls, .. } = self;
        for sorted in sorted {
            match sorted {
                Sorted::Kept(record) => out.decoded.spans.push(*record),
                Sorted::Link(ids) => {
                    let link = SpanRecord {
                        trace_id: hex(&ids.trace),
                        span_id: hex(&ids.span),
                        parent_span_id: ids.parent.map(|p| hex(&p)),
                        kind: SpanKind::Link,
                        span: None,
                        facts: SpanFacts::default(),
                    };
                    if traces_with_calls.contains(&ids.trace) {
                        out.decoded.spans.push(link);
                    } else {
                        out.loose_links.push(link);
                    }
                }
            }
        }
        out
    }
}

/// OTLP ids have fixed lengths and are never all zeros: anything else would
/// name no span, or let two different pairs of ids name one attempt.
fn check_ids(span: &Span) -> Result<(), String> {
    let name = if span.span_id.is_empty() { "(no span_id)".to_string() } else { hex(&span.span_id) };
    let check = |field: &str, id: &[u8], len: usize| -> Result<(), String> {
        if id.len() != len {
            Err(format!("span {name}: {field} is {} bytes, OTLP requires {len}", id.len()))
        } else if id.iter().all(|&b| b == 0) {
            Err(format!("span {name}: {field} is all zeros, which OTLP reserves for \"no id\""))
        } else {
            Ok(())
        }
    };
    check("trace_id", &span.trace_id, 16)?;
    check("span_id", &span.span_id, 8)?;
    if span.parent_span_id.is_empty() { Ok(()) } else { check("parent_span_id", &span.parent_span_id, 8) }
}

/// One OTLP/JSON `ExportTraceServiceRequest`. OTLP ignores unknown keys,
/// so an object of other keys only (an attempt record sent as OTLP) would
/// read as an empty request: it is refused instead, naming its keys.
pub fn decode_json(text: &str) -> Result<DecodedSpans, String> {
    let request: ExportTraceServiceRequest =
        serde_json::from_str(text).map_err(|e| format!("not an OTLP ExportTraceServiceRequest: {e}"))?;
    if request.resource_spans.is_empty() {
        let keys: std::collections::BTreeMap<String, serde::de::IgnoredAny> =
            serde_json::from_str(text).unwrap_or_default();
        if !keys.is_empty() && !keys.contains_key("resourceSpans") && !keys.contains_key("resource_spans") {
            let named: Vec<&str> = keys.keys().map(String::as_str).take(8).collect();
            return Err(format!(
                "not an OTLP ExportTraceServiceRequest: no resourceSpans (keys: {})",
                named.join(", ")
            ));
        }
    }
    Ok(decode_request(&request))
}

/// Every attempt of `request`, as if it were the whole of its traces: the
/// two steps in one, for tests and tools.
pub fn attempts_of_request(request: &ExportTraceServiceRequest) -> Vec<Attempt> {
    let spans = decode_request(request).decoded.spans;
    let mut traces: Vec<&str> = spans.iter().map(|s| s.trace_id.as_str()).collect();
    traces.sort_unstable();
    traces.dedup();
    traces
        .into_iter()
        .flat_map(|trace| {
            let of_trace: Vec<SpanRecord> = spans.iter().filter(|s| s.trace_id == trace).cloned().collect();
            derive_trace(&of_trace)
        })
        .collect()
}

/// The attempts of one trace from all of its stored spans. Spans that do
/// not decode or map are skipped (they were validated when received).
pub fn derive_trace(records: &[SpanRecord]) -> Vec<Attempt> {
    let links: Vec<SpanLink> = records.iter().map(SpanLink::of).collect();
    let by_id: HashMap<&str, &SpanRecord> = records.iter().map(|r| (r.span_id.as_str(), r)).collect();
    let calls = trace_calls(&links).calls;
    calls.iter().flat_map(|(id, call)| derive_call(id, call, &by_id)).collect()
}

/// What the shape of a trace reads of a model or HTTP span, from the span.
pub fn facts_of(span: &Span) -> SpanFacts {
    SpanFacts {
        name: span.name.clone(),
        start_ns: span.start_time_unix_nano,
        end_ns: span.end_time_unix_nano,
        host: host(span),
        call_id: str_attr(
            span,
            &["gen_ai.response.id", "ai.response.id", "attempt.provider_request_id", "anthropic.request.id"],
        )
        .map(String::from),
        // The model asked for, as the attempt's `model` reads it: a failed
        // OpenInference SDK span names it only in its invocation parameters.
        model: str_attr(span, &MODEL_KEYS[..1])
            .map(String::from)
            .or_else(|| {
                str_attr(span, &["llm.invocation_parameters", "embedding.invocation_parameters"])
                    .and_then(invocation_model)
            })
            .or_else(|| str_attr(span, &MODEL_KEYS[1..]).map(String::from)),
        resends: resend_count(span).map_or(0, |n| n.clamp(0, i64::from(MAX_RESENDS)) as u32),
        input_tokens: int_attr(span, &INPUT_TOKEN_KEYS),
        output_tokens: int_attr(span, &OUTPUT_TOKEN_KEYS),
    }
}

/// The facts of a stored span's content (`None` for a link, or content that
/// does not decode).
pub fn facts_of_stored(span: &[u8]) -> Option<SpanFacts> {
    Span::decode(span).ok().map(|span| facts_of(&span))
}

fn resend_count(span: &Span) -> Option<i64> {
    if is_http_client(span) && !is_model_call(span) {
        return None;
    }
    int_attr(span, &["http.request.resend_count"])
}

/// The server a span talked to, lower-cased: `server.address`, else the
/// host of its URL.
fn host(span: &Span) -> Option<String> {
    if let Some(address) = str_attr(span, &["server.address"]) {
        return Some(address.trim().to_ascii_lowercase());
    }
    let url = str_attr(span, &["url.full", "http.url"])?;
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.split(':').next()?,
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The attempts of one call, from the stored spans its shape names; none
/// if a span is missing or no longer maps (logged).
pub fn derive_call(call_id: &str, shape: &CallSpans, spans: &HashMap<&str, &SpanRecord>) -> Vec<Attempt> {
    let decode = |id: &str| spans.get(id).and_then(|r| Span::decode(r.span.as_deref()?).ok());
    let Some(mut call) = decode(call_id) else { return Vec::new() };
    let mut members = vec![call.clone()];
    // Another instrumentation's span of the same call fills in what this
    // one lacks (its attributes are looked up after the call's own).
    for same in shape.same.iter().filter_map(|id| decode(id)) {
        call.attributes.extend(same.attributes.iter().cloned());
        call.events.extend(same.events.iter().cloned());
        members.push(same);
    }
    let around: Vec<Span> = shape.around.iter().filter_map(|id| decode(id)).collect();
    let around: Vec<&Span> = around.iter().collect();
    let mut http: Vec<Span> = shape.http.iter().filter_map(|id| decode(id)).collect();
    let events: Vec<(Span, String)> = shape
        .events
        .iter()
        .filter_map(|id| Some((decode(id)?, spans.get(id.as_str())?.parent_span_id.clone()?)))
        .collect();
    sort_sent(&mut http);
    // Where each event's facts go: the HTTP span it names, else (it names
    // the call) the call's last try, which ended it.
    let mut messages: Vec<(String, &str)> = Vec::new();
    for (event, named) in &events {
        let target = match http.iter_mut().position(|h| hex(&h.span_id) == *named) {
            Some(i) => &mut http[i],
            None => http.last_mut().unwrap_or(&mut call),
        };
        logs::complete_with_event(target, event);
        if let Some(message) = str_attr(event, &["exception.message"]) {
            messages.push((span_attempt_id(&hex(&target.trace_id), &hex(&target.span_id)), message));
        }
    }
    let mut result = if http.is_empty() && shape.resends > 0 {
        map_resent_call(&call, &around, shape.resends)
    } else if http.is_empty() {
        map_call(&call, &around).map(|built| vec![built.attempt])
    } else {
        let http: Vec<&Span> = http.iter().collect();
        // A span of the call that states tokens and has HTTP children
        // (each SDK call of a framework's tries) gives its own tokens to
        // the child that delivered; the others take the call's.
        let stating: Vec<&Span> = members
            .iter()
            .filter(|m| has_attr_any(m, &INPUT_TOKEN_KEYS) || has_attr_any(m, &OUTPUT_TOKEN_KEYS))
            .collect();
        let source = |child: &Span| stating.iter().copied().find(|m| m.span_id == child.parent_span_id);
        map_hidden_retries(&call, &around, &http, &source)
    };
    if let Ok(attempts) = result.as_mut() {
        for (id, message) in messages {
            if let Some(attempt) = attempts.iter_mut().find(|a| a.attempt_id == id) {
                logs::keep_error_message(attempt, message);
            }
        }
    }
    match result {
        Ok(mapped) => mapped,
        Err(reason) => {
            tracing::warn!(span_id = call_id, %reason, "stored span no longer maps; skipped");
            Vec::new()
        }
    }
}

/// A call's HTTP spans in the order they were sent: they may come from
/// several SDK calls (a framework's own retries around the SDK's), each
/// counting its resends from 0.
fn sort_sent(http: &mut [Span]) {
    http.sort_by_key(|s| {
        (s.start_time_unix_nano, int_attr(s, &["http.request.resend_count"]).unwrap_or(0), s.span_id.clone())
    });
}

fn is_model_call(span: &Span) -> bool {
    if let Some(kind) = str_attr(span, &["openinference.span.kind"]) {
        return OPENINFERENCE_MODEL_KINDS.iter().any(|k| kind.eq_ignore_ascii_case(k));
    }
    let operation = str_attr(span, &["gen_ai.operation.name"]);
    let is = |names: &[&str], op: &str| names.iter().any(|k| op.eq_ignore_ascii_case(k));
    match operation {
        Some(op) if is(&NON_INFERENCE_OPERATIONS, op) => false,
        Some(op) if is(&INFERENCE_OPERATIONS, op) => true,
        _ => PROVIDER_KEYS.iter().chain(&MODEL_KEYS).any(|k| has_attr(span, k)),
    }
}

/// LangChain's own name of the provider (`ls_provider` in the `metadata`
/// JSON OpenInference's LangChain tracers copy onto a span): LangChain.js's
/// spans name the provider nowhere else.
fn langchain_provider(span: &Span) -> Option<String> {
    let metadata: serde_json::Value = serde_json::from_str(str_attr(span, &["metadata"])?).ok()?;
    metadata.get("ls_provider")?.as_str().filter(|p| !p.trim().is_empty()).map(String::from)
}

fn is_http_client(span: &Span) -> bool {
    has_attr(span, "http.request.method") || has_attr(span, "http.method")
}

/// The span as stored: ids, times, status and the attributes the mapping
/// reads, values cut to `MAX_KEPT_VALUE_BYTES`.
/// Where a kept span keeps the schema URL it was exported under, so spans
/// of conventions renamed later can be told apart (not an OpenTelemetry
/// attribute: its scope's or resource's `schema_url`).
pub const SCHEMA_URL_KEY: &str = "attempt_ledger.schema_url";

/// `kept`, with the schema URL the span came under.
fn kept_in_scope(span: &Span, schema_url: &str) -> Span {
    let mut kept = kept(span);
    if !schema_url.is_empty() {
        kept.attributes.push(KeyValue {
            key: SCHEMA_URL_KEY.into(),
            value: Some(AnyValue { value: Some(any_value::Value::StringValue(schema_url.into())) }),
            ..KeyValue::default()
        });
    }
    kept
}

fn kept(span: &Span) -> Span {
    let attributes = span
        .attributes
        .iter()
        .filter(|kv| {
            KEPT_KEYS.contains(&kv.key.as_str())
                || is_token_key(&kv.key)
                || kv.key.starts_with(USAGE_PREFIX)
                || kv.key == "metadata"
                || kv.key.starts_with("attempt.")
                || is_ratelimit_header(&kv.key)
        })
        .filter_map(|kv| {
            let mut kv = kv.clone();
            if kv.key == "metadata" {
                // Of LangChain's metadata (which may hold anything the
                // application put there), only the provider's name is kept.
                let value = serde_json::json!({ "ls_provider": langchain_provider(span)? }).to_string();
                kv.value = Some(AnyValue { value: Some(any_value::Value::StringValue(value)) });
            }
            if let Some(AnyValue { value: Some(any_value::Value::StringValue(s)) }) = kv.value.as_mut()
                && s.len() > MAX_KEPT_VALUE_BYTES
            {
                let mut cut = MAX_KEPT_VALUE_BYTES;
                while !s.is_char_boundary(cut) {
                    cut -= 1;
                }
                s.truncate(cut);
            }
            Some(kv)
        })
        .collect();
    // Of the events, only an exception's type is read (never its message).
    let events = exception_type(span)
        .map(|kind| {
            vec![Event {
                name: "exception".into(),
                attributes: vec![KeyValue {
                    key: "exception.type".into(),
                    value: Some(AnyValue { value: Some(any_value::Value::StringValue(kind.into())) }),
                    ..KeyValue::default()
                }],
                ..Event::default()
            }]
        })
        .unwrap_or_default();
    Span {
        trace_id: span.trace_id.clone(),
        span_id: span.span_id.clone(),
        parent_span_id: span.parent_span_id.clone(),
        name: span.name.clone(),
        start_time_unix_nano: span.start_time_unix_nano,
        end_time_unix_nano: span.end_time_unix_nano,
        attributes,
        events,
        status: span.status.clone(),
        ..Span::default()
    }
}

/// Attribute lookup on a model span, falling back to the wrappers around it
/// for the keys an inner span inherits.
struct CallView<'a> {
    span: &'a Span,
    around: &'a [&'a Span],
}

impl<'a> CallView<'a> {
    fn str(&self, keys: &[&str]) -> Option<&'a str> {
        str_attr(self.span, keys).or_else(|| {
            let inherited: Vec<&str> = keys.iter().copied().filter(|k| INHERITED_KEYS.contains(k)).collect();
            self.around.iter().find_map(|w| str_attr(w, &inherited))
        })
    }
}

fn map_call(span: &Span, around: &[&Span]) -> Result<Built, String> {
    let mut fields = call_fields(span, around)?;
    fields.attempt_id = Some(span_attempt_id(&hex(&span.trace_id), &hex(&span.span_id)));
    timing(&mut fields, span)?;
    fields.status = Some(span_status(span, fields.http_status));
    fields.tokens = tokens(span, &mut fields.warnings)?;
    apply_finish(&mut fields, span);
    build_attempt(fields)
}

/// A call whose span says its SDK resent the request `resends` times and
/// that has no attempt spans: that many failed attempts of unknown class
/// before its own, all issued by the SDK. They start when the call started
/// (no span says when each was sent) and carry nothing the span cannot say
/// of them: no status code, no tokens, no duration.
fn map_resent_call(call: &Span, around: &[&Span], resends: u32) -> Result<Vec<Attempt>, String> {
    let base_index = int_attr(call, &["attempt.index"]);
    let (trace, span_id) = (hex(&call.trace_id), hex(&call.span_id));
    let mut attempts = Vec::with_capacity(resends as usize + 1);
    for k in 1..=resends {
        let mut fields = call_fields(call, around)?;
        fields.attempt_id = Some(resent_attempt_id(&trace, &span_id, k));
        fields.layer = Some(fields.layer.unwrap_or(Layer::Sdk));
        fields.attempt = base_index.map(|b| b + i64::from(k) - 1);
        timing(&mut fields, call)?;
        fields.status = Some(Status::Error);
        fields.duration_ms = None;
        fields.warnings.clear();
        (fields.http_status, fields.error_code, fields.error_class, fields.retry_after_ms) =
            (None, None, None, None);
        (fields.ttft_ms, fields.provider_request_id, fields.decision) = (None, None, None);
        (fields.visible_output, fields.commit_state, fields.served_model) = (None, None, None);
        (fields.cost, fields.cost_currency) = (None, None);
        fields.headroom = Headroom::default();
        attempts.push(build_attempt(fields)?.attempt);
    }
    let mut last = call_fields(call, around)?;
    last.attempt_id = Some(span_attempt_id(&trace, &span_id));
    last.layer = Some(last.layer.unwrap_or(Layer::Sdk));
    last.attempt = base_index.map(|b| b + i64::from(resends));
    timing(&mut last, call)?;
    last.status = Some(span_status(call, last.http_status));
    last.tokens = tokens(call, &mut last.warnings)?;
    apply_finish(&mut last, call);
    attempts.push(build_attempt(last)?.attempt);
    Ok(attempts)
}

/// The attempts of a call with HTTP spans, in order. Each delivering
/// source's tokens (the span `token_source` names for a child, else the
/// call) go once, to the first child that delivered under it.
fn map_hidden_retries<'a>(
    call: &Span,
    around: &[&Span],
    http: &[&Span],
    token_source: &dyn Fn(&Span) -> Option<&'a Span>,
) -> Result<Vec<Attempt>, String> {
    let base_index = int_attr(call, &["attempt.index"]);
    let mut attempts = Vec::with_capacity(http.len());
    let mut delivered: HashSet<Option<&[u8]>> = HashSet::new();
    for (i, child) in http.iter().enumerate() {
        let mut fields = call_fields(call, around)?;
        fields.attempt_id = Some(span_attempt_id(&hex(&child.trace_id), &hex(&child.span_id)));
        fields.layer = Some(Layer::Sdk);
        fields.attempt = base_index.map(|b| b + i as i64);
        fields.warnings.clear();
        fields.http_status = status_code(child, &mut fields.warnings);
        let own = span_headroom(child, &mut fields.warnings);
        // The call's own headroom describes the response it returned: the last try's.
        fields.headroom = if i + 1 == http.len() { own.or(&fields.headroom) } else { own };
        fields.error_code = error_code(child);
        fields.error_class = None;
        timing(&mut fields, child)?;
        let status = span_status(child, fields.http_status);
        fields.status = Some(status);
        if i + 1 != http.len() {
            // The caller's decision applies to what came after the SDK gave up.
            fields.decision = None;
        }
        let source = token_source(child);
        if status == Status::Ok && delivered.insert(source.map(|s| s.span_id.as_slice())) {
            fields.tokens = tokens(source.unwrap_or(call), &mut fields.warnings)?;
        } else {
            fields.tokens = Tokens::default();
            (fields.cost, fields.cost_currency) = (None, None);
        }
        if i + 1 == http.len() {
            apply_finish(&mut fields, call);
        }
        attempts.push(build_attempt(fields)?.attempt);
    }
    Ok(attempts)
}

/// Fields that come from the model span's attributes (and its wrappers').
fn call_fields(span: &Span, around: &[&Span]) -> Result<AttemptFields, String> {
    let view = CallView { span, around };
    let langchain = langchain_provider(span);
    let provider = str_attr(span, &PROVIDER_KEYS).or(langchain.as_deref()).ok_or(
        "no provider (gen_ai.provider.name, gen_ai.system, gen_ai.model.provider, llm.provider, llm.system \
         or LangChain's ls_provider in metadata)",
    )?;
    // OpenInference's llm.model_name is the model that answered; the one
    // asked for is inside the invocation parameters.
    let invoked = str_attr(span, &["llm.invocation_parameters", "embedding.invocation_parameters"])
        .and_then(invocation_model);
    // A gateway that rewrote the model keeps the one asked for apart
    // (Envoy AI Gateway's `gen_ai.original.model`): the route is that one.
    let model = str_attr(span, &["gen_ai.original.model", "gen_ai.request.model"])
        .map(String::from)
        .or(invoked)
        .or_else(|| str_attr(span, &["llm.model_name", "embedding.model_name"]).map(String::from))
        .ok_or("no model (gen_ai.request.model, llm.invocation_parameters.model or llm.model_name)")?;
    let mut warnings = Vec::new();
    let http_status = status_code(span, &mut warnings);
    let mut fields = AttemptFields {
        workflow_id: view
            .str(&["attempt.workflow_id"])
            .map(String::from)
            .unwrap_or_else(|| hex(&span.trace_id)),
        provider: provider.to_string(),
        model,
        served_model: str_attr(span, &["gen_ai.response.model", "llm.model_name", "embedding.model_name"])
            .map(String::from),
        served_provider: str_attr(span, &["attempt.served_provider"]).map(String::from),
        attempt: checked_int(span, &["attempt.index"], &mut warnings),
        workflow: view.str(&["attempt.workflow"]).map(String::from),
        route_group: view.str(&["attempt.route_group", "litellm.model_group"]).map(String::from),
        layer: enum_attr(span, "attempt.layer")?,
        route: enum_attr(span, "attempt.route")?,
        decision: enum_attr(span, "attempt.decision")?,
        commit_state: enum_attr(span, "attempt.commit_state")?,
        error_class: enum_attr(span, "attempt.error_class")?,
        circuit: enum_attr(span, "attempt.circuit")?,
        visible_output: attr(span, "attempt.visible_output").and_then(|v| match v {
            any_value::Value::BoolValue(b) => Some(*b),
            any_value::Value::StringValue(s) => s.parse().ok(),
            _ => None,
        }),
        provider_request_id: str_attr(
            span,
            &["attempt.provider_request_id", "gen_ai.response.id", "ai.response.id", "anthropic.request.id"],
        )
        .map(String::from),
        retry_after_ms: checked_float(span, &["attempt.retry_after_ms"], &mut warnings),
        billing_account: view.str(&["attempt.billing_account"]).map(String::from),
        // The tier that served wins over the tier asked for ("auto" asks).
        service_tier: str_attr(span, &SERVICE_TIER_KEYS).map(String::from),
        batch: attr(span, "attempt.batch").and_then(|v| match v {
            any_value::Value::BoolValue(b) => Some(*b),
            any_value::Value::StringValue(s) => s.parse().ok(),
            _ => None,
        }),
        web_search_requests: checked_int(span, &WEB_SEARCH_KEYS, &mut warnings).filter(|n| *n >= 0),
        total_tokens: checked_int(span, &TOTAL_TOKEN_KEYS, &mut warnings).filter(|n| *n >= 0),
        http_status,
        error_code: error_code(span),
        ttft_ms: time_to_first_token_ms(span, &mut warnings),
        cost: emitter_cost(span, &mut warnings)?,
        headroom: span_headroom(span, &mut warnings),
        source_trace: Some(hex(&span.trace_id)),
        extra: extra_attributes(&view, &mut warnings),
        warnings,
        ..AttemptFields::default()
    };
    // Unknown only when no key states the cost in USD.
    fields.cost_currency = cost_currency(span)
        .filter(|c| fields.cost.is_none() && !c.eq_ignore_ascii_case("USD") && amount_stated(span))
        .map(str::to_uppercase);
    Ok(fields)
}

/// Where emitters put the service tier: ours, then the OpenAI
/// instrumentations' response and request attributes, each in its current
/// and its older `gen_ai.openai.*` spelling.
const SERVICE_TIER_KEYS: [&str; 5] = [
    "attempt.service_tier",
    "openai.response.service_tier",
    "gen_ai.openai.response.service_tier",
    "openai.request.service_tier",
    "gen_ai.openai.request.service_tier",
];

/// Attributes named `attempt.extra.KEY` (on the call or a model span
/// wrapping it, the call's own first) become the record's extra field `KEY`: what
/// dimensions (`extra.team`) read. Scalars only; bounded like a JSONL
/// record's unknown fields.
fn extra_attributes(view: &CallView, warnings: &mut Vec<String>) -> Option<String> {
    const PREFIX: &str = "attempt.extra.";
    let mut extra = serde_json::Map::new();
    for span in std::iter::once(view.span).chain(view.around.iter().copied()) {
        for kv in &span.attributes {
            let Some(key) = kv.key.strip_prefix(PREFIX).filter(|k| !k.is_empty()) else { continue };
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(any_value::Value::StringValue(s)) => serde_json::Value::from(s.as_str()),
                Some(any_value::Value::IntValue(i)) => serde_json::Value::from(*i),
                Some(any_value::Value::BoolValue(b)) => serde_json::Value::from(*b),
                Some(any_value::Value::DoubleValue(d)) => match serde_json::Number::from_f64(*d) {
                    Some(n) => serde_json::Value::Number(n),
                    None => continue,
                },
                _ => continue,
            };
            extra.entry(key.to_string()).or_insert(value);
        }
    }
    usage_extra(view.span, &mut extra);
    if extra.is_empty() {
        return None;
    }
    let text = serde_json::Value::Object(extra).to_string();
    if text.len() > super::jsonl::MAX_EXTRA_BYTES {
        warnings.push(format!(
            "attempt.extra.* attributes take {} bytes, over the {}-byte limit: not kept",
            text.len(),
            super::jsonl::MAX_EXTRA_BYTES
        ));
        return None;
    }
    Some(text)
}

const USAGE_PREFIX: &str = "gen_ai.usage.";

/// What the record keeps of a model span's `gen_ai.usage.*` attributes
/// that no field reads, as extra fields: per-modality counts
/// (`usage.input_tokens.audio`), an emitter's cost in a currency other
/// than USD (`cost_amount`, `cost_currency`) and where a cost came from
/// (`cost_source`). Integers and strings only.
fn usage_extra(span: &Span, extra: &mut serde_json::Map<String, serde_json::Value>) {
    let usd = cost_currency(span).is_none_or(|c| c.eq_ignore_ascii_case("USD"));
    for kv in &span.attributes {
        let Some(name) = kv.key.strip_prefix(USAGE_PREFIX) else { continue };
        let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::IntValue(n)) => serde_json::Value::from(*n),
            Some(any_value::Value::DoubleValue(d)) => match serde_json::Number::from_f64(*d) {
                Some(n) => serde_json::Value::Number(n),
                None => continue,
            },
            Some(any_value::Value::StringValue(s)) => serde_json::Value::from(s.as_str()),
            _ => continue,
        };
        let key = match name {
            "cost.source" => "cost_source".to_string(),
            "cost.amount" | "cost.currency" if usd => continue,
            "cost.amount" => "cost_amount".to_string(),
            "cost.currency" => "cost_currency".to_string(),
            // Said by the fields already.
            "cost" | "total_tokens" => continue,
            _ if is_token_key(&kv.key) => continue,
            other => format!("usage.{other}"),
        };
        extra.entry(key).or_insert(value);
    }
}

fn cost_currency(span: &Span) -> Option<&str> {
    str_attr(span, &["gen_ai.usage.cost.currency"]).map(str::trim).filter(|c| !c.is_empty())
}

/// A call that ended badly though its transport did not say so: a finish
/// reason of `error` (a failed attempt) or `length` / `max_tokens` (a
/// truncated one, class `truncated`), as the error code when the span has
/// none. Read only when the span left its status unset: an instrumentation
/// that states OK says the call succeeded.
fn finish_failure(span: &Span) -> Option<&'static str> {
    let code = span.status.as_ref().map(|s| s.code).unwrap_or(0);
    if code != StatusCode::Unset as i32 {
        return None;
    }
    let reasons: Vec<String> = match attr(span, "gen_ai.response.finish_reasons")? {
        any_value::Value::ArrayValue(values) => values
            .values
            .iter()
            .filter_map(|v| match v.value.as_ref()? {
                any_value::Value::StringValue(s) => Some(s.to_ascii_lowercase()),
                _ => None,
            })
            .collect(),
        any_value::Value::StringValue(s) => vec![s.to_ascii_lowercase()],
        _ => return None,
    };
    if reasons.iter().any(|r| r == "error") {
        Some("error")
    } else if reasons.iter().any(|r| r == "length" || r == "max_tokens") {
        Some("length")
    } else {
        None
    }
}

/// Marks the attempt that returned `call`'s answer failed when its finish
/// reason says so (`finish_failure`); its tokens stay: they were billed.
fn apply_finish(fields: &mut AttemptFields, call: &Span) {
    if fields.status == Some(Status::Ok)
        && let Some(reason) = finish_failure(call)
    {
        fields.status = Some(Status::Error);
        if fields.error_code.is_none() {
            fields.error_code = Some(reason.to_string());
        }
    }
}

/// `{"model": "gpt-4o-mini", ...}` as OpenInference records the request.
fn invocation_model(json: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(json).ok()?;
    value.get("model")?.as_str().filter(|m| !m.trim().is_empty()).map(String::from)
}

/// The prefix under which OpenTelemetry HTTP instrumentations record a
/// captured response header (a string array, or a string).
const RESPONSE_HEADER: &str = "http.response.header.";

/// `attempt.ratelimit.*`: the record's headroom fields as attributes, in
/// the order of `ratelimit::FIELDS`.
const RATELIMIT_ATTRIBUTES: [&str; 12] = [
    "attempt.ratelimit.remaining_requests",
    "attempt.ratelimit.limit_requests",
    "attempt.ratelimit.reset_requests_ms",
    "attempt.ratelimit.remaining_tokens",
    "attempt.ratelimit.limit_tokens",
    "attempt.ratelimit.reset_tokens_ms",
    "attempt.ratelimit.remaining_input_tokens",
    "attempt.ratelimit.limit_input_tokens",
    "attempt.ratelimit.reset_input_tokens_ms",
    "attempt.ratelimit.remaining_output_tokens",
    "attempt.ratelimit.limit_output_tokens",
    "attempt.ratelimit.reset_output_tokens_ms",
];

fn is_ratelimit_header(key: &str) -> bool {
    key.strip_prefix(RESPONSE_HEADER).is_some_and(|name| name.contains("ratelimit"))
}

/// The headroom a span states: `attempt.ratelimit.*`, then the provider's
/// rate-limit response headers it captured.
fn span_headroom(span: &Span, warnings: &mut Vec<String>) -> Headroom {
    let mut stated = Headroom::default();
    for (key, (_, kind, part)) in RATELIMIT_ATTRIBUTES.iter().zip(ratelimit::FIELDS) {
        let value = checked_int(span, &[key], warnings).filter(|v| {
            let fits = *v >= 0 && (part != ratelimit::Part::ResetMs || *v <= ratelimit::MAX_RESET_MS);
            if !fits {
                warnings.push(format!("{key}: {v} is out of range, ignored"));
            }
            fits
        });
        stated.set(kind, part, value);
    }
    let headers: Vec<(&str, &str)> = span
        .attributes
        .iter()
        .filter(|kv| is_ratelimit_header(&kv.key))
        .filter_map(|kv| {
            let text = match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) => s.as_str(),
                any_value::Value::ArrayValue(list) => match list.values.first()?.value.as_ref()? {
                    any_value::Value::StringValue(s) => s.as_str(),
                    _ => return None,
                },
                _ => return None,
            };
            Some((&kv.key[RESPONSE_HEADER.len()..], text))
        })
        .collect();
    if headers.is_empty() {
        return stated;
    }
    let ended = i64::try_from(span.end_time_unix_nano.max(span.start_time_unix_nano))
        .map(DateTime::from_timestamp_nanos)
        .unwrap_or_default();
    stated.or(&ratelimit::from_headers(headers, ended, warnings))
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

/// The HTTP status: the HTTP attributes, else a numeric `error.code` or
/// `error.type` (gateways put the status there). Out of range is dropped
/// with a warning: clients log 0 for "no response".
fn status_code(span: &Span, warnings: &mut Vec<String>) -> Option<i32> {
    // `error.code` and `error.type` also hold names (`rate_limit_exceeded`):
    // only the HTTP keys must be numbers.
    let http = ["http.response.status_code", "http.status_code"];
    let (key, code) =
        http.iter().find_map(|k| checked_int(span, &[*k], warnings).map(|n| (*k, n))).or_else(|| {
            ["error.code", "error.type"].iter().find_map(|k| int_attr(span, &[*k]).map(|n| (*k, n)))
        })?;
    if (100..=599).contains(&code) {
        Some(code as i32)
    } else {
        warnings.push(format!("{key}: {code} is not an HTTP status (100-599), dropped"));
        None
    }
}

/// `error.type` (an exception class or a code), else a non-numeric
/// `error.code` (a number in either is the HTTP status instead), else the
/// `exception.type` of an `exception` event (where OpenInference emitters,
/// Envoy AI Gateway among them, put the error).
fn error_code(span: &Span) -> Option<String> {
    ["error.type", "error.code"]
        .iter()
        .filter_map(|k| str_attr(span, &[*k]))
        .find(|v| v.parse::<i64>().is_err())
        .or_else(|| exception_type(span))
        .map(String::from)
}

fn exception_type(span: &Span) -> Option<&str> {
    span.events.iter().filter(|e| e.name == "exception").find_map(|e| {
        e.attributes.iter().find(|kv| kv.key == "exception.type").and_then(|kv| {
            match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) if !s.trim().is_empty() => Some(s.as_str()),
                _ => None,
            }
        })
    })
}

/// Whether the span states `gen_ai.usage.cost.amount` at all.
fn amount_stated(span: &Span) -> bool {
    attr(span, "gen_ai.usage.cost.amount").is_some()
}

/// The proposed `gen_ai.usage.cost.amount`, in USD when `.currency` says
/// USD or nothing. Another currency is never converted by a guessed rate:
/// the amount and currency are kept in extra (`usage_extra`), the record's
/// `cost_currency` names it, and the attempt's cost is unknown, with a
/// warning.
fn amount_in_usd(span: &Span, warnings: &mut Vec<String>) -> Option<(&'static str, f64)> {
    const KEY: &str = "gen_ai.usage.cost.amount";
    let amount = checked_float(span, &[KEY], warnings)?;
    match cost_currency(span) {
        Some(currency) if !currency.eq_ignore_ascii_case("USD") => {
            warnings.push(format!(
                "{KEY}: {amount} {currency} is not in USD: kept as extra cost_amount and cost_currency, \
                 not converted; the attempt's cost is unknown"
            ));
            None
        }
        _ => Some((KEY, amount)),
    }
}

/// The cost the emitter states. OpenLIT writes `gen_ai.usage.cost = 0` for
/// a model its price list lacks (a list it downloads at start, so every
/// model when it runs offline): a 0 there beside tokens is no price, and the
/// price table prices the attempt instead.
fn emitter_cost(span: &Span, warnings: &mut Vec<String>) -> Result<Option<PicoUsd>, String> {
    const KEYS: [&str; 5] = [
        "attempt.cost_usd",
        "llm.cost.total",
        "gen_ai.cost.total_cost",
        "litellm.cost.total",
        "gen_ai.usage.cost",
    ];
    let stated = KEYS.iter().find_map(|k| checked_float(span, &[*k], warnings).map(|usd| (*k, usd)));
    let Some((key, usd)) = stated.or_else(|| amount_in_usd(span, warnings)) else {
        return Ok(None);
    };
    let billed_tokens = ["gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"]
        .iter()
        .any(|k| int_attr(span, &[*k]).is_some_and(|n| n > 0));
    if key == "gen_ai.usage.cost" && usd == 0.0 && billed_tokens {
        return Ok(None);
    }
    PicoUsd::from_usd(usd).map(Some).ok_or(format!("cost {usd} is not a cost in dollars (>= 0)"))
}

/// Time to first token: the conventions' seconds, or the AI SDK's
/// milliseconds.
fn time_to_first_token_ms(span: &Span, warnings: &mut Vec<String>) -> Option<f64> {
    let seconds = [
        "gen_ai.response.time_to_first_chunk",
        "gen_ai.client.operation.time_to_first_chunk",
        "gen_ai.server.time_to_first_token",
    ];
    checked_float(span, &seconds, warnings).map(|s| s * 1000.0).or_else(|| {
        checked_float(span, &["ai.response.msToFirstChunk", "ai.stream.msToFirstChunk"], warnings)
    })
}

fn tokens(span: &Span, warnings: &mut Vec<String>) -> Result<Tokens, String> {
    let mut count = |keys: &[&str]| -> Result<Option<i64>, String> {
        match checked_int(span, keys, warnings) {
            Some(n) if n < 0 => Err(format!("{} must be >= 0, got {n}", keys[0])),
            other => Ok(other),
        }
    };
    Ok(Tokens {
        input: count(&INPUT_TOKEN_KEYS)?,
        output: count(&OUTPUT_TOKEN_KEYS)?,
        cached_input: count(&CACHE_READ_KEYS)?,
        cache_write_input: count(&CACHE_WRITE_KEYS)?,
        reasoning_output: count(&REASONING_KEYS)?,
        cache_write_1h_input: count(&CACHE_WRITE_1H_KEYS)?,
    })
}

/// Whether a field reads `key` as a token count: the stored span keeps it,
/// extra does not repeat it.
fn is_token_key(key: &str) -> bool {
    [
        INPUT_TOKEN_KEYS.as_slice(),
        &OUTPUT_TOKEN_KEYS,
        &CACHE_READ_KEYS,
        &CACHE_WRITE_KEYS,
        &CACHE_WRITE_1H_KEYS,
        &REASONING_KEYS,
        &TOTAL_TOKEN_KEYS,
        &WEB_SEARCH_KEYS,
    ]
    .iter()
    .any(|keys| keys.contains(&key))
}

/// Reasoning ("thinking") tokens, a part of the output tokens.
const REASONING_KEYS: [&str; 5] = [
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.usage.reasoning_tokens",
    "llm.token_count.completion_details.reasoning",
    "ai.usage.outputTokenDetails.reasoningTokens",
    "ai.usage.reasoningTokens",
];

/// The part of the cache writes that went to a one-hour cache.
const CACHE_WRITE_1H_KEYS: [&str; 3] = [
    "attempt.cache_write_1h_input_tokens",
    "gen_ai.usage.cache_creation.ephemeral_1h_input_tokens",
    "gen_ai.usage.cache_write_1h.input_tokens",
];

/// The emitter's total, which settles how it counted reasoning and tool-use
/// tokens (`ingest::build_attempt`).
const TOTAL_TOKEN_KEYS: [&str; 3] =
    ["gen_ai.usage.total_tokens", "llm.token_count.total", "ai.usage.totalTokens"];

/// Server-side web searches billed per request.
const WEB_SEARCH_KEYS: [&str; 3] = [
    "attempt.web_search_requests",
    "gen_ai.usage.web_search_requests",
    "gen_ai.usage.server_tool_use.web_search_requests",
];

const CACHE_READ_KEYS: [&str; 5] = [
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
    "ai.usage.inputTokenDetails.cacheReadTokens",
    "ai.usage.cachedInputTokens",
];

const CACHE_WRITE_KEYS: [&str; 6] = [
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_write.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
    "llm.token_count.prompt_details.cache_write",
    "llm.token_count.prompt_details.cache_creation",
    "ai.usage.inputTokenDetails.cacheWriteTokens",
];

/// A `circuit.state_change` span event: its time is the change's `at`, its
/// `attempt.*` attributes the record's fields.
fn circuit_event(event: &Event) -> Result<CircuitChange, String> {
    circuit_change_of(event.time_unix_nano, &event.attributes)
}

/// A state change from an OTLP span event or log record: `time_unix_nano`
/// (0: none) is its `at`, the `attempt.*` attributes its fields.
pub(crate) fn circuit_change_of(
    time_unix_nano: u64,
    attributes: &[KeyValue],
) -> Result<CircuitChange, String> {
    let at = match time_unix_nano {
        0 => None,
        n => Some(nanos(n).map_err(|e| format!("circuit record: at: {e}"))?),
    };
    circuit::build(circuit::CircuitFields::read(at, |name| attribute_text(attributes, name))?)
}

/// The `attempt.<name>` attribute, a string or absent.
fn attribute_text<'a>(attributes: &'a [KeyValue], name: &str) -> Result<Option<&'a str>, String> {
    let key = format!("attempt.{name}");
    match attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()?.value.as_ref()) {
        None => Ok(None),
        Some(any_value::Value::StringValue(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(format!("circuit record: {key}: expected a string, got {}", shown(other))),
    }
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a any_value::Value> {
    span.attributes
        .iter()
        .find(|kv: &&KeyValue| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

fn has_attr_any(span: &Span, keys: &[&str]) -> bool {
    keys.iter().any(|k| has_attr(span, k))
}

fn has_attr(span: &Span, key: &str) -> bool {
    attr(span, key).is_some()
}

/// The first of `keys` present as a non-empty string.
fn str_attr<'a>(span: &'a Span, keys: &[&str]) -> Option<&'a str> {
    keys.iter().find_map(|k| match attr(span, k) {
        Some(any_value::Value::StringValue(s)) if !s.trim().is_empty() => Some(s.as_str()),
        _ => None,
    })
}

/// The first of `keys` holding an integer: an int, a whole double, or a
/// string of digits (LiteLLM sends counts and statuses as strings). For
/// lookups whose value is also checked where it is read (`checked_int`).
fn int_attr(span: &Span, keys: &[&str]) -> Option<i64> {
    checked_int(span, keys, &mut Vec::new())
}

/// Like `int_attr`, and a value that cannot be read as the integer it must
/// be (`"abc"`, `"1e3"`, 12.5, a number past 64 bits, a list) is ignored
/// with a warning that names the key, never read as 0 or silently dropped.
/// An empty string is an absent value, as everywhere.
fn checked_int(span: &Span, keys: &[&str], warnings: &mut Vec<String>) -> Option<i64> {
    keys.iter().find_map(|k| {
        let value = attr(span, k)?;
        let read = match value {
            any_value::Value::IntValue(n) => Some(*n),
            any_value::Value::DoubleValue(d) if d.fract() == 0.0 && d.abs() < 9.0e15 => Some(*d as i64),
            any_value::Value::StringValue(s) if s.trim().is_empty() => return None,
            any_value::Value::StringValue(s) => s.trim().parse().ok(),
            _ => None,
        };
        if read.is_none() {
            warnings.push(format!("{k}: {} is not an integer, ignored", shown(value)));
        }
        read
    })
}

/// A finite number (an int, a double, or a string of one), checked like
/// `checked_int`.
fn checked_float(span: &Span, keys: &[&str], warnings: &mut Vec<String>) -> Option<f64> {
    keys.iter().find_map(|k| {
        let value = attr(span, k)?;
        let read = match value {
            any_value::Value::DoubleValue(d) => Some(*d),
            any_value::Value::IntValue(n) => Some(*n as f64),
            any_value::Value::StringValue(s) if s.trim().is_empty() => return None,
            any_value::Value::StringValue(s) => s.trim().parse().ok(),
            _ => None,
        }
        .filter(|f: &f64| f.is_finite());
        if read.is_none() {
            warnings.push(format!("{k}: {} is not a finite number, ignored", shown(value)));
        }
        read
    })
}

/// A value as a warning shows it: strings quoted and cut to 40 characters.
fn shown(value: &any_value::Value) -> String {
    match value {
        any_value::Value::StringValue(s) => {
            let cut: String = s.chars().take(40).collect();
            if cut.len() < s.len() { format!("`{cut}...`") } else { format!("`{cut}`") }
        }
        any_value::Value::IntValue(n) => n.to_string(),
        any_value::Value::DoubleValue(d) => d.to_string(),
        any_value::Value::BoolValue(b) => b.to_string(),
        any_value::Value::BytesValue(_) => "a byte string".into(),
        any_value::Value::ArrayValue(_) => "a list".into(),
        any_value::Value::KvlistValue(_) => "a map".into(),
        any_value::Value::StringValueStrindex(_) => "a string table index".into(),
    }
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
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

#[cfg(test)]
mod conventions_tests;
#[cfg(test)]
mod logs_tests;
#[cfg(test)]
mod parentage_tests;
#[cfg(test)]
mod tests;
