//! The price table as the bill charges (docs/prices.md): the shipped table
//! is the pinned LiteLLM map converted, LiteLLM's own calculator agrees with
//! the ledger on every price it states, a later entry never reprices the
//! past, and the `prices` commands answer as documented.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::{python, rec};
use attempt_core::ingest::jsonl;
use attempt_core::pricing::PriceTable;
use attempt_core::providers::ProviderAliases;
use attempt_core::request::ReportFilter;
use attempt_ledger::store::{Query, Store};

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn cli(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .env_remove("ATTEMPT_LEDGER_DB")
        .env_remove("ATTEMPT_LEDGER_PRICES")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Each workflow name's known cost, pico-USD.
fn costs_by_workflow(store: &Store, prices: &PriceTable) -> BTreeMap<String, i128> {
    let rows = store.report_rows_of(&ReportFilter::default(), prices, &[Query::Outcomes]).unwrap();
    rows.outcomes
        .into_iter()
        .filter(|r| !r.is_total)
        .map(|r| (r.workflow_name.unwrap(), r.cost_pusd))
        .collect()
}

/// The known cost and the unknown-cost attempts of the workflows that
/// started before `until`.
fn cost_before(store: &Store, prices: &PriceTable, until: chrono::DateTime<chrono::Utc>) -> (i128, i64) {
    let filter = ReportFilter { until: Some(until), ..ReportFilter::default() };
    let waste = store.report_rows_of(&filter, prices, &[Query::Waste]).unwrap().waste;
    (waste.cost_pusd, waste.unknown_cost_attempts)
}

fn store_of(lines: &[String]) -> Store {
    let store = Store::open_in_memory().unwrap();
    let decoded = jsonl::decode_lines(&lines.join("\n"), 1);
    assert!(decoded.rejections.is_empty(), "{:?}", decoded.rejections.first());
    store.write_batch(&decoded.attempts).unwrap();
    store
}

/// The committed table is what scripts/prices.sh makes of the pinned map:
/// nobody edits prices/prices.toml by hand.
#[test]
fn the_shipped_table_is_the_pinned_map_converted() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("prices.toml");
    let python = python().get_program().to_owned();
    let run = Command::new(repo("scripts/prices.sh"))
        .args(["--out", out.to_str().unwrap()])
        .env("ATTEMPT_LEDGER_BIN", env!("CARGO_BIN_EXE_attempt-ledger"))
        .env("ATTEMPT_LEDGER_TEST_PYTHON", python)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let converted = std::fs::read_to_string(&out).unwrap();
    let shipped = std::fs::read_to_string(repo("prices/prices.toml")).unwrap();
    assert!(
        converted == shipped,
        "prices/prices.toml is not the pinned map's conversion: run scripts/prices.sh and review the diff"
    );
    // What the conversion could not state is said, with counts.
    let notes = String::from_utf8_lossy(&run.stderr);
    assert!(notes.contains("entries read") && notes.contains("not stated"), "{notes}");
}

/// LiteLLM's own cost calculator (the pinned `litellm` package) and the
/// ledger under the shipped table agree to the pico-dollar, save where a
/// provider's page corrects the map, on a seeded
/// sample of every provider's models, each tier, prompt size and kind of
/// token LiteLLM states a price for (tests/python/price_agreement.py says
/// which it leaves out and why).
#[test]
fn litellm_agrees_on_every_price_it_defines() {
    let dir = tempfile::tempdir().unwrap();
    let cases_path = dir.path().join("cases.jsonl");
    let seed = 1;
    let generated = python()
        .arg(repo("tests/python/price_agreement.py"))
        .args(["--seed", &seed.to_string(), "--per-provider", "6", "--out", cases_path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(generated.status.success(), "{}", String::from_utf8_lossy(&generated.stderr));
    let aliases = ProviderAliases::builtin();
    let table = PriceTable::builtin();
    // Where a provider's page corrects the map (prices/corrections.toml),
    // the ledger follows the page: those entries are checked against it in
    // attempt-core's tests instead.
    let today = chrono::Utc::now().date_naive();
    let corrected = |c: &Value| {
        let provider = aliases.canonical(c["provider"].as_str().unwrap());
        PriceTable::corrections().entry_at(&provider, c["model"].as_str().unwrap(), today).is_some()
    };
    let all: Vec<Value> = std::fs::read_to_string(&cases_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|c| aliases.knows(c["provider"].as_str().unwrap()))
        .collect();
    let (skipped, cases): (Vec<Value>, Vec<Value>) = all.into_iter().partition(corrected);
    eprintln!("{} cases of corrected entries left to the corrections' own test", skipped.len());
    let mut providers_seen = std::collections::BTreeSet::new();
    let mut disagreements = Vec::new();
    let mut compared = 0;
    // Workflow names are kept apart up to the label limit: a store per
    // 900 cases.
    for (chunk, cases) in cases.chunks(900).enumerate() {
        let lines: Vec<String> = cases
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let tier = c["tier"].as_str().unwrap();
                let mut fields = json!({
                    "workflow_id": format!("case-{chunk}-{i}"),
                    "workflow": format!("case-{chunk}-{i}"),
                    "provider": c["provider"],
                    "model": c["model"],
                    "input_tokens": c["input_tokens"],
                    "cached_input_tokens": c["cached_input_tokens"],
                    "cache_write_input_tokens": c["cache_write_input_tokens"],
                    "cache_write_1h_input_tokens": c["cache_write_1h_input_tokens"],
                    "output_tokens": c["output_tokens"],
                    "reasoning_output_tokens": c["reasoning_output_tokens"],
                    "web_search_requests": c["web_search_requests"],
                });
                match tier {
                    "batch" => fields["batch"] = json!(true),
                    "standard" => {}
                    tier => fields["service_tier"] = json!(tier),
                }
                rec(fields)
            })
            .collect();
        let store = store_of(&lines);
        let ours = costs_by_workflow(&store, &table);
        for (i, case) in cases.iter().enumerate() {
            let name = format!("case-{chunk}-{i}");
            let cost = ours[&name];
            let usd: f64 = case["litellm_usd"].as_str().unwrap().parse().unwrap();
            let theirs = (usd * 1e12).round() as i128;
            providers_seen.insert(aliases.canonical(case["provider"].as_str().unwrap()));
            compared += 1;
            if cost != theirs {
                disagreements.push(format!("{case} -> ledger {cost} pico-USD, LiteLLM {theirs}"));
            }
        }
    }
    assert!(compared > 500, "only {compared} cases");
    assert!(
        disagreements.is_empty(),
        "{} of {compared} disagree (seed {seed}):\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    // Every provider of the shipped table was sampled.
    let shipped: std::collections::BTreeSet<String> =
        table.entry_names().map(|(p, _)| p.to_string()).collect();
    let missed: Vec<&String> = shipped.difference(&providers_seen).collect();
    assert!(missed.is_empty(), "providers never sampled: {missed:?}");
}

const LAB: &str = r#"
[[provider]]
name = "lab"
models = [
  { model = "m", input = 2.0, cached_input = 0.5, cache_write = 2.5, cache_write_1h = 4.0, output = 8.0, web_search = 0.01 },
  { model = "m", above_input_tokens = 200000, input = 4.0, cached_input = 1.0, cache_write = 5.0, cache_write_1h = 8.0, output = 12.0, web_search = 0.01 },
  { model = "m", tier = "flex", input = 1.0, cached_input = 0.25, output = 4.0 },
  { model = "m", tier = "batch", input = 1.0, cached_input = 0.25, cache_write = 1.25, output = 4.0 },
]

[[discount]]
provider = "lab"
billing_account = "acct-1"
multiplier = 0.8
"#;

fn lab() -> PriceTable {
    let mut table = PriceTable::builtin();
    table.merge(LAB, "lab.toml").unwrap();
    table
}

/// A workflow of one attempt on `day` (0..30 of November 2026) with the
/// usage and tier drawn.
fn attempt_line(
    i: usize,
    day: u32,
    input: i64,
    kinds: (u8, u8, u8),
    tier: u8,
    account: bool,
    output: i64,
) -> String {
    let (cached_pct, written_pct, one_hour) = kinds;
    let cached = input * i64::from(cached_pct) / 200;
    let written = (input - cached) * i64::from(written_pct) / 200;
    let mut fields = json!({
        "workflow_id": format!("w{i}"),
        "workflow": format!("w{i}"),
        "started_at": format!("2026-11-{:02}T{:02}:00:00Z", day + 1, i % 24),
        "provider": "lab",
        "model": "m",
        "input_tokens": input,
        "cached_input_tokens": cached,
        "cache_write_input_tokens": written,
        "cache_write_1h_input_tokens": if one_hour > 0 { written / 2 } else { 0 },
        "output_tokens": output,
        "web_search_requests": i64::from(one_hour % 3),
    });
    match tier {
        1 => fields["service_tier"] = json!("flex"),
        2 => fields["batch"] = json!(true),
        _ => {}
    }
    if account {
        fields["billing_account"] = json!("acct-1");
    }
    rec(fields)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A price cut or an introductory price's end never rewrites history:
    /// an entry with a later `since` leaves the cost of every attempt that
    /// started before it, known or unknown, as it was, whatever tiers,
    /// prompt sizes, kinds and accounts they used.
    #[test]
    fn an_entry_with_a_later_since_never_changes_an_earlier_cost(
        attempts in prop::collection::vec(
            (0u32..30, 1_000i64..400_000, (0u8..100, 0u8..100, 0u8..3), 0u8..3, any::<bool>(), 1i64..5_000),
            1..40,
        ),
        since_day in 1u32..30,
        price in 0.0f64..20.0,
        drop_kind in any::<bool>(),
    ) {
        let lines: Vec<String> = attempts
            .iter()
            .enumerate()
            .map(|(i, &(day, input, kinds, tier, account, output))| attempt_line(i, day, input, kinds, tier, account, output))
            .collect();
        let store = store_of(&lines);
        let before = lab();
        let mut after = before.clone();
        let price = (price * 1000.0).round() / 1000.0;
        // The later entry replaces the whole entry: it may state fewer kinds
        // and no tiers at all.
        let cached = if drop_kind { String::new() } else { format!(", cached_input = {price:?}") };
        after.merge(&format!(
            "[[provider]]\nname = \"lab\"\nmodels = [{{ model = \"m\", since = \"2026-11-{:02}\", input = {price:?}, output = {price:?}{cached} }}]\n\
             [[discount]]\nprovider = \"lab\"\nsince = \"2026-11-{:02}\"\nmultiplier = 0.5\n",
            since_day + 1, since_day + 1
        ), "later.toml").unwrap();
        // Every workflow is one attempt, its start its first attempt's.
        let until = chrono::NaiveDate::from_ymd_opt(2026, 11, since_day + 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc();
        prop_assert_eq!(cost_before(&store, &before, until), cost_before(&store, &after, until));
        // And workflow by workflow.
        let (old, new) = (costs_by_workflow(&store, &before), costs_by_workflow(&store, &after));
        for (i, &(day, ..)) in attempts.iter().enumerate() {
            if day < since_day {
                let name = format!("w{i}");
                prop_assert_eq!(old[&name], new[&name], "{}", lines[i]);
            }
        }
    }
}

/// The same holds for a report over the attempt lake (`report --lake`):
/// the lake's reader prices with the rule of the database.
#[test]
fn a_later_entry_leaves_the_lakes_earlier_costs() {
    let dir = tempfile::tempdir().unwrap();
    // Every attempt has a price under both tables (flex and batch rows
    // state no cache writes or searches, so those attempts use none), so
    // a cost that does not move is the rule working, not two unknowns.
    let lines: Vec<String> = (0..30)
        .map(|i| {
            let tier = (i % 3) as u8;
            let kinds = if tier == 0 { (40, 30, 1 + (i % 2) as u8) } else { (40, 0, 0) };
            attempt_line(i, i as u32, 1_000 + 10_000 * i as i64, kinds, tier, i % 2 == 0, 700)
        })
        .collect();
    std::fs::write(dir.path().join("a.jsonl"), lines.join("\n") + "\n").unwrap();
    std::fs::write(dir.path().join("lab.toml"), LAB).unwrap();
    let later = |tier: &str| {
        format!(
            "{{ model = \"m\", since = \"2026-11-16\", tier = \"{tier}\", input = 9.0, cached_input = 9.0, cache_write = 9.0, \
             cache_write_1h = 9.0, output = 9.0, web_search = 0.09 }}"
        )
    };
    std::fs::write(
        dir.path().join("later.toml"),
        format!(
            "{LAB}\n[[provider]]\nname = \"lab\"\nmodels = [{}, {}, {}]\n",
            later("standard"),
            later("flex"),
            later("batch")
        ),
    )
    .unwrap();
    let ok = |args: &[&str]| {
        let out = cli(args, dir.path());
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)
    };
    ok(&["ingest", "--db", "l.duckdb", "a.jsonl"]);
    ok(&["export", "--db", "l.duckdb", "--lake", "lake", "--node-id", "n1"]);
    let by_workflow = |report: &Value| -> BTreeMap<String, f64> {
        report["by_workflow"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| (w["workflow"].as_str().unwrap().to_string(), w["cost_usd"].as_f64().unwrap()))
            .collect()
    };
    for source in [["--db", "l.duckdb"], ["--lake", "lake"]] {
        let mut args = vec!["report"];
        args.extend(source);
        args.extend(["--format", "json", "--no-audit", "--prices"]);
        let old = by_workflow(&ok(&[args.clone(), vec!["lab.toml"]].concat()));
        let new = by_workflow(&ok(&[args, vec!["later.toml"]].concat()));
        for i in 0..30 {
            let name = format!("w{i}");
            if i < 15 {
                assert_eq!(old[&name], new[&name], "{source:?} {name}");
            } else {
                assert_ne!(old[&name], new[&name], "{source:?} {name}: the later entry prices it");
            }
        }
    }
}

/// `prices check` lists what the attempts needed and the table lacked, by
/// reason, and exits 5; `prices show` prints the entry in force on a day.
#[test]
fn the_prices_commands_say_what_is_missing_and_what_prices_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        rec(json!({"workflow_id": "a", "model": "gpt-4o-mini", "input_tokens": 100, "output_tokens": 10})),
        rec(
            json!({"workflow_id": "b", "provider": "acme", "model": "in-house", "input_tokens": 100, "output_tokens": 10}),
        ),
        rec(
            json!({"workflow_id": "c", "model": "gpt-4o-mini", "service_tier": "scale", "input_tokens": 100, "output_tokens": 10}),
        ),
        rec(
            json!({"workflow_id": "d", "model": "gpt-4o-mini", "input_tokens": 100, "cache_write_input_tokens": 50, "output_tokens": 10}),
        ),
        rec(
            json!({"workflow_id": "f", "model": "gpt-4o-mini", "input_tokens": 90, "cache_write_input_tokens": 50, "output_tokens": 10}),
        ),
        rec(
            json!({"workflow_id": "e", "provider": "aws.bedrock", "model": "ca.anthropic.claude-sonnet-4-5-20250929-v1:0",
                   "input_tokens": 100, "output_tokens": 10}),
        ),
    ];
    std::fs::write(dir.path().join("a.jsonl"), lines.join("\n") + "\n").unwrap();
    assert!(cli(&["ingest", "--db", "p.duckdb", "a.jsonl"], dir.path()).status.success());
    let out = cli(&["prices", "check", "--db", "p.duckdb", "--format", "json"], dir.path());
    assert_eq!(out.status.code(), Some(5), "{}", String::from_utf8_lossy(&out.stderr));
    let check: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gaps: Vec<(String, String, String)> = check["unpriced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let kinds =
                g["kinds"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect::<Vec<_>>();
            (
                g["served_model"].as_str().unwrap().into(),
                g["reason"].as_str().unwrap().into(),
                kinds.join(","),
            )
        })
        .collect();
    let gap = |m: &str, r: &str, k: &str| (m.to_string(), r.to_string(), k.to_string());
    // Most attempts first; a tie (one attempt, 110 tokens each) by
    // provider: acme before openai.
    assert_eq!(
        gaps,
        [
            gap("gpt-4o-mini", "no_kind_price", "cache_write"),
            gap("in-house", "no_price", ""),
            gap("gpt-4o-mini", "no_tier_price", "")
        ]
    );
    assert_eq!(check["unpriced"][0]["attempts"], 2);
    assert_eq!(check["region_dropped"][0]["served_model"], "ca.anthropic.claude-sonnet-4-5-20250929-v1:0");
    assert_eq!(check["attempts_checked"], 6);
    // The report counts the same attempts by the same reasons.
    let report = cli(&["report", "--db", "p.duckdb", "--format", "json", "--no-audit"], dir.path());
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(
        report["cost_usd"]["unknown_cost_reasons"],
        json!({"no_usage": 0, "other_currency": 0, "no_price": 1, "no_tier_price": 1, "no_kind_price": 2})
    );
    assert_eq!(report["cost_usd"]["region_unpriced_attempts"], 1);
    // With the missing prices in a file of one's own, nothing is missing.
    std::fs::write(
        dir.path().join("mine.toml"),
        "[[provider]]\nname = \"acme\"\nmodels = [{ model = \"in-house\", input = 1.0, output = 2.0 }]\n\
         [[provider]]\nname = \"openai\"\nmodels = [\n\
           { model = \"gpt-4o-mini\", input = 0.15, cached_input = 0.075, cache_write = 0.15, output = 0.6 },\n\
           { model = \"gpt-4o-mini\", tier = \"scale\", input = 0.15, cached_input = 0.075, output = 0.6 },\n]\n",
    )
    .unwrap();
    let out = cli(&["prices", "check", "--db", "p.duckdb", "--prices", "mine.toml"], dir.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Nothing unpriced"));
    // The report names the day each served provider's prices were read,
    // and warns when that is past 90 days.
    std::fs::write(
        dir.path().join("old.toml"),
        "[[provider]]\nname = \"acme\"\nas_of = \"2025-01-02\"\nmodels = [{ model = \"in-house\", input = 1.0, output = 2.0 }]\n",
    )
    .unwrap();
    let old = cli(&["report", "--db", "p.duckdb", "--no-audit", "--prices", "old.toml"], dir.path());
    assert!(old.status.success());
    let warned = String::from_utf8_lossy(&old.stderr);
    assert!(warned.contains("acme was priced with prices as of 2025-01-02"), "{warned}");
    let shown = String::from_utf8_lossy(&old.stdout);
    assert!(shown.contains("prices as of") && shown.contains("2025-01-02"), "{shown}");

    let show = cli(
        &["prices", "show", "Gemini", "gemini-2.5-pro", "--at", "2026-12-01", "--format", "json"],
        dir.path(),
    );
    let shown: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(shown["provider"], "gcp.gemini", "any spelling the alias table knows");
    let long = shown["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tier"] == "standard" && r["above_input_tokens"] == 200000);
    assert_eq!(long.unwrap()["input"], 2.5);
    let missing = cli(&["prices", "show", "openai", "no-such-model"], dir.path());
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no entry prices openai/no-such-model"));
}

/// `prices import --from openrouter` writes a file every command reads.
#[test]
fn an_openrouter_models_answer_imports_into_a_price_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("models.json"),
        r#"{"data": [{"id": "openai/gpt-4o-mini", "pricing": {"prompt": "0.00000015", "completion": "0.0000006",
            "request": "0", "input_cache_read": "0.000000075"}},
           {"id": "perplexity/sonar", "pricing": {"prompt": "0.000001", "completion": "0.000001", "request": "0.005"}}]}"#,
    )
    .unwrap();
    let out = cli(
        &[
            "prices",
            "import",
            "--from",
            "openrouter",
            "models.json",
            "--out",
            "or.toml",
            "--as-of",
            "2026-12-01",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let notes = String::from_utf8_lossy(&out.stderr);
    assert!(notes.contains("2 entries read, 1 converted") && notes.contains("per-request fee"), "{notes}");
    let file = std::fs::read_to_string(dir.path().join("or.toml")).unwrap();
    assert!(
        file.contains("{ model = \"openai/gpt-4o-mini\", input = 0.15, cached_input = 0.075, output = 0.6 }"),
        "{file}"
    );
    let show =
        cli(&["prices", "show", "openrouter", "openai/gpt-4o-mini", "--prices", "or.toml"], dir.path());
    assert!(show.status.success(), "{}", String::from_utf8_lossy(&show.stderr));
    let bad = cli(&["prices", "import", "--from", "litellm", "or.toml"], dir.path());
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("not JSON"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// The requests of issue 60's table, each sent as a user sends it (a JSONL
/// file, ingested, then the report): every one charged what its provider
/// bills, in dollars, through the shipped table and the stored attempts.
#[test]
fn each_request_is_charged_what_its_provider_bills() {
    let dir = tempfile::tempdir().unwrap();
    let million = json!({"input_tokens": 1_000_000, "output_tokens": 1_000_000});
    let small = json!({"input_tokens": 1_000, "output_tokens": 100});
    let with = |workflow: &str, base: &Value, extra: Value| {
        let mut fields = base.clone();
        for (key, value) in extra.as_object().unwrap() {
            fields[key] = value.clone();
        }
        fields["workflow_id"] = json!(workflow);
        fields["workflow"] = json!(workflow);
        rec(fields)
    };
    // (workflow, what the provider bills in USD, attempts): a million
    // tokens spread over requests of 50,000 tokens of prompt are priced
    // below every long-context threshold, as the bill's per-million figures
    // are stated.
    let spread = |workflow: &str, provider: &str, model: &str, per: Value| -> Vec<String> {
        (0..20)
            .map(|i| {
                let mut line: Value = serde_json::from_str(&with(
                    workflow,
                    &json!({"provider": provider, "model": model}),
                    per.clone(),
                ))
                .unwrap();
                line["attempt_id"] = json!(format!("{workflow}-{i}"));
                line.to_string()
            })
            .collect()
    };
    let mut lines = vec![
        with("gpt-5 flex", &million, json!({"model": "gpt-5", "service_tier": "flex"})),
        with("gpt-5 batch", &million, json!({"model": "gpt-5", "batch": true})),
        with("gpt-5 priority", &million, json!({"model": "gpt-5", "service_tier": "priority"})),
        with(
            "gemini-2.5-pro 250k prompt",
            &json!({}),
            json!({"provider": "gemini", "model": "gemini-2.5-pro", "input_tokens": 250_000, "output_tokens": 2_000}),
        ),
        // Ten web searches on top of the call's tokens (a success that
        // states searches but no tokens has unknown cost: its tokens were
        // used and not reported).
        with("openai 10 searches", &small, json!({"model": "gpt-5", "web_search_requests": 10})),
        with(
            "anthropic 10 searches",
            &small,
            json!({"provider": "anthropic", "model": "claude-sonnet-4-5", "web_search_requests": 10}),
        ),
    ];
    let one_hour = json!({"input_tokens": 50_000, "cache_write_input_tokens": 50_000,
                          "cache_write_1h_input_tokens": 50_000});
    lines.extend(spread("sonnet-4.5 1h cache writes", "anthropic", "claude-sonnet-4-5", one_hour));
    let five_minutes = json!({"input_tokens": 50_000, "cache_write_input_tokens": 50_000});
    lines.extend(spread("vertex sonnet-4.5 5m cache writes", "vertex_ai", "claude-sonnet-4-5", five_minutes));
    let half = json!({"input_tokens": 50_000, "output_tokens": 50_000});
    for profile in ["us", "au", "jp"] {
        let model = format!("{profile}.anthropic.claude-sonnet-4-5-20250929-v1:0");
        lines.extend(spread(&format!("bedrock {profile}."), "bedrock", &model, half.clone()));
    }
    let tenth = json!({"input_tokens": 100_000, "output_tokens": 10_000});
    let current = [
        ("anthropic", "claude-sonnet-4-6", "0.45"),
        ("openai", "gpt-5.2", "0.315"),
        ("gemini", "gemini-3-pro-preview", "0.32"),
        ("deepseek", "deepseek-chat", "0.0322"),
        ("mistral", "mistral-large-latest", "0.065"),
        ("xai", "grok-4.20", "0.15"),
        ("groq", "openai/gpt-oss-120b", "0.021"),
    ];
    for (provider, model, _) in current {
        let mut line: Value =
            serde_json::from_str(&with(model, &tenth, json!({"provider": provider, "model": model})))
                .unwrap();
        if model == "gemini-3-pro-preview" {
            // Sold from 2025-11-18 to 2026-03-09: its months still need a price.
            line["started_at"] = json!("2026-02-10T10:00:00Z");
        }
        lines.push(line.to_string());
    }
    // A price cut entered for 2026-11-29 on: the attempt of the day before
    // keeps the old price.
    lines.push(with("gpt-5 before the cut", &million, json!({"model": "gpt-5"})));
    lines.push(with(
        "gpt-5 after the cut",
        &million,
        json!({"model": "gpt-5", "started_at": "2026-11-30T02:00:00Z"}),
    ));
    std::fs::write(dir.path().join("a.jsonl"), lines.join("\n") + "\n").unwrap();
    std::fs::write(
        dir.path().join("cut.toml"),
        "[[provider]]\nname = \"openai\"\nmodels = [\n  { model = \"gpt-5\", since = \"2026-11-29\", input = 1.0, output = 8.0 },\n]\n",
    )
    .unwrap();
    let ingest = cli(&["ingest", "--db", "p.duckdb", "a.jsonl"], dir.path());
    assert!(ingest.status.success(), "{}", String::from_utf8_lossy(&ingest.stderr));
    let out = cli(
        &["report", "--db", "p.duckdb", "--format", "json", "--no-audit", "--prices", "cut.toml"],
        dir.path(),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let charged: BTreeMap<String, String> = report["by_workflow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["workflow"].as_str().unwrap().to_string(), w["cost_usd"].to_string()))
        .collect();
    let mut billed = vec![
        ("gpt-5 flex", "5.625"),
        ("gpt-5 batch", "5.625"),
        ("gpt-5 priority", "22.5"),
        ("gemini-2.5-pro 250k prompt", "0.655"),
        ("sonnet-4.5 1h cache writes", "6.0"),
        ("vertex sonnet-4.5 5m cache writes", "3.75"),
        ("bedrock us.", "19.8"),
        ("bedrock au.", "19.8"),
        ("bedrock jp.", "19.8"),
        // $0.00225 and $0.0045 of tokens, and $0.10 of searches.
        ("openai 10 searches", "0.10225"),
        ("anthropic 10 searches", "0.1045"),
        ("gpt-5 before the cut", "11.25"),
        ("gpt-5 after the cut", "9.0"),
    ];
    billed.extend(current.iter().map(|(_, model, usd)| (*model, *usd)));
    for (workflow, usd) in billed {
        assert_eq!(charged.get(workflow).map(String::as_str), Some(usd), "{workflow}: {charged:?}");
    }
    assert_eq!(report["cost_usd"]["unknown_cost_attempts"], 0, "{}", report["cost_usd"]);
}
