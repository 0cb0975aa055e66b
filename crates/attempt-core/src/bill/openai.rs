//! OpenAI's organization usage (completions) and costs pages:
//! `{"object": "page", "data": [{"object": "bucket", "start_time",
//! "end_time", "results": [...]}], "has_more", "next_page"}`, times in Unix
//! seconds. Usage's `input_tokens` counts all input, cached included.

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::money::{Unit, pico_units};
use super::{BillFact, Bucket, FactKind, Money, PageBuckets, count, currency};
use crate::model::Tokens;

const USAGE_RESULT: &str = "organization.usage.completions.result";
const COSTS_RESULT: &str = "organization.costs.result";

#[derive(Deserialize)]
pub(super) struct Page<R> {
    object: String,
    data: Vec<PageBucket<R>>,
}

#[derive(Deserialize)]
struct PageBucket<R> {
    object: String,
    start_time: i64,
    end_time: i64,
    results: Vec<R>,
}

#[derive(Deserialize)]
pub(super) struct UsageResult {
    object: String,
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    input_cached_tokens: Option<i64>,
    num_model_requests: Option<i64>,
    project_id: Option<String>,
    api_key_id: Option<String>,
    model: Option<String>,
    batch: Option<bool>,
    service_tier: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct CostsResult {
    object: String,
    amount: Option<Amount>,
    line_item: Option<String>,
    project_id: Option<String>,
}

#[derive(Deserialize)]
struct Amount {
    value: Box<RawValue>,
    currency: String,
}

pub(super) fn usage_page(page: Page<UsageResult>) -> Result<PageBuckets, String> {
    buckets(
        page,
        USAGE_RESULT,
        |r| &r.object,
        |bucket, r| {
            let tokens = Tokens {
                input: count(r.input_tokens, "input_tokens")?,
                output: count(r.output_tokens, "output_tokens")?,
                cached_input: count(r.input_cached_tokens, "input_cached_tokens")?,
                cache_write_input: None,
                reasoning_output: None,
                cache_write_1h_input: None,
            };
            // The Batch API's requests are billed at its price, whatever
            // tier the line also names.
            let service_tier = match r.batch {
                Some(true) => Some("batch".to_string()),
                _ => r.service_tier,
            };
            Ok(BillFact {
                bucket,
                kind: FactKind::Usage,
                billing_account: r.project_id,
                api_key_id: r.api_key_id,
                model: r.model,
                service_tier,
                detail: None,
                requests: count(r.num_model_requests, "num_model_requests")?,
                tokens,
                web_search_requests: None,
                prompt_over: None,
                amount: None,
            })
        },
    )
}

pub(super) fn costs_page(page: Page<CostsResult>) -> Result<PageBuckets, String> {
    buckets(
        page,
        COSTS_RESULT,
        |r| &r.object,
        |bucket, r| {
            let amount = r.amount.ok_or("no `amount`")?;
            let pico =
                pico_units(amount.value.get(), Unit::Major).map_err(|e| format!("`amount.value`: {e}"))?;
            let (kind, model) = line_item(r.line_item.as_deref());
            Ok(BillFact {
                bucket,
                kind,
                billing_account: r.project_id,
                api_key_id: None,
                model,
                service_tier: None,
                detail: r.line_item,
                requests: None,
                tokens: Tokens::default(),
                web_search_requests: None,
                prompt_over: None,
                amount: Some(Money { currency: currency(&amount.currency)?, pico }),
            })
        },
    )
}

/// A costs line item is `<model>, <kind>` for tokens (`gpt-4o-2024-08-06,
/// input`, `..., cached input`, `..., output`); anything else is another
/// cost. Without line items the bucket's one amount is taken as tokens of
/// no model.
fn line_item(item: Option<&str>) -> (FactKind, Option<String>) {
    let Some(item) = item else { return (FactKind::TokenCost, None) };
    match item.rsplit_once(", ") {
        Some((model, kind)) if matches!(kind.trim(), "input" | "output" | "cached input") => {
            (FactKind::TokenCost, Some(model.trim().to_string()))
        }
        _ => (FactKind::OtherCost, None),
    }
}

fn buckets<R>(
    page: Page<R>,
    result_object: &str,
    object_of: impl Fn(&R) -> &String,
    fact: impl Fn(Bucket, R) -> Result<BillFact, String>,
) -> Result<PageBuckets, String> {
    if page.object != "page" {
        return Err(format!("`object` is `{}`, not `page`", page.object));
    }
    let mut out = Vec::with_capacity(page.data.len());
    for (b, entry) in page.data.into_iter().enumerate() {
        let at = |what: String| format!("data[{b}]: {what}");
        if entry.object != "bucket" {
            return Err(at(format!("`object` is `{}`, not `bucket`", entry.object)));
        }
        let bucket = Bucket {
            start: instant(entry.start_time).map_err(at)?,
            end: instant(entry.end_time).map_err(at)?,
        };
        let mut facts = Vec::with_capacity(entry.results.len());
        for (r, result) in entry.results.into_iter().enumerate() {
            let object = object_of(&result);
            if object != result_object {
                return Err(at(format!(
                    "results[{r}] is `{object}`, not `{result_object}`: a page of another export"
                )));
            }
            facts.push(fact(bucket, result).map_err(|e| at(format!("results[{r}]: {e}")))?);
        }
        out.push((bucket, facts));
    }
    Ok(out)
}

fn instant(seconds: i64) -> Result<DateTime<Utc>, String> {
    DateTime::from_timestamp(seconds, 0).ok_or_else(|| format!("{seconds} is not a Unix time in seconds"))
}
