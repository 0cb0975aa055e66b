//! OTLP/gRPC `TraceService`: the same mapping and writer as OTLP/HTTP.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

use super::ServiceStats;
use super::auth::{Denied, Scope, Tokens};
use super::budget::{ByteBudget, Held};
use super::error::ServiceError;
use super::http::export_response;
use super::writer::{WriteError, WriterHandle};
use crate::ingest::otlp;

pub struct OtlpGrpc {
    writer: WriterHandle,
    byte_budget: ByteBudget,
    stats: Arc<ServiceStats>,
    tokens: Arc<Tokens>,
}

/// The gRPC service, gzip in both directions, messages up to `body_limit`.
pub fn service(
    writer: WriterHandle,
    stats: Arc<ServiceStats>,
    tokens: Arc<Tokens>,
    body_limit: usize,
    byte_budget: ByteBudget,
) -> TraceServiceServer<OtlpGrpc> {
    TraceServiceServer::new(OtlpGrpc { writer, byte_budget, stats, tokens })
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
            Err(Denied::Unauthenticated) => return Err(ServiceError::Unauthenticated.into()),
            Err(Denied::WrongScope) => return Err(ServiceError::WrongScope(Scope::Ingest).into()),
        }
        // tonic has decoded the message already (at most the body limit);
        // what is held from here to the answer counts against the budget.
        let mut held = Held::default();
        if !self.byte_budget.take(&mut held, request.get_ref().encoded_len()) {
            self.writer.stats.requests_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(ServiceError::Write(WriteError::Saturated).into());
        }
        let request = request.into_inner();
        let spans = tokio::task::spawn_blocking(move || otlp::decode_request(&request))
            .await
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        ServiceStats::count(&self.stats.rejected_records, spans.decoded.rejected);
        let stats = self
            .writer
            .write(spans.decoded.attempts, spans.decoded.spans)
            .await
            .map_err(ServiceError::from)?;
        drop(held);
        Ok(Response::new(export_response(
            &spans.decoded.rejections,
            spans.decoded.rejected,
            stats.spans_refused,
        )))
    }
}
