//! SDKs traced the ways their users trace them: the anthropic SDK
//! (tests/python/anthropic_sdk.py) with Traceloop's OpenLLMetry and the
//! httpx instrumentation, with and without the SDK's own tracing, and the
//! SDK's own tracing alone, with and without httpx's; the openai SDK under
//! OpenLIT (tests/python/openlit_openai.py). Each in front of the loopback
//! provider on one plan; the report must say what the provider's own log
//! says.

use serde_json::json;

use crate::gateways::{Usage, outcomes, provider_truth, report_with, run_python, run_python_in};
use crate::service::Service;

fn traced(mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("ledger.duckdb"), &[]);
    let log = dir.path().join("provider.jsonl");
    // The SDK's default max_retries=2: three requests at most per call.
    let plan = json!({"w1": [], "w2": [], "w3": [529], "w4": [529, 529], "w5": [500], "w6": [529, 529, 529], "w7": [429]});
    let answered = run_python(
        "anthropic_sdk.py",
        &[mode, &format!("{}/v1/traces", service.http), log.to_str().unwrap(), &plan.to_string()],
    );
    assert_eq!(answered["w6"], "OverloadedError", "{answered}");
    // The fake provider's Anthropic usage: 100 input + 20 cache reads + 10
    // cache writes, 30 out.
    let truth = provider_truth(
        &log,
        Usage { input: 130, output: 30, cached_input: 20, cache_write_input: 10, reasoning_output: 0 },
    );
    assert_eq!(truth["attempts"], 14, "{truth}");
    let report = report_with(&service, truth["attempts"].as_u64().unwrap());
    let seen = json!({"attempts": report["attempts"]["total"], "outcomes": outcomes(&report), "tokens": report["tokens"]["total"]});
    assert_eq!(seen, truth, "{mode}: {report:#}");
    // With HTTP spans every attempt is the SDK's; by resend count, those of
    // calls that resent (a call answered at once is one attempt by the app).
    let attempts = truth["attempts"].as_u64().unwrap();
    let at_once = truth["outcomes"]["primary_success"].as_u64().unwrap();
    let sdk = report["amplification"].as_array().unwrap().iter().find(|l| l["layer"] == "sdk").cloned();
    let expected = if mode == "sdk" { attempts - at_once } else { attempts };
    assert_eq!(sdk.map(|l| l["attempts"].as_u64()), Some(Some(expected)), "{mode}: {report:#}");
    // claude-sonnet-4-5: $3/M input, $0.30/M cache reads, $3.75/M cache writes, $15/M output.
    let ok = truth["tokens"]["output"].as_f64().unwrap() / 30.0;
    let expected = ok * (100.0 * 3.0 + 20.0 * 0.30 + 10.0 * 3.75 + 30.0 * 15.0) / 1e6;
    assert!((report["cost_usd"]["total"].as_f64().unwrap() - expected).abs() < 1e-12, "{mode}: {report:#}");
    service.stop();
}

#[test]
fn openllmetry_with_httpx_spans_beside_its_model_span() {
    traced("openllmetry");
}

#[test]
fn openllmetry_and_the_sdk_s_own_tracing_are_one_call() {
    traced("both");
}

#[test]
fn the_sdk_s_own_tracing_alone_counts_retries_by_resend_count() {
    traced("sdk");
}

#[test]
fn the_sdk_s_own_tracing_with_httpx_spans() {
    traced("sdk-httpx");
}

#[test]
fn openlit_spans_of_the_openai_sdk_with_its_zero_cost_priced_from_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("ledger.duckdb"), &[]);
    let log = dir.path().join("provider.jsonl");
    // OpenLIT's price list, as it has one offline: none.
    let prices = dir.path().join("openlit-prices.json");
    std::fs::write(&prices, "{}").unwrap();
    let plan = json!({"w1": [], "w2": [], "w3": [429], "w4": [500, 503], "w5": [500, 500, 500]});
    let answered = run_python_in(
        crate::python_openlit(),
        "openlit_openai.py",
        &[&service.http, log.to_str().unwrap(), &plan.to_string(), prices.to_str().unwrap()],
    );
    assert_eq!(answered["w5"], "InternalServerError", "{answered}");
    // OpenLIT reads the reasoning count of the Responses API only, not of
    // chat completions.
    let truth = provider_truth(
        &log,
        Usage { input: 120, output: 30, cached_input: 0, cache_write_input: 0, reasoning_output: 0 },
    );
    assert_eq!(truth["attempts"], 10, "{truth}");
    let report = report_with(&service, 10);
    let seen = json!({"attempts": report["attempts"]["total"], "outcomes": outcomes(&report), "tokens": report["tokens"]["total"]});
    assert_eq!(seen, truth, "{report:#}");
    // gpt-4o-mini at $0.15/M input and $0.60/M output, from the table.
    let answered_calls = truth["tokens"]["output"].as_f64().unwrap() / 30.0;
    let expected = answered_calls * (120.0 * 0.15 + 30.0 * 0.60) / 1e6;
    assert!((report["cost_usd"]["total"].as_f64().unwrap() - expected).abs() < 1e-12, "{report:#}");
    assert_eq!(report["cost_usd"]["unknown_cost_attempts"], 0);
    service.stop();
}
