//! Rate-limit headroom from real emitters that capture the provider's
//! response headers (OpenTelemetry JS's undici instrumentation under the
//! Vercel AI SDK, OpenTelemetry Python's httpx instrumentation under the
//! openai SDK, the LiteLLM Router's payloads), in front of the loopback
//! provider with a request limit that runs out: every response states what
//! remains, and once nothing does, every request is a 429. The report, the
//! `/metrics` gauges and a `ratelimit_headroom` alert must tell it from the
//! provider's own log: which limit each 429 hit, and the warning before it.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::gateways::{PYTHON_DIR, report_with, run_python_in};
use crate::service::{ServiceProcess, cli_ingest, cli_report};

/// Requests the provider allows; each states what remains of it.
const LIMIT: u64 = 12;

/// Fourteen calls one after the other: twelve use the limit up, the last
/// two meet 429s on every try.
fn plan() -> Value {
    let names: serde_json::Map<String, Value> = (1..=14).map(|i| (format!("w{i:02}"), json!([]))).collect();
    Value::Object(names)
}

/// The provider's own log: (status, unix seconds) of every request, in order.
fn provider_log(log: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|line| {
            let entry: Value = serde_json::from_str(line).unwrap();
            (entry["status"].as_u64().unwrap(), entry["at"].as_f64().unwrap())
        })
        .collect()
}

fn rows_of<'a>(report: &'a Value, section: &str, kind: &str) -> Vec<&'a Value> {
    report[section].as_array().unwrap().iter().filter(|r| r["kind"] == kind).collect()
}

fn earliest<'a>(rows: &[&'a Value], key: &str) -> &'a str {
    rows.iter().filter_map(|r| r[key].as_str()).min().unwrap_or_else(|| panic!("no {key}: {rows:#?}"))
}

/// What the report must say of the limit, from the provider's log alone.
fn check_report(report: &Value, log: &[(u64, f64)]) {
    let sent = log.len() as u64;
    let limited = log.iter().filter(|(status, _)| *status == 429).count() as u64;
    assert_eq!(sent - limited, LIMIT, "the limit's requests were answered: {log:?}");
    assert!(limited > 0);
    assert_eq!(report["attempts"]["total"], sent, "{report:#}");

    // Every 429 said it had no requests left: the requests limit, none unknown.
    let kinds: Vec<&str> =
        report["rate_limits"].as_array().unwrap().iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert!(kinds.iter().all(|k| *k == "requests"), "{:#}", report["rate_limits"]);
    let counted: u64 =
        rows_of(report, "rate_limits", "requests").iter().map(|r| r["attempts"].as_u64().unwrap()).sum();
    assert_eq!(counted, limited, "{:#}", report["rate_limits"]);
    let classes: u64 = report["error_classes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["error_class"] == "rate_limit")
        .map(|e| {
            assert_eq!(e["limit_kind"], "requests", "{e}");
            e["attempts"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(classes, limited);

    let requests = rows_of(report, "headroom", "requests");
    assert!(!requests.is_empty(), "{:#}", report["headroom"]);
    for row in &requests {
        assert_eq!(row["limit"], LIMIT, "{row}");
        assert!(row["remaining"].as_u64().is_some_and(|left| left <= LIMIT), "{row}");
    }
    // The latest statement of the route that took the last request: nothing
    // left (a gateway's other routes said what they last heard).
    assert!(requests.iter().any(|r| r["remaining"] == 0), "{:#}", report["headroom"]);
    if requests.len() == 1 {
        assert_eq!(requests[0]["remaining"], 0);
    }
    let lowest = requests.iter().map(|r| r["min_ratio"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
    assert_eq!(lowest, 0.0);
    // Requests 11 (1 of 12 left) onwards stated under 10 %.
    let below: u64 = requests.iter().map(|r| r["attempts_below_10pct"].as_u64().unwrap()).sum();
    assert_eq!(below, sent - 10, "{:#}", report["headroom"]);
    let hit: u64 = requests.iter().map(|r| r["rate_limited"].as_u64().unwrap()).sum();
    assert_eq!(hit, limited);
    let (warned, first_429) =
        (earliest(&requests, "first_below_10pct_at"), earliest(&requests, "first_429_at"));
    assert!(warned < first_429, "the headers warned before the first 429: {warned} then {first_429}");

    // Tokens: 150 a request of twice the requests' worth, never at 0 here.
    let tokens = rows_of(report, "headroom", "tokens");
    let lowest = tokens.iter().map(|r| r["min_ratio"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
    let expected = (2 * LIMIT).saturating_sub(sent) as f64 / (2 * LIMIT) as f64;
    assert!((lowest - expected).abs() < 1e-9, "{lowest} against {expected}: {:#}", report["headroom"]);
    assert!(tokens.iter().all(|r| r["rate_limited"] == 0));
}

/// Replays a `ratelimit_headroom` rule over the stored attempts up to just
/// before the first 429: it must already be firing for the requests limit.
fn check_alert_fires_before_the_first_429(db: &Path, report: &Value) {
    let requests = rows_of(report, "headroom", "requests");
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&chrono::Utc);
    let warned = parse(earliest(&requests, "first_below_10pct_at"));
    let until = parse(earliest(&requests, "first_429_at")) - chrono::Duration::milliseconds(1);
    assert!(until > warned);
    let rules = db.with_extension("rules.toml");
    std::fs::write(&rules, "[[rule]]\nname = \"headroom\"\nkind = \"ratelimit_headroom\"\nwindow = \"5m\"\n")
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["alerts", "--check", "--format", "json", "--db", db.to_str().unwrap()])
        .args(["--rules", rules.to_str().unwrap()])
        // One evaluation, at `until` (the rule's window reaches back past the
        // warning).
        .args([
            "--since",
            &(until - chrono::Duration::milliseconds(100)).to_rfc3339(),
            "--until",
            &until.to_rfc3339(),
        ])
        .args(["--step", "100ms"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let check: Value = serde_json::from_slice(&out.stdout).unwrap();
    let firing: Vec<&Value> = check["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["state"] == "firing" && e["labels"]["kind"] == "requests")
        .collect();
    // One alert per served route whose headers had fallen under 10 % by then.
    let warned_routes = requests
        .iter()
        .filter(|r| r["first_below_10pct_at"].as_str().is_some_and(|t| parse(t) <= until))
        .count();
    assert!(warned_routes >= 1);
    assert_eq!(firing.len(), warned_routes, "{check:#}");
    assert!(firing.iter().all(|e| e["value"].as_f64().unwrap() < 0.1), "{check:#}");
}

/// Everything a traced emitter's run must show, from the provider's log:
/// the report, the `/metrics` gauges, and the alert (over the database the
/// service leaves).
fn check_traced(service: ServiceProcess, db: &Path, log: &Path) {
    let log = provider_log(log);
    let report = report_with(&service, log.len() as u64);
    check_report(&report, &log);
    check_metrics(&service, &report);
    service.terminate();
    check_alert_fires_before_the_first_429(db, &report);
}

/// The `/metrics` gauges once they count the report's attempts.
fn check_metrics(service: &ServiceProcess, report: &Value) {
    let metrics = crate::ai_sdk::metrics_counting(service, report);
    let gauge = |name: &str, kind: &str| -> f64 {
        let prefix = format!(
            "attempt_ledger_{name}{{served_provider=\"openai\",served_model=\"gpt-4o-mini\",kind=\"{kind}\"}} "
        );
        let line =
            metrics.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{prefix}\n{metrics}"));
        line[prefix.len()..].parse().unwrap()
    };
    assert_eq!(gauge("ratelimit_headroom_ratio", "requests"), 0.0);
    assert_eq!(gauge("ratelimit_limit", "requests"), LIMIT as f64);
    assert_eq!(gauge("ratelimit_remaining", "requests"), 0.0);
    assert!(gauge("ratelimit_headroom_ratio", "tokens") > 0.0);
}

#[test]
fn the_ai_sdk_with_undici_header_capture_warns_before_the_first_429() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.duckdb");
    let service = ServiceProcess::start(&db, &["--metrics-refresh", "100ms"]);
    let log = dir.path().join("provider.jsonl");
    let mut provider = crate::python()
        .current_dir(PYTHON_DIR)
        .args(["fake_provider.py", &plan().to_string(), log.to_str().unwrap()])
        .env("FAKE_PROVIDER_REQUEST_LIMIT", LIMIT.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(provider.stdout.take().unwrap()), &mut url)
        .unwrap();
    let out = crate::ai_sdk::node()
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/js"))
        .args(["ai_sdk.mjs", "genai", "generateText", &format!("{}/v1/traces", service.http), url.trim()])
        .arg(plan().to_string())
        .env("CAPTURE_RATELIMIT_HEADERS", "1")
        .output()
        .unwrap();
    drop(provider.stdin.take());
    provider.wait().unwrap();
    assert!(out.status.success(), "ai_sdk.mjs: {}", String::from_utf8_lossy(&out.stderr));
    check_traced(service, &db, &log);
}

#[test]
fn the_openai_sdk_with_httpx_header_capture_warns_before_the_first_429() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.duckdb");
    let service = ServiceProcess::start(&db, &["--metrics-refresh", "100ms"]);
    let log = dir.path().join("provider.jsonl");
    let mut python = crate::python();
    // The httpx instrumentation's own switch (a list of names or patterns);
    // it records `http.response.header.x_ratelimit_remaining_requests`.
    python
        .env(
            "OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_CLIENT_RESPONSE",
            "x-ratelimit-.*,anthropic-ratelimit-.*",
        )
        .env("FAKE_PROVIDER_REQUEST_LIMIT", LIMIT.to_string());
    run_python_in(
        python,
        "openinference_openai.py",
        &[&format!("{}/v1/traces", service.http), log.to_str().unwrap(), &plan().to_string()],
    );
    check_traced(service, &db, &log);
}

#[test]
fn the_litellm_router_s_payloads_carry_the_provider_s_headroom() {
    let dir = tempfile::tempdir().unwrap();
    let service = ServiceProcess::start(&dir.path().join("otlp.duckdb"), &[]);
    let payloads = dir.path().join("payloads.jsonl");
    let log = dir.path().join("provider.jsonl");
    let mut python = crate::python();
    python.env("FAKE_PROVIDER_REQUEST_LIMIT", LIMIT.to_string());
    run_python_in(
        python,
        "litellm_gateway.py",
        &[
            &format!("{}/v1/traces", service.http),
            payloads.to_str().unwrap(),
            log.to_str().unwrap(),
            &plan().to_string(),
        ],
    );
    service.terminate();
    let db = dir.path().join("payloads.duckdb");
    cli_ingest(&db, &payloads);
    let report = cli_report(&db);
    check_report(&report, &provider_log(&log));
    check_alert_fires_before_the_first_429(&db, &report);
}
