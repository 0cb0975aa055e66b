//! Breaker timelines (docs/record-format.md, "Breaker timelines"): state
//! changes from JSONL records, OTLP span events and attempts' `circuit`,
//! stored in any order and any split, read back as the report's
//! `circuits`, `/metrics` `circuit_state` and the `circuit_open` alert.

use std::collections::BTreeMap;

use attempt_core::ingest::{Decoded, format::Format};
use attempt_core::model::{Circuit, name};
use attempt_core::pricing::{PriceKey, PriceTable};
use attempt_core::request::ReportFilter;
use attempt_ledger::report::CircuitInterval;
use attempt_ledger::store::{Batch, Store};
use chrono::{DateTime, Duration, Utc};
use proptest::prelude::*;
use serde_json::json;

use crate::report_of;

fn t0() -> DateTime<Utc> {
    "2026-03-01T10:00:00Z".parse().unwrap()
}

fn at(seconds: i64) -> String {
    (t0() + Duration::seconds(seconds)).to_rfc3339()
}

fn change(seconds: i64, route: &str, state: &str, workflow: Option<&str>) -> String {
    let mut record = json!({"type": "circuit", "at": at(seconds), "provider": "openai", "state": state});
    let (key, value) = route.split_once('=').unwrap();
    record[key] = json!(value);
    if let Some(w) = workflow {
        record["workflow"] = json!(w);
    }
    record.to_string()
}

/// One attempt; `extra` adds or overrides fields.
fn attempt(
    workflow_id: &str,
    seq: i64,
    seconds: i64,
    model: &str,
    status: &str,
    extra: serde_json::Value,
) -> String {
    let mut record = json!({
        "workflow_id": workflow_id, "attempt": seq, "started_at": at(seconds),
        "provider": if model.starts_with("claude") { "anthropic" } else { "openai" },
        "model": model, "status": status,
    });
    for (k, v) in extra.as_object().unwrap() {
        record[k] = v.clone();
    }
    record.to_string()
}

/// An OTLP/JSON export of one span carrying `circuit.state_change` events:
/// how an instrumented gateway reports its breaker.
fn otlp_events(changes: &[(i64, &str)]) -> String {
    let events: Vec<_> = changes
        .iter()
        .map(|(seconds, state)| {
            let nanos = (t0() + Duration::seconds(*seconds)).timestamp_nanos_opt().unwrap();
            json!({
                "name": "circuit.state_change",
                "timeUnixNano": nanos.to_string(),
                "attributes": [
                    {"key": "attempt.provider", "value": {"stringValue": "openai"}},
                    {"key": "attempt.model", "value": {"stringValue": "gpt-4o"}},
                    {"key": "attempt.state", "value": {"stringValue": state}},
                ],
            })
        })
        .collect();
    json!({"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
        "name": "breaker", "kind": 1,
        "startTimeUnixNano": "1772359200000000000", "endTimeUnixNano": "1772359261000000000",
        "events": events,
    }]}]}]})
    .to_string()
}

/// The incident: openai/gpt-4o's breaker opens (a JSONL record), half-opens
/// (an OTLP event), opens again on a failed probe (a record; an attempt
/// saying `closed` at the same instant loses to it), half-opens by an
/// attempt's own `circuit`, and closes (an OTLP event). The route group
/// `smart` has a breaker of the caller `nightly` only, still open.
fn incident() -> Vec<(Format, String)> {
    let jsonl = |line: String| (Format::Attempts, line);
    vec![
        jsonl(change(0, "model=gpt-4o", "open", None)),
        (Format::Otlp, otlp_events(&[(30, "half_open"), (61, "closed")])),
        jsonl(change(32, "model=gpt-4o", "open", None)),
        jsonl(change(20, "route_group=smart", "open", Some("nightly"))),
        // Before the breaker opened: not counted.
        jsonl(attempt("w0", 1, -10, "gpt-4o", "ok", json!({"input_tokens": 10, "output_tokens": 1}))),
        // Started while open: one fell back (its first attempt says the
        // breaker was open), one failed closed, one (second interval) degraded.
        jsonl(attempt(
            "w1",
            1,
            5,
            "gpt-4o",
            "error",
            json!({"circuit": "open", "decision": "fallback", "http_status": 429,
                   "ratelimit_remaining_requests": 0, "ratelimit_limit_requests": 100}),
        )),
        jsonl(attempt(
            "w1",
            2,
            6,
            "claude-sonnet-4-5",
            "ok",
            json!({"input_tokens": 1000, "output_tokens": 200}),
        )),
        jsonl(attempt(
            "w2",
            1,
            10,
            "gpt-4o",
            "error",
            json!({"http_status": 503, "decision": "fail_closed"}),
        )),
        jsonl(attempt("w3", 1, 40, "gpt-4o", "error", json!({"http_status": 503, "decision": "degrade"}))),
        // The probes: one fails in the first half-open interval; one, whose
        // `circuit` opens the second, succeeds.
        jsonl(attempt("p1", 1, 31, "gpt-4o", "error", json!({"http_status": 503, "circuit": "half_open"}))),
        jsonl(attempt("p2", 1, 32, "gpt-4o", "error", json!({"http_status": 503, "circuit": "closed"}))),
        jsonl(attempt(
            "p3",
            1,
            60,
            "gpt-4o",
            "ok",
            json!({"circuit": "half_open", "input_tokens": 5, "output_tokens": 1}),
        )),
        // After it closed: not counted.
        jsonl(attempt("w4", 1, 70, "gpt-4o", "ok", json!({"input_tokens": 5, "output_tokens": 1}))),
        // The group: a nightly workflow counts, another caller's does not.
        jsonl(attempt(
            "w5",
            1,
            25,
            "gpt-4o-mini",
            "ok",
            json!({"route_group": "smart", "workflow": "nightly", "input_tokens": 5, "output_tokens": 1}),
        )),
        jsonl(attempt(
            "w6",
            1,
            26,
            "gpt-4o-mini",
            "ok",
            json!({"route_group": "smart", "workflow": "adhoc", "input_tokens": 5, "output_tokens": 1}),
        )),
    ]
}

fn decode(records: &[&(Format, String)]) -> Decoded {
    let mut decoded = Decoded::default();
    for (number, (format, text)) in records.iter().enumerate() {
        format.decode_record(text, number as u64 + 1, &mut decoded);
    }
    assert!(decoded.rejections.is_empty(), "{:?}", decoded.rejections);
    decoded
}

/// A store holding `records` written in batches of `split` records.
fn store_of(records: &[&(Format, String)], split: usize) -> Store {
    let store = Store::open_in_memory().unwrap();
    for chunk in records.chunks(split.max(1)) {
        let d = decode(chunk);
        store
            .write_batches(&[Batch { attempts: &d.attempts, spans: &d.spans, circuits: &d.circuits }])
            .unwrap();
    }
    store
}

/// (route, caller, state, from, until) of each interval, in report order.
type Shape = (String, Option<String>, String, String, Option<String>);

fn shape(c: &CircuitInterval) -> Shape {
    let route = c
        .route_group
        .clone()
        .unwrap_or_else(|| format!("{}/{}", c.provider.as_ref().unwrap(), c.model.as_ref().unwrap()));
    let instant = |t: &str| t.parse::<DateTime<Utc>>().unwrap().to_rfc3339();
    (route, c.workflow.clone(), c.state.clone(), instant(&c.from), c.until.as_deref().map(instant))
}

fn expected_intervals() -> Vec<Shape> {
    let s = |route: &str, caller: Option<&str>, state: &str, from: i64, until: Option<i64>| {
        (route.to_string(), caller.map(String::from), state.to_string(), at(from), until.map(at))
    };
    vec![
        s("openai/gpt-4o", None, "open", 0, Some(30)),
        s("smart", Some("nightly"), "open", 20, None),
        s("openai/gpt-4o", None, "half_open", 30, Some(32)),
        s("openai/gpt-4o", None, "open", 32, Some(60)),
        s("openai/gpt-4o", None, "half_open", 60, Some(61)),
    ]
}

#[test]
fn breaker_intervals_from_records_events_and_attempts_in_any_order() {
    let records = incident();
    let forward: Vec<_> = records.iter().collect();
    let backward: Vec<_> = records.iter().rev().collect();
    let interleaved: Vec<_> = records.iter().step_by(2).chain(records.iter().skip(1).step_by(2)).collect();
    let prices = PriceTable::load(None).unwrap();
    let per_token = |provider: &str, model: &str| {
        let day = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
        let key = PriceKey { provider, model, day, tier: "standard", prompt_over: 0, billing_account: None };
        let prices = prices.resolve(&key).unwrap().prices;
        (prices.input.unwrap(), prices.output.unwrap())
    };
    let (claude, gpt) = (per_token("anthropic", "claude-sonnet-4-5"), per_token("openai", "gpt-4o"));
    let usd = |pusd: i64| pusd as f64 / 1e12;
    let fallback_cost = usd(1000 * claude.0 + 200 * claude.1);
    let at_primary_price = usd(1000 * gpt.0 + 200 * gpt.1);
    for (order, split) in [(&forward, 100), (&backward, 1), (&interleaved, 3)] {
        let store = store_of(order, split);
        // A redelivery of every record changes nothing.
        let d = decode(order);
        let again = store
            .write_batches(&[Batch { attempts: &d.attempts, spans: &d.spans, circuits: &d.circuits }])
            .unwrap()
            .pop()
            .unwrap();
        assert_eq!(again.inserted, 0, "{again:?}");
        let report = report_of(&store, &ReportFilter::default());
        let shapes: Vec<Shape> = report.circuits.iter().map(shape).collect();
        assert_eq!(shapes, expected_intervals(), "split {split}");
        let c = &report.circuits;
        assert_eq!(
            (c[0].workflows_started, c[0].outcomes.fallback_recovery, c[0].outcomes.fail_closed),
            (2, 1, 1)
        );
        assert!((c[0].fallback_cost_usd - fallback_cost).abs() < 1e-12, "{}", c[0].fallback_cost_usd);
        assert!((c[0].primary_cost_usd.unwrap() - at_primary_price).abs() < 1e-12);
        assert_eq!(
            (c[1].workflows_started, c[1].outcomes.primary_success),
            (1, 1),
            "the nightly caller's only"
        );
        assert_eq!((c[2].probes, c[2].probes_succeeded), (1, 0));
        // w3, and the probe p2 whose first attempt reopened it.
        assert_eq!((c[3].workflows_started, c[3].outcomes.degraded, c[3].fallback_cost_usd), (2, 1, 0.0));
        assert_eq!((c[4].probes, c[4].probes_succeeded), (1, 1));
        assert_eq!(report.circuits_omitted, 0);
        // The fallback activation says what it was and cost.
        let f = &report.fallbacks[0];
        assert_eq!((f.workflows, f.reason.map(name)), (1, Some("rate_limit")));
        assert_eq!(f.limit_kinds, vec!["requests".to_string()]);
        assert_eq!(f.served_models, vec!["anthropic/claude-sonnet-4-5".to_string()]);
        assert!((f.fallback_cost_usd.unwrap() - fallback_cost).abs() < 1e-12);
        assert!((f.primary_cost_usd.unwrap() - at_primary_price).abs() < 1e-12);
        assert_eq!(f.breaker_open_workflows, Some(1));
        // Each workflow's page marks the breaker states its routes were in
        // while it ran: its caller's or every caller's, never another's.
        let met = |id: &str| -> Vec<(Shape, i64)> {
            let (rows, circuits) = store.workflow_attempts(id, &prices).unwrap();
            let detail =
                attempt_ledger::report::workflow::WorkflowDetail::from_rows(id, &rows, &circuits).unwrap();
            let instant = |t: &str| t.parse::<DateTime<Utc>>().unwrap().to_rfc3339();
            detail
                .circuits
                .iter()
                .map(|c| {
                    let route = c.route_group.clone().unwrap_or_else(|| c.route().to_string());
                    let until = c.until.as_deref().map(instant);
                    ((route, c.workflow.clone(), c.state.clone(), instant(&c.from), until), c.attempts)
                })
                .collect()
        };
        let open = |route: &str, caller: Option<&str>, state: &str, from: i64, until: Option<i64>| {
            ((route.to_string(), caller.map(String::from), state.to_string(), at(from), until.map(at)), 1)
        };
        assert_eq!(met("w1"), vec![open("openai/gpt-4o", None, "open", 0, Some(30))], "split {split}");
        assert_eq!(met("p1"), vec![open("openai/gpt-4o", None, "half_open", 30, Some(32))]);
        assert_eq!(met("w5"), vec![open("smart", Some("nightly"), "open", 20, None)]);
        assert_eq!(met("w6"), vec![], "another caller's group breaker");
        assert_eq!(met("w4"), vec![], "after it closed");
    }
}

#[test]
fn a_window_lists_the_intervals_it_overlaps_and_counts_its_own_workflows() {
    let records = incident();
    let store = store_of(&records.iter().collect::<Vec<_>>(), 100);
    let since = Some(t0() + Duration::seconds(35));
    let until = Some(t0() + Duration::seconds(50));
    let report = report_of(&store, &ReportFilter { since, until, ..ReportFilter::default() });
    let shapes: Vec<Shape> = report.circuits.iter().map(shape).collect();
    assert_eq!(shapes, vec![expected_intervals()[1].clone(), expected_intervals()[3].clone()]);
    assert_eq!(report.circuits[0].workflows_started, 0, "w5 started before the window");
    assert_eq!(report.circuits[1].workflows_started, 1, "w3");
    // A workflow's report lists its own caller's breakers and everyone's.
    let nightly =
        report_of(&store, &ReportFilter { workflow: Some("nightly".into()), ..ReportFilter::default() });
    assert_eq!(nightly.circuits.len(), 5);
    let adhoc =
        report_of(&store, &ReportFilter { workflow: Some("adhoc".into()), ..ReportFilter::default() });
    assert!(adhoc.circuits.iter().all(|c| c.workflow.is_none()), "{:?}", adhoc.circuits);
}

#[test]
fn the_gauge_shows_each_breaker_s_current_state() {
    let records = incident();
    let store = store_of(&records.iter().collect::<Vec<_>>(), 100);
    let prices = std::sync::Arc::new(PriceTable::load(None).unwrap());
    let reader = attempt_ledger::read::Reader::new(&store, prices, Default::default());
    let families = attempt_ledger::metrics::stored_families(&reader.metric_rows().unwrap());
    let text = attempt_ledger::metrics::exposition(families);
    let states: Vec<&str> = text.lines().filter(|l| l.starts_with("attempt_ledger_circuit_state{")).collect();
    assert_eq!(
        states,
        vec![
            r#"attempt_ledger_circuit_state{provider="openai",model="gpt-4o",route_group="",workflow=""} 0.0"#,
            r#"attempt_ledger_circuit_state{provider="",model="",route_group="smart",workflow="nightly"} 2.0"#,
        ]
    );
}

#[test]
fn circuit_open_fires_once_a_breaker_stays_open_longer_than_for() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("incident.jsonl");
    let lines: Vec<String> = incident()
        .into_iter()
        .filter(|(format, _)| *format == Format::Attempts)
        .map(|(_, line)| line)
        .chain([change(30, "model=gpt-4o", "half_open", None), change(61, "model=gpt-4o", "closed", None)])
        .collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    let db = dir.path().join("db.duckdb");
    crate::lake_kit::ok(&["ingest", "--db", db.to_str().unwrap(), input.to_str().unwrap()]);
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, "[[rule]]\nname = \"breaker\"\nkind = \"circuit_open\"\nwindow = \"1h\"\nfor = \"10s\"\nprovider = \"openai\"\n").unwrap();
    let out = crate::lake_kit::ok(&[
        "alerts",
        "--check",
        "--format",
        "json",
        "--db",
        db.to_str().unwrap(),
        "--rules",
        rules.to_str().unwrap(),
        "--since",
        &at(-5),
        "--until",
        &at(90),
        "--step",
        "1s",
    ]);
    let answer: serde_json::Value = serde_json::from_str(&out).unwrap();
    let events = answer["events"].as_array().unwrap();
    let when = |kind: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["state"] == kind)
            .map(|e| e["at"].as_str().unwrap().parse::<DateTime<Utc>>().unwrap().to_rfc3339())
            .collect()
    };
    // Open [0, 30) and [32, 60): each fires once it has been open 10 s
    // (its value, seconds open, above 0 from the first step after it opened).
    assert_eq!(when("firing"), vec![at(11), at(43)], "{out}");
    assert_eq!(when("resolved"), vec![at(30), at(60)], "{out}");
    let first = events.iter().find(|e| e["state"] == "firing").unwrap();
    assert_eq!(first["labels"]["route"], "openai/gpt-4o");
    let summary = first["summary"].as_str().unwrap();
    assert!(
        summary.contains("2 workflows started while it was open: 1 fell back, 0 degraded, 1 failed closed"),
        "{summary}"
    );
}

/// A change as the property draws it: a route, a caller, a second (few,
/// so instants tie), a state and whether a record or an attempt says it.
#[derive(Debug, Clone)]
struct Drawn {
    group: bool,
    caller: Option<&'static str>,
    second: i64,
    state: Circuit,
    by_record: bool,
}

fn drawn() -> impl Strategy<Value = Drawn> {
    (
        any::<bool>(),
        prop_oneof![Just(None), Just(Some("nightly"))],
        0..8i64,
        prop_oneof![Just(Circuit::Open), Just(Circuit::HalfOpen), Just(Circuit::Closed)],
        any::<bool>(),
    )
        .prop_map(|(group, caller, second, state, by_record)| Drawn {
            group,
            caller,
            second,
            state,
            by_record,
        })
}

fn line_of(i: usize, d: &Drawn) -> String {
    let route = if d.group { "route_group=g" } else { "model=gpt-4o" };
    if d.by_record {
        change(d.second, route, name(d.state), d.caller)
    } else {
        let mut extra = json!({"circuit": name(d.state), "http_status": 503});
        if d.group {
            extra["route_group"] = json!("g");
        }
        if let Some(caller) = d.caller {
            extra["workflow"] = json!(caller);
        }
        attempt(&format!("w{i}"), 1, d.second, "gpt-4o", "error", extra)
    }
}

/// The rule as the record format states it, written apart from the SQL:
/// per route and caller, one state per instant (a record over an attempt;
/// open over half_open over closed), a new interval at each change.
fn model_intervals(drawn: &[Drawn]) -> Vec<Shape> {
    let rank = |d: &Drawn| {
        (!d.by_record, [Circuit::Open, Circuit::HalfOpen, Circuit::Closed].iter().position(|s| *s == d.state))
    };
    let mut by_key: BTreeMap<(bool, Option<&str>), BTreeMap<i64, &Drawn>> = BTreeMap::new();
    for d in drawn {
        let instants = by_key.entry((d.group, d.caller)).or_default();
        let keep = instants.get(&d.second).is_none_or(|held| rank(d) < rank(held));
        if keep {
            instants.insert(d.second, d);
        }
    }
    let mut intervals = Vec::new();
    for ((group, caller), instants) in by_key {
        let mut changes: Vec<(i64, Circuit)> = Vec::new();
        for (second, d) in instants {
            if changes.last().is_none_or(|(_, state)| *state != d.state) {
                changes.push((second, d.state));
            }
        }
        for (i, (second, state)) in changes.iter().enumerate() {
            if *state != Circuit::Closed {
                let route = if group { "g".to_string() } else { "openai/gpt-4o".to_string() };
                let until = changes.get(i + 1).map(|(s, _)| at(*s));
                intervals.push((
                    route,
                    caller.map(String::from),
                    name(*state).to_string(),
                    at(*second),
                    until,
                ));
            }
        }
    }
    intervals.sort_by(|a, b| {
        (&a.3, &a.0 == "openai/gpt-4o", &a.0, &a.1.is_none(), &a.1).cmp(&(
            &b.3,
            &b.0 == "openai/gpt-4o",
            &b.0,
            &b.1.is_none(),
            &b.1,
        ))
    });
    intervals
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::properties::cases(32), ..ProptestConfig::default() })]

    /// However the changes arrive (order, batches) the timeline is the
    /// rule's, and the same.
    #[test]
    fn arrival_order_never_changes_a_timeline(
        changes in proptest::collection::vec(drawn(), 0..24),
        order in any::<proptest::sample::Index>(),
        split in 1..6usize,
    ) {
        let records: Vec<(Format, String)> =
            changes.iter().enumerate().map(|(i, d)| (Format::Attempts, line_of(i, d))).collect();
        let mut shuffled: Vec<&(Format, String)> = records.iter().collect();
        let len = shuffled.len();
        if len > 1 {
            shuffled.rotate_left(order.index(len));
            shuffled.reverse();
        }
        let store = store_of(&shuffled, split);
        let report = report_of(&store, &ReportFilter::default());
        let shapes: Vec<Shape> = report.circuits.iter().map(shape).collect();
        prop_assert_eq!(shapes, model_intervals(&changes));
    }
}

#[test]
fn pruning_keeps_the_state_a_timeline_starts_in() {
    let records = incident();
    let store = store_of(&records.iter().collect::<Vec<_>>(), 100);
    let before = report_of(&store, &ReportFilter::default()).circuits;
    store.prune(t0() + Duration::seconds(45)).unwrap();
    let after = report_of(&store, &ReportFilter::default()).circuits;
    assert_eq!(before.len(), 5);
    // The breaker open at the cut opened at 32 s: that change is kept (the
    // ones before it are not needed), the half-open of 30 s is gone with
    // the probes' workflows, and every change after the cut stays.
    let e = expected_intervals();
    assert_eq!(after.iter().map(shape).collect::<Vec<_>>(), vec![e[1].clone(), e[3].clone(), e[4].clone()]);
}

#[test]
fn bad_state_change_records_are_rejected_by_line_and_the_rest_kept() {
    let text = [
        change(0, "model=gpt-4o", "open", None),
        change(1, "model=gpt-4o", "tripped", None),
        r#"{"type":"circuit","provider":"openai","model":"gpt-4o","state":"open"}"#.to_string(),
        attempt("w1", 1, 2, "gpt-4o", "ok", json!({})),
    ]
    .join("\n");
    let decoded = Format::Attempts.decode_lines(&text, 1);
    assert_eq!(
        (decoded.circuits.len(), decoded.attempts.len(), decoded.records, decoded.rejected),
        (1, 1, 2, 2)
    );
    assert_eq!(decoded.rejections[0].line, 2);
    assert!(decoded.rejections[0].reason.contains("state: `tripped`"), "{:?}", decoded.rejections);
    assert_eq!(decoded.rejections[1].line, 3);
    assert!(decoded.rejections[1].reason.contains("at is required"));
    // The format of an input that starts with a state change is attempts.
    assert_eq!(Format::detect(&change(0, "model=gpt-4o", "open", None)).unwrap(), Format::Attempts);
    // An OTLP event missing its route is rejected at its span.
    let otlp = otlp_events(&[(0, "open")]).replace("attempt.model", "attempt.other");
    let mut into = Decoded::default();
    Format::Otlp.decode_record(&otlp, 7, &mut into);
    assert_eq!(into.rejected, 1);
    assert!(into.rejections[0].reason.contains("model or route_group is required"), "{:?}", into.rejections);
}

/// The incident the logs client sends: open at 02:37:12 for 60 s, then
/// half-open for 1 s (its last change, closed, ends it).
fn logged_intervals(report: &serde_json::Value) -> Vec<(String, String, String)> {
    report["circuits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["state"].as_str().unwrap().to_string(),
                c["from"].as_str().unwrap().to_string(),
                c["until"].to_string(),
            )
        })
        .collect()
}

/// The OpenTelemetry Python SDK's log exporter, over gRPC and over HTTP:
/// its `circuit.state_change` events become the route's timeline, and the
/// application logs around them are ignored without failing the export.
#[test]
fn breaker_changes_arrive_as_log_records_from_the_python_sdk() {
    for protocol in ["grpc", "http"] {
        let dir = tempfile::tempdir().unwrap();
        // A process of its own: its counters are this export's alone.
        let service = crate::service::ServiceProcess::start(&dir.path().join("s.duckdb"), &[]);
        let endpoint = if protocol == "grpc" { service.grpc.clone() } else { service.http.clone() };
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/otel_logs_client.py");
        let out = crate::python().args([script, protocol, &endpoint]).output().unwrap();
        assert!(out.status.success(), "{protocol}: {}", String::from_utf8_lossy(&out.stderr));
        let report = service.report("");
        assert_eq!(
            logged_intervals(&report),
            vec![
                ("open".into(), "2026-11-28T02:37:12.000Z".into(), "\"2026-11-28T02:38:12.000Z\"".into()),
                (
                    "half_open".into(),
                    "2026-11-28T02:38:12.000Z".into(),
                    "\"2026-11-28T02:38:13.000Z\"".into()
                ),
            ],
            "{protocol}"
        );
        assert_eq!(report["circuits"][0]["provider"], "openai");
        assert_eq!(crate::otlp_logs::ignored_records(&service), 2.0, "{protocol}: the two application logs");
    }
}

fn log_export(records: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]})).unwrap()
}

fn log_change(nanos: &str, state: &str) -> serde_json::Value {
    json!({"timeUnixNano": nanos, "eventName": "circuit.state_change", "attributes": [
        {"key": "attempt.provider", "value": {"stringValue": "openai"}},
        {"key": "attempt.model", "value": {"stringValue": "gpt-4o"}},
        {"key": "attempt.state", "value": {"stringValue": state}}]})
}

/// OTLP/HTTP logs as JSON, gzipped or not: a bad change is a partial
/// success naming its record and field, the good ones are stored, a
/// redelivery stores nothing twice, and a body that is no export is a 400.
#[test]
fn otlp_http_logs_answer_partial_success_and_keep_what_was_good() {
    let dir = tempfile::tempdir().unwrap();
    let service = crate::service::Service::start(&dir.path().join("s.duckdb"), &[]);
    let body = log_export(json!([
        log_change("1795833432000000000", "open"),
        log_change("1795833433000000000", "ajar"),
        {"body": {"stringValue": "not a change"}},
        log_change("1795833492000000000", "closed"),
    ]));
    let (status, answer, _) = service.post("/v1/logs", "application/json", None, &body);
    assert_eq!(status, 200);
    let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["partialSuccess"]["rejectedLogRecords"], 1, "{answer}");
    let message = answer["partialSuccess"]["errorMessage"].as_str().unwrap();
    assert!(message.starts_with("log record 2: circuit record: state"), "{message}");
    let mut gzipped = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gzipped, &body).unwrap();
    let (status, _, _) =
        service.post("/v1/logs", "application/json", Some("gzip"), &gzipped.finish().unwrap());
    assert_eq!(status, 200, "the same export again, gzipped");
    let report = service.report("");
    assert_eq!(
        logged_intervals(&report),
        vec![("open".into(), "2026-11-28T02:37:12.000Z".into(), "\"2026-11-28T02:38:12.000Z\"".into())]
    );
    let (status, answer, _) = service.post("/v1/logs", "application/x-protobuf", None, b"\xff\xff\xff");
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&answer));
    let (status, _, _) = service.post("/v1/logs", "text/plain", None, b"{}");
    assert_eq!(status, 415);
    let (status, answer, _) = service.post("/v1/logs", "application/json", None, &log_export(json!([])));
    assert_eq!(status, 200);
    let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert!(
        answer.get("partialSuccess").is_none_or(|p| p.is_null()),
        "an empty export is a plain success: {answer}"
    );
}

/// One drawn attempt for the capacity charts: its second, served model,
/// whether it was a 429, and (remaining, limit) per kind, if stated.
type Stated = (i64, bool, bool, [Option<(i64, i64)>; 4]);

fn stated() -> impl Strategy<Value = Stated> {
    let kind = prop_oneof![
        Just(None),
        (0i64..=100, prop_oneof![Just(0i64), Just(100), Just(1000)]).prop_map(|(r, l)| Some((r.min(l), l))),
    ];
    (0i64..300, any::<bool>(), any::<bool>(), [kind.clone(), kind.clone(), kind.clone(), kind])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// The capacity page's charts: per bucket and served route, the lowest
    /// remaining / limit any response stated (a limit of 0 states no
    /// share), as a model computes it from the records; and the 429s by
    /// the limit they hit add up to the report's `rate_limits`.
    #[test]
    fn the_charts_show_each_bucket_s_lowest_headroom_and_its_429s(drawn in prop::collection::vec(stated(), 1..40)) {
        const KINDS: [&str; 4] = ["requests", "tokens", "input_tokens", "output_tokens"];
        let lines: Vec<(Format, String)> = drawn
            .iter()
            .enumerate()
            .map(|(i, (second, mini, limited, kinds))| {
                let model = if *mini { "gpt-4o-mini" } else { "gpt-4o" };
                let mut extra = if *limited {
                    json!({"http_status": 429})
                } else {
                    json!({"input_tokens": 10, "output_tokens": 1})
                };
                for (kind, stated) in KINDS.iter().zip(kinds) {
                    if let Some((remaining, limit)) = stated {
                        extra[format!("ratelimit_remaining_{kind}")] = json!(remaining);
                        extra[format!("ratelimit_limit_{kind}")] = json!(limit);
                    }
                }
                let status = if *limited { "error" } else { "ok" };
                (Format::Attempts, attempt(&format!("w{i}"), 1, *second, model, status, extra))
            })
            .collect();
        let store = store_of(&lines.iter().collect::<Vec<_>>(), 7);
        let prices = PriceTable::load(None).unwrap();
        let report = report_of(&store, &ReportFilter::default());
        for step_minutes in [1i64, 2] {
            let range = attempt_core::request::SeriesRange::new(
                t0(),
                t0() + Duration::minutes(6),
                Some(std::time::Duration::from_secs(60 * step_minutes as u64)),
                None,
                None,
            )
            .unwrap();
            let series = attempt_ledger::report::timeseries::Timeseries::from_rows(
                &range,
                &store.timeseries(&range, &prices).unwrap(),
            );
            let mut model: BTreeMap<(usize, String), f64> = BTreeMap::new();
            for (second, mini, _, kinds) in &drawn {
                let bucket = (*second / (60 * step_minutes)) as usize;
                let route = format!("openai/{}", if *mini { "gpt-4o-mini" } else { "gpt-4o" });
                for (remaining, limit) in kinds.iter().flatten() {
                    if *limit > 0 {
                        let ratio = *remaining as f64 / *limit as f64;
                        let low = model.entry((bucket, route.clone())).or_insert(ratio);
                        *low = low.min(ratio);
                    }
                }
            }
            let drawn_by_chart: BTreeMap<(usize, String), f64> = series
                .buckets
                .iter()
                .enumerate()
                .flat_map(|(i, b)| b.headroom_min_ratio.iter().map(move |(route, low)| ((i, route.clone()), *low)))
                .collect();
            prop_assert_eq!(&drawn_by_chart, &model, "step {} min", step_minutes);
            let mut charted: BTreeMap<String, i64> = BTreeMap::new();
            for b in &series.buckets {
                for (kind, n) in &b.rate_limited {
                    *charted.entry(kind.clone()).or_default() += n;
                }
            }
            let mut reported: BTreeMap<String, i64> = BTreeMap::new();
            for r in &report.rate_limits {
                *reported.entry(r.kind.clone()).or_default() += r.attempts;
            }
            prop_assert_eq!(&charted, &reported);
            prop_assert_eq!(charted.values().sum::<i64>(), drawn.iter().filter(|d| d.2).count() as i64);
        }
    }
}
