//! OTLP/gRPC `TraceService` and `LogsService`: the same mapping and writer
//! as OTLP/HTTP, bounded like it.
//!
//! The services are written out here rather than taken from the generated
//! `TraceServiceServer` for two things the generated one cannot do: admit a
//! message against the byte budget from its 5-byte length prefix, before a
//! byte of it is buffered (`Admitted`), and hand the message over as bytes
//! (`OtlpCodec`), to be decoded a span at a time within the budget like an
//! OTLP/HTTP body (`otlp_receiver.rs`), a message that does not decode answered
//! `INVALID_ARGUMENT` as OTLP/HTTP answers 400, not with the `INTERNAL`
//! that exporters take for a server bug.

use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body::{Body, Frame};
use tonic::body::Body as TonicBody;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings};
use tonic::codegen::{BoxFuture, Bytes, Service, StdError, http};
use tonic::{Code, Request, Response, Status};
use tonic_prost::ProstCodec;

use super::auth::{Denied, Scope, Tokens};
use super::budget::{ByteBudget, SharedHeld};
use super::error::ServiceError;
use super::otlp_receiver::{Encoding, OtlpReceiver, Signal};
use super::recent_traces::RecentCallTraces;
use super::writer::{WriteError, WriterHandle};
use crate::telemetry::events::{IngestRequest, Receiver, Refusal, WriteRefused};

/// The gRPC service of signal `S`, gzip in both directions, messages up
/// to `body_limit`.
pub struct OtlpServer<S> {
    inner: Arc<Export>,
    body_limit: usize,
    signal: PhantomData<fn() -> S>,
}

impl<S> Clone for OtlpServer<S> {
    fn clone(&self) -> Self {
        OtlpServer { inner: self.inner.clone(), body_limit: self.body_limit, signal: PhantomData }
    }
}

struct Export {
    writer: WriterHandle,
    byte_budget: ByteBudget,
    recent: Arc<RecentCallTraces>,
    tokens: Arc<Tokens>,
}

pub fn service<S: Signal>(
    writer: WriterHandle,
    tokens: Arc<Tokens>,
    body_limit: usize,
    byte_budget: ByteBudget,
    recent: Arc<RecentCallTraces>,
) -> OtlpServer<S> {
    OtlpServer {
        inner: Arc::new(Export { writer, byte_budget, recent, tokens }),
        body_limit,
        signal: PhantomData,
    }
}

impl<S: Signal> tonic::server::NamedService for OtlpServer<S> {
    const NAME: &'static str = S::NAME;
}

impl<S: Signal, B> Service<http::Request<B>> for OtlpServer<S>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<TonicBody>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.uri().path() != S::EXPORT_PATH {
            return Box::pin(async {
                Ok(Status::unimplemented(format!("only {} is served", S::EXPORT_PATH)).into_http())
            });
        }
        let (inner, limit) = (self.inner.clone(), self.body_limit);
        Box::pin(async move {
            // What the message holds of the budget while it arrives; the
            // handler keeps it until the answer.
            let held = SharedHeld::default();
            let (mut parts, body) = request.into_parts();
            parts.extensions.insert(held.clone());
            let body = Admitted {
                inner: body,
                budget: inner.byte_budget.clone(),
                held,
                limit,
                prefix: Prefix::default(),
            };
            let request = http::Request::from_parts(parts, body);
            let mut encodings = EnabledCompressionEncodings::default();
            encodings.enable(CompressionEncoding::Gzip);
            let mut grpc = tonic::server::Grpc::new(OtlpCodec::<S>(PhantomData))
                .apply_compression_config(encodings, encodings)
                .apply_max_message_size_config(Some(limit), None);
            Ok(grpc.unary(ExportMethod::<S>(inner, PhantomData), request).await)
        })
    }
}

struct ExportMethod<S>(Arc<Export>, PhantomData<fn() -> S>);

impl<S: Signal> tonic::server::UnaryService<Bytes> for ExportMethod<S> {
    type Response = S::Response;
    type Future = BoxFuture<Response<Self::Response>, Status>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let inner = self.0.clone();
        Box::pin(async move {
            super::traced::traced(S::EXPORT_PATH, inner.export::<S>(request), |status| {
                let code = status.code();
                (code as i64, matches!(code, Code::Internal | Code::Unknown | Code::DataLoss))
            })
            .await
        })
    }
}

impl Export {
    async fn export<S: Signal>(&self, request: Request<Bytes>) -> Result<Response<S::Response>, Status> {
        // What the message took of the budget as it arrived (its declared,
        // maybe compressed, length), held from here to the answer.
        let held = request.extensions().get::<SharedHeld>().cloned().unwrap_or_default();
        IngestRequest { receiver: Receiver::OtlpGrpc }.emit();
        let authorization = request.metadata().get("authorization").and_then(|v| v.to_str().ok());
        match self.tokens.check(authorization, Scope::Ingest) {
            Ok(()) => {}
            Err(Denied::Unauthenticated) => return Err(ServiceError::Unauthenticated.into()),
            Err(Denied::WrongScope) => return Err(ServiceError::WrongScope(Scope::Ingest).into()),
        }
        let message = request.into_inner();
        // The message as tonic handed it over, inflated if it was sent
        // compressed, in place of what arrived.
        let arrived = held.bytes();
        if !held.take(&self.byte_budget, message.len()) {
            WriteRefused { by: Refusal::Bytes }.emit();
            return Err(ServiceError::Write(WriteError::Saturated).into());
        }
        held.release(arrived);
        let exporter = OtlpReceiver {
            writer: &self.writer,
            budget: &self.byte_budget,
            recent: &self.recent,
            receiver: Receiver::OtlpGrpc,
        };
        let answer = S::export(&exporter, &held, message, Encoding::Protobuf).await?;
        Ok(Response::new(answer))
    }
}

/// The message's bytes as they came, to be decoded within the budget
/// (`otlp_receiver.rs`); prost's encoder for the answer.
struct OtlpCodec<S>(PhantomData<fn() -> S>);

impl<S: Signal> Codec for OtlpCodec<S> {
    type Encode = S::Response;
    type Decode = Bytes;
    type Encoder = <ProstCodec<S::Response, S::Request> as Codec>::Encoder;
    type Decoder = MessageBytes;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<S::Response, S::Request>::default().encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        MessageBytes
    }
}

struct MessageBytes;

impl Decoder for MessageBytes {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Status> {
        Ok(Some(prost::bytes::Buf::copy_to_bytes(buf, prost::bytes::Buf::remaining(buf))))
    }
}

/// Where a body is in the gRPC framing: reading a 5-byte prefix (`got`
/// bytes of it so far), or skipping `left` bytes of a message.
#[derive(Default)]
struct Prefix {
    bytes: [u8; 5],
    got: usize,
    left: usize,
}

/// A request body that takes each message's declared length from the byte
/// budget when its prefix arrives, before the message is buffered; past the
/// budget the stream ends with `UNAVAILABLE` and a retry delay. A length
/// over the body limit takes nothing: tonic refuses it from the prefix.
struct Admitted<B> {
    inner: B,
    budget: ByteBudget,
    held: SharedHeld,
    limit: usize,
    prefix: Prefix,
}

impl<B> Admitted<B> {
    /// Walks `data` through the framing; false when a message does not fit
    /// in the budget now.
    fn admit(&mut self, mut data: &[u8]) -> bool {
        while !data.is_empty() {
            if self.prefix.left > 0 {
                let skip = self.prefix.left.min(data.len());
                (self.prefix.left, data) = (self.prefix.left - skip, &data[skip..]);
                continue;
            }
            let take = (5 - self.prefix.got).min(data.len());
            self.prefix.bytes[self.prefix.got..self.prefix.got + take].copy_from_slice(&data[..take]);
            (self.prefix.got, data) = (self.prefix.got + take, &data[take..]);
            if self.prefix.got < 5 {
                break;
            }
            let declared = u32::from_be_bytes([
                self.prefix.bytes[1],
                self.prefix.bytes[2],
                self.prefix.bytes[3],
                self.prefix.bytes[4],
            ]) as usize;
            self.prefix = Prefix { left: declared, ..Prefix::default() };
            if declared <= self.limit && !self.held.take(&self.budget, declared) {
                return false;
            }
        }
        true
    }
}

impl<B> Body for Admitted<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<StdError>,
{
    type Data = Bytes;
    type Error = StdError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, StdError>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        if let Some(data) = frame.data_ref()
            && !self.admit(data)
        {
            let status: Status = ServiceError::Write(WriteError::Saturated).into();
            return Poll::Ready(Some(Err(Box::new(status))));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(budget: &ByteBudget, limit: usize) -> Admitted<http_body_util::Empty<Bytes>> {
        Admitted {
            inner: http_body_util::Empty::new(),
            budget: budget.clone(),
            held: SharedHeld::default(),
            limit,
            prefix: Prefix::default(),
        }
    }

    fn message(len: u32) -> Vec<u8> {
        let mut framed = vec![0];
        framed.extend(len.to_be_bytes());
        framed.extend(std::iter::repeat_n(7u8, len as usize));
        framed
    }

    #[test]
    fn a_message_takes_its_declared_length_from_its_prefix_however_the_bytes_are_split() {
        let budget = ByteBudget::new(1000);
        let mut body = admitted(&budget, 500);
        let framed = [message(300), message(200)].concat();
        for chunk in framed.chunks(3) {
            assert!(body.admit(chunk));
        }
        assert_eq!(body.held.bytes(), 500);
        assert_eq!(budget.available(), 500);
        // Only the prefix has arrived: the whole declared length is taken.
        let mut stalled = admitted(&budget, 500);
        assert!(stalled.admit(&message(400)[..5]));
        assert_eq!(budget.available(), 100);
        let mut refused = admitted(&budget, 500);
        assert!(!refused.admit(&message(200)[..5]), "200 bytes do not fit in the 100 left");
        drop((body, stalled, refused));
        assert_eq!(budget.available(), 1000);
    }

    #[test]
    fn a_message_over_the_limit_takes_nothing_tonic_refuses_it() {
        let budget = ByteBudget::new(1000);
        let mut body = admitted(&budget, 100);
        assert!(body.admit(&message(900)[..5]));
        assert_eq!(budget.available(), 1000);
    }
}
