//! The write path under load, against the real `attempt-ledger serve`.
//!
//!     cargo bench --bench load -- [--seconds S] [--db PATH] [--json FILE] [SCENARIO...]
//!
//! Scenarios (all by default):
//! - `per-call`: 20 and then 100 clients, each posting one record per request
//!   and waiting for its answer (what an application that logs every LLM call
//!   does): records/s, p50/p99 of the answers, 503s.
//! - `batches`: 8 clients posting 1,000-record batches: records/s, p50/p99,
//!   and the derivation lag sampled from `/readyz` every 100 ms (p99, max),
//!   then the time derivation takes to catch up once the load stops.
//! - `trace`: one trace grown by 50 OTLP exports of 200 spans (a parent chain
//!   of agent steps, each with a model span and two HTTP attempts: a 529,
//!   then a 200), sent one after another, against the same 10,000 spans in
//!   one export; the server's CPU-seconds until derivation caught up, each,
//!   and their ratio. Meanwhile one client posts one record every 20 ms:
//!   p50/p99 of its answers.
//!
//! `--db` serves an existing database (a copy is not made: the scenarios add
//! records to it). Figures, not assertions: ratios are taken in one run.

// A harness, not a product path: it unwraps what it set up, and scan.rs
// reads a database file as DuckDB's own client would.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status, status::StatusCode};
use prost::Message;
use serde_json::json;

struct Service {
    child: Child,
    base: String,
    _dir: Option<tempfile::TempDir>,
}

impl Service {
    fn start(db: Option<&str>) -> Service {
        let dir = if db.is_none() { Some(tempfile::tempdir().unwrap()) } else { None };
        let path = match (db, &dir) {
            (Some(db), _) => db.to_string(),
            (None, Some(dir)) => dir.path().join("load.duckdb").display().to_string(),
            (None, None) => unreachable!(),
        };
        // ATTEMPT_LEDGER_BIN: another build to measure (an earlier commit's).
        let binary = std::env::var("ATTEMPT_LEDGER_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_attempt-ledger").into());
        let mut child = Command::new(binary)
            .args(["serve", "--db", &path, "--listen", "127.0.0.1:0", "--otlp-grpc", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let http = line.split_whitespace().find_map(|w| w.strip_prefix("http=")).expect("address line");
        Service { base: format!("http://{http}"), child, _dir: dir }
    }

    /// utime + stime of the server process, in seconds.
    fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
        let ticks: f64 = fields.get(11).and_then(|t| t.parse().ok()).unwrap_or(0.0)
            + fields.get(12).and_then(|t| t.parse().ok()).unwrap_or(0.0);
        ticks / 100.0
    }

    /// (pending commits, lag in seconds) from `/readyz`; a service that
    /// states neither derives inside its acknowledgement: nothing pends.
    fn lag(&self, agent: &ureq::Agent) -> (u64, f64) {
        let Ok(mut answer) = agent.get(&format!("{}/readyz", self.base)).call() else { return (0, 0.0) };
        let body = answer.body_mut().read_to_string().unwrap_or_default();
        let value: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let derivation = &value["derivation"];
        (
            derivation["pending_commits"].as_u64().unwrap_or(0),
            derivation["lag_seconds"].as_f64().unwrap_or(0.0),
        )
    }

    /// Waits until derivation has reached every write acknowledged before
    /// this call (a report over an empty window says whether it has: it
    /// waits for it, boundedly); returns how long that took. A service
    /// whose report states no derivation derives inside its
    /// acknowledgement.
    fn caught_up(&self, agent: &ureq::Agent) -> Duration {
        let began = Instant::now();
        let url = format!("{}/api/v1/report?since=2100-01-01T00:00:00Z&audit=false", self.base);
        loop {
            let mut answer = agent.get(&url).call().expect("report");
            let report: serde_json::Value =
                serde_json::from_slice(&answer.body_mut().read_to_vec().unwrap_or_default())
                    .unwrap_or_default();
            if report["derivation"]["complete"].as_bool() != Some(false) {
                return began.elapsed();
            }
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

/// Posts until the service takes it (503s are retried after 10 ms); returns
/// the latency of the answer that took it, and the 503s met.
fn post(agent: &ureq::Agent, url: &str, content_type: &str, body: &[u8]) -> (Duration, u64) {
    let mut refused = 0;
    loop {
        let began = Instant::now();
        let status = agent.post(url).header("Content-Type", content_type).send(body).map(|mut r| {
            let _ = r.body_mut().read_to_vec();
            r.status().as_u16()
        });
        match status {
            Ok(200) => return (began.elapsed(), refused),
            Ok(503) => {
                refused += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            other => panic!("POST {url}: {other:?}"),
        }
    }
}

fn percentile(sorted: &[Duration], share: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((share * sorted.len() as f64) as usize).min(sorted.len() - 1);
    sorted[at].as_secs_f64() * 1000.0
}

/// A workflow of the storm's shape: a 529 then a success, or one success.
fn records(prefix: &str, n: u64, now_ms: i64) -> String {
    let mut lines = String::new();
    let mut i = 0;
    while i < n {
        let workflow = format!("{prefix}-{i}");
        let retried = i % 3 == 0 && i + 1 < n;
        let mut line = |attempt: u64, ok: bool| {
            let mut record = json!({
                "workflow_id": workflow, "workflow": "load", "attempt": attempt,
                "started_at": now_ms + attempt as i64 * 900, "provider": "anthropic",
                "model": "claude-sonnet-4-5", "status": if ok { "ok" } else { "error" },
                "duration_ms": 840.0, "layer": "sdk",
            });
            if ok {
                record["input_tokens"] = json!(1200);
                record["output_tokens"] = json!(300);
            } else {
                record["http_status"] = json!(529);
            }
            lines.push_str(&record.to_string());
            lines.push('\n');
        };
        if retried {
            line(1, false);
            line(2, true);
            i += 2;
        } else {
            line(1, true);
            i += 1;
        }
    }
    lines
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

struct Figures(serde_json::Map<String, serde_json::Value>);

impl Figures {
    fn put(&mut self, key: &str, value: serde_json::Value) {
        self.0.insert(key.to_string(), value);
    }
}

/// Runs `clients` threads, each posting `body(client, n)` to `url` and
/// waiting for its answer, until `stop`; returns every answer's latency.
fn clients_until(
    url: &str,
    clients: usize,
    stop: &AtomicBool,
    refused: &AtomicU64,
    body: impl Fn(usize, u64) -> String + Sync,
) -> Vec<Duration> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let body = &body;
                scope.spawn(move || {
                    let agent = agent();
                    let mut mine = Vec::new();
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let (latency, r) = post(&agent, url, "application/x-ndjson", body(c, n).as_bytes());
                        refused.fetch_add(r, Ordering::Relaxed);
                        mine.push(latency);
                        n += 1;
                    }
                    mine
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

fn per_call(db: Option<&str>, seconds: u64, clients: usize, figures: &mut Figures) {
    let service = Service::start(db);
    let url = format!("{}/v1/attempts", service.base);
    let stop = AtomicBool::new(false);
    let refused = AtomicU64::new(0);
    let run = now_ms();
    let latencies = std::thread::scope(|scope| {
        let load = scope.spawn(|| {
            clients_until(&url, clients, &stop, &refused, |c, n| {
                records(&format!("call-{run}-{c}-{n}"), 1, now_ms())
            })
        });
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
        load.join().unwrap()
    });
    let mut sorted = latencies;
    sorted.sort();
    let rate = sorted.len() as f64 / seconds as f64;
    let catch_up = service.caught_up(&agent());
    println!(
        "per-call, {clients:>3} clients, 1 record a request: {rate:>8.0} records/s, p50 {:.1} ms, p99 {:.1} ms, \
         {} 503s; derivation caught up {:.2} s after the load",
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
        refused.load(Ordering::Relaxed),
        catch_up.as_secs_f64()
    );
    figures.put(
        &format!("per_call_{clients}_clients"),
        json!({"records_per_s": rate.round(), "p50_ms": percentile(&sorted, 0.5),
               "p99_ms": percentile(&sorted, 0.99), "refused": refused.load(Ordering::Relaxed),
               "catch_up_s": catch_up.as_secs_f64()}),
    );
}

fn batches(db: Option<&str>, seconds: u64, figures: &mut Figures) {
    const CLIENTS: usize = 8;
    const PER_BATCH: u64 = 1_000;
    let service = Service::start(db);
    let url = format!("{}/v1/attempts", service.base);
    let stop = AtomicBool::new(false);
    let refused = AtomicU64::new(0);
    let run = now_ms();
    let (latencies, lags) = std::thread::scope(|scope| {
        let load = scope.spawn(|| {
            clients_until(&url, CLIENTS, &stop, &refused, |c, n| {
                records(&format!("batch-{run}-{c}-{n}"), PER_BATCH, now_ms())
            })
        });
        let sampler = scope.spawn(|| {
            let agent = agent();
            let mut lags = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                lags.push(Duration::from_secs_f64(service.lag(&agent).1));
                std::thread::sleep(Duration::from_millis(100));
            }
            lags
        });
        std::thread::sleep(Duration::from_secs(seconds));
        stop.store(true, Ordering::Relaxed);
        (load.join().unwrap(), sampler.join().unwrap())
    });
    let mut sorted = latencies;
    sorted.sort();
    let mut lags = lags;
    lags.sort();
    let rate = (sorted.len() as u64 * PER_BATCH) as f64 / seconds as f64;
    let catch_up = service.caught_up(&agent());
    println!(
        "batches, {CLIENTS} clients, {PER_BATCH} records a request: {rate:>8.0} records/s, p50 {:.1} ms, \
         p99 {:.1} ms, {} 503s; derivation lag p99 {:.2} s, max {:.2} s; caught up {:.2} s after the load",
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
        refused.load(Ordering::Relaxed),
        percentile(&lags, 0.99) / 1000.0,
        lags.last().map_or(0.0, Duration::as_secs_f64),
        catch_up.as_secs_f64()
    );
    figures.put(
        "batches_8_clients",
        json!({"records_per_s": rate.round(), "p50_ms": percentile(&sorted, 0.5),
               "p99_ms": percentile(&sorted, 0.99), "refused": refused.load(Ordering::Relaxed),
               "lag_p99_s": percentile(&lags, 0.99) / 1000.0,
               "lag_max_s": lags.last().map_or(0.0, Duration::as_secs_f64),
               "catch_up_s": catch_up.as_secs_f64()}),
    );
}

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}

fn text(key: &str, value: &str) -> KeyValue {
    kv(key, Value::StringValue(value.into()))
}

/// The spans of agent step `k` of trace `trace`: the step (its parent is
/// the step before), a model span under it, and two HTTP attempts under the
/// model span (a 529, then a 200).
fn step_spans(trace: &[u8; 16], k: u64, base_ns: u64) -> Vec<Span> {
    let id = |n: u64| (k * 4 + n + 1).to_be_bytes().to_vec();
    let at = base_ns + k * 2_000_000_000;
    let span = |span_id: Vec<u8>, parent: Vec<u8>, name: &str, start: u64, end: u64| Span {
        trace_id: trace.to_vec(),
        span_id,
        parent_span_id: parent,
        name: name.into(),
        start_time_unix_nano: start,
        end_time_unix_nano: end,
        ..Span::default()
    };
    let parent_step = if k == 0 { Vec::new() } else { ((k - 1) * 4 + 1).to_be_bytes().to_vec() };
    let mut step = span(id(0), parent_step, "agent step", at, at + 1_900_000_000);
    step.attributes = vec![text("gen_ai.operation.name", "invoke_agent")];
    let mut model = span(id(1), id(0), "chat claude-sonnet-4-5", at + 10_000_000, at + 1_800_000_000);
    model.attributes = vec![
        text("gen_ai.operation.name", "chat"),
        text("gen_ai.provider.name", "anthropic"),
        text("gen_ai.request.model", "claude-sonnet-4-5"),
        kv("gen_ai.usage.input_tokens", Value::IntValue(1200)),
        kv("gen_ai.usage.output_tokens", Value::IntValue(300)),
    ];
    let mut failed = span(id(2), id(1), "POST", at + 20_000_000, at + 400_000_000);
    failed.attributes = vec![
        text("http.request.method", "POST"),
        kv("http.response.status_code", Value::IntValue(529)),
        text("server.address", "api.anthropic.com"),
    ];
    failed.status = Some(Status { code: StatusCode::Error as i32, ..Status::default() });
    let mut ok = span(id(3), id(1), "POST", at + 900_000_000, at + 1_790_000_000);
    ok.attributes = vec![
        text("http.request.method", "POST"),
        kv("http.response.status_code", Value::IntValue(200)),
        text("server.address", "api.anthropic.com"),
        kv("http.request.resend_count", Value::IntValue(1)),
    ];
    vec![step, model, failed, ok]
}

fn export(spans: Vec<Span>) -> Vec<u8> {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans, ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    }
    .encode_to_vec()
}

/// Sends `exports` one after another, then waits until derivation caught
/// up, while one client posts a record every 20 ms; returns (server
/// CPU-seconds, wall seconds, the one-record client's latencies).
fn grow(service: &Service, exports: &[Vec<u8>]) -> (f64, f64, Vec<Duration>) {
    let url = format!("{}/v1/traces", service.base);
    let records_url = format!("{}/v1/attempts", service.base);
    let stop = AtomicBool::new(false);
    let cpu_before = service.cpu_seconds();
    let began = Instant::now();
    let latencies = std::thread::scope(|scope| {
        let prober = scope.spawn(|| {
            let agent = agent();
            let mut mine = Vec::new();
            let mut n = 0;
            let run = now_ms();
            while !stop.load(Ordering::Relaxed) {
                let body = records(&format!("probe-{run}-{n}"), 1, now_ms());
                mine.push(post(&agent, &records_url, "application/x-ndjson", body.as_bytes()).0);
                n += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            mine
        });
        let agent = agent();
        for body in exports {
            post(&agent, &url, "application/x-protobuf", body);
        }
        service.caught_up(&agent);
        stop.store(true, Ordering::Relaxed);
        prober.join().unwrap()
    });
    (service.cpu_seconds() - cpu_before, began.elapsed().as_secs_f64(), latencies)
}

fn trace(db: Option<&str>, figures: &mut Figures) {
    const EXPORTS: u64 = 50;
    const STEPS_PER_EXPORT: u64 = 50; // 4 spans a step: 200 spans an export
    let service = Service::start(db);
    let base_ns = (now_ms() as u64 - 3_600_000) * 1_000_000;
    let trace_of = |n: u8| {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&(now_ms() as u64).to_be_bytes());
        id[15] = n;
        id
    };
    let whole = trace_of(1);
    let one: Vec<Span> =
        (0..EXPORTS * STEPS_PER_EXPORT).flat_map(|k| step_spans(&whole, k, base_ns)).collect();
    let (cpu_one, wall_one, probe_one) = grow(&service, &[export(one)]);
    let grown = trace_of(2);
    let exports: Vec<Vec<u8>> = (0..EXPORTS)
        .map(|e| {
            export(
                (e * STEPS_PER_EXPORT..(e + 1) * STEPS_PER_EXPORT)
                    .flat_map(|k| step_spans(&grown, k, base_ns))
                    .collect(),
            )
        })
        .collect();
    let (cpu_many, wall_many, probe_many) = grow(&service, &exports);
    let mut probes: Vec<Duration> = probe_one.into_iter().chain(probe_many).collect();
    probes.sort();
    println!(
        "trace of 10,000 spans: one export {cpu_one:.2} CPU-s ({wall_one:.2} s), 50 exports {cpu_many:.2} CPU-s \
         ({wall_many:.2} s): {:.2}x; a one-record client meanwhile: p50 {:.1} ms, p99 {:.1} ms",
        cpu_many / cpu_one.max(0.01),
        percentile(&probes, 0.5),
        percentile(&probes, 0.99)
    );
    figures.put(
        "trace_growth",
        json!({"one_export_cpu_s": cpu_one, "one_export_wall_s": wall_one,
               "fifty_exports_cpu_s": cpu_many, "fifty_exports_wall_s": wall_many,
               "ratio": cpu_many / cpu_one.max(0.01),
               "probe_p50_ms": percentile(&probes, 0.5), "probe_p99_ms": percentile(&probes, 0.99)}),
    );
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let (mut seconds, mut db, mut json_file, mut only) = (10, None, None, Vec::new());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => seconds = args.next().and_then(|s| s.parse().ok()).expect("--seconds N"),
            "--db" => db = args.next(),
            "--json" => json_file = args.next(),
            name => only.push(name.to_string()),
        }
    }
    let wanted = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let mut figures = Figures(serde_json::Map::new());
    let db = db.as_deref();
    if wanted("per-call") {
        per_call(db, seconds, 20, &mut figures);
        per_call(db, seconds, 100, &mut figures);
    }
    if wanted("batches") {
        batches(db, seconds, &mut figures);
    }
    if wanted("trace") {
        trace(db, &mut figures);
    }
    if let Some(file) = json_file {
        std::fs::write(file, serde_json::Value::Object(figures.0).to_string()).unwrap();
    }
}
