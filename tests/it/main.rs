//! One integration-test binary (faster to build than one per file).

// Tests state what they expect by unwrapping, and read the database
// directly to check what the store wrote.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod accounting;
mod ai_sdk;
mod alerts;
mod audit;
mod circuits;
mod cli;
mod dashboard;
mod derived;
mod frameworks;
mod gateways;
mod grpc_bounds;
mod headroom;
mod hostile;
mod house;
mod lake;
mod lake_damage;
#[cfg(feature = "iceberg")]
mod lake_iceberg;
mod lake_kit;
mod lake_properties;
mod lake_retention;
mod lake_s3;
mod lake_writers;
mod latency;
mod licences;
mod otlp_logs;
mod prices;
mod prometheus;
mod properties;
mod readme;
mod reconcile;
mod rules;
mod sdk_tracing;
mod service;
mod snapshots;
mod span_shapes;
mod storage;
mod tls;
mod tune;

use attempt_core::ingest::jsonl;
use attempt_core::pricing::PriceTable;
use attempt_core::request::ReportFilter;
use attempt_ledger::report::Report;
use attempt_ledger::store::Store;
use serde_json::{Value, json};

pub const FIXTURE: &str = include_str!("fixtures/attempts.jsonl");

/// Polls `done` until it holds, failing after `timeout` with `what` it
/// waited for: the one way a test waits for something a service does in
/// the background (a fixed sleep waits too long on a fast machine and too
/// short on a busy one).
pub fn wait_for(what: &str, timeout: std::time::Duration, mut done: impl FnMut() -> bool) {
    let began = std::time::Instant::now();
    while !done() {
        assert!(began.elapsed() < timeout, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A record: the required fields of a healthy attempt, with `fields` over them.
pub fn rec(fields: Value) -> String {
    let mut base = json!({
        "workflow_id": "w1",
        "started_at": "2026-11-28T02:00:00Z",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "status": "ok"
    });
    for (key, value) in fields.as_object().expect("an object").clone() {
        base[key] = value;
    }
    base.to_string()
}

/// A fresh in-memory store holding `lines`, every line valid.
pub fn store_with(lines: &[String]) -> Store {
    let store = Store::open_in_memory().unwrap();
    let decoded = jsonl::decode_lines(&lines.join("\n"), 1);
    assert!(decoded.rejections.is_empty(), "{:?}", decoded.rejections);
    store.write_batch(&decoded.attempts).unwrap();
    store
}

pub fn report_of(store: &Store, filter: &ReportFilter) -> Report {
    let prices = std::sync::Arc::new(PriceTable::load(None).unwrap());
    attempt_ledger::read::Reader::new(store, prices, Default::default()).report(filter, false).unwrap()
}

/// The interpreter of one of the pinned Python environments that
/// scripts/test.sh creates and names in `var`, with `lock` installed.
fn pinned_python(var: &str, lock: &str) -> std::process::Command {
    let path = std::env::var_os(var).unwrap_or_else(|| {
        panic!(
            "this test drives real clients from the pinned environment of {lock} that scripts/test.sh \
             creates; run the suite with scripts/test.sh (or set {var} to a Python with {lock} installed)"
        )
    });
    std::process::Command::new(path)
}

/// The main environment: the real clients (OpenTelemetry SDK, Prometheus'
/// parser, LiteLLM, OpenInference, the anthropic SDK, ...).
pub fn python() -> std::process::Command {
    pinned_python("ATTEMPT_LEDGER_TEST_PYTHON", "tests/python/requirements.txt")
}

/// OpenLIT's own environment: it pins older SDKs.
pub fn python_openlit() -> std::process::Command {
    pinned_python("ATTEMPT_LEDGER_TEST_PYTHON_OPENLIT", "tests/python/openlit/requirements.txt")
}

/// The framework instrumentations' own environment (LangChain and
/// LlamaIndex pin the openai SDK below the main environment's).
pub fn python_frameworks() -> std::process::Command {
    pinned_python("ATTEMPT_LEDGER_TEST_PYTHON_FRAMEWORKS", "tests/python/frameworks/requirements.txt")
}

/// The LiteLLM proxy's own environment: an older litellm, whose proxy extra
/// the registry can serve.
pub fn python_litellm_proxy() -> std::process::Command {
    pinned_python("ATTEMPT_LEDGER_TEST_PYTHON_LITELLM_PROXY", "tests/python/litellm_proxy/requirements.txt")
}

pub fn report_for(lines: &[String]) -> Report {
    report_of(&store_with(lines), &ReportFilter::default())
}
