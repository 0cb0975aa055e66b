//! Framework instrumentations whose parentage lies (docs/record-format.md,
//! "Attempts found by the call"): Arize OpenInference's LangChain tracers,
//! Python (tests/python/framework_calls.py) and JavaScript
//! (tests/js/langchain.mjs), never make their spans current, so the SDK's
//! HTTP spans land beside the chain; and LlamaIndex, which does, but retries
//! around the SDK's own retries. Each alone and with OpenInference's openai
//! SDK instrumentation beside it, in front of the loopback provider on one
//! plan: the report must say what the provider's own log says.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::ai_sdk::{cost_of, gauge, metrics_counting, node};
use crate::gateways::{PYTHON_DIR, Usage, outcomes, provider_truth, report_with};
use crate::service::ServiceProcess;

/// Two successes, a 429 and a 500-then-503 the retries recover, and a call
/// that fails however often it is retried (the provider answers 500 to
/// every request of `w5` the plan lists: nine, as many as LlamaIndex's
/// retries around the SDK's can send).
fn plan() -> Value {
    json!({"w1": [], "w2": [], "w3": [429], "w4": [500, 503], "w5": vec![500; 9]})
}

/// The loopback provider on `plan`, its log at `log`; its base URL.
struct Provider {
    process: std::process::Child,
    url: String,
}

impl Provider {
    fn start(log: &std::path::Path) -> Self {
        let mut process = crate::python()
            .current_dir(PYTHON_DIR)
            .args(["fake_provider.py", &plan().to_string(), log.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut url = String::new();
        BufReader::new(process.stdout.take().unwrap()).read_line(&mut url).unwrap();
        Self { process, url: url.trim().to_string() }
    }

    fn stop(mut self) {
        drop(self.process.stdin.take());
        self.process.wait().unwrap();
    }
}

enum Emitter {
    Python { framework: &'static str },
    LangChainJs,
}

/// Runs `emitter` (with the SDK instrumentation beside it when `sdk`)
/// against a ledger and the provider; the report once it holds as many
/// attempts as the provider saw, the provider's truth, and `/metrics`.
fn traced(emitter: Emitter, sdk: bool) -> (Value, Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let service = ServiceProcess::start(&dir.path().join("ledger.duckdb"), &["--metrics-refresh", "100ms"]);
    let log = dir.path().join("provider.jsonl");
    let otlp = format!("{}/v1/traces", service.http);
    let sdk_arg = if sdk { "sdk" } else { "no-sdk" };
    let answered = match emitter {
        Emitter::Python { framework } => {
            let log_arg = log.to_str().unwrap();
            let plan = plan().to_string();
            let args = [framework, sdk_arg, otlp.as_str(), log_arg, plan.as_str()];
            // The provider runs inside the script, as in the other Python
            // emitter tests.
            crate::gateways::run_python_in(crate::python_frameworks(), "framework_calls.py", &args)
        }
        Emitter::LangChainJs => {
            let provider = Provider::start(&log);
            let out = node()
                .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/js"))
                .args(["langchain.mjs", sdk_arg, &otlp, &provider.url, &plan().to_string()])
                // LangChain.js runs callbacks in the background unless told
                // not to; its OpenInference tracer then parents each chain
                // to the previous request's span (docs/record-format.md).
                .env("LANGCHAIN_CALLBACKS_BACKGROUND", "false")
                .output()
                .unwrap();
            provider.stop();
            assert!(out.status.success(), "langchain.mjs: {}", String::from_utf8_lossy(&out.stderr));
            serde_json::from_slice(out.stdout.trim_ascii_end().rsplit(|b| *b == b'\n').next().unwrap())
                .unwrap()
        }
    };
    assert_eq!((&answered["w4"], &answered["w1"]), (&json!("ok"), &json!("ok")), "{answered}");
    assert_ne!(answered["w5"], "ok", "{answered}");
    let truth = provider_truth(
        &log,
        Usage { input: 120, output: 30, cached_input: 0, cache_write_input: 0, reasoning_output: 12 },
    );
    let report = report_with(&service, truth["attempts"].as_u64().unwrap());
    let metrics = metrics_counting(&service, &report);
    service.terminate();
    (report, truth, metrics)
}

/// The report says what the provider saw: every request an attempt, each
/// workflow's outcome, each answered request's tokens once, their cost; and
/// nothing was left unowned or guessed.
fn exact(emitter: Emitter, sdk: bool) {
    let (report, truth, metrics) = traced(emitter, sdk);
    let seen = json!({"attempts": report["attempts"]["total"], "outcomes": outcomes(&report), "tokens": report["tokens"]["total"]});
    assert_eq!(seen, truth, "{report:#}");
    assert_eq!(report["cost_usd"]["unknown_cost_attempts"], 0, "{report:#}");
    assert!((report["cost_usd"]["total"].as_f64().unwrap() - cost_of(&truth)).abs() < 1e-12, "{report:#}");
    assert_eq!(gauge(&metrics, "attempt_ledger_orphan_attempt_spans"), 0.0);
    assert_eq!(gauge(&metrics, "attempt_ledger_ambiguous_calls"), 0.0);
}

#[test]
fn langchain_python_alone() {
    exact(Emitter::Python { framework: "langchain" }, false);
}

#[test]
fn langchain_python_with_the_openai_instrumentation_beside_it() {
    exact(Emitter::Python { framework: "langchain" }, true);
}

#[test]
fn langchain_js_alone() {
    exact(Emitter::LangChainJs, false);
}

#[test]
fn langchain_js_with_the_openai_instrumentation_beside_it() {
    exact(Emitter::LangChainJs, true);
}

#[test]
fn llama_index_alone() {
    exact(Emitter::Python { framework: "llama_index" }, false);
}

#[test]
fn llama_index_with_the_openai_instrumentation_beside_it() {
    exact(Emitter::Python { framework: "llama_index" }, true);
}
