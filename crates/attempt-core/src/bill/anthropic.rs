//! Anthropic's usage report (messages) and cost report pages: `{"data":
//! [{"starting_at", "ending_at", "results": [...]}], "has_more",
//! "next_page"}`, times in RFC 3339. Cost amounts are decimal strings in
//! cents. Input is split: uncached, cache reads and cache writes (5-minute
//! and 1-hour) add up to the record's `input_tokens`. There is no request
//! count.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::money::{Unit, pico_units};
use super::{BillFact, Bucket, FactKind, Money, PageBuckets, count, currency, sum_present};
use crate::model::Tokens;

#[derive(Deserialize)]
pub(super) struct Page<R> {
    data: Vec<PageBucket<R>>,
}

#[derive(Deserialize)]
struct PageBucket<R> {
    starting_at: String,
    ending_at: String,
    results: Vec<R>,
}

#[derive(Deserialize)]
pub(super) struct UsageResult {
    uncached_input_tokens: i64,
    cache_read_input_tokens: Option<i64>,
    cache_creation: Option<CacheCreation>,
    output_tokens: i64,
    api_key_id: Option<String>,
    workspace_id: Option<String>,
    model: Option<String>,
    service_tier: Option<String>,
    server_tool_use: Option<ServerToolUse>,
    context_window: Option<String>,
}

#[derive(Deserialize)]
struct ServerToolUse {
    web_search_requests: Option<i64>,
}

#[derive(Deserialize)]
struct CacheCreation {
    ephemeral_5m_input_tokens: Option<i64>,
    ephemeral_1h_input_tokens: Option<i64>,
}

#[derive(Deserialize)]
pub(super) struct CostResult {
    amount: String,
    currency: String,
    workspace_id: Option<String>,
    description: Option<String>,
    cost_type: Option<String>,
    model: Option<String>,
    service_tier: Option<String>,
    token_type: Option<String>,
    context_window: Option<String>,
}

pub(super) fn usage_page(page: Page<UsageResult>) -> Result<PageBuckets, String> {
    buckets(page, |bucket, r| {
        let uncached = count(Some(r.uncached_input_tokens), "uncached_input_tokens")?;
        let read = count(r.cache_read_input_tokens, "cache_read_input_tokens")?;
        let (five, hour) = match &r.cache_creation {
            Some(c) => (
                count(c.ephemeral_5m_input_tokens, "cache_creation.ephemeral_5m_input_tokens")?,
                count(c.ephemeral_1h_input_tokens, "cache_creation.ephemeral_1h_input_tokens")?,
            ),
            None => (None, None),
        };
        let written = sum_present(&[five, hour], "cache_creation")?;
        Ok(BillFact {
            bucket,
            kind: FactKind::Usage,
            billing_account: r.workspace_id,
            api_key_id: r.api_key_id,
            model: r.model,
            service_tier: r.service_tier,
            detail: None,
            requests: None,
            tokens: Tokens {
                input: sum_present(&[uncached, read, written], "input tokens")?,
                cached_input: read,
                cache_write_input: written,
                output: count(Some(r.output_tokens), "output_tokens")?,
                reasoning_output: None,
                cache_write_1h_input: hour,
            },
            web_search_requests: count(
                r.server_tool_use.and_then(|s| s.web_search_requests),
                "server_tool_use.web_search_requests",
            )?,
            prompt_over: context_window_start(r.context_window.as_deref())?,
            amount: None,
        })
    })
}

pub(super) fn cost_page(page: Page<CostResult>) -> Result<PageBuckets, String> {
    buckets(page, |bucket, r| {
        let pico = pico_units(&r.amount, Unit::Cents).map_err(|e| format!("`amount`: {e}"))?;
        // Without `group_by=description` there is no cost type: the one
        // amount is taken as tokens of no model.
        let kind = match r.cost_type.as_deref() {
            None | Some("tokens") => FactKind::TokenCost,
            Some(_) => FactKind::OtherCost,
        };
        let detail = match (&r.cost_type, &r.token_type) {
            (Some(cost), Some(token)) => Some(format!("{cost}: {token}")),
            (Some(cost), None) => Some(r.description.clone().unwrap_or_else(|| cost.clone())),
            (None, _) => r.description.clone(),
        };
        Ok(BillFact {
            bucket,
            model: if kind == FactKind::TokenCost { r.model } else { None },
            kind,
            billing_account: r.workspace_id,
            api_key_id: None,
            service_tier: r.service_tier,
            detail,
            requests: None,
            tokens: Tokens::default(),
            web_search_requests: None,
            prompt_over: context_window_start(r.context_window.as_deref())?,
            amount: Some(Money { currency: currency(&r.currency)?, pico }),
        })
    })
}

/// Where a `context_window` (`0-200k`, `200k-1M`) starts, in tokens: the
/// prompt size its line's prompts exceed. `None` when not grouped by it.
fn context_window_start(window: Option<&str>) -> Result<Option<i64>, String> {
    let Some(window) = window else { return Ok(None) };
    let start = window.split_once('-').map_or(window, |(start, _)| start).trim();
    let (digits, scale) = match start.strip_suffix(['k', 'K']) {
        Some(digits) => (digits, 1_000),
        None => match start.strip_suffix('M') {
            Some(digits) => (digits, 1_000_000),
            None => (start, 1),
        },
    };
    digits
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .map(Some)
        .ok_or_else(|| format!("`context_window`: `{window}` is not a range of tokens (`0-200k`, `200k-1M`)"))
}

fn buckets<R>(
    page: Page<R>,
    fact: impl Fn(Bucket, R) -> Result<BillFact, String>,
) -> Result<PageBuckets, String> {
    let mut out = Vec::with_capacity(page.data.len());
    for (b, entry) in page.data.into_iter().enumerate() {
        let at = |what: String| format!("data[{b}]: {what}");
        let bucket = Bucket {
            start: instant(&entry.starting_at, "starting_at").map_err(at)?,
            end: instant(&entry.ending_at, "ending_at").map_err(at)?,
        };
        let mut facts = Vec::with_capacity(entry.results.len());
        for (r, result) in entry.results.into_iter().enumerate() {
            facts.push(fact(bucket, result).map_err(|e| at(format!("results[{r}]: {e}")))?);
        }
        out.push((bucket, facts));
    }
    Ok(out)
}

fn instant(text: &str, field: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("`{field}`: `{text}` is not an RFC 3339 time ({e})"))
}
