//! LiteLLM's `model_prices_and_context_window.json` (the file the `litellm`
//! package ships) into price rows, read the way LiteLLM's own cost
//! calculator reads it where the file can state the same price:
//!
//! - a row per service tier (`_flex`, `_priority`, `_batches` as `batch`,
//!   ...) and long-context threshold (`_above_200k_tokens`) that has an
//!   input price; each kind of token from its own key only (LiteLLM falls
//!   back to other keys where one is missing; the file leaves the kind
//!   without a price, so such tokens are unknown cost, never guessed);
//! - reasoning at `output_cost_per_reasoning_token[_tier]` for every prompt
//!   size, as LiteLLM reads it;
//! - xAI's thresholds start *at* their size (`_above_200k` is 199,999 here);
//! - web search at `search_context_size_medium` per request, LiteLLM's
//!   default;
//! - `tiered_pricing` ranges as long-context rows (every token of a request
//!   at its range's rate; absent cache prices are the range's input price,
//!   as LiteLLM reads them).
//!
//! Models are named as providers serve them: a catalog name's route prefix
//! (`gemini/`, `vertex_ai/`, `bedrock/`, `azure/`) is dropped when it names
//! a provider; regions (`us.`, `azure/eu/`) stay, matched first.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use super::{ImportError, ImportOptions, Imported, fields, pico_of_usd, row, text};
use crate::pricing::{BATCH_TIER, KindPrices, PROMPT_EDGES, STANDARD_TIER};
use crate::providers::ProviderAliases;

const SOURCE: &str = "LiteLLM price map";

/// The modes whose models are priced per token and called as attempts.
const MODES: [&str; 4] = ["chat", "completion", "responses", "embedding"];

/// Tier suffixes of LiteLLM's keys, with the tier name attempts state.
const TIER_SUFFIXES: [(&str, &str); 6] = [
    ("_batches", BATCH_TIER),
    ("_flex", "flex"),
    ("_priority", "priority"),
    ("_ultrafast", "ultrafast"),
    ("_balanced", "balanced"),
    ("_decisions", "decisions"),
];

/// Token price keys by kind, longest first so a key's kind is found before
/// a shorter one that prefixes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    CacheWrite1h,
    CacheWrite,
    Cached,
    Input,
    Reasoning,
    Output,
}

const KINDS: [(&str, Kind); 6] = [
    ("cache_creation_input_token_cost_above_1hr", Kind::CacheWrite1h),
    ("cache_creation_input_token_cost", Kind::CacheWrite),
    ("cache_read_input_token_cost", Kind::Cached),
    ("input_cost_per_token", Kind::Input),
    ("output_cost_per_reasoning_token", Kind::Reasoning),
    ("output_cost_per_token", Kind::Output),
];

/// A token price key read apart: its kind, threshold (as LiteLLM writes
/// it, `200k`) and tier.
#[derive(Debug, PartialEq, Eq)]
struct PriceKeyName<'a> {
    kind: Kind,
    threshold: Option<&'a str>,
    tier: &'static str,
}

fn parse_key(key: &str) -> Option<PriceKeyName<'_>> {
    let (prefix, kind) = KINDS.iter().find(|(prefix, _)| key.starts_with(prefix))?;
    let mut rest = &key[prefix.len()..];
    let mut tier = STANDARD_TIER;
    if let Some((suffix, name)) = TIER_SUFFIXES.iter().find(|(suffix, _)| rest.ends_with(suffix)) {
        rest = &rest[..rest.len() - suffix.len()];
        tier = name;
    }
    let threshold = if rest.is_empty() {
        None
    } else {
        let size = rest.strip_prefix("_above_")?.strip_suffix("_tokens")?;
        let digits = size.strip_suffix('k').unwrap_or(size);
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(size)?;
        Some(size)
    };
    Some(PriceKeyName { kind: *kind, threshold, tier })
}

/// `200k` as 200,000; `None` past any prompt.
fn threshold_tokens(size: &str) -> Option<i64> {
    match size.strip_suffix('k') {
        Some(thousands) => thousands.parse::<i64>().ok()?.checked_mul(1000),
        None => size.parse().ok(),
    }
}

pub fn from_litellm(
    json: &str,
    aliases: &ProviderAliases,
    options: &ImportOptions,
) -> Result<Imported, ImportError> {
    let map: BTreeMap<String, &RawValue> =
        serde_json::from_str(json).map_err(|error| ImportError::Json { source_name: SOURCE, error })?;
    let mut imported = Imported::default();
    for (name, entry) in served_rows(&map, &mut imported.notes) {
        let Some(entry) = entry else {
            imported.notes.skip("not an object");
            continue;
        };
        let mode = entry.get("mode").and_then(|m| text(m)).unwrap_or_default();
        if !MODES.contains(&mode.as_str()) {
            imported.notes.skip(format!("mode `{mode}` (not priced per token)"));
            continue;
        }
        let Some(litellm_provider) = entry.get("litellm_provider").and_then(|p| text(p)) else {
            imported.notes.skip("no litellm_provider");
            continue;
        };
        let provider_spelling = provider_spelling(&litellm_provider);
        if !aliases.knows(provider_spelling) && !options.all_providers {
            imported.notes.skip(format!("provider `{litellm_provider}` (not in the alias table)"));
            continue;
        }
        let provider = aliases.canonical(provider_spelling);
        let (model, prefixed) = served_name(&name, &litellm_provider, aliases);
        match rows_of(&entry, litellm_provider == "xai", options, &mut imported.notes) {
            Ok(rows) => imported.add(provider, model.to_string(), rows, &name, prefixed),
            Err(why) => imported.notes.skip(why),
        }
    }
    Ok(imported)
}

/// Keys of the map that are not models.
const NOT_MODELS: [&str; 2] = ["sample_spec", "fallback_generalizations"];

/// The map's rows as LiteLLM serves them (its `_expand_model_aliases`): a
/// row whose `alias_of` names another row is that row under its own name
/// (`claude-sonnet-latest`), and so is each name of a row's `aliases`
/// list. An alias that is already another row's name, or is claimed
/// twice, or that points at no row or at another alias, is left out, as
/// LiteLLM leaves it; of two claims the first in name order wins (LiteLLM
/// takes the first in file order; the map has no such pair).
fn served_rows<'a>(
    map: &'a BTreeMap<String, &'a RawValue>,
    notes: &mut super::Notes,
) -> Vec<(String, Option<BTreeMap<String, &'a RawValue>>)> {
    let rows: BTreeMap<&str, Option<BTreeMap<String, &RawValue>>> = map
        .iter()
        .filter(|(name, _)| !NOT_MODELS.contains(&name.as_str()))
        .map(|(name, entry)| (name.as_str(), fields(entry)))
        .collect();
    notes.read = rows.len();
    let pointer = |entry: &Option<BTreeMap<String, &RawValue>>| -> Option<String> {
        entry.as_ref()?.get("alias_of").and_then(|target| text(target))
    };
    let pointers: BTreeMap<&str, String> =
        rows.iter().filter_map(|(&name, entry)| Some((name, pointer(entry)?))).collect();
    let mut owners: BTreeMap<String, &str> = BTreeMap::new();
    for (&name, entry) in &rows {
        let Some(listed) = entry.as_ref().and_then(|e| e.get("aliases")) else { continue };
        if pointers.contains_key(name) {
            continue;
        }
        for alias in serde_json::from_str::<Vec<String>>(listed.get()).unwrap_or_default() {
            if (rows.contains_key(alias.as_str()) && !pointers.contains_key(alias.as_str()))
                || owners.contains_key(&alias)
            {
                notes.skip("an alias that is already another name");
                continue;
            }
            owners.insert(alias, name);
        }
    }
    for (&alias, target) in &pointers {
        match rows.get_key_value(target.as_str()) {
            Some((&owner, _)) if !pointers.contains_key(owner) && !owners.contains_key(alias) => {
                owners.insert(alias.to_string(), owner);
            }
            _ => notes.skip("an alias that points at no model row"),
        }
    }
    let without_alias_keys = |entry: &Option<BTreeMap<String, &'a RawValue>>| {
        entry.clone().map(|mut fields| {
            fields.remove("alias_of");
            fields.remove("aliases");
            fields
        })
    };
    let mut served: Vec<(String, Option<BTreeMap<String, &RawValue>>)> = rows
        .iter()
        .filter(|(name, _)| !pointers.contains_key(*name))
        .map(|(&name, entry)| (name.to_string(), without_alias_keys(entry)))
        .collect();
    served.extend(owners.into_iter().map(|(alias, owner)| {
        let entry = without_alias_keys(&rows[owner]);
        (alias, entry)
    }));
    served.sort_by(|a, b| a.0.cmp(&b.0));
    served
}

/// LiteLLM files the models of Vertex AI's partners under
/// `vertex_ai-<partner>_models`, and Fireworks' embeddings under
/// `fireworks_ai-embedding-models`: one provider each.
fn provider_spelling(litellm_provider: &str) -> &str {
    match litellm_provider.split_once('-') {
        Some((base @ ("vertex_ai" | "fireworks_ai"), _)) => base,
        _ => litellm_provider,
    }
}

/// The model as its provider serves it: the catalog name without a route
/// prefix that names a provider (or is the entry's own); and whether one
/// was dropped.
fn served_name<'a>(name: &'a str, litellm_provider: &str, aliases: &ProviderAliases) -> (&'a str, bool) {
    match name.split_once('/') {
        Some((route, model)) if !model.is_empty() && (aliases.knows(route) || route == litellm_provider) => {
            (model, true)
        }
        _ => (name, false),
    }
}

/// The rows of one entry, or why it cannot be stated.
fn rows_of(
    entry: &BTreeMap<String, &RawValue>,
    inclusive_thresholds: bool,
    options: &ImportOptions,
    notes: &mut super::Notes,
) -> Result<Vec<crate::pricing::Row>, String> {
    // (tier, above) -> prices, in key order.
    let mut rows: Vec<(&'static str, i64, KindPrices)> = Vec::new();
    let mut reasoning_by_tier: Vec<(&'static str, i64)> = Vec::new();
    let mut unstated: Vec<String> = Vec::new();
    for (key, &value) in entry {
        if value.get() == "null" {
            continue;
        }
        // What moves a price that the file has no field for: regional
        // uplifts, off-peak hours, free daily requests.
        if key.contains("multiplier") || key == "off_peak_pricing" || key == "search_free_requests" {
            unstated.push(key.clone());
            continue;
        }
        if !key.contains("cost") {
            continue;
        }
        let Some(parsed) = parse_key(key) else {
            if key != "search_context_cost_per_query" && key != "tiered_pricing" {
                unstated.push(key.clone());
            }
            continue;
        };
        let Some(pico) = pico_of_usd(value, notes) else {
            return Err(format!("`{key}` is not a price"));
        };
        let above = match parsed.threshold {
            None => 0,
            Some(size) => {
                let tokens = threshold_tokens(size).ok_or_else(|| format!("threshold `{size}`"))?;
                let above = if inclusive_thresholds { tokens - 1 } else { tokens };
                if !PROMPT_EDGES.contains(&above) {
                    return Err(format!(
                        "a long-context threshold of {above} tokens the store does not keep apart"
                    ));
                }
                above
            }
        };
        if parsed.kind == Kind::Reasoning {
            // LiteLLM reads a tier's reasoning price at every prompt size,
            // and never a threshold's own.
            if above == 0 {
                reasoning_by_tier.push((parsed.tier, pico));
            }
            continue;
        }
        let slot = match rows.iter().position(|(t, a, _)| *t == parsed.tier && *a == above) {
            Some(i) => i,
            None => {
                rows.push((parsed.tier, above, KindPrices::default()));
                rows.len() - 1
            }
        };
        let prices = &mut rows[slot].2;
        match parsed.kind {
            Kind::Input => prices.input = Some(pico),
            Kind::Cached => prices.cached_input = Some(pico),
            Kind::CacheWrite => prices.cache_write = Some(pico),
            Kind::CacheWrite1h => prices.cache_write_1h = Some(pico),
            Kind::Output => prices.output = Some(pico),
            Kind::Reasoning => {}
        }
    }
    if let Some(tiers) =
        entry.get("tiered_pricing").and_then(|t| serde_json::from_str::<Vec<&RawValue>>(t.get()).ok())
        && !tiers.is_empty()
    {
        rows = tiered_rows(&tiers, entry, notes)?;
    }
    // A row is one LiteLLM prices: it has an input price.
    rows.retain(|(_, _, prices)| prices.input.is_some());
    if !rows.iter().any(|(tier, _, _)| *tier == STANDARD_TIER) {
        return Err("no input price per token (priced per second, image or video)".into());
    }
    let web_search = entry
        .get("search_context_cost_per_query")
        .and_then(|costs| fields(costs))
        .and_then(|costs| {
            costs.get("search_context_size_medium").and_then(|medium| pico_of_usd(medium, notes))
        })
        .filter(|&pico| pico > 0);
    for key in unstated {
        *notes.unstated.entry(key).or_default() += 1;
    }
    let mut out: Vec<crate::pricing::Row> = rows
        .into_iter()
        .map(|(tier, above, mut prices)| {
            if prices.reasoning_output.is_none() {
                prices.reasoning_output =
                    reasoning_by_tier.iter().find(|(t, _)| *t == tier).map(|(_, pico)| *pico);
            }
            prices.web_search = web_search;
            row(tier, above, prices, options.as_of)
        })
        .collect();
    // The standard rows first, then each tier's, by prompt size.
    out.sort_by(|a, b| {
        (a.tier != STANDARD_TIER, &a.tier, a.above).cmp(&(b.tier != STANDARD_TIER, &b.tier, b.above))
    });
    Ok(out)
}

/// A `tiered_pricing` table (every token of a request at the rate of the
/// range its input falls in) as long-context rows of the standard tier.
fn tiered_rows(
    tiers: &[&RawValue],
    entry: &BTreeMap<String, &RawValue>,
    notes: &mut super::Notes,
) -> Result<Vec<(&'static str, i64, KindPrices)>, String> {
    let model_output = entry.get("output_cost_per_token").and_then(|v| pico_of_usd(v, notes));
    let mut rows = Vec::new();
    for tier in tiers {
        let tier = fields(tier).ok_or("a tiered_pricing range that is not an object")?;
        let start = tier
            .get("range")
            .and_then(|range| serde_json::from_str::<Vec<f64>>(range.get()).ok())
            .and_then(|range| range.first().copied())
            .ok_or("a tiered_pricing range without a start")?;
        let above = start as i64;
        if above != 0 && !PROMPT_EDGES.contains(&above) {
            return Err(format!("a tiered_pricing range from {above} tokens the store does not keep apart"));
        }
        let rate = |key: &str, notes: &mut super::Notes| tier.get(key).and_then(|v| pico_of_usd(v, notes));
        let input =
            rate("input_cost_per_token", notes).ok_or("a tiered_pricing range without an input price")?;
        let output = rate("output_cost_per_token", notes).or(model_output);
        rows.push((
            STANDARD_TIER,
            above,
            KindPrices {
                input: Some(input),
                cached_input: rate("cache_read_input_token_cost", notes).or(Some(input)),
                cache_write: rate("cache_creation_input_token_cost", notes).or(Some(input)),
                cache_write_1h: None,
                output,
                reasoning_output: rate("output_cost_per_reasoning_token", notes).or(output),
                web_search: None,
            },
        ));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_by_kind_threshold_and_tier() {
        let read = |key| parse_key(key).map(|k| (k.kind, k.threshold, k.tier));
        assert_eq!(read("input_cost_per_token"), Some((Kind::Input, None, "standard")));
        assert_eq!(read("input_cost_per_token_batches"), Some((Kind::Input, None, "batch")));
        assert_eq!(
            read("output_cost_per_token_above_200k_tokens_priority"),
            Some((Kind::Output, Some("200k"), "priority"))
        );
        assert_eq!(
            read("cache_creation_input_token_cost_above_1hr_above_272k_tokens_flex"),
            Some((Kind::CacheWrite1h, Some("272k"), "flex"))
        );
        assert_eq!(
            read("cache_creation_input_token_cost_above_1hr"),
            Some((Kind::CacheWrite1h, None, "standard"))
        );
        // A 12-hour cache and a cache-hit spelling have no field.
        assert_eq!(read("cache_creation_input_token_cost_above_12hr"), None);
        assert_eq!(read("input_cost_per_token_cache_hit"), None);
        assert_eq!(read("input_cost_per_audio_token"), None);
    }
}
