//! Real emitters into the service: the LiteLLM gateway (its OpenTelemetry
//! callback and its StandardLoggingPayload) and Arize OpenInference's openai
//! instrumentation, each in front of a loopback provider that answers on a
//! plan; and one SDK call's spans split across exports.

use std::collections::BTreeMap;
use std::path::Path;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value as AttrValue};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status as SpanStatus};
use prost::Message;
use serde_json::{Value, json};

use crate::service::{Endpoints, Service, cli_ingest, cli_report};

pub(crate) const PYTHON_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python");

/// Requests the fake provider saw, per workflow name, from its own log.
pub(crate) fn provider_requests(log: &Path) -> BTreeMap<String, usize> {
    requests_by_workflow(log).into_iter().map(|(workflow, requests)| (workflow, requests.len())).collect()
}

/// The fake provider's own log: per workflow, its requests in order, each
/// with the status answered and the model asked for.
fn requests_by_workflow(log: &Path) -> BTreeMap<String, Vec<(u64, String)>> {
    let mut by_workflow: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap().lines() {
        let entry: Value = serde_json::from_str(line).unwrap();
        let workflow = entry["workflow"].as_str().unwrap().to_string();
        let model = entry["model"].as_str().unwrap_or_default().to_string();
        by_workflow.entry(workflow).or_default().push((entry["status"].as_u64().unwrap(), model));
    }
    by_workflow
}

/// The tokens the fake provider reports on each answered request.
pub(crate) struct Usage {
    pub input: u64,
    pub output: u64,
    pub cached_input: u64,
    pub cache_write_input: u64,
    /// Of `output`, as far as the emitter carries it (0 where it does not).
    pub reasoning_output: u64,
}

/// The attempts, outcomes and tokens the provider's own log implies: per
/// workflow, its requests in order (a delivered answer from another model
/// than the first request's is a fallback), `usage` on each answered one.
pub(crate) fn provider_truth(log: &Path, usage: Usage) -> Value {
    let by_workflow = requests_by_workflow(log);
    let (mut primary, mut retried, mut fell_back, mut failed, mut ok) = (0, 0, 0, 0, 0);
    for requests in by_workflow.values() {
        ok += requests.iter().filter(|(s, _)| *s == 200).count() as u64;
        match (requests.len(), requests.last()) {
            (1, Some((200, _))) => primary += 1,
            (_, Some((200, model))) if *model != requests[0].1 => fell_back += 1,
            (_, Some((200, _))) => retried += 1,
            _ => failed += 1,
        }
    }
    json!({
        "attempts": by_workflow.values().map(Vec::len).sum::<usize>(),
        "outcomes": {"total": by_workflow.len(), "primary_success": primary, "retry_recovery": retried,
                     "fallback_recovery": fell_back, "degraded": 0, "fail_closed": failed, "in_flight": 0,
                     "queued": 0},
        "tokens": {"input": usage.input * ok, "output": usage.output * ok, "cached_input": usage.cached_input * ok,
                   "cache_write_input": usage.cache_write_input * ok,
                   // The fake provider's usage names no cache lifetime.
                   "cache_write_1h_input": 0,
                   "reasoning_output": usage.reasoning_output * ok},
    })
}

/// Requests the fake provider failed, per workflow name.
fn provider_failures(log: &Path) -> BTreeMap<String, usize> {
    requests_by_workflow(log)
        .into_iter()
        .map(|(workflow, requests)| (workflow, requests.iter().filter(|(status, _)| *status != 200).count()))
        .collect()
}

pub(crate) fn run_python(script: &str, args: &[&str]) -> Value {
    run_python_in(crate::python(), script, args)
}

/// `script` of tests/python run by `python` (an interpreter of one of the
/// pinned environments); its last line of output, as JSON.
pub(crate) fn run_python_in(mut python: std::process::Command, script: &str, args: &[&str]) -> Value {
    let out = python
        .current_dir(PYTHON_DIR)
        .arg(script)
        .args(args)
        // LiteLLM would otherwise try to download its price map first.
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap()
}

pub(crate) fn outcomes(report: &Value) -> Value {
    let w = &report["workflows"];
    json!({
        "total": w["total"], "primary_success": w["primary_success"], "retry_recovery": w["retry_recovery"],
        "fallback_recovery": w["fallback_recovery"], "degraded": w["degraded"], "fail_closed": w["fail_closed"],
        "in_flight": w["in_flight"], "queued": w["queued"],
    })
}

/// Waits until the service's report holds `attempts` attempts: OTLP
/// exporters send in the background, and the test must not race them.
pub(crate) fn report_with(service: &Endpoints, attempts: u64) -> Value {
    let mut report = Value::Null;
    crate::wait_for(&format!("a report of {attempts} attempts"), std::time::Duration::from_secs(20), || {
        report = service.report("");
        report["attempts"]["total"].as_u64() == Some(attempts)
    });
    report
}

#[test]
fn the_litellm_router_reports_the_planned_outcomes_by_spans_and_by_payloads() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("otlp.duckdb"), &[]);
    let payloads = dir.path().join("payloads.jsonl");
    let provider_log = dir.path().join("provider.jsonl");
    // Router: group `chat` (an openai and an azure deployment), 2 retries,
    // then the `chat-backup` group; the SDK's own retries are off.
    let plan = json!({
        "ok": [],
        "retry": [429],
        "retry-twice": [500, 503],
        "fallback": [500, 500, 500],
        "fail": [500, 500, 500, 500, 500, 500],
    });
    let answered = run_python(
        "litellm_gateway.py",
        &[
            &format!("{}/v1/traces", service.http),
            payloads.to_str().unwrap(),
            provider_log.to_str().unwrap(),
            &plan.to_string(),
        ],
    );
    // The Router picks a deployment at random, so the exception's class
    // varies (`APIError` from azure, `InternalServerError` from openai).
    assert!(answered["fail"].as_str().is_some_and(|e| e.ends_with("Error")), "{answered}");
    let requests = provider_requests(&provider_log);
    let sent: usize = requests.values().sum();
    assert_eq!(requests["fallback"], 4, "3 tries on `chat`, then the backup answered: {requests:?}");

    let expected = json!({
        "total": 5, "primary_success": 1, "retry_recovery": 2, "fallback_recovery": 1,
        "degraded": 0, "fail_closed": 1, "in_flight": 0, "queued": 0,
    });
    // Payloads: every call LiteLLM made is one attempt.
    let by_payload_db = dir.path().join("payloads.duckdb");
    cli_ingest(&by_payload_db, &payloads);
    let by_payload = cli_report(&by_payload_db);
    assert_eq!(outcomes(&by_payload), expected, "{by_payload:#}");
    assert_eq!(by_payload["attempts"]["total"], sent, "one attempt per request the provider saw");
    assert_eq!(by_payload["attempts"]["per_workflow"]["max"], requests["fail"]);
    let served: Vec<&str> = by_payload["by_served_provider"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["served_provider"].as_str().unwrap())
        .collect();
    assert!(served.contains(&"azure.ai.openai"), "LiteLLM's `azure` is the canonical provider: {served:?}");
    let routes = by_payload["by_primary_route"].as_array().unwrap();
    assert!(
        routes.iter().all(|r| r["route_group"] == "chat"),
        "both deployments of `chat` are one route: {routes:#?}"
    );
    let fallback = &by_payload["fallbacks"][0];
    assert_eq!(
        (&fallback["primary_route_group"], &fallback["fallback_route_group"]),
        (&json!("chat"), &json!("chat-backup"))
    );

    // Spans: the same outcomes through OTLP/HTTP, but not every attempt.
    // LiteLLM 1.110.2 marks "failure span sent" in the request's metadata,
    // which its Router shares across retries and fallbacks: a request gets
    // one span for its first failure and one for its success, and every
    // later failure is lost (measured: 8 of the 16 attempts here).
    let failed_requests = provider_failures(&provider_log);
    let spans_sent: usize = requests
        .iter()
        .map(|(name, n)| usize::from(failed_requests[name] > 0) + (n - failed_requests[name]))
        .sum();
    assert!(spans_sent < sent);
    let by_span = report_with(&service, spans_sent as u64);
    assert_eq!(outcomes(&by_span), expected, "{by_span:#}");
    assert_eq!(by_span["attempts"]["total"], spans_sent, "{by_span:#}");
    assert_eq!(
        by_span["cost_usd"]["total"], by_payload["cost_usd"]["total"],
        "failures cost nothing either way"
    );

    // The generic API logger's default body, a JSON array, on its route.
    let array = format!("[{}]", std::fs::read_to_string(&payloads).unwrap().trim().replace('\n', ","));
    let (status, body, _) = service.post("/v1/litellm", "application/json", None, array.as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (answer["accepted"].as_u64(), answer["rejected_total"].as_u64()),
        (Some(sent as u64), Some(0))
    );
    service.stop();
}

#[test]
fn openinference_openai_spans_with_httpx_retries_are_the_sdk_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("oi.duckdb"), &[]);
    let provider_log = dir.path().join("provider.jsonl");
    // openai's default max_retries=2: three tries at most per call.
    let plan = json!({
        "w1": [], "w2": [], "w3": [], "w4": [], "w5": [], "w6": [],
        "w7": [429], "w8": [500], "w9": [500, 503], "w10": [500, 500, 500],
    });
    let answered = run_python(
        "openinference_openai.py",
        &[&format!("{}/v1/traces", service.http), provider_log.to_str().unwrap(), &plan.to_string()],
    );
    assert_eq!(answered["w10"], "InternalServerError", "{answered}");
    let sent: usize = provider_requests(&provider_log).values().sum();
    assert_eq!(sent, 16);
    let report = report_with(&service, sent as u64);
    assert_eq!(
        outcomes(&report),
        json!({"total": 10, "primary_success": 6, "retry_recovery": 3, "fallback_recovery": 0,
               "degraded": 0, "fail_closed": 1, "in_flight": 0, "queued": 0}),
        "{report:#}"
    );
    let sdk = report["amplification"].as_array().unwrap().iter().find(|l| l["layer"] == "sdk").unwrap();
    assert_eq!(sdk["attempts"], sent, "each HTTP retry of the SDK is an attempt");
    assert_eq!(report["tokens"]["total"]["input"], 9 * 120, "tokens on the attempt that delivered, once");
    service.stop();
}

pub(crate) fn kv(key: &str, value: AttrValue) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(value) }), ..KeyValue::default() }
}

fn span(id: u8, parent: Option<u8>, offset_ms: u64, attributes: Vec<KeyValue>, error: bool) -> Span {
    span_of_trace(0x5e, id, parent, offset_ms, attributes, error)
}

/// A span of trace `[trace; 16]`, `offset_ms` after 2026-11-28T02:00Z.
pub(crate) fn span_of_trace(
    trace: u8,
    id: u8,
    parent: Option<u8>,
    offset_ms: u64,
    attributes: Vec<KeyValue>,
    error: bool,
) -> Span {
    let start = 1_795_831_200_000_000_000 + offset_ms * 1_000_000;
    Span {
        trace_id: vec![trace; 16],
        span_id: vec![id; 8],
        parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
        name: "span".into(),
        start_time_unix_nano: start,
        end_time_unix_nano: start + 200_000_000,
        attributes,
        status: Some(SpanStatus { code: if error { 2 } else { 1 }, message: String::new() }),
        ..Span::default()
    }
}

pub(crate) fn export(spans: Vec<Span>) -> Vec<u8> {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans { spans, ..ScopeSpans::default() }],
            ..ResourceSpans::default()
        }],
    }
    .encode_to_vec()
}

/// One SDK call: a GenAI span and three HTTP attempts under it (529, 529, 200).
fn sdk_call() -> (Span, Vec<Span>) {
    let s = |v: &str| AttrValue::StringValue(v.into());
    let parent = span(
        1,
        None,
        0,
        vec![
            kv("gen_ai.operation.name", s("chat")),
            kv("gen_ai.provider.name", s("anthropic")),
            kv("gen_ai.request.model", s("claude-sonnet-4-5")),
            kv("gen_ai.usage.input_tokens", AttrValue::IntValue(2000)),
            kv("gen_ai.usage.output_tokens", AttrValue::IntValue(300)),
        ],
        false,
    );
    let child = |id, offset, status: i64, error| {
        span(
            id,
            Some(1),
            offset,
            vec![
                kv("http.request.method", s("POST")),
                kv("http.response.status_code", AttrValue::IntValue(status)),
            ],
            error,
        )
    };
    (parent, vec![child(2, 0, 529, true), child(3, 600, 529, true), child(4, 1500, 200, false)])
}

/// One protobuf export of `spans` to `POST /v1/traces`, accepted whole.
fn post_spans(service: &Service, spans: Vec<Span>) {
    let (status, body, _) = service.post("/v1/traces", "application/x-protobuf", None, &export(spans));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
}

#[test]
fn spans_split_across_exports_give_the_same_attempts_in_either_order_and_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (parent, children) = sdk_call();
    let post = post_spans;
    let summary = |report: &Value| {
        json!({"attempts": report["attempts"]["total"], "outcomes": outcomes(report), "tokens": report["tokens"],
               "cost": report["cost_usd"], "amplification": report["amplification"]})
    };

    let together = Service::start(&dir.path().join("together.duckdb"), &[]);
    post(&together, [vec![parent.clone()], children.clone()].concat());
    let expected = summary(&together.report(""));
    together.stop();
    assert_eq!(expected["attempts"], 3, "{expected:#}");
    assert_eq!(expected["outcomes"]["retry_recovery"], 1);

    let parent_first = Service::start(&dir.path().join("parent-first.duckdb"), &[]);
    post(&parent_first, vec![parent.clone()]);
    assert_eq!(parent_first.report("")["attempts"]["total"], 1, "a parent alone is one attempt");
    post(&parent_first, children.clone());
    assert_eq!(summary(&parent_first.report("")), expected, "parent first");
    parent_first.stop();

    let db = dir.path().join("children-first.duckdb");
    let children_first = Service::start(&db, &[]);
    post(&children_first, children.clone());
    assert_eq!(children_first.report("")["attempts"]["total"], 0, "HTTP spans alone are not model calls");
    children_first.stop();
    // The children were kept durably: the parent, after a restart, finds them.
    let restarted = Service::start(&db, &[]);
    post(&restarted, vec![parent.clone()]);
    assert_eq!(summary(&restarted.report("")), expected, "children first, across a restart");
    // A redelivered export changes nothing.
    post(&restarted, [vec![parent], children].concat());
    assert_eq!(summary(&restarted.report("")), expected, "redelivery");
    restarted.stop();
}

/// Two branches of one request, each running a framework call (OpenInference
/// chain and LLM spans, never current) inside a step; each branch's HTTP
/// spans hang off the branch span. The branch, step and request spans end
/// after the calls: what a batching exporter sends in a later export.
fn branched_request() -> (Vec<Span>, Vec<Span>) {
    let s = |v: &str| AttrValue::StringValue(v.into());
    let at = |id: u8, parent: Option<u8>, from_ms: u64, to_ms: u64, attributes: Vec<KeyValue>| {
        let start = 1_795_831_200_000_000_000 + from_ms * 1_000_000;
        Span {
            trace_id: vec![0x6b; 16],
            span_id: vec![id; 8],
            parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
            name: "span".into(),
            start_time_unix_nano: start,
            end_time_unix_nano: start + (to_ms - from_ms) * 1_000_000,
            attributes,
            ..Span::default()
        }
    };
    let (mut enclosing, mut calls) = (vec![at(1, None, 0, 3000, vec![])], Vec::new());
    for (branch, statuses) in [(2u8, &[500i64, 200][..]), (3, &[200][..])] {
        let (step, chain, llm) = (branch * 10, branch * 10 + 1, branch * 10 + 2);
        enclosing.push(at(branch, Some(1), 0, 2500, vec![]));
        enclosing.push(at(step, Some(branch), 0, 2400, vec![]));
        calls.push(at(chain, Some(step), 0, 2000, vec![kv("openinference.span.kind", s("CHAIN"))]));
        calls.push(at(
            llm,
            Some(chain),
            1,
            1999,
            vec![
                kv("openinference.span.kind", s("LLM")),
                kv("llm.provider", s("openai")),
                kv("llm.model_name", s("gpt-4o-mini")),
                kv("llm.token_count.prompt", AttrValue::IntValue(100)),
                kv("llm.token_count.completion", AttrValue::IntValue(5)),
            ],
        ));
        for (n, status) in statuses.iter().enumerate() {
            let from = 10 + 400 * n as u64 + u64::from(branch);
            let mut http = at(
                branch * 10 + 5 + n as u8,
                Some(branch),
                from,
                from + 300,
                vec![
                    kv("http.request.method", s("POST")),
                    kv("url.full", s("https://api.openai.com/v1/chat/completions")),
                    kv("http.response.status_code", AttrValue::IntValue(*status)),
                ],
            );
            http.status =
                Some(SpanStatus { code: if *status >= 400 { 2 } else { 1 }, message: String::new() });
            calls.push(http);
        }
    }
    (enclosing, calls)
}

#[test]
fn enclosing_spans_exported_after_their_calls_keep_the_calls_apart() {
    let dir = tempfile::tempdir().unwrap();
    let (enclosing, calls) = branched_request();
    let post = post_spans;
    let summary = |report: &Value| json!({"attempts": report["attempts"]["total"], "outcomes": outcomes(report), "tokens": report["tokens"]["total"]});
    let together = Service::start(&dir.path().join("together.duckdb"), &[]);
    post(&together, [enclosing.clone(), calls.clone()].concat());
    let expected = summary(&together.report(""));
    together.stop();
    // One workflow (the trace): the first branch's 500 and 200, the second's 200.
    assert_eq!(expected["attempts"], 3, "{expected:#}");
    assert_eq!(expected["outcomes"]["retry_recovery"], 1, "{expected:#}");
    assert_eq!((&expected["tokens"]["input"], &expected["tokens"]["output"]), (&json!(200), &json!(10)));
    // The calls first, their enclosing spans in the next export: the
    // service remembers the trace had calls and keeps them.
    let split = Service::start(&dir.path().join("split.duckdb"), &[]);
    post(&split, calls);
    post(&split, enclosing);
    assert_eq!(summary(&split.report("")), expected, "enclosing spans after the calls");
    split.stop();
}

#[test]
fn a_cost_stated_in_another_currency_is_unknown_never_converted() {
    let dir = tempfile::tempdir().unwrap();
    let s = |v: &str| AttrValue::StringValue(v.into());
    let call = |trace: u8, currency: &str| {
        let attributes = vec![
            kv("gen_ai.operation.name", s("chat")),
            kv("gen_ai.provider.name", s("openai")),
            kv("gen_ai.request.model", s("gpt-4o-mini")),
            kv("gen_ai.usage.input_tokens", AttrValue::IntValue(1000)),
            kv("gen_ai.usage.output_tokens", AttrValue::IntValue(100)),
            kv("gen_ai.usage.cost.amount", AttrValue::DoubleValue(0.0115)),
            kv("gen_ai.usage.cost.currency", s(currency)),
        ];
        span_of_trace(trace, 1, None, 0, attributes, false)
    };
    let service = Service::start(&dir.path().join("ledger.duckdb"), &[]);
    post_spans(&service, vec![call(0x71, "EUR"), call(0x72, "usd")]);
    let report = service.report("");
    assert_eq!(report["attempts"]["total"], 2, "{report:#}");
    assert_eq!(report["cost_usd"]["unknown_cost_attempts"], 1, "{report:#}");
    assert!((usd(&report["cost_usd"]["total"]) - 0.0115).abs() < 1e-12, "the USD figure alone: {report:#}");
    assert_eq!(report["tokens"]["total"]["input"], 2000, "the tokens stay");
    service.stop();
}

/// A fixture export stored through the same path as `POST /v1/traces`, and
/// the report over it.
fn report_of_fixture(name: &str) -> Value {
    let path = format!("{}/tests/it/fixtures/gateways/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let decoded = attempt_core::ingest::otlp::decode_json(&text).unwrap().decoded;
    assert!(decoded.rejections.is_empty(), "{name}: {:?}", decoded.rejections);
    let stored = decoded.spans.iter().filter_map(|s| s.span.as_deref()).map(String::from_utf8_lossy);
    for span in stored {
        assert!(!span.contains("private"), "{name}: message text reached the stored span");
    }
    let store = attempt_ledger::store::Store::open_in_memory().unwrap();
    let batch = attempt_ledger::store::Batch {
        attempts: &decoded.attempts,
        spans: &decoded.spans,
        circuits: &decoded.circuits,
    };
    store.write_batches(&[batch]).unwrap();
    serde_json::to_value(crate::report_of(&store, &attempt_core::request::ReportFilter::default())).unwrap()
}

fn usd(value: &Value) -> f64 {
    value.as_f64().unwrap()
}

#[test]
fn envoy_ai_gateway_openinference_spans() {
    let r = report_of_fixture("envoy_openinference.json");
    assert_eq!(r["attempts"]["total"], 2);
    assert_eq!((&r["workflows"]["primary_success"], &r["workflows"]["fail_closed"]), (&json!(1), &json!(1)));
    let served: Vec<&Value> =
        r["by_served_model"].as_array().unwrap().iter().map(|m| &m["served_model"]).collect();
    assert!(served.contains(&&json!("gpt-4o-mini-2024-07-18")), "llm.model_name is who answered: {served:?}");
    assert_eq!(
        r["tokens"]["total"],
        json!({"input": 1000, "output": 50, "cached_input": 400, "cache_write_input": 100, "reasoning_output": 0,
               "cache_write_1h_input": 0})
    );
    // OpenAI lists no cache-write price for gpt-4o-mini: the 100 tokens
    // written make the attempt's cost unknown, never priced as input.
    assert_eq!(r["cost_usd"]["unknown_cost_attempts"], 1, "{}", r["cost_usd"]);
    assert_eq!(r["cost_usd"]["unknown_cost_reasons"]["no_kind_price"], 1, "{}", r["cost_usd"]);
    assert_eq!(usd(&r["cost_usd"]["total"]), 0.0);
    assert_eq!(r["error_classes"][0]["error_class"], "rate_limit", "from the exception event's type");
}

#[test]
fn envoy_ai_gateway_genai_spans() {
    let r = report_of_fixture("envoy_genai.json");
    assert_eq!(r["attempts"]["total"], 2, "the tokenize span is not a model call");
    assert_eq!(
        r["by_served_provider"][0]["served_provider"], "azure.ai.openai",
        "`azure.openai` is an alias"
    );
    assert_eq!(r["error_classes"][0]["error_class"], "transient", "error.type 500 is the HTTP status");
    // gpt-4o: 1000 plain x $2.50 + 1000 cached x $1.25 + 100 out x $10.
    assert!((usd(&r["cost_usd"]["total"]) - 4750e-6).abs() < 1e-12, "{}", r["cost_usd"]);
}

#[test]
fn cloudflare_ai_gateway_spans() {
    let r = report_of_fixture("cloudflare.json");
    assert_eq!(r["attempts"]["total"], 2);
    assert_eq!(r["workflows"]["primary_success"], 2);
    assert_eq!(r["cost_usd"]["total"], 0.0005, "gen_ai.usage.cost is the emitter's cost");
    assert_eq!(r["cost_usd"]["unknown_cost_attempts"], 1, "workers-ai has no price: unknown, not 0");
}

#[test]
fn kong_ai_gateway_spans() {
    let r = report_of_fixture("kong.json");
    assert_eq!(r["attempts"]["total"], 1, "the balancer span is not an HTTP client attempt");
    assert_eq!(r["by_served_model"][0]["served_model"], "gpt-4.1-mini-2025-04-14");
    // gpt-4.1-mini: 500 in x $0.40 + 60 out x $1.60 per 1M.
    assert!((usd(&r["cost_usd"]["total"]) - 296e-6).abs() < 1e-12, "{}", r["cost_usd"]);
}

#[test]
fn openrouter_generations_import() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("generations.jsonl");
    let generation = json!({"data": {
    "id": "gen-77", "created_at": "2026-11-01T10:00:00Z", "model": "anthropic/claude-sonnet-4.5",
    "provider_name": "Amazon Bedrock", "total_cost": 0.0042, "native_tokens_prompt": 900,
    "native_tokens_completion": 120, "native_tokens_cached": 0, "cancelled": false,
    "provider_responses": [
        {"provider_name": "Anthropic", "model_permaslug": "anthropic/claude-sonnet-4.5", "status": 529, "latency": 300},
        {"provider_name": "Amazon Bedrock", "model_permaslug": "anthropic/claude-sonnet-4.5", "status": 200, "latency": 1800}
    ]}});
    std::fs::write(&file, format!("{generation}\n")).unwrap();
    let db = dir.path().join("or.duckdb");
    cli_ingest(&db, &file);
    let r = cli_report(&db);
    assert_eq!(r["attempts"]["total"], 2);
    assert_eq!(r["workflows"]["retry_recovery"], 1, "another provider of the same slug is the same route");
    let served: Vec<(String, f64)> = r["by_served_provider"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["served_provider"].as_str().unwrap().to_string(), p["cost_usd"].as_f64().unwrap()))
        .collect();
    assert!(served.contains(&("aws.bedrock".to_string(), 0.0042)), "cost on who served: {served:?}");
    assert!(served.contains(&("anthropic".to_string(), 0.0)), "{served:?}");
}

/// One trace cannot grow without bound: spans past the per-trace limit are
/// refused and counted, a redelivered span is still only a duplicate, and
/// an export over HTTP says so as OTLP partial success.
#[test]
fn a_trace_stores_at_most_the_documented_number_of_spans() {
    use attempt_core::model::{SpanKind, SpanRecord};
    use attempt_ledger::store::{Batch, MAX_SPANS_PER_TRACE, Store};
    let link = |i: usize| SpanRecord {
        trace_id: "7".repeat(32),
        span_id: format!("{i:016x}"),
        parent_span_id: None,
        kind: SpanKind::Link,
        span: None,
        facts: Default::default(),
    };
    let store = Store::open_in_memory().unwrap();
    let first: Vec<SpanRecord> = (0..MAX_SPANS_PER_TRACE + 1).map(link).collect();
    let stats = store.write_batches(&[Batch { spans: &first, ..Batch::default() }]).unwrap();
    assert_eq!((stats[0].spans_stored, stats[0].spans_refused), (MAX_SPANS_PER_TRACE as u64, 1));
    let again = [link(0), link(MAX_SPANS_PER_TRACE + 7)];
    let stats = store.write_batches(&[Batch { spans: &again, ..Batch::default() }]).unwrap();
    assert_eq!((stats[0].spans_stored, stats[0].spans_refused), (0, 1), "a stored span is no refusal");

    let answer =
        attempt_ledger::service::otlp_receiver::export_response(&attempt_core::ingest::Decoded::default(), 3);
    let partial = answer.partial_success.unwrap();
    assert_eq!(partial.rejected_spans, 3);
    assert!(partial.error_message.contains("the most one trace may store"), "{}", partial.error_message);
}

/// What a LiteLLM proxy can show of a request, by the provider's log: its
/// first try, and its answer when a later try delivered. The proxy keeps one
/// Logging object per request, so every callback (the otel one and the
/// generic API logger alike) hears of the first failure and the final
/// success only.
fn proxy_visible_attempts(log: &Path) -> usize {
    let answered_late =
        |r: &[(u64, String)]| r.len() > 1 && r.last().is_some_and(|(status, _)| *status == 200);
    requests_by_workflow(log).values().map(|r| if answered_late(r) { 2 } else { 1 }).sum()
}

#[test]
fn the_litellm_proxy_by_spans_and_by_its_generic_api_logger() {
    let dir = tempfile::tempdir().unwrap();
    let by_spans = Service::start(&dir.path().join("spans.duckdb"), &[]);
    let by_payloads = Service::start(&dir.path().join("payloads.duckdb"), &[]);
    let log = dir.path().join("provider.jsonl");
    // Group `chat`: 2 retries, then `chat-backup`.
    let plan = json!({
        "ok": [], "retry": [429], "retry-twice": [500, 503], "fallback": [500, 500, 500],
        "fail": [500, 500, 500, 500, 500, 500],
    });
    let answered = run_python_in(
        crate::python_litellm_proxy(),
        "litellm_proxy.py",
        &[
            &format!("{}/v1/traces", by_spans.http),
            &format!("{}/v1/litellm", by_payloads.http),
            log.to_str().unwrap(),
            &plan.to_string(),
        ],
    );
    assert_eq!(answered["fallback"], "ok", "{answered}");
    let truth = provider_truth(
        &log,
        Usage { input: 120, output: 30, cached_input: 0, cache_write_input: 0, reasoning_output: 12 },
    );
    assert_eq!(truth["attempts"], 16, "{truth}");
    let visible = proxy_visible_attempts(&log);
    assert_eq!(visible, 8);
    // gpt-4o-mini ($0.15/M in, $0.60/M out) answered three, gpt-4o ($2.50/M, $10/M) the fallback.
    let cost = 3.0 * (120.0 * 0.15 + 30.0 * 0.60) / 1e6 + (120.0 * 2.50 + 30.0 * 10.0) / 1e6;
    // The payloads copy the provider's usage, reasoning count included; the
    // `otel` callback's spans carry no reasoning count.
    for (source, service, reasoning) in [("spans", &by_spans, 0), ("payloads", &by_payloads, 4 * 12)] {
        let report = report_with(service, visible as u64);
        assert_eq!(report["attempts"]["total"], visible, "{source}: {report:#}");
        assert_eq!(outcomes(&report), truth["outcomes"], "{source}: {report:#}");
        let mut tokens = truth["tokens"].clone();
        tokens["reasoning_output"] = json!(reasoning);
        assert_eq!(report["tokens"]["total"], tokens, "{source}");
        assert!((report["cost_usd"]["total"].as_f64().unwrap() - cost).abs() < 1e-12, "{source}: {report:#}");
        let served: Vec<&Value> =
            report["by_served_provider"].as_array().unwrap().iter().map(|p| &p["served_provider"]).collect();
        assert_eq!(served, [&json!("openai")], "{source}");
    }
    by_spans.stop();
    by_payloads.stop();
}
