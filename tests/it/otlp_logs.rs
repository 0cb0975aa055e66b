//! OTLP logs and metrics from the OpenTelemetry Python SDK's own
//! exporters, over gRPC and HTTP: a GenAI exception event completes the
//! attempt of the span it names though it arrives first, gateway access
//! logs are attempts, other records and every metric data point are
//! answered with success and counted as ignored.

use serde_json::Value;

use crate::service::ServiceProcess;

fn workflow(service: &ServiceProcess, id: &str) -> Value {
    // The report waits until every acknowledged write is derived.
    service.report("");
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent.get(&format!("{}/api/v1/workflows/{id}", service.http)).call().unwrap();
    let body = response.body_mut().read_to_string().unwrap();
    assert_eq!(response.status().as_u16(), 200, "{id}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// Records the service counted as ignored (`ingest_records_total`).
pub(crate) fn ignored_records(service: &ServiceProcess) -> f64 {
    service
        .metrics()
        .lines()
        .find(|l| l.starts_with("attempt_ledger_ingest_records_total{") && l.contains("result=\"ignored\""))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// Status, HTTP status, error class and error code of each attempt.
type Facts = (String, Option<i64>, Option<String>, Option<String>);

fn summary(page: &Value) -> Vec<Facts> {
    page["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["status"].as_str().unwrap().to_string(),
                a["http_status"].as_i64(),
                a["error_class"].as_str().map(String::from),
                a["error_code"].as_str().map(String::from),
            )
        })
        .collect()
}

#[test]
fn exception_events_and_access_logs_from_the_python_sdk_become_attempt_facts() {
    for protocol in ["grpc", "http"] {
        let dir = tempfile::tempdir().unwrap();
        let service = ServiceProcess::start(&dir.path().join("s.duckdb"), &[]);
        let endpoint = if protocol == "grpc" { service.grpc.clone() } else { service.http.clone() };
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/otel_genai_logs_client.py");
        let out = crate::python().args([script, protocol, &endpoint]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{protocol}: {}{stdout}", String::from_utf8_lossy(&out.stderr));
        let ids: Vec<&str> = stdout.split_whitespace().collect();
        let (call_trace, gateway_trace) = (ids[0], ids[1]);

        // The call: a 429, then the try the exception event says failed
        // (its span alone looked answered: no status, no HTTP code).
        let call = workflow(&service, call_trace);
        assert_eq!(
            summary(&call),
            vec![
                ("error".into(), Some(429), Some("rate_limit".into()), None),
                ("error".into(), None, Some("transient".into()), Some("APIConnectionError".into())),
            ],
            "{protocol}"
        );
        assert_eq!(call["outcome"], "fail_closed", "{protocol}");

        // The access log with span ids: the gateway's request, a 503.
        let gateway = workflow(&service, gateway_trace);
        assert_eq!(summary(&gateway), vec![("error".into(), Some(503), Some("transient".into()), None)]);
        assert_eq!(gateway["attempts"][0]["provider"], "anthropic");
        assert_eq!(gateway["attempts"][0]["duration_ms"], 120.0);
        // Without span ids: its own workflow, delivered, its tokens counted.
        let job = workflow(&service, "gateway-job-1");
        assert_eq!(summary(&job), vec![("ok".into(), Some(200), None, None)]);
        assert_eq!(
            (job["attempts"][0]["input_tokens"].as_i64(), job["attempts"][0]["output_tokens"].as_i64()),
            (Some(1000), Some(100))
        );
        assert_eq!(job["attempts"][0]["duration_ms"], 900.0);

        let report = service.report("");
        assert_eq!(report["attempts"]["total"], 4, "{protocol}: {}", report["attempts"]);
        assert_eq!(report["workflows"]["total"], 3, "{protocol}: {}", report["workflows"]);
        // The application log and the counter's one data point.
        assert_eq!(ignored_records(&service), 2.0, "{protocol}");
    }
}
