//! The attempt lake: three `serve --lake` nodes write one lake, and Spark,
//! ClickHouse (chdb) and `report --lake` each answer exactly as one node
//! that received everything; an export killed half-way is done again
//! exactly once; `prune` keeps what the lake lacks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use opentelemetry_proto::tonic::common::v1::any_value::Value as AttrValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{Value, json};

use crate::gateways::{export, kv, span_of_trace};
use crate::lake_kit::{copies, export_command, walk};
use crate::service::{Service, cli_report_with};

const BIN: &str = env!("CARGO_BIN_EXE_attempt-ledger");

fn run(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn simulated(scenario: &str, workflows: u32) -> Vec<Value> {
    run(&["simulate", "--scenario", scenario, "--workflows", &workflows.to_string()])
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The interpreter of the lake engines' environment (tests/python/lake).
pub(crate) fn python_lake() -> Command {
    let path = std::env::var_os("ATTEMPT_LEDGER_TEST_PYTHON_LAKE").unwrap_or_else(|| {
        panic!(
            "this test reads the lake with Spark and chdb from the pinned environment of \
             tests/python/lake/requirements.txt that scripts/test.sh creates; run the suite with \
             scripts/test.sh (or set ATTEMPT_LEDGER_TEST_PYTHON_LAKE)"
        )
    });
    Command::new(path)
}

/// `scripts/lake-report.py --engine ENGINE LAKE --batch CASES`: one engine
/// session, a report per case.
pub(crate) fn engine_reports(engine: &str, lake: &Path, cases: &Value) -> Vec<Value> {
    let batch = lake.with_extension(format!("{engine}-cases.json"));
    std::fs::write(&batch, cases.to_string()).unwrap();
    let script = format!("{}/scripts/lake-report.py", env!("CARGO_MANIFEST_DIR"));
    let out = if engine == "duckdb" {
        Command::new("python3")
            .args([&script, "--engine", engine, lake.to_str().unwrap(), "--batch", batch.to_str().unwrap()])
            .env("ATTEMPT_LEDGER_BIN", BIN)
            .output()
            .unwrap()
    } else {
        python_lake()
            .args([&script, "--engine", engine, lake.to_str().unwrap(), "--batch", batch.to_str().unwrap()])
            .output()
            .unwrap()
    };
    assert!(out.status.success(), "{engine}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
}

/// One SDK call of trace `trace`: a GenAI span and its HTTP attempts
/// (`statuses`, the last one answered), `start_ms` after 2026-11-28T02:00Z.
fn sdk_call(trace: u8, start_ms: u64, statuses: &[i64]) -> (Span, Vec<Span>) {
    let span = |id, parent, offset_ms, attributes, error| {
        span_of_trace(trace, id, parent, start_ms + offset_ms, attributes, error)
    };
    let s = |v: &str| AttrValue::StringValue(v.into());
    let parent = span(
        1,
        None,
        0,
        vec![
            kv("gen_ai.operation.name", s("chat")),
            kv("gen_ai.provider.name", s("anthropic")),
            kv("gen_ai.request.model", s("claude-sonnet-4-5")),
            kv("gen_ai.usage.input_tokens", AttrValue::IntValue(1200 + trace as i64)),
            kv("gen_ai.usage.output_tokens", AttrValue::IntValue(300)),
        ],
        false,
    );
    let children = statuses
        .iter()
        .enumerate()
        .map(|(i, status)| {
            span(
                2 + i as u8,
                Some(1),
                700 * i as u64,
                vec![
                    kv("http.request.method", s("POST")),
                    kv("http.response.status_code", AttrValue::IntValue(*status)),
                ],
                *status >= 400,
            )
        })
        .collect();
    (parent, children)
}

/// What one node (or the reference) is sent, in order.
#[derive(Default, Clone)]
struct Sends {
    jsonl: Vec<String>,
    spans: Vec<Span>,
}

fn deliver(service: &Service, sends: &Sends) {
    if !sends.jsonl.is_empty() {
        let body = sends.jsonl.join("\n");
        let (status, answer, _) = service.post("/v1/attempts", "application/x-ndjson", None, body.as_bytes());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    }
    if !sends.spans.is_empty() {
        let (status, answer, _) =
            service.post("/v1/traces", "application/x-protobuf", None, &export(sends.spans.clone()));
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    }
}

/// The node a workflow's JSONL goes to, as a gateway that routes by its
/// own workflow id would; every seventh workflow is split across nodes
/// attempt by attempt instead.
fn jsonl_node(record: &Value, index: usize) -> usize {
    let id = record["workflow_id"].as_str().unwrap();
    let hash = id.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    if hash % 7 == 0 { index % 3 } else { (hash % 3) as usize }
}

/// The report sections every engine derives, as `report --format json` has them.
const SECTIONS: [&str; 12] = [
    "workflows",
    "rates",
    "attempts",
    "tokens",
    "cost_usd",
    "waste_share",
    "by_served_provider",
    "by_served_model",
    "by_workflow",
    "amplification",
    "by_primary_route",
    "fallbacks",
];

/// Keys of a `fallbacks` row the engines do not derive: what an activation
/// cost and why, from each workflow's spend and breaker timeline
/// (docs/lake.md, "Reading it").
const FALLBACK_DETAILS: [&str; 5] =
    ["limit_kinds", "served_models", "fallback_cost_usd", "primary_cost_usd", "breaker_open_workflows"];

pub(crate) fn sections(report: &Value) -> Value {
    let mut sections: serde_json::Map<String, Value> =
        SECTIONS.iter().map(|k| (k.to_string(), report[*k].clone())).collect();
    if let Some(Value::Array(rows)) = sections.get_mut("fallbacks") {
        for row in rows.iter_mut().filter_map(Value::as_object_mut) {
            FALLBACK_DETAILS.iter().for_each(|key| drop(row.remove(*key)));
        }
    }
    Value::Object(sections)
}

/// Where two reports differ, by JSON path (the first few): a failure names
/// the numbers that moved, not two pages of JSON.
fn differences(got: &Value, want: &Value, path: &str, out: &mut Vec<String>) {
    match (got, want) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                differences(
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                    &format!("{path}.{key}"),
                    out,
                );
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(x, y, &format!("{path}[{i}]"), out);
            }
        }
        (a, b) if a != b => out.push(format!("{path}: {a} instead of {b}")),
        _ => {}
    }
}

#[track_caller]
pub(crate) fn assert_same(got: &Value, want: &Value, what: &str) {
    let mut out = Vec::new();
    differences(got, want, "", &mut out);
    assert!(
        out.is_empty(),
        "{what} differs from the reference:\n{}",
        out.iter().take(12).cloned().collect::<Vec<_>>().join("\n")
    );
}

fn start_node(dir: &Path, node: usize, lake: &Path) -> Service {
    let db = dir.join(format!("node{node}.duckdb"));
    let node_id = format!("n{node}");
    Service::start(&db, &["--lake", lake.to_str().unwrap(), "--node-id", &node_id, "--lake-interval", "1s"])
}

/// Files in the lake's attempts folder, by node.
fn lake_files(lake: &Path) -> BTreeMap<String, usize> {
    let mut files = BTreeMap::new();
    let Ok(days) = std::fs::read_dir(lake.join("attempts")) else { return files };
    for day in days.flatten() {
        for bucket in std::fs::read_dir(day.path()).unwrap().flatten() {
            for file in std::fs::read_dir(bucket.path()).unwrap().flatten() {
                let name = file.file_name().to_string_lossy().to_string();
                if name.ends_with(".parquet") {
                    *files.entry(name.split('-').next().unwrap().to_string()).or_default() += 1;
                }
            }
        }
    }
    files
}

#[test]
fn three_nodes_make_one_lake_that_spark_clickhouse_and_report_lake_read_as_one_node() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let mut records: Vec<Value> = Vec::new();
    for (scenario, workflows) in [
        ("rate-limit-fallback", 300),
        ("gateway-reroute", 200),
        ("naive-retries", 150),
        ("unsafe-fallback", 120),
    ] {
        records.extend(simulated(scenario, workflows));
    }
    let ids: BTreeSet<&str> = records.iter().map(|r| r["attempt_id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), records.len(), "the scenarios' attempt ids are distinct");

    // Phase 1: every node gets its share; phase 2 (after each node exported
    // and restarted) brings what a lake must deduplicate.
    let mut first = vec![Sends::default(); 3];
    let mut second = vec![Sends::default(); 3];
    for (i, record) in records.iter().enumerate() {
        first[jsonl_node(record, i)].jsonl.push(record.to_string());
    }
    // Late attempts of workflows from days before.
    for (n, day) in ["2026-11-21", "2026-11-24", "2026-11-26"].iter().enumerate() {
        for k in 0..5 {
            let workflow = format!("late-{day}-{k}");
            let error = json!({"workflow_id": workflow, "attempt_id": format!("{workflow}-0"), "attempt": 0,
                "started_at": format!("{day}T23:59:0{k}Z"), "workflow": "nightly-batch", "layer": "app",
                "provider": "openai", "model": "gpt-4o", "status": "error", "http_status": 429,
                "input_tokens": 0, "output_tokens": 0});
            let ok = json!({"workflow_id": workflow, "attempt_id": format!("{workflow}-1"), "attempt": 1,
                "started_at": format!("{day}T23:59:3{k}Z"), "workflow": "nightly-batch", "layer": "app",
                "provider": "anthropic", "model": "claude-sonnet-4-5", "status": "ok",
                "input_tokens": 900, "output_tokens": 120, "cached_input_tokens": 100});
            second[n].jsonl.extend([error.to_string(), ok.to_string()]);
        }
    }
    // Identical redeliveries to another node, and conflicting ones (the
    // same id, other content: the first stored copy must win everywhere).
    for (i, record) in records.iter().enumerate().filter(|(i, _)| i % 23 == 0) {
        let node = (jsonl_node(record, i) + 1) % 3;
        if i % 2 == 0 {
            second[node].jsonl.push(record.to_string());
        } else {
            let mut conflicting = record.clone();
            conflicting["status"] = json!("error");
            conflicting["http_status"] = json!(500);
            conflicting["input_tokens"] = json!(77_777);
            second[node].jsonl.push(conflicting.to_string());
        }
    }
    // OTLP, routed by trace id as the Collector's loadbalancing exporter
    // does; trace 9's HTTP spans reach its node only after its first export.
    for trace in 1..=12u8 {
        let (parent, children) =
            sdk_call(trace, trace as u64 * 60_000, &[529, 529, 200][..1 + trace as usize % 3]);
        let node = trace as usize % 3;
        first[node].spans.push(parent);
        if trace == 9 {
            second[node].spans.extend(children);
        } else {
            first[node].spans.extend(children);
        }
    }

    let reference = Service::start(&dir.path().join("reference.duckdb"), &[]);
    let mut node_reports: Vec<Value> = Vec::new();
    for phase in [&first, &second] {
        let nodes: Vec<Service> = (0..3).map(|n| start_node(dir.path(), n, &lake)).collect();
        for (node, sends) in nodes.iter().zip(phase.iter()) {
            deliver(node, sends);
            deliver(&reference, sends);
        }
        // Derived, so a node's exports hold all it was sent; the first phase
        // waits for a continuous export too, the second for the last one at
        // shutdown.
        node_reports = nodes.iter().map(|node| node.report("")).collect();
        if std::ptr::eq(phase, &first) {
            crate::wait_for("a continuous export", std::time::Duration::from_secs(60), || {
                lake_files(&lake).len() >= 3
            });
        }
        for node in nodes {
            node.stop();
        }
    }
    let whole = reference.report("");
    reference.stop();
    assert_eq!(lake_files(&lake).keys().collect::<Vec<_>>(), ["n0", "n1", "n2"]);
    // Without the lake, the nodes' own reports do not add up to the whole:
    // split workflows count on each node they reached, redeliveries twice.
    let summed =
        |key: &str, part: &str| node_reports.iter().map(|r| r[key][part].as_u64().unwrap()).sum::<u64>();
    let (workflows, attempts) = (summed("workflows", "total"), summed("attempts", "total"));
    eprintln!(
        "three nodes' own reports: {workflows} workflows, {attempts} attempts; one node that received \
         everything: {} workflows, {} attempts",
        whole["workflows"]["total"], whole["attempts"]["total"]
    );
    assert!(workflows > whole["workflows"]["total"].as_u64().unwrap());
    assert!(attempts > whole["attempts"]["total"].as_u64().unwrap());

    let window_since = "2026-11-28T02:30:00Z";
    let window_until = "2026-11-28T03:15:00Z";
    let cases = json!([
        {},
        {"since": window_since, "until": window_until},
        {"workflow": "chat-interactive"},
    ]);
    let ref_db = dir.path().join("reference.duckdb");
    let expected: Vec<Value> = [
        cli_report_with(&ref_db, &["--no-audit"]),
        cli_report_with(&ref_db, &["--no-audit", "--since", window_since, "--until", window_until]),
        cli_report_with(&ref_db, &["--no-audit", "--workflow", "chat-interactive"]),
    ]
    .into_iter()
    .collect();
    assert_eq!(sections(&expected[0]), sections(&whole), "the reference's CLI and service agree");
    let all = &expected[0];
    assert!(all["fallbacks"].as_array().unwrap().len() > 1, "{all:#}");
    assert!(all["by_served_provider"].as_array().unwrap().iter().any(|p| p["rerouted_attempts"] != 0));

    // `report --lake` derives the sections every engine derives, and says
    // so; `--every-section` every section, the audit too. Both equal the
    // reference's.
    for (case, want) in cases.as_array().unwrap().iter().zip(&expected) {
        let mut args: Vec<String> =
            ["report", "--lake", lake.to_str().unwrap(), "--format", "json", "--no-audit"]
                .map(String::from)
                .into();
        for key in ["since", "until", "workflow"] {
            if let Some(value) = case[key].as_str() {
                args.extend([format!("--{key}"), value.to_string()]);
            }
        }
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut lake_sections: Value = serde_json::from_str(&run(&args)).unwrap();
        let read = lake_sections.as_object_mut().unwrap().remove("lake").unwrap();
        assert_eq!(read["sections"], json!(SECTIONS), "{read}");
        let keys: BTreeSet<&str> = lake_sections.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, SECTIONS.into_iter().collect(), "only what it derived is reported");
        assert!(
            lake_sections["fallbacks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|row| FALLBACK_DETAILS.iter().all(|key| row.get(*key).is_none())),
            "an activation's details are not derived: {}",
            lake_sections["fallbacks"]
        );
        assert_same(&lake_sections, &sections(want), &format!("report --lake {case}"));
        args.push("--every-section");
        let mut every: Value = serde_json::from_str(&run(&args)).unwrap();
        let every_read = every.as_object_mut().unwrap().remove("lake").unwrap();
        assert_same(&every, want, &format!("report --lake --every-section {case}"));
        assert!(every_read.get("sections").is_none(), "{every_read}");
        for read in [&read, &every_read] {
            assert_eq!(read["attempts_outside_horizon"], 0, "{read}");
            if case.as_object().unwrap().is_empty() {
                let copies = read["copies_read"].as_u64().unwrap();
                let attempts = read["attempts"].as_u64().unwrap();
                assert!(
                    copies > attempts,
                    "the lake holds redelivered copies and a trace's two revisions: {read}"
                );
                assert_eq!(attempts, want["attempts"]["total"].as_u64().unwrap());
            }
        }
        let mut same_read = read.clone();
        same_read.as_object_mut().unwrap().remove("sections");
        assert_eq!(same_read, every_read, "both read the same");
    }
    let with_audit = cli_report_with(&ref_db, &[]);
    let lake_arg = lake.to_str().unwrap();
    let mut lake_audit: Value =
        serde_json::from_str(&run(&["report", "--lake", lake_arg, "--format", "json", "--every-section"]))
            .unwrap();
    lake_audit.as_object_mut().unwrap().remove("lake");
    assert_same(&lake_audit["audit"], &with_audit["audit"], "the audit from the lake");
    // A horizon shorter than the window's workflows: both paths read the
    // same rows and count the same attempts outside it, as ClickHouse does.
    let short = ["report", "--lake", lake_arg, "--format", "json", "--no-audit", "--since", window_since];
    let short = [&short[..], &["--until", window_until, "--horizon", "0s"]].concat();
    let fast: Value = serde_json::from_str(&run(&short)).unwrap();
    let every: Value = serde_json::from_str(&run(&[&short[..], &["--every-section"]].concat())).unwrap();
    let mut fast_sections = fast.clone();
    fast_sections.as_object_mut().unwrap().remove("lake");
    assert_same(&fast_sections, &sections(&every), "report --lake --horizon 0s");
    let outside = fast["lake"]["attempts_outside_horizon"].as_u64().unwrap();
    assert!(outside > 0, "{}", fast["lake"]);
    assert_eq!(outside, every["lake"]["attempts_outside_horizon"].as_u64().unwrap());
    let cases_short = json!([{"since": window_since, "until": window_until, "horizon": "0s"}]);
    let clickhouse = &engine_reports("clickhouse", &lake, &cases_short)[0];
    assert_same(&sections(clickhouse), &sections(&fast), "clickhouse --horizon 0s");
    assert_eq!(clickhouse["lake"]["attempts_outside_horizon"].as_u64(), Some(outside));

    let refused = Command::new(BIN)
        .args(["report", "--lake", lake_arg, "--policy", "examples/policy.toml"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("--every-section"), "{said}");

    // The runner as the README shows it: one report, no batch.
    let script = format!("{}/scripts/lake-report.py", env!("CARGO_MANIFEST_DIR"));
    let out = python_lake()
        .args([&script, "--engine", "clickhouse", lake.to_str().unwrap(), "--workflow", "chat-interactive"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let one: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_same(&sections(&one), &sections(&expected[2]), "lake-report.py --engine clickhouse --workflow");

    for engine in ["clickhouse", "spark", "duckdb"] {
        let got = engine_reports(engine, &lake, &cases);
        for ((case, want), report) in cases.as_array().unwrap().iter().zip(&expected).zip(&got) {
            assert_same(&sections(report), &sections(want), &format!("{engine} {case}"));
            assert_eq!(report["lake"]["engine"], engine);
            assert_eq!(report["lake"]["attempts_outside_horizon"], 0);
        }
    }
}

fn fixture_db(dir: &Path, name: &str) -> PathBuf {
    let db = dir.join(name);
    let file = dir.join("records.jsonl");
    let records = run(&["simulate", "--scenario", "overnight-529-storm", "--workflows", "20000"]);
    std::fs::write(&file, records).unwrap();
    run(&["ingest", "--db", db.to_str().unwrap(), file.to_str().unwrap()]);
    db
}

#[test]
fn an_export_killed_mid_way_is_done_again_and_the_lake_holds_each_attempt_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture_db(dir.path(), "a.duckdb");
    let lake = dir.path().join("lake");
    // Kill the export later and later until a kill lands mid-way: some of
    // its files renamed into place, others not yet (a staged file, or no
    // prices, which are written last).
    let mut mid_way = 0;
    for delay_ms in (20..3000u64).step_by(40) {
        let mut child = export_command(&db, &lake, "a").stdout(std::process::Stdio::null()).spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let running = child.try_wait().unwrap().is_none();
        if running {
            Command::new("kill").args(["-KILL", &child.id().to_string()]).status().unwrap();
        }
        child.wait().unwrap();
        let files = walk(&lake);
        let staged = files.iter().any(|p| p.to_string_lossy().ends_with(".tmp"));
        let placed = files.iter().filter(|p| p.to_string_lossy().ends_with(".parquet")).count();
        let priced = files
            .iter()
            .any(|p| p.starts_with(lake.join("prices")) && !p.to_string_lossy().ends_with(".tmp"));
        if running && placed > 0 && (staged || !priced) {
            mid_way += 1;
        }
        if !running || mid_way >= 2 {
            break;
        }
    }
    assert!(mid_way > 0, "no kill landed mid-way through an export");
    // Writes after the kill are outside the interrupted export's numbers:
    // the one run that does it again exports them too.
    let later = dir.path().join("later.jsonl");
    std::fs::write(&later, run(&["simulate", "--scenario", "gateway-reroute", "--workflows", "300"]))
        .unwrap();
    run(&["ingest", "--db", db.to_str().unwrap(), later.to_str().unwrap()]);
    let expected = cli_report_with(&db, &["--no-audit"]);
    let stored = expected["attempts"]["total"].as_u64().unwrap() as usize;
    run(&["export", "--db", db.to_str().unwrap(), "--lake", lake.to_str().unwrap()]);
    let again = run(&["export", "--db", db.to_str().unwrap(), "--lake", lake.to_str().unwrap()]);
    assert!(again.contains("already holds every attempt"), "{again}");
    let copies = copies(&lake);
    let distinct: BTreeSet<&String> = copies.iter().map(|(id, _, _)| id).collect();
    assert_eq!(copies.len(), stored, "one copy of each attempt, no more");
    assert_eq!(distinct.len(), stored);
    assert!(copies.iter().all(|(_, node, _)| node == "a"), "the node id was kept");
    // The export done again renamed every staged file of the killed one.
    let files = walk(&lake);
    assert!(files.iter().all(|p| p.extension().is_some_and(|e| e == "parquet" || e == "json")), "{files:?}");
    let mut from_lake: Value = serde_json::from_str(&run(&[
        "report",
        "--lake",
        lake.to_str().unwrap(),
        "--format",
        "json",
        "--no-audit",
    ]))
    .unwrap();
    from_lake.as_object_mut().unwrap().remove("lake");
    assert_same(&from_lake, &sections(&expected), "report --lake after the killed exports");
}

#[test]
fn prune_refuses_to_delete_what_the_lake_does_not_hold() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.duckdb");
    let lake = dir.path().join("lake");
    let record = |id: &str, day: &str| {
        json!({"workflow_id": id, "attempt_id": format!("{id}-0"), "started_at": format!("{day}T10:00:00Z"),
               "provider": "openai", "model": "gpt-4o", "status": "ok", "input_tokens": 10, "output_tokens": 5})
        .to_string()
    };
    let file = dir.path().join("r.jsonl");
    std::fs::write(&file, [record("old", "2026-11-01"), record("new", "2026-11-20")].join("\n")).unwrap();
    run(&["ingest", "--db", db.to_str().unwrap(), file.to_str().unwrap()]);
    // Without a lake, prune is retention as before.
    let before = ["prune", "--db", db.to_str().unwrap(), "--before", "2026-10-01"];
    run(&before);
    run(&["export", "--db", db.to_str().unwrap(), "--lake", lake.to_str().unwrap()]);
    std::fs::write(&file, record("late", "2026-11-02")).unwrap();
    run(&["ingest", "--db", db.to_str().unwrap(), file.to_str().unwrap()]);

    let prune = ["prune", "--db", db.to_str().unwrap(), "--before", "2026-11-10"];
    let refused = Command::new(BIN).args(prune).output().unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("refusing to prune: 1 of the attempts to delete are not in the lake"),
        "{stderr}"
    );
    assert_eq!(cli_report_with(&db, &["--no-audit"])["attempts"]["total"], 3, "nothing was deleted");

    run(&["export", "--db", db.to_str().unwrap(), "--lake", lake.to_str().unwrap()]);
    let pruned = run(&prune);
    assert!(pruned.contains("deleted 2 workflows (2 attempts)"), "{pruned}");

    // Past the lake, with the flag that says so; writes after a prune of
    // every row are numbered above what was derived and exported.
    std::fs::write(&file, record("later", "2026-11-03")).unwrap();
    run(&["ingest", "--db", db.to_str().unwrap(), file.to_str().unwrap()]);
    let forced = Command::new(BIN).args(prune).arg("--allow-unexported").output().unwrap();
    assert!(forced.status.success());
    assert!(String::from_utf8_lossy(&forced.stderr).contains("deleting 1 attempts the lake"));
    let all = ["prune", "--db", db.to_str().unwrap(), "--before", "2026-12-01"];
    run(&all);
    std::fs::write(&file, record("after", "2026-11-25")).unwrap();
    run(&["ingest", "--db", db.to_str().unwrap(), file.to_str().unwrap()]);
    assert_eq!(cli_report_with(&db, &["--no-audit"])["attempts"]["total"], 1, "a write after a prune of all");
    let exported = run(&["export", "--db", db.to_str().unwrap(), "--lake", lake.to_str().unwrap()]);
    assert!(exported.starts_with("exported 1 attempts"), "{exported}");
}

#[test]
fn report_lake_names_a_missing_or_an_empty_lake() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let report =
        |lake: &Path| Command::new(BIN).args(["report", "--lake", lake.to_str().unwrap()]).output().unwrap();
    let missing = report(&lake);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("_lake.json is missing"), "{missing:?}");
    let db = dir.path().join("empty.duckdb");
    let nothing = dir.path().join("nothing.jsonl");
    std::fs::write(&nothing, "").unwrap();
    run(&["ingest", "--db", db.to_str().unwrap(), nothing.to_str().unwrap()]);
    let said = run(&["export", "--db", db.to_str().unwrap(), "--lake", lake.to_str().unwrap()]);
    assert!(said.contains("already holds every attempt"), "{said}");
    let empty = report(&lake);
    assert_eq!(empty.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&empty.stderr).contains("holds no attempts yet"), "{empty:?}");
    let bad = Command::new(BIN)
        .args(["export", "--db", db.to_str().unwrap(), "--lake"])
        .arg(&lake)
        .args(["--node-id", "_x"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "a bad node id is refused at start");
    let as_node = |node: &str| {
        Command::new(BIN)
            .args(["export", "--db", db.to_str().unwrap(), "--lake"])
            .arg(&lake)
            .args(["--node-id", node])
            .output()
            .unwrap()
    };
    // No row went to a lake under its first id: the database may take another.
    assert!(as_node("someone-else").status.success());
    let one = dir.path().join("one.jsonl");
    std::fs::write(&one, crate::rec(json!({"attempt_id": "one"}))).unwrap();
    run(&["ingest", "--db", db.to_str().unwrap(), one.to_str().unwrap()]);
    assert!(as_node("someone-else").status.success());
    // Now rows carry it: another id is refused.
    let other = as_node("a-third-id");
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("this database is lake node `someone-else`"),
        "{other:?}"
    );
}
