//! The derived tables (per-workflow facts, minute rollups, totals) across
//! the store's life: retention, a bulk import cut short, reopening.

use attempt_core::ingest::jsonl;
use attempt_core::request::ReportFilter;
use attempt_ledger::store::{Batch, Store};

use serde_json::json;

use crate::{FIXTURE, rec, report_of, store_with};

fn fixture_lines() -> Vec<String> {
    FIXTURE.lines().map(String::from).collect()
}

/// The workflow id and first start of each fixture line, as stored.
fn first_starts() -> std::collections::HashMap<String, chrono::DateTime<chrono::Utc>> {
    let decoded = jsonl::decode_lines(FIXTURE, 1);
    let mut first = std::collections::HashMap::new();
    for a in decoded.attempts {
        first
            .entry(a.workflow_id.clone())
            .and_modify(|t: &mut chrono::DateTime<chrono::Utc>| *t = (*t).min(a.started_at))
            .or_insert(a.started_at);
    }
    first
}

/// `prune --before T` leaves exactly what a database given only the
/// workflows that started at or after T would hold: no workflow is cut in
/// two, and the rollups and totals follow.
#[test]
fn pruning_removes_whole_workflows_and_their_derived_rows() {
    let lines = fixture_lines();
    let store = store_with(&lines);
    let cut = chrono::DateTime::parse_from_rfc3339("2026-11-28T02:01:30Z").unwrap().to_utc();
    let first = first_starts();
    let kept: Vec<String> = lines
        .iter()
        .filter(|line| {
            let id = serde_json::from_str::<serde_json::Value>(line).unwrap()["workflow_id"]
                .as_str()
                .unwrap()
                .to_string();
            first[&id] >= cut
        })
        .cloned()
        .collect();
    assert!(!kept.is_empty() && kept.len() < lines.len(), "the cut must split the fixture");

    let (workflows, attempts) = store.prune(cut).unwrap();
    assert!(workflows > 0 && attempts >= workflows);
    let remaining = store_with(&kept);
    assert_eq!(store.attempt_count().unwrap(), remaining.attempt_count().unwrap());
    assert_eq!(report_of(&store, &ReportFilter::default()), report_of(&remaining, &ReportFilter::default()));
    assert_eq!(store.derived_digest().unwrap(), remaining.derived_digest().unwrap());
}

/// A write is acknowledged once its rows are stored; what it touched is
/// derived later. If the process dies in between, the next open derives
/// it, so no report ever reads attempts without their facts.
#[test]
fn writes_acknowledged_but_not_derived_are_derived_when_the_database_is_opened_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.duckdb");
    let decoded = jsonl::decode_lines(FIXTURE, 1);
    {
        let store = Store::open(&path).unwrap();
        let (first, rest) = decoded.attempts.split_at(decoded.attempts.len() / 2);
        store.write_batch(first).unwrap();
        let stored = store.store_batches(&[Batch { attempts: rest, ..Batch::default() }]).unwrap();
        assert!(stored.seq.is_some());
        let pending = store.pending().unwrap();
        assert_eq!((pending.commits, pending.attempts), (1, rest.len() as u64));
        // Dropped before any derivation round: the process was killed.
    }
    let store = Store::open(&path).unwrap();
    assert!(store.pending().unwrap().is_empty());
    let expected = store_with(&fixture_lines());
    assert_eq!(report_of(&store, &ReportFilter::default()), report_of(&expected, &ReportFilter::default()));
    assert_eq!(store.derived_digest().unwrap(), expected.derived_digest().unwrap());
}

/// DuckDB's memory limit comes from ATTEMPT_LEDGER_MEMORY_LIMIT; a value
/// it cannot read is refused with the variable's name, before anything is
/// opened for writing.
#[test]
fn a_bad_memory_limit_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("attempts.jsonl");
    std::fs::write(&input, FIXTURE).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["ingest", "--no-progress", "--db"])
        .arg(dir.path().join("x.duckdb"))
        .arg(&input)
        .env("ATTEMPT_LEDGER_MEMORY_LIMIT", "lots")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ATTEMPT_LEDGER_MEMORY_LIMIT=lots"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("accepted"));
}

/// `attempt-ledger prune` on a file: the pruned database replaces the old
/// one through a compacted copy, smaller, with the same answers as pruning
/// in place.
#[test]
fn prune_compacts_the_database_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ledger.duckdb");
    let input = dir.path().join("attempts.jsonl");
    // Enough rows that the freed space shows in the file size.
    let mut lines = Vec::new();
    for copy in 0..400 {
        for line in FIXTURE.lines() {
            let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
            let id = record["workflow_id"].as_str().unwrap().to_string();
            record["workflow_id"] = serde_json::json!(format!("{id}-{copy}"));
            lines.push(record.to_string());
        }
    }
    std::fs::write(&input, lines.join("\n")).unwrap();
    let bin = env!("CARGO_BIN_EXE_attempt-ledger");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin).args(args).arg("--db").arg(&db).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&["ingest", "--no-progress", input.to_str().unwrap()]);
    let size_before = std::fs::metadata(&db).unwrap().len();
    let out = run(&["prune", "--before", "2026-11-28T02:03:00Z"]);
    assert!(out.contains("compacted"), "{out}");
    assert!(std::fs::metadata(&db).unwrap().len() < size_before, "{out}");
    assert!(!dir.path().join("ledger.duckdb.compacting").exists());

    let pruned_in_place = store_with(&lines);
    pruned_in_place
        .prune(chrono::DateTime::parse_from_rfc3339("2026-11-28T02:03:00Z").unwrap().to_utc())
        .unwrap();
    let store = Store::open(&db).unwrap();
    assert!(!store.derived_stale().unwrap());
    assert_eq!(
        report_of(&store, &ReportFilter::default()),
        report_of(&pruned_in_place, &ReportFilter::default())
    );
    assert_eq!(store.derived_digest().unwrap(), pruned_in_place.derived_digest().unwrap());
}

/// Records of three teams, in `extra`, over two workflow names; the third
/// team's first attempts carry no team (a workflow takes the first value
/// its attempts carry).
fn team_records() -> Vec<String> {
    let mut lines = Vec::new();
    for (i, team) in ["search", "search", "ads", "chat", "chat", "chat"].iter().enumerate() {
        let id = format!("w{i}");
        let started = format!("2026-11-28T02:0{i}:00Z");
        let retried = format!("2026-11-28T02:0{i}:05Z");
        let name = if i % 2 == 0 { "summary" } else { "classify" };
        let first_team = if *team == "chat" { serde_json::Value::Null } else { (*team).into() };
        lines.push(rec(json!({"workflow_id": id, "attempt_id": format!("{id}-1"), "attempt": 1,
            "started_at": started, "workflow": name, "status": "error", "error_class": "transient",
            "input_tokens": 1000, "team": first_team})));
        lines.push(rec(json!({"workflow_id": id, "attempt_id": format!("{id}-2"), "attempt": 2,
            "started_at": retried, "workflow": name, "input_tokens": 1000, "output_tokens": 100,
            "team": team})));
    }
    lines
}

/// `report --group-by team`: every workflow counts once, under its team,
/// and the groups add up to the report's totals; the facts and rollups
/// kept write by write equal a rebuild with the dimension set.
#[test]
fn a_dimension_groups_outcomes_and_cost_and_is_kept_incrementally() {
    let lines = team_records();
    let store = Store::open_in_memory().unwrap();
    store.set_dimensions(&["team=extra.team".parse().unwrap()]).unwrap();
    for line in &lines {
        let decoded = jsonl::decode_lines(line, 1);
        assert!(decoded.rejections.is_empty(), "{:?}", decoded.rejections);
        store.write_batch(&decoded.attempts).unwrap();
    }
    let filter = ReportFilter { group_by: Some("team".into()), ..ReportFilter::default() };
    let report = report_of(&store, &filter);
    let groups = report.groups.clone().expect("grouped");
    assert_eq!(groups.dimension, "team");
    let by: std::collections::HashMap<_, _> =
        groups.values.iter().map(|g| (g.value.clone().unwrap(), g.clone())).collect();
    assert_eq!(by.len(), 3, "{groups:?}");
    assert_eq!(
        (by["search"].workflows.total, by["ads"].workflows.total, by["chat"].workflows.total),
        (2, 1, 3)
    );
    assert_eq!(by["chat"].workflows.retry_recovery, 3);
    assert_eq!(by["chat"].attempts, 6);
    assert_eq!(by["chat"].wasted_attempts, 3);
    let cost: f64 = groups.values.iter().map(|g| g.cost_usd).sum();
    assert!((cost - report.cost_usd.total).abs() < 1e-9, "{cost} vs {}", report.cost_usd.total);
    assert!(report.cost_usd.total > 0.0);

    let digest = store.derived_digest().unwrap();
    store.rebuild_derived().unwrap();
    assert_eq!(digest, store.derived_digest().unwrap());

    // A window cuts the same way: whole minutes from the rollups, edges
    // from the facts.
    let window = ReportFilter {
        since: Some("2026-11-28T02:01:30Z".parse().unwrap()),
        until: Some("2026-11-28T02:04:30Z".parse().unwrap()),
        group_by: Some("team".into()),
        ..ReportFilter::default()
    };
    let grouped = report_of(&store, &window).groups.unwrap();
    let totals: Vec<(Option<String>, i64)> =
        grouped.values.iter().map(|g| (g.value.clone(), g.workflows.total)).collect();
    assert_eq!(totals, vec![(Some("chat".into()), 2), (Some("ads".into()), 1)], "{grouped:?}");

    let err = store
        .report_rows(
            &ReportFilter { group_by: Some("customer".into()), ..ReportFilter::default() },
            &attempt_core::pricing::PriceTable::load(None).unwrap(),
        )
        .unwrap_err();
    assert!(err.to_string().contains("no dimension named `customer` (configured: team)"), "{err}");
}

/// Beyond K values of a label, rollups and groups sum later values under
/// `other`, counted; a report asking for a folded workflow name still
/// answers exactly, from the per-workflow facts.
#[test]
fn labels_beyond_k_fold_into_other_and_stay_exact() {
    let lines = team_records();
    let store = Store::open_in_memory().unwrap().with_label_limit(1).unwrap();
    store.set_dimensions(&["team=extra.team".parse().unwrap()]).unwrap();
    for line in &lines {
        store.write_batch(&jsonl::decode_lines(line, 1).attempts).unwrap();
    }
    let unbounded = store_with(&lines);

    let report = report_of(&store, &ReportFilter::default());
    let names: Vec<(Option<String>, i64)> =
        report.by_workflow.iter().map(|b| (b.workflow.clone(), b.workflows.total)).collect();
    // `summary` started first and keeps its row; `classify` is folded.
    assert_eq!(names, vec![(Some("other".into()), 3), (Some("summary".into()), 3)]);
    let full = report_of(&unbounded, &ReportFilter::default());
    assert_eq!(report.workflows, full.workflows);
    assert_eq!(report.cost_usd, full.cost_usd);

    for name in ["classify", "summary"] {
        let filter = ReportFilter { workflow: Some(name.into()), ..ReportFilter::default() };
        let (bounded, exact) = (report_of(&store, &filter), report_of(&unbounded, &filter));
        assert_eq!(bounded.workflows, exact.workflows, "{name}");
        assert_eq!(bounded.cost_usd, exact.cost_usd, "{name}");
        assert_eq!(bounded.by_workflow, exact.by_workflow, "{name}");
    }

    let grouped =
        report_of(&store, &ReportFilter { group_by: Some("team".into()), ..ReportFilter::default() });
    let teams: Vec<(Option<String>, i64)> =
        grouped.groups.unwrap().values.iter().map(|g| (g.value.clone(), g.workflows.total)).collect();
    assert_eq!(teams, vec![(Some("other".into()), 4), (Some("search".into()), 2)]);

    // /metrics: the same names, every sample of `classify` counted under
    // `other`.
    let prices = attempt_core::pricing::PriceTable::load(None).unwrap();
    let started: Vec<(Option<String>, i128)> = store
        .metric_rows(&prices)
        .unwrap()
        .into_iter()
        .filter(|r| r.family == "workflows_started")
        .map(|r| (r.labels[0].clone(), r.value))
        .collect();
    let mut started = started;
    started.sort();
    assert_eq!(started, vec![(Some("other".into()), 3), (Some("summary".into()), 3)]);

    // The admitted values are state, not derived: a rebuild folds the same.
    let digest = store.derived_digest().unwrap();
    store.rebuild_derived().unwrap();
    assert_eq!(digest, store.derived_digest().unwrap());
}

/// A database file holding `lines`, every line valid.
fn store_at(path: &std::path::Path, lines: &[String]) -> Store {
    let store = Store::open(path).unwrap();
    store.write_batch(&jsonl::decode_lines(&lines.join("\n"), 1).attempts).unwrap();
    store
}

/// Rows no decoder would take (written by an older version, or by hand)
/// that no derivation can handle: a start this build cannot read, and two
/// attempts 520,000 years apart (their offset overflows). Each workflow is
/// quarantined with its error; every other workflow (one of them with a
/// duration past the bound, clamped) is derived; a report, a rebuild and
/// `quarantine` all work on the database; a rebuild tries them again.
#[test]
fn workflows_that_cannot_be_derived_are_quarantined_and_the_rest_derived() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.duckdb");
    drop(store_at(&path, &fixture_lines()));
    {
        let conn = duckdb::Connection::open(&path).unwrap();
        conn.execute_batch(
            "INSERT INTO attempts (attempt_id, workflow_id, started_at, provider, model, status, layer,
                                   served_provider, served_model, commit_state, duration_ms, ingest_seq)
             VALUES ('x1', 'unreadable', '294246-12-01 00:00:00', 'openai', 'gpt-4o', 'ok', 'app',
                     'openai', 'gpt-4o', 'none', 5, 99),
                    ('y1', 'apart', '-260000-01-01 00:00:00', 'openai', 'gpt-4o', 'error', 'app',
                     'openai', 'gpt-4o', 'none', 5, 99),
                    ('y2', 'apart', '260000-01-01 00:00:00', 'openai', 'gpt-4o', 'ok', 'app',
                     'openai', 'gpt-4o', 'none', 5, 99),
                    ('z1', 'clamped', '2026-11-28 02:09:00', 'openai', 'gpt-4o', 'ok', 'app',
                     'openai', 'gpt-4o', 'none', 1e300, 99);",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert!(store.pending().unwrap().is_empty());
    let quarantined: Vec<(String, String)> =
        store.quarantined().unwrap().into_iter().map(|(id, error, ..)| (id, error)).collect();
    assert_eq!(quarantined.len(), 2, "{quarantined:?}");
    assert!(quarantined.iter().any(|(id, e)| id == "unreadable" && e.contains("outside the instants")));
    assert!(quarantined.iter().any(|(id, e)| id == "apart" && e.contains("Overflow")), "{quarantined:?}");
    let report = report_of(&store, &ReportFilter::default());
    let expected = report_of(&store_with(&fixture_lines()), &ReportFilter::default());
    assert_eq!(report.workflows.total, expected.workflows.total + 1, "the clamped workflow is counted");
    assert_eq!(report.attempts.total, expected.attempts.total + 1);
    store.rebuild_derived().unwrap();
    assert_eq!(store.quarantined().unwrap().len(), 2, "tried again, set aside again");
    assert_eq!(report_of(&store, &ReportFilter::default()), report);
    drop(store);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["quarantine", "--format", "json", "--db"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["quarantined"].as_array().unwrap().len(), 2, "{listed}");
}

/// Four workflow names, K = 2: the first two have rows of their own, the
/// last two are folded. Pruning the first two gives their room back, so
/// what is kept reports as a fresh ingest of it alone would, label rows
/// included; a span that arrives late for a pruned trace derives only
/// what it says itself, never the pruned attempts again.
#[test]
fn pruning_gives_label_room_back_and_a_late_span_of_a_pruned_trace_revives_nothing() {
    use attempt_core::ingest::otlp;
    let trace = "5b8efff798038103d269b633813fc60c";
    let span = |id: &str, parent: Option<&str>, status: u16, at_s: u64| {
        let mut span = json!({"traceId": trace, "spanId": id, "name": "POST",
            "startTimeUnixNano": format!("{}", 1_795_831_200_000_000_000u64 + at_s * 1_000_000_000),
            "endTimeUnixNano": format!("{}", 1_795_831_200_500_000_000u64 + at_s * 1_000_000_000),
            "attributes": [{"key": "http.request.method", "value": {"stringValue": "POST"}},
                           {"key": "http.response.status_code", "value": {"intValue": status}}]});
        match parent {
            Some(parent) => span["parentSpanId"] = json!(parent),
            None => {
                span["name"] = json!("chat");
                span["attributes"] = json!([
                    {"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
                    {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}},
                    {"key": "attempt.workflow", "value": {"stringValue": "traced"}}]);
            }
        }
        span
    };
    let spans_of = |spans: Vec<serde_json::Value>| {
        let export = json!({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]});
        otlp::decode_json(&export.to_string()).unwrap().decoded.spans
    };
    // The trace starts at 02:00, before the cut, like w0 and w1.
    let traced = spans_of(vec![
        span("a000000000000001", None, 200, 0),
        span("a000000000000002", Some("a000000000000001"), 500, 0),
        span("a000000000000003", Some("a000000000000001"), 200, 0),
    ]);
    let late = spans_of(vec![span("a000000000000004", Some("a000000000000001"), 503, 0)]);
    let lines: Vec<String> = (0..4)
        .map(|i| {
            rec(json!({"workflow_id": format!("w{i}"), "workflow": format!("name-{i}"),
                       "started_at": format!("2026-11-28T02:0{i}:00Z"), "input_tokens": 100}))
        })
        .collect();
    let store = Store::open_in_memory().unwrap().with_label_limit(2).unwrap();
    store.write_batch(&jsonl::decode_lines(&lines.join("\n"), 1).attempts).unwrap();
    store.write_batches(&[Batch { spans: &traced, ..Batch::default() }]).unwrap();
    assert_eq!(store.attempt_count().unwrap(), 6);

    let cut = chrono::DateTime::parse_from_rfc3339("2026-11-28T02:02:00Z").unwrap().to_utc();
    assert_eq!(store.prune(cut).unwrap(), (3, 4));
    store.write_batches(&[Batch { spans: &late, ..Batch::default() }]).unwrap();

    let fresh = Store::open_in_memory().unwrap().with_label_limit(2).unwrap();
    fresh.write_batch(&jsonl::decode_lines(&lines[2..].join("\n"), 1).attempts).unwrap();
    fresh.write_batches(&[Batch { spans: &late, ..Batch::default() }]).unwrap();
    assert_eq!(store.attempt_count().unwrap(), 2, "the late span brought pruned attempts back");
    assert_eq!(store.admitted_labels().unwrap(), fresh.admitted_labels().unwrap());
    let names: Vec<Option<String>> =
        report_of(&store, &ReportFilter::default()).by_workflow.iter().map(|b| b.workflow.clone()).collect();
    assert_eq!(names, [Some("name-2".to_string()), Some("name-3".to_string())]);
    assert_eq!(report_of(&store, &ReportFilter::default()), report_of(&fresh, &ReportFilter::default()));
    assert_eq!(store.derived_digest().unwrap(), fresh.derived_digest().unwrap());
}

/// Served providers and models are client strings: however many there
/// are, the cost ledger lists the 50 providers that cost the most and 200
/// of their models, folding the rest under `other` with exact totals.
#[test]
fn the_cost_ledger_is_bounded_whatever_names_clients_send() {
    let lines: Vec<String> = (0..400)
        .map(|i| {
            rec(json!({"workflow_id": format!("w{i}"), "attempt_id": format!("a{i}"),
                       "served_provider": format!("provider-{i:03}"), "served_model": format!("model-{i:03}"),
                       "input_tokens": 1000 + i, "output_tokens": 10, "cost_usd": 0.001 * (i as f64 + 1.0)}))
        })
        .collect();
    let report = report_of(&store_with(&lines), &ReportFilter::default());
    assert_eq!(report.by_served_provider.len(), 51);
    assert!(report.by_served_model.len() <= 251, "{} models", report.by_served_model.len());
    // The dearest are listed by name; everything else is in `other`.
    assert_eq!(report.by_served_provider.iter().filter(|p| p.served_provider == "provider-399").count(), 1);
    let other = report.by_served_provider.iter().find(|p| p.served_provider == "other").unwrap();
    assert_eq!(other.attempts, 350);
    let attempts: i64 = report.by_served_provider.iter().map(|p| p.attempts).sum();
    assert_eq!(attempts, 400);
    let cost: f64 = report.by_served_provider.iter().map(|p| p.cost_usd).sum();
    assert!((cost - report.cost_usd.total).abs() < 1e-9, "{cost} vs {}", report.cost_usd.total);
    let model_attempts: i64 = report.by_served_model.iter().map(|m| m.attempts).sum();
    assert_eq!(model_attempts, 400);
}

/// Workflow names, routes, fallbacks, providers of failures and dimension
/// values are client strings too: each list folds past its bound into
/// `other` rows that hold exactly what they fold, so the report's size does
/// not grow with the names while every total stays what it was.
#[test]
fn every_list_of_names_in_the_report_is_bounded_with_exact_totals() {
    use attempt_ledger::report::fold;
    let n = 400;
    let lines: Vec<String> = (0..n)
        .flat_map(|i| {
            let first = rec(json!({"workflow_id": format!("w{i}"), "attempt_id": format!("w{i}-1"), "attempt": 0,
                "workflow": format!("name-{i:03}"), "provider": format!("p{i:03}"), "model": format!("m{i:03}"),
                "status": "error", "error_class": "transient", "http_status": 529,
                "input_tokens": 100, "cost_usd": 0.001, "team": format!("team-{i:03}")}));
            let second = rec(json!({"workflow_id": format!("w{i}"), "attempt_id": format!("w{i}-2"), "attempt": 1,
                "started_at": "2026-11-28T02:00:01Z", "workflow": format!("name-{i:03}"), "route": "fallback",
                "provider": format!("fb{i:03}"), "model": format!("fm{i:03}"), "status": "ok",
                "input_tokens": 100, "output_tokens": 10, "cost_usd": 0.002, "team": format!("team-{i:03}")}));
            [first, second]
        })
        .collect();
    let store = Store::open_in_memory().unwrap();
    store.set_dimensions(&["team=extra.team".parse().unwrap()]).unwrap();
    let decoded = jsonl::decode_lines(&lines.join("\n"), 1);
    assert!(decoded.rejections.is_empty(), "{:?}", decoded.rejections);
    store.write_batch(&decoded.attempts).unwrap();
    let filter = ReportFilter { group_by: Some("team".into()), ..ReportFilter::default() };
    let report = report_of(&store, &filter);

    let workflows = |name: &str, counts: &[i64]| -> i64 {
        assert!(!counts.is_empty(), "{name} is empty");
        counts.iter().sum()
    };
    assert_eq!(report.by_workflow.len(), fold::WORKFLOWS + 1);
    assert_eq!(report.by_workflow.last().unwrap().workflow.as_deref(), Some(fold::OTHER));
    let by_workflow: Vec<i64> = report.by_workflow.iter().map(|w| w.workflows.total).collect();
    assert_eq!(workflows("by_workflow", &by_workflow), n);
    let cost: f64 = report.by_workflow.iter().map(|w| w.cost_usd).sum();
    assert!((cost - report.cost_usd.total).abs() < 1e-9, "{cost} vs {}", report.cost_usd.total);

    assert_eq!(report.by_primary_route.len(), fold::ROUTES + 1);
    let other = report.by_primary_route.last().unwrap();
    assert_eq!((other.provider.as_deref(), other.model.as_deref()), (Some(fold::OTHER), Some(fold::OTHER)));
    assert_eq!(other.workflows, n - fold::ROUTES as i64);
    assert_eq!(other.primary_success_rate, Some(0.0), "every primary attempt failed");
    let routes: Vec<i64> = report.by_primary_route.iter().map(|r| r.fallback_recovery).collect();
    assert_eq!(workflows("by_primary_route", &routes), n);

    assert_eq!(report.fallbacks.len(), fold::FALLBACKS + 1);
    let fallbacks: Vec<i64> = report.fallbacks.iter().map(|f| f.recovered).collect();
    assert_eq!(workflows("fallbacks", &fallbacks), n);

    assert_eq!(report.error_classes.len(), fold::ERROR_CLASS_ROWS + 1);
    assert_eq!(report.error_classes.last().unwrap().provider, fold::OTHER);
    let failed: Vec<i64> = report.error_classes.iter().map(|e| e.attempts).collect();
    assert_eq!(workflows("error_classes", &failed), n);
    let failed_cost: f64 = report.error_classes.iter().map(|e| e.cost_usd).sum();
    assert!(
        (failed_cost - report.cost_usd.wasted).abs() < 1e-9,
        "{failed_cost} vs {}",
        report.cost_usd.wasted
    );

    let groups = report.groups.as_ref().unwrap();
    assert_eq!(groups.values.len(), fold::GROUP_VALUES + 1);
    let grouped: Vec<i64> = groups.values.iter().map(|g| g.workflows.total).collect();
    assert_eq!(workflows("groups", &grouped), n);
    let grouped_attempts: i64 = groups.values.iter().map(|g| g.attempts).sum();
    assert_eq!(grouped_attempts, 2 * n);

    // Alert rules read every route.
    let rows = store.report_rows(&filter, &attempt_core::pricing::PriceTable::load(None).unwrap()).unwrap();
    assert_eq!(
        attempt_ledger::report::Report::from_unfolded_rows(&rows, filter.retry_budget).by_primary_route.len(),
        n as usize
    );
}

/// The columns migration 19 narrowed to BIGINT: every sum kept per
/// workflow and per minute.
const INT64_SUMS: [(&str, &[&str]); 9] = [
    ("workflow_spend", &SPEND),
    ("workflow_findings", &SPEND),
    ("workflow_steps", &SPEND),
    ("workflow_latency", &["sum_us"]),
    ("rollup_attempts", &SPEND),
    ("rollup_findings", &SPEND),
    ("rollup_latency", &["sum_us"]),
    ("rollup_recovery", &["sum_us"]),
    (
        "rollup_steps",
        &[
            "input_tokens",
            "output_tokens",
            "cached_input_tokens",
            "cache_write_input_tokens",
            "emitter_cost_pusd",
            "added_us",
            "added_to_outcome_us",
        ],
    ),
];
const SPEND: [&str; 5] =
    ["input_tokens", "output_tokens", "cached_input_tokens", "cache_write_input_tokens", "emitter_cost_pusd"];

fn column_types(path: &std::path::Path) -> Vec<String> {
    let conn = duckdb::Connection::open(path).unwrap();
    INT64_SUMS
        .iter()
        .flat_map(|(table, columns)| columns.iter().map(move |c| (table, c)))
        .map(|(table, column)| {
            conn.query_row(
                "SELECT data_type FROM duckdb_columns() WHERE table_name = ? AND column_name = ?",
                [table, column],
                |r| r.get(0),
            )
            .unwrap()
        })
        .collect()
}

/// A database written with 128-bit stored sums (schema 18) is converted in
/// place when it is opened: the same reports, the same derived rows as a
/// fresh ingest of its attempts, and the all-time totals still 128 bits.
#[test]
fn a_database_with_128_bit_sums_is_converted_in_place_and_reads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.duckdb");
    let before = {
        let store = store_at(&path, &fixture_lines());
        report_of(&store, &ReportFilter::default())
    };
    {
        let conn = duckdb::Connection::open(&path).unwrap();
        for (table, columns) in INT64_SUMS {
            for column in columns {
                conn.execute_batch(&format!(
                    "ALTER TABLE {table} ALTER COLUMN {column} SET DATA TYPE HUGEINT;"
                ))
                .unwrap();
            }
        }
        // Schema 18 had neither the 64-bit sums (19), the bill (20), the
        // rate-limit headroom (21), the limit kinds (22), the reasoning
        // tokens (24) nor the price keys (25).
        let mut headroom: String = attempt_core::ratelimit::FIELDS
            .iter()
            .map(|(name, _, _)| format!("ALTER TABLE attempts DROP COLUMN {name};"))
            .collect();
        let priced = ["price_key", "priced_kinds", "cache_write_1h_input_tokens", "web_search_requests"];
        for table in ["workflow_spend", "rollup_attempts", "total_attempts"] {
            headroom +=
                &priced.iter().map(|c| format!("ALTER TABLE {table} DROP COLUMN {c};")).collect::<String>();
        }
        for table in [
            "workflow_findings",
            "rollup_findings",
            "workflow_steps",
            "rollup_steps",
            "total_steps",
            "total_shapes",
        ] {
            let columns = priced.iter().chain(&["reasoning_output_tokens"]);
            headroom += &columns.map(|c| format!("ALTER TABLE {table} DROP COLUMN {c};")).collect::<String>();
        }
        for column in ["batch", "cache_write_1h_input_tokens", "web_search_requests"] {
            headroom += &format!("ALTER TABLE attempts DROP COLUMN {column};");
        }
        conn.execute_batch(&format!(
            "DELETE FROM schema_migrations WHERE version >= 19;
             {SCHEMA_25_FINDINGS}
             DROP TABLE bill_buckets; DROP TABLE bill_facts; DROP TABLE workflow_headroom;
             DROP TABLE circuit_changes; ALTER TABLE workflow_spend DROP COLUMN off_primary;
             ALTER TABLE workflow_spend DROP COLUMN limit_kind;
             ALTER TABLE rollup_attempts DROP COLUMN limit_kind;
             ALTER TABLE total_attempts DROP COLUMN limit_kind;
             ALTER TABLE workflow_spend DROP COLUMN reasoning_output_tokens;
             ALTER TABLE rollup_attempts DROP COLUMN reasoning_output_tokens;
             ALTER TABLE total_attempts DROP COLUMN reasoning_output_tokens;
             ALTER TABLE attempts DROP COLUMN reasoning_output_tokens;
             ALTER TABLE attempts DROP COLUMN cost_currency;
             ALTER TABLE attempts DROP COLUMN billing_account;
             ALTER TABLE attempts DROP COLUMN service_tier;
             {headroom}"
        ))
        .unwrap();
    }
    assert!(column_types(&path).iter().all(|t| t == "HUGEINT"), "set up as schema 18 left it");
    let store = Store::open(&path).unwrap();
    assert_eq!(report_of(&store, &ReportFilter::default()), before);
    assert_eq!(store.derived_digest().unwrap(), store_with(&fixture_lines()).derived_digest().unwrap());
    drop(store);
    assert!(column_types(&path).iter().all(|t| t == "BIGINT"), "{:?}", column_types(&path));
    let conn = duckdb::Connection::open(&path).unwrap();
    let wide: i64 = conn
        .query_row(
            "SELECT count(*) FROM duckdb_columns() WHERE table_name LIKE 'total_%' AND data_type = 'HUGEINT'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    // 20 sums, and the one-hour cache writes and web searches of
    // total_attempts, and those and reasoning of total_steps and
    // total_shapes (migrations/0025_prices.sql).
    assert_eq!(wide, 28, "the all-time totals keep 128 bits");
}

/// Turns the findings and steps of today's schema back into schema 25's:
/// findings of kind `attempt` stored as workflow_findings rows (with their
/// seq, offset_ms and prev_offset_ms), the steps without prev_offset_ms.
/// Written out here, not through the store's macro, so that it stays what
/// that build wrote.
const SCHEMA_25_FINDINGS: &str = "
    ALTER TABLE workflow_findings ADD COLUMN seq BIGINT;
    ALTER TABLE workflow_findings ADD COLUMN offset_ms DOUBLE;
    ALTER TABLE workflow_findings ADD COLUMN prev_offset_ms DOUBLE;
    INSERT INTO workflow_findings BY NAME
    SELECT workflow_id, first_at, workflow_name, 'attempt' AS kind,
           CASE WHEN seq = delivered_seq THEN 'delivered' ELSE 'wasted' END AS class, layer, served_provider,
           served_model, cost_kind, price_key, priced_kinds, seq, offset_ms, prev_offset_ms, 1 AS attempts,
           input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens, emitter_cost_pusd,
           reasoning_output_tokens, cache_write_1h_input_tokens, web_search_requests
    FROM workflow_steps;
    ALTER TABLE workflow_steps DROP COLUMN prev_offset_ms;";

/// A database as the build before schema 26 wrote it (findings of kind
/// `attempt` stored beside the steps) is moved in place when it is opened,
/// with nothing derived again: the same report and audit (with attempt,
/// time and cost budgets, whose rows those findings were), and the same
/// derived rows as a fresh ingest of its attempts.
#[test]
fn a_database_of_schema_25_moves_its_attempt_findings_to_the_steps_in_place() {
    use attempt_core::policy::{LoadedPolicy, PolicySet};
    use attempt_ledger::simulate::{Scenario, SimOptions, default_start, simulate};
    let mut lines = Vec::new();
    for scenario in [Scenario::NaiveRetries, Scenario::UnsafeFallback, Scenario::Overnight529Storm] {
        let options =
            SimOptions { scenario, workflows: Some(400), seed: 5, start: default_start(), span: None };
        let mut out = Vec::new();
        simulate(&options, &mut out).unwrap();
        lines.extend(String::from_utf8(out).unwrap().lines().map(str::to_string));
    }
    let policy = LoadedPolicy {
        file: None,
        set: PolicySet::parse(
            "[default]\nmax_total_attempts = 2\nmax_elapsed_ms = 1500\nmax_extra_cost_usd = 0.0001",
            "t",
        )
        .unwrap(),
    };
    let prices = attempt_core::pricing::PriceTable::load(None).unwrap();
    let window = attempt_core::request::Window::default().audited_with(&policy.set);
    let audit = |store: &Store| {
        attempt_ledger::report::audit::Audit::of(&policy, &store.audit(&window, &prices).unwrap())
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.duckdb");
    let (report, audited, digest) = {
        let store = store_at(&path, &lines);
        (report_of(&store, &ReportFilter::default()), audit(&store), store.derived_digest().unwrap())
    };
    let budgets = ["over_attempt_budget", "over_time_budget", "over_cost_budget"];
    for name in budgets {
        let found = audited.findings.iter().find(|f| f.finding.name() == name).unwrap();
        assert!(found.count() > 0, "{name} is found in the scenarios");
    }
    {
        let conn = duckdb::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "DELETE FROM schema_migrations WHERE version >= 26; {SCHEMA_25_FINDINGS}"
        ))
        .unwrap();
        let stored: i64 = conn
            .query_row("SELECT count(*) FROM workflow_findings WHERE kind = 'attempt'", [], |r| r.get(0))
            .unwrap();
        assert!(stored > 300, "set up as schema 25 left it: {stored} attempt rows");
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(report_of(&store, &ReportFilter::default()), report);
    assert_eq!(audit(&store), audited);
    assert_eq!(store.derived_digest().unwrap(), digest);
    assert_eq!(digest, store_with(&lines).derived_digest().unwrap());
    drop(store);
    let left: i64 = duckdb::Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM workflow_findings WHERE kind = 'attempt'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(left, 0, "the findings no longer hold the steps twice");
}

/// $9.2M in pico-USD is a BIGINT's bound. One attempt may cost up to it; a
/// workflow whose attempts of one row sum past it, and a minute whose workflows do, are
/// refused with the sum named (the workflow that carried it past is
/// quarantined) and nothing is wrapped: every other workflow is derived.
#[test]
fn sums_past_the_64_bit_bound_are_refused_with_their_field_never_wrapped() {
    let five_million = |workflow: &str, attempt: &str, minute: u32| {
        rec(json!({"workflow_id": workflow, "attempt_id": attempt, "cost_usd": 5_000_000.0,
                   "started_at": format!("2026-11-28T04:{minute:02}:00Z")}))
    };
    let failed = |attempt: &str, seq: u32, cost_usd: f64| {
        rec(json!({"workflow_id": "rich", "attempt_id": attempt, "attempt": seq, "cost_usd": cost_usd,
                   "status": "error", "error_class": "rate_limit", "started_at": "2026-11-28T04:00:00Z"}))
    };
    let mut lines = fixture_lines();
    // Two retries that failed in the same minute: one row of the workflow's spend.
    lines.push(failed("rich-1", 1, 0.0));
    lines.push(failed("rich-2", 2, 5_000_000.0));
    lines.push(failed("rich-3", 3, 5_000_000.0));
    lines.push(five_million("same-minute-a", "a", 10));
    lines.push(five_million("same-minute-b", "b", 10));
    let dir = tempfile::tempdir().unwrap();
    let store = store_at(&dir.path().join("ledger.duckdb"), &lines);
    let quarantined: Vec<(String, String)> =
        store.quarantined().unwrap().into_iter().map(|(id, error, ..)| (id, error)).collect();
    assert_eq!(quarantined.len(), 2, "{quarantined:?}");
    assert!(
        quarantined.iter().any(|(id, e)| id == "rich"
            && e.contains("workflow_spend.emitter_cost_pusd sums to 10000000000000000000")
            && e.contains("past the bound of a stored sum")),
        "{quarantined:?}"
    );
    assert!(
        quarantined
            .iter()
            .any(|(id, e)| id.starts_with("same-minute-") && e.contains("rollup_attempts.emitter_cost_pusd")),
        "{quarantined:?}"
    );
    let report = report_of(&store, &ReportFilter::default());
    let expected = report_of(&store_with(&fixture_lines()), &ReportFilter::default());
    assert_eq!(
        report.workflows.total,
        expected.workflows.total + 1,
        "one $5M workflow of the minute is derived"
    );
    let added = report.cost_usd.total - expected.cost_usd.total;
    assert!((added - 5_000_000.0).abs() < 1e-6, "{added}");
}
