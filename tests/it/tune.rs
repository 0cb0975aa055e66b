//! `tune`: the curve adds up to the report, a replay under limits that never
//! bind is the report, and every replay of a shorter policy over simulated
//! traffic equals what the simulator's own bookkeeping says that policy
//! would have kept.

use std::sync::Arc;

use attempt_core::pricing::PriceTable;
use attempt_core::request::ReportFilter;
use attempt_ledger::read::{Candidate, Reader};
use attempt_ledger::report::tune::Tune;
use attempt_ledger::simulate::{Scenario, Shorter, SimOptions, default_start, simulate_with_truth};
use attempt_ledger::store::Store;
use serde_json::Value;

use crate::report_of;

pub fn tune_of(store: &Store, filter: &ReportFilter, set: &[&str]) -> Tune {
    let prices = Arc::new(PriceTable::load(None).unwrap());
    let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
    let candidate = Candidate::from_flags(None, &set).unwrap();
    Reader::new(store, prices, Default::default()).tune(filter, candidate.as_ref()).unwrap()
}

fn simulated(scenario: Scenario, workflows: u64) -> (Store, attempt_ledger::simulate::Truth) {
    let (lines, truth) = simulated_lines(scenario, workflows);
    let store = crate::store_with(&lines);
    store.catch_up().unwrap();
    (store, truth)
}

fn simulated_lines(scenario: Scenario, workflows: u64) -> (Vec<String>, attempt_ledger::simulate::Truth) {
    let options =
        SimOptions { scenario, workflows: Some(workflows), seed: 11, start: default_start(), span: None };
    let mut out = Vec::new();
    let (_, truth) = simulate_with_truth(&options, &mut out).unwrap();
    (String::from_utf8(out).unwrap().lines().map(str::to_string).collect(), truth)
}

fn delivered(w: &attempt_ledger::report::WorkflowCounts) -> u64 {
    (w.primary_success + w.retry_recovery + w.fallback_recovery) as u64
}

#[test]
fn every_replay_equals_the_simulators_own_count_of_what_that_policy_keeps() {
    // (--set, the same policy in the simulated callers' terms: SDK retries
    // per SDK call, application tries, routes and error codes).
    let quota = || vec!["insufficient_quota"];
    let policies: Vec<(&[&str], Shorter)> = vec![
        (&["max_retries.sdk=2"], Shorter { sdk_retries: Some(2), ..Shorter::default() }),
        (&["max_retries.sdk=0"], Shorter { sdk_retries: Some(0), ..Shorter::default() }),
        (&["max_total_attempts=3"], Shorter { max_attempts: Some(3), ..Shorter::default() }),
        (&["no_retry_on=quota"], Shorter { no_retry_after: quota(), ..Shorter::default() }),
        (&["fallback=false"], Shorter { no_fallback: true, ..Shorter::default() }),
        (
            &["max_retries.sdk=2", "no_retry_on=quota"],
            Shorter { sdk_retries: Some(2), no_retry_after: quota(), ..Shorter::default() },
        ),
        (
            &["max_retries.sdk=1", "max_total_attempts=4"],
            Shorter { sdk_retries: Some(1), max_attempts: Some(4), ..Shorter::default() },
        ),
        (&["max_retries.app=0"], Shorter { app_retries: Some(0), ..Shorter::default() }),
        (
            &["max_retries.app=1", "max_retries.sdk=1"],
            Shorter { app_retries: Some(1), sdk_retries: Some(1), ..Shorter::default() },
        ),
        (&["max_route_attempts=2"], Shorter { route_attempts: Some(2), ..Shorter::default() }),
        (
            &["no_retry_on=rate_limit,timeout"],
            Shorter { no_retry_after: vec!["rate_limit_exceeded", "APITimeoutError"], ..Shorter::default() },
        ),
        (
            &["fallback_on=transient"],
            Shorter { fallback_after: Some(vec!["overloaded_error", "api_error"]), ..Shorter::default() },
        ),
        (&["max_elapsed_ms=20000"], Shorter { max_elapsed_ms: Some(20_000.0), ..Shorter::default() }),
        (
            &["max_retries.sdk=1", "max_elapsed_ms=9000"],
            Shorter { sdk_retries: Some(1), max_elapsed_ms: Some(9_000.0), ..Shorter::default() },
        ),
        // 2^-7 USD: exact in binary, 7,812,500,000 pico-USD.
        (
            &["max_extra_cost_usd=0.0078125"],
            Shorter { max_failed_cost_pusd: Some(7_812_500_000), ..Shorter::default() },
        ),
        (&["retry_budget=0.2"], Shorter { retry_budget: Some((0.2, 0)), ..Shorter::default() }),
        (
            &["retry_budget=0.5", "retry_budget_floor=3", "max_retries.sdk=3"],
            Shorter { retry_budget: Some((0.5, 3)), sdk_retries: Some(3), ..Shorter::default() },
        ),
    ];
    let scenarios = [
        Scenario::Overnight529Storm,
        Scenario::QuotaExhausted,
        Scenario::RateLimitFallback,
        Scenario::NaiveRetries,
        Scenario::Steady,
    ];
    let prices = PriceTable::load(None).unwrap();
    let mut changed_by_policy = vec![0; policies.len()];
    for scenario in scenarios {
        let (store, truth) = simulated(scenario, 1_500);
        let report = report_of(&store, &ReportFilter::default());
        for (p, (set, shorter)) in policies.iter().enumerate() {
            let tune = tune_of(&store, &ReportFilter::default(), set);
            let replay = tune.replay.expect("a policy was given");
            assert_eq!(replay.before, report.workflows, "{scenario:?} {set:?}: before is the report");
            let (want_delivered, want_attempts) = truth.shorter(shorter, &prices);
            assert_eq!(
                (delivered(&replay.after), replay.attempts.after as u64),
                (want_delivered, want_attempts),
                "{scenario:?} {set:?}: (delivered, attempts) replayed vs the simulator's bookkeeping"
            );
            assert_eq!(
                replay.success_lost as u64,
                delivered(&replay.before) - want_delivered,
                "{scenario:?} {set:?}: no policy that stops earlier delivers more"
            );
            changed_by_policy[p] += replay.changed_workflows;
        }
    }
    for ((set, _), changed) in policies.iter().zip(changed_by_policy) {
        assert!(changed > 20, "{set:?} binds somewhere: {changed} workflows changed");
    }
}

#[test]
fn a_replay_under_limits_that_never_bind_is_the_report() {
    let (store, _) = simulated(Scenario::RateLimitFallback, 800);
    let report = report_of(&store, &ReportFilter::default());
    let loose = ["max_total_attempts=1000", "max_retries.sdk=1000", "max_elapsed_ms=1e12", "fallback=true"];
    let replay = tune_of(&store, &ReportFilter::default(), &loose).replay.unwrap();
    assert_eq!(replay.before, report.workflows);
    assert_eq!(replay.after, report.workflows);
    assert_eq!((replay.changed_workflows, replay.success_lost, replay.moved_attempt_workflows), (0, 0, 0));
    assert_eq!(replay.attempts.before, report.attempts.total);
    assert_eq!(replay.attempts.after, report.attempts.total);
    assert_eq!(replay.cost_usd.before, report.cost_usd.total);
    assert_eq!(replay.cost_usd.after, report.cost_usd.total);
    assert_eq!(replay.wasted_cost_usd.after, report.cost_usd.wasted);
    assert_eq!(replay.time_to_outcome_ms.after, replay.time_to_outcome_ms.before);
    assert!(replay.time_to_outcome_ms.before.p99 > replay.time_to_outcome_ms.before.p50);
}

#[test]
fn the_curve_adds_up_to_the_reports_recoveries() {
    for scenario in [Scenario::Overnight529Storm, Scenario::RateLimitFallback, Scenario::NaiveRetries] {
        let (store, _) = simulated(scenario, 1_000);
        let report = report_of(&store, &ReportFilter::default());
        let tune = tune_of(&store, &ReportFilter::default(), &[]);
        assert!(tune.replay.is_none(), "no policy, no replay");
        let overall = |l: &&attempt_ledger::report::tune::CurveLine| {
            l.layer == "all" && l.after_class == "all" && l.primary_route == "all"
        };
        let retries: Vec<_> = tune.curve.iter().filter(|l| l.step == "retry").filter(overall).collect();
        let delivered: i64 = retries.iter().map(|l| l.delivered).sum();
        assert_eq!(
            delivered,
            report.workflows.retry_recovery + report.workflows.fallback_recovery,
            "{scenario:?}: each recovered workflow is delivered at one position"
        );
        let attempts: i64 = retries.iter().map(|l| l.attempts).sum();
        let cost: f64 = retries.iter().map(|l| l.cost_usd).sum();
        assert!(attempts > 0 && cost > 0.0);
        // Each breakdown sums to the overall line of its position.
        for line in &retries {
            for by in ["layer", "after_class", "primary_route"] {
                let parts: Vec<_> = tune
                    .curve
                    .iter()
                    .filter(|l| l.step == "retry" && l.position == line.position)
                    .filter(|l| {
                        let v = serde_json::to_value(l).unwrap();
                        ["layer", "after_class", "primary_route"]
                            .iter()
                            .all(|k| if *k == by { v[k] != "all" } else { v[k] == "all" })
                    })
                    .collect();
                assert_eq!(parts.iter().map(|l| l.delivered).sum::<i64>(), line.delivered, "{by}");
                assert_eq!(parts.iter().map(|l| l.attempts).sum::<i64>(), line.attempts, "{by}");
                assert_eq!(
                    parts.iter().map(|l| l.undelivered_before).sum::<i64>(),
                    line.undelivered_before,
                    "{by}"
                );
            }
        }
        let first = retries.first().unwrap();
        assert_eq!(first.position, Some(2));
        let share = first.marginal_success.unwrap();
        assert!((share - 100.0 * first.delivered as f64 / report.workflows.total as f64).abs() < 1e-9);
        if scenario == Scenario::RateLimitFallback {
            let fallback = tune
                .curve
                .iter()
                .find(|l| l.step == "first_fallback" && l.layer == "all" && l.after_class == "all")
                .expect("a fallback line");
            assert_eq!(fallback.delivered, report.workflows.fallback_recovery);
        }
    }
}

#[test]
fn tune_answers_the_same_from_the_command_line_and_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.duckdb");
    let bin = env!("CARGO_BIN_EXE_attempt-ledger");
    let jsonl = dir.path().join("storm.jsonl");
    let simulate = std::process::Command::new(bin)
        .args(["simulate", "--scenario", "overnight-529-storm", "--workflows", "600"])
        .output()
        .unwrap();
    std::fs::write(&jsonl, &simulate.stdout).unwrap();
    let ingest = std::process::Command::new(bin)
        .args(["ingest", "--db", db.to_str().unwrap(), jsonl.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(ingest.status.success());
    let tune = |args: &[&str]| {
        let out = std::process::Command::new(bin)
            .args(["tune", "--db", db.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let set = ["--set", "max_retries.sdk=2", "--set", "no_retry_on=quota", "--format", "json"];
    let (code, cli, _) = tune(&set);
    assert_eq!(code, Some(0));
    let cli: Value = serde_json::from_str(&cli).unwrap();
    assert!(cli["replay"]["success_lost"].as_i64().unwrap() > 0);
    let (code, _, err) = tune(&["--set", "max_retries.robot=2"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("`max_retries`: \"robot\" is not one of"), "{err}");
    let policy = dir.path().join("p.toml");
    std::fs::write(&policy, "[default]\nmax_retries = { sdk = 2 }\nno_retry_on = [\"quota\"]\n").unwrap();
    let (_, from_file, _) = tune(&["--policy", policy.to_str().unwrap(), "--format", "json"]);
    let mut from_file: Value = serde_json::from_str(&from_file).unwrap();
    from_file["replay"]["policy"] = cli["replay"]["policy"].clone();
    assert_eq!(from_file, cli, "the file's keys replay as the same --set");

    let service = crate::service::Service::start(&db, &[]);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let body = agent
        .get(&format!("{}/api/v1/tune?set=max_retries.sdk%3D2&set=no_retry_on%3Dquota", service.http))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    let http: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(http, cli, "GET /api/v1/tune answers what tune prints");
    let mut bad = agent.get(&format!("{}/api/v1/tune?set=fallback%3Dmaybe", service.http)).call().unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.body_mut().read_to_string().unwrap().contains("fallback"));
    // While serve holds the file, the command asks it.
    let (code, asked, _) = tune(&set);
    assert_eq!(code, Some(0));
    assert_eq!(serde_json::from_str::<Value>(&asked).unwrap(), cli);
}

/// A replay of one limit changes exactly the workflows the audit finds
/// breaking it: both stop at the first recorded attempt past it.
#[test]
fn a_limits_replay_changes_the_workflows_the_audit_finds_breaking_it() {
    use attempt_core::finding::FindingKind;
    use attempt_core::policy::LoadedPolicy;
    use attempt_core::policy::PolicySet;
    use attempt_core::request::Window;
    let cases: [(&str, &str, FindingKind); 7] = [
        ("max_retries.sdk=2", "max_retries = { sdk = 2 }", FindingKind::OverLayerRetries),
        ("max_retries.app=1", "max_retries = { app = 1 }", FindingKind::OverLayerRetries),
        ("max_route_attempts=4", "max_route_attempts = 4", FindingKind::OverRouteAttempts),
        ("fallback=false", "fallback = false", FindingKind::FallbackForbidden),
        ("fallback_on=rate_limit", "fallback_on = [\"rate_limit\"]", FindingKind::FallbackForbidden),
        ("max_total_attempts=3", "max_total_attempts = 3", FindingKind::OverAttemptBudget),
        ("pinned=true", "pinned = true", FindingKind::PinnedFallback),
    ];
    let mut found = 0;
    for scenario in [Scenario::NaiveRetries, Scenario::RateLimitFallback, Scenario::UnsafeFallback] {
        let (store, _) = simulated(scenario, 1_200);
        let prices = PriceTable::load(None).unwrap();
        for (set, key, finding) in cases {
            let changed = tune_of(&store, &ReportFilter::default(), &[set]).replay.unwrap().changed_workflows;
            let policy = LoadedPolicy {
                file: None,
                set: PolicySet::parse(&format!("[default]\n{key}\n"), "test").unwrap(),
            };
            let audit = attempt_ledger::report::audit::Audit::of(
                &policy,
                &store.audit(&Window::default().audited_with(&policy.set), &prices).unwrap(),
            );
            let workflows = audit.findings.iter().find(|f| f.finding == finding).map_or(0, |f| f.count());
            assert_eq!(workflows as i64, changed, "{scenario:?} {set}: the audit's {finding} vs the replay");
            found += changed;
        }
    }
    assert!(found > 500, "the limits bind: {found}");
}

/// `--suggest`: each workflow name's limits replay within the tolerance, one
/// retry fewer at any layer would not, and the file is one the audit reads.
#[test]
fn suggested_limits_are_the_smallest_within_the_tolerance_and_the_audit_reads_them() {
    let mut limited = 0;
    for (scenario, tolerance) in [
        (Scenario::Overnight529Storm, 2.0),
        (Scenario::NaiveRetries, 0.1),
        (Scenario::RateLimitFallback, 5.0),
    ] {
        let (store, _) = simulated(scenario, 1_500);
        let prices = Arc::new(PriceTable::load(None).unwrap());
        let suggestion = Reader::new(&store, prices, Default::default())
            .suggest(&ReportFilter::default(), tolerance)
            .unwrap();
        let audited = attempt_core::policy::PolicySet::parse(&suggestion.policy, "suggested").unwrap();
        assert_eq!(audited.workflows.len(), suggestion.workflows.len());
        for line in &suggestion.workflows {
            let filter = ReportFilter { workflow: line.workflow.clone(), ..ReportFilter::default() };
            let sets = |retries: &std::collections::BTreeMap<String, u64>| {
                let mut set: Vec<String> =
                    retries.iter().map(|(l, n)| format!("max_retries.{l}={n}")).collect();
                if let Some(classes) = &line.fallback_on {
                    set.push(format!("fallback_on={}", classes.join(",")));
                }
                set
            };
            let lost_pp = |set: &[String]| {
                let set: Vec<&str> = set.iter().map(String::as_str).collect();
                let replay = tune_of(&store, &filter, &set).replay.unwrap();
                100.0 * replay.success_lost as f64 / replay.before.total as f64
            };
            let set = sets(&line.max_retries);
            if set.is_empty() {
                continue;
            }
            limited += 1;
            let lost = lost_pp(&set);
            assert!(lost <= tolerance, "{scenario:?} {line:?}: {lost} pp lost");
            assert!(
                (lost - line.success_lost_pp).abs() < 1e-9,
                "{scenario:?}: the replay of the file's limits"
            );
            for (layer, n) in &line.max_retries {
                if *n == 0 {
                    continue;
                }
                let mut fewer = line.max_retries.clone();
                fewer.insert(layer.clone(), n - 1);
                assert!(
                    lost_pp(&sets(&fewer)) > tolerance,
                    "{scenario:?}: {layer}={} is within it too",
                    n - 1
                );
            }
        }
    }
    assert!(limited >= 2, "some workflow got a limit: {limited}");
}

/// The curve reads the rollups' totals and whole minutes, and only a
/// window's edges from the steps: a window cutting minutes, and a name the
/// rollups fold, answer what a store holding only their workflows does, the
/// curve and the replay alike.
#[test]
fn a_window_or_a_folded_name_answers_what_its_workflows_alone_do() {
    let (mut lines, _) = simulated_lines(Scenario::RateLimitFallback, 400);
    lines.extend(simulated_lines(Scenario::Overnight529Storm, 400).0);
    let record = |line: &String| serde_json::from_str::<Value>(line).unwrap();
    let time = |t: &str| chrono::DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&chrono::Utc);
    let mut first_at = std::collections::HashMap::new();
    for line in &lines {
        let r = record(line);
        let at = time(r["started_at"].as_str().unwrap());
        let first = first_at.entry(r["workflow_id"].as_str().unwrap().to_string()).or_insert(at);
        *first = (*first).min(at);
    }
    let set = ["max_retries.sdk=1", "max_retries.app=1", "fallback=false"];
    let full = crate::store_with(&lines);
    let (start, end) = (first_at.values().min().unwrap(), first_at.values().max().unwrap());
    let third = (*end - *start) / 3;
    let (since, until) =
        (*start + third + chrono::Duration::seconds(17), *end - third + chrono::Duration::seconds(9));
    let windowed = ReportFilter { since: Some(since), until: Some(until), ..ReportFilter::default() };
    let inside: Vec<String> = lines
        .iter()
        .filter(|l| {
            let at = first_at[record(l)["workflow_id"].as_str().unwrap()];
            at >= since && at < until
        })
        .cloned()
        .collect();
    let alone = crate::store_with(&inside);
    let tune = tune_of(&full, &windowed, &set);
    assert!(tune.curve.len() > 20 && tune.replay.as_ref().unwrap().changed_workflows > 0, "{tune:?}");
    assert_eq!(tune, tune_of(&alone, &ReportFilter::default(), &set), "[{since}, {until})");

    // One label value each: the first seen (ties by value) keep rows of
    // their own, chat-interactive and anthropic's primary route; the
    // storm's name and the chat's route are summed under `other`.
    let folded = Store::open_in_memory().unwrap().with_label_limit(1).unwrap();
    folded.write_batch(&attempt_core::ingest::jsonl::decode_lines(&lines.join("\n"), 1).attempts).unwrap();
    let tune_alone = |name: &str| {
        let own: Vec<String> = lines.iter().filter(|l| record(l)["workflow"] == name).cloned().collect();
        tune_of(&crate::store_with(&own), &ReportFilter::default(), &set)
    };
    let tune_named = |name: &str| {
        tune_of(&folded, &ReportFilter { workflow: Some(name.to_string()), ..ReportFilter::default() }, &set)
    };
    // A name past the limit is read from its own steps, routes whole.
    let storm = tune_named("nightly-classify");
    assert!(storm.curve.iter().any(|l| l.primary_route == "anthropic/claude-haiku-4-5"), "{storm:?}");
    assert_eq!(storm, tune_alone("nightly-classify"));
    // A kept name reads the rollups: its route past the limit is `other`,
    // every figure the same.
    let mut chat = tune_alone("chat-interactive");
    for line in &mut chat.curve {
        if line.primary_route == "openai/gpt-4o" {
            line.primary_route = "other".into();
        }
    }
    assert!(chat.curve.iter().any(|l| l.primary_route == "other"), "{chat:?}");
    assert_eq!(tune_named("chat-interactive"), chat);
}

/// Under limits that read only shapes a replay decides once per shape and
/// sums the rollups; a limit that never binds but reads times
/// (`max_elapsed_ms`) makes it replay every workflow from its own steps.
/// Both answer the same, for every shape limit, in a window, with sections
/// by name, and with the shapes past the label limit replayed one by one.
#[test]
fn a_replay_by_shape_is_the_replay_workflow_by_workflow() {
    let one_by_one = "max_elapsed_ms=1e15";
    let policies: [&[&str]; 12] = [
        &["max_retries.sdk=2", "no_retry_on=quota"],
        &["max_retries.sdk=0"],
        &["max_retries.app=1", "max_retries.sdk=1"],
        &["max_total_attempts=3"],
        &["max_route_attempts=2"],
        &["no_retry_on=rate_limit,timeout"],
        &["retryable=transient"],
        &["fallback=false"],
        &["fallback_on=transient"],
        &["approved_fallbacks=anthropic/claude-haiku-4-5"],
        &["fail_closed_on=quota", "queue_allowed=false"],
        &["fail_closed_on_commit=committed,unknown"],
    ];
    let (mut lines, _) = simulated_lines(Scenario::Overnight529Storm, 500);
    for scenario in [Scenario::RateLimitFallback, Scenario::NaiveRetries, Scenario::QuotaExhausted] {
        lines.extend(simulated_lines(scenario, 400).0);
    }
    let kept = crate::store_with(&lines);
    let folded = Store::open_in_memory().unwrap().with_label_limit(3).unwrap();
    folded.write_batch(&attempt_core::ingest::jsonl::decode_lines(&lines.join("\n"), 1).attempts).unwrap();
    folded.catch_up().unwrap();
    let window = {
        let start = |l: &String| {
            serde_json::from_str::<Value>(l).unwrap()["started_at"].as_str().unwrap().to_string()
        };
        let first = lines.iter().map(start).min().unwrap();
        let first = chrono::DateTime::parse_from_rfc3339(&first).unwrap().with_timezone(&chrono::Utc);
        ReportFilter {
            since: Some(first + chrono::Duration::seconds(137)),
            until: Some(first + chrono::Duration::seconds(3_000)),
            ..ReportFilter::default()
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let sections = dir.path().join("sections.toml");
    std::fs::write(
        &sections,
        "[default]\nmax_retries = { sdk = 1 }\n\n[[workflow]]\nname = \"nightly-classify\"\n\
         max_retries = { sdk = 3 }\nno_retry_on = [\"quota\"]\n",
    )
    .unwrap();
    let replay = |store: &Store, filter: &ReportFilter, policy: Option<&std::path::Path>, set: &[&str]| {
        let prices = Arc::new(PriceTable::load(None).unwrap());
        let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        let candidate = Candidate::from_flags(policy, &set).unwrap();
        let tune = Reader::new(store, prices, Default::default()).tune(filter, candidate.as_ref()).unwrap();
        tune.replay.unwrap()
    };
    let mut changed = 0;
    for store in [&kept, &folded] {
        for filter in [ReportFilter::default(), window.clone()] {
            let cases = policies.iter().map(|set| (None, *set)).chain([(Some(sections.as_path()), &[][..])]);
            for (policy, set) in cases {
                let by_shape = replay(store, &filter, policy, set);
                let with_times: Vec<&str> = set.iter().copied().chain([one_by_one]).collect();
                let mut by_workflow = replay(store, &filter, policy, &with_times);
                by_workflow.policy = by_shape.policy.clone();
                assert_eq!(by_shape, by_workflow, "{policy:?} {set:?} {filter:?}");
                changed += by_shape.changed_workflows;
            }
        }
    }
    assert!(changed > 5_000, "the limits bind: {changed}");
}

/// A replay can remove the attempt that delivered and keep a later one
/// that could: the later one delivers (here a fallback made after the
/// recorded delivery), and only what the replay keeps before it is waste,
/// summed by shape as workflow by workflow.
#[test]
fn a_replay_delivers_at_the_first_kept_attempt_that_can() {
    let lines: Vec<String> = (0..3)
        .flat_map(|i| {
            let at = |s: u32| format!("2026-11-28T02:0{i}:{s:02}Z");
            [
                format!(
                    r#"{{"workflow_id":"late-{i}","workflow":"chat","attempt":0,"started_at":"{}","route_group":"main","provider":"openai","model":"gpt-4o","status":"error","http_status":429,"error_code":"rate_limit_exceeded","decision":"retry","input_tokens":500,"duration_ms":200}}"#,
                    at(0)
                ),
                format!(
                    r#"{{"workflow_id":"late-{i}","workflow":"chat","attempt":1,"started_at":"{}","route_group":"main","provider":"openai","model":"gpt-4o","status":"ok","input_tokens":1000,"output_tokens":100,"duration_ms":900}}"#,
                    at(2)
                ),
                format!(
                    r#"{{"workflow_id":"late-{i}","workflow":"chat","attempt":2,"started_at":"{}","route_group":"backup","provider":"openai","model":"gpt-4o","status":"ok","input_tokens":1000,"output_tokens":100,"duration_ms":700}}"#,
                    at(4)
                ),
            ]
        })
        .collect();
    let store = crate::store_with(&lines);
    store.catch_up().unwrap();
    let by_shape = tune_of(&store, &ReportFilter::default(), &["no_retry_on=rate_limit"]).replay.unwrap();
    let mut by_workflow =
        tune_of(&store, &ReportFilter::default(), &["no_retry_on=rate_limit", "max_elapsed_ms=1e15"])
            .replay
            .unwrap();
    by_workflow.policy = by_shape.policy.clone();
    assert_eq!(by_shape, by_workflow);
    assert_eq!((by_shape.before.retry_recovery, by_shape.after.fallback_recovery), (3, 3));
    assert_eq!((by_shape.moved_attempt_workflows, by_shape.attempts.after), (3, 6));
    // The first attempts alone are waste now; the fallbacks (priced as the
    // removed deliveries: the same model and tokens) were too before.
    let removed = by_shape.cost_usd.before - by_shape.cost_usd.after;
    assert!(removed > 0.0 && by_shape.wasted_cost_usd.after > 0.0);
    assert!(
        (by_shape.wasted_cost_usd.after - (by_shape.wasted_cost_usd.before - removed)).abs() < 1e-9,
        "{by_shape:?}"
    );
}

/// A workflow longer than a plan's mask (64 attempts) is replayed from its
/// own steps beside the shapes, to the same answer.
#[test]
fn a_workflow_of_more_than_64_attempts_is_replayed_from_its_steps() {
    let mut lines: Vec<String> = (0..70)
        .map(|n| {
            let (status, rest) = if n == 69 {
                ("ok", r#""input_tokens":1000,"output_tokens":100"#.to_string())
            } else {
                ("error", r#""http_status":529,"error_code":"overloaded_error","decision":"retry""#.to_string())
            };
            format!(
                r#"{{"workflow_id":"long","workflow":"batch","attempt":{n},"layer":"{}","started_at":"2026-11-28T02:{:02}:{:02}Z","provider":"openai","model":"gpt-4o","status":"{status}",{rest},"duration_ms":300}}"#,
                if n % 6 == 0 { "app" } else { "sdk" },
                n / 60,
                n % 60
            )
        })
        .collect();
    lines.extend(simulated_lines(Scenario::Overnight529Storm, 200).0);
    let store = crate::store_with(&lines);
    store.catch_up().unwrap();
    let set = ["max_retries.sdk=2", "no_retry_on=quota"];
    let by_shape = tune_of(&store, &ReportFilter::default(), &set).replay.unwrap();
    let timed: Vec<&str> = set.iter().copied().chain(["max_elapsed_ms=1e15"]).collect();
    let mut by_workflow = tune_of(&store, &ReportFilter::default(), &timed).replay.unwrap();
    by_workflow.policy = by_shape.policy.clone();
    assert_eq!(by_shape, by_workflow);
    assert!(by_shape.success_lost_examples.contains(&"long".to_string()), "{by_shape:?}");
}
