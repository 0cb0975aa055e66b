//! One snapshot per `queries/*.sql` against the fixture database, printed
//! with arrow's pretty printer, plus the JSON report over the same data. A
//! changed snapshot is a diff to review, never to accept blindly.

use attempt_core::pricing::PriceTable;
use attempt_core::request::ReportFilter;
use attempt_core::request::Window;
use attempt_ledger::report::{Format, render};
use attempt_ledger::store::Query;

use crate::{FIXTURE, report_of, store_with};

fn fixture_lines() -> Vec<String> {
    FIXTURE.lines().map(String::from).collect()
}

#[test]
fn every_query_file_against_the_fixture() {
    let store = store_with(&fixture_lines());
    let prices = PriceTable::load(None).unwrap();
    for query in Query::ALL {
        let table = store.query_table(query, &ReportFilter::default(), &prices).unwrap();
        insta::assert_snapshot!(query.file_name(), table);
    }
}

#[test]
fn every_query_file_has_a_snapshot_and_a_header() {
    let files: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/queries"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".sql"))
        .collect();
    // metrics.sql feeds /metrics, checked against the report in alerts.rs;
    // the derivation files build what every report reads (properties.rs
    // checks them against a rebuild; off_primary_*.sql are in the snapshots
    // of fallback_costs.sql and circuits.sql).
    let derivation = [
        "facts.sql",
        "rollups.sql",
        "finding_rollups.sql",
        "window.sql",
        "scope.sql",
        "labels.sql",
        "admit.sql",
        "cost.sql",
        "shapes.sql",
        "shape_rollups.sql",
        "bounds.sql",
        "attempt_findings.sql",
        "circuit_timeline.sql",
        "off_primary_rows.sql",
        "off_primary_spend.sql",
    ];
    // groups.sql runs only for --group-by: its snapshot is json_report_grouped_by_a_dimension;
    // workflow.sql's is workflow_pages_of_the_fixture (workflow_circuits.sql's
    // is checked by circuits.rs against each incident workflow), timeseries.sql's
    // timeseries_of_the_fixture_adds_up_to_the_report, audit.sql's
    // audit_of_the_fixture (and a case per finding in audit.rs);
    // tune_curve.sql's, step_rollups.sql's, tune_shapes.sql's,
    // tune_replay.sql's, tune_outcome_counts.sql's and tune_steps.sql's
    // tune_of_the_fixture (and
    // tune.rs, against the report, the simulator, a window's workflows
    // alone and each other).
    let known: Vec<&str> = Query::ALL
        .iter()
        .map(|q| q.file_name())
        .chain([
            "metrics.sql",
            "groups.sql",
            "workflow.sql",
            "workflow_circuits.sql",
            "timeseries.sql",
            "audit.sql",
        ])
        .chain(["tune_curve.sql", "step_rollups.sql", "tune_shapes.sql", "tune_replay.sql"])
        .chain(["tune_outcome_counts.sql", "tune_steps.sql"])
        // reconcile_of_the_bill_fixtures (and reconcile.rs, by hand).
        .chain(["reconcile_groups.sql", "reconcile_ledger.sql", "reconcile_billed.sql"])
        .chain(derivation)
        .collect();
    for file in &files {
        assert!(known.contains(&file.as_str()), "{file} is not run by the report");
        let text = std::fs::read_to_string(format!("{}/queries/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert!(text.starts_with(&format!("-- {file}:")), "{file} lacks its header comment");
        assert!(text.contains("-- Parameters:") && text.contains("-- Columns"), "{file} header");
    }
    assert_eq!(files.len(), known.len());
}

/// The fixture grouped by the provider that served (a record field as a
/// dimension): the `groups` section of the JSON report.
#[test]
fn json_report_grouped_by_a_dimension() {
    let store = store_with(&fixture_lines());
    store.set_dimensions(&["served=served_provider".parse().unwrap()]).unwrap();
    let report =
        report_of(&store, &ReportFilter { group_by: Some("served".into()), ..ReportFilter::default() });
    let groups = serde_json::to_string_pretty(&report.groups).unwrap();
    insta::assert_snapshot!("groups.json", groups);
}

/// The bill fixtures held against their ledger (`queries/reconcile_*.sql`):
/// one cell per shape a cell can have, its figures and causes.
#[test]
fn reconcile_of_the_bill_fixtures() {
    let answer = crate::reconcile::answer_after(&[0, 1, 2, 3, 4]);
    insta::assert_snapshot!("reconcile.json", serde_json::to_string_pretty(&answer).unwrap());
}

/// The recovery audit of the fixture (`queries/audit.sql`).
#[test]
fn audit_of_the_fixture() {
    let store = store_with(&fixture_lines());
    let policy = attempt_core::policy::LoadedPolicy::default();
    let audit = attempt_ledger::report::audit::Audit::of(
        &policy,
        &store.audit(&Window::default().audited_with(&policy.set), &PriceTable::load(None).unwrap()).unwrap(),
    );
    insta::assert_snapshot!("audit.json", audit.render(Format::Json));
}

/// The curve of the fixture and a replay of two limits over it, decided by
/// shape (`queries/tune_curve.sql`, `tune_shapes.sql`, `tune_replay.sql`)
/// and, under a time limit that never binds, workflow by workflow
/// (`tune_steps.sql`).
#[test]
fn tune_of_the_fixture() {
    let store = store_with(&fixture_lines());
    let set = ["max_retries.app=0", "fallback=false"];
    let tune = crate::tune::tune_of(&store, &ReportFilter::default(), &set);
    insta::assert_snapshot!("tune.json", tune.render(Format::Json));
    let timed: Vec<&str> = set.iter().copied().chain(["max_elapsed_ms=1e15"]).collect();
    let mut one_by_one = crate::tune::tune_of(&store, &ReportFilter::default(), &timed);
    if let (Some(by_shape), Some(by_workflow)) = (&tune.replay, &mut one_by_one.replay) {
        by_workflow.policy = by_shape.policy.clone();
    }
    assert_eq!(one_by_one, tune);
}

#[test]
fn json_report_of_the_fixture() {
    let report = report_of(&store_with(&fixture_lines()), &ReportFilter::default());
    insta::assert_snapshot!("report.json", render(&report, Format::Json));
}

/// The workflow page's data for the fixture's retry, fallback, reroute and
/// unknown-model workflows: attempts in order, waits, routes, delivered,
/// cost kinds and costs (`queries/workflow.sql`).
#[test]
fn workflow_pages_of_the_fixture() {
    use attempt_ledger::report::workflow::WorkflowDetail;
    let store = store_with(&fixture_lines());
    let prices = PriceTable::load(None).unwrap();
    let mut pages = Vec::new();
    for id in ["wf-retry", "wf-fallback", "wf-reroute", "wf-unknown-model"] {
        let (rows, circuits) = store.workflow_attempts(id, &prices).unwrap();
        pages.push(WorkflowDetail::from_rows(id, &rows, &circuits).unwrap());
    }
    insta::assert_snapshot!("workflow_pages", serde_json::to_string_pretty(&pages).unwrap());
    assert!(store.workflow_attempts("wf-nobody", &prices).unwrap().0.is_empty());
}

/// The pages price with the reports' rule: over every workflow, their costs
/// add up to the report's total, wasted and unknown counts, and each page's
/// outcome is the one the report counts.
#[test]
fn workflow_pages_add_up_to_the_report() {
    use attempt_ledger::report::workflow::WorkflowDetail;
    let store = store_with(&fixture_lines());
    let prices = PriceTable::load(None).unwrap();
    let report = report_of(&store, &ReportFilter::default());
    let ids: std::collections::BTreeSet<String> = fixture_lines()
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["workflow_id"].as_str().unwrap().to_string()
        })
        .collect();
    let (mut cost, mut wasted, mut unknown) = (0.0, 0.0, 0);
    let mut outcomes = std::collections::BTreeMap::<String, i64>::new();
    for id in &ids {
        let (rows, circuits) = store.workflow_attempts(id, &prices).unwrap();
        let page = WorkflowDetail::from_rows(id, &rows, &circuits).unwrap();
        cost += page.cost_usd;
        wasted += page.wasted_cost_usd;
        unknown += page.unknown_cost_attempts as i64;
        *outcomes.entry(page.outcome.to_string()).or_default() += 1;
        let seqs: Vec<i64> = page.attempts.iter().map(|a| a.seq).collect();
        assert_eq!(seqs, (1..=page.attempts.len() as i64).collect::<Vec<_>>(), "{id}");
    }
    assert!((cost - report.cost_usd.total).abs() < 1e-9, "{cost} vs {}", report.cost_usd.total);
    assert!((wasted - report.cost_usd.wasted).abs() < 1e-9, "{wasted} vs {}", report.cost_usd.wasted);
    assert_eq!(unknown, report.cost_usd.unknown_cost_attempts);
    let json = serde_json::to_value(&report.workflows).unwrap();
    for (outcome, n) in outcomes {
        assert_eq!(json[&outcome].as_i64(), Some(n), "{outcome}");
    }
}

fn range_with_route(
    since: chrono::DateTime<chrono::Utc>,
    until: chrono::DateTime<chrono::Utc>,
    step: u64,
    route: &str,
) -> attempt_core::request::SeriesRange {
    attempt_core::request::SeriesRange::new(
        since,
        until,
        Some(std::time::Duration::from_secs(step)),
        None,
        Some(route.to_string()),
    )
    .unwrap()
}

/// The charts' buckets over the fixture: every minute of the range present,
/// and per outcome, attempts, cost, waste, retries, layers and a route's
/// outcomes, the buckets add up to the report over the same window, at a
/// 1-minute and a 5-minute step.
#[test]
fn timeseries_of_the_fixture_adds_up_to_the_report() {
    use attempt_core::request::SeriesRange;
    use attempt_ledger::report::timeseries::Timeseries;
    let store = store_with(&fixture_lines());
    let prices = PriceTable::load(None).unwrap();
    let at = |t: &str| chrono::DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&chrono::Utc);
    let (since, until) = (at("2026-11-28T02:00:00Z"), at("2026-11-28T02:10:00Z"));
    let report = report_of(
        &store,
        &ReportFilter { since: Some(since), until: Some(until), ..ReportFilter::default() },
    );
    let workflows = serde_json::to_value(&report.workflows).unwrap();
    for (step, buckets) in [(60, 10), (300, 2)] {
        let range =
            SeriesRange::new(since, until, Some(std::time::Duration::from_secs(step)), None, None).unwrap();
        let series = Timeseries::from_rows(&range, &store.timeseries(&range, &prices).unwrap());
        assert_eq!(series.buckets.len(), buckets);
        if step == 60 {
            insta::assert_snapshot!("timeseries", serde_json::to_string_pretty(&series).unwrap());
        }
        let mut by_outcome = std::collections::BTreeMap::<&str, i64>::new();
        for b in &series.buckets {
            for (outcome, n) in &b.workflows {
                *by_outcome.entry(outcome).or_default() += n;
            }
        }
        for (outcome, n) in by_outcome {
            assert_eq!(workflows[outcome].as_i64(), Some(n), "{outcome} at step {step}");
        }
        let sum = |f: fn(&attempt_ledger::report::timeseries::Bucket) -> f64| {
            series.buckets.iter().map(f).sum::<f64>()
        };
        assert_eq!(series.buckets.iter().map(|b| b.attempts).sum::<i64>(), report.attempts.total);
        assert!((sum(|b| b.cost_usd) - report.cost_usd.total).abs() < 1e-9);
        assert!((sum(|b| b.wasted_cost_usd) - report.cost_usd.wasted).abs() < 1e-9);
        assert_eq!(
            series.buckets.iter().map(|b| b.unknown_cost_attempts).sum::<i64>(),
            report.cost_usd.unknown_cost_attempts
        );
        assert_eq!(series.buckets.iter().map(|b| b.wasted_attempts).sum::<i64>(), report.attempts.wasted);
        assert_eq!(
            series.buckets.iter().map(|b| b.wasted_tokens).sum::<i128>(),
            report.tokens.wasted.input + report.tokens.wasted.output
        );
        // Retries by the minute each attempt started, as the retry budget.
        assert_eq!(
            series
                .buckets
                .iter()
                .map(|b| (b.first_attempts, b.retries))
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1)),
            (report.retry_budget.first_attempts, report.retry_budget.retries)
        );
        for breakdown in [
            |b: &attempt_ledger::report::timeseries::Bucket| b.cost_by_served_provider.values().sum::<f64>(),
            |b: &attempt_ledger::report::timeseries::Bucket| {
                b.cost_by_requested_provider.values().sum::<f64>()
            },
            |b: &attempt_ledger::report::timeseries::Bucket| b.cost_by_served_model.values().sum::<f64>(),
        ] {
            assert!((sum(breakdown) - report.cost_usd.total).abs() < 1e-9);
        }
        // A route keeps the workflows whose primary provider it is.
        let route = range_with_route(since, until, step, "openai");
        let routed = Timeseries::from_rows(&route, &store.timeseries(&route, &prices).unwrap());
        let mut outcomes = std::collections::BTreeMap::<&str, i64>::new();
        for b in &routed.buckets {
            for (outcome, n) in &b.workflows {
                *outcomes.entry(outcome).or_default() += n;
            }
        }
        let openai = report.by_primary_route.iter().filter(|r| r.provider.as_deref() == Some("openai"));
        let (primary, fallback) =
            openai.fold((0, 0), |a, r| (a.0 + r.primary_success, a.1 + r.fallback_recovery));
        assert!(primary + fallback > 0, "the fixture has openai-primary workflows");
        assert_eq!((outcomes["primary_success"], outcomes["fallback_recovery"]), (primary, fallback));
        for layer in &report.amplification {
            let Some(name) = layer.layer.map(<&'static str>::from) else { continue };
            let drawn: i64 =
                series.buckets.iter().map(|b| b.attempts_by_layer.get(name).copied().unwrap_or(0)).sum();
            assert_eq!(drawn, layer.attempts, "{name}");
        }
    }
}

/// The query files rendered from the rule templates of `queries/rules/`,
/// each committed, so a rule's change shows in every engine's diff: DuckDB's
/// derivation, lake dedup and lake report, Spark's and ClickHouse's lake
/// reports.
const RENDERED: [(&str, &str); 6] = [
    ("queries/rules/facts.template.sql", "queries/facts.sql"),
    ("queries/rules/lake_dedup.template.sql", "queries/lake/dedup.sql"),
    ("queries/rules/lake_spark_report.template.sql", "queries/lake/spark/report.sql"),
    ("queries/rules/lake_clickhouse_report.template.sql", "queries/lake/clickhouse/report.sql"),
    ("queries/rules/cost.template.sql", "queries/cost.sql"),
    ("queries/rules/lake_scope.template.sql", "queries/lake/scope.sql"),
];

/// The rules only the store applies: the lake's engines price attempt by
/// attempt, so they need no key for groups of attempts.
const STORE_ONLY_RULES: [&str; 1] = ["priced_kinds"];

fn repo_file(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// The rules `text` calls, and the rules those call, by name.
fn rules_called(
    text: &str,
    rules: &std::collections::BTreeMap<String, attempt_core::sql_rules::Rule>,
) -> Vec<String> {
    let mut called: Vec<String> = Vec::new();
    let mut pending = vec![text.to_string()];
    while let Some(text) = pending.pop() {
        for (name, rule) in rules {
            if text.contains(&format!("{{{{{name}(")) && !called.contains(name) {
                called.push(name.clone());
                pending.push(rule.body.clone());
            }
        }
    }
    called.sort();
    called
}

/// Each rendered file is its template with the rules; `ATTEMPT_LEDGER_RENDER=1`
/// writes them (docs/testing.md, "Rules"). Every rule reaches every engine.
#[test]
fn every_rendered_query_is_its_template_with_the_rules() {
    use attempt_core::sql_rules::{parse_rules, render};
    let rules = parse_rules(&repo_file("queries/rules/rules.sql")).unwrap();
    let write = std::env::var("ATTEMPT_LEDGER_RENDER").as_deref() == Ok("1");
    let mut stale = Vec::new();
    for (template, output) in RENDERED {
        let rendered = render(&repo_file(template), &rules).unwrap_or_else(|e| panic!("{template}: {e}"));
        if write {
            std::fs::write(format!("{}/{output}", env!("CARGO_MANIFEST_DIR")), &rendered).unwrap();
        } else if repo_file(output) != rendered {
            stale.push(output);
        }
    }
    assert!(
        stale.is_empty(),
        "{stale:?} differ from their templates' render: edit queries/rules/, then run \
         ATTEMPT_LEDGER_RENDER=1 cargo test --release --test it every_rendered_query"
    );
    let templates: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/queries/rules"))
        .unwrap()
        .map(|e| format!("queries/rules/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|name| name.ends_with(".template.sql"))
        .collect();
    assert_eq!(templates.len(), RENDERED.len(), "a template not in RENDERED: {templates:?}");
    let duckdb = repo_file(RENDERED[0].0) + &repo_file(RENDERED[1].0) + &repo_file(RENDERED[4].0);
    let every: Vec<String> = rules.keys().cloned().collect();
    assert_eq!(rules_called(&duckdb, &rules), every, "the rules DuckDB's templates apply");
    // `report --lake` prices with cost.sql's macros, as the node's reports do.
    let lake_duckdb = repo_file(RENDERED[5].0) + &repo_file(RENDERED[4].0);
    assert_eq!(rules_called(&lake_duckdb, &rules), every, "the rules DuckDB's lake report applies");

    let lake: Vec<String> =
        every.iter().filter(|r| !STORE_ONLY_RULES.contains(&r.as_str())).cloned().collect();
    for (engine, text) in [("Spark", repo_file(RENDERED[2].0)), ("ClickHouse", repo_file(RENDERED[3].0))] {
        assert_eq!(rules_called(&text, &rules), lake, "the rules {engine}'s templates apply");
    }
}

/// The derivation round's own statements (`queries/derive/`) carry the
/// header every query file has: what each reads and what it builds.
#[test]
fn every_derivation_file_has_a_header() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/queries/derive");
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let text = repo_file(&format!("queries/derive/{name}"));
        assert!(text.starts_with(&format!("-- {name}:")), "{name} lacks its header comment");
        assert!(text.contains("-- Parameters:") && text.contains("-- Columns"), "{name} header");
        files += 1;
    }
    assert!(files >= 3, "{files} files");
}
