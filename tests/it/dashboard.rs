//! The built-in dashboard: every page in a real headless Chromium (Debian's
//! `chromium` through `chromium-driver`, driven by Selenium) against a
//! service holding the demo's simulated incidents, with access tokens on;
//! and what a script or a hostile URL gets from the page routes.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use crate::service::Service;

const READ: &str = "read-token-for-the-dashboard-test";
const INGEST: &str = "ingest-token-for-the-dashboard-test";
const BIN: &str = env!("CARGO_BIN_EXE_attempt-ledger");

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).max_redirects(0).build().into()
}

/// GET with an optional bearer token: status, headers we look at, body.
fn get(url: &str, token: Option<&str>) -> (u16, HashMap<String, String>, String) {
    let mut request = agent().get(url);
    if let Some(token) = token {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    let mut response = request.call().unwrap();
    let headers = ["location", "content-type", "content-security-policy"]
        .iter()
        .filter_map(|h| response.headers().get(*h).map(|v| (h.to_string(), v.to_str().unwrap().to_string())))
        .collect();
    let body = response.body_mut().with_config().limit(64 << 20).read_to_string().unwrap();
    (response.status().as_u16(), headers, body)
}

fn tokens_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("tokens");
    std::fs::write(&path, format!("read {READ}\ningest {INGEST}\n")).unwrap();
    path
}

/// The workflow of the demo's fallback scenario with the most attempts.
fn busiest_workflow(jsonl: &Path) -> String {
    let mut attempts: HashMap<String, usize> = HashMap::new();
    for line in std::fs::read_to_string(jsonl).unwrap().lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        *attempts.entry(record["workflow_id"].as_str().unwrap().to_string()).or_default() += 1;
    }
    attempts.into_iter().max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0))).unwrap().0
}

#[test]
fn every_page_renders_in_chromium_and_shows_the_reports_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let demo = Command::new(BIN).args(["demo", "--dir"]).arg(dir.path()).output().unwrap();
    assert!(demo.status.success(), "{}", String::from_utf8_lossy(&demo.stderr));
    let workflow = busiest_workflow(&dir.path().join("rate-limit-fallback.jsonl"));
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[evaluation]\ninterval = \"500ms\"\n\n[[rule]]\nname = \"fallback\"\nkind = \"fallback_activation\"\nwindow = \"1h\"\n",
    )
    .unwrap();
    let tokens = tokens_file(dir.path());
    let service = Service::start(
        &dir.path().join("demo.duckdb"),
        &["--tokens", tokens.to_str().unwrap(), "--rules", rules.to_str().unwrap()],
    );
    // Fresh fallbacks, so an alert fires while the browser looks.
    let start = (chrono::Utc::now() - chrono::Duration::minutes(20)).to_rfc3339();
    let fresh = Command::new(BIN)
        .args(["simulate", "--scenario", "rate-limit-fallback", "--workflows", "200", "--seed", "7"])
        .args(["--start", &start, "--duration", "10m"])
        .output()
        .unwrap();
    assert!(fresh.status.success());
    // The simulator numbers workflows from 0: ids of their own, or they
    // would conflict with the demo night's.
    let fresh = String::from_utf8(fresh.stdout).unwrap().replace("\"chat-", "\"fresh-chat-");
    let posted = agent()
        .post(&format!("{}/v1/attempts", service.http))
        .header("Content-Type", "application/x-ndjson")
        .header("Authorization", &format!("Bearer {INGEST}"))
        .send(fresh.as_bytes())
        .unwrap();
    assert_eq!(posted.status().as_u16(), 200);

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots");
    let _ = std::fs::remove_dir_all(&shots);
    let out = crate::python()
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/dashboard_browser.py"))
        .args([&service.http, READ, shots.to_str().unwrap(), &workflow])
        .args(["2026-11-28T00:00:00Z", "2026-11-29T00:00:00Z"])
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the browser test failed:\n{said}");
    println!("{said}");
    for page in ["overview", "cost", "attempts", "capacity", "audit", "tune", "workflow", "alerts"] {
        let png = std::fs::read(shots.join(format!("{page}.png"))).unwrap();
        assert!(png.starts_with(b"\x89PNG") && png.len() > 20_000, "{page}.png is {} bytes", png.len());
    }
}

#[test]
fn pages_ask_people_to_sign_in_and_scripts_for_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens_file(dir.path());
    let service = Service::start(&dir.path().join("d.duckdb"), &["--tokens", tokens.to_str().unwrap()]);
    let (status, headers, _) = get(&format!("{}/cost?since=2h&workflow=a%26b", service.http), None);
    assert_eq!(status, 303);
    assert_eq!(headers["location"], "/login?next=%2Fcost%3Fsince%3D2h%26workflow%3Da%2526b");
    let (status, _, _) = get(&format!("{}/api/v1/timeseries", service.http), None);
    assert_eq!(status, 401, "a script gets the 401, not a login page");
    let (status, _, _) = get(&format!("{}/", service.http), Some(INGEST));
    assert_eq!(status, 403, "an ingest token reads nothing");
    let (status, headers, body) = get(&format!("{}/", service.http), Some(READ));
    assert_eq!(status, 200);
    assert!(headers["content-security-policy"].contains("default-src 'none'"));
    assert!(body.contains("No workflows in this range"), "an empty database draws empty charts");
}

#[test]
fn a_hostile_url_is_escaped_or_named_in_an_html_error() {
    let dir = tempfile::tempdir().unwrap();
    let service = Service::start(&dir.path().join("d.duckdb"), &[]);
    let script = "<script>alert(1)</script>";
    let query = serde_urlencoded::to_string([("workflow", script), ("route", "\"><img src=x>")]).unwrap();
    for page in
        ["/", "/cost", "/attempts", "/capacity", "/audit", "/reconcile", "/tune", "/alerts", "/workflow"]
    {
        let (status, headers, body) = get(&format!("{}{page}?{query}", service.http), None);
        assert_eq!(status, 200, "{page}");
        assert!(headers["content-type"].starts_with("text/html"));
        assert!(!body.contains(script) && !body.contains("<img src=x>"), "{page} echoes markup");
        assert!(body.contains("&lt;script&gt;"), "{page} shows the filter, escaped");
    }
    let (status, _, body) = get(&format!("{}/?since=yesterday", service.http), None);
    assert_eq!(status, 400);
    assert!(body.contains("since: `yesterday` is not a time"), "{body}");
    let (status, _, body) = get(&format!("{}/workflow?id=%3Cb%3Enone", service.http), None);
    assert_eq!(status, 404);
    assert!(body.contains("&lt;b&gt;none"));
    let (status, _, body) =
        get(&format!("{}/?step=5m&since=2025-01-01&until=2026-01-01", service.http), None);
    assert_eq!(status, 400, "too many buckets");
    assert!(body.contains("at most 10000"), "{body}");
}
