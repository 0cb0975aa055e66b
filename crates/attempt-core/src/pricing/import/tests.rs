use chrono::NaiveDate;

use super::*;
use crate::pricing::{PriceKey, PriceTable, Unpriced, Usage, prompt_over};
use crate::providers::ProviderAliases;

fn options() -> ImportOptions {
    ImportOptions {
        source: "test catalog".into(),
        as_of: NaiveDate::from_ymd_opt(2026, 12, 1).unwrap(),
        all_providers: false,
    }
}

/// Entries shaped as LiteLLM writes them (keys and values copied from the
/// kinds of entries its map holds, with round prices).
const LITELLM: &str = r#"{
  "sample_spec": {"input_cost_per_token": 0.0, "mode": "chat", "litellm_provider": "one of"},
  "gpt-x": {"litellm_provider": "openai", "mode": "chat",
            "input_cost_per_token": 1.25e-06, "output_cost_per_token": 1e-05,
            "cache_read_input_token_cost": 1.25e-07,
            "input_cost_per_token_flex": 6.25e-07, "output_cost_per_token_flex": 5e-06,
            "cache_read_input_token_cost_flex": 6.25e-08,
            "input_cost_per_token_batches": 6.25e-07, "output_cost_per_token_batches": 5e-06,
            "output_cost_per_reasoning_token": 2e-05,
            "search_context_cost_per_query": {"search_context_size_low": 0.01, "search_context_size_medium": 0.01},
            "input_cost_per_audio_token": 4e-05, "fedramp_uplift_multiplier": 1.1},
  "gemini/gemini-x-pro": {"litellm_provider": "gemini", "mode": "chat",
            "input_cost_per_token": 1.25e-06, "output_cost_per_token": 1e-05,
            "input_cost_per_token_above_200k_tokens": 2.5e-06, "output_cost_per_token_above_200k_tokens": 1.5e-05,
            "cache_read_input_token_cost": 1.25e-07, "cache_read_input_token_cost_above_200k_tokens": 2.5e-07,
            "input_cost_per_token_priority": 2.25e-06, "output_cost_per_token_priority": 1.8e-05,
            "input_cost_per_token_above_200k_tokens_priority": 4.5e-06,
            "output_cost_per_token_above_200k_tokens_priority": 2.7e-05},
  "claude-x": {"litellm_provider": "anthropic", "mode": "chat",
            "input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
            "cache_creation_input_token_cost": 3.75e-06, "cache_creation_input_token_cost_above_1hr": 6e-06,
            "cache_read_input_token_cost": 3e-07},
  "xai/grok-x": {"litellm_provider": "xai", "mode": "chat",
            "input_cost_per_token": 2e-07, "output_cost_per_token": 5e-07,
            "input_cost_per_token_above_200k_tokens": 4e-07, "output_cost_per_token_above_200k_tokens": 1e-06},
  "bedrock/us.anthropic.claude-x-v1:0": {"litellm_provider": "bedrock_converse", "mode": "chat",
            "input_cost_per_token": 3.3e-06, "output_cost_per_token": 1.65e-05},
  "us.anthropic.claude-x-v1:0": {"litellm_provider": "bedrock_converse", "mode": "chat",
            "input_cost_per_token": 3.3e-06, "output_cost_per_token": 1.65e-05},
  "novita/vendor/odd": {"litellm_provider": "novita", "mode": "chat",
            "input_cost_per_token": 9.499999999999999e-07, "output_cost_per_token": 1e-06},
  "dall-e-x": {"litellm_provider": "openai", "mode": "image_generation", "output_cost_per_image": 0.04},
  "somelab/model": {"litellm_provider": "somelab", "mode": "chat", "input_cost_per_token": 1e-06},
  "text-embedding-x": {"litellm_provider": "openai", "mode": "embedding",
            "input_cost_per_token": 2e-08, "output_cost_per_token": 0.0},
  "odd-threshold": {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 1e-06,
            "input_cost_per_token_above_150k_tokens": 2e-06}
}"#;

fn converted() -> Imported {
    from_litellm(LITELLM, &ProviderAliases::builtin(), &options()).unwrap()
}

fn reloaded(imported: &Imported) -> PriceTable {
    let mut table = PriceTable::default();
    table.merge(&imported.to_toml(&options(), "converted"), "converted.toml").unwrap();
    table
}

fn cost(
    table: &PriceTable,
    provider: &str,
    model: &str,
    tier: &str,
    usage: &Usage,
) -> Result<i128, Unpriced> {
    let key = PriceKey {
        provider,
        model,
        day: NaiveDate::from_ymd_opt(2026, 12, 2).unwrap(),
        tier,
        prompt_over: prompt_over(usage.input),
        billing_account: None,
    };
    table.cost(&key, usage)
}

#[test]
fn litellm_entries_become_rows_by_tier_and_prompt_size() {
    let imported = converted();
    let rows = &imported.models[&("openai".to_string(), "gpt-x".to_string())];
    let tiers: Vec<(&str, i64)> = rows.iter().map(|r| (r.tier.as_str(), r.above)).collect();
    assert_eq!(tiers, [("standard", 0), ("batch", 0), ("flex", 0)]);
    let standard = &rows[0].prices;
    assert_eq!(
        (
            standard.input,
            standard.cached_input,
            standard.output,
            standard.reasoning_output,
            standard.web_search
        ),
        (Some(1_250_000), Some(125_000), Some(10_000_000), Some(20_000_000), Some(10_000_000_000))
    );
    // The batch tier states no cached price: LiteLLM would guess one.
    assert_eq!(rows[1].prices.cached_input, None);
    let gemini = &imported.models[&("gcp.gemini".to_string(), "gemini-x-pro".to_string())];
    let tiers: Vec<(&str, i64)> = gemini.iter().map(|r| (r.tier.as_str(), r.above)).collect();
    assert_eq!(tiers, [("standard", 0), ("standard", 200_000), ("priority", 0), ("priority", 200_000)]);
    // xAI's higher price starts at the threshold itself.
    let grok = &imported.models[&("x_ai".to_string(), "grok-x".to_string())];
    assert_eq!(grok[1].above, 199_999);
    // The route prefix goes, the region stays; two names of one model agree.
    assert!(
        imported.models.contains_key(&("aws.bedrock".to_string(), "us.anthropic.claude-x-v1:0".to_string()))
    );
    assert!(imported.notes.conflicts.is_empty(), "{:?}", imported.notes.conflicts);
    assert!(imported.models.contains_key(&("openai".to_string(), "text-embedding-x".to_string())));
}

#[test]
fn what_cannot_be_stated_is_counted_never_guessed() {
    let notes = converted().notes;
    assert_eq!(notes.read, 11);
    assert_eq!(notes.skipped.get("mode `image_generation` (not priced per token)"), Some(&1));
    assert_eq!(notes.skipped.get("provider `somelab` (not in the alias table)"), Some(&1));
    assert!(
        notes.skipped.keys().any(|why| why.contains("150000 tokens the store does not keep apart")),
        "{:?}",
        notes.skipped
    );
    assert_eq!(notes.unstated.get("input_cost_per_audio_token"), Some(&1));
    assert_eq!(notes.unstated.get("fedramp_uplift_multiplier"), Some(&1));
    assert_eq!(notes.rounded, 1, "9.499999999999999e-07 is 0.95 per million");
    let all = from_litellm(
        LITELLM,
        &ProviderAliases::builtin(),
        &ImportOptions { all_providers: true, ..options() },
    )
    .unwrap();
    assert_eq!(all.models[&("somelab".to_string(), "model".to_string())][0].prices.input, Some(1_000_000));
    assert_eq!(all.models[&("novita".to_string(), "vendor/odd".to_string())][0].prices.input, Some(950_000));
}

#[test]
fn a_converted_file_prices_as_its_catalog() {
    let table = reloaded(&converted());
    let long = Usage { input: 250_000, cached_input: 50_000, output: 1_000, ..Usage::default() };
    // 200k uncached at 2.5, 50k cached at 0.25, 1k out at 15 (per million).
    assert_eq!(cost(&table, "gcp.gemini", "gemini-x-pro", "standard", &long), Ok(527_500_000_000));
    assert_eq!(
        cost(&table, "gcp.gemini", "gemini-x-pro", "priority", &long),
        Err(Unpriced::NoKindPrice),
        "no cached price for a long prompt on priority"
    );
    let one_hour =
        Usage { input: 1_000_000, cache_write: 1_000_000, cache_write_1h: 400_000, ..Usage::default() };
    assert_eq!(cost(&table, "anthropic", "claude-x", "standard", &one_hour), Ok(4_650_000_000_000));
    let at_edge = Usage { input: 200_000, output: 0, ..Usage::default() };
    assert_eq!(
        cost(&table, "x_ai", "grok-x", "standard", &at_edge),
        Ok(80_000_000_000),
        "xAI: at 200k, the higher price"
    );
    let reasoning = Usage { input: 0, output: 100, reasoning_output: 40, ..Usage::default() };
    assert_eq!(
        cost(&table, "openai", "gpt-x", "standard", &reasoning),
        Ok(60 * 10_000_000 + 40 * 20_000_000)
    );
    assert_eq!(
        cost(&table, "openai", "gpt-x", "flex", &reasoning),
        Ok(100 * 5_000_000),
        "flex: reasoning as its output"
    );
}

/// A name LiteLLM serves as another row's (`alias_of`, or a row's
/// `aliases` list) prices as that row; a broken alias is left out and
/// counted, as LiteLLM drops it.
#[test]
fn aliases_price_as_the_row_they_name() {
    let map = r#"{
      "claude-x-5": {"litellm_provider": "anthropic", "mode": "chat",
                     "input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05,
                     "aliases": ["claude-x-stable", "claude-x-5"]},
      "claude-x-latest": {"alias_of": "claude-x-5"},
      "vertex_ai/claude-x-latest": {"alias_of": "vertex_ai/claude-x-5"},
      "vertex_ai/claude-x-5": {"litellm_provider": "vertex_ai-anthropic_models", "mode": "chat",
                     "input_cost_per_token": 3.3e-06, "output_cost_per_token": 1.65e-05},
      "chained": {"alias_of": "claude-x-latest"},
      "dangling": {"alias_of": "no-such-row"},
      "fallback_generalizations": {"rules": []}
    }"#;
    let imported = from_litellm(map, &ProviderAliases::builtin(), &options()).unwrap();
    let input = |provider: &str, model: &str| {
        imported.models.get(&(provider.to_string(), model.to_string())).map(|rows| rows[0].prices.input)
    };
    assert_eq!(input("anthropic", "claude-x-latest"), Some(Some(3_000_000)));
    assert_eq!(input("anthropic", "claude-x-stable"), Some(Some(3_000_000)));
    assert_eq!(input("gcp.vertex_ai", "claude-x-latest"), Some(Some(3_300_000)));
    assert_eq!(input("anthropic", "chained"), None);
    assert_eq!(input("anthropic", "dangling"), None);
    assert_eq!(imported.notes.skipped.get("an alias that points at no model row"), Some(&2));
    assert_eq!(imported.notes.skipped.get("an alias that is already another name"), Some(&1));
    assert_eq!(imported.notes.read, 6, "the file's rows, as the file counts them");
    assert_eq!(imported.notes.converted, 5, "two models under five names");
}

#[test]
fn openrouter_models_become_rows_of_their_slug() {
    let answer = r#"{"data": [
      {"id": "openai/gpt-4o", "pricing": {"prompt": "0.0000025", "completion": "0.00001", "request": "0",
        "image": "0.003613", "web_search": "0", "internal_reasoning": "0", "input_cache_read": "0.00000125"}},
      {"id": "perplexity/sonar", "pricing": {"prompt": "0.000001", "completion": "0.000001", "request": "0.005"}},
      {"id": "openrouter/auto", "pricing": {"prompt": "-1", "completion": "-1"}},
      {"id": "deepseek/r1", "pricing": {"prompt": "0.0000004", "completion": "0.000002", "internal_reasoning": "0.000002",
        "web_search": "0.004"}}
    ]}"#;
    let imported = from_openrouter(answer, &options()).unwrap();
    assert_eq!(imported.notes.read, 4);
    assert_eq!(imported.notes.converted, 2);
    assert_eq!(imported.notes.unstated.get("image"), Some(&1));
    let gpt = &imported.models[&("openrouter".to_string(), "openai/gpt-4o".to_string())][0].prices;
    assert_eq!(
        (gpt.input, gpt.cached_input, gpt.output, gpt.reasoning_output),
        (Some(2_500_000), Some(1_250_000), Some(10_000_000), None)
    );
    let r1 = &imported.models[&("openrouter".to_string(), "deepseek/r1".to_string())][0].prices;
    assert_eq!((r1.reasoning_output, r1.web_search), (Some(2_000_000), Some(4_000_000_000)));
    let table = reloaded(&imported);
    assert!(
        cost(
            &table,
            "openrouter",
            "openai/gpt-4o",
            "standard",
            &Usage { input: 10, output: 10, ..Usage::default() }
        )
        .is_ok()
    );
    assert!(from_openrouter("{}", &options()).unwrap_err().to_string().contains("no `data` array"));
    assert!(from_openrouter("[", &options()).unwrap_err().to_string().contains("not JSON"));
}

#[test]
fn decimals_are_written_exactly() {
    assert_eq!(decimal(1_250_000, 6), "1.25");
    assert_eq!(decimal(3_000_000, 6), "3.0");
    assert_eq!(decimal(1, 6), "0.000001");
    assert_eq!(decimal(10_000_000_000, 12), "0.01");
}
