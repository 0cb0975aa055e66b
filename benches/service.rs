//! Service ingest throughput: OTLP/HTTP protobuf spans and HTTP JSONL
//! records, against the real `attempt-ledger serve` process.
//!
//!     cargo bench --bench service [-- REQUESTS]        (default 200 per kind)
//!
//! Each request carries 1,000 GenAI spans (or 1,000 JSONL records); four
//! client threads send them. Prints records per wall-clock second and per
//! CPU-second of the server process (its utime + stime from /proc): the
//! latter is "per core", the unit of the OpenTelemetry Collector's sizing
//! guide (about 10-15k spans/s per core).

// A harness, not a product path: it unwraps what it set up, and scan.rs
// reads a database file as DuckDB's own client would.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;

const PER_REQUEST: usize = 1_000;
const CLIENTS: usize = 4;

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}

fn otlp_request(n: usize) -> Vec<u8> {
    let spans = (0..PER_REQUEST)
        .map(|i| Span {
            trace_id: format!("{n:016x}{i:016x}").into_bytes()[..16].to_vec(),
            span_id: ((n * PER_REQUEST + i + 1) as u64).to_be_bytes().to_vec(),
            name: "chat gpt-4o-mini".into(),
            start_time_unix_nano: 1_795_831_200_000_000_000 + (i as u64) * 1_000_000,
            end_time_unix_nano: 1_795_831_200_500_000_000 + (i as u64) * 1_000_000,
            attributes: vec![
                kv("gen_ai.operation.name", Value::StringValue("chat".into())),
                kv("gen_ai.provider.name", Value::StringValue("openai".into())),
                kv("gen_ai.request.model", Value::StringValue("gpt-4o-mini".into())),
                kv("gen_ai.response.model", Value::StringValue("gpt-4o-mini-2024-07-18".into())),
                kv("gen_ai.usage.input_tokens", Value::IntValue(1200)),
                kv("gen_ai.usage.output_tokens", Value::IntValue(80)),
                kv("attempt.workflow_id", Value::StringValue(format!("doc-{n}-{i}"))),
                kv("attempt.workflow", Value::StringValue("bench".into())),
            ],
            ..Span::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans, ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    }
    .encode_to_vec()
}

fn jsonl_request(n: usize) -> Vec<u8> {
    (0..PER_REQUEST)
        .map(|i| {
            format!(
                "{{\"workflow_id\":\"j{n}-{i}\",\"workflow\":\"bench\",\"started_at\":1795831200000,\"provider\":\"openai\",\"model\":\"gpt-4o-mini\",\"status\":\"ok\",\"input_tokens\":1200,\"output_tokens\":80}}\n"
            )
        })
        .collect::<String>()
        .into_bytes()
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|t| t.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|t| t.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

fn run(label: &str, http: &str, pid: u32, path: &str, content_type: &str, bodies: Vec<Vec<u8>>) {
    let records = bodies.len() * PER_REQUEST;
    let cpu_before = cpu_seconds(pid);
    let began = Instant::now();
    let chunks: Vec<Vec<Vec<u8>>> = {
        let mut chunks = vec![Vec::new(); CLIENTS];
        for (i, b) in bodies.into_iter().enumerate() {
            chunks[i % CLIENTS].push(b);
        }
        chunks
    };
    let refused: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                scope.spawn(move || {
                    let agent: ureq::Agent =
                        ureq::Agent::config_builder().http_status_as_error(false).build().into();
                    let mut refused = 0;
                    for body in chunk {
                        loop {
                            let r = agent
                                .post(&format!("{http}{path}"))
                                .header("Content-Type", content_type)
                                .send(&body[..]);
                            match r.map(|r| r.status().as_u16()) {
                                Ok(200) => break,
                                Ok(503) => {
                                    refused += 1;
                                    std::thread::sleep(std::time::Duration::from_millis(50));
                                }
                                other => panic!("{label}: {other:?}"),
                            }
                        }
                    }
                    refused
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let wall = began.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid) - cpu_before;
    println!(
        "{label:<18} {records} in {wall:.2} s: {:.0}/s wall, {:.0}/s per server CPU-second ({cpu:.2} CPU-s; {refused} retried 503s)",
        records as f64 / wall,
        records as f64 / cpu
    );
}

fn main() {
    let requests: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_attempt-ledger");
    let mut child = Command::new(bin)
        .args(["serve", "--db", dir.path().join("bench.duckdb").to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--otlp-grpc", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let http =
        line.split_whitespace().find_map(|w| w.strip_prefix("http=")).expect("address line").to_string();
    let http = format!("http://{http}");
    let pid = child.id();

    run(
        "OTLP/HTTP protobuf",
        &http,
        pid,
        "/v1/traces",
        "application/x-protobuf",
        (0..requests).map(otlp_request).collect(),
    );
    run(
        "HTTP JSONL",
        &http,
        pid,
        "/v1/attempts",
        "application/x-ndjson",
        (0..requests).map(jsonl_request).collect(),
    );
    let _ = child.kill();
    let _ = child.wait();
}
