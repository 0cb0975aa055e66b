//! An OTLP export request, from either protocol: decoded within the byte
//! budget, written, answered with OTLP's partial success.
//!
//! What a request costs once decoded is held in the budget in place of its
//! body: a protobuf body is decoded a span at a time (`otlp::decode_protobuf`),
//! what it can keep at most taken from the budget before it is decoded (read
//! off the envelopes), the rest given back once it is decoded, with the
//! body's bytes; a JSON body is parsed whole first, so its parsed tree is
//! taken too, before parsing (`JSON_PER_BODY_BYTE`). Past the budget the
//! request is refused as saturated (503 / `UNAVAILABLE` with a retry
//! delay), or as too large (413 / `RESOURCE_EXHAUSTED`) when it needs more
//! than the whole budget.

use std::future::Future;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::bytes::Bytes;

use super::budget::{ByteBudget, SharedHeld};
use super::error::ServiceError;
use super::recent_traces::RecentCallTraces;
use super::writer::WriterHandle;
use crate::store::MAX_SPANS_PER_TRACE;
use crate::telemetry::events::{Receiver, RecordsIgnored, RecordsRejected, Refusal, WriteRefused};
use attempt_core::ingest::Decoded;
use attempt_core::ingest::otlp::{self, DecodedSpans, ProtobufError};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    pub fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// Bytes an OTLP/JSON request takes while decoded, per byte of its body:
/// its parsed tree (40,000 small spans took 1.5 times their 20 MiB of JSON)
/// and what is kept of it (about once the body).
pub const JSON_PER_BODY_BYTE: usize = 3;

/// One OTLP signal: its gRPC service's name and path, its messages, and
/// what an export of it does (the same over HTTP and gRPC).
pub trait Signal: Send + Sync + 'static {
    const NAME: &'static str;
    const EXPORT_PATH: &'static str;
    type Request: prost::Message + Default + Send + 'static;
    type Response: prost::Message + serde::Serialize + Default + Send + 'static;
    fn export<'a>(
        receiver: &'a OtlpReceiver<'a>,
        held: &'a SharedHeld,
        body: Bytes,
        encoding: Encoding,
    ) -> impl Future<Output = Result<Self::Response, ServiceError>> + Send + 'a;
}

pub struct Traces;
pub struct Logs;
pub struct Metrics;

impl Signal for Traces {
    const NAME: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
    const EXPORT_PATH: &'static str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
    type Request = ExportTraceServiceRequest;
    type Response = ExportTraceServiceResponse;
    fn export<'a>(
        receiver: &'a OtlpReceiver<'a>,
        held: &'a SharedHeld,
        body: Bytes,
        encoding: Encoding,
    ) -> impl Future<Output = Result<Self::Response, ServiceError>> + Send + 'a {
        receiver.export(held, body, encoding)
    }
}

impl Signal for Logs {
    const NAME: &'static str = "opentelemetry.proto.collector.logs.v1.LogsService";
    const EXPORT_PATH: &'static str = "/opentelemetry.proto.collector.logs.v1.LogsService/Export";
    type Request = ExportLogsServiceRequest;
    type Response = ExportLogsServiceResponse;
    fn export<'a>(
        receiver: &'a OtlpReceiver<'a>,
        held: &'a SharedHeld,
        body: Bytes,
        encoding: Encoding,
    ) -> impl Future<Output = Result<Self::Response, ServiceError>> + Send + 'a {
        receiver.export_logs(held, body, encoding)
    }
}

impl Signal for Metrics {
    const NAME: &'static str = "opentelemetry.proto.collector.metrics.v1.MetricsService";
    const EXPORT_PATH: &'static str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";
    type Request = ExportMetricsServiceRequest;
    type Response = ExportMetricsServiceResponse;
    fn export<'a>(
        receiver: &'a OtlpReceiver<'a>,
        held: &'a SharedHeld,
        body: Bytes,
        encoding: Encoding,
    ) -> impl Future<Output = Result<Self::Response, ServiceError>> + Send + 'a {
        receiver.export_metrics(held, body, encoding)
    }
}

/// What an export needs of the service.
pub struct OtlpReceiver<'a> {
    pub writer: &'a WriterHandle,
    pub budget: &'a ByteBudget,
    /// Traces whose calls came recently (`recent_traces.rs`).
    pub recent: &'a Arc<RecentCallTraces>,
    /// Which receiver the request came to, for its telemetry.
    pub receiver: Receiver,
}

impl OtlpReceiver<'_> {
    /// Decodes `body`, whose bytes `held` holds, stores its spans and
    /// answers. `held` then holds what is kept of the body instead, until
    /// the caller drops it with the answer.
    pub async fn export(
        &self,
        held: &SharedHeld,
        body: Bytes,
        encoding: Encoding,
    ) -> Result<ExportTraceServiceResponse, ServiceError> {
        let (budget, decoding, recent) = (self.budget.clone(), held.clone(), self.recent.clone());
        let body_bytes = body.len();
        let decoded =
            tokio::task::spawn_blocking(move || decode(&body, encoding, &budget, &decoding, &recent))
                .await
                .map_err(|e| ServiceError::Internal(e.to_string()))?;
        // The body is gone: what was kept of it stands in its place.
        held.release(body_bytes);
        let mut spans = match decoded {
            Ok(spans) => spans,
            Err(Refused::OverBudget { needed }) => {
                WriteRefused { by: Refusal::Bytes }.emit();
                return Err(ServiceError::no_room(needed, self.budget));
            }
            Err(Refused::Undecodable(reason)) => return Err(ServiceError::BadRequest(reason)),
        };
        let d = &spans.decoded;
        super::traced::decoded((d.attempts.len() + d.spans.len()) as u64 + d.rejected);
        RecordsRejected { receiver: self.receiver, records: d.rejected }.emit();
        let notes = spans.decoded.take_notes();
        let stats =
            self.writer.write(spans.decoded.attempts, spans.decoded.spans, spans.decoded.circuits).await?;
        Ok(export_response(&notes, stats.spans_refused))
    }
}

impl OtlpReceiver<'_> {
    /// Decodes a logs export `body`, whose bytes `held` holds, stores what
    /// its records are (`otlp::logs`: state changes, attempts, the spans
    /// access logs and GenAI events are kept as) and answers; the other
    /// records are counted as ignored. What is kept is taken from the
    /// budget as it grows (a JSON body's parsed tree before it is parsed).
    pub async fn export_logs(
        &self,
        held: &SharedHeld,
        body: Bytes,
        encoding: Encoding,
    ) -> Result<ExportLogsServiceResponse, ServiceError> {
        let (budget, decoding) = (self.budget.clone(), held.clone());
        let body_bytes = body.len();
        let decoded = tokio::task::spawn_blocking(move || decode_logs(&body, encoding, &budget, &decoding))
            .await
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        held.release(body_bytes);
        let mut logs = match decoded {
            Ok(logs) => logs,
            Err(Refused::OverBudget { needed }) => {
                WriteRefused { by: Refusal::Bytes }.emit();
                return Err(ServiceError::no_room(needed, self.budget));
            }
            Err(Refused::Undecodable(reason)) => return Err(ServiceError::BadRequest(reason)),
        };
        let d = &logs.decoded;
        super::traced::decoded(d.records + d.rejected + logs.ignored);
        RecordsRejected { receiver: self.receiver, records: d.rejected }.emit();
        RecordsIgnored { receiver: self.receiver, records: logs.ignored }.emit();
        let notes = logs.decoded.take_notes();
        // An access log or event of a call: its trace's later spans are kept.
        self.recent.remember_calls(&logs.decoded.spans);
        let d = logs.decoded;
        let refused = if d.attempts.is_empty() && d.spans.is_empty() && d.circuits.is_empty() {
            0
        } else {
            self.writer.write(d.attempts, d.spans, d.circuits).await?.spans_refused
        };
        Ok(logs_response(&notes, refused))
    }
}

impl OtlpReceiver<'_> {
    /// Answers a metrics export with success, storing nothing
    /// (`otlp::metrics`): its data points are counted as ignored. A JSON
    /// body's parsed tree is taken from the budget before it is parsed; a
    /// protobuf body is read a metric at a time.
    pub async fn export_metrics(
        &self,
        held: &SharedHeld,
        body: Bytes,
        encoding: Encoding,
    ) -> Result<ExportMetricsServiceResponse, ServiceError> {
        let parsing = match encoding {
            Encoding::Json => body.len().saturating_mul(JSON_PER_BODY_BYTE),
            Encoding::Protobuf => 0,
        };
        if !held.take(self.budget, parsing) {
            WriteRefused { by: Refusal::Bytes }.emit();
            return Err(ServiceError::no_room(held.bytes() + parsing, self.budget));
        }
        let body_bytes = body.len();
        let counted = tokio::task::spawn_blocking(move || match encoding {
            Encoding::Protobuf => otlp::metrics::data_points_protobuf(&body)
                .map_err(|e| match e {
                    ProtobufError::Undecodable(reason) => reason,
                    other => other.to_string(),
                })
                .map_err(|reason| format!("undecodable protobuf ExportMetricsServiceRequest: {reason}")),
            Encoding::Json => serde_json::from_slice::<ExportMetricsServiceRequest>(&body)
                .map(|request| otlp::metrics::data_points(&request))
                .map_err(|e| format!("undecodable JSON ExportMetricsServiceRequest: {e}")),
        })
        .await
        .map_err(|e| ServiceError::Internal(e.to_string()));
        held.release(parsing + body_bytes);
        let points = counted?.map_err(ServiceError::BadRequest)?;
        super::traced::decoded(points);
        RecordsIgnored { receiver: self.receiver, records: points }.emit();
        Ok(ExportMetricsServiceResponse { partial_success: None })
    }
}

/// Decodes a logs export within the budget, as `decode` does a traces one.
fn decode_logs(
    body: &[u8],
    encoding: Encoding,
    budget: &ByteBudget,
    held: &SharedHeld,
) -> Result<otlp::logs::DecodedLogs, Refused> {
    let mut taken = Taken { budget, held, bytes: 0, needed: 0 };
    let logs = match encoding {
        Encoding::Protobuf => {
            let mut offered = 0;
            otlp::logs::decode_protobuf(body, &mut |n| {
                offered += n;
                taken.cover(offered)
            })
            .map_err(|e| match e {
                ProtobufError::OverBudget => Refused::OverBudget { needed: taken.needed },
                ProtobufError::Undecodable(reason) => {
                    Refused::Undecodable(format!("undecodable protobuf ExportLogsServiceRequest: {reason}"))
                }
            })?
        }
        Encoding::Json => {
            if !taken.cover(body.len().saturating_mul(JSON_PER_BODY_BYTE)) {
                return Err(Refused::OverBudget { needed: taken.needed });
            }
            let request = serde_json::from_slice::<ExportLogsServiceRequest>(body).map_err(|e| {
                Refused::Undecodable(format!("undecodable JSON ExportLogsServiceRequest: {e}"))
            })?;
            otlp::logs::decode_request(&request)
        }
    };
    if taken.bytes > logs.held_bytes {
        taken.held.release(taken.bytes - logs.held_bytes);
    } else if !taken.cover(logs.held_bytes) {
        return Err(Refused::OverBudget { needed: taken.needed });
    }
    Ok(logs)
}

/// OTLP partial success for logs: the records rejected and why, `refused`
/// of them for a trace that already held the most spans one may store.
/// Ignored records are not rejected: nothing was wrong with them.
fn logs_response(decoded: &Decoded, refused: u64) -> ExportLogsServiceResponse {
    let rejected = decoded.rejected + refused;
    if rejected == 0 {
        return ExportLogsServiceResponse { partial_success: None };
    }
    let mut reasons: Vec<String> = Vec::new();
    if refused > 0 {
        reasons.push(format!(
            "{refused} records not stored: their trace already holds {MAX_SPANS_PER_TRACE} spans, the most one trace may store"
        ));
    }
    reasons.extend(decoded.rejections.iter().take(5).map(|r| r.reason.clone()));
    let more = decoded.rejected.saturating_sub(decoded.rejections.len().min(5) as u64);
    if more > 0 {
        reasons.push(format!("and {more} more"));
    }
    ExportLogsServiceResponse {
        partial_success: Some(ExportLogsPartialSuccess {
            rejected_log_records: i64::try_from(rejected).unwrap_or(i64::MAX),
            error_message: reasons.join("; "),
        }),
    }
}

enum Refused {
    Undecodable(String),
    /// The request would have held `needed` bytes.
    OverBudget {
        needed: usize,
    },
}

/// Decodes `body`. What it will keep of it is taken from the budget at
/// once before decoding (at most what a protobuf request's envelopes say it
/// can keep, `JSON_PER_BODY_BYTE` times a JSON body), so requests that do
/// not fit together are refused before any is decoded, rather than each
/// decoding part of itself and failing the others; what was taken for
/// nothing (spans of traces without a call, here or recently) is given
/// back once decoded.
fn decode(
    body: &[u8],
    encoding: Encoding,
    budget: &ByteBudget,
    held: &SharedHeld,
    recent: &RecentCallTraces,
) -> Result<DecodedSpans, Refused> {
    let mut taken = Taken { budget, held, bytes: 0, needed: 0 };
    let decoded = match encoding {
        Encoding::Protobuf => {
            let bound = otlp::kept_bytes_at_most(body).map_err(|e| Refused::Undecodable(e.to_string()))?;
            if !taken.cover(bound) {
                return Err(Refused::OverBudget { needed: taken.needed });
            }
            let mut offered = 0;
            otlp::decode_protobuf(body, &mut |n| {
                offered += n;
                taken.cover(offered)
            })
        }
        Encoding::Json => {
            if !taken.cover(body.len().saturating_mul(JSON_PER_BODY_BYTE)) {
                return Err(Refused::OverBudget { needed: taken.needed });
            }
            match serde_json::from_slice::<ExportTraceServiceRequest>(body) {
                Ok(request) => Ok(otlp::decode_request(&request)),
                Err(e) => {
                    return Err(Refused::Undecodable(format!(
                        "undecodable JSON ExportTraceServiceRequest: {e}"
                    )));
                }
            }
        }
    };
    let mut spans = match decoded {
        Ok(spans) => spans,
        Err(ProtobufError::OverBudget) => return Err(Refused::OverBudget { needed: taken.needed }),
        Err(undecodable) => return Err(Refused::Undecodable(undecodable.to_string())),
    };
    recent.keep_links(&mut spans);
    let kept = kept_bytes(&spans);
    if taken.bytes > kept {
        taken.held.release(taken.bytes - kept);
    } else if !taken.cover(kept) {
        return Err(Refused::OverBudget { needed: taken.needed });
    }
    Ok(spans)
}

/// What decoding took from the budget, beyond the body.
struct Taken<'a> {
    budget: &'a ByteBudget,
    held: &'a SharedHeld,
    bytes: usize,
    /// What the request held with the last take asked for.
    needed: usize,
}

impl Taken<'_> {
    /// Takes what it takes for `total` bytes to be taken.
    fn cover(&mut self, total: usize) -> bool {
        let more = total.saturating_sub(self.bytes);
        if more == 0 {
            return true;
        }
        self.needed = self.held.bytes() + more;
        let taken = self.held.take(self.budget, more);
        if taken {
            self.bytes = total;
        }
        taken
    }
}

fn kept_bytes(spans: &DecodedSpans) -> usize {
    spans.decoded.spans.iter().map(attempt_core::model::SpanRecord::held_bytes).sum()
}

/// OTLP partial success: how many spans were rejected and why, `refused`
/// of them for a trace that already held the most spans one may store.
/// `rejections`: the reasons kept of `rejected` spans refused as invalid.
pub fn export_response(decoded: &Decoded, refused: u64) -> ExportTraceServiceResponse {
    let (rejected, warned) = (decoded.rejected, decoded.warned);
    if rejected == 0 && refused == 0 && warned == 0 {
        return ExportTraceServiceResponse { partial_success: None };
    }
    let mut reasons: Vec<String> = Vec::new();
    if refused > 0 {
        reasons.push(format!(
            "{refused} spans not stored: their trace already holds {MAX_SPANS_PER_TRACE} spans, the most one trace may store"
        ));
    }
    reasons.extend(decoded.rejections.iter().take(5).map(|r| r.reason.clone()));
    let more = rejected.saturating_sub(decoded.rejections.len().min(5) as u64);
    if more > 0 {
        reasons.push(format!("and {more} more"));
    }
    // OTLP reads a partial success with no rejected spans and a message as
    // warnings: the spans were stored, with these values corrected.
    if warned > 0 {
        let shown: Vec<&str> = decoded.warnings.iter().take(5).map(|w| w.reason.as_str()).collect();
        reasons
            .push(format!("{warned} warnings (values stored as absent or corrected): {}", shown.join("; ")));
    }
    ExportTraceServiceResponse {
        partial_success: Some(ExportTracePartialSuccess {
            rejected_spans: i64::try_from(rejected + refused).unwrap_or(i64::MAX),
            error_message: reasons.join("; "),
        }),
    }
}
