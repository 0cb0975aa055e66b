//! `attempt-ledger serve` on ports the system chooses, in this process or its own, driven
//! by real clients.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use attempt_core::request::ReportFilter;
use attempt_ledger::store::Store;
use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::{Value, json};

use crate::{FIXTURE, report_of};

/// Where a running service answers, and the requests the tests send it.
pub struct Endpoints {
    pub http: String,
    pub grpc: String,
}

/// `serve` on threads of this test process, started from the command's
/// flags: what tests of the handlers use.
pub struct Service {
    endpoints: Endpoints,
    running: attempt_ledger::cli::InProcess,
}

/// `serve` as a process of its own, for what needs one: signals, kill -9,
/// `ulimit`, its log, its pid, and the telemetry counters of /metrics
/// (the process's, which services in one process would share).
pub struct ServiceProcess {
    endpoints: Endpoints,
    pub child: Child,
}

/// The flags every test service starts with: its database, and ports the
/// system chooses.
fn flags<'a>(db: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut flags =
        vec!["--db", db.to_str().unwrap(), "--listen", "127.0.0.1:0", "--otlp-grpc", "127.0.0.1:0"];
    flags.extend_from_slice(extra);
    flags
}

impl Service {
    pub fn start(db: &Path, extra: &[&str]) -> Service {
        let running = attempt_ledger::cli::InProcess::start(flags(db, extra))
            .unwrap_or_else(|e| panic!("serve did not start: {e:#}"));
        let endpoints =
            Endpoints { http: format!("http://{}", running.http), grpc: format!("http://{}", running.grpc) };
        Service { endpoints, running }
    }

    /// Stops as SIGTERM would, and checks it stopped cleanly.
    pub fn stop(self) {
        if let Err(e) = self.running.stop() {
            panic!("serve did not stop cleanly: {e:#}");
        }
    }
}

impl std::ops::Deref for Service {
    type Target = Endpoints;
    fn deref(&self) -> &Endpoints {
        &self.endpoints
    }
}

impl ServiceProcess {
    pub fn start(db: &Path, extra: &[&str]) -> ServiceProcess {
        Self::spawn(Command::new(env!("CARGO_BIN_EXE_attempt-ledger")), db, extra)
    }

    /// `start` with `envs` set in the service's environment.
    pub fn start_with_env(db: &Path, extra: &[&str], envs: &[(&str, &str)]) -> ServiceProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_attempt-ledger"));
        command.envs(envs.iter().copied());
        Self::spawn(command, db, extra)
    }

    /// `start`, in a process that may open at most `open_files` files
    /// (`ulimit -n`, then exec: the child is `serve` itself).
    pub fn start_with_open_files(db: &Path, extra: &[&str], open_files: u32) -> ServiceProcess {
        let mut shell = Command::new("sh");
        shell
            .args(["-c", &format!("ulimit -n {open_files} && exec \"$0\" \"$@\"")])
            .arg(env!("CARGO_BIN_EXE_attempt-ledger"));
        Self::spawn(shell, db, extra)
    }

    /// `start`, its log (at `filter`, `ATTEMPT_LEDGER_LOG`) written to `log`.
    pub fn start_logging(db: &Path, filter: &str, log: &Path) -> ServiceProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_attempt-ledger"));
        command.env("ATTEMPT_LEDGER_LOG", filter);
        Self::spawn_with_stderr(command, db, &[], std::fs::File::create(log).unwrap().into())
    }

    fn spawn(command: Command, db: &Path, extra: &[&str]) -> ServiceProcess {
        Self::spawn_with_stderr(command, db, extra, Stdio::inherit())
    }

    fn spawn_with_stderr(mut command: Command, db: &Path, extra: &[&str], stderr: Stdio) -> ServiceProcess {
        let mut child = command
            .arg("serve")
            .args(flags(db, extra))
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .unwrap_or_else(|| panic!("no {key} in {line:?}"))
                .to_string()
        };
        let endpoints = Endpoints {
            http: format!("http://{}", addr("http=")),
            grpc: format!("http://{}", addr("grpc=")),
        };
        ServiceProcess { endpoints, child }
    }

    /// The `/metrics` page as it reads now.
    pub fn metrics(&self) -> String {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        agent.get(&format!("{}/metrics", self.http)).call().unwrap().body_mut().read_to_string().unwrap()
    }

    pub fn terminate(mut self) -> std::process::ExitStatus {
        Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status
    }
}

impl std::ops::Deref for ServiceProcess {
    type Target = Endpoints;
    fn deref(&self) -> &Endpoints {
        &self.endpoints
    }
}

impl Drop for ServiceProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Endpoints {
    pub fn post(
        &self,
        path: &str,
        content_type: &str,
        encoding: Option<&str>,
        body: &[u8],
    ) -> (u16, Vec<u8>, Option<String>) {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut request = agent.post(&format!("{}{path}", self.http)).header("Content-Type", content_type);
        if let Some(e) = encoding {
            request = request.header("Content-Encoding", e);
        }
        let mut response = request.send(body).unwrap();
        let retry_after = response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
        let body = response.body_mut().with_config().limit(64 << 20).read_to_vec().unwrap();
        (response.status().as_u16(), body, retry_after)
    }

    /// The report once it reflects every write acknowledged before it was
    /// asked (asked again while its `derivation` section says it is not
    /// complete, as a client that needs a complete answer does), without
    /// that section, so it compares with the CLI's.
    pub fn report(&self, query: &str) -> Value {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let mut response = agent.get(&format!("{}/api/v1/report{query}", self.http)).call().unwrap();
            assert_eq!(response.status().as_u16(), 200);
            let mut report: Value =
                serde_json::from_slice(&response.body_mut().read_to_vec().unwrap()).unwrap();
            let derivation =
                report.as_object_mut().unwrap().remove("derivation").expect("a derivation section");
            if derivation["complete"] == true {
                return report;
            }
            assert!(std::time::Instant::now() < deadline, "derivation never caught up: {derivation}");
        }
    }
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(bytes)))
}

pub fn cli_report(db: &Path) -> Value {
    cli_report_with(db, &[])
}

pub fn cli_report_with(db: &Path, extra: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["report", "--format", "json", "--db", db.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    json_of(&out.stdout)
}

pub fn cli_ingest(db: &Path, file: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["ingest", "--db", db.to_str().unwrap(), file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// What a web page can send to a loopback port without a CORS preflight
/// (text/plain, a form type, or a body with no type) is refused with 415 and
/// stores nothing; JSON types with parameters are fine.
#[test]
fn record_bodies_must_say_they_are_json() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("ct.duckdb"), &[]);
    for (path, content_type) in [
        ("/v1/attempts", "text/plain;charset=UTF-8"),
        ("/v1/attempts", "application/x-www-form-urlencoded"),
        ("/v1/attempts", "multipart/form-data; boundary=x"),
        ("/v1/attempts", ""),
        ("/v1/litellm", "text/plain"),
    ] {
        let (status, body, _) = service.post(path, content_type, None, FIXTURE.as_bytes());
        assert_eq!(status, 415, "{path} {content_type}: {}", String::from_utf8_lossy(&body));
        assert!(String::from_utf8_lossy(&body).contains("application/x-ndjson"));
    }
    assert_eq!(service.report("")["attempts"]["total"], 0);
    let (status, _, _) =
        service.post("/v1/attempts", "Application/JSON; charset=utf-8", None, FIXTURE.as_bytes());
    assert_eq!(status, 200);
    assert_eq!(service.report("")["attempts"]["total"], FIXTURE.lines().count());
}

#[test]
fn http_attempts_share_validation_and_dedup_with_file_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("s.duckdb"), &[]);
    let body = format!("{FIXTURE}not json\n");
    let (status, answer, _) = service.post("/v1/attempts", "application/x-ndjson", None, body.as_bytes());
    assert_eq!(status, 200);
    let answer = json_of(&answer);
    assert_eq!(answer["accepted"], 15);
    assert_eq!(
        answer["rejected"],
        json!([{"line": 16, "reason": "not valid JSON: expected ident at line 1 column 2"}])
    );
    let (_, again, _) = service.post("/v1/attempts", "application/json", None, FIXTURE.as_bytes());
    assert_eq!(
        (json_of(&again)["accepted"].clone(), json_of(&again)["duplicates"].clone()),
        (json!(0), json!(15))
    );

    // A changed redelivery is a conflict, a corrected value a warning, and
    // 150 bad lines are all counted but only the first 100 listed.
    let first: Value = serde_json::from_str(FIXTURE.lines().next().unwrap()).unwrap();
    let mut changed = first.clone();
    changed["output_tokens"] = json!(123_456);
    let mut lenient = first.clone();
    lenient["attempt_id"] = json!("lenient-1");
    lenient["http_status"] = json!(0);
    let body = format!("{changed}\n{lenient}\n{}", "{}\n".repeat(150));
    let (status, answer, _) = service.post("/v1/attempts", "application/x-ndjson", None, body.as_bytes());
    assert_eq!(status, 200);
    let answer = json_of(&answer);
    assert_eq!(
        (&answer["accepted"], &answer["duplicates"], &answer["conflicts"], &answer["received"]),
        (&json!(1), &json!(0), &json!(1), &json!(152))
    );
    let derived_id = attempt_core::ingest::jsonl::decode_line(&first.to_string()).unwrap().attempt_id;
    assert_eq!(answer["conflict_ids"], json!([derived_id]));
    assert_eq!(answer["warnings"], 1);
    assert_eq!(answer["warning_list"][0]["line"], 2);
    assert_eq!(
        (answer["rejected_total"].as_u64(), answer["rejected"].as_array().map(Vec::len)),
        (Some(150), Some(100))
    );
    assert_eq!(answer["truncated"], true);

    // The same records through the CLI give the same report.
    std::fs::write(dir.path().join("f.jsonl"), format!("{FIXTURE}{lenient}\n")).unwrap();
    cli_ingest(&dir.path().join("cli.duckdb"), &dir.path().join("f.jsonl"));
    assert_eq!(service.report(""), cli_report(&dir.path().join("cli.duckdb")));
    assert_eq!(service.report("?workflow=nightly")["workflows"]["total"], 4);
    service.stop();
}

/// The records that once stopped every writer (a duration, a time to first
/// token and a retry-after no call has, which overflowed a cast in the
/// derivation): refused at decode by line and field, over HTTP, OTLP and
/// from a file alike; the rest of each batch is stored and derived, the
/// service stays ready, and every command still works on the database.
#[test]
fn records_no_call_has_are_refused_by_line_and_the_rest_is_derived() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("s.duckdb"), &[]);
    let poison = [
        r#"{"workflow_id":"p1","started_at":"2026-11-28T02:10:00Z","provider":"openai","model":"gpt-4o","status":"ok","duration_ms":1e300}"#,
        r#"{"workflow_id":"p2","started_at":"2026-11-28T02:10:00Z","provider":"openai","model":"gpt-4o","status":"ok","ttft_ms":1e300}"#,
        r#"{"workflow_id":"p3","started_at":"2026-11-28T02:10:00Z","provider":"openai","model":"gpt-4o","status":"error","http_status":429,"retry_after_ms":1e16,"attempt":1}"#,
        r#"{"workflow_id":"p3","started_at":"2026-11-28T02:10:01Z","provider":"openai","model":"gpt-4o","status":"ok","attempt":2}"#,
    ];
    let body = format!("{FIXTURE}{}\n", poison.join("\n"));
    let fixture_lines = FIXTURE.lines().count() as u64;
    let (status, answer, _) = service.post("/v1/attempts", "application/x-ndjson", None, body.as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    let answer = json_of(&answer);
    let rejected: Vec<(u64, String)> = answer["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["line"].as_u64().unwrap(), r["reason"].as_str().unwrap().to_string()))
        .collect();
    let fields: Vec<(u64, &str)> =
        rejected.iter().map(|(line, reason)| (*line, reason.split('`').nth(1).unwrap_or_default())).collect();
    let first = fixture_lines + 1;
    assert_eq!(fields, [(first, "duration_ms"), (first + 1, "ttft_ms"), (first + 2, "retry_after_ms")]);
    assert!(rejected.iter().all(|(_, reason)| reason.contains("30 days")), "{rejected:?}");
    assert_eq!(answer["accepted"].as_u64(), Some(fixture_lines + 1), "{answer}");

    // OTLP: a model span that lasted 31 days.
    let mut month = genai_span(
        "eee19b7ec3c1b177",
        json!([{"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
               {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}}]),
    );
    month["endTimeUnixNano"] = json!((1_795_831_200_u64 + 31 * 86_400).to_string() + "000000000");
    let good = genai_span(
        "eee19b7ec3c1b178",
        json!([{"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
               {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}}]),
    );
    let (status, answer, _) =
        service.post("/v1/traces", "application/json", None, &export_json(vec![month, good]));
    assert_eq!(status, 200);
    let answer = json_of(&answer);
    assert_eq!(answer["partialSuccess"]["rejectedSpans"], 1, "{answer}");
    assert!(answer["partialSuccess"]["errorMessage"].as_str().unwrap().contains("duration_ms"), "{answer}");

    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut ready = agent.get(&format!("{}/readyz", service.http)).call().unwrap();
    assert_eq!(ready.status().as_u16(), 200, "{}", ready.body_mut().read_to_string().unwrap());
    let report = service.report("");
    assert_eq!(
        report["attempts"]["total"].as_u64(),
        Some(fixture_lines + 2),
        "the fixture, p3's retry, one span"
    );
    service.stop();

    // The same body from a file: the same lines refused (exit 3), the rest
    // stored and derived, and every command still opens the database.
    let file = dir.path().join("poison.jsonl");
    std::fs::write(&file, &body).unwrap();
    let db = dir.path().join("f.duckdb");
    let bin = env!("CARGO_BIN_EXE_attempt-ledger");
    let out = Command::new(bin)
        .args(["ingest", "--db", db.to_str().unwrap(), file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (line, field) in [(first, "duration_ms"), (first + 1, "ttft_ms"), (first + 2, "retry_after_ms")] {
        assert!(stderr.contains(&format!("poison.jsonl:{line}: field `{field}`")), "{stderr}");
    }
    assert_eq!(cli_report(&db)["attempts"]["total"].as_u64(), Some(fixture_lines + 1));
    for args in [&["rebuild"][..], &["quarantine"], &["audit"]] {
        let out = Command::new(bin).args(args).args(["--db", db.to_str().unwrap()]).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

fn genai_span(span_id: &str, attrs: Value) -> Value {
    json!({"traceId": "5b8efff798038103d269b633813fc60c", "spanId": span_id, "name": "chat",
           "startTimeUnixNano": "1795831200000000000", "endTimeUnixNano": "1795831201000000000",
           "attributes": attrs})
}

fn export_json(spans: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})).unwrap()
}

#[test]
fn otlp_http_answers_partial_success_and_the_error_codes() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("s.duckdb"), &["--max-body-mib", "1"]);
    let good = genai_span(
        "eee19b7ec3c1b174",
        json!([
        {"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
        {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "1000"}}]),
    );
    let bad =
        genai_span("eee19b7ec3c1b175", json!([{"key": "gen_ai.system", "value": {"stringValue": "openai"}}]));
    let db = json!({"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b176", "name": "db",
                    "startTimeUnixNano": "1795831200000000000", "endTimeUnixNano": "1795831201000000000"});
    let (status, body, _) =
        service.post("/v1/traces", "application/json", None, &export_json(vec![good, bad, db]));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let answer = json_of(&body);
    assert_eq!(answer["partialSuccess"]["rejectedSpans"], 1, "{answer}");
    assert!(answer["partialSuccess"]["errorMessage"].as_str().unwrap().contains("no model"), "{answer}");
    assert_eq!(service.report("")["attempts"]["total"], 1);

    let (status, _, _) =
        service.post("/v1/traces", "application/x-protobuf", None, b"\xff\xff\xff not protobuf");
    assert_eq!(status, 400);
    let (status, _, _) = service.post("/v1/traces", "text/plain", None, b"{}");
    assert_eq!(status, 415);

    // 2 MiB of zeros gzip to ~2 KiB: refused after inflation, over the 1 MiB limit.
    let mut bomb = GzEncoder::new(Vec::new(), Compression::best());
    bomb.write_all(&vec![b' '; 2 << 20]).unwrap();
    let bomb = bomb.finish().unwrap();
    assert!(bomb.len() < 16 * 1024);
    let (status, _, _) = service.post("/v1/traces", "application/json", Some("gzip"), &bomb);
    assert_eq!(status, 413);
    let (status, _, _) = service.post("/v1/attempts", "application/json", Some("gzip"), &bomb);
    assert_eq!(status, 413);

    // A gzip body under the limit is accepted.
    let mut small = GzEncoder::new(Vec::new(), Compression::fast());
    small.write_all(FIXTURE.as_bytes()).unwrap();
    let (status, body, _) =
        service.post("/v1/attempts", "application/x-ndjson", Some("gzip"), &small.finish().unwrap());
    assert_eq!((status, json_of(&body)["accepted"].clone()), (200, json!(15)));
}

/// A small gzip body of a million bad lines: every one counted, 100
/// listed, the good line among them stored. (Each rejection once kept its
/// reason, then a JSON object each: 10M such lines grew the service by
/// 17.9 GB.)
#[test]
fn a_body_of_bad_lines_is_counted_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("bad.duckdb"), &[]);
    let body = format!("{}\n{}", "x\n".repeat(1_000_000), FIXTURE.lines().next().unwrap());
    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    gz.write_all(body.as_bytes()).unwrap();
    let (status, answer, _) =
        service.post("/v1/attempts", "application/x-ndjson", Some("gzip"), &gz.finish().unwrap());
    assert_eq!(status, 200);
    let answer = json_of(&answer);
    assert_eq!(answer["rejected_total"], 1_000_000);
    assert_eq!(answer["rejected"].as_array().unwrap().len(), 100);
    assert_eq!(answer["truncated"], true);
    assert_eq!(answer["accepted"], 1);
}

#[test]
fn a_saturated_writer_refuses_with_retry_after_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.duckdb");
    let service = Service::start(&db, &["--queue", "1"]);
    let body = |n: usize| {
        let mut out = String::new();
        for i in 0..20_000 {
            out.push_str(&format!(
                "{{\"workflow_id\":\"w{n}-{i}\",\"workflow\":\"batch-{n}\",\"started_at\":1795831200000,\"provider\":\"openai\",\"model\":\"gpt-4o-mini\",\"status\":\"ok\"}}\n"
            ));
        }
        out
    };
    let results: Vec<(usize, u16, Option<String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..12)
            .map(|n| {
                let service = &service;
                let text = body(n);
                scope.spawn(move || {
                    let (status, _, retry) =
                        service.post("/v1/attempts", "application/x-ndjson", None, text.as_bytes());
                    (n, status, retry)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let refused: Vec<_> = results.iter().filter(|r| r.1 == 503).collect();
    let accepted: Vec<_> = results.iter().filter(|r| r.1 == 200).collect();
    assert!(!refused.is_empty(), "twelve concurrent 20k-record requests against a queue of 1: {results:?}");
    assert!(refused.iter().all(|r| r.2.as_deref() == Some("1")), "503 carries Retry-After");
    assert_eq!(accepted.len() + refused.len(), 12);
    service.stop();
    let per_batch = attempts_by_workflow_name(&db);
    for (n, _, _) in &accepted {
        assert_eq!(per_batch.get(&format!("batch-{n}")), Some(&20_000), "batch {n} acknowledged");
    }
    for (n, _, _) in &refused {
        assert_eq!(per_batch.get(&format!("batch-{n}")), None, "batch {n} refused");
    }
}

#[test]
fn acknowledged_batches_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.duckdb");
    let service = ServiceProcess::start(&db, &[]);
    let mut acknowledged = Vec::new();
    // Killed while the stream runs: after some batches were acknowledged
    // (however slow this machine is), in the middle of later ones.
    let acked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let killer = {
        let pid = service.child.id();
        let acked = acked.clone();
        std::thread::spawn(move || {
            while acked.load(std::sync::atomic::Ordering::Relaxed) < 5 {
                std::thread::sleep(Duration::from_millis(10));
            }
            std::thread::sleep(Duration::from_millis(150));
            Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
        })
    };
    for n in 0..10_000 {
        let body: String = (0..200)
            .map(|i| format!("{{\"workflow_id\":\"w{n}-{i}\",\"workflow\":\"b{n}\",\"started_at\":1795831200000,\"provider\":\"openai\",\"model\":\"gpt-4o-mini\",\"status\":\"ok\"}}\n"))
            .collect();
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let request = agent
            .post(&format!("{}/v1/attempts", service.http))
            .header("Content-Type", "application/x-ndjson");
        match request.send(body.as_bytes()) {
            Ok(r) if r.status().as_u16() == 200 => {
                acknowledged.push(n);
                acked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            _ => break,
        }
    }
    // The stream ended (killed, or the service failed on its own): the
    // killer must not wait for acknowledgements that will not come.
    acked.store(usize::MAX, std::sync::atomic::Ordering::Relaxed);
    killer.join().unwrap();
    drop(service);
    assert!(acknowledged.len() > 3, "the stream ran before the kill: {}", acknowledged.len());
    // Restart the service on the same file, then read what it holds.
    let restarted = ServiceProcess::start(&db, &[]);
    let total = restarted.report("")["attempts"]["total"].as_u64().unwrap();
    assert!(
        total >= acknowledged.len() as u64 * 200,
        "{total} stored for {} acknowledged batches",
        acknowledged.len()
    );
    assert!(restarted.terminate().success());
    let per_batch = attempts_by_workflow_name(&db);
    for n in &acknowledged {
        assert_eq!(per_batch.get(&format!("b{n}")), Some(&200), "acknowledged batch {n}, every record once");
    }
}

/// Attempts per `workflow` name, from one report over the whole database.
fn attempts_by_workflow_name(db: &Path) -> std::collections::HashMap<String, i64> {
    let report = report_of(&Store::open(db).unwrap(), &ReportFilter::default());
    report.by_workflow.into_iter().filter_map(|w| Some((w.workflow?, w.attempts))).collect()
}

fn otel_sdk_round_trip(protocol: &str) {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("s.duckdb"), &[]);
    let expected: PathBuf = dir.path().join("expected.jsonl");
    let endpoint = if protocol == "grpc" { service.grpc.clone() } else { service.http.clone() };
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/otel_client.py");
    let out =
        crate::python().args([script, protocol, &endpoint, expected.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let via_otlp = service.report("");
    cli_ingest(&dir.path().join("jsonl.duckdb"), &expected);
    assert_eq!(via_otlp, cli_report(&dir.path().join("jsonl.duckdb")));
    assert_eq!(via_otlp["attempts"]["total"], 5, "{via_otlp}");
    assert_eq!(via_otlp["workflows"]["retry_recovery"], 1, "the hidden SDK retry");
    assert_eq!(via_otlp["workflows"]["fallback_recovery"], 1);
    let sdk =
        via_otlp["amplification"].as_array().unwrap().iter().find(|l| l["layer"] == "sdk").unwrap().clone();
    assert_eq!(sdk["attempts"], 2);
}

#[test]
fn the_opentelemetry_python_sdk_over_otlp_grpc() {
    otel_sdk_round_trip("grpc");
}

#[test]
fn the_opentelemetry_python_sdk_over_otlp_http() {
    otel_sdk_round_trip("http");
}

#[test]
fn a_rust_grpc_client_with_gzip() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("s.duckdb"), &[]);
    let request: ExportTraceServiceRequest = serde_json::from_slice(&export_json(vec![genai_span(
        "eee19b7ec3c1b174",
        json!([{"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
               {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}}]),
    )]))
    .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let answer = runtime.block_on(async {
        let mut client = TraceServiceClient::connect(service.grpc.clone())
            .await
            .unwrap()
            .send_compressed(tonic::codec::CompressionEncoding::Gzip);
        client.export(request).await.unwrap().into_inner()
    });
    assert_eq!(answer.partial_success, None);
    assert_eq!(service.report("")["attempts"]["total"], 1);
}

#[test]
fn a_saturated_writer_answers_grpc_unavailable_with_retry_info() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    use tonic_types::StatusExt;
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("s.duckdb"), &["--queue", "1"]);
    let request = |n: usize| -> ExportTraceServiceRequest {
        let spans: Vec<Value> = (0..20_000)
            .map(|i| {
                // 20 traces of 1,000 spans: under the per-trace limit.
                // Ids are never all zeros (OTLP's "no id").
                json!({"traceId": format!("{:016x}{:016x}", n + 1, i / 1000), "spanId": format!("{:016x}", i + 1), "name": "chat",
                       "startTimeUnixNano": "1795831200000000000", "endTimeUnixNano": "1795831201000000000",
                       "attributes": [{"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
                                      {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}}]})
            })
            .collect();
        serde_json::from_slice(&export_json(spans)).unwrap()
    };
    let requests: Vec<_> = (0..12).map(request).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let outcomes = runtime.block_on(async {
        let client = TraceServiceClient::connect(service.grpc.clone()).await.unwrap();
        let calls = requests.into_iter().map(|r| {
            let mut client = client.clone();
            tokio::spawn(async move { client.export(r).await.map(|_| ()) })
        });
        let mut outcomes = Vec::new();
        for call in calls.collect::<Vec<_>>() {
            outcomes.push(call.await.unwrap());
        }
        outcomes
    });
    let refused: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert!(!refused.is_empty(), "twelve concurrent 20k-span exports against a queue of 1");
    for status in &refused {
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert_eq!(status.get_details_retry_info().and_then(|r| r.retry_delay), Some(Duration::from_secs(1)));
    }
    let accepted = outcomes.iter().filter(|o| o.is_ok()).count() as u64;
    assert_eq!(service.report("")["attempts"]["total"].as_u64(), Some(accepted * 20_000));
}

/// Clients that stall: one that never finishes its headers is cut off after
/// `--header-timeout`, one that never finishes its body gets 408 after
/// `--body-timeout`, and the service keeps answering everyone else.
#[test]
fn stalled_headers_and_bodies_are_cut_off() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let service =
        Service::start(&dir.path().join("slow.duckdb"), &["--header-timeout", "1s", "--body-timeout", "1s"]);
    let addr = service.http.trim_start_matches("http://").to_string();
    let answer_of = |request: &[u8]| {
        let mut stream = std::net::TcpStream::connect(&addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        stream.write_all(request).unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        String::from_utf8_lossy(&answer).into_owned()
    };
    // Half a request line, then nothing: the server ends the connection
    // (hyper answers 408 or just closes); either way it does not wait.
    let cut = answer_of(b"POST /v1/attempts HTTP/1.1\r\nHost: localhost\r\n");
    assert!(cut.is_empty() || cut.starts_with("HTTP/1.1 408"), "{cut}");
    // Headers promise 1,000 bytes, 10 arrive.
    let slow_body = answer_of(
        b"POST /v1/attempts HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-ndjson\r\nContent-Length: 1000\r\n\r\n{\"workflo",
    );
    assert!(slow_body.starts_with("HTTP/1.1 408"), "{slow_body}");
    assert_eq!(service.report("")["attempts"]["total"], 0);
    let (status, _, _) = service.post("/v1/attempts", "application/x-ndjson", None, FIXTURE.as_bytes());
    assert_eq!(status, 200);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut ready = agent.get(&format!("{}/readyz", service.http)).call().unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    let ready: Value = serde_json::from_slice(&ready.body_mut().read_to_vec().unwrap()).unwrap();
    assert_eq!(
        (&ready["ready"], &ready["derivation"]["quarantined_workflows"]),
        (&json!(true), &json!(0)),
        "{ready}"
    );
}

/// SIGTERM with hundreds of connections that never send a request, and a
/// few stuck mid-body: the service stops within its grace period (5 s)
/// plus the writer's last commit, rather than waiting on them for ever.
#[test]
fn shutdown_does_not_wait_for_stalled_clients() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("stop.duckdb");
    let mut service = ServiceProcess::start(&db, &["--body-timeout", "10m"]);
    let (status, _, _) = service.post("/v1/attempts", "application/x-ndjson", None, FIXTURE.as_bytes());
    assert_eq!(status, 200);
    let addr = service.http.trim_start_matches("http://").to_string();
    let mut held: Vec<std::net::TcpStream> =
        (0..300).map(|_| std::net::TcpStream::connect(&addr).unwrap()).collect();
    for stream in held.iter_mut().take(5) {
        stream
            .write_all(b"POST /v1/attempts HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n[")
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let began = std::time::Instant::now();
    Command::new("kill").args(["-TERM", &service.child.id().to_string()]).status().unwrap();
    let status = loop {
        if let Some(status) = service.child.try_wait().unwrap() {
            break status;
        }
        assert!(began.elapsed() < Duration::from_secs(30), "still running 30 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status:?}");
    drop(held);
    // What was acknowledged before is there.
    let store = Store::open(&db).unwrap();
    assert_eq!(store.attempt_count().unwrap(), FIXTURE.lines().count() as u64);
}

const TOKENS: &str = "# scopes\ningest ingest-token-0123456789\nread read-token-0123456789\n";

/// With tokens, every route but the probes needs one of the right scope:
/// 401 (with `WWW-Authenticate: Bearer`) without, 403 with the other
/// scope; OTLP/gRPC the same through `authorization` metadata.
#[test]
fn tokens_gate_every_route_but_the_probes() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, TOKENS).unwrap();
    let service = Service::start(&dir.path().join("auth.duckdb"), &["--tokens", tokens.to_str().unwrap()]);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let post = |token: Option<&str>| {
        let mut request = agent
            .post(&format!("{}/v1/attempts", service.http))
            .header("Content-Type", "application/x-ndjson");
        if let Some(t) = token {
            request = request.header("Authorization", &format!("Bearer {t}"));
        }
        let response = request.send(FIXTURE.as_bytes()).unwrap();
        let challenge = response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_string());
        (response.status().as_u16(), challenge)
    };
    let get = |path: &str, token: Option<&str>| {
        let mut request = agent.get(&format!("{}{path}", service.http));
        if let Some(t) = token {
            request = request.header("Authorization", &format!("Bearer {t}"));
        }
        request.call().unwrap().status().as_u16()
    };
    assert_eq!(post(None), (401, Some("Bearer".to_string())));
    assert_eq!(post(Some("read-token-0123456789")).0, 403);
    assert_eq!(post(Some("not-a-token-0123456789")).0, 401);
    assert_eq!(post(Some("ingest-token-0123456789")).0, 200);
    for path in ["/api/v1/report", "/api/v1/alerts", "/metrics"] {
        assert_eq!(get(path, None), 401, "{path}");
        assert_eq!(get(path, Some("ingest-token-0123456789")), 403, "{path}");
        assert_eq!(get(path, Some("read-token-0123456789")), 200, "{path}");
    }
    assert_eq!((get("/healthz", None), get("/readyz", None)), (200, 200));

    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    let export: ExportTraceServiceRequest = serde_json::from_slice(&export_json(vec![])).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let codes = runtime.block_on(async {
        let mut client = TraceServiceClient::connect(service.grpc.clone()).await.unwrap();
        let mut codes = Vec::new();
        for token in [None, Some("read-token-0123456789"), Some("ingest-token-0123456789")] {
            let mut request = tonic::Request::new(export.clone());
            if let Some(t) = token {
                request.metadata_mut().insert("authorization", format!("Bearer {t}").parse().unwrap());
            }
            codes.push(client.export(request).await.err().map(|s| s.code()));
        }
        codes
    });
    assert_eq!(codes, vec![Some(tonic::Code::Unauthenticated), Some(tonic::Code::PermissionDenied), None]);
}

/// With tokens on, a browser trades a read token for a session cookie at
/// `/login` (HttpOnly, SameSite=Strict) and reads with it; the cookie never
/// writes, an ingest token cannot log in, and `/logout` ends the session.
#[test]
fn a_read_token_opens_a_browser_session_that_only_reads() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, TOKENS).unwrap();
    let service = Service::start(&dir.path().join("session.duckdb"), &["--tokens", tokens.to_str().unwrap()]);
    let agent: ureq::Agent =
        ureq::Agent::config_builder().http_status_as_error(false).max_redirects(0).build().into();
    let login = |token: &str| {
        let response = agent
            .post(&format!("{}/login", service.http))
            .send_form([("token", token), ("next", "/api/v1/report?since=-1h")])
            .unwrap();
        let header = |name: &str| response.headers().get(name).map(|v| v.to_str().unwrap().to_string());
        (response.status().as_u16(), header("set-cookie"), header("location"))
    };
    let get = |path: &str, cookie: Option<&str>| {
        let mut request = agent.get(&format!("{}{path}", service.http));
        if let Some(c) = cookie {
            request = request.header("Cookie", c);
        }
        request.call().unwrap().status().as_u16()
    };

    let page = agent
        .get(&format!("{}/login?next=/x", service.http))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(
        page.contains("<form method=\"post\" action=\"/login\">") && page.contains("value=\"/x\""),
        "{page}"
    );
    assert_eq!(login("ingest-token-0123456789").0, 403);
    assert_eq!(login("not-a-token-0123456789").0, 401);
    let (status, set_cookie, location) = login("read-token-0123456789");
    assert_eq!((status, location.as_deref()), (303, Some("/api/v1/report?since=-1h")));
    let set_cookie = set_cookie.unwrap();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(part), "{set_cookie}");
    }
    let cookie = set_cookie.split(';').next().unwrap().to_string();

    assert_eq!(get("/api/v1/report", None), 401);
    for path in ["/api/v1/report", "/api/v1/alerts", "/metrics"] {
        assert_eq!(get(path, Some(&cookie)), 200, "{path}");
    }
    let write = agent
        .post(&format!("{}/v1/attempts", service.http))
        .header("Content-Type", "application/x-ndjson")
        .header("Cookie", &cookie)
        .send(FIXTURE.as_bytes())
        .unwrap();
    assert_eq!(write.status().as_u16(), 401, "a session never writes");

    let out = agent.post(&format!("{}/logout", service.http)).header("Cookie", &cookie).send_empty().unwrap();
    assert_eq!(out.status().as_u16(), 303);
    assert!(out.headers().get("set-cookie").unwrap().to_str().unwrap().contains("Max-Age=0"));
    assert_eq!(get("/api/v1/report", Some(&cookie)), 401, "the session ended");
}

/// Without tokens the service stays on loopback, and answers only requests
/// addressed to this machine (a page that rebinds its own name to 127.0.0.1
/// still sends that name as `Host`).
#[test]
fn open_access_stays_on_loopback_and_local_names() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["serve", "--db", dir.path().join("o.duckdb").to_str().unwrap(), "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to listen beyond loopback"));

    let service = Service::start(&dir.path().join("o.duckdb"), &[]);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let status = |host: &str| {
        agent
            .get(&format!("{}/api/v1/report", service.http))
            .header("Host", host)
            .call()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(status("evil.example:4318"), 403);
    assert_eq!(status("localhost:4318"), 200);
}

/// `--queue-mib`: a body that arrives slowly holds the bytes it has sent;
/// a second body that does not fit beside them gets 503 with Retry-After
/// (nothing of it stored), and fits once the first is answered.
#[test]
fn write_bodies_share_a_byte_budget() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let service =
        Service::start(&dir.path().join("budget.duckdb"), &["--queue-mib", "1", "--max-body-mib", "1"]);
    // A few records padded with blank lines: the bytes of the body count
    // while it arrives, its few records little once decoded.
    let records = |name: &str, bytes: usize| {
        let mut out = String::new();
        for i in 0..10 {
            out.push_str(&format!(
                "{{\"workflow_id\":\"{name}-{i}\",\"workflow\":\"{name}\",\"started_at\":1795831200000,\"provider\":\"openai\",\"model\":\"gpt-4o-mini\",\"status\":\"ok\"}}\n"
            ));
        }
        out.push_str(&" \n".repeat(bytes.saturating_sub(out.len()) / 2));
        (out, 10)
    };
    let (slow_body, slow_count) = records("slow", 900 << 10);
    let addr = service.http.trim_start_matches("http://").to_string();
    let mut slow = std::net::TcpStream::connect(&addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        slow,
        "POST /v1/attempts HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        slow_body.len()
    )
    .unwrap();
    // All but the last byte: the service holds ~900 KiB of its 1 MiB.
    let (sent, last) = slow_body.as_bytes().split_at(slow_body.len() - 1);
    slow.write_all(sent).unwrap();
    std::thread::sleep(Duration::from_millis(500));

    let (fast_body, fast_count) = records("fast", 300 << 10);
    let (status, _, retry_after) =
        service.post("/v1/attempts", "application/x-ndjson", None, fast_body.as_bytes());
    assert_eq!((status, retry_after.as_deref()), (503, Some("1")), "300 KiB beside 900 KiB held of 1 MiB");

    slow.write_all(last).unwrap();
    let mut answer = String::new();
    slow.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (status, _, _) = service.post("/v1/attempts", "application/x-ndjson", None, fast_body.as_bytes());
    assert_eq!(status, 200, "the budget is free again");
    assert_eq!(service.report("")["attempts"]["total"], (slow_count + fast_count) as u64);
}

/// What a request holds once decoded counts in the budget before it is
/// decoded: a 1 MiB body of small records needs several times its bytes,
/// more than a 2 MiB budget, so it is refused as too large (413, which a
/// retry cannot fix) and nothing of it is stored; a body of the same
/// records that fits is stored whole.
#[test]
fn a_body_is_charged_for_what_it_decodes_to() {
    let dir = tempfile::tempdir().unwrap();
    let service =
        Service::start(&dir.path().join("decoded.duckdb"), &["--queue-mib", "2", "--max-body-mib", "1"]);
    let records = |count: usize| {
        (0..count)
            .map(|i| format!("{{\"workflow_id\":\"w-{i}\",\"started_at\":1795831200000,\"provider\":\"openai\",\"model\":\"m\",\"status\":\"ok\"}}\n"))
            .collect::<String>()
    };
    let big = records(9_000);
    assert!(big.len() < 1 << 20, "{} bytes: under the body limit", big.len());
    let (status, answer, _) = service.post("/v1/attempts", "application/x-ndjson", None, big.as_bytes());
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&answer));
    assert!(
        String::from_utf8_lossy(&answer).contains("once decoded"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let (status, _, _) =
        service.post("/v1/attempts", "application/x-ndjson", None, records(1_000).as_bytes());
    assert_eq!(status, 200);
    assert_eq!(service.report("")["attempts"]["total"], 1_000);
}

/// `GET /api/v1/workflows/{id}`: a stored workflow's attempts in order with
/// the outcome the report counts; an unknown id is a 404 that says so.
#[test]
fn a_workflow_is_served_attempt_by_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("wf.duckdb"), &[]);
    let (status, _, _) = service.post("/v1/attempts", "application/x-ndjson", None, FIXTURE.as_bytes());
    assert_eq!(status, 200);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent.get(&format!("{}/api/v1/workflows/wf-fallback", service.http)).call().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let page: Value = serde_json::from_slice(&response.body_mut().read_to_vec().unwrap()).unwrap();
    assert_eq!(page["outcome"], "fallback_recovery");
    assert_eq!(page["fallback_reason"], "rate_limit");
    let attempts = page["attempts"].as_array().unwrap();
    let summary: Vec<(i64, &str, &str, bool)> = attempts
        .iter()
        .map(|a| {
            (
                a["seq"].as_i64().unwrap(),
                a["provider"].as_str().unwrap(),
                a["route"].as_str().unwrap(),
                a["delivered"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(summary, vec![(1, "openai", "primary", false), (2, "anthropic", "fallback", true)]);
    assert_eq!(attempts[0]["retry_after_ms"], 5000.0);
    let mut missing = agent.get(&format!("{}/api/v1/workflows/wf-nobody", service.http)).call().unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    assert!(missing.body_mut().read_to_string().unwrap().contains("no workflow with id `wf-nobody`"));
}

/// `GET /api/v1/timeseries`: the fixture's minutes as buckets that add up to
/// the report over the same window; a range of too many buckets is a 400.
#[test]
fn timeseries_are_served_in_whole_minute_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("ts.duckdb"), &[]);
    let (status, _, _) = service.post("/v1/attempts", "application/x-ndjson", None, FIXTURE.as_bytes());
    assert_eq!(status, 200);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let window = "since=2026-11-28T02:00:00Z&until=2026-11-28T02:05:00Z";
    let mut response = agent
        .get(&format!("{}/api/v1/timeseries?{window}&step=1m&workflow=chat", service.http))
        .call()
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let series: Value = serde_json::from_slice(&response.body_mut().read_to_vec().unwrap()).unwrap();
    let buckets = series["buckets"].as_array().unwrap();
    assert_eq!((buckets.len(), series["step_seconds"].as_i64()), (5, Some(60)));
    assert_eq!(buckets[0]["start"], "2026-11-28T02:00:00Z");
    let report = service.report(&format!("?{window}&workflow=chat"));
    let attempts: i64 = buckets.iter().map(|b| b["attempts"].as_i64().unwrap()).sum();
    assert_eq!(Some(attempts), report["attempts"]["total"].as_i64());
    let fallback: i64 = buckets.iter().map(|b| b["workflows"]["fallback_recovery"].as_i64().unwrap()).sum();
    assert_eq!(Some(fallback), report["workflows"]["fallback_recovery"].as_i64());
    let too_many = agent
        .get(&format!(
            "{}/api/v1/timeseries?since=2020-01-01T00:00:00Z&until=2026-01-01T00:00:00Z&step=1m",
            service.http
        ))
        .call()
        .unwrap();
    assert_eq!(too_many.status().as_u16(), 400);
}

/// OTLP/HTTP and OTLP/gRPC are one export path: the same request of 1,500
/// model spans without a model (more than the 1,000 reasons a request
/// keeps) and one good span gets the same partial success from both, and
/// both count every rejected span in `/metrics`.
#[test]
fn otlp_over_http_and_grpc_answer_and_count_the_same() {
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTraceServiceRequest, ExportTraceServiceResponse,
    };
    use prost::Message;
    let mut spans: Vec<Value> = (0..1_500)
        .map(|i| {
            genai_span(
                &format!("{:016x}", i + 1),
                json!([{"key": "gen_ai.system", "value": {"stringValue": "openai"}}]),
            )
        })
        .collect();
    spans.push(genai_span(
        "eee19b7ec3c1b174",
        json!([{"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
               {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}}]),
    ));
    let request: ExportTraceServiceRequest = serde_json::from_slice(&export_json(spans)).unwrap();
    let rejected_metric = |service: &ServiceProcess| -> String {
        let text = service.metrics();
        text.lines()
            .find(|l| l.starts_with("attempt_ledger_ingest_records_total{result=\"rejected\"}"))
            .unwrap_or("")
            .to_string()
    };

    let dir = tempfile::tempdir().unwrap();
    let over_http = ServiceProcess::start(&dir.path().join("http.duckdb"), &[]);
    let (status, body, _) =
        over_http.post("/v1/traces", "application/x-protobuf", None, &request.encode_to_vec());
    assert_eq!(status, 200);
    let by_http = ExportTraceServiceResponse::decode(body.as_slice()).unwrap();

    let over_grpc = ServiceProcess::start(&dir.path().join("grpc.duckdb"), &[]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let by_grpc = runtime.block_on(async {
        let mut client = TraceServiceClient::connect(over_grpc.grpc.clone()).await.unwrap();
        client.export(request.clone()).await.unwrap().into_inner()
    });

    assert_eq!(by_http, by_grpc);
    assert_eq!(by_http.partial_success.as_ref().map(|p| p.rejected_spans), Some(1_500));
    assert_eq!(rejected_metric(&over_http), rejected_metric(&over_grpc));
    let counted: f64 = rejected_metric(&over_http).rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(counted, 1_500.0);
    assert_eq!(over_http.report("")["attempts"]["total"], over_grpc.report("")["attempts"]["total"]);
}

/// Every request is a span in the log: its method, its matched route (the
/// pattern, not the path, which holds ids), status, the records it decoded
/// and how long it took; at debug, and at warn once slow.
#[test]
fn every_request_is_a_span_in_the_log_with_its_route_status_and_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let service = ServiceProcess::start_logging(
        &dir.path().join("s.duckdb"),
        "attempt_ledger::service::traced=debug",
        &log,
    );
    let lines = [
        r#"{"workflow_id":"w1","started_at":"2026-11-28T02:00:00Z","provider":"openai","model":"gpt-4o","status":"ok"}"#,
        r#"{"workflow_id":"w2","started_at":"2026-11-28T02:00:01Z","provider":"openai","model":"gpt-4o","status":"ok"}"#,
        r#"{"workflow_id":"w3","started_at":"2026-11-28T02:00:02Z","provider":"openai"}"#,
    ];
    let (status, _, _) =
        service.post("/v1/attempts", "application/x-ndjson", None, lines.join("\n").as_bytes());
    assert_eq!(status, 200);
    let (status, _, _) = service.post("/v1/traces", "application/json", None, &export_json(vec![]));
    assert_eq!(status, 200);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let missing = agent.get(&format!("{}/api/v1/workflows/wf-secret-id", service.http)).call().unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    service.terminate();
    let text = std::fs::read_to_string(&log).unwrap();
    let line = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in the log:\n{text}"))
    };
    let posted = line("route=/v1/attempts");
    for field in ["method=POST", "status=200", "records=3", "duration_ms=", "request answered"] {
        assert!(posted.contains(field), "{field} in {posted}");
    }
    assert!(line("route=/v1/traces").contains("records=0"));
    let asked = line("route=/api/v1/workflows/{workflow_id}");
    assert!(asked.contains("status=404") && !asked.contains("wf-secret-id"), "{asked}");
}
