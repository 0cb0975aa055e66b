//! OTLP/protobuf export requests decoded one span at a time.
//!
//! Decoding a whole `ExportTraceServiceRequest` first builds every span of
//! it in memory (about five times the body for small spans) before any is
//! sorted. Here the three envelopes above the spans (request, resource
//! spans, scope spans) are walked on the wire, and each span is decoded,
//! sorted and dropped before the next: what a request holds is what is
//! kept of it, offered to `admit` as it grows so a caller can refuse a
//! request before it takes more than its share of memory.
//!
//! The envelopes are checked as strictly as prost checks them (wire types,
//! lengths, UTF-8 of `schema_url`, resource and scope decoded), so a body
//! is refused here exactly when `ExportTraceServiceRequest::decode` would
//! refuse it.

use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use prost::bytes::Buf;
use prost::encoding::{DecodeContext, WireType, check_wire_type, decode_key, decode_varint, skip_field};

use super::{DecodedSpans, SpanSorter};

/// Why a protobuf body gave no spans.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtobufError {
    #[error("undecodable protobuf ExportTraceServiceRequest: {0}")]
    Undecodable(String),
    /// `admit` refused more memory; nothing of the request is kept.
    #[error("the request's decoded spans found no room in the byte budget")]
    OverBudget,
}

impl From<prost::DecodeError> for ProtobufError {
    fn from(error: prost::DecodeError) -> Self {
        ProtobufError::Undecodable(error.to_string())
    }
}

/// Kept bytes offered to `admit` at a time: often enough that a request is
/// refused soon after the budget runs out, rarely enough to cost nothing.
const ADMIT_STEP: usize = 256 << 10;

/// Sorts the spans of a protobuf `ExportTraceServiceRequest` as
/// `decode_request` does, offering what is kept to `admit` as it grows
/// (`admit(n)`: may the request hold `n` bytes more?). Spans are numbered
/// by their position in the request, as there.
pub fn decode_protobuf(
    body: &[u8],
    admit: &mut dyn FnMut(usize) -> bool,
) -> Result<DecodedSpans, ProtobufError> {
    let mut walk = Walk { sorter: SpanSorter::default(), admitted: 0, admit };
    each_span_in_scope(body, &mut |span, schema_url| {
        walk.sorter.enter_scope(schema_url);
        walk.span(span)
    })?;
    walk.offer(0)?;
    Ok(walk.sorter.finish())
}

/// At most what `decode_protobuf` keeps of `body` (its `held_bytes`), read
/// from the envelopes alone: a span's record is its ids in hex, its name and
/// a few attribute values (each a part of the span's bytes) and what is
/// kept of it (a part too), beside a record's fixed size.
pub fn kept_bytes_at_most(body: &[u8]) -> Result<usize, ProtobufError> {
    let mut bound = 0usize;
    each_span_in_scope(body, &mut |span, schema_url| {
        let schema =
            if schema_url.is_empty() { 0 } else { SpanSorter::SCHEMA_ATTRIBUTE_BYTES + schema_url.len() };
        bound = bound.saturating_add(SpanSorter::MOST_HELD_PER_SPAN + 2 * (span.len() + schema));
        Ok(())
    })?;
    Ok(bound)
}

/// Calls `on_span` with the bytes of each span of the request in `body`,
/// in order, checking the envelopes around them. A logs export has the same
/// three envelopes at the same tags (`ResourceLogs`, `ScopeLogs`, then its
/// log records), and so has a metrics export (its metrics), so this walks
/// their records too (`otlp::logs`, `otlp::metrics`).
pub(super) fn each_span(
    body: &[u8],
    on_span: &mut dyn FnMut(&[u8]) -> Result<(), ProtobufError>,
) -> Result<(), ProtobufError> {
    walk(body, false, &mut |span, _| on_span(span))
}

/// What `each_span_in_scope` calls with a span's bytes and its schema URL.
pub(super) type OnScopedSpan<'a> = dyn FnMut(&[u8], &str) -> Result<(), ProtobufError> + 'a;

/// `each_span`, with the schema URL each span was exported under: its
/// scope's, else its resource's (both written after the spans, so each
/// envelope is read once ahead for it).
pub(super) fn each_span_in_scope(body: &[u8], on_span: &mut OnScopedSpan) -> Result<(), ProtobufError> {
    walk(body, true, on_span)
}

fn walk(body: &[u8], with_schema: bool, on_span: &mut OnScopedSpan) -> Result<(), ProtobufError> {
    let schema_of = |message: &[u8]| -> Result<String, ProtobufError> {
        let mut url = String::new();
        if with_schema {
            fields(message, 3, |tag, value| {
                if tag == 3 {
                    url = std::str::from_utf8(value).unwrap_or_default().to_string();
                }
                Ok(())
            })?;
        }
        Ok(url)
    };
    fields(body, 1, |tag, value| match tag {
        1 => {
            let resource_schema = schema_of(value)?;
            fields(value, 3, |tag, value| match tag {
                1 => Resource::decode(value).map(drop).map_err(ProtobufError::from),
                2 => {
                    let scope_schema = schema_of(value)?;
                    let schema = if scope_schema.is_empty() { &resource_schema } else { &scope_schema };
                    fields(value, 3, |tag, value| match tag {
                        1 => InstrumentationScope::decode(value).map(drop).map_err(ProtobufError::from),
                        2 => on_span(value, schema),
                        3 => utf8(value, "ScopeSpans.schema_url"),
                        _ => Ok(()),
                    })
                }
                3 => utf8(value, "ResourceSpans.schema_url"),
                _ => Ok(()),
            })
        }
        _ => Ok(()),
    })
}

struct Walk<'a> {
    sorter: SpanSorter,
    /// Of `sorter.held_bytes()`, what `admit` granted.
    admitted: usize,
    admit: &'a mut dyn FnMut(usize) -> bool,
}

impl Walk<'_> {
    fn span(&mut self, bytes: &[u8]) -> Result<(), ProtobufError> {
        self.sorter.push(&Span::decode(bytes)?);
        self.offer(ADMIT_STEP)
    }

    /// Offers what is held past what was granted, once it is `at_least`.
    fn offer(&mut self, at_least: usize) -> Result<(), ProtobufError> {
        let more = self.sorter.held_bytes().saturating_sub(self.admitted);
        if more == 0 || more < at_least {
            return Ok(());
        }
        if !(self.admit)(more) {
            return Err(ProtobufError::OverBudget);
        }
        self.admitted += more;
        Ok(())
    }
}

/// Calls `on_field` with the tag and bytes of each length-delimited field
/// of the message in `bytes`. The message's fields are tags 1 to `known`,
/// each length-delimited; other fields are unknown ones, skipped.
fn fields(
    mut bytes: &[u8],
    known: u32,
    mut on_field: impl FnMut(u32, &[u8]) -> Result<(), ProtobufError>,
) -> Result<(), ProtobufError> {
    while bytes.has_remaining() {
        let (tag, wire_type) = decode_key(&mut bytes)?;
        if wire_type != WireType::LengthDelimited {
            if (1..=known).contains(&tag) {
                check_wire_type(WireType::LengthDelimited, wire_type)?;
            }
            skip_field(wire_type, tag, &mut bytes, DecodeContext::default())?;
            continue;
        }
        let len = decode_varint(&mut bytes)?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&len| len <= bytes.len())
            .ok_or_else(|| ProtobufError::Undecodable("buffer underflow".into()))?;
        let (value, rest) = bytes.split_at(len);
        on_field(tag, value)?;
        bytes = rest;
    }
    Ok(())
}

fn utf8(bytes: &[u8], field: &str) -> Result<(), ProtobufError> {
    std::str::from_utf8(bytes).map(drop).map_err(|_| {
        ProtobufError::Undecodable(format!("{field}: invalid string value: data is not UTF-8 encoded"))
    })
}
