//! The HTTP side: handlers extract, decode, call the writer or the store,
//! encode. Nothing else.

use std::collections::HashMap;

use axum::Form;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Extension, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use prost::Message;
use serde_json::json;

use super::auth::{self, Denied, Scope};
use super::body::{BodyError, inflate};
use super::budget::SharedHeld;
use super::error::{self, Kind, ServiceError};
use super::otlp_receiver::{Encoding, Logs, Metrics, OtlpReceiver, Signal, Traces};
use super::session;
use super::state::AppState;
use super::writer::WriteError;
use crate::store::MAX_LISTED_CONFLICTS;
use crate::telemetry::events::{IngestRequest, Receiver, RecordsRejected, Refusal, WriteRefused};
use attempt_core::ingest::Decoded;
use attempt_core::ingest::Rejection;
use attempt_core::ingest::format::Format;
use attempt_core::ingest::framing::{Framing, LINE_TYPES, frame};
use attempt_core::request::{self, ReportFilter, SeriesRange, Window};

pub fn app(state: AppState) -> Router {
    // The compressed body may not exceed the limit either.
    let limit = state.body_limit;
    let admit = || middleware::from_fn_with_state(state.clone(), admit_write);
    Router::new()
        .route("/v1/attempts", post(post_attempts).layer(admit()))
        .route("/v1/litellm", post(post_litellm).layer(admit()))
        .route("/v1/traces", post(post_otlp::<Traces>).layer(admit()))
        .route("/v1/logs", post(post_otlp::<Logs>).layer(admit()))
        .route("/v1/metrics", post(post_otlp::<Metrics>).layer(admit()))
        .route("/api/v1/report", get(get_report))
        .route("/api/v1/alerts", get(get_alerts))
        .route("/api/v1/audit", get(get_audit))
        .route("/api/v1/tune", get(get_tune))
        .route("/api/v1/reconcile", get(get_reconcile))
        .route("/api/v1/workflows/{workflow_id}", get(get_workflow))
        .route("/api/v1/timeseries", get(get_timeseries))
        .route("/metrics", get(get_metrics))
        .route("/", get(super::pages::overview))
        .route("/cost", get(super::pages::cost))
        .route("/attempts", get(super::pages::attempts))
        .route("/capacity", get(super::pages::capacity))
        .route("/alerts", get(super::pages::alerts))
        .route("/audit", get(super::pages::audit))
        .route("/reconcile", get(super::pages::reconcile))
        .route("/tune", get(super::pages::tune))
        .route("/workflow", get(super::pages::workflow))
        .route(crate::dashboard::STYLESHEET_PATH, get(super::pages::stylesheet))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(get_readyz))
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(middleware::from_fn(super::traced::trace_requests))
        .with_state(state)
}

/// Before a write request's body is read: a slot (else 503 with
/// Retry-After, so a burst is refused before it takes memory); then the
/// body within `body_timeout` (else 408) and the size limit (else 413),
/// each arriving byte taken from the byte budget (else 503); then the body
/// inflated here, its inflated bytes taken in place of the raw ones. The
/// handler gets the inflated body and, in the request's extensions, what it
/// holds of the budget (`SharedHeld`), to hold what it decodes in place of
/// the body; slot and bytes are held until the answer.
async fn admit_write(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ServiceError> {
    let refuse = |by: Refusal| {
        WriteRefused { by }.emit();
        ServiceError::Write(WriteError::Saturated)
    };
    let Ok(_slot) = state.write_slots.clone().try_acquire_owned() else {
        // Read past the body without keeping it: a client still sending it
        // then reads the 503 instead of a reset connection.
        let _ =
            tokio::time::timeout(state.body_timeout, discard(request.into_body(), state.body_limit)).await;
        return Err(refuse(Refusal::Slots));
    };
    let (mut parts, body) = request.into_parts();
    let held = SharedHeld::default();
    let raw = match tokio::time::timeout(state.body_timeout, read_body(body, &state, &held)).await {
        Err(_) => return Err(ServiceError::BodyTimeout(state.body_timeout.as_secs_f64())),
        Ok(Err(BodyRead::TooLarge)) => return Err(BodyError::TooLarge { limit: state.body_limit }.into()),
        Ok(Err(BodyRead::Broken(detail))) => {
            return Err(ServiceError::BodyUnread { limit: state.body_limit, detail });
        }
        Ok(Err(BodyRead::OverBudget(rest))) => {
            let _ = tokio::time::timeout(state.body_timeout, discard(rest, state.body_limit)).await;
            return Err(refuse(Refusal::Bytes));
        }
        Ok(Ok(raw)) => raw,
    };
    let body = match parts.headers.remove(header::CONTENT_ENCODING) {
        None => raw,
        Some(encoding) => {
            let inflated = inflate(&raw, encoding.to_str().ok(), state.body_limit)?;
            held.release(raw.len());
            drop(raw);
            if !held.take(&state.byte_budget, inflated.len()) {
                return Err(refuse(Refusal::Bytes));
            }
            inflated
        }
    };
    parts.extensions.insert(held.clone());
    let response = next.run(Request::from_parts(parts, Body::from(body))).await;
    drop(held);
    Ok(response)
}

enum BodyRead {
    TooLarge,
    Broken(String),
    /// The budget had no room; the rest of the body, to read past.
    OverBudget(Body),
}

/// The whole body, each frame's bytes taken from the budget as it arrives.
async fn read_body(body: Body, state: &AppState, held: &SharedHeld) -> Result<Vec<u8>, BodyRead> {
    use axum::body::HttpBody;
    let mut body = body;
    let mut out = Vec::new();
    loop {
        let frame = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await;
        let Some(frame) = frame else { return Ok(out) };
        let frame = frame.map_err(|e| BodyRead::Broken(e.to_string()))?;
        let Some(data) = frame.data_ref() else { continue };
        if out.len() + data.len() > state.body_limit {
            return Err(BodyRead::TooLarge);
        }
        if !held.take(&state.byte_budget, data.len()) {
            return Err(BodyRead::OverBudget(body));
        }
        out.extend_from_slice(data);
    }
}

/// Ready to take writes: the writer thread runs and its last transaction
/// committed. 503 with the reason otherwise (`/healthz` only says the
/// process answers). Either way the body says how far derivation lags and
/// how many workflows are quarantined: a lag or a quarantine does not stop
/// writes, so neither makes the service unready.
async fn get_readyz(State(state): State<AppState>) -> Response {
    use std::sync::atomic::Ordering::Relaxed;
    let stats = &state.writer.stats;
    let problem = if !stats.alive.load(Relaxed) {
        Some("the writer thread has stopped")
    } else if stats.last_write_failed.load(Relaxed) {
        Some(
            "the last write to the database failed (see the log: a full disk or an unwritable file, say); \
             the writer tries a small write every second and is ready again once one commits",
        )
    } else {
        None
    };
    let d = &state.derivation;
    let fresh = d.current();
    let derivation = json!({
        "pending_commits": fresh.pending_commits,
        "lag_seconds": fresh.lag_seconds,
        "quarantined_workflows": d.quarantined.load(Relaxed),
        "running": d.alive.load(Relaxed),
        "failing": d.failing.load(Relaxed),
    });
    match problem {
        None => axum::Json(json!({"ready": true, "derivation": derivation})).into_response(),
        Some(reason) => {
            let mut response = (
                Kind::Unavailable.http(),
                axum::Json(json!({"ready": false, "reason": reason, "derivation": derivation})),
            )
                .into_response();
            error::decorate(Kind::Unavailable, &mut response);
            response
        }
    }
}

/// Before anything else: the token a route needs (write routes `ingest`,
/// the rest `read`; `/healthz` and `/readyz` are open for probes), and,
/// when access is open on loopback, a `Host` naming this machine.
async fn guard(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Result<Response, ServiceError> {
    let path = request.uri().path();
    if path == "/healthz" || path == "/readyz" {
        return Ok(next.run(request).await);
    }
    if state.local_hosts_only {
        let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !auth::is_local_host(host) {
            return Err(ServiceError::ForeignHost(host.chars().take(100).collect()));
        }
    }
    if path == "/login" || path == "/logout" {
        return Ok(next.run(request).await);
    }
    let scope = if path.starts_with("/v1/") { Scope::Ingest } else { Scope::Read };
    let authorization = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    // A browser's session reads; it never writes, whatever the route.
    if authorization.is_none()
        && scope == Scope::Read
        && matches!(*request.method(), Method::GET | Method::HEAD)
        && state.sessions.is_live(request.headers().get(header::COOKIE).and_then(|v| v.to_str().ok()))
    {
        return Ok(next.run(request).await);
    }
    match state.tokens.check(authorization, scope) {
        Ok(()) => Ok(next.run(request).await),
        // A person opening a page without a session signs in, then lands
        // on the page they asked for; scripts get the 401.
        Err(Denied::Unauthenticated) if authorization.is_none() && is_page(&request) => {
            Ok(to_login(request.uri()))
        }
        Err(Denied::Unauthenticated) => Err(ServiceError::Unauthenticated),
        Err(Denied::WrongScope) => Err(ServiceError::WrongScope(scope)),
    }
}

/// A dashboard page (not the JSON, metrics or ingest routes), asked for
/// with GET.
fn is_page(request: &Request) -> bool {
    let path = request.uri().path();
    matches!(*request.method(), Method::GET | Method::HEAD)
        && !path.starts_with("/api/")
        && !path.starts_with("/v1/")
        && path != "/metrics"
}

fn to_login(uri: &axum::http::Uri) -> Response {
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let query = serde_urlencoded::to_string([("next", target)]).unwrap_or_default();
    let location =
        HeaderValue::from_str(&format!("/login?{query}")).unwrap_or(HeaderValue::from_static("/login"));
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

#[derive(serde::Deserialize)]
struct LoginForm {
    token: String,
    next: Option<String>,
}

#[derive(serde::Deserialize)]
struct LoginQuery {
    next: Option<String>,
}

async fn login_page(Query(query): Query<LoginQuery>) -> Response {
    let next = session::local_target(query.next.as_deref());
    let escaped = next.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;");
    let page = session::LOGIN_PAGE.replace("NEXT_PATH", &escaped);
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], page)
        .into_response()
}

/// A read token in, a session cookie out, and on to the page asked for.
async fn login(State(state): State<AppState>, Form(form): Form<LoginForm>) -> Result<Response, ServiceError> {
    match state.tokens.check(Some(&format!("Bearer {}", form.token.trim())), Scope::Read) {
        Ok(()) => {}
        Err(Denied::Unauthenticated) => return Err(ServiceError::Unauthenticated),
        Err(Denied::WrongScope) => return Err(ServiceError::WrongScope(Scope::Read)),
    }
    let value = state.sessions.open().map_err(|e| ServiceError::Internal(e.to_string()))?;
    let cookie = HeaderValue::from_str(&session::set_cookie(&value, state.tls))
        .map_err(|e| ServiceError::Internal(e.to_string()))?;
    let target = HeaderValue::from_str(session::local_target(form.next.as_deref()))
        .unwrap_or(HeaderValue::from_static("/"));
    Ok((StatusCode::SEE_OTHER, [(header::LOCATION, target), (header::SET_COOKIE, cookie)]).into_response())
}

async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Response {
    state.sessions.close(headers.get(header::COOKIE).and_then(|v| v.to_str().ok()));
    let clear =
        HeaderValue::from_str(&session::clear_cookie(state.tls)).unwrap_or(HeaderValue::from_static(""));
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, HeaderValue::from_static("/login")), (header::SET_COOKIE, clear)],
    )
        .into_response()
}

/// Reads a body to its end, or `limit` bytes, keeping nothing.
async fn discard(body: Body, limit: usize) {
    use axum::body::HttpBody;
    let mut body = std::pin::pin!(body);
    let mut read = 0usize;
    while let Some(Ok(frame)) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        read += frame.data_ref().map_or(0, |d| d.len());
        if read > limit {
            return;
        }
    }
}

/// Record bodies must say they are JSON. A browser sends text/plain,
/// form types or no type at all to any origin without a CORS preflight;
/// requiring a JSON type means a web page cannot write to a service on
/// the user's loopback. The type also says how the body is framed
/// (`framing`): a line type, one record per line; `application/json`, one
/// array or one record if the body parses as one, else lines.
fn declared_framing(headers: &HeaderMap) -> Result<Framing, ServiceError> {
    let given = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let media = given.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let json = media == "application/json" || (media.starts_with("application/") && media.ends_with("+json"));
    if json || LINE_TYPES.contains(&media.as_str()) {
        Ok(Framing::of_media_type(&media))
    } else {
        Err(ServiceError::NotJson(if given.is_empty() { "(none)".to_string() } else { given.to_string() }))
    }
}

/// Rejections and warnings listed per answer; `rejected_total` and
/// `warnings` count them all.
const MAX_LISTED_NOTES: usize = 100;

/// Attempt records (JSONL or a JSON array). `?format=` takes any input
/// format (`otlp`, `litellm`, `openrouter`); without it the body's first
/// record decides, as for files.
async fn post_attempts(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    held: Option<Extension<SharedHeld>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ServiceError> {
    let format = match params.get("format") {
        Some(name) => Some(<Format as clap::ValueEnum>::from_str(name, true).map_err(|_| {
            ServiceError::BadRequest(format!("format: `{name}` is not attempts, otlp, litellm or openrouter"))
        })?),
        None => None,
    };
    let decoded = decode_records(&state, &headers, held, body, format).await?;
    store_and_answer(&state, decoded).await
}

/// What LiteLLM's generic API logger posts: a JSON array of
/// StandardLoggingPayloads (its default), NDJSON, or one payload.
async fn post_litellm(
    State(state): State<AppState>,
    held: Option<Extension<SharedHeld>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ServiceError> {
    let decoded = decode_records(&state, &headers, held, body, Some(Format::Litellm)).await?;
    store_and_answer(&state, decoded).await
}

/// Decodes a record body (which must say it is JSON), framed as its type
/// declares, in `format` (or the one its first record tells), on the
/// blocking pool. What its records can hold at most
/// (`Framed::held_at_most`) is taken from the budget at once before
/// decoding, so requests that do not fit together are refused before any
/// is decoded; the body's own bytes are given back once it is decoded;
/// spans it held (OTLP lines) are taken on top.
async fn decode_records(
    state: &AppState,
    headers: &HeaderMap,
    held: Option<Extension<SharedHeld>>,
    body: Bytes,
    format: Option<Format>,
) -> Result<Decoded, ServiceError> {
    IngestRequest { receiver: Receiver::Attempts }.emit();
    let framing = declared_framing(headers)?;
    let held = held.map(|Extension(held)| held).unwrap_or_default();
    let (budget, decoding) = (state.byte_budget.clone(), held.clone());
    let body_bytes = body.len();
    let decoded = tokio::task::spawn_blocking(move || {
        let text = std::str::from_utf8(&body)
            .map_err(|e| ServiceError::BadRequest(format!("body is not UTF-8: {e}")))?;
        let framed = frame(text, framing);
        let at_most = framed.held_at_most();
        if !decoding.take(&budget, at_most) {
            return Err(ServiceError::no_room(decoding.bytes() + at_most, &budget));
        }
        let format = framed.format(format).map_err(ServiceError::BadRequest)?;
        let decoded = framed.decode(format, 1);
        let spans = decoded.spans.iter().map(attempt_core::model::SpanRecord::held_bytes).sum();
        if !decoding.take(&budget, spans) {
            return Err(ServiceError::no_room(decoding.bytes() + spans, &budget));
        }
        Ok(decoded)
    })
    .await
    .map_err(|e| ServiceError::Internal(e.to_string()))?;
    held.release(body_bytes);
    if matches!(
        decoded,
        Err(ServiceError::Write(WriteError::Saturated) | ServiceError::DecodedTooLarge { .. })
    ) {
        WriteRefused { by: Refusal::Bytes }.emit();
    }
    decoded
}

/// Stores what was decoded and answers with the ingest keys
/// (docs/record-format.md, "The ingest answer"): exact counts, and the first
/// notes of each kind.
async fn store_and_answer(state: &AppState, decoded: Decoded) -> Result<Response, ServiceError> {
    super::traced::decoded((decoded.attempts.len() + decoded.spans.len()) as u64 + decoded.rejected);
    RecordsRejected { receiver: Receiver::Attempts, records: decoded.rejected }.emit();
    let received = decoded.received();
    let stats = state.writer.write(decoded.attempts, decoded.spans, decoded.circuits).await?;
    let rejected: Vec<_> = decoded
        .rejections
        .iter()
        .take(MAX_LISTED_NOTES)
        .map(|Rejection { line, reason }| json!({"line": line, "reason": reason}))
        .collect();
    let warnings: Vec<_> = decoded
        .warnings
        .iter()
        .take(MAX_LISTED_NOTES)
        .map(|w| json!({"line": w.line, "reason": w.reason}))
        .collect();
    let truncated = decoded.rejected > MAX_LISTED_NOTES as u64
        || decoded.warned > MAX_LISTED_NOTES as u64
        || stats.conflicts > MAX_LISTED_CONFLICTS as u64;
    Ok(axum::Json(json!({
        "received": received,
        "accepted": stats.inserted,
        "duplicates": stats.duplicates,
        "conflicts": stats.conflicts,
        "conflict_ids": stats.conflict_ids,
        "warnings": decoded.warned,
        "warning_list": warnings,
        "rejected": rejected,
        "rejected_total": decoded.rejected + stats.records_refused,
        "spans_refused": stats.spans_refused,
        "truncated": truncated,
    }))
    .into_response())
}

/// google.rpc.Status, the body of an OTLP/HTTP error.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// OTLP/HTTP, traces or logs (`Signal`): the answer is encoded like the
/// request; errors carry a google.rpc.Status; retryable refusals say when
/// to retry.
async fn post_otlp<S: Signal>(
    State(state): State<AppState>,
    held: Option<Extension<SharedHeld>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    IngestRequest { receiver: Receiver::OtlpHttp }.emit();
    let encoding = match otlp_encoding(&headers) {
        Ok(encoding) => encoding,
        Err(message) => return otlp_error(Encoding::Json, Kind::Unsupported, message),
    };
    let held = held.map(|Extension(held)| held).unwrap_or_default();
    let exporter = OtlpReceiver {
        writer: &state.writer,
        budget: &state.byte_budget,
        recent: &state.recent_call_traces,
        receiver: Receiver::OtlpHttp,
    };
    otlp_answer(encoding, S::export(&exporter, &held, body, encoding).await)
}

/// The encoding an OTLP/HTTP request declares in its Content-Type, or
/// the message that refuses it.
fn otlp_encoding(headers: &HeaderMap) -> Result<Encoding, String> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    match content_type.split(';').next().unwrap_or("").trim() {
        "application/x-protobuf" | "application/protobuf" => Ok(Encoding::Protobuf),
        "application/json" => Ok(Encoding::Json),
        other => {
            Err(format!("unsupported Content-Type `{other}`: use application/x-protobuf or application/json"))
        }
    }
}

/// An export's answer in the request's encoding.
fn otlp_answer<M: Message + serde::Serialize>(
    encoding: Encoding,
    answer: Result<M, ServiceError>,
) -> Response {
    match answer {
        Ok(response) => {
            let bytes = match encoding {
                Encoding::Protobuf => response.encode_to_vec(),
                Encoding::Json => serde_json::to_vec(&response).unwrap_or_default(),
            };
            ([(header::CONTENT_TYPE, encoding.content_type())], bytes).into_response()
        }
        Err(err) => otlp_error(encoding, err.kind(), err.message()),
    }
}

/// OTLP/HTTP errors are a `google.rpc.Status` in the request's encoding,
/// with the gRPC code of the same kind.
fn otlp_error(encoding: Encoding, kind: Kind, message: String) -> Response {
    let code = kind.grpc() as i32;
    let body = match encoding {
        Encoding::Protobuf => RpcStatus { code, message }.encode_to_vec(),
        Encoding::Json => serde_json::to_vec(&json!({"code": code, "message": message})).unwrap_or_default(),
    };
    let mut response = (kind.http(), [(header::CONTENT_TYPE, encoding.content_type())], body).into_response();
    error::decorate(kind, &mut response);
    response
}

/// The charts' buckets (`report::timeseries`): `since` (default 24 h
/// before `until`), `until` (default now), `step` ("5m"; default: at most
/// 240 buckets), `workflow`, `route` (a provider).
async fn get_timeseries(
    State(state): State<AppState>,
    Query(params): Params,
) -> Result<Response, ServiceError> {
    let range = SeriesRange::from_params(&params, Utc::now())?;
    Ok(axum::Json(state.read(move |reader| reader.timeseries(&range)).await?).into_response())
}

/// The recovery audit (`report::audit`): `since`, `until`, `workflow`.
async fn get_audit(State(state): State<AppState>, Query(params): Params) -> Result<Response, ServiceError> {
    let window = Window::from_params(&params, Utc::now())?;
    let format = request::choice_param::<crate::report::Format>(&params, "format")?;
    let (audit, freshness) = state.read_fresh(move |reader| reader.audit(window)).await?;
    match format {
        None => Ok(axum::Json(audit).into_response()),
        Some(format) => Ok(rendered(audit.render(format), format_type(format), Some(&freshness))),
    }
}

/// `set=` parameters a tune request may hold: more is refused, not read.
pub const MAX_TUNE_ASSIGNMENTS: usize = 64;

/// The value of each retry and, with `set=KEY=VALUE` (repeatable), the
/// replay of those limits (`tune --set`).
async fn get_tune(
    State(state): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Response, ServiceError> {
    let set = pairs.iter().filter(|(k, _)| k == "set").map(|(_, v)| v.clone()).collect();
    let set = request::assignments("set", set, MAX_TUNE_ASSIGNMENTS)?;
    let params: HashMap<String, String> = pairs.into_iter().filter(|(k, _)| k != "set").collect();
    let filter = ReportFilter::from_params(&params, Utc::now())?;
    let candidate = crate::read::Candidate::from_flags(None, &set)
        .map_err(|e| ServiceError::BadRequest(e.to_string()))?;
    let format = request::choice_param::<crate::report::Format>(&params, "format")?;
    let (tune, freshness) = state.read_fresh(move |reader| reader.tune(&filter, candidate.as_ref())).await?;
    match format {
        None => Ok(axum::Json(tune).into_response()),
        Some(format) => Ok(rendered(tune.render(format), format_type(format), Some(&freshness))),
    }
}

/// The ledger held against the imported bill (`reconcile`).
async fn get_reconcile(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ServiceError> {
    let question = attempt_core::reconcile::Question::from_params(&params, Utc::now())?;
    let format = request::choice_param::<crate::report::Format>(&params, "format")?;
    let (answer, freshness) = state.read_fresh(move |reader| reader.reconcile(&question)).await?;
    match format {
        None => Ok(axum::Json(answer).into_response()),
        Some(format) => Ok(rendered(
            crate::report::reconcile::render(&answer, format),
            format_type(format),
            Some(&freshness),
        )),
    }
}

/// Every attempt of one workflow, in order (`report::workflow`).
async fn get_workflow(
    State(state): State<AppState>,
    axum::extract::Path(workflow_id): axum::extract::Path<String>,
) -> Result<Response, ServiceError> {
    let id = workflow_id.clone();
    match state.read(move |reader| reader.workflow(&id)).await? {
        Some(detail) => Ok(axum::Json(detail).into_response()),
        None => Err(ServiceError::UnknownWorkflow(workflow_id.chars().take(200).collect())),
    }
}

type Params = Query<HashMap<String, String>>;

/// Alerts pending and firing now, and the history (newest first).
async fn get_alerts(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ServiceError> {
    let limit = request::count_param(&params, "limit", 100)?;
    let format = request::choice_param::<crate::alerts::history::Format>(&params, "format")?;
    let history = state.read(move |reader| reader.alert_history(limit)).await?;
    if let Some(format) = format {
        let content_type = match format {
            crate::alerts::history::Format::Json => "application/json",
            crate::alerts::history::Format::Table => "text/plain; charset=utf-8",
        };
        return Ok(rendered(crate::alerts::history::render(&history, format), content_type, None));
    }
    let active = state.observed.active_alerts.read().map(|a| a.clone()).unwrap_or_default();
    let (firing, pending): (Vec<_>, Vec<_>) = active.into_iter().partition(|(_, firing)| *firing);
    let strip = |v: Vec<(attempt_core::alert_event::AlertEvent, bool)>| {
        v.into_iter().map(|(e, _)| e).collect::<Vec<_>>()
    };
    Ok(axum::Json(json!({"firing": strip(firing), "pending": strip(pending), "history": history}))
        .into_response())
}

async fn get_metrics(State(state): State<AppState>) -> Response {
    let mut families = super::health::live_gauges(&state);
    if let Ok(Some(stored)) = state.observed.stored_metrics.read().map(|s| s.clone()) {
        families.extend(stored.families.iter().cloned());
    }
    let body = crate::metrics::exposition(families);
    ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], body).into_response()
}

/// The report (`report`): `since`, `until`, `workflow`, `retry_budget`,
/// `group_by`, `audit` (`false` leaves the audit section out), `format`.
async fn get_report(State(state): State<AppState>, Query(params): Params) -> Result<Response, ServiceError> {
    let filter = ReportFilter::from_params(&params, Utc::now())?;
    let with_audit = request::switch_param(&params, "audit", true)?;
    let format = request::choice_param::<crate::report::Format>(&params, "format")?;
    let (mut report, freshness) = state.read_fresh(move |reader| reader.report(&filter, with_audit)).await?;
    match format {
        None => {
            report.derivation = Some(freshness);
            Ok(axum::Json(report).into_response())
        }
        Some(format) => {
            Ok(rendered(crate::report::render(&report, format), format_type(format), Some(&freshness)))
        }
    }
}

fn format_type(format: crate::report::Format) -> &'static str {
    match format {
        crate::report::Format::Json => "application/json",
        crate::report::Format::Csv => "text/csv; charset=utf-8",
        crate::report::Format::Table => "text/plain; charset=utf-8",
    }
}

/// Header of a rendered answer: how current it is, which the rendering
/// itself leaves out, as the command line's does.
pub const DERIVATION_HEADER: &str = "attempt-ledger-derivation";

/// The answer rendered as the command line prints it (`format=`, as in
/// `report --format`), so a command asking a running service prints what it
/// would print reading the file itself.
fn rendered(
    body: String,
    content_type: &'static str,
    freshness: Option<&crate::report::Freshness>,
) -> Response {
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    if let Some(f) = freshness {
        let state = if f.complete {
            "complete".to_string()
        } else {
            format!("pending_commits={} lag_seconds={:.1}", f.pending_commits, f.lag_seconds)
        };
        if let Ok(value) = HeaderValue::from_str(&state) {
            response.headers_mut().insert(DERIVATION_HEADER, value);
        }
    }
    response
}
