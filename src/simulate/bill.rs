//! The provider's side of a simulated night: the usage and cost pages
//! OpenAI's and Anthropic's admin APIs would answer for what they served,
//! as `demo` imports them (docs/reconcile.md). The simulated providers bill
//! the billable attempts' tokens (never a failure without output) at the
//! price table's prices for their day, tier (batch, flex) and prompt size
//! (Anthropic's `context_window`), one-hour cache writes apart, but for two
//! differences a reconciliation must find: one model's output costs 10 %
//! less than the table says (a price change), and a project the ledger
//! never saw (`proj_shadow`) spent on OpenAI too.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::store::bill::ServedRow;
use attempt_core::bill::BillSource;
use attempt_core::bill::money::decimal_text;
use attempt_core::pricing::{PriceKey, PriceTable};

/// The model whose output the simulated provider bills 10 % lower.
pub const CHEAPER_OUTPUT: &str = "claude-haiku-4-5";

/// The unseen project's day on OpenAI: gpt-4o-mini tokens and requests.
const SHADOW: (i128, i128, i64) = (4_000_000, 600_000, 2_000);

/// Writes each source's pages (one page per line) to `dir`; returns them.
pub fn write_exports(
    served: &[ServedRow],
    prices: &PriceTable,
    dir: &Path,
) -> std::io::Result<Vec<(BillSource, PathBuf)>> {
    let mut pages: Vec<(BillSource, Vec<Value>)> = vec![
        (BillSource::OpenaiUsage, Vec::new()),
        (BillSource::OpenaiCosts, Vec::new()),
        (BillSource::AnthropicUsage, Vec::new()),
        (BillSource::AnthropicCost, Vec::new()),
    ];
    let mut openai_days = std::collections::BTreeSet::new();
    for row in served {
        let key = PriceKey {
            provider: &row.served_provider,
            model: &row.served_model,
            day: row.day.date_naive(),
            tier: &row.tier,
            prompt_over: row.prompt_over,
            billing_account: None,
        };
        let Ok(resolved) = prices.resolve(&key) else { continue };
        let price = resolved.prices;
        let mut output_price = per_token(price.output);
        if row.served_model == CHEAPER_OUTPUT {
            output_price = output_price * 9 / 10;
        }
        let lines = [
            (
                "input",
                row.input_tokens - row.cached_input_tokens - row.cache_write_input_tokens,
                per_token(price.input),
            ),
            ("cached input", row.cached_input_tokens, per_token(price.cached_input)),
            (
                "cache write",
                row.cache_write_input_tokens - row.cache_write_1h_input_tokens,
                per_token(price.cache_write),
            ),
            ("1h cache write", row.cache_write_1h_input_tokens, per_token(price.cache_write_1h)),
            ("output", row.output_tokens, output_price),
        ];
        let lines = lines.map(|(kind, tokens, price)| (kind, tokens * price));
        match row.served_provider.as_str() {
            "openai" => {
                openai_days.insert(row.day);
                push(&mut pages[0].1, openai_bucket(row.day, vec![openai_usage(row, None)]));
                let costs = lines
                    .iter()
                    .filter(|(_, pusd)| *pusd != 0)
                    .map(|(kind, pusd)| openai_cost(&format!("{}, {kind}", row.served_model), *pusd, None));
                push(&mut pages[1].1, openai_bucket(row.day, costs.collect()));
            }
            "anthropic" => {
                push(&mut pages[2].1, anthropic_bucket(row.day, vec![anthropic_usage(row)]));
                let token_types = [
                    "uncached_input_tokens",
                    "cache_read_input_tokens",
                    "cache_creation.ephemeral_5m_input_tokens",
                    "cache_creation.ephemeral_1h_input_tokens",
                    "output_tokens",
                ];
                let costs = lines.iter().zip(token_types).filter(|((_, pusd), _)| *pusd != 0).map(
                    |((_, pusd), token_type)| {
                        json!({
                                            "currency": "USD",
                                            // Cents, as a decimal string.
                                            "amount": decimal_text(pusd * 100),
                                            "workspace_id": null,
                                            "description": format!("{} {token_type}", row.served_model),
                                            "cost_type": "tokens",
                                            "model": row.served_model,
                                            // Anthropic names its tiers as the price table does: standard, batch.
                        "service_tier": row.tier,
                                            "token_type": token_type,
                                            "context_window": context_window(row.prompt_over),
                                        })
                    },
                );
                push(&mut pages[3].1, anthropic_bucket(row.day, costs.collect()));
            }
            _ => {}
        }
    }
    let shadow_price = |day: &DateTime<Utc>| {
        let key = PriceKey {
            provider: "openai",
            model: "gpt-4o-mini",
            day: day.date_naive(),
            tier: attempt_core::pricing::STANDARD_TIER,
            prompt_over: 0,
            billing_account: None,
        };
        prices.resolve(&key).ok().map(|r| r.prices)
    };
    if let Some((day, price)) = openai_days.first().and_then(|day| Some((day, shadow_price(day)?))) {
        let (input, output, requests) = SHADOW;
        let shadow = ServedRow {
            served_provider: "openai".into(),
            served_model: "gpt-4o-mini".into(),
            day: *day,
            tier: attempt_core::pricing::STANDARD_TIER.into(),
            prompt_over: 0,
            requests,
            input_tokens: input,
            cached_input_tokens: 0,
            cache_write_input_tokens: 0,
            cache_write_1h_input_tokens: 0,
            output_tokens: output,
        };
        push(&mut pages[0].1, openai_bucket(*day, vec![openai_usage(&shadow, Some("proj_shadow"))]));
        let cost = input * per_token(price.input) + output * per_token(price.output);
        push(
            &mut pages[1].1,
            openai_bucket(*day, vec![openai_cost("gpt-4o-mini, input", cost, Some("proj_shadow"))]),
        );
    }
    let mut written = Vec::new();
    for (source, buckets) in pages.into_iter().filter(|(_, b)| !b.is_empty()) {
        let path = dir.join(format!("{}.jsonl", source.name()));
        let lines: Vec<String> = buckets.into_iter().map(|b| page(source, b).to_string()).collect();
        std::fs::write(&path, lines.join("\n") + "\n")?;
        written.push((source, path));
    }
    Ok(written)
}

/// Adds `bucket` to the list, merging results into an earlier bucket of
/// the same start (one page per bucket, as the APIs page).
fn push(buckets: &mut Vec<Value>, bucket: Value) {
    let start = |b: &Value| b.get("start_time").or_else(|| b.get("starting_at")).cloned();
    if let Some(earlier) = buckets.iter_mut().find(|b| start(b) == start(&bucket)) {
        let more = bucket["results"].as_array().cloned().unwrap_or_default();
        if let Some(results) = earlier["results"].as_array_mut() {
            results.extend(more);
        }
    } else {
        buckets.push(bucket);
    }
}

fn page(source: BillSource, bucket: Value) -> Value {
    match source {
        BillSource::OpenaiUsage | BillSource::OpenaiCosts => {
            json!({"object": "page", "data": [bucket], "has_more": false, "next_page": null})
        }
        _ => json!({"data": [bucket], "has_more": false, "next_page": null}),
    }
}

fn openai_bucket(day: DateTime<Utc>, results: Vec<Value>) -> Value {
    let start = day.timestamp();
    json!({"object": "bucket", "start_time": start, "end_time": start + 86_400, "results": results})
}

fn anthropic_bucket(day: DateTime<Utc>, results: Vec<Value>) -> Value {
    let end = day + chrono::Duration::days(1);
    json!({"starting_at": day.to_rfc3339(), "ending_at": end.to_rfc3339(), "results": results})
}

fn openai_usage(row: &ServedRow, project: Option<&str>) -> Value {
    json!({
        "object": "organization.usage.completions.result",
        "input_tokens": row.input_tokens as i64,
        "input_cached_tokens": row.cached_input_tokens as i64,
        "output_tokens": row.output_tokens as i64,
        "num_model_requests": row.requests,
        "project_id": project,
        "api_key_id": null,
        "model": row.served_model,
        "batch": row.tier == attempt_core::pricing::BATCH_TIER,
        // OpenAI's name for the standard tier.
        "service_tier": match row.tier.as_str() {
            attempt_core::pricing::STANDARD_TIER | attempt_core::pricing::BATCH_TIER => "default",
            tier => tier,
        },
    })
}

fn openai_cost(line_item: &str, pusd: i128, project: Option<&str>) -> Value {
    // Through a binary float, as OpenAI writes it: exact while the amount
    // has at most 15 significant digits (below $1,000 to the pico-dollar),
    // which a simulated night's lines are.
    let value: Value = serde_json::from_str(&decimal_text(pusd)).unwrap_or(Value::Null);
    json!({
        "object": "organization.costs.result",
        "amount": {"value": value, "currency": "usd"},
        "line_item": line_item,
        "project_id": project,
    })
}

fn anthropic_usage(row: &ServedRow) -> Value {
    json!({
        "uncached_input_tokens": (row.input_tokens - row.cached_input_tokens - row.cache_write_input_tokens) as i64,
        "cache_read_input_tokens": row.cached_input_tokens as i64,
        "cache_creation": {
            "ephemeral_5m_input_tokens": (row.cache_write_input_tokens - row.cache_write_1h_input_tokens) as i64,
            "ephemeral_1h_input_tokens": row.cache_write_1h_input_tokens as i64,
        },
        "output_tokens": row.output_tokens as i64,
        "api_key_id": null,
        "workspace_id": null,
        "model": row.served_model,
        // Anthropic names its tiers as the price table does: standard, batch.
        "service_tier": row.tier,
        "context_window": context_window(row.prompt_over),
    })
}

/// A price the simulated provider charges, per token; a kind the table
/// does not price is billed at 0, as a provider that does not sell it.
fn per_token(price: Option<i64>) -> i128 {
    i128::from(price.unwrap_or(0))
}

/// Anthropic's `context_window` of prompts past `prompt_over` tokens
/// (`0-200k` for none): the band a long-context price starts at.
fn context_window(prompt_over: i64) -> String {
    if prompt_over == 0 { "0-200k".into() } else { format!("{}k-1M", prompt_over / 1000) }
}
