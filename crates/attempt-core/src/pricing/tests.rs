use chrono::NaiveDate;
use proptest::prelude::*;

use super::*;

fn day(text: &str) -> NaiveDate {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap()
}

fn key<'a>(provider: &'a str, model: &'a str, on: &str, tier: &'a str, prompt: i64) -> PriceKey<'a> {
    PriceKey { provider, model, day: day(on), tier, prompt_over: prompt_over(prompt), billing_account: None }
}

fn table(text: &str) -> PriceTable {
    let mut table = PriceTable::default();
    table.merge(text, "test.toml").unwrap();
    table
}

const USD: i128 = 1_000_000_000_000;

/// The usage of one request: `input` all input tokens.
fn usage(input: i64, output: i64) -> Usage {
    Usage { input, output, ..Usage::default() }
}

#[test]
fn the_shipped_table_prices_what_the_bill_charges() {
    let table = PriceTable::builtin();
    // A million tokens of each kind over requests of 50,000 tokens of prompt:
    // no long-context price applies.
    let prompt = 50_000;
    let million = usage(1_000_000, 1_000_000);
    let on = "2026-11-28";
    // gpt-5: $1.25 / $10 standard; flex and batch half, priority double.
    for (tier, expected) in
        [("standard", 11_250_000), ("flex", 5_625_000), ("batch", 5_625_000), ("priority", 22_500_000)]
    {
        let cost = table.cost(&key("openai", "gpt-5", on, tier, prompt), &million).unwrap();
        assert_eq!(cost, expected * USD / 1_000_000, "gpt-5 {tier}");
    }
    // Gemini 2.5 Pro above 200k tokens of prompt: every token at the higher rate.
    let long = usage(250_000, 2_000);
    let cost = table.cost(&key("gcp.gemini", "gemini-2.5-pro", on, "standard", long.input), &long).unwrap();
    assert_eq!(cost, 655 * USD / 1000);
    // One million tokens written to Anthropic's one-hour cache: 2x input.
    let one_hour =
        Usage { input: 1_000_000, cache_write: 1_000_000, cache_write_1h: 1_000_000, ..Usage::default() };
    let cost = table.cost(&key("anthropic", "claude-sonnet-4-5", on, "standard", prompt), &one_hour).unwrap();
    assert_eq!(cost, 6 * USD);
    // The same model on Vertex AI, the five-minute cache: 1.25x input.
    let five_minutes = Usage { input: 1_000_000, cache_write: 1_000_000, ..Usage::default() };
    let cost = table.cost(&key("gcp.vertex_ai", "claude-sonnet-4-5", on, "standard", prompt), &five_minutes);
    assert_eq!(cost, Ok(375 * USD / 100));
    // Bedrock's geographic inference profiles: 10 % above the global price.
    for profile in ["us", "eu", "au", "jp"] {
        let model = format!("{profile}.anthropic.claude-sonnet-4-5-20250929-v1:0");
        let resolved = table.resolve(&key("aws.bedrock", &model, on, "standard", 1000)).unwrap();
        assert!(!resolved.region_dropped, "{model}");
        assert_eq!(
            (resolved.prices.input, resolved.prices.output),
            (Some(3_300_000), Some(16_500_000)),
            "{model}"
        );
    }
    // Ten web searches at $10 per 1,000.
    let searches = Usage { web_search_requests: 10, ..Usage::default() };
    for (provider, model) in [("openai", "gpt-5"), ("anthropic", "claude-sonnet-4-5")] {
        assert_eq!(table.cost(&key(provider, model, on, "standard", 0), &searches), Ok(USD / 10), "{model}");
    }
}

#[test]
fn the_shipped_table_covers_current_models_of_every_provider() {
    let table = PriceTable::builtin();
    for (provider, model) in [
        ("anthropic", "claude-sonnet-4-6"),
        ("openai", "gpt-5.2"),
        ("gcp.gemini", "gemini-3.1-pro-preview"),
        ("deepseek", "deepseek-chat"),
        ("mistral_ai", "mistral-large-latest"),
        ("x_ai", "grok-4.3"),
        ("groq", "openai/gpt-oss-120b"),
        ("openai", "text-embedding-3-small"),
    ] {
        let priced = table.cost(&key(provider, model, "2026-11-28", "standard", 1000), &usage(1000, 10));
        assert!(priced.is_ok(), "{provider}/{model}: {priced:?}");
    }
}

const DATED: &str = r#"
[[provider]]
name = "lab"
as_of = "2026-01-01"
models = [
  { model = "m", input = 2.0, cached_input = 0.2, output = 8.0 },
  { model = "m", tier = "priority", input = 4.0, output = 16.0 },
  { model = "m", above_input_tokens = 200000, input = 4.0, output = 12.0 },
  { model = "m", since = "2026-06-01", input = 1.0, output = 4.0 },
  { model = "m-2026-01-15", input = 3.0, output = 9.0 },
]
"#;

#[test]
fn an_attempt_is_priced_by_the_entry_in_force_on_its_day() {
    let table = table(DATED);
    let one = usage(1_000_000, 0);
    assert_eq!(table.cost(&key("lab", "m", "2026-05-31", "standard", 1), &one), Ok(2 * USD));
    assert_eq!(table.cost(&key("lab", "m", "2026-06-01", "standard", 1), &one), Ok(USD));
    // The newer entry is whole: it states no priority tier, no long prompt.
    assert_eq!(table.cost(&key("lab", "m", "2026-06-02", "priority", 1), &one), Err(Unpriced::NoTierPrice));
    assert_eq!(table.cost(&key("lab", "m", "2026-01-02", "priority", 1), &one), Ok(4 * USD));
    // A dated name has its own entry; others dated fall back to the base.
    assert_eq!(table.cost(&key("lab", "m-2026-01-15", "2026-06-02", "standard", 1), &one), Ok(3 * USD));
    assert_eq!(table.cost(&key("lab", "m-2025-12-01", "2026-06-02", "standard", 1), &one), Ok(USD));
    assert_eq!(table.cost(&key("lab", "other", "2026-06-02", "standard", 1), &one), Err(Unpriced::NoPrice));
    assert_eq!(table.cost(&key("elsewhere", "m", "2026-06-02", "standard", 1), &one), Err(Unpriced::NoPrice));
}

#[test]
fn a_long_prompt_prices_every_token_at_its_tier_or_not_at_all() {
    let table = table(DATED);
    let on = "2026-02-01";
    let long = Usage { input: 250_000, cached_input: 50_000, output: 1_000, ..Usage::default() };
    // No cached price in the long row: the cached tokens have none.
    assert_eq!(table.cost(&key("lab", "m", on, "standard", long.input), &long), Err(Unpriced::NoKindPrice));
    let long = usage(250_000, 1_000);
    assert_eq!(
        table.cost(&key("lab", "m", on, "standard", long.input), &long),
        Ok((250_000 * 4 + 12_000) * USD / 1_000_000)
    );
    // Exactly at the threshold is not above it.
    let edge = usage(200_000, 0);
    assert_eq!(
        table.cost(&key("lab", "m", on, "standard", edge.input), &edge),
        Ok(400_000 * USD / 1_000_000)
    );
    // Priority has no long-prompt row: unknown, not priced as a short prompt.
    assert_eq!(table.cost(&key("lab", "m", on, "priority", long.input), &long), Err(Unpriced::NoTierPrice));
    assert_eq!(table.cost(&key("lab", "m", on, "flex", 10), &usage(10, 0)), Err(Unpriced::NoTierPrice));
}

#[test]
fn kinds_without_a_price_are_unknown_only_when_used() {
    let table = table(DATED);
    let k = key("lab", "m", "2026-02-01", "standard", 1000);
    assert!(table.cost(&k, &Usage { input: 1000, cached_input: 1000, ..Usage::default() }).is_ok());
    for used in [
        Usage { input: 1000, cache_write: 10, ..Usage::default() },
        Usage { input: 1000, cache_write: 10, cache_write_1h: 10, ..Usage::default() },
        Usage { web_search_requests: 1, ..Usage::default() },
    ] {
        assert_eq!(table.cost(&k, &used), Err(Unpriced::NoKindPrice), "{used:?}");
    }
    // Reasoning is output unless priced apart.
    let reasoning = Usage { output: 100, reasoning_output: 60, ..Usage::default() };
    assert_eq!(table.cost(&k, &reasoning), Ok(800 * USD / 1_000_000));
    let apart = self::table(
        r#"[[provider]]
           name = "lab"
           models = [{ model = "r", input = 1.0, output = 4.0, reasoning_output = 10.0 }]"#,
    );
    assert_eq!(
        apart.cost(&key("lab", "r", "2026-02-01", "standard", 0), &reasoning),
        Ok((40 * 4 + 60 * 10) * USD / 1_000_000)
    );
}

#[test]
fn discounts_apply_by_account_then_provider_from_their_day() {
    let mut table = table(DATED);
    table
        .merge(
            r#"
            [[discount]]
            provider = "lab"
            multiplier = 0.9
            [[discount]]
            provider = "lab"
            billing_account = "team-a"
            since = "2026-03-01"
            multiplier = 0.75
            "#,
            "discounts.toml",
        )
        .unwrap();
    let one = usage(1_000_000, 0);
    let mut k = key("lab", "m", "2026-02-01", "standard", 1);
    assert_eq!(table.cost(&k, &one), Ok(18 * USD / 10));
    k.billing_account = Some("team-a");
    assert_eq!(table.cost(&k, &one), Ok(18 * USD / 10), "before the account's own");
    k.day = day("2026-03-01");
    assert_eq!(table.cost(&k, &one), Ok(15 * USD / 10));
    k.billing_account = Some("team-b");
    assert_eq!(table.cost(&k, &one), Ok(18 * USD / 10));
    assert_eq!(table.resolve(&k).unwrap().discount_ppm, Some(900_000));
}

#[test]
fn regional_names_match_their_own_entry_first() {
    let table = table(
        r#"[[provider]]
           name = "aws.bedrock"
           models = [{ model = "anthropic.c-1", input = 3.0, output = 15.0 },
                     { model = "us.anthropic.c-1", input = 3.3, output = 16.5 }]"#,
    );
    let us =
        table.resolve(&key("aws.bedrock", "us.anthropic.c-1-v1:0", "2026-01-01", "standard", 0)).unwrap();
    assert_eq!((us.prices.input, us.region_dropped), (Some(3_300_000), false));
    let eu = table
        .resolve(&key("aws.bedrock", "eu.anthropic.c-1-20250101-v1:0", "2026-01-01", "standard", 0))
        .unwrap();
    assert_eq!(
        (eu.model.as_str(), eu.prices.input, eu.region_dropped),
        ("anthropic.c-1", Some(3_000_000), true)
    );
}

#[test]
fn a_user_file_replaces_an_entry_whole_and_adds_dated_ones() {
    let mut table = table(DATED);
    table
        .merge(
            r#"[[provider]]
               name = "lab"
               models = [{ model = "m", input = 5.0, output = 5.0 },
                         { model = "m", since = "2027-01-01", input = 0.5, output = 0.5 }]"#,
            "user.toml",
        )
        .unwrap();
    let one = usage(1_000_000, 0);
    assert_eq!(table.cost(&key("lab", "m", "2026-02-01", "standard", 1), &one), Ok(5 * USD));
    assert_eq!(table.cost(&key("lab", "m", "2026-02-01", "priority", 1), &one), Err(Unpriced::NoTierPrice));
    assert_eq!(table.cost(&key("lab", "m", "2026-07-01", "standard", 1), &one), Ok(USD), "other dates kept");
    assert_eq!(table.cost(&key("lab", "m", "2027-01-01", "standard", 1), &one), Ok(USD / 2));
}

#[test]
fn tiers_and_prompt_sizes_are_read_as_the_store_keys_them() {
    assert_eq!(price_tier(Some(true), Some("flex")), "batch");
    for standard in [None, Some("default"), Some(" Auto "), Some("standard"), Some("on_demand"), Some("")] {
        assert_eq!(price_tier(None, standard), "standard", "{standard:?}");
    }
    assert_eq!(price_tier(Some(false), Some("Priority")), "priority");
    assert_eq!(prompt_over(0), 0);
    assert_eq!(prompt_over(32_000), 0);
    assert_eq!(prompt_over(32_001), 32_000);
    assert_eq!(prompt_over(200_000), 199_999);
    assert_eq!(prompt_over(200_001), 200_000);
    assert_eq!(prompt_over(5_000_000), 1_000_000);
}

#[test]
fn bad_price_files_are_explained() {
    let bad = |text: &str| PriceTable::default().merge(text, "p.toml").unwrap_err().to_string();
    let rows = |row: &str| format!("[[provider]]\nname = \"x\"\nmodels = [{row}]");
    assert_eq!(
        bad(&rows(r#"{ model = "m", input = -1.0, output = 1.0 }"#)),
        "price file p.toml: x/m: `input` = -1 must be a finite price >= 0"
    );
    assert_eq!(
        bad(&rows(r#"{ model = "m", input = 0.0000001 }"#)),
        "price file p.toml: x/m: `input` = 0.0000001 is finer than a pico-dollar per token (at most 6 decimals of USD per million tokens)"
    );
    assert!(bad(&rows(r#"{ model = "m", above_input_tokens = 150000, input = 1.0 }"#)).contains(
        "`above_input_tokens`: 150000 is not a prompt size the store keeps apart; use one of 32000"
    ));
    assert!(
        bad(&rows(r#"{ model = "m", since = "yesterday", input = 1.0 }"#))
            .contains("x/m: `since`: \"yesterday\" is not a day written YYYY-MM-DD")
    );
    assert!(bad(&rows(r#"{ model = "m" }"#)).contains("x/m: a row must give at least one price"));
    assert!(
        bad(&rows(r#"{ model = "m", input = 1.0 }, { model = "m", tier = "default", input = 2.0 }"#))
            .contains("two rows for tier `standard` above 0 tokens")
    );
    assert!(bad(&rows(r#"{ model = "m", input = 1.0, colour = 2 }"#)).contains("unknown field `colour`"));
    assert!(
        bad("[[discount]]\nprovider = \"x\"\nmultiplier = 0.1234567").contains("has more than 6 decimals")
    );
    assert!(bad("[[discount]]\nprovider = \"x\"\nmultiplier = -1").contains("must be a number from 0 to 10"));
    // A TOML date is a day too.
    PriceTable::default()
        .merge(&rows(r#"{ model = "m", since = 2026-01-01, input = 1.0 }"#), "p.toml")
        .unwrap();
}

#[test]
fn cells_name_models_without_their_release() {
    let table = table(DATED);
    assert_eq!(table.cell_model("lab", "m-2025-03-03"), "m");
    assert_eq!(table.cell_model("LAB", "m-2026-01-15"), "m", "a dated entry of its own too");
    assert_eq!(table.cell_model("lab", "my-model-20250101"), "my-model");
    assert_eq!(table.cell_model("aws.bedrock", "us.anthropic.c-1-20250101-v1:0"), "us.anthropic.c-1");
}

fn arb_usage() -> impl Strategy<Value = Usage> {
    (0i64..400_000, 0i64..100, 0i64..100, 0i64..50, 0i64..5_000, 0i64..100, 0i64..3).prop_map(
        |(input, cached_pct, write_pct, one_hour_pct, output, reasoning_pct, searches)| {
            let cached = input * cached_pct / 200;
            let write = (input - cached) * write_pct / 100;
            Usage {
                input,
                cached_input: cached,
                cache_write: write,
                cache_write_1h: write * one_hour_pct / 100,
                output,
                reasoning_output: output * reasoning_pct / 100,
                web_search_requests: searches,
            }
        },
    )
}

proptest! {
    /// A price cut or an introductory price's end never rewrites history:
    /// an entry with a later `since` leaves every earlier day's cost.
    #[test]
    fn a_later_entry_never_changes_an_earlier_cost(
        usage in arb_usage(),
        tier in prop::sample::select(vec!["standard", "priority", "batch"]),
        offset in 0i64..400,
        since_offset in 1i64..400,
        price in 0.0f64..50.0,
    ) {
        let base = day("2026-01-01");
        let on = base + chrono::Duration::days(offset);
        let since = on + chrono::Duration::days(since_offset);
        let before = table(DATED);
        let mut after = before.clone();
        let price = (price * 1000.0).round() / 1000.0;
        after.merge(&format!(
            "[[provider]]\nname = \"lab\"\nmodels = [{{ model = \"m\", since = \"{since}\", input = {price:?}, output = {price:?}, cached_input = {price:?} }}]"
        ), "later.toml").unwrap();
        let on_text = on.to_string();
        let k = key("lab", "m", &on_text, tier, usage.input);
        prop_assert_eq!(before.cost(&k, &usage), after.cost(&k, &usage));
    }

    /// A cost is the sum of its parts: pricing a group's summed usage equals
    /// summing its attempts' costs (what lets the store price rollups).
    #[test]
    fn costs_add_over_attempts_of_one_key(usages in prop::collection::vec(arb_usage(), 1..6)) {
        let prices = KindPrices {
            input: Some(1_250_000), cached_input: Some(125_000), cache_write: Some(1_562_500),
            cache_write_1h: Some(2_500_000), output: Some(10_000_000), reasoning_output: None,
            web_search: Some(10_000_000_000),
        };
        let sum = usages.iter().fold(Usage::default(), |s, u| Usage {
            input: s.input + u.input, cached_input: s.cached_input + u.cached_input,
            cache_write: s.cache_write + u.cache_write, cache_write_1h: s.cache_write_1h + u.cache_write_1h,
            output: s.output + u.output, reasoning_output: s.reasoning_output + u.reasoning_output,
            web_search_requests: s.web_search_requests + u.web_search_requests,
        });
        let each: i128 = usages.iter().map(|u| prices.cost(u).unwrap()).sum();
        prop_assert_eq!(prices.cost(&sum), Some(each));
    }
}

#[test]
fn missing_kinds_are_named_by_the_bits_attempts_used() {
    let prices = KindPrices { input: Some(1), output: Some(2), ..KindPrices::default() };
    assert_eq!(prices.missing(1 | 16 | 32), Vec::<&str>::new(), "reasoning is output");
    assert_eq!(prices.missing(2 | 8 | 64), ["cached_input", "cache_write_1h", "web_search"]);
}

/// The shipped table is read an entry at a time; what it answers must be
/// what parsing the whole file answers, entry by entry.
#[test]
fn the_shipped_table_read_by_provider_answers_as_the_whole_file() {
    assert!(
        shipped::index(BUILTIN_PRICES).is_some(),
        "prices/prices.toml keeps the importer's layout, so it is read an entry at a time"
    );
    let lazy = PriceTable::builtin();
    let mut whole = table(BUILTIN_PRICES);
    whole.merge(BUILTIN_CORRECTIONS, "corrections.toml").unwrap();
    let names: Vec<(&str, &str)> = lazy.entry_names().collect();
    assert_eq!(names, whole.entry_names().collect::<Vec<_>>());
    assert!(names.len() > 1_000, "{} entries", names.len());
    for (provider, model) in names {
        assert_eq!(lazy.rows(provider, model), whole.rows(provider, model), "{provider}/{model}");
    }
}

#[test]
fn the_corrections_charge_what_the_providers_pages_do() {
    let shipped = PriceTable::builtin();
    let on = "2026-02-10";
    // Gemini 3 Pro Preview on the Gemini API, which the converted map
    // dropped: a 250k-token prompt is all at the long-context rate.
    let long = usage(250_000, 2_000);
    let cost = shipped.cost(&key("gcp.gemini", "gemini-3-pro-preview", on, "standard", long.input), &long);
    assert_eq!(cost, Ok(1036 * USD / 1000));
    let short = usage(100_000, 2_000);
    let cost = shipped.cost(&key("gcp.gemini", "gemini-3-pro-preview", on, "batch", short.input), &short);
    assert_eq!(cost, Ok(112 * USD / 1000));
    // Claude Sonnet 4.5 over 200k tokens of prompt (the 1M-context beta),
    // by its alias and its dated name, standard and batch.
    let long = usage(300_000, 1_000);
    for model in ["claude-sonnet-4-5", "claude-sonnet-4-5-20250929"] {
        let standard = shipped.cost(&key("anthropic", model, on, "standard", long.input), &long);
        assert_eq!(standard, Ok(18_225 * USD / 10_000), "{model}");
        let batch = shipped.cost(&key("anthropic", model, on, "batch", long.input), &long);
        assert_eq!(batch, Ok(18_225 * USD / 20_000), "{model}");
    }
    // Elsewhere the converted rows still charge.
    let converted = table(BUILTIN_PRICES);
    let haiku = key("anthropic", "claude-haiku-4-5", on, "standard", 10);
    assert_eq!(shipped.cost(&haiku, &long), converted.cost(&haiku, &long));
}

/// A correction the converted map has caught up with is dead weight that
/// would hide the map's next change: each must still differ from it.
#[test]
fn every_correction_differs_from_the_converted_entry() {
    let converted = table(BUILTIN_PRICES);
    let corrections = PriceTable::corrections();
    let names: Vec<(&str, &str)> = corrections.entry_names().collect();
    assert!(!names.is_empty());
    assert!(corrections.discounts.is_empty(), "a discount is a user's, not a correction");
    for (provider, model) in names {
        let corrected = corrections.rows(provider, model);
        assert!(corrected.iter().all(|r| r.source.as_deref().is_some_and(|s| s.starts_with("https://"))));
        assert_ne!(converted.rows(provider, model), corrected, "{provider}/{model}");
    }
}

#[test]
fn a_merged_file_replaces_the_shipped_rows_of_its_since_only() {
    let mut merged = PriceTable::builtin();
    merged
        .merge(
            "[[provider]]\nname = \"OpenAI\"\nmodels = [\n  { model = \"gpt-5\", since = \"2030-01-01\", input = 1.0, output = 2.0 },\n  { model = \"gpt-5\", tier = \"flex\", input = 0.5, output = 1.0 },\n]\n",
            "mine.toml",
        )
        .unwrap();
    let million = usage(1_000_000, 1_000_000);
    // Before 2030 the shipped standard row is gone (the undated rows were
    // replaced by the file's one flex row), so standard is unpriced.
    assert_eq!(merged.cost(&key("openai", "gpt-5", "2026-11-28", "flex", 10), &million), Ok(3 * USD / 2));
    assert_eq!(
        merged.cost(&key("openai", "gpt-5", "2026-11-28", "standard", 10), &million),
        Err(Unpriced::NoTierPrice)
    );
    assert_eq!(merged.cost(&key("openai", "gpt-5", "2030-01-02", "standard", 10), &million), Ok(3 * USD));
    // Other models of the provider keep their shipped rows.
    let shipped = PriceTable::builtin();
    let mini = key("openai", "gpt-5-mini", "2026-11-28", "standard", 10);
    assert_eq!(merged.cost(&mini, &million), shipped.cost(&mini, &million));
    assert!(shipped.cost(&mini, &million).is_ok());
}

#[test]
fn a_text_off_the_importer_s_layout_is_parsed_whole() {
    let block =
        "[[provider]]\nname = \"A\"\nmodels = [\n  { model = \"m\", input = 1.0, output = 1.0 },\n]\n";
    let row = "  { model = \"m\", input = 1.0, output = 1.0 },\n";
    let indexed = shipped::index(Box::leak(format!("# prices\n\n{block}").into_boxed_str())).unwrap();
    assert_eq!(indexed["a"].rows("m").map(<[Row]>::len), Some(1));
    for odd in [
        format!("{block}[[discount]]\nprovider = \"a\"\nmultiplier = 0.5\n"),
        format!("top = 1\n{block}"),
        format!("\n{block}\n{block}"),
        "\n[[provider]]\nmodels = [\n]\nname = \"a\"\n".to_string(),
        format!(
            "\n[[provider]]\nname = \"a\"\nmodels = [\n{row}  {{ model = \"n\", input = 1.0 }},\n{row}]\n"
        ),
        "\n[[provider]]\nname = \"a\"\nmodels = [\n  { model = \"m\\u0041\", input = 1.0 },\n]\n".to_string(),
        format!("\n[[provider]]\nname = \"a\"\nmodels = [\n{row}]\nextra = 1\n"),
    ] {
        assert!(shipped::index(Box::leak(odd.clone().into_boxed_str())).is_none(), "{odd}");
    }
}
