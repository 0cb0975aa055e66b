//! The recovery audit, one pair of hand-written cases per finding: one that
//! must be found and one close to it that must not (docs/record-format.md,
//! "The audit"), plus the examples, costs and the CLI and HTTP answers.

use attempt_core::policy::LoadedPolicy;
use attempt_core::policy::PolicySet;
use attempt_core::pricing::PriceTable;
use attempt_core::request::Window;
use attempt_ledger::report::audit::{Audit, Finding};
use serde_json::{Value, json};

use crate::{rec, store_with};

fn audit_of(lines: &[String]) -> Audit {
    audit_with(lines, "")
}

/// The audit of `lines` under the policy file `policy` (TOML).
fn audit_with(lines: &[String], policy: &str) -> Audit {
    let store = store_with(lines);
    let policy = LoadedPolicy { file: None, set: PolicySet::parse(policy, "test").unwrap() };
    Audit::of(
        &policy,
        &store.audit(&Window::default().audited_with(&policy.set), &PriceTable::load(None).unwrap()).unwrap(),
    )
}

fn finding<'a>(audit: &'a Audit, name: &str) -> &'a Finding {
    audit.findings.iter().find(|f| f.finding.name() == name).unwrap()
}

/// (workflows, attempts) of each finding that has any.
fn found(lines: &[String]) -> Vec<(&'static str, i64, i64)> {
    audit_of(lines)
        .findings
        .iter()
        .filter(|f| f.count() > 0)
        .map(|f| (f.finding.name(), f.count(), f.attempts))
        .collect()
}

fn at(second: u32) -> String {
    format!("2026-11-28T02:00:{second:02}Z")
}

fn failed(attempt: u32, second: u32, extra: Value) -> String {
    let mut fields =
        json!({"attempt": attempt, "started_at": at(second), "status": "error", "decision": "retry"});
    for (k, v) in extra.as_object().unwrap() {
        fields[k] = v.clone();
    }
    rec(fields)
}

fn ok(attempt: u32, second: u32, extra: Value) -> String {
    let mut fields =
        json!({"attempt": attempt, "started_at": at(second), "input_tokens": 1000, "output_tokens": 100});
    for (k, v) in extra.as_object().unwrap() {
        fields[k] = v.clone();
    }
    rec(fields)
}

#[test]
fn a_request_error_retried_on_the_same_route_is_found_a_transient_one_is_not() {
    let context_too_long = json!({"error_class": "request", "error_code": "context_length_exceeded",
                                  "input_tokens": 200000, "output_tokens": 0});
    let lines = [failed(0, 0, context_too_long.clone()), failed(1, 1, context_too_long), ok(2, 2, json!({}))];
    assert_eq!(
        found(&lines),
        [("nonretryable_retried", 1, 2)],
        "the 2nd and 3rd attempts repeat the request"
    );
    let audit = audit_of(&lines);
    let f = finding(&audit, "nonretryable_retried");
    assert_eq!((f.input_tokens, f.output_tokens), (201_000, 100), "the retried prompt and the final answer");
    assert_eq!(f.by_class.get("request"), Some(&2));
    assert_eq!(f.examples, ["w1"]);

    let transient = [failed(0, 0, json!({"http_status": 529})), ok(1, 1, json!({}))];
    assert_eq!(found(&transient), [], "a 529 may be retried");
    let fixed_elsewhere = [
        failed(0, 0, json!({"error_class": "request"})),
        ok(1, 1, json!({"provider": "anthropic", "model": "claude-haiku-4-5"})),
    ];
    assert_eq!(found(&fixed_elsewhere), [], "another route is not a retry (and not a policy fallback)");
}

#[test]
fn a_fallback_after_a_refusal_is_found_a_fallback_after_a_429_is_not() {
    let other = json!({"provider": "anthropic", "model": "claude-haiku-4-5", "route": "fallback"});
    let refused =
        [failed(0, 0, json!({"error_class": "policy", "decision": "fallback"})), ok(1, 1, other.clone())];
    assert_eq!(found(&refused), [("fallback_after_policy", 1, 1)]);
    let limited = [failed(0, 0, json!({"http_status": 429, "decision": "fallback"})), ok(1, 1, other)];
    assert_eq!(found(&limited), []);
}

#[test]
fn an_attempt_after_a_commit_or_shown_output_is_a_replay_one_before_is_not() {
    for (marker, class) in [
        (json!({"commit_state": "committed"}), "committed"),
        (json!({"commit_state": "unknown"}), "unknown"),
        (json!({"visible_output": true, "error_class": "stream_interrupted"}), "visible_output"),
    ] {
        let lines = [failed(0, 0, marker), ok(1, 1, json!({}))];
        let audit = audit_of(&lines);
        let f = finding(&audit, "replay_after_commit");
        assert_eq!((f.count(), f.attempts), (1, 1), "{class}");
        assert_eq!(f.by_class.keys().collect::<Vec<_>>(), [class]);
    }
    // The commit on the last attempt: nothing came after it.
    let last = [failed(0, 0, json!({"http_status": 503})), ok(1, 1, json!({"commit_state": "committed"}))];
    assert_eq!(found(&last), []);
    let none = [
        failed(0, 0, json!({"http_status": 503, "commit_state": "none", "visible_output": false})),
        ok(1, 1, json!({})),
    ];
    assert_eq!(found(&none), []);
}

#[test]
fn retrying_before_the_retry_after_is_found_waiting_it_out_is_not() {
    // Failed at :00 after 1 s, asked for 10 s: the next attempt is due at :11.
    let asked = json!({"http_status": 429, "duration_ms": 1000, "retry_after_ms": 10000});
    let early = [failed(0, 0, asked.clone()), ok(1, 5, json!({}))];
    assert_eq!(found(&early), [("retry_after_ignored", 1, 1)]);
    // Within the 1 s slack of second-resolution logs.
    let on_time = [failed(0, 0, asked.clone()), ok(1, 10, json!({}))];
    assert_eq!(found(&on_time), []);
    // Another provider owes nothing to this one's retry-after.
    let elsewhere =
        [failed(0, 0, asked), ok(1, 1, json!({"provider": "anthropic", "model": "claude-haiku-4-5"}))];
    assert_eq!(found(&elsewhere), []);
}

#[test]
fn a_timeout_with_output_then_retried_is_found_one_without_output_is_not() {
    let cut =
        json!({"error_class": "timeout", "duration_ms": 30000, "input_tokens": 5000, "output_tokens": 800});
    let lines = [failed(0, 0, cut), ok(1, 31, json!({}))];
    assert_eq!(found(&lines), [("timeout_output_retried", 1, 1)]);
    assert_eq!(
        finding(&audit_of(&lines), "timeout_output_retried").output_tokens,
        800,
        "the timed-out attempt"
    );
    let silent =
        json!({"error_class": "timeout", "duration_ms": 30000, "input_tokens": 5000, "output_tokens": 0});
    assert_eq!(found(&[failed(0, 0, silent), ok(1, 31, json!({}))]), []);
    let given_up = json!({"error_class": "timeout", "output_tokens": 800, "decision": "fail_closed"});
    assert_eq!(found(&[failed(0, 0, given_up)]), [], "nothing came after it");
}

#[test]
fn examples_are_the_latest_workflows_and_the_window_and_name_select() {
    let mut lines = Vec::new();
    for (i, second) in [(1, 0), (2, 20), (3, 10)] {
        let id = format!("w{i}");
        let request = json!({"workflow_id": id, "error_class": "request", "input_tokens": 100, "output_tokens": 0,
                             "workflow": if i == 3 { "batch" } else { "chat" }});
        lines.push(failed(0, second, request.clone()));
        lines.push(failed(1, second + 1, request));
    }
    let store = store_with(&lines);
    let prices = PriceTable::load(None).unwrap();
    let policy = LoadedPolicy::default();
    let mut filter = Window::default().audited_with(&policy.set);
    filter.examples = 2;
    let audit = Audit::of(&policy, &store.audit(&filter, &prices).unwrap());
    let f = finding(&audit, "nonretryable_retried");
    assert_eq!(f.count(), 3);
    assert_eq!(f.examples, ["w2", "w3"], "the latest first attempt first, at most 2");
    assert!(f.cost_usd > 0.0);
    filter.window.workflow = Some("batch".into());
    let audit = Audit::of(&policy, &store.audit(&filter, &prices).unwrap());
    assert_eq!(finding(&audit, "nonretryable_retried").examples, ["w3"]);
    filter.window.workflow = None;
    filter.window.since = Some(chrono::DateTime::parse_from_rfc3339("2026-11-28T03:00:00Z").unwrap().into());
    let audit = Audit::of(&policy, &store.audit(&filter, &prices).unwrap());
    assert!(audit.findings.iter().all(|f| f.count() == 0), "outside the window");
}

#[test]
fn arrival_order_and_redelivery_never_change_the_findings() {
    let lines = [
        failed(0, 0, json!({"error_class": "request"})),
        failed(1, 1, json!({"error_class": "request", "commit_state": "unknown"})),
        failed(2, 2, json!({"http_status": 429, "retry_after_ms": 5000, "duration_ms": 10})),
        ok(3, 3, json!({})),
    ];
    let want = audit_of(&lines);
    assert!(want.findings.iter().filter(|f| f.count() > 0).count() >= 3, "{want:?}");
    let mut reversed: Vec<String> = lines.iter().rev().cloned().collect();
    assert_eq!(audit_of(&reversed), want);
    reversed.extend(lines.iter().cloned());
    let store = store_with(&reversed[..4]);
    let decoded = attempt_core::ingest::jsonl::decode_lines(&reversed[4..].join("\n"), 1);
    store.write_batch(&decoded.attempts).unwrap();
    let policy = LoadedPolicy::default();
    let again = Audit::of(
        &policy,
        &store.audit(&Window::default().audited_with(&policy.set), &PriceTable::load(None).unwrap()).unwrap(),
    );
    assert_eq!(again, want, "a redelivered batch in a second write");
}

#[test]
fn the_cli_and_the_http_route_answer_the_same_audit() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.jsonl");
    let lines = [
        failed(0, 0, json!({"error_class": "auth", "http_status": 401})),
        failed(1, 1, json!({"error_class": "auth"})),
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let db = dir.path().join("a.duckdb");
    crate::service::cli_ingest(&db, &file);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["audit", "--db", db.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli["findings"][0]["finding"], "nonretryable_retried");
    assert_eq!(cli["findings"][0]["by_class"], json!({"auth": 1}));
    let table = std::process::Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["audit", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&table.stdout).contains("nonretryable_retried"));
    // The report's audit section is the same audit, on the CLI (before the
    // service holds the file) and over HTTP; `--no-audit` / `audit=false` leave it out.
    assert_eq!(crate::service::cli_report(&db)["audit"], cli);
    assert!(crate::service::cli_report_with(&db, &["--no-audit"]).get("audit").is_none());
    let csv = std::process::Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["report", "--db", db.to_str().unwrap(), "--format", "csv"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&csv.stdout).contains("audit.findings[nonretryable_retried].workflows,1"),
        "the CSV names each finding"
    );
    let service = crate::service::Service::start(&db, &[]);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let http: Value = serde_json::from_slice(
        &agent
            .get(&format!("{}/api/v1/audit", service.http))
            .call()
            .unwrap()
            .body_mut()
            .read_to_vec()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(http, cli);
    let bad = agent.get(&format!("{}/api/v1/audit?since=later", service.http)).call().unwrap();
    assert_eq!(bad.status().as_u16(), 400);
    let get = |query: &str| -> (u16, Value) {
        let mut answer = agent.get(&format!("{}/api/v1/report{query}", service.http)).call().unwrap();
        (
            answer.status().as_u16(),
            serde_json::from_slice(&answer.body_mut().read_to_vec().unwrap()).unwrap_or_default(),
        )
    };
    assert_eq!(get("").1["audit"], cli);
    let (status, without) = get("?audit=false");
    assert_eq!((status, without.get("audit")), (200, None));
    assert_eq!(get("?audit=maybe").0, 400);
}

#[test]
fn sdk_retries_under_app_retries_are_stacked_one_layer_retrying_is_not() {
    let lines = [
        failed(0, 0, json!({"layer": "app", "http_status": 529})),
        failed(1, 1, json!({"layer": "sdk", "http_status": 529})),
        failed(2, 2, json!({"layer": "sdk", "http_status": 529})),
        failed(3, 3, json!({"layer": "app", "http_status": 529})),
        ok(4, 4, json!({"layer": "sdk"})),
    ];
    assert_eq!(found(&lines), [("stacked_retries", 1, 4)], "every retry of the workflow");
    let stacked = finding(&audit_of(&lines), "stacked_retries").clone();
    assert_eq!((stacked.workflow_attempts, stacked.amplification), (Some(5), Some(5.0)), "all five attempts");
    assert_eq!(
        finding(&audit_of(&lines), "stacked_retries").by_class.keys().collect::<Vec<_>>(),
        ["app+sdk"]
    );
    let one_layer = [
        failed(0, 0, json!({"layer": "sdk", "http_status": 529})),
        failed(1, 1, json!({"layer": "sdk", "http_status": 529})),
        ok(2, 2, json!({"layer": "sdk"})),
    ];
    assert_eq!(found(&one_layer), []);
    // An app call after a fallback is a new route, not a retry of the old one.
    let fell_back = [
        failed(0, 0, json!({"layer": "sdk", "http_status": 529})),
        failed(1, 1, json!({"layer": "sdk", "http_status": 529, "decision": "fallback"})),
        ok(2, 2, json!({"layer": "app", "provider": "anthropic", "model": "claude-haiku-4-5"})),
    ];
    assert_eq!(found(&fell_back), []);
}

#[test]
fn a_policy_violation_rule_fires_per_finding_and_names_its_examples() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.jsonl");
    let lines = [
        failed(0, 0, json!({"workflow_id": "w-quota", "error_class": "quota"})),
        failed(1, 1, json!({"workflow_id": "w-quota", "error_class": "quota"})),
        failed(0, 2, json!({"workflow_id": "w-commit", "http_status": 503, "commit_state": "committed"})),
        ok(1, 3, json!({"workflow_id": "w-commit"})),
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let db = dir.path().join("a.duckdb");
    crate::service::cli_ingest(&db, &file);
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[[rule]]\nname = \"any\"\nkind = \"policy_violation\"\nwindow = \"1m\"\n\n\
         [[rule]]\nname = \"replay\"\nkind = \"policy_violation\"\nfinding = \"replay_after_commit\"\nwindow = \"1m\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["alerts", "--check", "--db", db.to_str().unwrap(), "--rules", rules.to_str().unwrap()])
        .args(["--since", "2026-11-28T02:00:00Z", "--until", "2026-11-28T02:00:30Z", "--step", "10s"])
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let check: Value = serde_json::from_slice(&out.stdout).unwrap();
    let firing: Vec<(String, String, f64, String)> = check["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["state"] == "firing")
        .map(|e| {
            (
                e["rule"].as_str().unwrap().to_string(),
                e["labels"]["finding"].as_str().unwrap().to_string(),
                e["value"].as_f64().unwrap(),
                e["summary"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let keys: Vec<(&str, &str, f64)> =
        firing.iter().map(|(r, f, v, _)| (r.as_str(), f.as_str(), *v)).collect();
    assert_eq!(
        keys,
        [
            ("any", "nonretryable_retried", 1.0),
            ("any", "replay_after_commit", 1.0),
            ("replay", "replay_after_commit", 1.0)
        ],
        "{check}"
    );
    assert!(firing[0].3.contains("w-quota") && firing[1].3.contains("w-commit"), "{firing:?}");

    std::fs::write(&rules, "[[rule]]\nname = \"x\"\nkind = \"policy_violation\"\nfinding = \"retried\"\n")
        .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["alerts", "--check", "--db", db.to_str().unwrap(), "--rules", rules.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("`finding` = \"retried\" is not one of"));
}

#[test]
fn a_policy_file_sets_each_workflows_limits_and_routes() {
    let policy = r#"
[default]
fail_closed_on = ["auth"]

[[workflow]]
name = "summary"
retryable = ["transient"]
max_total_attempts = 2
max_elapsed_ms = 3000
max_extra_cost_usd = 0.001
approved_fallbacks = ["summary-backup"]
queue_allowed = false
"#;
    let summary = |extra: Value| {
        let mut v =
            json!({"workflow": "summary", "input_tokens": 10000, "output_tokens": 0, "http_status": 503});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    // Four calls over 6 s: the 3rd and 4th are over the attempt budget, the
    // 4th (at +6 s) over the time budget; the 2nd, 3rd and 4th follow
    // $0.0015, $0.003 and $0.0045 of waste (10k input tokens of gpt-4o-mini
    // per failure: over $0.001); the 4th is a fallback to an unapproved route
    // and queued; the retry after the 429 breaks `retryable`.
    let lines = [
        failed(0, 0, summary(json!({}))),
        failed(1, 1, summary(json!({"http_status": 429}))),
        failed(2, 2, summary(json!({}))),
        ok(
            3,
            6,
            summary(json!({"provider": "anthropic", "model": "claude-haiku-4-5", "route": "fallback",
                                "status": "ok", "http_status": 200, "decision": "queue"})),
        ),
    ];
    let audit = audit_with(&lines, policy);
    let got = |name: &str| {
        let f = finding(&audit, name);
        (f.count(), f.attempts)
    };
    assert_eq!(got("over_attempt_budget"), (1, 2));
    assert_eq!(got("over_time_budget"), (1, 1));
    assert_eq!(got("over_cost_budget"), (1, 3));
    assert_eq!(got("unapproved_fallback"), (1, 1));
    assert_eq!(
        finding(&audit, "unapproved_fallback").by_class.keys().collect::<Vec<_>>(),
        ["anthropic/claude-haiku-4-5"]
    );
    assert_eq!(got("queued_forbidden"), (1, 1));
    assert_eq!(got("nonretryable_retried"), (1, 1), "the retry after the 429: only transient may be retried");
    assert_eq!(audit.policy_workflows, ["summary"]);

    // The same traffic under another name has the default's rules: none of these.
    let other: Vec<String> = lines.iter().map(|l| l.replace("\"summary\"", "\"other\"")).collect();
    let audit = audit_with(&other, policy);
    assert!(
        audit.findings.iter().filter(|f| f.count() > 0).all(|f| f.finding.name() == "stacked_retries"),
        "{:?}",
        audit.findings.iter().filter(|f| f.count() > 0).map(|f| f.finding).collect::<Vec<_>>()
    );

    // An approved route, a workflow within its limits: nothing.
    let within = [
        failed(0, 0, summary(json!({"input_tokens": 100}))),
        ok(
            1,
            1,
            summary(json!({"route_group": "summary-backup", "route": "fallback", "status": "ok",
                                 "http_status": 200, "input_tokens": 100})),
        ),
    ];
    assert!(audit_with(&within, policy).findings.iter().all(|f| f.count() == 0));
}

#[test]
fn a_fail_closed_class_stops_everything_after_it() {
    let policy = "[default]\nfail_closed_on = [\"auth\"]\n";
    let lines = [
        failed(0, 0, json!({"error_class": "auth", "decision": "fallback"})),
        ok(1, 1, json!({"provider": "anthropic", "model": "claude-haiku-4-5", "route": "fallback"})),
    ];
    let audit = audit_with(&lines, policy);
    assert_eq!(
        (finding(&audit, "fail_closed_ignored").count(), finding(&audit, "fail_closed_ignored").attempts),
        (1, 1)
    );
    assert_eq!(
        audit_of(&lines).findings.iter().filter(|f| f.count() > 0).count(),
        0,
        "no policy: a fallback after auth is allowed"
    );
}

#[test]
fn the_example_policy_file_loads() {
    let policy =
        PolicySet::load(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/policy.toml")))
            .unwrap();
    assert_eq!(policy.workflows.len(), 3);
    assert_eq!(policy.workflows[0].1.max_total_attempts, Some(3));
}

/// Each scenario's own bookkeeping of what its callers did wrong equals what
/// the audit finds in its records; the clean one (`steady`) has nothing.
#[test]
fn the_audit_finds_what_each_simulated_scenario_broke_and_nothing_in_a_steady_day() {
    use attempt_ledger::simulate::{Scenario, SimOptions, default_start, simulate_with_truth};
    for &scenario in <Scenario as clap::ValueEnum>::value_variants() {
        let options =
            SimOptions { scenario, workflows: Some(1_500), seed: 3, start: default_start(), span: None };
        let mut out = Vec::new();
        let (_, truth) = simulate_with_truth(&options, &mut out).unwrap();
        let lines: Vec<String> = String::from_utf8(out).unwrap().lines().map(str::to_string).collect();
        let audit = audit_of(&lines);
        for f in &audit.findings {
            let want = truth.findings.get(&f.finding).copied().unwrap_or((0, 0));
            assert_eq!(
                (f.count() as u64, f.attempts as u64),
                want,
                "{scenario:?}: {} (workflows, attempts): the audit vs the simulator's bookkeeping",
                f.finding
            );
        }
        let found: Vec<&str> =
            audit.findings.iter().filter(|f| f.count() > 0).map(|f| f.finding.name()).collect();
        match scenario {
            Scenario::Steady => assert_eq!(found, Vec::<&str>::new(), "a steady day breaks nothing"),
            Scenario::NaiveRetries => {
                for f in ["nonretryable_retried", "retry_after_ignored", "stacked_retries"] {
                    assert!(found.contains(&f), "naive-retries should break {f}: {found:?}");
                }
            }
            Scenario::UnsafeFallback => {
                for f in ["fallback_after_policy", "replay_after_commit"] {
                    assert!(found.contains(&f), "unsafe-fallback should break {f}: {found:?}");
                }
            }
            _ => {}
        }
    }
}

#[test]
fn serve_applies_its_policy_file_and_refuses_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/policy.toml");
    let db = dir.path().join("p.duckdb");
    let service = crate::service::Service::start(&db, &["--policy", example]);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let get = |path: &str| {
        agent.get(&format!("{}{path}", service.http)).call().unwrap().body_mut().read_to_string().unwrap()
    };
    let audit: Value = serde_json::from_str(&get("/api/v1/audit")).unwrap();
    assert_eq!(audit["policy"], example);
    assert_eq!(
        audit["policy_workflows"],
        json!(["summary-interactive", "nightly-classify", "chat-interactive"])
    );
    // minijinja escapes `/` in HTML as well.
    assert!(get("/audit").contains("examples&#x2f;policy.toml"), "the page names the policy");

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[workflow]]\nname = \"x\"\nmax_total_attempts = 0\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args([
            "serve",
            "--db",
            db.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--otlp-grpc",
            "127.0.0.1:0",
        ])
        .args(["--policy", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("workflow \"x\"") && stderr.contains("max_total_attempts"), "{stderr}");
}

/// `n` workflows named `name` starting in the minute after 02:00, the first
/// `retried` of them retried once (a transient 503: no other finding).
fn minute_of_traffic(name: &str, n: u32, retried: u32) -> Vec<String> {
    let mut lines = Vec::new();
    for i in 0..n {
        let id = json!({"workflow_id": format!("{name}-{i}"), "workflow": name});
        if i < retried {
            let mut first = id.clone();
            first["http_status"] = json!(503);
            lines.push(failed(0, i, first));
            lines.push(ok(1, i + 1, id));
        } else {
            lines.push(ok(0, i, id));
        }
    }
    lines
}

#[test]
fn a_minute_of_retries_past_the_budget_is_found_one_within_it_is_not() {
    // 11 retries against 20 first attempts: above the floor (10) and 10 %.
    let over = minute_of_traffic("batch", 20, 11);
    assert_eq!(found(&over), [("over_retry_budget", 1, 11)], "one minute, its 11 retries");
    let f = finding(&audit_of(&over), "over_retry_budget").clone();
    assert_eq!((f.workflows, f.minutes), (None, Some(1)));
    assert_eq!(f.examples, ["2026-11-28T02:00:00Z"]);
    assert_eq!(f.by_class.into_iter().collect::<Vec<_>>(), [("batch".to_string(), 11)]);
    assert_eq!(found(&minute_of_traffic("batch", 20, 10)), [], "10 retries is the floor, not past it");
    // The budget is each name's: 6 and 5 retries are each within the floor.
    let mut split = minute_of_traffic("a", 10, 6);
    split.extend(minute_of_traffic("b", 10, 5));
    assert_eq!(found(&split), []);
    // The ratio, without a floor: 11 retries pass half of 20 first attempts, not 60 %.
    let half = "[default]\nretry_budget = 0.5\nretry_budget_floor = 0";
    let count = |audit: &Audit| finding(audit, "over_retry_budget").count();
    assert_eq!(count(&audit_with(&over, half)), 1);
    assert_eq!(count(&audit_with(&over, "[default]\nretry_budget = 0.6\nretry_budget_floor = 0")), 0);
    let named = "[[workflow]]\nname = \"batch\"\nretry_budget_floor = 20";
    assert_eq!(count(&audit_with(&over, named)), 0, "the workflow's own floor");
}

/// The rollups sum names past the label limit under `other`; a policy that
/// names one of those is still applied to exactly its workflows.
#[test]
fn a_policy_for_a_name_the_rollups_fold_reads_each_workflow() {
    let mut lines = Vec::new();
    for name in ["first", "second"] {
        let id = json!({"workflow_id": format!("w-{name}"), "workflow": name, "http_status": 503});
        lines.push(failed(0, 0, id.clone()));
        lines.push(failed(1, 1, id.clone()));
        lines.push(ok(2, 2, json!({"workflow_id": format!("w-{name}"), "workflow": name})));
    }
    let store = attempt_ledger::store::Store::open_in_memory().unwrap().with_label_limit(1).unwrap();
    store.write_batch(&attempt_core::ingest::jsonl::decode_lines(&lines.join("\n"), 1).attempts).unwrap();
    let audit = |policy: &str| {
        let policy = LoadedPolicy { file: None, set: PolicySet::parse(policy, "test").unwrap() };
        let filter = Window::default().audited_with(&policy.set);
        Audit::of(&policy, &store.audit(&filter, &PriceTable::load(None).unwrap()).unwrap())
    };
    for name in ["first", "second"] {
        let f = finding(
            &audit(&format!("[[workflow]]\nname = \"{name}\"\nmax_total_attempts = 2")),
            "over_attempt_budget",
        )
        .clone();
        assert_eq!((f.count(), f.attempts, f.examples), (1, 1, vec![format!("w-{name}")]), "{name}");
    }
    let other =
        finding(&audit("[[workflow]]\nname = \"other\"\nmax_total_attempts = 2"), "over_attempt_budget")
            .count();
    assert_eq!(other, 0, "no workflow is named other");
    let default = finding(&audit("[default]\nmax_total_attempts = 2"), "over_attempt_budget").count();
    assert_eq!(default, 2, "the default applies to folded names too");
}

/// A window whose bounds cut minutes answers from the rollups' whole
/// minutes and the per-workflow rows of its edges: the same audit as a
/// store holding only the workflows that started inside it.
#[test]
fn a_window_cutting_minutes_equals_the_audit_of_its_workflows_alone() {
    let mut lines = Vec::new();
    for i in 0..24u32 {
        let start = chrono::DateTime::parse_from_rfc3339("2026-11-28T02:00:00Z").unwrap()
            + chrono::Duration::seconds(i64::from(i) * 17);
        let at = |s: i64| (start + chrono::Duration::seconds(s)).to_rfc3339();
        let id = format!("w{i:02}");
        let class = ["request", "quota", "transient", "policy"][i as usize % 4];
        let layer = if i % 3 == 0 { "sdk" } else { "app" };
        lines.push(rec(json!({"workflow_id": id, "attempt": 0, "started_at": at(0), "status": "error",
                              "error_class": class, "decision": "retry", "layer": "app", "input_tokens": 100 + i})));
        lines.push(rec(json!({"workflow_id": id, "attempt": 1, "started_at": at(2), "status": "error",
                              "error_class": class, "decision": "retry", "layer": "app", "input_tokens": 100})));
        lines.push(rec(json!({"workflow_id": id, "attempt": 2, "started_at": at(40), "input_tokens": 10,
                              "output_tokens": 5, "layer": layer})));
    }
    let policy = LoadedPolicy {
        file: None,
        set: PolicySet::parse(
            "[default]\nmax_total_attempts = 2\nmax_elapsed_ms = 30000\nmax_extra_cost_usd = 0",
            "t",
        )
        .unwrap(),
    };
    let prices = PriceTable::load(None).unwrap();
    let full = store_with(&lines);
    let time = |t: &str| chrono::DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&chrono::Utc);
    for (since, until) in
        [("2026-11-28T02:01:30Z", "2026-11-28T02:04:20Z"), ("2026-11-28T02:00:01Z", "2026-11-28T02:06:59Z")]
    {
        let windowed = Audit::of(
            &policy,
            &full
                .audit(
                    &Window { since: Some(time(since)), until: Some(time(until)), workflow: None }
                        .audited_with(&policy.set),
                    &prices,
                )
                .unwrap(),
        );
        let inside: Vec<String> = lines
            .chunks(3)
            .filter(|w| {
                let first: Value = serde_json::from_str(&w[0]).unwrap();
                let t = time(first["started_at"].as_str().unwrap());
                t >= time(since) && t < time(until)
            })
            .flatten()
            .cloned()
            .collect();
        let alone = Audit::of(
            &policy,
            &store_with(&inside).audit(&Window::default().audited_with(&policy.set), &prices).unwrap(),
        );
        assert!(windowed.findings.iter().filter(|f| f.count() > 0).count() >= 5, "{windowed:?}");
        assert_eq!(windowed, alone, "[{since}, {until})");
    }
}

/// `pinned = true`: any fallback of that workflow is a finding, whatever the
/// route; `no_costlier_fallback = true`: a fallback whose model charges more
/// per token than the one that served the first attempt is one, a cheaper
/// one is not.
#[test]
fn pinned_and_costlier_fallbacks_are_findings_where_the_policy_says() {
    let named = |name: &str, extra: Value| {
        let mut fields = extra;
        fields["workflow"] = json!(name);
        fields
    };
    let lines = vec![
        // cron (pinned): gpt-4o-mini, a 429, then claude-sonnet-4-5.
        failed(
            0,
            0,
            named("cron", json!({"workflow_id": "cron-1", "http_status": 429, "decision": "fallback"})),
        ),
        ok(
            1,
            1,
            named(
                "cron",
                json!({"workflow_id": "cron-1", "provider": "anthropic", "model": "claude-sonnet-4-5"}),
            ),
        ),
        // chat: claude-sonnet-4-5 down, then the cheaper gpt-4o-mini.
        failed(
            0,
            2,
            named(
                "chat",
                json!({"workflow_id": "chat-1", "provider": "anthropic", "model": "claude-sonnet-4-5",
                                 "http_status": 529, "decision": "fallback"}),
            ),
        ),
        ok(1, 3, named("chat", json!({"workflow_id": "chat-1"}))),
        // chat again, onto the costlier model.
        failed(
            0,
            4,
            named("chat", json!({"workflow_id": "chat-2", "http_status": 529, "decision": "fallback"})),
        ),
        ok(
            1,
            5,
            named(
                "chat",
                json!({"workflow_id": "chat-2", "provider": "anthropic", "model": "claude-sonnet-4-5"}),
            ),
        ),
    ];
    let got = |audit: &Audit, name: &str| {
        audit.findings.iter().find(|f| f.finding.name() == name).map_or((0, 0), |f| (f.count(), f.attempts))
    };
    let none = audit_of(&lines);
    assert_eq!(
        (got(&none, "pinned_fallback"), got(&none, "costlier_fallback")),
        ((0, 0), (0, 0)),
        "not by default"
    );
    let policy = "[default]\nno_costlier_fallback = true\n\n[[workflow]]\nname = \"cron\"\npinned = true\n";
    let audit = audit_with(&lines, policy);
    assert_eq!(got(&audit, "pinned_fallback"), (1, 1));
    assert_eq!(finding(&audit, "pinned_fallback").examples, ["cron-1"]);
    assert_eq!(got(&audit, "costlier_fallback"), (2, 2), "cron-1 and chat-2, not chat-1");
    let mut examples = finding(&audit, "costlier_fallback").examples.clone();
    examples.sort();
    assert_eq!(examples, ["chat-2", "cron-1"]);
    // A replay cannot price a fallback route: tune refuses the key.
    let refused =
        attempt_core::policy::Limits::from_assignments(&["no_costlier_fallback=true".into()]).unwrap_err();
    assert!(refused.to_string().contains("audit rule"), "{refused}");
}
