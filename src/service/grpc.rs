//! OTLP/gRPC `TraceService`: the same mapping and writer as OTLP/HTTP.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tonic::codec::CompressionEncoding;
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};

use super::ServiceStats;
use super::auth::{Denied, Scope, Tokens};
use super::http::export_response;
use super::writer::{WriteError, WriterHandle};
use crate::ingest::otlp;

pub struct OtlpGrpc {
    writer: WriterHandle,
    stats: Arc<ServiceStats>,
    tokens: Arc<Tokens>,
}

/// The gRPC service, gzip in both directions, messages up to `body_limit`.
pub fn service(
    writer: WriterHandle,
    stats: Arc<ServiceStats>,
    tokens: Arc<Tokens>,
    body_limit: usize,
) -> TraceServiceServer<OtlpGrpc> {
    TraceServiceServer::new(OtlpGrpc { writer, stats, tokens })
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(body_limit)
}

#[tonic::async_trait]
impl TraceService for OtlpGrpc {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        ServiceStats::count(&self.stats.otlp_grpc_requests, 1);
        let authorization = request.metadata().get("authorization").and_then(|v| v.to_str().ok());
        match self.tokens.check(authorization, Scope::Ingest) {
            Ok(()) => {}
            Err(Denied::Unauthenticated) => {
                return Err(Status::unauthenticated(
                    "a bearer token is required (authorization: Bearer TOKEN)",
                ));
            }
            Err(Denied::WrongScope) => return Err(Status::permission_denied("this token may not write")),
        }
        let request = request.into_inner();
        let spans = tokio::task::spawn_blocking(move || otlp::decode_request(&request))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        ServiceStats::count(&self.stats.rejected_records, spans.decoded.rejected);
        match self.writer.write(spans.decoded.attempts, spans.decoded.spans).await {
            Ok(stats) => Ok(Response::new(export_response(
                &spans.decoded.rejections,
                spans.decoded.rejected,
                stats.spans_refused,
            ))),
            // OTLP: UNAVAILABLE with RetryInfo is retryable after the delay.
            Err(WriteError::Saturated) => Err(Status::with_error_details(
                Code::Unavailable,
                "the writer is saturated; retry later",
                ErrorDetails::with_retry_info(Some(Duration::from_secs(1))),
            )),
            Err(WriteError::Stopped) => Err(Status::unavailable("the service is shutting down")),
            // Nothing was stored and a retry is safe (writes are idempotent):
            // UNAVAILABLE, which exporters retry; INTERNAL they drop.
            Err(WriteError::Store(detail)) => {
                tracing::error!(%detail, "OTLP/gRPC export failed");
                Err(Status::with_error_details(
                    Code::Unavailable,
                    "storing the spans failed; retry later",
                    ErrorDetails::with_retry_info(Some(Duration::from_secs(1))),
                ))
            }
        }
    }
}
