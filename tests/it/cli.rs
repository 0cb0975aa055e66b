//! The binary as a user runs it: ingest, report, simulate, demo.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use flate2::Compression;
use flate2::write::GzEncoder;
use serde_json::Value;

use crate::FIXTURE;

fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_attempt-ledger"));
    cmd.env_remove("ATTEMPT_LEDGER_DB").env_remove("ATTEMPT_LEDGER_PRICES");
    cmd
}

fn run(args: &[&str], dir: &Path) -> Output {
    bin().args(args).current_dir(dir).output().unwrap()
}

fn run_with_stdin(args: &[&str], dir: &Path, input: &[u8]) -> Output {
    let mut child = bin()
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn fixture_file(dir: &Path) -> PathBuf {
    let path = dir.join("attempts.jsonl");
    std::fs::write(&path, FIXTURE).unwrap();
    path
}

fn json_report(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["report", "--format", "json"];
    args.extend_from_slice(extra);
    let out = run(&args, dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn ingest_then_report_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    fixture_file(dir.path());
    let out = run(&["ingest", "attempts.jsonl"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "accepted 15 records, 0 duplicates of records already stored, 0 conflicts, 0 warnings, 0 rejected \
         (of 15 received)\n"
    );
    assert!(
        dir.path().join("attempt-ledger.duckdb").exists(),
        "the default --db is in the working directory"
    );

    let json = json_report(dir.path(), &[]);
    for key in ["workflows", "rates", "attempts", "tokens", "cost_usd", "by_served_provider"] {
        assert!(json.get(key).is_some(), "missing {key}");
    }
    assert_eq!(json["workflows"]["total"], 11);
    assert_eq!(json["attempts"]["total"], 15);

    let table = run(&["report"], dir.path());
    let table = text(&table.stdout);
    assert!(table.contains("fallback recovery"), "{table}");
    assert!(table.contains("aws.bedrock"), "{table}");

    let csv = run(&["report", "--format", "csv"], dir.path());
    let csv = text(&csv.stdout);
    assert!(csv.starts_with("metric,value\n"), "{csv}");
    assert!(csv.contains("\nworkflows.total,11\n"), "{csv}");
    assert!(csv.contains("by_served_provider[aws.bedrock].attempts,1"), "{csv}");
}

#[test]
fn rejected_lines_are_named_and_the_rest_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let good = FIXTURE.lines().next().unwrap();
    let input = format!("{good}\n{{not json\n\n{{\"workflow_id\":\"x\"}}\n");
    std::fs::write(dir.path().join("mixed.jsonl"), input).unwrap();
    let out = run(&["ingest", "mixed.jsonl"], dir.path());
    assert_eq!(out.status.code(), Some(3), "some lines rejected: exit 3");
    assert!(text(&out.stdout).starts_with("accepted 1 records, 0 duplicates"));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("rejected mixed.jsonl:2: not valid JSON"), "{stderr}");
    assert!(stderr.contains("rejected mixed.jsonl:4: missing required field `started_at`"), "{stderr}");
    assert_eq!(json_report(dir.path(), &[])["attempts"]["total"], 1);
}

#[test]
fn re_ingesting_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    fixture_file(dir.path());
    run(&["ingest", "attempts.jsonl"], dir.path());
    let before = json_report(dir.path(), &[]);
    let out = run(&["ingest", "attempts.jsonl"], dir.path());
    assert_eq!(
        text(&out.stdout),
        "accepted 0 records, 15 duplicates of records already stored, 0 conflicts, 0 warnings, 0 rejected \
         (of 15 received)\n"
    );
    assert_eq!(json_report(dir.path(), &[]), before);
}

#[test]
fn gzip_files_and_stdin_are_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let (first, rest): (Vec<_>, Vec<_>) = FIXTURE.lines().enumerate().partition(|(i, _)| *i < 7);
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    for (_, line) in &first {
        writeln!(gz, "{line}").unwrap();
    }
    std::fs::write(dir.path().join("part.jsonl.gz"), gz.finish().unwrap()).unwrap();
    let out = run(&["ingest", "--db", "x.duckdb", "part.jsonl.gz"], dir.path());
    assert!(text(&out.stdout).starts_with("accepted 7 records"), "{}", text(&out.stderr));

    let stdin: String = rest.iter().map(|(_, l)| format!("{l}\n")).collect();
    let out = run_with_stdin(&["ingest", "--db", "x.duckdb", "-"], dir.path(), stdin.as_bytes());
    assert!(text(&out.stdout).starts_with("accepted 8 records"), "{}", text(&out.stderr));
    assert_eq!(json_report(dir.path(), &["--db", "x.duckdb"])["attempts"]["total"], 15);
}

#[test]
fn db_path_comes_from_the_environment_too() {
    let dir = tempfile::tempdir().unwrap();
    fixture_file(dir.path());
    let out = bin()
        .args(["ingest", "attempts.jsonl"])
        .env("ATTEMPT_LEDGER_DB", "env.duckdb")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(dir.path().join("env.duckdb").exists());
}

#[test]
fn report_filters_by_time_and_workflow() {
    let dir = tempfile::tempdir().unwrap();
    fixture_file(dir.path());
    run(&["ingest", "attempts.jsonl"], dir.path());
    let nightly = json_report(dir.path(), &["--workflow", "nightly"]);
    assert_eq!(nightly["workflows"]["total"], 4);
    let window =
        json_report(dir.path(), &["--since", "2026-11-28T02:01:00Z", "--until", "2026-11-28T02:02:00Z"]);
    assert_eq!(window["workflows"]["total"], 4);
    let bad = run(&["report", "--since", "last tuesday"], dir.path());
    assert_eq!(bad.status.code(), Some(1));
    assert!(text(&bad.stderr).contains("--since: `last tuesday` is not a time"), "{}", text(&bad.stderr));
}

#[test]
fn report_without_a_database_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["report"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no database at attempt-ledger.duckdb"), "{}", text(&out.stderr));
}

#[test]
fn a_user_price_file_overrides_the_built_in_table() {
    let dir = tempfile::tempdir().unwrap();
    fixture_file(dir.path());
    run(&["ingest", "attempts.jsonl"], dir.path());
    std::fs::write(
        dir.path().join("prices.toml"),
        "[[provider]]\nname = \"acme\"\nmodels = [{ model = \"acme-large\", input = 1000000.0, output = 0.0 }]\n",
    )
    .unwrap();
    let before = json_report(dir.path(), &[]);
    let after = json_report(dir.path(), &["--prices", "prices.toml"]);
    assert_eq!(before["cost_usd"]["unknown_cost_attempts"], 1);
    assert_eq!(after["cost_usd"]["unknown_cost_attempts"], 0);
    // 100 input tokens at $1,000,000 per million.
    let delta = after["cost_usd"]["total"].as_f64().unwrap() - before["cost_usd"]["total"].as_f64().unwrap();
    assert!((delta - 100.0).abs() < 1e-9, "{delta}");
}

#[test]
fn simulate_pipes_into_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let sim =
        run(&["simulate", "--scenario", "quota-exhausted", "--workflows", "300", "--seed", "4"], dir.path());
    assert!(sim.status.success());
    let again =
        run(&["simulate", "--scenario", "quota-exhausted", "--workflows", "300", "--seed", "4"], dir.path());
    assert_eq!(sim.stdout, again.stdout, "seeded output is reproducible");
    let out = run_with_stdin(&["ingest", "-"], dir.path(), &sim.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = json_report(dir.path(), &[]);
    let quota = report["error_classes"].as_array().unwrap().iter().find(|e| e["error_class"] == "quota");
    assert!(quota.is_some(), "insufficient_quota is classed as quota: {report}");
    assert!(report["workflows"]["queued"].as_i64().unwrap() > 0);
}

/// The README's first command, run as the README says (through the binary
/// that `cargo run --release -- demo` builds).
#[test]
fn demo_runs_an_incident_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["demo", "--dir", dir.path().to_str().unwrap()], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for needle in
        ["Workflow outcomes", "nightly-classify", "chat-interactive", "aws.bedrock", "Next:", "unknown cost"]
    {
        assert!(stdout.contains(needle), "demo output lacks {needle}:\n{stdout}");
    }
    let db = dir.path().join("demo.duckdb");
    let report = json_report(dir.path(), &["--db", db.to_str().unwrap(), "--workflow", "nightly-classify"]);
    assert_eq!(report["workflows"]["total"], 20_000);
    assert!(report["cost_usd"]["wasted"].as_f64().unwrap() > 0.0);
    assert!(report["retry_budget"]["minutes_over_budget"].as_i64().unwrap() > 0);
    // The night against its simulated bill: the pages it wrote are what
    // `reconcile import` reads, and each planted difference shows as its
    // cause: the unseen project, the cheaper output, the unbilled failures.
    let bill = run(
        &[
            "reconcile",
            "--db",
            db.to_str().unwrap(),
            "--since",
            "2026-11-28",
            "--until",
            "2026-11-29",
            "--format",
            "json",
        ],
        dir.path(),
    );
    let bill: Value = serde_json::from_slice(&bill.stdout).unwrap();
    let cell = |provider: &str, model: &str| {
        bill["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["provider"] == provider && c["model"] == model)
            .unwrap()
            .clone()
    };
    assert_eq!(cell("openai", "gpt-4o-mini")["status"], "provider_only");
    assert_eq!(cell("openai", "gpt-4o-mini")["hidden_requests"], 2000);
    let haiku = cell("anthropic", "claude-haiku-4-5");
    assert!(haiku["causes"]["price"].as_f64().unwrap() > 0.0, "{haiku:#}");
    assert!(haiku["causes"]["unbilled_failures"].as_f64().unwrap() > 0.0, "{haiku:#}");
    assert_eq!(haiku["causes"]["unexplained"].as_f64(), Some(0.0));
    assert!(stdout.contains("Against the bill") && stdout.contains("provider_only"), "{stdout}");
    // Priced as billed: only the planted cell drifts on price, and the
    // table lacks nothing the night needed.
    for cell in bill["cells"].as_array().unwrap() {
        if cell["model"] != "claude-haiku-4-5" {
            assert_eq!(cell["causes"]["price"].as_f64(), Some(0.0), "{cell:#}");
        }
    }
    let check = run(&["prices", "check", "--db", db.to_str().unwrap(), "--format", "json"], dir.path());
    assert!(check.status.success(), "{}", text(&check.stderr));
    let check: Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(check["unpriced"], serde_json::json!([]), "{check:#}");
    assert!(check["attempts_checked"].as_i64().unwrap() > 40_000, "{check:#}");
    for source in ["openai-usage", "openai-costs", "anthropic-usage", "anthropic-cost"] {
        let again = run(
            &[
                "reconcile",
                "import",
                "--db",
                db.to_str().unwrap(),
                "--source",
                source,
                &format!("{source}.jsonl"),
            ],
            dir.path(),
        );
        assert!(again.status.success(), "{}", text(&again.stderr));
    }
}

/// Without `--dir`, each demo run writes into a new directory of its own
/// that only its user can enter: a name planted in the temporary directory
/// (a symlink to someone's files) is never followed.
#[cfg(unix)]
#[test]
fn demo_without_a_dir_never_writes_through_a_planted_path() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::os::unix::fs::symlink(&victim, tmp.path().join("attempt-ledger-demo")).unwrap();
    let out = bin().arg("demo").env("TMPDIR", tmp.path()).current_dir(tmp.path()).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0, "wrote through the planted symlink");
    let made: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("attempt-ledger-demo-"))
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert!(made[0].join("demo.duckdb").exists());
    assert_eq!(std::fs::metadata(&made[0]).unwrap().permissions().mode() & 0o777, 0o700);
    assert!(text(&out.stdout).contains(&made[0].display().to_string()), "the next commands name it");
}

/// The OpenTelemetry Collector's file exporter writes one
/// ExportTraceServiceRequest JSON per line; `ingest` maps it like OTLP/HTTP.
#[test]
fn otlp_json_files_from_the_collector_are_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let export = serde_json::json!({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "chat",
         "startTimeUnixNano": "1795831200000000000", "endTimeUnixNano": "1795831201000000000",
         "attributes": [{"key": "gen_ai.provider.name", "value": {"stringValue": "openai"}},
                        {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o-mini"}},
                        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "1000000"}}]},
        {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b175", "name": "chat",
         "startTimeUnixNano": "1795831200000000000",
         "attributes": [{"key": "gen_ai.system", "value": {"stringValue": "openai"}}]}
    ]}]}]});
    std::fs::write(dir.path().join("collector.jsonl"), format!("{export}\n")).unwrap();
    let out = run(&["ingest", "collector.jsonl"], dir.path());
    assert_eq!(out.status.code(), Some(3), "one span lacks a model");
    assert!(text(&out.stdout).starts_with("accepted 1 records"), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("rejected collector.jsonl:1: span eee19b7ec3c1b175: no model"),
        "{}",
        text(&out.stderr)
    );
    let report = json_report(dir.path(), &[]);
    assert_eq!(report["attempts"]["total"], 1);
    assert_eq!(report["by_served_model"][0]["input_tokens"], 1_000_000);
}

/// The first record decides an input's format: an export line inside a file
/// of attempt records is rejected with a reason, never silently dropped or
/// read as something else.
#[test]
fn an_input_has_one_format_decided_by_its_first_record() {
    let dir = tempfile::tempdir().unwrap();
    let first = FIXTURE.lines().next().unwrap();
    let export = r#"{"resourceSpans": []}"#;
    std::fs::write(dir.path().join("mixed.jsonl"), format!("{first}\n{export}\n")).unwrap();
    let out = run(&["ingest", "mixed.jsonl"], dir.path());
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("rejected mixed.jsonl:2: missing required field `workflow_id`"),
        "{}",
        text(&out.stderr)
    );

    std::fs::write(dir.path().join("unknown.jsonl"), "{\"foo\": 1}\n").unwrap();
    let out = run(&["ingest", "unknown.jsonl"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--format"), "{}", text(&out.stderr));
    let out = run(&["ingest", "--format", "attempts", "unknown.jsonl"], dir.path());
    assert_eq!(out.status.code(), Some(3), "named, the format is used and the line rejected");
}

/// Stored records keep the spelling they arrived with: an alias added
/// later reaches them through `rebuild`, without re-ingesting.
#[test]
fn rebuild_applies_an_edited_provider_alias_table_to_stored_data() {
    let dir = tempfile::tempdir().unwrap();
    let line = crate::rec(serde_json::json!({"provider": "corp-gateway-openai", "input_tokens": 1_000_000}));
    std::fs::write(dir.path().join("a.jsonl"), format!("{line}\n")).unwrap();
    assert_eq!(run(&["ingest", "a.jsonl"], dir.path()).status.code(), Some(0));
    let before = json_report(dir.path(), &[]);
    assert_eq!(before["by_served_provider"][0]["served_provider"], "corp-gateway-openai");
    assert_eq!(before["cost_usd"]["unknown_cost_attempts"], 1);

    std::fs::write(
        dir.path().join("aliases.toml"),
        "[[provider]]\nname = \"openai\"\naliases = [\"corp-gateway-openai\"]\n",
    )
    .unwrap();
    let out = run(&["rebuild", "--providers", "aliases.toml"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let after = json_report(dir.path(), &[]);
    assert_eq!(after["by_served_provider"][0]["served_provider"], "openai");
    assert_eq!(after["cost_usd"]["total"], 0.15, "now priced as openai/gpt-4o-mini");
    // Re-ingesting the same line is still a duplicate: the id hashes the spelling received.
    let again = run(&["ingest", "--providers", "aliases.toml", "a.jsonl"], dir.path());
    assert!(text(&again.stdout).starts_with("accepted 0 records, 1 duplicates"), "{}", text(&again.stdout));
}

/// `dimensions --set`, then the grouped report from the command line and
/// from the HTTP API, over records that carry their team in extra fields;
/// records arriving after the dimension was set are grouped as they come.
#[test]
fn dimensions_set_from_the_cli_group_the_report_on_both_interfaces() {
    let dir = tempfile::tempdir().unwrap();
    let line = |id: &str, team: &str, status: &str, attempt: u32| {
        format!(
            r#"{{"workflow_id":"{id}","attempt_id":"{id}-{attempt}","attempt":{attempt},"started_at":"2026-11-28T02:00:0{attempt}Z","provider":"openai","model":"gpt-4o-mini","status":"{status}","input_tokens":100,"team":"{team}"}}"#
        )
    };
    let first =
        [line("a", "search", "ok", 1), line("b", "ads", "error", 1), line("b", "ads", "ok", 2)].join("\n");
    std::fs::write(dir.path().join("first.jsonl"), first).unwrap();
    let out = run(&["ingest", "--db", "d.duckdb", "first.jsonl"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = run(&["dimensions", "--db", "d.duckdb", "--set", "team=extra.team"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "team\textra.team\n");
    let out = run(&["dimensions", "--db", "d.duckdb", "--set", "team=extra.te'am"], dir.path());
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("neither a record field"), "{}", text(&out.stderr));

    std::fs::write(dir.path().join("later.jsonl"), line("c", "search", "ok", 1)).unwrap();
    let out = run(&["ingest", "--db", "d.duckdb", "later.jsonl"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = run(&["report", "--db", "d.duckdb", "--format", "json", "--group-by", "team"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = |report: &Value| -> Vec<(String, i64, i64)> {
        report["groups"]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                (
                    g["value"].as_str().unwrap().to_string(),
                    g["workflows"]["total"].as_i64().unwrap(),
                    g["workflows"]["retry_recovery"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(summary(&report), vec![("search".into(), 2, 0), ("ads".into(), 1, 1)]);
    let table = run(&["report", "--db", "d.duckdb", "--group-by", "team"], dir.path());
    assert!(text(&table.stdout).contains("By team"), "{}", text(&table.stdout));
    let unknown = run(&["report", "--db", "d.duckdb", "--group-by", "customer"], dir.path());
    assert!(!unknown.status.success());
    assert!(text(&unknown.stderr).contains("no dimension named `customer`"), "{}", text(&unknown.stderr));

    let service = crate::service::Service::start(&dir.path().join("d.duckdb"), &[]);
    assert_eq!(summary(&service.report("?group_by=team")), summary(&report));
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let answer = agent.get(&format!("{}/api/v1/report?group_by=customer", service.http)).call().unwrap();
    assert_eq!(answer.status().as_u16(), 400);
}

/// Token counts at the largest the record allows sum beyond 64 bits: the
/// report in every format and an alert replay over them still answer (the
/// sums were once serialised through serde_json's 64-bit numbers, which
/// panicked in `report --format csv` and in the alert evaluator). One a
/// minute: a minute's stored sum is 64-bit (a minute that would pass it is
/// `derived::sums_past_the_64_bit_bound_are_refused_*`), the sums a report
/// takes across minutes are not.
#[test]
fn token_sums_beyond_64_bits_do_not_break_reports_or_alerts() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<String> = (0..3)
        .map(|i| {
            format!(
                r#"{{"workflow_id":"w{i}","workflow":"nightly-classify","started_at":"2026-11-28T02:0{i}:00Z","provider":"openai","model":"gpt-4o-mini","status":"error","error_class":"transient","input_tokens":{},"output_tokens":{}}}"#,
                i64::MAX,
                i64::MAX
            )
        })
        .collect();
    std::fs::write(dir.path().join("huge.jsonl"), records.join("\n")).unwrap();
    let out = run(&["ingest", "--db", "h.duckdb", "huge.jsonl"], dir.path());
    assert!(out.status.success(), "{}", text(&out.stderr));
    for format in ["table", "json", "csv"] {
        let out = run(&["report", "--db", "h.duckdb", "--format", format], dir.path());
        assert!(out.status.success(), "{format}: {}", text(&out.stderr));
    }
    let out = run(&["report", "--db", "h.duckdb", "--format", "json"], dir.path());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let input = report["tokens"]["total"]["input"].as_f64().unwrap();
    assert!((input / (3.0 * i64::MAX as f64) - 1.0).abs() < 1e-12, "{input}");
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/alerts.toml");
    let out = run(
        &[
            "alerts",
            "--check",
            "--db",
            "h.duckdb",
            "--rules",
            rules,
            "--since",
            "2026-11-28T02:00:00Z",
            "--until",
            "2026-11-28T02:10:00Z",
            "--step",
            "1m",
            "--format",
            "json",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("wasted-tokens"), "{}", text(&out.stdout));
}

/// Values that would start a broken service are refused at start, with
/// the range they broke: a body limit of 0 (or one that wraps to 0), a
/// refresh loop with no pause.
#[test]
fn serve_refuses_flags_out_of_range_at_start() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value, says) in [
        ("--max-body-mib", "0", "0 is not in 1..=1024"),
        ("--max-body-mib", "17592186044416", "is not in 1..=1024"),
        ("--metrics-refresh", "0s", "must be between 100ms and 1day, got 0s"),
        ("--header-timeout", "0s", "must be between 100ms and 1h"),
        ("--queue", "0", "0 is not in 1..=4096"),
        ("--max-connections", "0", "0 is not in 1..=65536"),
    ] {
        let out = run(&["serve", "--db", "x.duckdb", flag, value], dir.path());
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        assert!(text(&out.stderr).contains(says), "{flag} {value}: {}", text(&out.stderr));
    }
    assert!(!dir.path().join("x.duckdb").exists(), "nothing was opened");
}

/// A file that is not a DuckDB database is refused before DuckDB reads it
/// (an SQLite file would make DuckDB fetch an extension over the network).
#[test]
fn a_file_that_is_not_a_duckdb_database_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let mut sqlite = b"SQLite format 3\0".to_vec();
    sqlite.resize(4096, 0);
    std::fs::write(dir.path().join("s.duckdb"), &sqlite).unwrap();
    std::fs::write(dir.path().join("t.duckdb"), b"attempts, one per line\n").unwrap();
    for (file, what) in [("s.duckdb", "it is an SQLite database"), ("t.duckdb", "it is not a DuckDB file")] {
        let out = run(&["report", "--db", file], dir.path());
        assert_eq!(out.status.code(), Some(1));
        let stderr = text(&out.stderr);
        assert!(stderr.contains(what) && !stderr.contains("extension"), "{stderr}");
    }
}

/// A database the user may only read is reported on, read-only, with the
/// same answers; the lock `serve` holds is explained once, with what to
/// do instead.
#[test]
fn read_only_databases_are_read_and_a_held_lock_is_explained_once() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let input = fixture_file(dir.path());
    assert!(run(&["ingest", "--no-progress", input.to_str().unwrap()], dir.path()).status.success());
    let db = dir.path().join("attempt-ledger.duckdb");
    let answers = |dir: &Path| -> Vec<String> {
        [&["report", "--format", "csv"][..], &["audit", "--format", "json"], &["alerts", "--format", "json"]]
            .iter()
            .map(|args| {
                let out = run(args, dir);
                assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
                text(&out.stdout)
            })
            .collect()
    };
    let writable = answers(dir.path());
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    assert_eq!(answers(dir.path()), writable);
    assert!(!dir.path().join("attempt-ledger.duckdb.wal").exists(), "a read-only open wrote a log");
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();

    // A replay needs the file itself: the one read command that cannot ask
    // a running `serve`.
    let service = crate::service::ServiceProcess::start(&db, &[]);
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/alerts.toml");
    let out = run(&["alerts", "--check", "--rules", rules.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("(PID {})", service.child.id())), "{stderr}");
    assert!(stderr.contains("GET /api/v1/report"), "{stderr}");
    assert_eq!(stderr.matches("in use by").count(), 1, "{stderr}");
    assert!(!stderr.contains("Error code 1"), "{stderr}");
}

/// While `serve` holds the database, `report`, `audit` and `alerts` ask it
/// (where it answers is beside the database while it runs) and print what
/// they print once it has stopped, saying so on stderr; with access tokens
/// on they send `ATTEMPT_LEDGER_TOKEN`. Options the service cannot honour
/// are refused, and the address left by a killed `serve` is ignored.
#[test]
fn the_read_commands_ask_a_running_serve_for_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture_file(dir.path());
    assert!(run(&["ingest", "--no-progress", input.to_str().unwrap()], dir.path()).status.success());
    let db = dir.path().join("attempt-ledger.duckdb");
    let address = dir.path().join("attempt-ledger.duckdb.serve");
    let commands: [&[&str]; 7] = [
        &["report"],
        &["report", "--format", "json"],
        &["report", "--format", "csv", "--no-audit", "--since", "2026-11-28T02:00:30Z"],
        &["audit"],
        &["audit", "--format", "json", "--workflow", "chat"],
        &["alerts"],
        &["alerts", "--format", "json", "--limit", "5"],
    ];
    let answers = |env: &[(&str, &str)]| -> Vec<(String, String)> {
        commands
            .iter()
            .map(|args| {
                let out =
                    bin().args(*args).envs(env.iter().copied()).current_dir(dir.path()).output().unwrap();
                assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
                (text(&out.stdout), text(&out.stderr))
            })
            .collect()
    };
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "read read-secret-0123456789\ningest ingest-secret-0123456789\n").unwrap();
    let service = crate::service::ServiceProcess::start(&db, &["--tokens", tokens.to_str().unwrap()]);
    assert!(address.exists(), "serve records where it answers");
    let out = run(&["report"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("ATTEMPT_LEDGER_TOKEN"), "{}", text(&out.stderr));
    let prices = Path::new(env!("CARGO_MANIFEST_DIR")).join("prices/prices.toml");
    let out = run(&["report", "--prices", prices.to_str().unwrap()], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--prices cannot apply"), "{}", text(&out.stderr));
    let beside = answers(&[("ATTEMPT_LEDGER_TOKEN", "read-secret-0123456789")]);
    for (answer, stderr) in &beside {
        assert!(stderr.contains(&format!("held by `serve` (pid {})", service.child.id())), "{stderr}");
        assert!(!answer.is_empty());
    }
    assert!(service.terminate().success());
    assert!(!address.exists(), "removed when serve stops");
    let after = answers(&[]);
    for ((beside, _), (after, stderr)) in beside.iter().zip(&after) {
        assert_eq!(beside, after);
        assert!(stderr.is_empty(), "{stderr}");
    }
    // Killed, `serve` leaves its address behind; the file is free, so it is
    // read as usual.
    let service = crate::service::ServiceProcess::start(&db, &[]);
    drop(service);
    assert!(address.exists());
    assert_eq!(
        answers(&[]).into_iter().map(|(out, _)| out).collect::<Vec<_>>(),
        after.into_iter().map(|(out, _)| out).collect::<Vec<_>>()
    );
}
