//! Alerts and metrics end to end: the service with a rule file and real
//! local HTTP receivers, `/metrics` read by Prometheus' own parser, and the
//! offline replay (`alerts --check`).

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use serde_json::Value;

use crate::service::ServiceProcess;
use crate::wait_for;

const BIN: &str = env!("CARGO_BIN_EXE_attempt-ledger");

/// A local HTTP server that answers 200 to every POST and keeps (path, JSON body).
struct Receiver {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let received = Arc::new(Mutex::new(Vec::new()));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let sink = received.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                listener.set_nonblocking(true).unwrap();
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app =
                    axum::Router::new().fallback(move |uri: axum::http::Uri, body: axum::body::Bytes| {
                        let sink = sink.clone();
                        async move {
                            let value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                            sink.lock().unwrap().push((uri.path().to_string(), value));
                            "ok"
                        }
                    });
                axum::serve(listener, app).await.unwrap();
            });
        });
        Receiver { addr, received }
    }

    fn bodies(&self, path: &str) -> Vec<Value> {
        self.received.lock().unwrap().iter().filter(|(p, _)| p == path).map(|(_, v)| v.clone()).collect()
    }
}

/// A port nothing listens on: a receiver that is down.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn get(url: &str) -> String {
    let mut response = ureq::get(url).call().unwrap();
    response.body_mut().read_to_string().unwrap()
}

fn run(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The rate-limit-fallback incident squeezed into `seconds`, starting then.
fn incident(start: chrono::DateTime<Utc>, seconds: u32) -> String {
    let start = start.to_rfc3339_opts(SecondsFormat::Millis, true);
    let duration = format!("{seconds}s");
    run(&[
        "simulate",
        "--scenario",
        "rate-limit-fallback",
        "--workflows",
        "300",
        "--seed",
        "7",
        "--start",
        &start,
        "--duration",
        &duration,
    ])
}

const RULES: &str = r#"
[[rule]]
name = "fallback"
kind = "fallback_activation"
window = "6s"

[[rule]]
name = "primary"
kind = "primary_success"
threshold = 0.9
window = "6s"
for = "400ms"
min_workflows = 30

[[rule]]
name = "retries"
kind = "retry_ratio"
window = "6s"

[[rule]]
name = "quota"
kind = "quota_exhausted"
window = "6s"
"#;

/// (state, alert key) of webhook notifications, in arrival order.
fn transitions(bodies: &[Value]) -> Vec<(String, String)> {
    bodies
        .iter()
        .map(|b| (b["status"].as_str().unwrap().to_string(), b["alert"]["key"].as_str().unwrap().to_string()))
        .collect()
}

/// The incident's alerts: its 429s and fallbacks, and the one 402 of the
/// simulated account's balance (class quota: a human must act).
const EXPECTED_ALERTS: [&str; 4] =
    ["fallback", "primary{model=\"gpt-4o\",provider=\"openai\"}", "quota", "retries"];

#[test]
fn a_fallback_incident_notifies_firing_then_resolved_once_per_alert() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("alerts.duckdb");
    let receiver = Receiver::start();
    let rules = format!(
        r#"
[evaluation]
interval = "100ms"

[[receiver]]
name = "hook"
kind = "webhook"
url = "http://{a}/hook"

[[receiver]]
name = "slack"
kind = "slack"
url = "http://{a}/slack"

[[receiver]]
name = "am"
kind = "alertmanager"
url = "http://{a}/api/v2/alerts"

[[receiver]]
name = "down"
kind = "webhook"
url = "http://127.0.0.1:{down}/hook"
backoff = "2s"
max_tries = 3
{RULES}"#,
        a = receiver.addr,
        down = closed_port()
    );
    let rules_path = dir.path().join("rules.toml");
    std::fs::write(&rules_path, rules).unwrap();
    let service =
        ServiceProcess::start(&db, &["--rules", rules_path.to_str().unwrap(), "--metrics-refresh", "100ms"]);

    let records = incident(Utc::now() - chrono::Duration::seconds(4), 4);
    let (status, body, _) = service.post("/v1/attempts", "application/x-ndjson", None, records.as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));

    // Every expected alert fires, then resolves once the incident leaves the window.
    wait_for("four resolved notifications", Duration::from_secs(60), || {
        transitions(&receiver.bodies("/hook")).iter().filter(|(s, _)| s == "resolved").count() >= 4
    });
    // Further evaluations with nothing in the window send nothing more.
    let evaluations = || {
        let metrics = service.metrics();
        let line = metrics.lines().find(|l| l.starts_with("attempt_ledger_alert_evaluations_total "));
        line.and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).unwrap_or(0.0)
    };
    let resolved_at = evaluations();
    wait_for("three more evaluations", Duration::from_secs(30), || evaluations() >= resolved_at + 3.0);
    let hook = transitions(&receiver.bodies("/hook"));
    let mut expected: Vec<(String, String)> = Vec::new();
    for alert in EXPECTED_ALERTS {
        let mine: Vec<&str> = hook.iter().filter(|(_, k)| k == alert).map(|(s, _)| s.as_str()).collect();
        assert_eq!(mine, ["firing", "resolved"], "{alert}: {hook:?}");
        expected.push(("firing".into(), alert.into()));
        expected.push(("resolved".into(), alert.into()));
    }
    assert_eq!(hook.len(), 8, "one episode each: {hook:?}");

    // The firing fallback alert names the routes and the reason.
    let firing = receiver.bodies("/hook").into_iter().find(|b| b["alert"]["key"] == "fallback").unwrap();
    let summary = firing["alert"]["summary"].as_str().unwrap();
    assert!(summary.contains("openai/gpt-4o -> anthropic/claude-sonnet-4-5 (rate_limit"), "{summary}");

    // Slack and Alertmanager receivers got the same eight, in their own shapes.
    let slack = receiver.bodies("/slack");
    assert_eq!(slack.len(), 8);
    assert!(
        slack
            .iter()
            .all(|b| b["text"].as_str().is_some_and(|t| t.contains("[FIRING]") || t.contains("[RESOLVED]")))
    );
    let am = receiver.bodies("/api/v2/alerts");
    assert_eq!(am.len(), 8);
    let alertnames: std::collections::BTreeSet<&str> =
        am.iter().map(|b| b[0]["labels"]["alertname"].as_str().unwrap()).collect();
    assert_eq!(alertnames, ["fallback", "primary", "quota", "retries"].into());
    assert!(am.iter().all(|b| b[0]["startsAt"].is_string() && b[0]["endsAt"].is_string()));

    // The receiver that is down held up nobody: all eight reached the others
    // while it was still backing off (3 tries, 2 s then 4 s apart, for
    // each of its eight notifications), and ingest still answers.
    let metrics = get(&format!("{}/metrics", service.http));
    let down_failed = metrics
        .lines()
        .find(|l| l.starts_with("attempt_ledger_notifications_total{receiver=\"down\",result=\"failed\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .unwrap();
    assert!(down_failed < 8.0, "the down receiver already gave up everything: {down_failed}");
    assert!(metrics.contains("attempt_ledger_notification_retries_total{receiver=\"down\"}"), "{metrics}");
    // (Last night's steady traffic: outside every window, so it fires nothing.)
    let steady = run(&["simulate", "--scenario", "steady", "--workflows", "50"]);
    let (status, _, _) = service.post("/v1/attempts", "application/x-ndjson", None, steady.as_bytes());
    assert_eq!(status, 200);

    // History: the API and, after the service stops, the CLI.
    let api: Value = serde_json::from_str(&get(&format!("{}/api/v1/alerts", service.http))).unwrap();
    assert_eq!(api["history"].as_array().unwrap().len(), 8, "{api}");
    assert!(service.terminate().success());
    let history: Value =
        serde_json::from_str(&run(&["alerts", "--db", db.to_str().unwrap(), "--format", "json"])).unwrap();
    let mut recorded: Vec<(String, String)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["state"].as_str().unwrap().to_string(), e["key"].as_str().unwrap().to_string()))
        .collect();
    recorded.sort();
    expected.sort();
    assert_eq!(recorded, expected);
}

/// The incident of 2026-11-28T02:00Z squeezed into 4 s, stored under `dir`,
/// and `rules` replayed over it every 500 ms: the database and the check's
/// JSON.
fn replayed_incident(dir: &std::path::Path, rules: &str) -> (std::path::PathBuf, String) {
    let db = dir.join("check.duckdb");
    let start = chrono::DateTime::parse_from_rfc3339("2026-11-28T02:00:00Z").unwrap().with_timezone(&Utc);
    let records = dir.join("incident.jsonl");
    std::fs::write(&records, incident(start, 4)).unwrap();
    run(&["ingest", "--db", db.to_str().unwrap(), records.to_str().unwrap()]);
    let rules_file = dir.join("rules.toml");
    std::fs::write(&rules_file, rules).unwrap();
    let out = run(&[
        "alerts",
        "--check",
        "--db",
        db.to_str().unwrap(),
        "--rules",
        rules_file.to_str().unwrap(),
        "--step",
        "500ms",
        "--format",
        "json",
    ]);
    (db, out)
}

/// The same incident replayed offline, every 500 ms: the same single
/// episode per alert, and each firing value is the report's own number over
/// that window.
#[test]
fn the_offline_check_replays_the_same_alerts_and_agrees_with_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let (db, out) = replayed_incident(dir.path(), RULES);
    let check: Value = serde_json::from_str(&out).unwrap();
    let events = check["events"].as_array().unwrap();
    let mut by_alert: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in events {
        by_alert.entry(e["key"].as_str().unwrap()).or_default().push(e["state"].as_str().unwrap());
    }
    assert_eq!(by_alert.keys().copied().collect::<Vec<_>>(), EXPECTED_ALERTS, "{out}");
    assert!(by_alert.values().all(|states| states == &["firing", "resolved"]), "{by_alert:?}");

    // Each firing value is the report's own figure over [at - 6s, at).
    let report_at = |event: &Value| -> Value {
        let at = chrono::DateTime::parse_from_rfc3339(event["at"].as_str().unwrap()).unwrap();
        let text = |t: chrono::DateTime<chrono::FixedOffset>| t.to_rfc3339_opts(SecondsFormat::Micros, true);
        serde_json::from_str(&run(&[
            "report",
            "--db",
            db.to_str().unwrap(),
            "--since",
            &text(at - chrono::Duration::seconds(6)),
            "--until",
            &text(at),
            "--format",
            "json",
        ]))
        .unwrap()
    };
    let firing = |rule: &str| events.iter().find(|e| e["rule"] == rule && e["state"] == "firing").unwrap();
    let fallback = firing("fallback");
    let activations: i64 = report_at(fallback)["fallbacks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["workflows"].as_i64().unwrap())
        .sum();
    assert!(activations > 0);
    assert_eq!(fallback["value"].as_f64().unwrap(), activations as f64);
    let primary = firing("primary");
    let routes = report_at(primary)["by_primary_route"].clone();
    let route = routes.as_array().unwrap().iter().find(|r| r["model"] == "gpt-4o").unwrap();
    assert_eq!(primary["value"], route["primary_success_rate"]);
    let retries = firing("retries");
    assert_eq!(retries["value"], report_at(retries)["retry_budget"]["ratio"]);
    // The quota alert is the 402 alone: the 429s are rate limits, not quota.
    let quota = firing("quota");
    let classes = report_at(quota)["error_classes"].clone();
    let refused: Vec<&Value> =
        classes.as_array().unwrap().iter().filter(|c| c["error_class"] == "quota").collect();
    assert_eq!(refused.len(), 1, "{classes}");
    assert_eq!((quota["value"].as_f64().unwrap(), refused[0]["attempts"].as_i64().unwrap()), (1.0, 1));
}

fn python_parse(exposition: &str) -> Value {
    let mut child = crate::python()
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/parse_metrics.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(exposition.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client rejected the exposition: {}\n{exposition}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Sum of a parsed family's samples named `sample` whose labels match `filter`.
fn total(families: &Value, sample: &str, filter: &[(&str, &str)]) -> f64 {
    families
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["samples"].as_array().unwrap())
        .filter(|s| s["name"] == sample)
        .filter(|s| filter.iter().all(|(k, v)| s["labels"][*k] == *v))
        .map(|s| s["value"].as_f64().unwrap())
        .sum()
}

/// The error rate by served route and class, and the rate-limit headroom
/// the incident's headers state: the replay fires both, each alert per
/// route (and class, or kind), each value the report's own over its window.
#[test]
fn error_rate_and_headroom_alerts_are_the_report_s_figures_per_route() {
    let dir = tempfile::tempdir().unwrap();
    let (db, out) = replayed_incident(
        dir.path(),
        "[[rule]]\nname = \"errors\"\nkind = \"error_rate\"\nthreshold = 0.2\nwindow = \"6s\"\nmin_workflows = 20\n\n\
         [[rule]]\nname = \"headroom\"\nkind = \"ratelimit_headroom\"\nwindow = \"6s\"\n",
    );
    let db_text = db.to_str().unwrap();
    let check: Value = serde_json::from_str(&out).unwrap();
    let events = check["events"].as_array().unwrap();
    let firing: Vec<&Value> = events.iter().filter(|e| e["state"] == "firing").collect();
    let keys: Vec<&str> = firing.iter().map(|e| e["key"].as_str().unwrap()).collect();
    assert!(
        keys.contains(
            &"errors{error_class=\"rate_limit\",served_model=\"gpt-4o\",served_provider=\"openai\"}"
        ),
        "{keys:?}"
    );
    assert!(
        keys.contains(&"headroom{kind=\"requests\",served_model=\"gpt-4o\",served_provider=\"openai\"}"),
        "{keys:?}"
    );
    assert!(
        keys.iter().all(|k| !k.contains("anthropic")),
        "the fallback route states no headroom and fails under 20 %: {keys:?}"
    );
    for event in firing {
        let at = chrono::DateTime::parse_from_rfc3339(event["at"].as_str().unwrap()).unwrap();
        let text = |t: chrono::DateTime<chrono::FixedOffset>| t.to_rfc3339_opts(SecondsFormat::Micros, true);
        let report: Value = serde_json::from_str(&run(&[
            "report",
            "--db",
            db_text,
            "--since",
            &text(at - chrono::Duration::seconds(6)),
            "--until",
            &text(at),
            "--format",
            "json",
        ]))
        .unwrap();
        let labels = &event["labels"];
        let route = |r: &&Value| {
            r["served_provider"] == labels["served_provider"] && r["served_model"] == labels["served_model"]
        };
        let value = if event["rule"] == "errors" {
            let row = report["error_rates"]
                .as_array()
                .unwrap()
                .iter()
                .filter(route)
                .find(|r| r["error_class"] == labels["error_class"])
                .unwrap();
            assert_eq!(
                row["rate"].as_f64().unwrap(),
                row["failed"].as_f64().unwrap() / row["attempts"].as_f64().unwrap()
            );
            row["rate"].clone()
        } else {
            report["headroom"]
                .as_array()
                .unwrap()
                .iter()
                .filter(route)
                .find(|r| r["kind"] == labels["kind"])
                .unwrap()["min_ratio"]
                .clone()
        };
        assert_eq!(event["value"], value, "{event:#}");
    }
}

#[test]
fn metrics_parse_with_prometheus_and_agree_with_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("metrics.duckdb");
    let service = ServiceProcess::start(&db, &["--metrics-refresh", "100ms"]);
    let mut records = crate::FIXTURE.to_string();
    records += &run(&["simulate", "--scenario", "gateway-reroute", "--workflows", "300"]);
    records += &incident(Utc::now(), 2);
    // A workflow name that needs escaping in the text format.
    records += &crate::rec(serde_json::json!({"workflow_id": "odd", "workflow": "a \"quoted\\ name\nx"}));
    records += "\n";
    let (status, body, _) = service.post("/v1/attempts", "application/x-ndjson", None, records.as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let report = service.report("");
    let stored = report["attempts"]["total"].as_f64().unwrap();

    let mut families = Value::Null;
    wait_for("the stored metrics to include the batch", Duration::from_secs(30), || {
        families = python_parse(&get(&format!("{}/metrics", service.http)));
        total(&families, "attempt_ledger_attempts_total", &[]) == stored
    });
    let f = &families;
    let w = &report["workflows"];
    for outcome in [
        "primary_success",
        "retry_recovery",
        "fallback_recovery",
        "degraded",
        "fail_closed",
        "queued",
        "in_flight",
    ] {
        assert_eq!(
            total(f, "attempt_ledger_workflows", &[("outcome", outcome)]),
            w[outcome].as_f64().unwrap(),
            "{outcome}"
        );
    }
    assert_eq!(total(f, "attempt_ledger_workflows_started_total", &[]), w["total"].as_f64().unwrap());
    assert_eq!(
        total(f, "attempt_ledger_wasted_attempts_total", &[]),
        report["attempts"]["wasted"].as_f64().unwrap()
    );
    for kind in ["input", "output", "cached_input", "cache_write_input", "reasoning_output"] {
        let t = &report["tokens"];
        assert_eq!(
            total(f, "attempt_ledger_tokens_total", &[("type", kind)]),
            t["total"][kind].as_f64().unwrap()
        );
        assert_eq!(
            total(f, "attempt_ledger_wasted_tokens_total", &[("type", kind)]),
            t["wasted"][kind].as_f64().unwrap()
        );
    }
    for p in report["by_served_provider"].as_array().unwrap() {
        let provider = p["served_provider"].as_str().unwrap();
        let labels = [("served_provider", provider)];
        assert_eq!(
            total(f, "attempt_ledger_cost_usd_total", &labels),
            p["cost_usd"].as_f64().unwrap(),
            "{provider}"
        );
        assert_eq!(
            total(f, "attempt_ledger_wasted_cost_usd_total", &labels),
            p["wasted_cost_usd"].as_f64().unwrap()
        );
        assert_eq!(
            total(f, "attempt_ledger_unknown_cost_attempts_total", &labels),
            p["unknown_cost_attempts"].as_f64().unwrap()
        );
        assert_eq!(total(f, "attempt_ledger_attempts_total", &labels), p["attempts"].as_f64().unwrap());
    }
    assert_eq!(
        total(f, "attempt_ledger_retries_total", &[]),
        report["retry_budget"]["retries"].as_f64().unwrap()
    );
    let activations: f64 =
        report["fallbacks"].as_array().unwrap().iter().map(|x| x["workflows"].as_f64().unwrap()).sum();
    assert!(activations > 0.0);
    assert_eq!(total(f, "attempt_ledger_fallback_activations_total", &[]), activations);
    let failed: f64 =
        report["error_classes"].as_array().unwrap().iter().map(|x| x["attempts"].as_f64().unwrap()).sum();
    assert_eq!(total(f, "attempt_ledger_attempt_errors_total", &[]), failed);
    // Every attempt with a duration is in the histogram; +Inf holds them all.
    let timed = total(f, "attempt_ledger_attempt_duration_seconds_count", &[]);
    assert!(timed > 0.0);
    assert_eq!(total(f, "attempt_ledger_attempt_duration_seconds_bucket", &[("le", "+Inf")]), timed);
    assert!(
        total(f, "attempt_ledger_workflows_started_total", &[("workflow", "a \"quoted\\ name\nx")]) == 1.0
    );
    // The service's own health.
    assert_eq!(total(f, "attempt_ledger_ingest_records_total", &[("result", "accepted")]), stored);
    assert!(total(f, "attempt_ledger_ingest_batches_committed_total", &[]) >= 1.0);
    assert_eq!(total(f, "attempt_ledger_ingest_queue_depth", &[]), 0.0);
    // No workflow_id is ever a label.
    let text = get(&format!("{}/metrics", service.http));
    assert!(!text.contains("workflow_id") && !text.contains("chat-000"), "a workflow id leaked into a label");
}

#[test]
fn the_example_rule_file_is_what_serve_reads() {
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/alerts.toml");
    // A rule file with a mistake stops `serve` with the rule and field named.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[rule]]\nname = \"p\"\nkind = \"primary_success\"\n").unwrap();
    let out = Command::new(BIN)
        .args([
            "serve",
            "--db",
            dir.path().join("x.duckdb").to_str().unwrap(),
            "--rules",
            bad.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rule \"p\"") && stderr.contains("threshold"), "{stderr}");
    // The example loads in `alerts --check` (the same parser as serve).
    let db = dir.path().join("fixture.duckdb");
    let fixture = dir.path().join("fixture.jsonl");
    std::fs::write(&fixture, crate::FIXTURE).unwrap();
    run(&["ingest", "--db", db.to_str().unwrap(), fixture.to_str().unwrap()]);
    let out = run(&[
        "alerts",
        "--check",
        "--db",
        db.to_str().unwrap(),
        "--rules",
        example,
        "--step",
        "5m",
        "--format",
        "json",
    ]);
    let check: Value = serde_json::from_str(&out).unwrap();
    // The fixture's insufficient_quota failures trip the example's quota rule.
    let quota = check["rules"].as_array().unwrap().iter().find(|r| r["rule"] == "quota-exhausted").unwrap();
    assert_eq!(quota["fired"], 1, "{out}");
}

/// The `alertmanager` receiver against a real Alertmanager (Debian's
/// `prometheus-alertmanager`): each alert of the incident shows up in its
/// `/api/v2/alerts` while firing, and leaves it once resolved.
#[test]
fn a_real_alertmanager_receives_the_alerts_and_sees_them_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let port = closed_port();
    let config = dir.path().join("alertmanager.yml");
    std::fs::write(&config, "route:\n  receiver: nobody\n  group_wait: 1s\nreceivers:\n  - name: nobody\n")
        .unwrap();
    let mut alertmanager = Command::new("prometheus-alertmanager")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", dir.path().join("am").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus-alertmanager is installed (scripts/debian-packages.sh)");
    let api = format!("http://127.0.0.1:{port}/api/v2/alerts");
    let active = || -> Option<Vec<String>> {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut response = agent.get(&api).call().ok()?;
        let alerts: Value = serde_json::from_slice(&response.body_mut().read_to_vec().ok()?).ok()?;
        let mut names: Vec<String> = alerts
            .as_array()?
            .iter()
            .filter(|a| a["status"]["state"] == "active")
            .map(|a| a["labels"]["alertname"].as_str().unwrap_or("").to_string())
            .collect();
        names.sort();
        Some(names)
    };
    wait_for("Alertmanager to answer", Duration::from_secs(30), || active().is_some());

    let rules = format!(
        "[evaluation]\ninterval = \"100ms\"\n\n[[receiver]]\nname = \"am\"\nkind = \"alertmanager\"\nurl = \"{api}\"\n{RULES}"
    );
    let rules_path = dir.path().join("rules.toml");
    std::fs::write(&rules_path, rules).unwrap();
    let db = dir.path().join("am.duckdb");
    let service =
        ServiceProcess::start(&db, &["--rules", rules_path.to_str().unwrap(), "--metrics-refresh", "100ms"]);
    let records = incident(Utc::now() - chrono::Duration::seconds(4), 4);
    let (status, _, _) = service.post("/v1/attempts", "application/x-ndjson", None, records.as_bytes());
    assert_eq!(status, 200);

    wait_for("the four alerts active in Alertmanager", Duration::from_secs(60), || {
        active().is_some_and(|names| names == ["fallback", "primary", "quota", "retries"])
    });
    wait_for("every alert resolved in Alertmanager", Duration::from_secs(60), || {
        active().is_some_and(|names| names.is_empty())
    });
    assert!(service.terminate().success());
    let _ = alertmanager.kill();
    let _ = alertmanager.wait();
}
