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
use super::http::export_response;
use super::writer::{WriteError, WriterHandle};
use crate::ingest::otlp;

pub struct OtlpGrpc {
    writer: WriterHandle,
    stats: Arc<ServiceStats>,
}

/// The gRPC service, gzip in both directions, messages up to `body_limit`.
pub fn service(
    writer: WriterHandle,
    stats: Arc<ServiceStats>,
    body_limit: usize,
) -> TraceServiceServer<OtlpGrpc> {
    TraceServiceServer::new(OtlpGrpc { writer, stats })
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
        let request = request.into_inner();
        let spans = tokio::task::spawn_blocking(move || otlp::decode_request(&request))
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        ServiceStats::count(&self.stats.rejected_records, spans.decoded.rejections.len() as u64);
        match self.writer.write(spans.decoded.attempts, spans.decoded.spans).await {
            Ok(stats) => Ok(Response::new(export_response(&spans.decoded.rejections, stats.spans_refused))),
            // OTLP: UNAVAILABLE with RetryInfo is retryable after the delay.
            Err(WriteError::Saturated) => Err(Status::with_error_details(
                Code::Unavailable,
                "the writer is saturated; retry later",
                ErrorDetails::with_retry_info(Some(Duration::from_secs(1))),
            )),
            Err(WriteError::Stopped) => Err(Status::unavailable("the service is shutting down")),
            Err(WriteError::Store(detail)) => {
                tracing::error!(%detail, "OTLP/gRPC export failed");
                Err(Status::internal("internal error"))
            }
        }
    }
}
