//! The shipped Prometheus rules and Grafana dashboard against a real
//! Prometheus (Debian's `prometheus`) scraping the service: `promtool check
//! rules` passes, every Grafana panel's query returns data through
//! Prometheus' HTTP API, instant queries of the outcome, route and fallback
//! families agree with the report, and the fallback alerting rule fires.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::service::Service;
use crate::wait_for;

const RULES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/dashboards/prometheus/attempt-ledger.rules.yml");
const DASHBOARD: &str = include_str!("../../dashboards/grafana/attempt-ledger.json");

struct Prometheus {
    child: Child,
    url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    fn start(dir: &Path, target: &str) -> Prometheus {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [\"{RULES}\"]\n\
                 scrape_configs:\n  - job_name: attempt-ledger\n    static_configs:\n      - targets: [\"{target}\"]\n"
            ),
        )
        .unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus is installed (scripts/debian-packages.sh)");
        Prometheus { child, url: format!("http://127.0.0.1:{port}") }
    }

    fn api(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut request = agent.get(&format!("{}{path}", self.url));
        for (k, v) in query {
            request = request.query(k, v);
        }
        match request.call() {
            Ok(mut response) => {
                serde_json::from_slice(&response.body_mut().read_to_vec().unwrap()).unwrap_or(Value::Null)
            }
            Err(_) => Value::Null,
        }
    }

    fn instant(&self, query: &str) -> Vec<Value> {
        let answer = self.api("/api/v1/query", &[("query", query)]);
        assert_eq!(answer["status"], "success", "{query}: {answer}");
        answer["data"]["result"].as_array().unwrap().clone()
    }
}

fn simulated(dir: &Path, seed: &str, start: &str) -> std::path::PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["simulate", "--scenario", "rate-limit-fallback", "--workflows", "300", "--seed", seed])
        .args(["--start", start, "--duration", "10m"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let path = dir.join(format!("sim-{seed}.jsonl"));
    std::fs::write(&path, out.stdout).unwrap();
    path
}

fn number(sample: &Value) -> f64 {
    sample["value"][1].as_str().unwrap().parse().unwrap()
}

#[test]
fn prometheus_rules_and_grafana_panels_work_against_a_real_prometheus() {
    let dir = tempfile::tempdir().unwrap();
    let check =
        Command::new("promtool").args(["check", "rules", RULES]).output().expect("promtool is installed");
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));

    let db = dir.path().join("p.duckdb");
    let now = chrono::Utc::now();
    let first = simulated(dir.path(), "1", &(now - chrono::Duration::minutes(40)).to_rfc3339());
    crate::service::cli_ingest(&db, &first);
    let service = Service::start(&db, &["--metrics-refresh", "1s"]);
    let prometheus = Prometheus::start(dir.path(), service.http.trim_start_matches("http://"));
    wait_for("a first scrape", Duration::from_secs(60), || {
        let answer = prometheus.api("/api/v1/query", &[("query", "up{job=\"attempt-ledger\"}")]);
        answer["data"]["result"][0]["value"][1] == "1"
    });
    // More traffic while Prometheus watches, so rates and deltas move: a
    // few scrapes before it, a few after.
    let scrapes_since = |since: std::time::Instant| {
        let seconds = since.elapsed().as_secs().max(1);
        let query = format!("count_over_time(up{{job=\"attempt-ledger\"}}[{seconds}s])");
        prometheus.instant(&query).first().map_or(0.0, number)
    };
    let watched = std::time::Instant::now();
    wait_for("three scrapes before the second batch", Duration::from_secs(60), || {
        scrapes_since(watched) >= 3.0
    });
    let second =
        std::fs::read(simulated(dir.path(), "2", &(now - chrono::Duration::minutes(20)).to_rfc3339()))
            .unwrap();
    let (status, _, _) = service.post("/v1/attempts", "application/x-ndjson", None, &second);
    assert_eq!(status, 200);
    let posted = std::time::Instant::now();
    wait_for("three scrapes after the second batch", Duration::from_secs(60), || {
        scrapes_since(posted) >= 3.0
    });

    let report = service.report("");
    let fallbacks: f64 =
        report["fallbacks"].as_array().unwrap().iter().map(|f| f["workflows"].as_f64().unwrap()).sum();
    // The refresher recomputes after each derivation round and Prometheus
    // scrapes every second: on a busy machine the last scrape can still
    // hold a round before the report's. Wait for one that holds it (equal
    // totals), then every figure must agree.
    wait_for("a scrape of what the report shows", Duration::from_secs(60), || {
        let total = prometheus.instant("sum(attempt_ledger_workflows)");
        let activations = prometheus.instant("sum(attempt_ledger_fallback_activations_total)");
        total.first().map(number) == report["workflows"]["total"].as_f64()
            && activations.first().map(number) == Some(fallbacks)
    });
    // Instant queries agree with the report.
    let by_outcome: BTreeMap<String, f64> = prometheus
        .instant("sum by (outcome) (attempt_ledger_workflows)")
        .iter()
        .map(|s| (s["metric"]["outcome"].as_str().unwrap().to_string(), number(s)))
        .collect();
    for (outcome, count) in report["workflows"].as_object().unwrap() {
        if outcome != "total" {
            assert_eq!(by_outcome.get(outcome).copied().unwrap_or(0.0), count.as_f64().unwrap(), "{outcome}");
        }
    }
    assert!(fallbacks > 0.0, "the scenario falls back");
    let fallback_series = prometheus.instant("sum(attempt_ledger_fallback_activations_total)");
    assert_eq!(number(&fallback_series[0]), fallbacks);
    for route in report["by_primary_route"].as_array().unwrap() {
        let query = format!(
            "sum(attempt_ledger_route_workflows{{primary_provider=\"{}\",primary_model=\"{}\",outcome=\"primary_success\"}})",
            route["provider"].as_str().unwrap(),
            route["model"].as_str().unwrap()
        );
        assert_eq!(
            number(&prometheus.instant(&query)[0]),
            route["primary_success"].as_f64().unwrap(),
            "{query}"
        );
    }

    // Every Grafana panel's query, with the dashboard's variables filled in
    // as Grafana would, returns data.
    let dashboard: Value = serde_json::from_str(DASHBOARD).unwrap();
    let end = chrono::Utc::now().timestamp();
    let (start, end) = ((end - 60).to_string(), end.to_string());
    let mut queried = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "15s")
                .replace("$workflow", ".*")
                .replace("$retry_budget", "0.1");
            let answer = prometheus.api(
                "/api/v1/query_range",
                &[("query", &expr), ("start", &start), ("end", &end), ("step", "1")],
            );
            assert_eq!(answer["status"], "success", "{}: {expr}: {answer}", panel["title"]);
            let series = answer["data"]["result"].as_array().unwrap();
            assert!(!series.is_empty(), "panel {:?} returns no data: {expr}", panel["title"]);
            queried += 1;
        }
    }
    assert!(queried >= 13, "{queried} panel queries");

    // The fallback alerting rule fires on the new fallbacks.
    wait_for("AttemptLedgerFallbackActivated to fire", Duration::from_secs(30), || {
        prometheus.api("/api/v1/alerts", &[])["data"]["alerts"].as_array().is_some_and(|alerts| {
            alerts.iter().any(|a| {
                a["labels"]["alertname"] == "AttemptLedgerFallbackActivated" && a["state"] == "firing"
            })
        })
    });
}

/// The Grafana JSON imports as is: a `datasource` variable every panel and
/// query uses (no data source uid baked in), unique panel ids, panels inside
/// the 24-column grid and not overlapping, and a query in every panel.
#[test]
fn the_grafana_dashboard_is_importable_as_is() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).unwrap();
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let datasource = variables.iter().find(|v| v["name"] == "datasource").expect("a datasource variable");
    assert_eq!(
        (datasource["type"].as_str(), datasource["query"].as_str()),
        (Some("datasource"), Some("prometheus"))
    );
    assert!(
        dashboard["uid"].is_string()
            && dashboard["title"].is_string()
            && dashboard["schemaVersion"].is_number()
    );
    let panels = dashboard["panels"].as_array().unwrap();
    let mut ids = std::collections::HashSet::new();
    let mut cells = std::collections::HashSet::new();
    for panel in panels {
        assert!(ids.insert(panel["id"].as_i64().unwrap()), "panel id {} twice", panel["id"]);
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
        let targets = panel["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{}", panel["title"]);
        for target in targets {
            assert_eq!(target["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
            assert!(
                target["expr"]
                    .as_str()
                    .is_some_and(|e| e.contains("attempt_ledger") || e.contains("vector("))
            );
        }
        let grid = &panel["gridPos"];
        let (x, y, w, h) = (
            grid["x"].as_i64().unwrap(),
            grid["y"].as_i64().unwrap(),
            grid["w"].as_i64().unwrap(),
            grid["h"].as_i64().unwrap(),
        );
        assert!(x >= 0 && w > 0 && x + w <= 24 && h > 0, "{} outside the grid", panel["title"]);
        for col in x..x + w {
            for row in y..y + h {
                assert!(cells.insert((col, row)), "{} overlaps another panel", panel["title"]);
            }
        }
    }
}
