//! One small hand-written case per rule of docs/record-format.md (error classes, outcomes, waste, cost, amplification),
//! each written so that getting the rule wrong changes the asserted number.

use attempt_core::model::{ErrorClass, Layer, name};
use attempt_core::request::ReportFilter;
use attempt_ledger::report::WorkflowCounts;
use chrono::DateTime;
use serde_json::json;

use crate::{FIXTURE, rec, report_for, report_of, store_with};

fn outcome_counts(lines: &[String]) -> WorkflowCounts {
    report_for(lines).workflows
}

fn only(outcome: &str, lines: &[String]) {
    let w = outcome_counts(lines);
    let got = [
        ("primary_success", w.primary_success),
        ("retry_recovery", w.retry_recovery),
        ("fallback_recovery", w.fallback_recovery),
        ("degraded", w.degraded),
        ("fail_closed", w.fail_closed),
        ("queued", w.queued),
        ("in_flight", w.in_flight),
    ];
    for (name, n) in got {
        assert_eq!(n, i64::from(name == outcome), "{name} in {w:?}, wanted only {outcome}");
    }
}

// ---- Section 4: outcomes -------------------------------------------------

#[test]
fn first_attempt_delivered_is_primary_success() {
    only("primary_success", &[rec(json!({}))]);
}

#[test]
fn success_on_the_primary_route_after_a_failure_is_retry_recovery() {
    only(
        "retry_recovery",
        &[
            rec(json!({"attempt": 0, "status": "error", "http_status": 529, "decision": "retry"})),
            rec(json!({"attempt": 1, "layer": "sdk", "started_at": "2026-11-28T02:00:01Z"})),
        ],
    );
}

#[test]
fn success_on_another_provider_and_model_is_fallback_recovery() {
    only(
        "fallback_recovery",
        &[
            rec(json!({"attempt": 0, "status": "error", "http_status": 429, "decision": "fallback"})),
            rec(json!({"attempt": 1, "provider": "anthropic", "model": "claude-haiku-4-5"})),
        ],
    );
}

#[test]
fn same_provider_other_model_is_a_fallback_route() {
    only(
        "fallback_recovery",
        &[rec(json!({"attempt": 0, "status": "error"})), rec(json!({"attempt": 1, "model": "gpt-4.1-mini"}))],
    );
}

#[test]
fn an_explicit_route_wins_over_the_provider_model_comparison() {
    // Same provider+model as the first attempt, but the caller says fallback
    // (e.g. another deployment of the same model).
    only(
        "fallback_recovery",
        &[rec(json!({"attempt": 0, "status": "error"})), rec(json!({"attempt": 1, "route": "fallback"}))],
    );
    // And the other way round: another model the caller calls primary.
    only(
        "retry_recovery",
        &[
            rec(json!({"attempt": 0, "status": "error"})),
            rec(json!({"attempt": 1, "model": "gpt-4.1-mini", "route": "primary"})),
        ],
    );
}

#[test]
fn the_first_attempt_in_order_defines_the_primary_route() {
    // `attempt` orders before `started_at`: the anthropic call is attempt 0
    // even though it started later, so it is the primary route.
    only(
        "retry_recovery",
        &[
            rec(json!({"attempt": 1, "provider": "anthropic", "model": "claude-haiku-4-5",
                        "started_at": "2026-11-28T02:00:05Z"})),
            rec(
                json!({"attempt": 0, "provider": "anthropic", "model": "claude-haiku-4-5", "status": "error",
                        "started_at": "2026-11-28T02:00:09Z"}),
            ),
            rec(json!({"attempt": 2, "started_at": "2026-11-28T02:00:01Z", "status": "error"})),
        ],
    );
}

#[test]
fn attempts_without_an_index_sort_after_those_with_one() {
    // The record without `attempt` started first, but sorts last: the
    // delivered attempt (index 0) is therefore the first one.
    only(
        "primary_success",
        &[
            rec(json!({"attempt": 0, "started_at": "2026-11-28T02:00:05Z"})),
            rec(json!({"status": "error", "started_at": "2026-11-28T02:00:01Z", "decision": "retry"})),
        ],
    );
}

#[test]
fn equal_index_and_time_fall_back_to_attempt_id_order() {
    let at = "2026-11-28T02:00:00Z";
    // "a" sorts before "b": the failed "a" is first, "b" recovers it.
    only(
        "retry_recovery",
        &[
            rec(json!({"attempt_id": "b", "attempt": 0, "started_at": at})),
            rec(
                json!({"attempt_id": "a", "attempt": 0, "started_at": at, "status": "error", "decision": "retry"}),
            ),
        ],
    );
}

#[test]
fn an_ok_attempt_followed_by_retry_or_fallback_is_not_delivered() {
    // Structured output failed validation: status ok, but the caller retried.
    only("retry_recovery", &[rec(json!({"attempt": 0, "decision": "retry"})), rec(json!({"attempt": 1}))]);
    only(
        "fallback_recovery",
        &[
            rec(json!({"attempt": 0, "decision": "fallback"})),
            rec(
                json!({"attempt": 1, "provider": "anthropic", "model": "claude-haiku-4-5", "decision": "return"}),
            ),
        ],
    );
}

#[test]
fn the_delivered_attempt_is_the_first_ok_one_and_later_ones_are_waste() {
    let report = report_for(&[
        rec(json!({"attempt": 0, "status": "error", "decision": "retry"})),
        rec(json!({"attempt": 1, "input_tokens": 10})),
        rec(
            json!({"attempt": 2, "provider": "anthropic", "model": "claude-haiku-4-5", "input_tokens": 1000}),
        ),
    ]);
    assert_eq!(report.workflows.retry_recovery, 1);
    assert_eq!(report.attempts.wasted, 2);
    assert_eq!(report.tokens.wasted.input, 1000);
}

#[test]
fn no_delivered_attempt_ends_by_the_last_decision() {
    let failed = |decision: serde_json::Value| {
        vec![
            rec(json!({"attempt": 0, "status": "error", "decision": "retry"})),
            rec(json!({"attempt": 1, "status": "error", "decision": decision})),
        ]
    };
    only("degraded", &failed(json!("degrade")));
    only("queued", &failed(json!("queue")));
    only("in_flight", &failed(json!("retry")));
    only("in_flight", &failed(json!("fallback")));
    only("fail_closed", &failed(json!("fail_closed")));
    only("fail_closed", &failed(json!("return")));
    only("fail_closed", &failed(json!(null)));
    // Only the last attempt's decision counts.
    only(
        "fail_closed",
        &[
            rec(json!({"attempt": 0, "status": "error", "decision": "degrade"})),
            rec(json!({"attempt": 1, "status": "error"})),
        ],
    );
}

#[test]
fn rates_are_shares_of_terminal_workflows_only() {
    let report = report_for(&[
        rec(json!({"workflow_id": "a"})),
        rec(json!({"workflow_id": "b", "status": "error", "decision": "fail_closed"})),
        rec(json!({"workflow_id": "c", "status": "error", "decision": "queue"})),
        rec(json!({"workflow_id": "d", "status": "error", "decision": "retry"})),
    ]);
    assert_eq!(report.workflows.total, 4);
    assert_eq!(report.rates.primary_success, Some(0.5));
    assert_eq!(report.rates.fail_closed, Some(0.5));
    assert_eq!(report.rates.retry_recovery, Some(0.0));
}

#[test]
fn rates_are_null_when_no_workflow_is_terminal() {
    let report = report_for(&[rec(json!({"status": "error", "decision": "queue"}))]);
    assert_eq!(report.rates.primary_success, None);
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["rates"]["fail_closed"].is_null());
    assert_eq!(json["workflows"]["queued"], 1);
}

#[test]
fn a_late_attempt_re_derives_the_outcome() {
    let store = store_with(&[rec(json!({"attempt": 1, "started_at": "2026-11-28T02:00:02Z"}))]);
    assert_eq!(report_of(&store, &ReportFilter::default()).workflows.primary_success, 1);
    let late = attempt_core::ingest::jsonl::decode_lines(
        &rec(json!({"attempt": 0, "status": "error", "decision": "retry"})),
        1,
    );
    store.write_batch(&late.attempts).unwrap();
    let report = report_of(&store, &ReportFilter::default());
    assert_eq!((report.workflows.primary_success, report.workflows.retry_recovery), (0, 1));
}

// ---- Section 5: waste ---------------------------------------------------

#[test]
fn every_attempt_of_an_undelivered_workflow_is_waste() {
    let report = report_for(&[
        rec(
            json!({"attempt": 0, "status": "error", "input_tokens": 100, "output_tokens": 7, "decision": "retry"}),
        ),
        rec(json!({"attempt": 1, "status": "error", "input_tokens": 100, "cached_input_tokens": 60})),
    ]);
    assert_eq!(report.attempts.wasted, 2);
    assert_eq!(
        (report.tokens.wasted.input, report.tokens.wasted.output, report.tokens.wasted.cached_input),
        (200, 7, 60)
    );
    assert_eq!(report.waste_share.tokens, Some(1.0));
}

#[test]
fn waste_shares_divide_wasted_by_all() {
    let report = report_for(&[
        rec(json!({"attempt": 0, "status": "error", "input_tokens": 300, "decision": "retry"})),
        rec(json!({"attempt": 1, "input_tokens": 100, "output_tokens": 100})),
    ]);
    assert_eq!(report.waste_share.tokens, Some(0.6));
    assert_eq!(report.waste_share.input_tokens, Some(0.75));
    assert_eq!(report.waste_share.output_tokens, Some(0.0));
    assert_eq!(report.waste_share.attempts, Some(0.5));
}

// ---- Section 6: cost ledger ---------------------------------------------

#[test]
fn cost_is_priced_from_the_table_with_cached_input_at_its_own_price() {
    // gpt-4o-mini: $0.15 input, $0.075 cached input, $0.60 output per 1M.
    let report =
        report_for(&[rec(json!({"input_tokens": 1000, "cached_input_tokens": 400, "output_tokens": 100}))]);
    // 600 x 0.15 + 400 x 0.075 + 100 x 0.60 = 90 + 30 + 60 = 180 per 1M
    assert_eq!(report.cost_usd.total, 0.000_18);
}

#[test]
fn the_emitters_cost_wins_over_the_table() {
    let report = report_for(&[rec(json!({"input_tokens": 1000, "cost_usd": 0.25}))]);
    assert_eq!(report.cost_usd.total, 0.25);
}

#[test]
fn cost_is_charged_to_the_served_provider_and_model() {
    let report = report_for(&[rec(json!({
        "provider": "openai", "model": "gpt-4o",
        "served_provider": "azure.ai.openai", "served_model": "gpt-4o-mini",
        "input_tokens": 1_000_000
    }))]);
    assert_eq!(report.by_served_provider.len(), 1);
    let served = &report.by_served_provider[0];
    assert_eq!(served.served_provider, "azure.ai.openai");
    assert_eq!(served.rerouted_attempts, 1);
    // gpt-4o-mini's price, not gpt-4o's $2.50.
    assert_eq!(served.cost_usd, 0.15);
}

#[test]
fn a_dated_model_name_is_priced_as_its_base_model() {
    let report = report_for(&[rec(json!({"model": "gpt-4o-mini-2024-07-18", "output_tokens": 1_000_000}))]);
    assert_eq!(report.cost_usd.total, 0.60);
    assert_eq!(report.cost_usd.unknown_cost_attempts, 0);
}

#[test]
fn a_model_without_a_price_has_unknown_cost_not_zero() {
    let report = report_for(&[
        rec(json!({"workflow_id": "a", "model": "my-finetune", "input_tokens": 1000})),
        rec(json!({"workflow_id": "b", "input_tokens": 1_000_000})),
    ]);
    assert_eq!(report.cost_usd.unknown_cost_attempts, 1);
    assert_eq!(report.cost_usd.total, 0.15);
    let finetune = report.by_served_model.iter().find(|m| m.served_model == "my-finetune").unwrap();
    assert_eq!(finetune.unknown_cost_attempts, 1);
}

#[test]
fn wasted_cost_is_the_cost_of_undelivered_attempts() {
    let report = report_for(&[
        rec(json!({"attempt": 0, "status": "error", "cost_usd": 0.02, "decision": "retry"})),
        rec(json!({"attempt": 1, "cost_usd": 0.03})),
    ]);
    assert_eq!(report.cost_usd.total, 0.05);
    assert_eq!(report.cost_usd.wasted, 0.02);
    assert_eq!(report.by_served_provider[0].wasted_cost_usd, 0.02);
}

#[test]
fn money_sums_are_exact() {
    // 0.1 + 0.2 in floating point is 0.30000000000000004.
    let report = report_for(&[
        rec(json!({"workflow_id": "a", "cost_usd": 0.1})),
        rec(json!({"workflow_id": "b", "cost_usd": 0.2})),
    ]);
    assert_eq!(report.cost_usd.total, 0.3);
}

// ---- Section 3: error classes ---------------------------------------------

#[test]
fn error_classes_are_derived_and_stored() {
    let report = report_for(&[
        rec(
            json!({"workflow_id": "a", "status": "error", "http_status": 429, "error_code": "insufficient_quota"}),
        ),
        rec(json!({"workflow_id": "b", "status": "error", "http_status": 429})),
        rec(json!({"workflow_id": "c", "status": "error", "http_status": 429, "error_class": "transient"})),
        rec(json!({"workflow_id": "d", "status": "error"})),
    ]);
    let mut classes: Vec<_> =
        report.error_classes.iter().map(|e| (name(e.error_class), e.attempts)).collect();
    classes.sort();
    assert_eq!(classes, vec![("quota", 1), ("rate_limit", 1), ("transient", 1), ("unknown", 1)]);
}

// ---- Section 7: amplification and budget ----------------------------------

#[test]
fn attempts_per_workflow_use_nearest_rank_percentiles_per_layer() {
    let mut lines = Vec::new();
    for w in ["a", "b", "c"] {
        lines.push(rec(json!({"workflow_id": w})));
    }
    // Workflow d: one app attempt, then 4 SDK retries under it.
    lines.push(rec(json!({"workflow_id": "d", "attempt": 0, "status": "error", "decision": "retry"})));
    for n in 1..=4 {
        lines.push(rec(json!({"workflow_id": "d", "attempt": n, "layer": "sdk",
                              "status": if n < 4 { "error" } else { "ok" },
                              "decision": if n < 4 { "retry" } else { "return" }})));
    }
    let report = report_for(&lines);
    let per = &report.attempts.per_workflow;
    assert_eq!((per.mean, per.p50, per.p99, per.max), (Some(2.0), Some(1), Some(5), Some(5)));
    let sdk = report.amplification.iter().find(|a| a.layer == Some(Layer::Sdk)).unwrap();
    assert_eq!((sdk.attempts, sdk.per_workflow.p50, sdk.per_workflow.max), (4, Some(0), Some(4)));
    assert_eq!(sdk.per_workflow.mean, Some(1.0));
    let layers: Vec<_> = report.amplification.iter().map(|a| a.layer.map_or("all", name)).collect();
    assert_eq!(layers, ["all", "sdk", "gateway", "app", "queue"]);
}

#[test]
fn a_minute_is_an_incident_only_above_the_budget() {
    let mut lines = Vec::new();
    // Minute 02:00: 10 first attempts, 1 retry = exactly 10 %: within budget.
    // Minute 02:01: 10 first attempts, 2 retries = 20 %: over.
    for (minute, retries) in [(0, 1), (1, 2)] {
        for w in 0..10 {
            let id = format!("m{minute}-w{w}");
            let at = format!("2026-11-28T02:0{minute}:{:02}Z", w * 2);
            let delivered_first = w >= retries;
            lines.push(rec(json!({"workflow_id": id, "attempt": 0, "started_at": at,
                                  "status": if delivered_first { "ok" } else { "error" }})));
            if !delivered_first {
                let retry_at = format!("2026-11-28T02:0{minute}:{:02}Z", w * 2 + 1);
                lines.push(rec(json!({"workflow_id": id, "attempt": 1, "started_at": retry_at})));
            }
        }
    }
    let budget = report_for(&lines).retry_budget;
    assert_eq!((budget.minutes, budget.minutes_over_budget), (2, 1));
    assert_eq!(budget.incidents.len(), 1);
    assert_eq!(budget.incidents[0].start, "2026-11-28T02:01:00Z");
    assert_eq!(budget.peak_ratio, Some(0.2));
    assert_eq!(budget.ratio, Some(0.15));
}

#[test]
fn recovery_time_runs_from_first_start_to_delivered_start() {
    let report = report_for(&[
        rec(
            json!({"attempt": 0, "status": "error", "started_at": "2026-11-28T02:00:00Z", "decision": "retry"}),
        ),
        rec(json!({"attempt": 1, "started_at": "2026-11-28T02:00:01.500Z"})),
        rec(json!({"attempt": 2, "started_at": "2026-11-28T02:00:09Z"})),
    ]);
    let all = &report.recovery_time_ms[0];
    // Exact in the sums; percentiles and the largest are the upper bound of
    // their histogram bucket (1 s < 1.5 s <= 2 s).
    assert_eq!((all.outcome, all.workflows, all.total, all.mean), (None, 1, Some(1500.0), Some(1500.0)));
    assert_eq!((all.p50, all.p99, all.max), (Some(2000.0), Some(2000.0), Some(2000.0)));
}

/// A window's recovery percentiles are read from the minute histogram and
/// its edges, and equal those of a fresh store holding only the window's
/// workflows; times past the last bound report that bound.
#[test]
fn recovery_percentiles_are_bucket_bounds_and_windows_agree_with_their_workflows() {
    let mut lines = Vec::new();
    for (i, delay_ms) in [5_i64, 40, 700, 1_200, 3_000, 45_000, 3_000_000_000].iter().enumerate() {
        let start = 1_795_831_200_000 + i as i64 * 20_000;
        let id = format!("r{i}");
        lines.push(rec(json!({"workflow_id": id, "attempt": 0, "status": "error", "started_at": start})));
        lines.push(rec(json!({"workflow_id": id, "attempt": 1, "started_at": start + delay_ms})));
    }
    let store = store_with(&lines);
    let report = report_of(&store, &ReportFilter::default());
    let all = &report.recovery_time_ms[0];
    assert_eq!(all.workflows, 7);
    assert_eq!(all.total, Some((5 + 40 + 700 + 1_200 + 3_000 + 45_000 + 3_000_000_000_i64) as f64));
    // Nearest rank: the 4th of 7 is 1.2 s (bucket 2 s); the 7th is past 30
    // days, reported as the last bound.
    assert_eq!((all.p50, all.p99, all.max), (Some(2_000.0), Some(2_592_000_000.0), Some(2_592_000_000.0)));
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms);
    // 02:00:40 to 02:02:30: the minute 02:01 from the rollups (r3, r4, r5),
    // the edges from the facts (r2 before it, r6 after it).
    let filter = ReportFilter {
        since: at(1_795_831_240_000),
        until: at(1_795_831_350_000),
        ..ReportFilter::default()
    };
    let windowed = report_of(&store, &filter);
    let alone = store_with(&lines[4..14]);
    assert_eq!(windowed.recovery_time_ms[0].workflows, 5);
    assert_eq!(windowed.recovery_time_ms, report_of(&alone, &ReportFilter::default()).recovery_time_ms);
}

/// A window whose bounds fall on whole minutes has no edges (it is read from
/// the minute rollups alone); one for a name the rollups fold is read from
/// the facts; one whose bounds cut minutes adds its edges. Each agrees with
/// a fresh store holding only the window's workflows.
#[test]
fn windows_on_whole_minutes_cut_minutes_and_folded_names_agree_with_their_workflows_alone() {
    // Two workflows a minute from 02:00 for six minutes, of three names;
    // every third fails once before it recovers.
    let base_ms = 1_795_831_200_000_i64;
    let workflows: Vec<(i64, String, Vec<String>)> = (0..12_i64)
        .map(|i| {
            let (start, id, name) = (base_ms + i * 30_000, format!("w{i}"), format!("name-{}", i % 3));
            let mut lines = Vec::new();
            if i % 3 == 0 {
                lines.push(rec(
                        json!({"workflow_id": id, "workflow": name, "attempt": 0, "status": "error",
                                      "error_class": "overloaded", "started_at": start, "input_tokens": 10}),
                    ));
            }
            lines.push(rec(
                json!({"workflow_id": id, "workflow": name, "attempt": 1, "started_at": start + 500,
                                  "input_tokens": 100 + i, "output_tokens": 7, "duration_ms": 900}),
            ));
            (start, name, lines)
        })
        .collect();
    let every: Vec<String> = workflows.iter().flat_map(|(_, _, lines)| lines.clone()).collect();
    let with_limit = |limit: u64, lines: &[String]| {
        let store = attempt_ledger::store::Store::open_in_memory().unwrap().with_label_limit(limit).unwrap();
        store.write_batch(&attempt_core::ingest::jsonl::decode_lines(&lines.join("\n"), 1).attempts).unwrap();
        store
    };
    let store = with_limit(1, &every);
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms);
    let cases = [
        (base_ms + 60_000, base_ms + 240_000, None),
        (base_ms + 60_000, base_ms + 240_000, Some("name-2")),
        (base_ms + 45_000, base_ms + 250_000, None),
        (base_ms + 45_000, base_ms + 250_000, Some("name-2")),
    ];
    for (since, until, name) in cases {
        let filter = ReportFilter {
            since: at(since),
            until: at(until),
            workflow: name.map(String::from),
            ..ReportFilter::default()
        };
        let alone: Vec<String> = workflows
            .iter()
            .filter(|(start, n, _)| (since..until).contains(start) && name.is_none_or(|name| n == name))
            .flat_map(|(_, _, lines)| lines.clone())
            .collect();
        let (windowed, fresh) =
            (report_of(&store, &filter), report_of(&with_limit(1, &alone), &ReportFilter::default()));
        assert!(windowed.workflows.total > 0, "{filter:?}");
        assert_eq!(
            (&windowed.workflows, &windowed.attempts, &windowed.tokens, &windowed.cost_usd),
            (&fresh.workflows, &fresh.attempts, &fresh.tokens, &fresh.cost_usd),
            "{filter:?}"
        );
        assert_eq!(windowed.by_served_model, fresh.by_served_model, "{filter:?}");
        assert_eq!(windowed.amplification, fresh.amplification, "{filter:?}");
        assert_eq!(windowed.recovery_time_ms, fresh.recovery_time_ms, "{filter:?}");
        assert_eq!(windowed.error_classes, fresh.error_classes, "{filter:?}");
    }
}

// ---- Filters and dedup ------------------------------------------------------

#[test]
fn filters_select_whole_workflows_by_their_first_attempt_and_name() {
    let store = store_with(&FIXTURE.lines().map(String::from).collect::<Vec<_>>());
    let at = |t: &str| Some(DateTime::parse_from_rfc3339(t).unwrap().to_utc());
    // wf-retry starts 02:00:10 and recovers at 02:00:11.5: a window ending
    // at 02:00:11 keeps it whole, so it is still a retry recovery.
    let filter = ReportFilter {
        since: at("2026-11-28T02:00:10Z"),
        until: at("2026-11-28T02:00:11Z"),
        ..Default::default()
    };
    let report = report_of(&store, &filter);
    assert_eq!((report.workflows.total, report.workflows.retry_recovery, report.attempts.total), (1, 1, 2));
    let filter = ReportFilter { workflow: Some("nightly".into()), ..Default::default() };
    assert_eq!(report_of(&store, &filter).workflows.total, 4);
}

#[test]
fn the_same_attempt_delivered_twice_is_stored_once() {
    let store = store_with(&[
        rec(json!({"attempt_id": "x", "input_tokens": 5})),
        rec(json!({"attempt_id": "x", "input_tokens": 5})),
    ]);
    assert_eq!(store.attempt_count().unwrap(), 1);
    // Without ids, the same instant written two ways is the same attempt.
    let store = store_with(&[
        rec(json!({"started_at": "2026-11-28T03:00:00+01:00"})),
        rec(json!({"started_at": 1_795_831_200_000_i64})),
    ]);
    assert_eq!(store.attempt_count().unwrap(), 1);
    let again = attempt_core::ingest::jsonl::decode_lines(&rec(json!({})), 1);
    let stats = store.write_batch(&again.attempts).unwrap();
    assert_eq!((stats.inserted, stats.duplicates), (0, 1));
}

// ---- Gateways: route groups, ties, cache writes, cost without usage, ------
// ---- provider spellings, conflicts, lenient values --------------------------

#[test]
fn at_equal_order_and_start_a_failure_sorts_before_a_success() {
    // Second-resolution gateway logs: the failure came first even though
    // its id sorts last.
    let at = "2026-11-28T02:00:00Z";
    only(
        "retry_recovery",
        &[
            rec(json!({"attempt_id": "a", "started_at": at})),
            rec(json!({"attempt_id": "z", "started_at": at, "status": "error"})),
        ],
    );
}

#[test]
fn two_deployments_of_one_route_group_are_one_route() {
    let group = |provider: &str, status: &str, second: u32| {
        rec(json!({"provider": provider, "route_group": "chat", "status": status,
                   "started_at": format!("2026-11-28T02:00:0{second}Z")}))
    };
    only("retry_recovery", &[group("azure", "error", 0), group("openai", "ok", 1)]);
    // Without the group, the other provider is a fallback.
    only(
        "fallback_recovery",
        &[
            rec(json!({"provider": "azure", "status": "error", "started_at": "2026-11-28T02:00:00Z"})),
            rec(json!({"provider": "openai", "started_at": "2026-11-28T02:00:01Z"})),
        ],
    );
    let report = report_for(&[group("azure", "error", 0), group("openai", "ok", 1)]);
    assert_eq!(report.by_primary_route[0].route_group.as_deref(), Some("chat"));
    assert_eq!(report.by_primary_route[0].provider, None, "a group spans deployments");
}

#[test]
fn a_fallback_between_groups_names_both_groups() {
    let report = report_for(&[
        rec(json!({"route_group": "chat", "status": "error", "http_status": 503,
                   "started_at": "2026-11-28T02:00:00Z"})),
        rec(json!({"route_group": "chat-backup", "model": "gpt-4o", "started_at": "2026-11-28T02:00:01Z"})),
    ]);
    assert_eq!(report.workflows.fallback_recovery, 1);
    let f = &report.fallbacks[0];
    assert_eq!(
        (f.primary_route_group.as_deref(), f.fallback_route_group.as_deref()),
        (Some("chat"), Some("chat-backup"))
    );
    assert_eq!(f.reason, Some(ErrorClass::Transient));
}

#[test]
fn cache_writes_are_priced_at_the_cache_write_price() {
    // claude-sonnet-4-5: $3 input, $0.30 cached, $3.75 cache write, $15 output per 1M.
    let report = report_for(&[rec(json!({"provider": "anthropic", "model": "claude-sonnet-4-5",
        "input_tokens": 10_000, "cached_input_tokens": 4000, "cache_write_input_tokens": 2000,
        "output_tokens": 1000}))]);
    // 4000 x 3 + 4000 x 0.30 + 2000 x 3.75 + 1000 x 15 = 12000 + 1200 + 7500 + 15000 = 35700 per 1M
    assert_eq!(report.cost_usd.total, 0.0357);
    assert_eq!(report.tokens.total.cache_write_input, 2000);
}

#[test]
fn an_answer_without_usage_has_unknown_cost_and_a_failure_without_tokens_costs_nothing() {
    let report = report_for(&[
        // A stream read without usage: priced model, but nothing to price.
        rec(json!({"workflow_id": "a"})),
        // A failure on a model nobody priced, billing no tokens.
        rec(json!({"workflow_id": "b", "model": "my-finetune", "status": "error", "input_tokens": 0})),
    ]);
    assert_eq!(report.cost_usd.unknown_cost_attempts, 1);
    assert_eq!(report.cost_usd.total, 0.0);
    let finetune = report.by_served_model.iter().find(|m| m.served_model == "my-finetune").unwrap();
    assert_eq!(finetune.unknown_cost_attempts, 0);
}

#[test]
fn every_spelling_of_a_provider_is_one_served_provider() {
    let report = report_for(&[
        rec(
            json!({"workflow_id": "a", "provider": "azure", "model": "gpt-4o-mini", "input_tokens": 1_000_000}),
        ),
        rec(
            json!({"workflow_id": "b", "provider": "Azure OpenAI", "model": "gpt-4o-mini", "input_tokens": 1_000_000}),
        ),
        rec(
            json!({"workflow_id": "c", "provider": "az.ai.openai", "model": "gpt-4o-mini", "input_tokens": 1_000_000}),
        ),
    ]);
    assert_eq!(report.by_served_provider.len(), 1);
    assert_eq!(report.by_served_provider[0].served_provider, "azure.ai.openai");
    assert_eq!(report.cost_usd.unknown_cost_attempts, 0, "priced as one provider, not three unknowns");
    assert_eq!(report.cost_usd.total, 0.45);
}

#[test]
fn a_redelivery_with_different_content_is_a_conflict_and_the_first_copy_wins() {
    let store = store_with(&[rec(json!({"attempt_id": "x", "input_tokens": 10}))]);
    let same =
        attempt_core::ingest::jsonl::decode_lines(&rec(json!({"attempt_id": "x", "input_tokens": 10})), 1);
    let stats = store.write_batch(&same.attempts).unwrap();
    assert_eq!((stats.duplicates, stats.conflicts), (1, 0), "an identical redelivery is no conflict");
    let changed =
        attempt_core::ingest::jsonl::decode_lines(&rec(json!({"attempt_id": "x", "input_tokens": 999})), 1);
    let stats = store.write_batch(&changed.attempts).unwrap();
    assert_eq!((stats.inserted, stats.duplicates, stats.conflicts), (0, 0, 1), "a conflict is no duplicate");
    assert_eq!(stats.conflict_ids, vec!["x".to_string()]);
    let report = report_of(&store, &ReportFilter::default());
    assert_eq!(report.tokens.total.input, 10, "the first stored copy wins");
}
