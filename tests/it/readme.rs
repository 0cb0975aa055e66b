//! The commands of the README and of `docs/`, run verbatim: a page that lies fails here.

use std::process::Command;

use crate::FIXTURE;

/// The pages whose `sh` blocks run, in the order a reader meets them: the
/// README, then the reference in `docs/`. Later pages may use what earlier
/// ones made (the README's `ledger.duckdb`).
const PAGES: [&str; 16] = [
    "README.md",
    "docs/testing.md",
    "docs/ingest.md",
    "docs/audit.md",
    "docs/tuning.md",
    "docs/service.md",
    "docs/alerts.md",
    "docs/metrics.md",
    "docs/dashboard.md",
    "docs/performance.md",
    "docs/lake.md",
    "docs/scale-out.md",
    "docs/record-format.md",
    "docs/reconcile.md",
    "docs/emitters.md",
    "docs/prices.md",
];

fn page(name: &str) -> String {
    std::fs::read_to_string(format!("{}/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// Every line of a page's `sh` blocks that runs `attempt-ledger` (or pipes
/// into it), without trailing comments.
fn commands_of(text: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    for line in text.lines() {
        match line.trim() {
            "```sh" => in_sh = true,
            "```" => in_sh = false,
            // `serve` runs until stopped: tests/it/service.rs starts it.
            text if text.starts_with("attempt-ledger serve") => {}
            text if in_sh && text.contains("attempt-ledger ") && !text.starts_with("cargo ") => {
                commands.push(text.split(" #").next().unwrap_or(text).trim().to_string());
            }
            _ => {}
        }
    }
    commands
}

/// Every page of `docs/` is in `PAGES`, so a new page's commands run too.
#[test]
fn every_page_of_the_docs_is_run() {
    let dir = format!("{}/docs", env!("CARGO_MANIFEST_DIR"));
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            assert!(PAGES.contains(&format!("docs/{name}").as_str()), "docs/{name} is not in PAGES");
        }
    }
}

#[test]
fn the_readme_commands_work_as_written() {
    let readme = commands_of(&page("README.md"));
    assert!(readme.len() >= 6, "found {readme:?}");
    let commands: Vec<String> = PAGES.iter().flat_map(|name| commands_of(&page(name))).collect();
    let dir = tempfile::tempdir().unwrap();
    // The files the README's examples name.
    let lines: Vec<&str> = FIXTURE.lines().collect();
    std::fs::write(dir.path().join("attempts.jsonl"), lines[..5].join("\n")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, lines[5..10].join("\n").as_bytes()).unwrap();
    std::fs::write(dir.path().join("more.jsonl.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(dir.path().join("today.jsonl"), lines[10..].join("\n")).unwrap();
    // Real LiteLLM output: two requests (a retry, and a fallback after three
    // failures) as its custom logger wrote them, times moved next to the
    // fixture's so `alerts --check` replays one short range.
    std::fs::write(
        dir.path().join("litellm-payloads.jsonl"),
        include_str!("fixtures/litellm_payloads.jsonl"),
    )
    .unwrap();
    // The provider's pages the reconcile page imports, as the admin APIs
    // return them.
    for source in ["openai-usage", "openai-costs", "anthropic-usage", "anthropic-cost", "openrouter-activity"]
    {
        std::fs::copy(
            format!("{}/tests/it/fixtures/bill/{source}.json", env!("CARGO_MANIFEST_DIR")),
            dir.path().join(format!("{source}.json")),
        )
        .unwrap();
    }
    // The catalogs the prices page imports, as LiteLLM and OpenRouter
    // publish them.
    for catalog in ["model_prices_and_context_window.json", "models.json"] {
        std::fs::copy(
            format!("{}/tests/it/fixtures/prices/{catalog}", env!("CARGO_MANIFEST_DIR")),
            dir.path().join(catalog),
        )
        .unwrap();
    }
    std::fs::create_dir(dir.path().join("examples")).unwrap();
    for example in ["alerts.toml", "policy.toml"] {
        std::fs::copy(
            format!("{}/examples/{example}", env!("CARGO_MANIFEST_DIR")),
            dir.path().join("examples").join(example),
        )
        .unwrap();
    }

    // The reconcile page's fetch reads a loopback stand-in of the admin API.
    let admin_api = crate::reconcile::FakeAdminApis::start();
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_attempt-ledger")).parent().unwrap().to_owned();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    for command in &commands {
        let out = Command::new("sh")
            .args(["-c", command])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("OPENAI_BASE_URL", &admin_api.url)
            .env("OPENAI_ADMIN_KEY", crate::reconcile::KEY)
            .env_remove("ATTEMPT_LEDGER_DB")
            .output()
            .unwrap();
        assert!(out.status.success(), "`{command}` failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let csv = std::fs::read_to_string(dir.path().join("report.csv")).unwrap();
    // The fixture's 11 workflows and LiteLLM's 2.
    assert!(csv.contains("\nworkflows.total,13\n"), "{csv}");
    assert!(csv.contains("\nworkflows.fallback_recovery,"), "{csv}");
    assert!(dir.path().join("storm.jsonl").metadata().unwrap().len() > 0);
}

/// The alerts page's rule file example is one `serve` accepts.
#[test]
fn the_readme_rule_file_parses() {
    let readme = page("docs/alerts.md");
    let start = readme.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let block = &readme[start..start + readme[start..].find("```").unwrap()];
    let rules = attempt_core::alert_rules::RuleSet::parse(block, "docs/alerts.md").unwrap();
    assert_eq!(rules.rules.len(), 2);
    assert_eq!(rules.receivers.len(), 1);
}

/// The audit page's table of the demo's findings is what `demo` prints.
#[test]
fn the_readme_audit_table_is_what_the_demo_prints() {
    let readme = page("docs/audit.md");
    let rows: Vec<Vec<String>> = readme
        .lines()
        .skip_while(|l| !l.starts_with("| finding | workflows | attempts | tokens | cost |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().trim_matches('`').to_string()).collect())
        .collect();
    assert!(rows.len() >= 6, "{rows:?}");
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_attempt-ledger"))
        .args(["demo", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    for row in rows {
        let line = printed
            .lines()
            .find(|l| l.contains(&format!(" {} ", row[0])) && l.contains('┆'))
            .unwrap_or_else(|| panic!("the demo prints no {} row", row[0]));
        let cells: Vec<&str> =
            line.trim_matches(|c| c == '│' || c == ' ').split('┆').map(str::trim).collect();
        let number = |text: &str| text.replace(',', "");
        assert_eq!((cells[1], cells[2]), (number(&row[1]).as_str(), number(&row[2]).as_str()), "{}", row[0]);
        let (input, output) = cells[3].split_once(" / ").unwrap();
        let tokens = input.parse::<u64>().unwrap() + output.parse::<u64>().unwrap();
        assert_eq!(tokens.to_string(), number(&row[3]), "{} tokens", row[0]);
        let cost: f64 = cells[4].trim_start_matches('$').split(' ').next().unwrap().parse().unwrap();
        assert_eq!(format!("${cost:.2}"), row[4], "{} cost", row[0]);
        for example in row[5].split(", ") {
            assert!(cells[6].contains(example), "{} examples: {} not in {}", row[0], example, cells[6]);
        }
    }
    let said =
        readme.split("stacked retries' ").nth(1).and_then(|t| t.split(" attempts each").next()).unwrap();
    let per_workflow = said.rsplit(' ').next().unwrap();
    assert!(printed.contains(&format!("stacked_retries ({per_workflow}x)")), "{said}");
}

/// The tuning page's tables of the demo night's curve and replay are what
/// `tune` answers on the demo's database.
#[test]
fn the_readme_tune_tables_are_what_tune_answers() {
    let readme = page("docs/tuning.md");
    let table = |header: &str| -> Vec<Vec<String>> {
        readme
            .lines()
            .skip_while(|l| !l.starts_with(header))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().to_string()).collect())
            .collect()
    };
    let curve = table("| attempt | undelivered before | delivered | success bought |");
    let replay = table("| | recorded | replayed |");
    assert!(curve.len() >= 5 && replay.len() >= 5, "{curve:?} {replay:?}");
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_attempt-ledger");
    assert!(Command::new(bin).args(["demo", "--dir"]).arg(dir.path()).output().unwrap().status.success());
    let out = Command::new(bin)
        .args(["tune", "--db"])
        .arg(dir.path().join("demo.duckdb"))
        .args(["--set", "max_retries.sdk=2", "--set", "no_retry_on=quota", "--format", "json"])
        .output()
        .unwrap();
    let tune: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let count = |v: &serde_json::Value| {
        let n = v.as_i64().unwrap();
        let digits = n.to_string();
        let mut grouped = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(c);
        }
        grouped
    };
    let lines = tune["curve"].as_array().unwrap();
    for row in &curve {
        let line = lines
            .iter()
            .filter(|l| l["layer"] == "all" && l["after_class"] == "all" && l["primary_route"] == "all")
            .find(|l| match row[0].as_str() {
                "first fallback" => l["step"] == "first_fallback",
                label => {
                    let k: i64 = label.trim_start_matches('#').split(' ').next().unwrap().parse().unwrap();
                    l["position"] == k && l["and_later"] == label.ends_with("and later")
                }
            })
            .unwrap_or_else(|| panic!("tune has no line {}", row[0]));
        let printed = [
            count(&line["undelivered_before"]),
            count(&line["delivered"]),
            format!("{:.2} pp", line["marginal_success"].as_f64().unwrap()),
            count(&line["attempts"]),
            format!("${:.2}", line["cost_usd"].as_f64().unwrap()),
        ];
        assert_eq!(&row[1..6], &printed[..], "{}", row[0]);
    }
    let r = &tune["replay"];
    for row in &replay {
        let (before, after) = match row[0].as_str() {
            "wasted cost" => (
                format!("${:.2}", r["wasted_cost_usd"]["before"].as_f64().unwrap()),
                format!("${:.2}", r["wasted_cost_usd"]["after"].as_f64().unwrap()),
            ),
            "time to outcome p99" => (
                format!(
                    "{} ms",
                    count(&serde_json::json!(
                        r["time_to_outcome_ms"]["before"]["p99"].as_f64().unwrap() as i64
                    ))
                ),
                format!(
                    "{} ms",
                    count(&serde_json::json!(
                        r["time_to_outcome_ms"]["after"]["p99"].as_f64().unwrap() as i64
                    ))
                ),
            ),
            "attempts" => (count(&r["attempts"]["before"]), count(&r["attempts"]["after"])),
            outcome => (count(&r["before"][outcome]), count(&r["after"][outcome])),
        };
        assert_eq!((row[1].as_str(), row[2].as_str()), (before.as_str(), after.as_str()), "{}", row[0]);
    }
    let said = readme.split("and loses ").nth(1).unwrap();
    assert!(said.starts_with(&format!("{} workflows", count(&r["success_lost"]))), "{said}");
    let moved = format!(
        "{} of\nthe {} workflows it changes",
        count(&r["moved_attempt_workflows"]),
        count(&r["changed_workflows"])
    );
    assert!(readme.contains(&moved), "README should say {moved:?}");
    let printed =
        String::from_utf8(Command::new(bin).args(["demo", "--dir"]).arg(dir.path()).output().unwrap().stdout)
            .unwrap();
    assert!(
        printed.contains(&format!("({} workflows)", count(&r["success_lost"]).replace(',', ""))),
        "the demo's teaser"
    );
}
