//! The one error type of the service's request paths. Every handler, HTTP
//! or gRPC, fails with a `ServiceError`; its `Kind` is mapped once to an
//! HTTP status and once to a gRPC code (`Kind::http` / `Kind::grpc`), so
//! the two protocols cannot drift: a full disk is retryable on both.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tonic::Code;
use tonic_types::{ErrorDetails, StatusExt};

use super::auth::Scope;
use super::body::BodyError;
use super::budget::ByteBudget;
use super::writer::WriteError;

/// How long a client should wait before retrying an `Unavailable` answer.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// What a failure means to the client, whatever the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumIter)]
pub enum Kind {
    /// The request is wrong; sending it again will fail again.
    Invalid,
    /// The body's media type or encoding is not one the route reads.
    Unsupported,
    /// Nothing by that name (a workflow id nobody stored).
    NotFound,
    /// The body is over the size limit.
    TooLarge,
    /// The body did not arrive in time.
    Timeout,
    /// Nothing was stored; the same request may be sent again after
    /// `RETRY_AFTER` (writes are idempotent).
    Unavailable,
    /// No valid token.
    Unauthenticated,
    /// A token without the scope, or a request not addressed to this machine.
    Forbidden,
    /// A fault of the service itself; details are logged, not sent.
    Internal,
}

impl Kind {
    pub fn http(self) -> StatusCode {
        match self {
            Kind::Invalid => StatusCode::BAD_REQUEST,
            Kind::Unsupported => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Kind::NotFound => StatusCode::NOT_FOUND,
            Kind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Kind::Timeout => StatusCode::REQUEST_TIMEOUT,
            // OTLP exporters retry 503 (with Retry-After) and drop on 500.
            Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Kind::Unauthenticated => StatusCode::UNAUTHORIZED,
            Kind::Forbidden => StatusCode::FORBIDDEN,
            Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn grpc(self) -> Code {
        match self {
            Kind::Invalid | Kind::Unsupported => Code::InvalidArgument,
            Kind::NotFound => Code::NotFound,
            Kind::TooLarge => Code::ResourceExhausted,
            Kind::Timeout => Code::DeadlineExceeded,
            // OTLP/gRPC exporters retry UNAVAILABLE (after RetryInfo's
            // delay) and drop on INTERNAL.
            Kind::Unavailable => Code::Unavailable,
            Kind::Unauthenticated => Code::Unauthenticated,
            Kind::Forbidden => Code::PermissionDenied,
            Kind::Internal => Code::Internal,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Body(#[from] BodyError),
    #[error("{0}")]
    BadRequest(String),
    #[error(
        "Content-Type `{0}` is not JSON: send application/json or application/x-ndjson \
         (a web page can send text/plain to this port without asking; JSON types it cannot)"
    )]
    NotJson(String),
    #[error("a bearer token is required (Authorization: Bearer TOKEN)")]
    Unauthenticated,
    #[error("this token may not {}", if *.0 == Scope::Ingest { "write (it is a read token)" } else { "read (it is an ingest token)" })]
    WrongScope(Scope),
    #[error(
        "Host `{0}` is not this machine: without access tokens the service answers only requests addressed to localhost"
    )]
    ForeignHost(String),
    #[error("the request body did not arrive within {0} s")]
    BodyTimeout(f64),
    #[error("the request body is over {limit} bytes, or was cut off: {detail}")]
    BodyUnread { limit: usize, detail: String },
    #[error(
        "once decoded, this request needs more than {budget_mib} MiB, the whole budget of bytes held \
         (--queue-mib): send fewer spans a request"
    )]
    DecodedTooLarge { budget_mib: usize },
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("no workflow with id `{0}` is stored")]
    UnknownWorkflow(String),
    #[error("internal error")]
    Internal(String),
}

impl ServiceError {
    /// A request that needs `needed` bytes of the byte budget, which has no
    /// room for them: busy now (retry later), or too large for the whole
    /// budget (waiting cannot help).
    pub fn no_room(needed: usize, budget: &ByteBudget) -> Self {
        if needed > budget.capacity() {
            ServiceError::DecodedTooLarge { budget_mib: budget.capacity() >> 20 }
        } else {
            ServiceError::Write(WriteError::Saturated)
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            ServiceError::Body(BodyError::TooLarge { .. })
            | ServiceError::BodyUnread { .. }
            | ServiceError::DecodedTooLarge { .. } => Kind::TooLarge,
            ServiceError::Body(BodyError::UnsupportedEncoding(_)) | ServiceError::NotJson(_) => {
                Kind::Unsupported
            }
            ServiceError::Body(_) | ServiceError::BadRequest(_) => Kind::Invalid,
            ServiceError::BodyTimeout(_) => Kind::Timeout,
            ServiceError::Unauthenticated => Kind::Unauthenticated,
            ServiceError::WrongScope(_) | ServiceError::ForeignHost(_) => Kind::Forbidden,
            // A failed commit stored nothing, and writes are idempotent: a
            // storage error (a full disk, say) is for the client to retry.
            ServiceError::Write(_) => Kind::Unavailable,
            ServiceError::UnknownWorkflow(_) => Kind::NotFound,
            ServiceError::Internal(_) => Kind::Internal,
        }
    }

    /// What the client is told; details of internal and storage faults
    /// go to the log only.
    pub fn message(&self) -> String {
        match self {
            ServiceError::Internal(detail) => tracing::error!(%detail, "request failed"),
            ServiceError::Write(detail @ (WriteError::Store(_) | WriteError::Panicked(_))) => {
                tracing::error!(%detail, "request failed")
            }
            _ => {}
        }
        match self {
            ServiceError::Write(WriteError::Store(_) | WriteError::Panicked(_)) => {
                "storing the records failed, so none of this request was stored; retry later".to_string()
            }
            other => other.to_string(),
        }
    }
}

impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let kind = self.kind();
        let mut response = (kind.http(), axum::Json(json!({"error": self.message()}))).into_response();
        decorate(kind, &mut response);
        response
    }
}

impl From<crate::read::ReadError> for ServiceError {
    fn from(error: crate::read::ReadError) -> ServiceError {
        match error {
            crate::read::ReadError::Asked(message) => ServiceError::BadRequest(message),
            crate::read::ReadError::Storage(e) => ServiceError::Internal(e.to_string()),
        }
    }
}

impl From<attempt_core::request::RequestError> for ServiceError {
    fn from(error: attempt_core::request::RequestError) -> ServiceError {
        ServiceError::BadRequest(error.0)
    }
}

impl From<ServiceError> for tonic::Status {
    fn from(error: ServiceError) -> Self {
        let kind = error.kind();
        let message = error.message();
        match kind {
            Kind::Unavailable => tonic::Status::with_error_details(
                kind.grpc(),
                message,
                ErrorDetails::with_retry_info(Some(RETRY_AFTER)),
            ),
            _ => tonic::Status::new(kind.grpc(), message),
        }
    }
}

/// The headers a kind carries on any HTTP answer, including the OTLP
/// routes' protobuf-encoded errors: when to retry, how to authenticate.
pub fn decorate(kind: Kind, response: &mut Response) {
    let headers = response.headers_mut();
    match kind {
        Kind::Unavailable => {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER.as_secs()));
        }
        Kind::Unauthenticated => {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use strum::IntoEnumIterator;

    use super::*;

    /// The two mappings agree on what a client may do next: retry later,
    /// fix the request, or authenticate.
    #[test]
    fn http_and_grpc_agree_on_every_kind() {
        for kind in Kind::iter() {
            let (http, grpc) = (kind.http(), kind.grpc());
            let retryable_http = http == StatusCode::SERVICE_UNAVAILABLE;
            assert_eq!(retryable_http, grpc == Code::Unavailable, "{kind:?}");
            assert_eq!(http == StatusCode::UNAUTHORIZED, grpc == Code::Unauthenticated, "{kind:?}");
            assert_eq!(http == StatusCode::FORBIDDEN, grpc == Code::PermissionDenied, "{kind:?}");
            assert_eq!(
                http.is_server_error(),
                matches!(grpc, Code::Unavailable | Code::Internal),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn a_storage_failure_is_retryable_on_both_protocols_and_hides_its_detail() {
        let error = || {
            ServiceError::Write(WriteError::Store(crate::store::StoreError::Dimension(
                "disk full at /var/lib/x".into(),
            )))
        };
        let response = error().into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        let status = tonic::Status::from(error());
        assert_eq!(status.code(), Code::Unavailable);
        assert!(!status.message().contains("/var/lib"), "{}", status.message());
        assert_eq!(status.get_details_retry_info().and_then(|r| r.retry_delay), Some(RETRY_AFTER));
    }
}
