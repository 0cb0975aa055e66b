//! The gRPC port as bounded as the HTTP one, driven by raw HTTP/2 streams
//! that stall, garbage messages and idle connections.

use std::io::Read;
use std::time::{Duration, Instant};

use serde_json::json;
use tonic::codegen::{Bytes, http};

use crate::service::{Service, ServiceProcess};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn authority(url: &str) -> String {
    url.trim_start_matches("http://").to_string()
}

/// An HTTP/2 connection to the gRPC port, its driver spawned.
async fn connect(grpc: &str) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(authority(grpc)).await.unwrap();
    let (send, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    send.ready().await.unwrap()
}

fn export_request(grpc: &str) -> http::Request<()> {
    http::Request::post(format!("{grpc}/opentelemetry.proto.collector.trace.v1.TraceService/Export"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap()
}

/// The grpc-status a call ended with: from its headers (a trailers-only
/// answer) or its trailers.
async fn grpc_status(response: h2::client::ResponseFuture) -> (i32, String) {
    let response = response.await.unwrap();
    let read = |headers: &http::HeaderMap| {
        headers.get("grpc-status").map(|s| {
            let message =
                headers.get("grpc-message").map(|m| m.to_str().unwrap().to_string()).unwrap_or_default();
            (s.to_str().unwrap().parse::<i32>().unwrap(), message)
        })
    };
    if let Some(status) = read(response.headers()) {
        return status;
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        chunk.unwrap();
    }
    read(&body.trailers().await.unwrap().expect("trailers")).expect("grpc-status")
}

fn framed(declared: u32, payload: &[u8]) -> Bytes {
    let mut bytes = vec![0u8];
    bytes.extend(declared.to_be_bytes());
    bytes.extend_from_slice(payload);
    Bytes::from(bytes)
}

#[test]
fn a_message_that_does_not_decode_is_invalid_argument_not_internal() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("g.duckdb"), &[]);
    runtime().block_on(async {
        let mut client = connect(&service.grpc).await;
        // Field 1 (resource_spans), 3 bytes that are not a ResourceSpans.
        let garbage = [0x0a, 0x03, 0xff, 0xff, 0xff];
        let (response, mut stream) = client.send_request(export_request(&service.grpc), false).unwrap();
        stream.send_data(framed(garbage.len() as u32, &garbage), true).unwrap();
        let (code, message) = grpc_status(response).await;
        assert_eq!(code, tonic::Code::InvalidArgument as i32, "{message}");
        assert!(message.contains("undecodable"), "{message}");
    });
}

/// Streams that declare a large message and stall after part of it hold
/// the byte budget from their prefix: past it, a stream is refused with
/// UNAVAILABLE, and an HTTP write meets the same full budget.
#[test]
fn stalled_grpc_messages_are_held_against_the_byte_budget() {
    let dir = tempfile::tempdir().unwrap();
    let service =
        Service::start(&dir.path().join("g.duckdb"), &["--max-body-mib", "20", "--queue-mib", "48"]);
    let declared = 20_000_000u32;
    runtime().block_on(async {
        let mut client = connect(&service.grpc).await;
        let mut stalled = Vec::new();
        let mut refused = Vec::new();
        for _ in 0..4 {
            let (response, mut stream) = client.send_request(export_request(&service.grpc), false).unwrap();
            // The prefix and 64 KiB (the stream's flow-control window), then nothing.
            stream.send_data(framed(declared, &vec![0x0a; 60_000]), false).unwrap();
            let answered = tokio::time::timeout(Duration::from_secs(3), grpc_status(response)).await;
            // Still waiting after 3 s: the message is being held, not refused.
            if let Ok(status) = answered {
                refused.push(status);
            }
            stalled.push(stream);
        }
        // 48 MiB hold two 20 MB messages: the third and fourth are refused.
        assert_eq!(refused.len(), 2, "{refused:?}");
        for (code, message) in &refused {
            assert_eq!(*code, tonic::Code::Unavailable as i32, "{message}");
        }
        // The budget is as full for HTTP: a 12 MiB POST (more than the 8
        // MiB left) is told to retry.
        let body = vec![b' '; 12 << 20];
        let (status, _, retry_after) = service.post("/v1/traces", "application/json", None, &body);
        assert_eq!((status, retry_after.as_deref()), (503, Some("1")));
        drop(stalled);
    });
}

#[test]
fn a_connection_offers_at_most_100_concurrent_streams() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("g.duckdb"), &[]);
    runtime().block_on(async {
        let tcp = tokio::net::TcpStream::connect(authority(&service.grpc)).await.unwrap();
        let (client, mut connection) = h2::client::handshake(tcp).await.unwrap();
        // The server's SETTINGS arrive with the first exchange.
        let _ = tokio::time::timeout(Duration::from_millis(500), &mut connection).await;
        assert_eq!(connection.max_concurrent_send_streams(), 100);
        drop(client);
    });
}

/// With fewer open files allowed than connections arrive, the gRPC port
/// takes what fits and closes the silent ones at their first-byte
/// deadline; the HTTP port, /healthz and exports keep answering.
#[test]
fn idle_grpc_connections_past_the_open_files_limit_stall_nobody() {
    let dir = tempfile::tempdir().unwrap();
    let service =
        ServiceProcess::start_with_open_files(&dir.path().join("g.duckdb"), &["--header-timeout", "2s"], 256);
    let (http, grpc) = (authority(&service.http), authority(&service.grpc));
    let idle: Vec<std::net::TcpStream> =
        (0..400).filter_map(|_| std::net::TcpStream::connect(&grpc).ok()).collect();
    assert!(idle.len() >= 300, "{} connections opened", idle.len());
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let started = Instant::now();
    let health = agent.get(&format!("http://{http}/healthz")).call().unwrap().status().as_u16();
    assert_eq!(health, 200);
    let export = json!({"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "chat",
        "startTimeUnixNano": "1795831200000000000", "endTimeUnixNano": "1795831201000000000",
        "attributes": [{"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
                       {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}}]}]}]}]});
    let posted = agent
        .post(&format!("http://{http}/v1/traces"))
        .header("Content-Type", "application/json")
        .send(export.to_string().as_bytes())
        .unwrap()
        .status()
        .as_u16();
    assert_eq!(posted, 200);
    assert!(started.elapsed() < Duration::from_secs(5), "answers took {:?}", started.elapsed());
    // The accepted ones said nothing: each is closed at its deadline.
    let mut first = idle.into_iter().next().unwrap();
    first.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let closed_at = Instant::now();
    // What arrives is the server's HTTP/2 preface, then the end.
    let mut heard = Vec::new();
    let read = first.read_to_end(&mut heard);
    let waited = closed_at.elapsed();
    let timed_out = matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    assert!(!timed_out && waited < Duration::from_secs(6), "{read:?} after {waited:?}");
}
