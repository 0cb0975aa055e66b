//! `reconcile`: the provider's exports imported as the admin APIs page
//! them, held against the ledger cell by cell (docs/reconcile.md).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use proptest::prelude::*;
use serde_json::Value;

use attempt_core::bill::{BillSource, read_pages};
use attempt_core::pricing::PriceTable;
use attempt_core::reconcile::{Grain, Tolerance};
use attempt_ledger::report::reconcile::{Options, reconcile};
use attempt_ledger::store::Store;
use attempt_ledger::store::bill::ReconcileScope;

const SOURCES: [&str; 5] =
    ["openai-usage", "openai-costs", "anthropic-usage", "anthropic-cost", "openrouter-activity"];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/bill").join(name)
}

/// Every command prices with the fixture's own file: the bills are of a
/// model the shipped table no longer lists.
fn run(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .env_remove("ATTEMPT_LEDGER_DB")
        .env("ATTEMPT_LEDGER_PRICES", fixture("prices.toml"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn ok(args: &[&str], dir: &Path) -> String {
    let out = run(args, dir);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn import(dir: &Path, source: &str, file: &Path) -> String {
    ok(&["reconcile", "import", "--db", "r.duckdb", "--source", source, file.to_str().unwrap()], dir)
}

fn compared(dir: &Path) -> Value {
    let text = ok(
        &[
            "reconcile",
            "--db",
            "r.duckdb",
            "--since",
            "2025-07-31T10:37:00Z",
            "--until",
            "2025-08-03",
            "--tolerance-usd",
            "0",
            "--tolerance-pct",
            "0",
            "--format",
            "json",
        ],
        dir,
    );
    serde_json::from_str(&text).unwrap()
}

fn ledger_db() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    ok(&["ingest", "--db", "r.duckdb", fixture("ledger.jsonl").to_str().unwrap()], dir.path());
    dir
}

fn cell<'a>(answer: &'a Value, provider: &str, account: Option<&str>, tier: Option<&str>) -> &'a Value {
    answer["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            c["provider"] == provider
                && c["billing_account"].as_str() == account
                && c["service_tier"].as_str() == tier
                && c["start"] == "2025-08-01T00:00:00Z"
        })
        .unwrap_or_else(|| panic!("no cell {provider} {account:?} {tier:?} in {answer:#}"))
}

fn money(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not money"))
}

#[test]
fn each_cells_drift_is_split_into_causes_that_add_up_to_it() {
    let dir = ledger_db();
    for source in SOURCES {
        import(dir.path(), source, &fixture(&format!("{source}.json")));
    }
    let answer = compared(dir.path());
    for key in ["cells", "totals", "other_costs", "dimensions"] {
        assert!(answer.get(key).is_some(), "no `{key}`");
    }
    // OpenAI, project A: a 429 charged by its emitter, an emitter's own
    // figure above the price table, a billed timed-out stream, a request the
    // telemetry never saw, and a discount on output.
    let a = cell(&answer, "openai", Some("proj_A"), None);
    assert_eq!(a["model"], "gpt-4o-mini", "the dated name maps to the table's entry");
    assert_eq!(a["status"], "ledger_high");
    assert_eq!(a["ledger"]["attempts"], 5);
    assert_eq!(a["ledger"]["billable_attempts"], 3, "the timed-out stream that produced output is billable");
    assert_eq!(a["ledger"]["unbilled_failures"], 2);
    assert_eq!(a["ledger"]["tokens"]["input"], 4000);
    assert_eq!(money(&a["ledger"]["cost_usd"]), 0.002415);
    assert_eq!(money(&a["ledger"]["repriced_usd"]), 0.001125);
    assert_eq!(a["billed"]["requests"], 4);
    assert_eq!(a["billed"]["tokens"]["input"], 9000);
    assert_eq!(money(&a["billed"]["cost_usd"]), 0.002037);
    assert_eq!(money(&a["billed"]["tokens_priced_usd"]), 0.002115);
    assert_eq!(money(&a["drift_usd"]), 0.000378);
    let causes = &a["causes"];
    assert_eq!(money(&causes["unbilled_failures"]), 0.001);
    assert_eq!(money(&causes["emitter_cost"]), 0.00029);
    assert_eq!(money(&causes["tokens"]), -0.00099);
    assert_eq!(money(&causes["price"]), 0.000078);
    assert_eq!(money(&causes["unexplained"]), 0.0);
    assert_eq!(a["hidden_requests"], 1);
    // A project the ledger never saw.
    let z = cell(&answer, "openai", Some("proj_Z"), None);
    assert_eq!((z["status"].as_str(), z["hidden_requests"].as_i64()), (Some("provider_only"), Some(2)));
    // Anthropic's cost report has no priority tier: the priority cell's
    // whole cost is the price cause; the standard cell matches with its
    // unbilled 529.
    let priority = cell(&answer, "anthropic", Some("wrkspc_1"), Some("priority"));
    assert_eq!(priority["status"], "ledger_high");
    assert_eq!(money(&priority["causes"]["price"]), 0.0075);
    assert_eq!(priority["billed"]["requests"], Value::Null, "Anthropic counts no requests");
    let standard = cell(&answer, "anthropic", Some("wrkspc_1"), Some("standard"));
    assert_eq!(
        (standard["status"].as_str(), standard["ledger"]["unbilled_failures"].as_i64()),
        (Some("matched"), Some(1))
    );
    // OpenRouter's routes are on OpenRouter's bill; without prices for its
    // slugs, what is not unbilled failures stays unexplained.
    let router = cell(&answer, "openrouter", None, None);
    assert_eq!(money(&router["drift_usd"]), -0.0002);
    assert_eq!(router["causes"]["tokens"], Value::Null);
    assert_eq!(money(&router["causes"]["unexplained"]), -0.0002);
    assert_eq!(answer["dimensions"]["openai"]["service_tier"], false, "OpenAI's costs carry no tier");
    assert_eq!(answer["dimensions"]["anthropic"]["service_tier"], true);
    // The first bucket started at the asked instant: partial, out of the totals.
    let partial =
        answer["cells"].as_array().unwrap().iter().find(|c| c["start"] == "2025-07-31T00:00:00Z").unwrap();
    assert_eq!(partial["status"], "partial");
    let totals = &answer["totals"];
    assert_eq!(totals["cells"], 5);
    assert_eq!(totals["cells_by_status"]["partial"], 1);
    let sum: f64 = ["unbilled_failures", "emitter_cost", "tokens", "price", "unexplained"]
        .iter()
        .map(|k| money(&totals["causes"][*k]))
        .sum();
    assert!((sum - money(&totals["drift_usd"])).abs() < 1e-12);
    assert_eq!(money(&totals["drift_usd"]), 0.006628);
    // Costs that are not tokens are kept, apart.
    let other: Vec<(String, f64)> = answer["other_costs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["provider"].as_str().unwrap().to_string(), money(&o["amount"])))
        .collect();
    assert_eq!(other, [("anthropic".to_string(), 0.01), ("openai".to_string(), 0.025)]);
}

/// `reconcile` of the fixtures' one whole day (2025-08-01), with `more`.
fn one_day(dir: &Path, more: &[&str]) -> String {
    one_day_of(dir, "2025-08-01", more)
}

/// `reconcile` of the whole UTC day `day`, with `more`.
fn one_day_of(dir: &Path, day: &str, more: &[&str]) -> String {
    let until =
        (chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").unwrap() + chrono::Days::new(1)).to_string();
    let mut args = vec!["reconcile", "--db", "r.duckdb", "--since", day, "--until", &until];
    args.extend_from_slice(more);
    ok(&args, dir)
}

#[test]
fn money_is_written_as_exact_decimals() {
    let dir = ledger_db();
    for source in SOURCES {
        import(dir.path(), source, &fixture(&format!("{source}.json")));
    }
    let text = one_day(dir.path(), &["--format", "json"]);
    assert!(text.contains("\"drift_usd\": 0.000378,"), "{text}");
    assert!(text.contains("\"tokens\": -0.00099,"), "{text}");
    let csv = one_day(dir.path(), &["--format", "csv"]);
    assert!(csv.lines().next().unwrap().starts_with("start,end,provider,billing_account,model"));
    assert_eq!(csv.lines().count(), 6, "{csv}");
    let table = one_day(dir.path(), &[]);
    assert!(table.contains("openai: cells by account, model"), "{table}");
}

/// OpenRouter's generation records are OpenRouter's own per-request bill:
/// each try is an attempt asked of `openrouter` for the slug, the served
/// try carries the generation's cost, and the cell holds that cost against
/// the upstream's list price (`emitter_cost`) and against the activity
/// export; requests the export counts beyond the ledger's are hidden.
#[test]
fn openrouter_generations_land_in_openrouters_cells_with_their_own_cost() {
    let dir = tempfile::tempdir().unwrap();
    let generations = dir.path().join("generations.jsonl");
    let generation = |id: &str,
                      at: &str,
                      slug: &str,
                      tries: &[(&str, u16)],
                      tokens: (u32, u32),
                      cost: &str| {
        let responses: Vec<String> = tries
            .iter()
            .map(|(who, status)| {
                format!(r#"{{"provider_name": "{who}", "model_permaslug": "{slug}", "status": {status}, "latency": 200}}"#)
            })
            .collect();
        format!(
            r#"{{"data": {{"id": "{id}", "created_at": "{at}", "model": "openai/gpt-4o-mini", "provider_name": "OpenAI", "native_tokens_prompt": {}, "native_tokens_completion": {}, "total_cost": {cost}, "provider_responses": [{}]}}}}"#,
            tokens.0,
            tokens.1,
            responses.join(", ")
        )
    };
    let lines = [
        // $0.00033 is OpenAI's list price of these tokens; Azure's 429 is unbilled.
        generation(
            "gen-a",
            "2025-08-01T09:00:00Z",
            "openai/gpt-4o-mini",
            &[("Azure", 429), ("OpenAI", 200)],
            (1000, 300),
            "0.00033",
        ),
        // Charged $0.0004 for tokens listed at $0.00027: $0.00013 above the table.
        generation(
            "gen-b",
            "2025-08-01T11:00:00Z",
            "openai/gpt-4o-mini-2024-07-18",
            &[("OpenAI", 200)],
            (1000, 200),
            "0.0004",
        ),
    ];
    std::fs::write(&generations, lines.join("\n") + "\n").unwrap();
    ok(&["ingest", "--db", "r.duckdb", generations.to_str().unwrap()], dir.path());
    import(dir.path(), "openrouter-activity", &fixture("openrouter-activity.json"));
    let answer: Value = serde_json::from_str(&one_day(
        dir.path(),
        &["--tolerance-usd", "0", "--tolerance-pct", "0", "--format", "json"],
    ))
    .unwrap();
    let cells = answer["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1, "every try is on OpenRouter's bill, none on Azure's or OpenAI's: {cells:?}");
    let router = &cells[0];
    assert_eq!(
        (router["provider"].as_str(), router["model"].as_str()),
        (Some("openrouter"), Some("openai/gpt-4o-mini"))
    );
    assert_eq!(router["ledger"]["attempts"], 3);
    assert_eq!(router["ledger"]["billable_attempts"], 2);
    assert_eq!(router["ledger"]["unbilled_failures"], 1);
    assert_eq!(
        (router["ledger"]["tokens"]["input"].as_i64(), router["ledger"]["tokens"]["output"].as_i64()),
        (Some(2000), Some(500))
    );
    assert_eq!(money(&router["ledger"]["cost_usd"]), 0.00073);
    assert_eq!(
        money(&router["ledger"]["repriced_usd"]),
        0.0006,
        "priced as the upstream that served lists it"
    );
    assert_eq!(money(&router["causes"]["emitter_cost"]), 0.00013);
    assert_eq!(money(&router["billed"]["cost_usd"]), 0.0012);
    assert_eq!(money(&router["drift_usd"]), -0.00047);
    assert_eq!(router["hidden_requests"], 1, "the export counts 3 requests, the ledger served 2");
    // Cost by who served still names the upstream.
    let report: Value =
        serde_json::from_str(&ok(&["report", "--db", "r.duckdb", "--format", "json"], dir.path())).unwrap();
    let served: Vec<&str> = report["by_served_provider"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["served_provider"].as_str().unwrap())
        .collect();
    assert!(served.contains(&"openai") && served.contains(&"azure.ai.openai"), "{served:?}");
}

/// Hour cells compare usage, never money: OpenAI's costs are daily, so an
/// hour cell is `usage_only` with tokens and requests compared and the
/// hidden request counted; a token cost in another currency is listed
/// apart, never added to dollars.
#[test]
fn hour_cells_compare_usage_and_a_cost_in_another_currency_stays_apart() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("hours.jsonl");
    let attempt = |id: &str, at: &str, status: &str, tokens: Option<(u32, u32)>| {
        let mut record = serde_json::json!({"workflow_id": format!("w-{id}"), "attempt_id": id, "started_at": at,
            "provider": "openai", "model": "gpt-4o-mini", "status": status, "billing_account": "proj_H"});
        if let Some((input, output)) = tokens {
            record["input_tokens"] = input.into();
            record["output_tokens"] = output.into();
        }
        record.to_string()
    };
    let lines = [
        attempt("h1", "2025-08-02T14:10:00Z", "ok", Some((1000, 100))),
        attempt("h2", "2025-08-02T14:20:00Z", "error", None),
        attempt("h3", "2025-08-02T15:05:00Z", "ok", Some((2000, 200))),
    ];
    std::fs::write(&ledger, lines.join("\n") + "\n").unwrap();
    ok(&["ingest", "--db", "r.duckdb", ledger.to_str().unwrap()], dir.path());
    let usage = |start: i64, requests: u32, input: u32, output: u32| {
        format!(
            r#"{{"object": "bucket", "start_time": {start}, "end_time": {}, "results": [{{"object": "organization.usage.completions.result", "input_tokens": {input}, "output_tokens": {output}, "input_cached_tokens": 0, "num_model_requests": {requests}, "project_id": "proj_H", "model": "gpt-4o-mini-2024-07-18", "batch": null, "service_tier": null}}]}}"#,
            start + 3600
        )
    };
    let hour = |h: i64| 1_754_092_800 + h * 3600;
    let usage_page = format!(
        r#"{{"object": "page", "data": [{}, {}], "has_more": false, "next_page": null}}"#,
        usage(hour(14), 1, 1000, 100),
        usage(hour(15), 2, 3000, 300)
    );
    let costs_page = format!(
        r#"{{"object": "page", "data": [{{"object": "bucket", "start_time": {}, "end_time": {}, "results": [{{"object": "organization.costs.result", "amount": {{"value": 0.5, "currency": "eur"}}, "line_item": "gpt-4o-mini-2024-07-18, input", "project_id": "proj_H"}}, {{"object": "organization.costs.result", "amount": {{"value": 0.00054, "currency": "usd"}}, "line_item": "gpt-4o-mini-2024-07-18, output", "project_id": "proj_H"}}]}}], "has_more": false, "next_page": null}}"#,
        hour(0),
        hour(24)
    );
    for (source, page) in [("openai-usage", usage_page), ("openai-costs", costs_page)] {
        let file = dir.path().join(format!("{source}.json"));
        std::fs::write(&file, page).unwrap();
        import(dir.path(), source, &file);
    }
    let asked = ["reconcile", "--db", "r.duckdb", "--since", "2025-08-02", "--until", "2025-08-03"];
    let answer: Value = serde_json::from_str(&ok(
        &[&asked[..], &["--grain", "hour", "--format", "json"]].concat(),
        dir.path(),
    ))
    .unwrap();
    let at = |start: &str| {
        answer["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["start"] == start)
            .unwrap_or_else(|| panic!("{start}: {answer:#}"))
    };
    let two = at("2025-08-02T14:00:00Z");
    assert_eq!(
        (two["end"].as_str(), two["status"].as_str()),
        (Some("2025-08-02T15:00:00Z"), Some("usage_only"))
    );
    assert_eq!(
        (two["ledger"]["billable_attempts"].as_i64(), two["ledger"]["unbilled_failures"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        (two["billed"]["requests"].as_i64(), two["billed"]["tokens"]["input"].as_i64()),
        (Some(1), Some(1000))
    );
    assert_eq!(
        (two["billed"]["cost_usd"].clone(), two["drift_usd"].clone()),
        (Value::Null, Value::Null),
        "no hourly cost"
    );
    assert_eq!(two["hidden_requests"], 0);
    let three = at("2025-08-02T15:00:00Z");
    assert_eq!(three["status"], "usage_only");
    assert_eq!(
        (three["billed"]["tokens"]["input"].as_i64(), three["hidden_requests"].as_i64()),
        (Some(3000), Some(1))
    );
    assert_eq!(answer["grain"], "hour");
    let other: Vec<(&str, &str, f64)> = answer["other_costs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["kind"].as_str().unwrap(), o["currency"].as_str().unwrap(), money(&o["amount"])))
        .collect();
    assert_eq!(other, [("token_cost", "EUR", 0.5)], "{answer:#}");

    // The day: the usage covers two of its hours, so it is partial, and the
    // euros are still not dollars.
    let day: Value =
        serde_json::from_str(&ok(&[&asked[..], &["--format", "json"]].concat(), dir.path())).unwrap();
    let cells = day["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0]["status"], "partial");
    assert_eq!(money(&day["other_costs"][0]["amount"]), 0.5);
}

/// An answer lists at most `MAX_LISTED_CELLS` cells and says so; its
/// totals still count every cell.
#[test]
fn an_answer_lists_at_most_the_bound_and_counts_every_cell() {
    use attempt_ledger::report::reconcile::MAX_LISTED_CELLS;
    let dir = tempfile::tempdir().unwrap();
    let cells = MAX_LISTED_CELLS + 25;
    let ledger = dir.path().join("models.jsonl");
    let lines: String = (0..cells)
        .map(|i| {
            serde_json::json!({"workflow_id": format!("w{i}"), "attempt_id": format!("a{i}"),
                "started_at": "2025-08-02T10:00:00Z", "provider": "openai", "model": format!("model-{i:05}"),
                "status": "ok", "input_tokens": 1, "output_tokens": 1, "cost_usd": 0.000001})
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(&ledger, lines).unwrap();
    ok(&["ingest", "--db", "r.duckdb", ledger.to_str().unwrap()], dir.path());
    let empty_day = r#"{"object": "page", "data": [{"object": "bucket", "start_time": 1754092800, "end_time": 1754179200, "results": []}], "has_more": false, "next_page": null}"#;
    let costs = dir.path().join("costs.json");
    std::fs::write(&costs, empty_day).unwrap();
    import(dir.path(), "openai-costs", &costs);
    let answer: Value =
        serde_json::from_str(&one_day_of(dir.path(), "2025-08-02", &["--format", "json"])).unwrap();
    assert_eq!(answer["cells_total"].as_u64(), Some(cells as u64));
    assert_eq!(answer["cells_listed"].as_u64(), Some(MAX_LISTED_CELLS as u64));
    assert_eq!(answer["cells"].as_array().unwrap().len(), MAX_LISTED_CELLS);
    assert_eq!(
        answer["totals"]["cells_by_status"]["ledger_only"].as_u64(),
        Some(cells as u64),
        "{:#}",
        answer["totals"]
    );
    assert_eq!(cells, 10_025, "the figure below");
    assert_eq!(answer["totals"]["ledger_cost_usd"].as_f64(), Some(0.010025));
}

#[test]
fn re_importing_a_window_replaces_it() {
    let dir = ledger_db();
    for source in SOURCES {
        import(dir.path(), source, &fixture(&format!("{source}.json")));
    }
    let first = compared(dir.path());
    let again = import(dir.path(), "openai-usage", &fixture("openai-usage.json"));
    assert!(again.contains("(3 buckets and 3 facts of earlier imports replaced)"), "{again}");
    assert_eq!(compared(dir.path()), first, "the same pages again change nothing");
    // The provider revised its numbers: one more request on the 1st.
    let revised = dir.path().join("revised.json");
    let text = std::fs::read_to_string(fixture("openai-usage.json")).unwrap();
    std::fs::write(
        &revised,
        text.lines().nth(1).unwrap().replace("\"num_model_requests\": 4", "\"num_model_requests\": 5"),
    )
    .unwrap();
    import(dir.path(), "openai-usage", &revised);
    let after = compared(dir.path());
    assert_eq!(cell(&after, "openai", Some("proj_A"), None)["hidden_requests"], 2);
}

#[test]
fn a_bad_page_is_refused_by_path_and_reason_and_nothing_is_stored() {
    let dir = ledger_db();
    let costs = fixture("openai-costs.json");
    let usage_as_costs = fixture("openai-usage.json");
    let out = run(
        &[
            "reconcile",
            "import",
            "--db",
            "r.duckdb",
            "--source",
            "openai-costs",
            costs.to_str().unwrap(),
            usage_as_costs.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}: not openai-costs pages: page 1: data[0]: results[0] is `organization.usage.completions.result`", usage_as_costs.display())), "{err}");
    // The good file was not stored either: an import is all or nothing.
    let answer = compared(dir.path());
    assert_eq!(answer["cells"].as_array().unwrap().len(), 0, "{answer:#}");
    assert_eq!(answer["not_imported"].as_array().unwrap().len(), 3);
    let out = run(
        &["reconcile", "import", "--db", "r.duckdb", "--source", "aws-bill", costs.to_str().unwrap()],
        dir.path(),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(
        "use one of openai-usage, openai-costs, anthropic-usage, anthropic-cost, openrouter-activity"
    ));
    let out = run(&["reconcile", "--db", "r.duckdb", "--tolerance-pct", "101"], dir.path());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tolerance_pct: `101` is not between 0 and 100"));
}

/// The answer of a store that imported `order` (indices into SOURCES,
/// repeats allowed), as JSON.
pub fn answer_after(order: &[usize]) -> Value {
    let store = store_after(order);
    let scope = ReconcileScope {
        since: at("2025-07-31T10:37:00Z"),
        until: at("2025-08-03T00:00:00Z"),
        grain: Grain::Day,
    };
    let rows =
        store.reconcile_rows(&scope, &PriceTable::load(Some(&fixture("prices.toml"))).unwrap()).unwrap();
    let options = Options { tolerance: Tolerance::default(), settled_before: at("2026-01-01T00:00:00Z") };
    serde_json::to_value(reconcile(rows, &scope, options)).unwrap()
}

fn at(t: &str) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339(t).unwrap().with_timezone(&chrono::Utc)
}

/// The ledger fixture and the imports `order` names, in a store.
fn store_after(order: &[usize]) -> Store {
    let store = Store::open_in_memory().unwrap();
    let records = std::fs::read_to_string(fixture("ledger.jsonl")).unwrap();
    let attempts: Vec<_> =
        records.lines().map(|l| attempt_core::ingest::jsonl::decode_line(l).unwrap()).collect();
    store.write_batch(&attempts).unwrap();
    for &i in order {
        let source: BillSource = SOURCES[i].parse().unwrap();
        let text = std::fs::read_to_string(fixture(&format!("{}.json", SOURCES[i]))).unwrap();
        store.import_bill(&read_pages(source, &text).unwrap()).unwrap();
    }
    store
}

#[test]
fn cost_drift_alerts_per_billing_provider_on_settled_cells() {
    use attempt_ledger::alerts::evaluate::evaluate;
    let store = store_after(&[0, 1, 2, 3, 4]);
    let reader = attempt_ledger::read::Reader::new(
        store,
        PriceTable::load(Some(&fixture("prices.toml"))).unwrap().into(),
        attempt_core::policy::LoadedPolicy::default().into(),
    );
    let rules = attempt_core::alert_rules::RuleSet::parse(
        "[[rule]]\nname = \"drift\"\nkind = \"cost_drift\"\nthreshold = 20\nwindow = \"7d\"\n\n\
         [[rule]]\nname = \"openai\"\nkind = \"cost_drift\"\nprovider = \"openai\"\nthreshold = 5\nwindow = \"7d\"\n",
        "test",
    )
    .unwrap();
    let results = evaluate(&reader, &rules.rules, at("2025-08-05T00:00:00Z"));
    let observed = |rule: usize| {
        let mut seen: Vec<(String, String, bool)> = results[rule]
            .outcome
            .as_ref()
            .unwrap()
            .iter()
            .map(|o| (o.labels["provider"].clone(), format!("{:.2}", o.value.unwrap()), o.breaching))
            .collect();
        seen.sort();
        seen
    };
    // anthropic: $0.0174 against $0.0099; openai: $0.002415 against
    // $0.003087 (its unseen project); openrouter: $0.001 against $0.0012.
    let s = |p: &str, v: &str, b: bool| (p.to_string(), v.to_string(), b);
    assert_eq!(
        observed(0),
        [s("anthropic", "75.76", true), s("openai", "21.77", true), s("openrouter", "16.67", false)]
    );
    assert_eq!(observed(1), [s("openai", "21.77", true)]);
    let summary = &results[1].outcome.as_ref().unwrap()[0].summary;
    assert!(
        summary.contains("openai: ledger $0.002415 against a bill of $0.003087 over 2 settled cells"),
        "{summary}"
    );
    // While the day is not settled, nothing is compared: no data, no alert.
    let early = evaluate(&reader, &rules.rules, at("2025-08-02T12:00:00Z"));
    assert!(early[0].outcome.as_ref().unwrap().is_empty());
    let bad = attempt_core::alert_rules::RuleSet::parse(
        "[[rule]]\nname = \"d\"\nkind = \"cost_drift\"\nthreshold = 5\nworkflow = \"x\"\n",
        "test",
    )
    .unwrap_err();
    assert!(bad.to_string().contains("`workflow` does not apply to kind cost_drift"), "{bad}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    #[test]
    fn import_order_and_re_imports_never_change_a_cell(
        order in Just((0..SOURCES.len()).collect::<Vec<_>>()).prop_shuffle(),
        repeats in proptest::collection::vec(0..SOURCES.len(), 0..4),
    ) {
        let mut imports = order.clone();
        imports.extend(repeats);
        prop_assert_eq!(answer_after(&imports), answer_after(&[0, 1, 2, 3, 4]));
    }
}

#[test]
fn the_route_answers_what_the_command_does() {
    let dir = ledger_db();
    for source in SOURCES {
        import(dir.path(), source, &fixture(&format!("{source}.json")));
    }
    let asked = "since=2025-07-31T10:37:00Z&until=2025-08-03&tolerance_usd=0&tolerance_pct=0";
    let from_command = compared(dir.path());
    let prices = fixture("prices.toml");
    let service =
        crate::service::Service::start(&dir.path().join("r.duckdb"), &["--prices", prices.to_str().unwrap()]);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let get = |path: &str| {
        let mut response = agent.get(&format!("{}{path}", service.http)).call().unwrap();
        (response.status().as_u16(), response.body_mut().read_to_string().unwrap())
    };
    let (status, body) = get(&format!("/api/v1/reconcile?{asked}"));
    assert_eq!(status, 200, "{body}");
    let from_route: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(from_route["cells"], from_command["cells"]);
    assert_eq!(from_route["totals"], from_command["totals"]);
    let (status, body) = get("/api/v1/reconcile?grain=week");
    assert_eq!(status, 400);
    assert!(body.contains("grain: `week` is not day or hour"), "{body}");
    // While the service holds the file, the command asks it (and prices
    // with the service's table: a table of its own would be refused).
    let out = Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .env_remove("ATTEMPT_LEDGER_DB")
        .env_remove("ATTEMPT_LEDGER_PRICES")
        .args(["reconcile", "--db", "r.duckdb", "--since", "2025-07-31T10:37:00Z", "--until", "2025-08-03"])
        .args(["--tolerance-usd", "0", "--tolerance-pct", "0", "--format", "json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let asked_service: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(asked_service["cells"], from_command["cells"]);
    let refused = run(&["reconcile", "--db", "r.duckdb"], dir.path());
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--prices cannot apply"));
}

/// A loopback stand-in for the three admin APIs, serving the fixtures as
/// documented pages: OpenAI's usage in two pages behind one 429, Anthropic's
/// usage in two pages, OpenRouter's activity one day at a time. It records
/// each request's path, query and credentials.
pub struct FakeAdminApis {
    pub url: String,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _runtime: tokio::runtime::Runtime,
}

pub const KEY: &str = "sk-admin-test-9f8e7d6c5b4a";

impl FakeAdminApis {
    pub fn start() -> FakeAdminApis {
        Self::start_shifted(0)
    }

    /// The fixtures' days moved `days` later.
    pub fn start_shifted(days: i64) -> FakeAdminApis {
        use axum::extract::{Query, State};
        use axum::http::{HeaderMap, StatusCode};
        use axum::response::IntoResponse;
        type Seen = std::sync::Arc<std::sync::Mutex<Vec<String>>>;
        let seen: Seen = Default::default();
        let page = |name: &str, line: Option<usize>| {
            let text = shifted(&std::fs::read_to_string(fixture(name)).unwrap(), days);
            match line {
                Some(n) => text.lines().nth(n).unwrap().to_string(),
                None => text,
            }
        };
        let openai_usage = (page("openai-usage.json", Some(0)), page("openai-usage.json", Some(1)));
        let openai_costs = page("openai-costs.json", None);
        let anthropic_usage = page("anthropic-usage.json", None)
            .replace("\"has_more\": false", "\"has_more\": true")
            .replace("\"next_page\": null", "\"next_page\": \"page_2\"");
        let anthropic_usage_2 = shifted(
            r#"{"data": [{"starting_at": "2025-08-02T00:00:00Z", "ending_at": "2025-08-03T00:00:00Z", "results": []}], "has_more": false, "next_page": null}"#,
            days,
        );
        let anthropic_cost = page("anthropic-cost.json", None);
        let activity = page("openrouter-activity.json", None);
        let handler = move |State(seen): State<Seen>,
                            uri: axum::http::Uri,
                            headers: HeaderMap,
                            Query(q): Query<Vec<(String, String)>>| {
            let (openai_usage, openai_costs, anthropic_usage, anthropic_usage_2, anthropic_cost, activity) = (
                openai_usage.clone(),
                openai_costs.clone(),
                anthropic_usage.clone(),
                anthropic_usage_2.clone(),
                anthropic_cost.clone(),
                activity.clone(),
            );
            async move {
                let header =
                    |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
                let param = |name: &str| q.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
                let mut log = seen.lock().unwrap();
                log.push(format!(
                    "{} auth={} key={} version={}",
                    uri,
                    header("authorization"),
                    header("x-api-key"),
                    header("anthropic-version")
                ));
                let first_usage_call =
                    log.iter().filter(|l| l.starts_with("/v1/organization/usage")).count() == 1;
                drop(log);
                let bearer = header("authorization") == format!("Bearer {KEY}");
                let anthropic = header("x-api-key") == KEY && header("anthropic-version") == "2023-06-01";
                match uri.path() {
                    "/v1/organization/usage/completions" if bearer && first_usage_call => (
                        StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "1")],
                        "{\"error\": {\"type\": \"rate_limit\"}}".to_string(),
                    )
                        .into_response(),
                    "/v1/organization/usage/completions" if bearer => match param("page").as_deref() {
                        None => openai_usage.0.into_response(),
                        Some("page_AAAAAGdGxdEiJdKOAAAAAGcqsYA=") => openai_usage.1.into_response(),
                        Some(_) => StatusCode::BAD_REQUEST.into_response(),
                    },
                    "/v1/organization/costs" if bearer => openai_costs.into_response(),
                    "/v1/organizations/usage_report/messages" if anthropic => {
                        match param("page").as_deref() {
                            None => anthropic_usage.into_response(),
                            Some("page_2") => anthropic_usage_2.into_response(),
                            Some(_) => StatusCode::BAD_REQUEST.into_response(),
                        }
                    }
                    "/v1/organizations/cost_report" if anthropic => anthropic_cost.into_response(),
                    "/api/v1/activity" if bearer => match param("date") {
                        Some(day) if day == shifted("2025-08-01", days) => activity.into_response(),
                        Some(_) => "{\"data\": []}".to_string().into_response(),
                        None => StatusCode::BAD_REQUEST.into_response(),
                    },
                    _ => (
                        StatusCode::UNAUTHORIZED,
                        format!("{{\"error\": \"bad key {}\"}}", header("x-api-key")),
                    )
                        .into_response(),
                }
            }
        };
        let app = axum::Router::new().fallback(handler).with_state(seen.clone());
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(async move { axum::serve(listener, app).await });
        FakeAdminApis { url, seen, _runtime: runtime }
    }
}

fn fetch_cmd(dir: &Path, provider: &str, url: &str, key: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_attempt-ledger"));
    cmd.env_remove("ATTEMPT_LEDGER_DB").env("ATTEMPT_LEDGER_LOG", "debug");
    for variable in ["OPENAI_ADMIN_KEY", "ANTHROPIC_ADMIN_KEY", "OPENROUTER_API_KEY"] {
        cmd.env_remove(variable);
        if let Some(key) = key {
            cmd.env(variable, key);
        }
    }
    cmd.args([
        "reconcile",
        "fetch",
        "--db",
        "r.duckdb",
        "--source",
        provider,
        "--since",
        "2025-07-31T10:37:00Z",
    ])
    .args(["--until", "2025-08-03", "--base-url", url])
    .current_dir(dir)
    .output()
    .unwrap()
}

#[test]
fn fetch_pages_through_each_admin_api_and_imports_what_import_would() {
    let api = FakeAdminApis::start();
    let dir = ledger_db();
    let mut logs = String::new();
    for provider in ["openai", "anthropic", "openrouter"] {
        let out = fetch_cmd(dir.path(), provider, &api.url, Some(KEY));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{provider}: {stderr}");
        logs += &stderr;
        logs += &String::from_utf8_lossy(&out.stdout);
    }
    assert!(logs.contains("openai-usage: 2 pages in 3 requests (1 answered 429)"), "{logs}");
    assert!(logs.contains("anthropic-usage: 2 pages in 2 requests"), "{logs}");
    assert!(logs.contains("openrouter-activity: 3 pages in 3 requests"), "{logs}");
    let fetched = compared(dir.path());
    // The same cells as importing the same pages by hand (OpenRouter's and
    // Anthropic's fetched days beyond the fixtures are covered and empty).
    let by_hand = ledger_db();
    for source in SOURCES {
        import(by_hand.path(), source, &fixture(&format!("{source}.json")));
    }
    assert_eq!(fetched["cells"], compared(by_hand.path())["cells"]);
    let seen = api.seen.lock().unwrap().join("\n");
    assert!(seen.contains("group_by=line_item"), "{seen}");
    assert!(
        seen.contains("group_by%5B%5D=workspace_id") || seen.contains("group_by[]=workspace_id"),
        "{seen}"
    );
    assert!(seen.contains("date=2025-07-31") && seen.contains("date=2025-08-02"), "{seen}");
    // The key went only into the requests' headers.
    assert!(!logs.contains(KEY), "a log shows the key");
    let db = std::fs::read(dir.path().join("r.duckdb")).unwrap();
    assert!(!db.windows(KEY.len()).any(|w| w == KEY.as_bytes()), "the database holds the key");
}

#[test]
fn fetch_without_a_key_or_with_a_refused_one_says_so_without_the_key() {
    let api = FakeAdminApis::start();
    let dir = ledger_db();
    let out = fetch_cmd(dir.path(), "anthropic", &api.url, None);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no key: set ANTHROPIC_ADMIN_KEY"));
    let wrong = "sk-admin-wrong-1234567890";
    let out = fetch_cmd(dir.path(), "anthropic", &api.url, Some(wrong));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("HTTP 401") && err.contains("bad key [key]"), "{err}");
    assert!(!err.contains(wrong), "{err}");
    let out = fetch_cmd(dir.path(), "openai", "ftp://example", Some(KEY));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an http:// or https:// address"));
}

/// `text` with the fixtures' days (as dates and as Unix seconds) moved
/// `days` later.
fn shifted(text: &str, days: i64) -> String {
    let mut out = text.to_string();
    for (day, seconds) in [
        ("2025-07-31", 1_753_920_000i64),
        ("2025-08-01", 1_754_006_400),
        ("2025-08-02", 1_754_092_800),
        ("2025-08-03", 1_754_179_200),
    ] {
        let moved =
            chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d").unwrap() + chrono::Duration::days(days);
        out = out.replace(day, &format!("@{moved}@"));
        out = out.replace(&seconds.to_string(), &format!("@{}@", seconds + days * 86_400));
    }
    // The partial bucket's start, 10:37 on the first day.
    out = out.replace("1753958220", &format!("@{}@", 1_753_958_220 + days * 86_400));
    out.replace('@', "")
}

#[test]
fn serve_fetches_on_a_schedule_and_shows_each_providers_last_settled_day() {
    // The fixtures' day moved to three days ago: settled.
    let fixture_day = chrono::NaiveDate::from_ymd_opt(2025, 8, 1).unwrap();
    let days = (chrono::Utc::now().date_naive() - fixture_day).num_days() - 3;
    let api = FakeAdminApis::start_shifted(days);
    let dir = tempfile::tempdir().unwrap();
    let ledger = shifted(&std::fs::read_to_string(fixture("ledger.jsonl")).unwrap(), days);
    std::fs::write(dir.path().join("ledger.jsonl"), ledger).unwrap();
    ok(&["ingest", "--db", "r.duckdb", "ledger.jsonl"], dir.path());
    let urls: Vec<String> =
        ["openai", "anthropic", "openrouter"].iter().map(|p| format!("{p}={}", api.url)).collect();
    let prices = fixture("prices.toml");
    let mut flags =
        vec!["--reconcile-every", "1m", "--reconcile-look-back", "7d", "--prices", prices.to_str().unwrap()];
    for url in &urls {
        flags.extend(["--reconcile-base-url", url.as_str()]);
    }
    let keys = [("OPENAI_ADMIN_KEY", KEY), ("ANTHROPIC_ADMIN_KEY", KEY), ("OPENROUTER_API_KEY", KEY)];
    let service = crate::service::ServiceProcess::start_with_env(&dir.path().join("r.duckdb"), &flags, &keys);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let get = |path: &str| {
        agent.get(&format!("{}{path}", service.http)).call().unwrap().body_mut().read_to_string().unwrap()
    };
    let mut metrics = String::new();
    crate::wait_for("the first run's drift in /metrics", std::time::Duration::from_secs(60), || {
        metrics = get("/metrics");
        metrics.contains("attempt_ledger_bill_drift_usd{provider=\"openrouter\"}")
    });
    // OpenAI's day: $0.002415 recorded against $0.003087 billed.
    assert!(metrics.contains("attempt_ledger_bill_drift_usd{provider=\"openai\"} -0.000672"), "{metrics}");
    assert!(metrics.contains("attempt_ledger_bill_drift_usd{provider=\"anthropic\"} 0.0075"), "{metrics}");
    assert!(metrics.contains("attempt_ledger_bill_fetches_total 5"), "{metrics}");
    let answer: Value =
        serde_json::from_str(&get("/api/v1/reconcile?since=10d&tolerance_usd=0&tolerance_pct=0")).unwrap();
    let proj_a = answer["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["billing_account"] == "proj_A" && c["status"] != "partial")
        .unwrap();
    assert_eq!(money(&proj_a["drift_usd"]), 0.000378, "{proj_a:#}");
    drop(service);
}

#[test]
fn the_dashboard_page_shows_the_cells_by_drift_and_their_causes() {
    let dir = ledger_db();
    for source in SOURCES {
        import(dir.path(), source, &fixture(&format!("{source}.json")));
    }
    let prices = fixture("prices.toml");
    let service =
        crate::service::Service::start(&dir.path().join("r.duckdb"), &["--prices", prices.to_str().unwrap()]);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent
        .get(&format!("{}/reconcile?since=2025-08-01T06:00:00Z&until=2025-08-01T18:00:00Z", service.http))
        .call()
        .unwrap();
    assert_eq!(response.status(), 200);
    let page = response.body_mut().read_to_string().unwrap();
    // The range widened to the whole day: the day's five cells, largest
    // drift first (Anthropic's priority tier, billed nothing).
    assert_eq!(page.matches("<tr data-cell=").count(), 5, "{page}");
    let first = page.find("<tr data-cell=").unwrap();
    assert!(
        page[first..].starts_with(
            "<tr data-cell=\"anthropic|2025-08-01T00:00:00Z|wrkspc_1|claude-sonnet-4|priority\""
        ),
        "{page}"
    );
    assert!(
        page.contains("href=\"/attempts?since=2025-08-01T00%3A00%3A00Z&amp;until=2025-08-02T00%3A00%3A00Z\""),
        "{page}"
    );
    for cause in ["unbilled_failures", "emitter_cost", "price"] {
        assert!(page.contains(&format!("<rect data-cause=\"{cause}\"")), "{cause}: {page}");
    }
    assert!(page.contains("data-legend=\"tokens\""));
    assert!(page.contains("web search tool calls"), "other costs are shown apart");
    assert!(page.contains("aria-current=\"page\">reconcile</a>"));
}
