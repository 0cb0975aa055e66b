//! Every request in a `tracing` span: method, route (the matched pattern,
//! never the raw path, which holds workflow ids), status, records decoded
//! and duration; HTTP through `trace_requests`, gRPC's export through
//! `traced`. A request slower than `SLOW` is logged at warn (the default
//! level), one failed on the service's side at info (its cause is logged
//! where it happened), the rest at debug: a slow request can be found in
//! the log without every request filling it.

use std::future::Future;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::{Instrument, Span, field};

/// Requests slower than this are logged at warn: longer than a report over
/// a week of a busy gateway takes, and a fifth of an exporter's timeout.
pub const SLOW: Duration = Duration::from_secs(2);

fn request_span(method: &str, route: &str) -> Span {
    tracing::info_span!(
        "request",
        method = %method,
        route = %route,
        status = field::Empty,
        records = field::Empty,
        duration_ms = field::Empty,
    )
}

/// Records in the request's span how many records it decoded.
pub fn decoded(records: u64) {
    Span::current().record("records", records);
}

fn answered(span: &Span, status: i64, failed: bool, elapsed: Duration) {
    span.record("status", status);
    span.record("duration_ms", (elapsed.as_secs_f64() * 1e4).round() / 10.0);
    if elapsed >= SLOW {
        tracing::warn!(parent: span, "slow request answered");
    } else if failed {
        tracing::info!(parent: span, "request answered");
    } else {
        tracing::debug!(parent: span, "request answered");
    }
}

/// The HTTP middleware.
pub async fn trace_requests(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or("(no route)", |p| p.as_str()).to_string();
    let span = request_span(request.method().as_str(), &route);
    let began = Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    answered(&span, status.as_u16().into(), status.is_server_error(), began.elapsed());
    response
}

/// A gRPC method's answer, in its span; `code` is the gRPC status code of
/// a failure (`Some(0)`: OK), `failed` whether the service is to blame.
pub async fn traced<T, E>(
    route: &'static str,
    answer: impl Future<Output = Result<T, E>>,
    code: impl Fn(&E) -> (i64, bool),
) -> Result<T, E> {
    let span = request_span("grpc", route);
    let began = Instant::now();
    let answer = answer.instrument(span.clone()).await;
    let (status, failed) = match &answer {
        Ok(_) => (0, false),
        Err(e) => code(e),
    };
    answered(&span, status, failed, began.elapsed());
    answer
}
